#!/usr/bin/env bash
# The H100 check runs (uh* unchanged, lh* throttled) of the session folders given (s28, s29, ...)
# judged by the product's own verdict against the H100 file given in BASE (default: the committed
# baselines/nvidia-h100-80gb-hbm3x1.json), twice: as shipped (while the file's starts come from one
# UTC day its speed gate is report-only), and with each summary's [workload] min_baseline_days set
# to 1 — an exploration of what the armed gate would say, not the product's verdict.
#   bash docs/data/h200-campaign/rejudge_h100.sh s28 s29 > docs/data/h200-campaign/s29/rejudge.txt
set -u
shopt -s nullglob  # a session folder may hold no throttled (lh) runs
CAMP=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$CAMP/../../.." && pwd)
BASE=${BASE:-$ROOT/baselines/nvidia-h100-80gb-hbm3x1.json}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
for session in "$@"; do
  for tgz in "$CAMP/$session"/{uh,lh}*.tar.gz; do
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
      echo "== $session/$name ($how)"
      "$ROOT/.venv/bin/specperf" verdict "$res" --baseline "$BASE" --strict-baselines --all 2>&1 \
        | grep -E "^(FAIL|specperf:)|output_throughput_tok_s  |not evaluated: baseline starts" | cut -c1-300 | sed 's/^/   /'
      echo "   rc ${PIPESTATUS[0]}"
    done
  done
done
