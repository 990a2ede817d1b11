"""The NVML sampler: clocks, power, temperature, throttle reasons, memory and foreign
processes of the engine's GPUs, summarised per run."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from specperf.environment.nvml import _nvml

# NVML clocks-event (throttle) reason bits -> name; "benign" ones do not mean lost speed
THROTTLE_REASONS: dict[int, str] = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
BENIGN_THROTTLE = {"gpu_idle", "applications_clocks_setting", "display_clock_setting"}


# ---------------------------------------------------------------- NVML sampler


def decode_throttle(mask: int) -> list[str]:
    return [name for bit, name in THROTTLE_REASONS.items() if mask & bit]


def summarize_samples(
    samples: Sequence[Mapping[str, Any]], allowed_pids: Iterable[int] = ()
) -> dict[str, Any]:
    """Per-GPU summary of sampler rows: clocks/power/temperature min-mean-max, throttle reasons
    with the fraction of samples they were active in (``harmful`` ones flagged), peak memory,
    and processes on the GPU that are not ours (``foreign_processes``)."""
    allowed = set(allowed_pids)
    by_gpu: dict[int, list[Mapping[str, Any]]] = {}
    for s in samples:
        by_gpu.setdefault(int(s["index"]), []).append(s)
    out: dict[str, Any] = {"num_samples": len(samples), "gpus": {}}
    harmful_any: set[str] = set()
    foreign_any: dict[int, dict[str, Any]] = {}
    for idx, rows in sorted(by_gpu.items()):
        gpu: dict[str, Any] = {"num_samples": len(rows)}
        for key in ("sm_clock_mhz", "mem_clock_mhz", "power_w", "temperature_c"):
            vals = [float(r[key]) for r in rows if r.get(key) is not None]
            if vals:
                gpu[key] = {
                    "min": min(vals),
                    "mean": round(sum(vals) / len(vals), 2),
                    "max": max(vals),
                }
        mem = [float(r["memory_used_mib"]) for r in rows if r.get("memory_used_mib") is not None]
        if mem:
            gpu["memory_used_mib_max"] = max(mem)
        counts: dict[str, int] = {}
        for r in rows:
            for name in decode_throttle(int(r.get("throttle_mask") or 0)):
                counts[name] = counts.get(name, 0) + 1
        gpu["throttle_fraction"] = {k: round(v / len(rows), 4) for k, v in sorted(counts.items())}
        harmful = sorted(k for k in counts if k not in BENIGN_THROTTLE)
        gpu["harmful_throttle"] = harmful
        harmful_any.update(harmful)
        foreign: dict[int, dict[str, Any]] = {}
        for r in rows:
            for p in r.get("processes") or ():
                pid = int(p["pid"])
                if pid in allowed:
                    continue
                seen = foreign.setdefault(pid, {"pid": pid, "name": p.get("name"), "mib": 0.0})
                seen["mib"] = max(float(seen["mib"]), float(p.get("used_mib") or 0.0))
        gpu["foreign_processes"] = sorted(foreign.values(), key=lambda p: p["pid"])
        for pid, p in foreign.items():
            foreign_any.setdefault(pid, {**p, "gpu": idx})
        out["gpus"][str(idx)] = gpu
    out["harmful_throttle"] = sorted(harmful_any)
    out["foreign_processes"] = sorted(foreign_any.values(), key=lambda p: p["pid"])
    notes = []
    if harmful_any:
        notes.append(f"GPU throttled during the run: {', '.join(sorted(harmful_any))}")
    if foreign_any:
        desc = ", ".join(
            f"pid {p['pid']} ({p.get('name') or '?'})" for p in out["foreign_processes"]
        )
        notes.append(f"foreign processes on the GPU during the run: {desc}")
    out["notes"] = notes
    return out


class GpuSampler:
    """Samples NVML every ``interval_s`` on a daemon thread between ``start()`` and ``stop()``;
    ``summary(allowed_pids)`` gives the per-run summary. Inert (no samples, a note) without
    NVML, so callers need no GPU check."""

    def __init__(self, indices: Sequence[int], interval_s: float = 0.5, max_samples: int = 100_000):
        self.indices = list(indices)
        self.interval_s = interval_s
        self.max_samples = max_samples
        self.samples: list[dict[str, Any]] = []
        self.error: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> GpuSampler:
        if not self.indices:
            return self
        self._thread = threading.Thread(target=self._run, name="specperf-nvml", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def __enter__(self) -> GpuSampler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def summary(self, allowed_pids: Iterable[int] = ()) -> dict[str, Any]:
        out = summarize_samples(self.samples, allowed_pids)
        if self.error:
            out["notes"].append(f"NVML sampling unavailable: {self.error}")
        return out

    def _run(self) -> None:
        nv = _nvml()
        if nv is None:
            self.error = "pynvml (nvidia-ml-py) or the NVIDIA driver is missing"
            return
        try:
            handles = {i: nv.nvmlDeviceGetHandleByIndex(i) for i in self.indices}
            t0 = time.monotonic()
            while not self._stop.is_set() and len(self.samples) < self.max_samples:
                for i, h in handles.items():
                    self.samples.append(self._sample(nv, i, h, time.monotonic() - t0))
                self._stop.wait(self.interval_s)
        except Exception as exc:
            self.error = f"{type(exc).__name__}: {exc}"
        finally:
            with contextlib.suppress(Exception):
                nv.nvmlShutdown()

    @staticmethod
    def _sample(nv: Any, index: int, h: Any, t: float) -> dict[str, Any]:
        def get(fn: Any, *args: Any) -> Any:
            try:
                return fn(h, *args)
            except Exception:
                return None

        power = get(nv.nvmlDeviceGetPowerUsage)
        mem = get(nv.nvmlDeviceGetMemoryInfo)
        reasons_fn = (
            getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None)
            or nv.nvmlDeviceGetCurrentClocksThrottleReasons
        )
        procs = get(nv.nvmlDeviceGetComputeRunningProcesses) or []
        util_fn = getattr(nv, "nvmlDeviceGetUtilizationRates", None)
        util = get(util_fn) if util_fn is not None else None
        return {
            "t": round(t, 3),
            "index": index,
            "gpu_util_pct": None if util is None else util.gpu,
            "sm_clock_mhz": get(nv.nvmlDeviceGetClockInfo, nv.NVML_CLOCK_SM),
            "mem_clock_mhz": get(nv.nvmlDeviceGetClockInfo, nv.NVML_CLOCK_MEM),
            "power_w": None if power is None else power / 1000.0,
            "temperature_c": get(nv.nvmlDeviceGetTemperature, nv.NVML_TEMPERATURE_GPU),
            "throttle_mask": get(reasons_fn),
            "memory_used_mib": None if mem is None else round(mem.used / 2**20),
            "processes": [
                {
                    "pid": p.pid,
                    "used_mib": None
                    if getattr(p, "usedGpuMemory", None) is None
                    else round(p.usedGpuMemory / 2**20),
                    "name": _proc_name(p.pid),
                }
                for p in procs
            ],
        }


def _proc_name(pid: int) -> str | None:
    try:
        import psutil

        return psutil.Process(pid).name()
    except Exception:
        return None


def engine_pids(root_pid: int | None) -> set[int]:
    """The engine's process tree (allowed on its GPUs; anything else there is foreign)."""
    if not root_pid:
        return set()
    import psutil

    try:
        root = psutil.Process(root_pid)
        return {root_pid, *(c.pid for c in root.children(recursive=True))}
    except psutil.Error:
        return {root_pid}
