#!/usr/bin/env bash
# Session 28: the H100 check runs (uh unchanged, lh throttled) judged by the product's own verdict
# against the H100 file given as $1 (default: the committed baselines/nvidia-h100-80gb-hbm3x1.json),
# twice: as shipped (the file's starts come from one UTC day, so speed is report-only), and with
# each summary's [workload] min_baseline_days set to 1 — an exploration of what the armed gate
# would say, not the product's verdict.
#   bash docs/data/h200-campaign/s28/rejudge.sh > docs/data/h200-campaign/s28/rejudge.txt
set -u
ROOT=$(cd "$(dirname "$0")/../../../.." && pwd)
BASE=${1:-$ROOT/baselines/nvidia-h100-80gb-hbm3x1.json}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
for tgz in "$ROOT"/docs/data/h200-campaign/s28/{uh,lh}*.tar.gz; do
  name=$(basename "$tgz" .tar.gz)
  mkdir -p "$TMP/$name" && tar xzf "$tgz" -C "$TMP/$name"
  res=$(find "$TMP/$name" -type d -name results-check | head -1)
  [ -n "$res" ] || { echo "== $name: no results-check"; continue; }
  for how in shipped lifted; do
    if [ "$how" = lifted ]; then
      "$ROOT/.venv/bin/python" - "$res" <<'PY'
import json, pathlib, sys
for f in pathlib.Path(sys.argv[1]).rglob("summary.json"):
    s = json.loads(f.read_text())
    s["workload"]["min_baseline_days"] = 1
    f.write_text(json.dumps(s))
PY
    fi
    echo "== $name ($how)"
    "$ROOT/.venv/bin/specperf" verdict "$res" --baseline "$BASE" --strict-baselines --all 2>&1 \
      | grep -E "^(FAIL|specperf:)|output_throughput_tok_s  |not evaluated: baseline starts" | cut -c1-300 | sed 's/^/   /'
    echo "   rc ${PIPESTATUS[0]}"
  done
done
