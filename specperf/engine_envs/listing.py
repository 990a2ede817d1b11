"""Listing and removing engine envs (``specperf env list``, ``specperf env remove``)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from specperf.engine_envs.paths import (
    dir_size,
    env_dirs,
    env_lock,
    env_python,
    env_root,
    read_marker,
)
from specperf.engine_envs.recipe import env_name
from specperf.errors import ConfigError


def list_envs(root: Path | str | None = None, live_sizes: bool = False) -> list[dict[str, Any]]:
    """Every env dir under the root: ready or not, size (the marker's, measured when the env
    was finished; walked on disk for older or unfinished envs, or with ``live_sizes``), torch
    build, recorded versions, python."""
    rows: list[dict[str, Any]] = []
    for d in env_dirs(env_root(root)):
        marker = read_marker(d)
        size = None if live_sizes else (marker or {}).get("size_bytes")
        rows.append(
            {
                "name": d.name,
                "ready": marker is not None,
                "requirement": (marker or {}).get("requirement"),
                "versions": (marker or {}).get("versions", {}),
                "torch_build": (marker or {}).get("torch_build"),
                "size_bytes": size if isinstance(size, int) else dir_size(d),
                "python": str(env_python(d)),
            }
        )
    return rows


def remove(
    names: list[str], root: Path | str | None = None, all_envs: bool = False
) -> list[tuple[str, int]]:
    """Remove envs (by name or requirement; ``all_envs``: every env under the root), each under
    its lock, with its failed-install log; returns (name, bytes freed)."""
    base = env_root(root)
    targets = [d.name for d in env_dirs(base)] if all_envs else [env_name(n) for n in names]
    if not targets:
        raise ConfigError(
            f"nothing to remove under {base}" if all_envs else "name an env (or --all)"
        )
    missing = [t for t in targets if "/" in t or not (base / t).is_dir()]
    if missing:
        raise ConfigError(f"no env {', '.join(missing)} under {base} (see `specperf env list`)")
    done = []
    for name in targets:
        env_dir = base / name
        with env_lock(base, name):
            size = dir_size(env_dir)
            shutil.rmtree(env_dir)
            (base / f"{name}.install.log").unlink(missing_ok=True)
        done.append((name, size))
    return done
