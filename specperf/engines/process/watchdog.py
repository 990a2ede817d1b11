"""The watchdog: a tiny separate process that kills a server's group once its owner is gone
(the exit path for a SIGKILL of the owner, when no Python code of ours runs)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence

# ---------------------------------------------------------------- watchdog (separate process)

# Runs with the owner's python, no imports beyond the stdlib, in its own session so a terminal's
# Ctrl-C does not take it down before it has done its job.
_WATCHDOG_SOURCE = r"""
import json, os, signal, subprocess, sys, time
owner, pgid, grace = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
cleanup = json.loads(sys.argv[4])
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGHUP, signal.SIG_IGN)
def group_alive():
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
while group_alive() and os.getppid() == owner:
    time.sleep(0.5)
if os.getppid() != owner:
    try:
        os.killpg(pgid, signal.SIGTERM)
    except OSError:
        pass
    end = time.monotonic() + grace
    while time.monotonic() < end and group_alive():
        time.sleep(0.2)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:
        pass
    for cmd in cleanup:
        try:
            subprocess.run(cmd, capture_output=True, timeout=60)
        except Exception:
            pass
"""


def _start_watchdog(
    pgid: int, grace_s: float, cleanup: Sequence[Sequence[str]] = ()
) -> subprocess.Popen[bytes]:
    """Kills group ``pgid`` (and runs ``cleanup``) once this process is gone; exits by itself
    when the group empties first."""
    args = [str(os.getpid()), str(pgid), str(grace_s), json.dumps([list(c) for c in cleanup])]
    return subprocess.Popen(
        [sys.executable, "-c", _WATCHDOG_SOURCE, *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        close_fds=True,
    )
