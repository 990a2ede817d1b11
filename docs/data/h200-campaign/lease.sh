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
# The plan for the next lease (session 34): a throttled run counts for issue 13's (b) by its
# slowdown against an unchanged run of the same GPU (judge_loop.py), so each host's first step is
# unchanged. On an H200: uc6, then 0.17-share throttles (0.16 cost 5-12 % by host, 0.18 12 %):
# two more runs in the 8-12 % window give the H200 ten of its own (8 of 8 so far). On an H100
# (armed since session 32, h11): uh*, then 0.25 shares; one 0.25 share cost 10.6-10.9 % on
# session 33's host (6 of 6 red), 11.5 % and 17 % on earlier hosts. One more in-window run gives
# the H100 ten of its own in both (b) rows (9 of 9 so far, 3 of them replays).
#   H200_STEPS='uc6:0 lt17a:0:0.17:--decode-loop lt17b:0:0.17:--decode-loop' \
#   OTHER_STEPS='uh12:0 lh25k:0:0.25:--decode-loop lh25l:0:0.25:--decode-loop' \
#   bash docs/data/h200-campaign/lease.sh
# A warm call runs 2 steps of ~175-280 s each (session 33's H100: 176 s; CAMP_LIMIT_S=590
# CAMP_STEP_S=200 fits a third only when the first two are quick); the first call of a lease
# also pays the cold start.
# H100 runs are gathered by h100_runs.py and judged by judge_loop.py h100_runs.json, as the
# H200's loop_runs.json is.
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
