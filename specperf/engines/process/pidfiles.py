"""Pidfiles under the runtime dir, and the sweep that kills engines whose owner died (the last
exit path: checked against the engine's create_time)."""

from __future__ import annotations

import contextlib
import json
import subprocess
from typing import Any

from specperf.engines.process.groups import _same_process, kill_group
from specperf.fileio import runtime_dir

# ---------------------------------------------------------------- pidfiles and the sweep


def _pidfile_lock() -> Any:
    from filelock import FileLock

    root = runtime_dir()
    root.mkdir(parents=True, exist_ok=True)
    return FileLock(str(root / ".lock"), timeout=30)


def sweep_stale(now_owner: int | None = None) -> list[dict[str, Any]]:
    """Kill engines recorded under the runtime dir whose owner process is gone; returns the
    entries acted on. Live owners' engines are left alone (another run may be using them).
    An engine pid whose create_time does not match the record is a reused pid: the entry is
    dropped and nothing is killed."""
    swept: list[dict[str, Any]] = []
    root = runtime_dir()
    if not root.exists():
        return swept
    with _pidfile_lock():
        for path in sorted(root.glob("*/*.json")):
            try:
                entry = json.loads(path.read_text())
            except (OSError, ValueError):
                path.unlink(missing_ok=True)
                continue
            owner_pid = entry.get("owner_pid")
            if owner_pid == now_owner and now_owner is not None:
                continue
            if _same_process(owner_pid, entry.get("owner_create_time")):
                continue  # its owner still runs
            if _same_process(entry.get("pid"), entry.get("create_time")):
                kill_group(int(entry["pgid"]), grace_s=5.0)
                entry["action"] = "killed"
            else:
                entry["action"] = "gone"
            for cmd in entry.get("cleanup_commands") or []:
                with contextlib.suppress(OSError, subprocess.SubprocessError):
                    subprocess.run(cmd, capture_output=True, timeout=60, check=False)
            path.unlink(missing_ok=True)
            swept.append(entry)
    return swept
