"""Manual check of specperf.environment on a real NVIDIA machine (not collected by pytest):
profile, inventory, record and 8 s of NVML samples while a separate process loads the GPU.

Run: ``PYTHONPATH=. python tests/integration/gpu_env_check.py`` (needs nvidia-ml-py, psutil and
torch with CUDA); writes ``$OUT/gpucheck.json`` (default /tmp).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from specperf import environment as env

LOAD = (
    "import torch, time\n"
    "a = torch.randn(8192, 8192, device='cuda', dtype=torch.bfloat16)\n"
    "t = time.time()\n"
    "while time.time() - t < 6:\n"
    "    a @ a\n"
    "torch.cuda.synchronize()\n"
)


def main() -> None:
    res: dict[str, object] = {"python": sys.version}
    res["inventory"] = env.gpu_inventory()
    res["profile_all"] = env.hardware_profile()
    res["profile_gpu0"] = env.hardware_profile(gpus=env.gpu_inventory([0]))
    res["record"] = env.environment_record(gpus=("0",))
    load = subprocess.Popen([sys.executable, "-c", LOAD])
    sampler = env.GpuSampler([0], interval_s=0.25).start()
    time.sleep(8)
    sampler.stop()
    load.wait()
    res["num_samples"] = len(sampler.samples)
    res["first_samples"] = sampler.samples[:2]
    res["summary_allow_none"] = sampler.summary(allowed_pids=())
    res["summary_allow_load"] = sampler.summary(allowed_pids={load.pid})
    out = Path(os.environ.get("OUT", "/tmp")) / "gpucheck.json"
    out.write_text(json.dumps(res, indent=1, default=str))
    keys = ("inventory", "profile_all", "profile_gpu0", "num_samples")
    print(json.dumps({k: res[k] for k in keys}, default=str))
    print(json.dumps(res["summary_allow_none"], default=str)[:3000])


if __name__ == "__main__":
    main()
