#!/usr/bin/env bash
# One device call of the issue-13 campaign (session 27): on an H200 the loop-engine steps given as
# arguments (camp.sh, judged against baselines/nvidia-h200x1.json); on any other GPU (a lease may
# come as an H100, a profile with no committed file) the main job of the loop engine as a new user
# would run it — a check pass with no baseline for the profile (must end green with "no baseline
# for profile" lines), then an update pass that starts that profile's file.
set -u
export PYTHONUNBUFFERED=1
GPU=$(nvidia-smi --query-gpu=name,uuid --format=csv,noheader); echo "GPU $GPU"
echo "BOOT $(cat /proc/sys/kernel/random/boot_id)"
if [[ "$GPU" == *H200* ]]; then
  CAMP_LIMIT_S=${CAMP_LIMIT_S:-560} CAMP_STEP_S=${CAMP_STEP_S:-190} CAMP_GPU_ARGS="--eagle3-head none" \
    CAMP_PYTEST_ARGS="--engine transformers-loop" bash docs/data/h200-campaign/camp.sh "$@"
else
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
  name=${NEWGPU_NAME:-g1}
  python3 scripts/gpu_run.py --out "/tmp/$name" --work "/tmp/$name/work" --passes "${NEWGPU_PASSES:-check,update}" \
    --eagle3-head none --budget-s 540 -- --engine transformers-loop > "/tmp/$name.log" 2>&1
  echo "rc $?"
  grep -E "^VERDICT|^specperf:|no baseline|engine-wide|^HOST|passed|failed" "/tmp/$name.log" | cut -c1-400
  tar czf "$OUT/$name.tar.gz" -C /tmp "$name.log" "$name"
fi
