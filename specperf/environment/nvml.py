"""NVML access (optional): the GPU inventory, MIG slices, and which GPUs a device list names."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable, Sequence
from typing import Any

from specperf.environment.names import slug

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
