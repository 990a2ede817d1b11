#!/usr/bin/env python3
"""Run ``specperf.engines.hf_server`` (from whatever tree is first on PYTHONPATH) with one
optional extra: a torch.profiler trace and a host-sync count of ONE EAGLE3 verify step (issue 14).

    AB_PROFILE_DIR=DIR AB_LABEL=NAME python scripts/gpu_ab_wrap.py <hf_server arguments>

The server runs unchanged until the file ``DIR/profile_now`` exists when an EAGLE3 request
starts; that request (and only that one) is traced from just before its 4th step report to just
before its 5th: one whole step (draft, verify, rewind, the step's report to the event loop).
Inside it ``torch.cuda.set_sync_debug_mode("warn")`` turns every implicit host sync (``.item()``,
``.tolist()``, blocking copies) into a warning, recorded with its source line; explicit
``torch.cuda.synchronize`` calls show in the trace as ``cudaDeviceSynchronize``. Written:
``DIR/trace-NAME.json.gz`` (chrome trace) and ``DIR/step-NAME.json`` (counts). The patch wraps
``Eagle3Speculator.generate``, whose signature 82ff7d2, main and the fix share.
"""

from __future__ import annotations

import gzip
import json
import os
import runpy
import shutil
import sys
import time
import warnings
from collections import Counter
from typing import Any

PROFILE_AT = 4  # step reports before the traced step (the first one is the prefill's token)


def _summary(prof: Any, wall_s: float, syncs: list[str]) -> dict[str, Any]:
    rows = {}
    for evt in prof.key_averages():
        dev = getattr(evt, "device_time_total", None)
        if dev is None:
            dev = getattr(evt, "cuda_time_total", 0)
        rows[evt.key] = {"count": evt.count, "cpu_us": evt.cpu_time_total, "device_us": dev}

    def count(*names: str) -> int:
        return sum(r["count"] for k, r in rows.items() if any(n in k for n in names))

    kernels = [
        e
        for e in prof.events()
        if getattr(e, "device_type", None) is not None
        and str(e.device_type).endswith("CUDA")
        and e.device_time > 0
    ]
    return {
        "step_wall_ms": round(wall_s * 1000, 3),
        "implicit_syncs": len(syncs),
        "implicit_sync_sites": dict(Counter(syncs)),
        "cudaDeviceSynchronize": count("cudaDeviceSynchronize"),
        "cudaStreamSynchronize": count("cudaStreamSynchronize"),
        "cudaMemcpyAsync": count("cudaMemcpyAsync"),
        "cudaLaunchKernel": count("cudaLaunchKernel", "cuLaunchKernel"),
        "cudaGraphLaunch": count("cudaGraphLaunch"),
        "gpu_kernels": len(kernels),
        "gpu_kernel_ms": round(sum(e.device_time for e in kernels) / 1000, 3),
        "top_cpu_ops": sorted(
            ({"name": k, **v} for k, v in rows.items()), key=lambda r: -r["cpu_us"]
        )[:25],
    }


def install(out_dir: str, label: str) -> None:
    import torch

    from specperf.eagle3 import speculate

    original = speculate.Eagle3Speculator.generate

    def generate(self: Any, prompt_ids: Any, max_new: int, sampler: Any, eos: Any, on_step: Any):
        flag = os.path.join(out_dir, "profile_now")
        if not os.path.exists(flag):
            return original(self, prompt_ids, max_new, sampler, eos, on_step)
        os.remove(flag)
        state: dict[str, Any] = {"n": 0}
        cuda = self.device.type == "cuda"

        def hook(info: Any) -> Any:
            state["n"] += 1
            if state["n"] == PROFILE_AT:
                acts = [torch.profiler.ProfilerActivity.CPU]
                if cuda:
                    torch.cuda.synchronize()
                    acts.append(torch.profiler.ProfilerActivity.CUDA)
                state["wcm"] = warnings.catch_warnings(record=True)
                state["w"] = state["wcm"].__enter__()
                warnings.simplefilter("always")
                if cuda:
                    torch.cuda.set_sync_debug_mode("warn")
                prof = torch.profiler.profile(activities=acts)
                prof.start()
                state["prof"], state["t"] = prof, time.perf_counter()
            elif state["n"] == PROFILE_AT + 1 and "prof" in state:
                wall = time.perf_counter() - state["t"]
                if cuda:
                    torch.cuda.set_sync_debug_mode(0)
                state["prof"].stop()
                caught = state["w"]
                state["wcm"].__exit__(None, None, None)
                syncs = [
                    f"{os.path.basename(w.filename)}:{w.lineno}"
                    for w in caught
                    if "synchroniz" in str(w.message)
                ]
                plain = os.path.join(out_dir, f"trace-{label}.json")
                state["prof"].export_chrome_trace(plain)
                with open(plain, "rb") as src, gzip.open(plain + ".gz", "wb") as dst:
                    shutil.copyfileobj(src, dst)
                os.remove(plain)
                summary = _summary(state["prof"], wall, syncs)
                summary["label"] = label
                with open(os.path.join(out_dir, f"step-{label}.json"), "w") as fh:
                    json.dump(summary, fh, indent=1)
            return on_step(info)

        return original(self, prompt_ids, max_new, sampler, eos, hook)

    speculate.Eagle3Speculator.generate = generate


def main() -> None:
    out_dir = os.environ.get("AB_PROFILE_DIR")
    if out_dir:
        install(out_dir, os.environ.get("AB_LABEL", "run"))
    sys.argv = ["specperf.engines.hf_server", *sys.argv[1:]]
    runpy.run_module("specperf.engines.hf_server", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
