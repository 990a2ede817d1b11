#!/usr/bin/env bash
# TEST-ONLY (issue 13, session 14): on the 2-core VM vLLM's engine core and its worker share
# CPU 1 under specperf's split, and the engine core busy-polls its shared-memory queue with
# sched_yield while the worker computes (docs/measurement.md, "The slow mode"). Does moving the
# engine core to CPU 0 (beside the API server and client; the worker keeps CPU 1 alone) make
# cpu-tiny's native MT-Bench c=1 faster or its starts spread less? Variants alternate, one engine
# start each: "split" = as the suite runs; "ec0" = a watcher re-pins every thread of the
# VLLM::EngineCore process to CPU 0 every 0.2 s while the start runs.
#   bash docs/data/host-speed/engine-core/ab.sh OUT ROUNDS
set -u
out=$1 rounds=$2
cd "$(dirname "$0")/../../../.." || exit 1
mkdir -p "$out"
watch_ec0() {
  while :; do
    for p in $(pgrep -f '^VLLM::EngineCore'); do
      for t in /proc/"$p"/task/*; do taskset -pc 0 "${t##*/}" >/dev/null 2>&1; done
    done
    sleep 0.2
  done
}
for i in $(seq 1 "$rounds"); do
  for v in split ec0; do
    r=$out/r$i-$v
    W=
    if [ "$v" = ec0 ]; then watch_ec0 & W=$!; fi
    timeout 300 .venv/bin/python -m pytest -m perf tests/perf/test_matrix.py -q -p no:cacheprovider \
      --results-dir "$r" --method native --dataset mt-bench --concurrency 1 > "$r.log" 2>&1
    [ -n "$W" ] && kill "$W" && wait "$W" 2>/dev/null
    .venv/bin/python -c "import json,glob,sys; s=json.load(open(glob.glob(sys.argv[1]+'/*/summary.json')[0])); print(sys.argv[2], round(s['output_throughput_tok_s'],1), flush=True)" "$r" "$v" || echo "$v none"
  done
done
