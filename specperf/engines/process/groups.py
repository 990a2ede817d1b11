"""Process groups: their members, and killing a group (TERM, wait, KILL, then descendants
that left it) without ever killing a reused pid."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Sequence

import psutil

DEFAULT_GRACE_S = 15.0


def _create_time(pid: int) -> float | None:
    try:
        return psutil.Process(pid).create_time()
    except (psutil.NoSuchProcess, psutil.AccessDenied, ProcessLookupError):
        return None


def _same_process(pid: int | None, create_time: float | None) -> bool:
    """True when ``pid`` is alive and is the process that had ``create_time`` (not a reuse)."""
    if not pid or create_time is None:
        return False
    ct = _create_time(pid)
    return ct is not None and abs(ct - create_time) < 0.05


def group_members(pgid: int) -> list[psutil.Process]:
    """Live (non-zombie) processes in process group ``pgid``."""
    found = []
    for proc in psutil.process_iter(["pid", "status"]):
        try:
            if proc.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            if os.getpgid(proc.pid) == pgid:
                found.append(proc)
        except (ProcessLookupError, psutil.NoSuchProcess, PermissionError):
            continue
    return found


def kill_group(
    pgid: int,
    grace_s: float = DEFAULT_GRACE_S,
    extra: Sequence[psutil.Process] = (),
    leader: subprocess.Popen[bytes] | None = None,
) -> None:
    """TERM the group, wait up to ``grace_s`` for it to empty, then KILL what is left
    (``extra``: descendants recorded earlier that may have left the group)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGTERM)
    for p in extra:
        with contextlib.suppress(psutil.Error):
            p.terminate()
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        if leader is not None:
            leader.poll()  # reap the leader so it does not linger as a zombie
        if not group_members(pgid) and not [p for p in extra if _alive(p)]:
            break
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
    for p in [*group_members(pgid), *extra]:
        with contextlib.suppress(psutil.Error):
            p.kill()
    if leader is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            leader.wait(timeout=5)
    psutil.wait_procs([p for p in extra if _alive(p)], timeout=3)
    # SIGKILL is delivered asynchronously: return only once the group is really gone (on a
    # loaded machine a member could otherwise still be running when the owner exits)
    gone_by = time.monotonic() + 3.0
    while group_members(pgid) and time.monotonic() < gone_by:
        time.sleep(0.05)


def _alive(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
