#!/usr/bin/env bash
# One device call of the issue-13 campaign (session 27 on). A call asked for an H200 may come as an
# H100 (another profile, baselines/nvidia-h100-80gb-hbm3x1.json), and which one comes is known
# only once it runs, so the call carries a step list per GPU kind and picks by nvidia-smi:
#   H200_STEPS  camp.sh steps on an H200 (loop item, judged against baselines/nvidia-h200x1.json)
#   OTHER_STEPS camp.sh steps on any other GPU (e.g. "h4:0::::update" to append a pass from this
#               host to its profile's file, "uh1:0" an unchanged check, "lh1:0:0.17:--decode-loop")
# Empty OTHER_STEPS (session 27's first call): the main job of the loop engine as a new user on a
# new GPU kind runs it, through scripts/gpu_run.py: NEWGPU_PASSES (default check,update) — a check
# with no file for the profile (must end green with "no baseline for profile" lines), then an
# update that starts the file. Update passes' files come back as $OUT/<step>.baseline.json.
# The plan for the next lease (sessions 29-30; session 30's lease came as an H100 again, a fourth
# host, still on 2026-12-05: it ran uh8 and appended h10). On an H200: two 0.17-share throttles
# (the 8-12 % window) and a 0.25 one. On an H100 on a later UTC day than 2026-12-05: h11 appends
# that day's pass, which arms the file's speed gate for the call's later steps; uh9 is an
# unchanged check; lh20 and lh23 are throttles (a share's slowdown differs by host: 0.17 gave
# -10 % on one H100 host, -5.5 % on another). Copy h11.baseline.json into baselines/ and commit it.
#   H200_STEPS='lt17a:0:0.17:--decode-loop lt17b:0:0.17:--decode-loop lq2:0:0.25:--decode-loop' \
#   OTHER_STEPS='h11:0::::update uh9:0 lh20:0:0.20:--decode-loop lh23:0:0.23:--decode-loop' \
#   bash docs/data/h200-campaign/lease.sh
set -u
export PYTHONUNBUFFERED=1
GPU=$(nvidia-smi --query-gpu=name,uuid --format=csv,noheader); echo "GPU $GPU"
echo "BOOT $(cat /proc/sys/kernel/random/boot_id)"
if [[ "$GPU" == *H200* ]]; then steps=${H200_STEPS:-}; else steps=${OTHER_STEPS:-}; fi
if [ -n "$steps" ]; then
  # shellcheck disable=SC2086  # the step list is word-split on purpose
  CAMP_LIMIT_S=${CAMP_LIMIT_S:-560} CAMP_STEP_S=${CAMP_STEP_S:-190} CAMP_GPU_ARGS="--eagle3-head none" \
    CAMP_PYTEST_ARGS="--engine transformers-loop" bash docs/data/h200-campaign/camp.sh $steps
else
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
  name=${NEWGPU_NAME:-g1}
  python3 scripts/gpu_run.py --out "/tmp/$name" --work "/tmp/$name/work" --passes "${NEWGPU_PASSES:-check,update}" \
    --eagle3-head none --budget-s 540 -- --engine transformers-loop > "/tmp/$name.log" 2>&1
  echo "rc $?"
  grep -E "^VERDICT|^specperf:|no baseline|engine-wide|^HOST|passed|failed" "/tmp/$name.log" | cut -c1-400
  tar czf "$OUT/$name.tar.gz" -C /tmp "$name.log" "$name"
  cp baselines/nvidia-*.json "$OUT/" 2>/dev/null
fi
