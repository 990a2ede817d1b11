#!/bin/bash
# issue 14 device pipeline: interleaved A/B of 82ff7d2 / main / fixed, then the fixed branch's
# `gpu_run.py --passes check` against the committed baselines/nvidia-h200x1.json.
set -x
export PYTHONUNBUFFERED=1 TORCHINDUCTOR_CACHE_DIR=/tmp/inductor-cache PYTHONPATH=/tmp/site
rm -rf /tmp/trees /tmp/ab /tmp/check; mkdir -p /tmp/trees /tmp/ab
cp -r .device/old .device/main .device/fixed /tmp/trees/
cp .device/pipeline.sh /tmp/ab/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > /tmp/ab/gpu.txt 2>&1
nproc >> /tmp/ab/gpu.txt; cat /proc/loadavg >> /tmp/ab/gpu.txt
python3 -c "import torch, transformers; print(torch.__version__, transformers.__version__)" >> /tmp/ab/gpu.txt
cd /tmp/trees/fixed
python3 scripts/gpu_ab.py --out /tmp/ab --tree old=/tmp/trees/old --tree main=/tmp/trees/main \
  --tree fixed=/tmp/trees/fixed --plan eagle3:3,draft:3,native:1,ngram:1 \
  --max-tokens "*:64,draft:32" --profile --budget-s "${AB_BUDGET_S:-950}" > /tmp/ab/ab.log 2>&1
touch /tmp/ab.done
if [ "${AB_CHECK:-1}" = 1 ]; then
  python3 scripts/gpu_run.py --out /tmp/check --passes check --pass-timeout 480 > /tmp/check.log 2>&1
  cp /tmp/check.log /tmp/check/ 2>/dev/null
fi
touch /tmp/pipe.done
