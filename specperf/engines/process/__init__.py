"""Server-process lifecycle shared by every server engine (vLLM, SGLang, calibration, containers).

Why one module: an engine left running after a crash holds a GPU (or the 2 CPU cores of CI) and
poisons every later measurement. So each server runs in its own process group and is torn down as a
group on every exit path:

* normal end / error / timeout: ``ServerProcess.stop()`` (TERM the group, wait, KILL, then psutil
  for descendants that left the group);
* Ctrl-C and SIGTERM/SIGHUP of the owner: an ``atexit`` hook and a chained signal handler stop every
  live server of this process;
* SIGKILL of the owner (pytest or an xdist worker; no Python code runs then): the server gets a
  parent-death signal (``prctl(PR_SET_PDEATHSIG)``) AND a tiny watchdog process kills the whole
  group when the owner's pid goes away (the engine's own children are in the group too);
* anything that still escaped (e.g. the machine's watchdog was killed too): every start records
  the engine in a pidfile under the runtime dir, and the next start sweeps entries whose owner is
  dead — checking the engine's create_time so a reused pid is never killed.

One job per module: ``helpers`` (ports, readiness, redaction, log tails), ``groups`` (group
members, ``kill_group``), ``pidfiles`` (``sweep_stale``), ``watchdog``, ``server``
(``ServerProcess`` and the exit hooks). Every name stays importable from
``specperf.engines.process``.
"""

from __future__ import annotations

from specperf.engines.process.groups import (
    DEFAULT_GRACE_S,
    _alive,
    _create_time,
    _same_process,
    group_members,
    kill_group,
)
from specperf.engines.process.helpers import (
    _SECRET_ENV_WORDS,
    _SECRET_FLAGS,
    LOG_TAIL_LINES,
    device_key,
    free_port,
    redact_command,
    redact_env,
    tail_lines,
    wait_http_ok,
)
from specperf.engines.process.pidfiles import (
    _pidfile_lock,
    sweep_stale,
)
from specperf.engines.process.server import (
    _LIVE,
    _LIVE_LOCK,
    _PR_SET_PDEATHSIG,
    ServerProcess,
    _child_setup,
    _install_exit_hooks,
    stop_all,
)
from specperf.engines.process.watchdog import (
    _WATCHDOG_SOURCE,
    _start_watchdog,
)

__all__ = [
    "DEFAULT_GRACE_S",
    "LOG_TAIL_LINES",
    "_LIVE",
    "_LIVE_LOCK",
    "_PR_SET_PDEATHSIG",
    "_SECRET_ENV_WORDS",
    "_SECRET_FLAGS",
    "_WATCHDOG_SOURCE",
    "ServerProcess",
    "_alive",
    "_child_setup",
    "_create_time",
    "_install_exit_hooks",
    "_pidfile_lock",
    "_same_process",
    "_start_watchdog",
    "device_key",
    "free_port",
    "group_members",
    "kill_group",
    "redact_command",
    "redact_env",
    "stop_all",
    "sweep_stale",
    "tail_lines",
    "wait_http_ok",
]
