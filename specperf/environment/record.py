"""What a summary records about the machine: the hardware profile (which keeps baselines of
different machines apart) and the environment record (host, CPU, GPUs, driver, suite commit)."""

from __future__ import annotations

import platform
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from specperf.environment.host import (
    boot_id,
    cpu_model,
    cpu_profile,
    cpu_signature,
    cpu_vendor,
    isa_class,
)
from specperf.environment.names import gpu_slug
from specperf.environment.nvml import gpu_indices, gpu_inventory


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
        "cpu_signature": cpu_signature(),
        "boot_id": boot_id(),
        "cpu_logical_cores": psutil.cpu_count(logical=True),
        "cpu_physical_cores": psutil.cpu_count(logical=False),
        "cpus_used": list(cpus) or None,
        "memory_total_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "gpus": inventory,
        "gpu_driver": inventory[0]["driver"] if inventory else None,
    }
    return record


# ---------------------------------------------------------------- engine env record

# the marker fields a run summary carries (environment.engine.env): which release, which torch
ENGINE_ENV_FIELDS = (
    "name",
    "requirement",
    "torch_build",
    "torch_build_requested",
    "torch_pin",
    "versions",
    "python_version",
    "recipe_digest",
    "pip_freeze_sha256",
    "yanked",
    "notes",
)


def engine_env_record(python: str | Path | None) -> dict[str, Any] | None:
    """What a run's engine env says about itself (its ``specperf env`` marker, beside the
    python: ``<env>/bin/python`` → ``<env>/specperf-env.json``): release, torch build
    (``pinned``, or ``generic`` where ``--torch-build generic`` replaced the pinned build) and
    versions. None for a python that is no specperf env. Reads one file; no network."""
    import json

    if not python:
        return None
    env_dir = Path(python).parent.parent  # not resolved: a venv's python is a link
    try:
        marker = json.loads((env_dir / "specperf-env.json").read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(marker, dict):
        return None
    out = {k: marker.get(k) for k in ENGINE_ENV_FIELDS if k in marker}
    out.setdefault("torch_build", None)
    release = marker.get("release") if isinstance(marker.get("release"), dict) else {}
    out["release_url"] = release.get("url")
    return out
