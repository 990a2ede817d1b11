#!/usr/bin/env bash
# Issue 13 GPU campaign (session 8 on): check passes against baselines/nvidia-h200x1.json,
# unchanged, throttled or with drafts rejected (tests/tools/reject_drafts); repeat 0 = the suite's
# own [suite] repeat. Steps are name:repeat[:share[:match[:reject q]]]. Each step's logs and
# results are tarred into $OUT as soon as the step ends (a call cut at its limit keeps what finished).
# CAMP_PASS=update makes each step an update pass instead (it appends its starts to the carried
# baselines/ and copies the file to $OUT/<name>.baseline.json; judge it afterwards against the file
# as it was: `specperf verdict <results> --baseline <old file>`). A step's sixth field overrides
# it for that step (session 16), so one call can append a run and then judge throttled ones:
#   camp.sh d4:0::::update "lt4:0:0.16:--decode-loop" host_probe.py runs before and
# after each step (HOSTPROBE lines: CPU model, Python loop, CUDA launch latency, copy bandwidth).
# A step starts only when CAMP_STEP_S (default 240) seconds are left of CAMP_LIMIT_S (default
# 590, the call's timeout less a margin): session 17's call was cut mid-step by the device's
# limit, and the cut step's pytest ran on beside the next call's step on the same warm machine.
# Each step also starts from an empty /tmp/camp/<name> (that cut step's results had merged in).
set -u
CAMP_T0=$(date +%s)
# on a warm machine a cut call's processes may still run: stop them before measuring anything
# (patterns as camp.sh and the engine launch them, so the calling command line never matches)
for pat in "throttle_engine.py --share" "scripts/gpu_run.py --out /tmp/camp/" "-m specperf.engines.hf_server"; do
  pgrep -f -- "$pat" > /dev/null && echo "== leftover '$pat' of an earlier call: stopped" && pkill -9 -f -- "$pat"
done
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site || exit 1
mkdir -p /tmp/camp
TP=
throttle() {  # name share [match]; the report says the share each engine really lost (share_held)
  local args=(--share "$2" --mark specperf.engines.hf_server --duration 900 --report "/tmp/camp/$1.throttle.json")
  [ -n "${3:-}" ] && args+=("--match=$3")  # "=": a match may start with "--"
  python3 benchmarks/throttle_engine.py "${args[@]}" &
  TP=$!
}
unthrottle() { [ -n "$TP" ] && kill "$TP" && wait "$TP"; TP=; }
step() {  # name repeat [throttle share] [match] [reject q] [pass]
  local name=$1 rep=$2 share=${3:-} match=${4:-} reject=${5:-} pass=${6:-${CAMP_PASS:-check}}
  local left=$(( ${CAMP_LIMIT_S:-590} - ($(date +%s) - CAMP_T0) ))
  if [ "$left" -lt "${CAMP_STEP_S:-240}" ]; then
    echo "== $name skipped: ${left} s left of the call, a step needs ${CAMP_STEP_S:-240} (CAMP_STEP_S)"
    return
  fi
  rm -rf "/tmp/camp/$name" "/tmp/camp/$name".*
  echo "== $name $pass repeat=$rep share=${share:-0} match=${match:--} reject=${reject:-0} start $(date -u +%FT%T)"
  [ -n "$share" ] && throttle "$name" "$share" "$match"
  local extra=() envs=()
  [ "$pass" = check ] && extra+=(--strict-baselines)
  [ "$rep" -gt 0 ] && extra+=(--repeat "$rep" --restart-between-repeats)
  # each reject step draws its own rejections (seed from the step's name), so runs are independent
  [ -n "$reject" ] && envs=(PYTHONPATH="$PWD/tests/tools/reject_drafts:${PYTHONPATH:-}" SPECPERF_TEST_REJECT_DRAFTS="$reject"
    SPECPERF_TEST_REJECT_SEED="$(printf %s "$name" | cksum | cut -d' ' -f1)")
  python3 docs/data/h200-campaign/host_probe.py > /tmp/camp/$name.probe 2>&1
  # CAMP_GPU_ARGS / CAMP_PYTEST_ARGS (word-split): e.g. "--eagle3-head none" and "--engine
  # transformers-loop" for steps of the decode-loop item alone (session 15)
  env "${envs[@]}" python3 scripts/gpu_run.py --out /tmp/camp/$name --work /tmp/camp/$name/work --passes "$pass" ${CAMP_GPU_ARGS:-} -- "${extra[@]}" ${CAMP_PYTEST_ARGS:-} > /tmp/camp/$name.log 2>&1
  local rc=$?
  unthrottle
  python3 docs/data/h200-campaign/host_probe.py >> /tmp/camp/$name.probe 2>&1
  sed 's/^/   /' /tmp/camp/$name.probe | cut -c1-400
  # the file the update wrote (this GPU's profile: nvidia-h200x1, nvidia-h100-80gb-hbm3x1, ...)
  [ "$pass" = update ] && cp "$(ls -t baselines/nvidia-*.json | head -1)" "$OUT/$name.baseline.json"
  echo "   rc $rc end $(date -u +%FT%T)"
  grep -E "^VERDICT|^specperf:|engine-wide|^HOST|fitted in|cached in|drafts replaced" /tmp/camp/$name.log | cut -c1-420 | sed 's/^/   /'
  [ -f "/tmp/camp/$name.throttle.json" ] && python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print('   throttle', r['priority'], {g: (v['share_held'], v['longest_run_s']) for g, v in r['groups'].items()})" "/tmp/camp/$name.throttle.json"
  tar czf "$OUT/$name.tar.gz" -C /tmp/camp "$name.log" "$name.probe" "$name" $( [ -f "/tmp/camp/$name.throttle.json" ] && echo "$name.throttle.json") 2>/dev/null
}
for s in "$@"; do
  IFS=: read -r name rep share match reject pass <<< "$s"
  step "$name" "$rep" "$share" "$match" "$reject" "$pass"
done
