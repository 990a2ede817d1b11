"""Host and GPU speed of one device lease, measured beside a check pass (issue 13).

The H200 transformers engine spends about two thirds of a native token in the host's Python
loop, and its passes differ by as much as its starts do. This probe records, per pass, what
could explain that: the host CPU's model, a fixed pure-Python workload, the latency of small CUDA
launches and the GPU's copy bandwidth. camp.sh runs it before and after each step; the figures
go beside the pass's tok/s in runs.json, so later sessions can test whether pass speed follows
the host (Python, launches) or the GPU (bandwidth). Prints one JSON line.
"""

from __future__ import annotations

import json
import os
import platform
import time


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def python_loop_times_ms(reps: int = 7) -> list[float]:
    """``reps`` timings of a fixed dict/int/call workload (what generate's loop does); also
    benchmarks/host_speed_vs_starts.py's CPU probe, so both hosts time the same loop."""

    def work() -> int:
        acc, d = 0, {}
        for i in range(200_000):
            d[i & 1023] = i
            acc += len(d) ^ i
        return acc

    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        work()
        times.append((time.perf_counter() - t0) * 1e3)
    return times


def _cuda_figures() -> dict[str, float]:
    import torch

    if not torch.cuda.is_available():
        return {}
    x = torch.zeros(16, device="cuda")
    for _ in range(200):  # warm the launch path
        x.add_(1)
    torch.cuda.synchronize()
    n = 5000
    t0 = time.perf_counter()
    for _ in range(n):
        x.add_(1)
    torch.cuda.synchronize()
    launch_us = (time.perf_counter() - t0) / n * 1e6
    t0 = time.perf_counter()
    for _ in range(500):  # launch + sync round trip, as a per-token .item() does
        x.add_(1)
        x.sum().item()
    sync_us = (time.perf_counter() - t0) / 500 * 1e6
    a = torch.empty(2 * 1024**3, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    b.copy_(a)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(10):
        b.copy_(a)
    torch.cuda.synchronize()
    copy_tb_s = 2 * a.numel() * 10 / (time.perf_counter() - t0) / 1e12  # read + write
    del a, b
    torch.cuda.empty_cache()
    return {"launch_us": launch_us, "launch_sync_us": sync_us, "d2d_copy_tb_s": copy_tb_s}


def main() -> None:
    out = {
        "utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "cpu_model": _cpu_model(),
        "cpus": os.cpu_count(),
        "loadavg_1m": os.getloadavg()[0],
        "python_loop_ms": min(python_loop_times_ms()),  # best of 7
    }
    out.update(_cuda_figures())
    print(
        "HOSTPROBE "
        + json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in out.items()}),
        flush=True,
    )


if __name__ == "__main__":
    main()
