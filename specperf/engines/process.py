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
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx
import psutil

from specperf.engines.base import Devices
from specperf.errors import EngineStartError
from specperf.fileio import runtime_dir

LOG_TAIL_LINES = 40
DEFAULT_GRACE_S = 15.0
_PR_SET_PDEATHSIG = 1
_SECRET_FLAGS = ("--api-key", "--api_key", "--hf-token", "--token", "--admin-api-key")
_SECRET_ENV_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD")


# ---------------------------------------------------------------- small helpers


def free_port(host: str = "127.0.0.1") -> int:
    """A port the OS considers free on ``host`` right now (the engine binds it moments later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def wait_http_ok(
    url: str,
    timeout: float,
    *,
    alive: Callable[[], bool] | None = None,
    interval: float = 0.5,
    headers: Mapping[str, str] | None = None,
) -> bool:
    """Poll ``url`` until it answers 2xx (True) or ``timeout`` passes or ``alive()`` turns
    False (False). Connection errors count as "not yet"."""
    deadline = time.monotonic() + timeout
    with httpx.Client(
        timeout=min(5.0, max(interval, 1.0)), headers=dict(headers or {}), trust_env=False
    ) as client:
        while True:
            if alive is not None and not alive():
                return False
            try:
                if client.get(url).is_success:
                    return True
            except httpx.HTTPError:
                pass
            if time.monotonic() >= deadline:
                return False
            time.sleep(min(interval, max(0.0, deadline - time.monotonic())))


def device_key(devices: Devices) -> str:
    """Pidfile namespace of a device set: ``gpu-0-1``, ``cpu-0-1`` or ``cpu``."""
    if devices.gpus:
        return "gpu-" + "-".join(devices.gpus)
    if devices.cpus:
        return "cpu-" + "-".join(str(c) for c in devices.cpus)
    return "cpu"


def redact_command(command: Sequence[str]) -> list[str]:
    """The command with secret values replaced (``--api-key X`` and ``--api-key=X``)."""
    out: list[str] = []
    hide_next = False
    for arg in command:
        if hide_next:
            out.append("***")
            hide_next = False
        elif arg in _SECRET_FLAGS:
            out.append(arg)
            hide_next = True
        elif any(arg.startswith(f + "=") for f in _SECRET_FLAGS):
            out.append(arg.split("=", 1)[0] + "=***")
        else:
            out.append(arg)
    return out


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    return {
        k: ("***" if any(w in k.upper() for w in _SECRET_ENV_WORDS) else v) for k, v in env.items()
    }


def tail_lines(path: Path, n: int = LOG_TAIL_LINES) -> str:
    try:
        with open(path, errors="replace") as fh:
            return "".join(deque(fh, maxlen=n))
    except OSError:
        return ""


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


# ---------------------------------------------------------------- owner-side exit hooks

_LIVE: set[ServerProcess] = set()
_LIVE_LOCK = threading.Lock()
_HOOKS_INSTALLED = False


def stop_all() -> None:
    """Stop every server this process started and has not stopped (exit hooks call this)."""
    with _LIVE_LOCK:
        live = list(_LIVE)
    for server in live:
        with contextlib.suppress(Exception):
            server.stop(grace_s=5.0)


def _install_exit_hooks() -> None:
    """atexit + SIGTERM/SIGHUP → teardown, chained to any handler already installed (pytest's,
    xdist's). Signal handlers can only be set from the main thread; elsewhere atexit, the
    watchdog and the parent-death signal still cover us."""
    global _HOOKS_INSTALLED
    if _HOOKS_INSTALLED:
        return
    _HOOKS_INSTALLED = True
    atexit.register(stop_all)
    if threading.current_thread() is not threading.main_thread():
        return
    for signum in (signal.SIGTERM, signal.SIGHUP):
        previous = signal.getsignal(signum)
        if previous == signal.SIG_IGN:
            continue  # e.g. SIGHUP under nohup: the run goes on, so must its engines

        def handler(num: int, frame: Any, _previous: Any = previous) -> None:
            stop_all()
            if callable(_previous):
                _previous(num, frame)
            else:  # default action: die by the same signal, as the caller expects
                signal.signal(num, signal.SIG_DFL)
                os.kill(os.getpid(), num)

        with contextlib.suppress(ValueError, OSError):
            signal.signal(signum, handler)


def _child_setup(cpus: tuple[int, ...], owner: int, pdeathsig: bool) -> Callable[[], None]:
    """preexec_fn for the server: die with the owner, and pin to the CPU set."""

    def setup() -> None:
        if pdeathsig and sys.platform.startswith("linux"):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
            if os.getppid() != owner:  # owner already died between fork and prctl
                os._exit(1)
        if cpus and hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, cpus)

    return setup


# ---------------------------------------------------------------- the server process


class ServerProcess:
    """One engine server: start in its own process group, wait for readiness, stop the group.

    ``command`` is the full argv (the port already chosen, see ``free_port``). ``log_path``
    receives stdout+stderr. ``cleanup_commands`` are run after the group is gone, also by the
    sweep (containers use ``docker rm -f``)."""

    def __init__(
        self,
        command: Sequence[str],
        *,
        log_path: Path,
        name: str = "engine",
        env: Mapping[str, str] | None = None,
        cpus: Sequence[int] = (),
        device: str = "cpu",
        digest: str = "",
        cwd: Path | None = None,
        cleanup_commands: Sequence[Sequence[str]] = (),
        pdeathsig: bool = True,
        watchdog: bool = True,
        grace_s: float = DEFAULT_GRACE_S,
    ) -> None:
        self.command = [str(c) for c in command]
        self.log_path = Path(log_path)
        self.name = name
        self.env = dict(env or {})
        self.cpus = tuple(int(c) for c in cpus)
        self.device = device
        self.digest = digest
        self.cwd = cwd
        self.cleanup_commands = [list(c) for c in cleanup_commands]
        self.pdeathsig = pdeathsig
        self.use_watchdog = watchdog
        self.grace_s = grace_s
        self.proc: subprocess.Popen[bytes] | None = None
        self.pgid: int | None = None
        self.watchdog: subprocess.Popen[bytes] | None = None
        self.pidfile: Path | None = None
        self.started_at: float | None = None
        self.startup_s: float | None = None
        self._stopped = False
        self._lock = threading.Lock()

    # -- lifecycle

    def launch(self) -> None:
        """Spawn the process (no readiness wait). Sweeps stale engines first."""
        if self.proc is not None:
            raise RuntimeError(f"{self.name}: already launched")
        _install_exit_hooks()
        sweep_stale(now_owner=os.getpid())
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **self.env}
        in_main = threading.current_thread() is threading.main_thread()
        with open(self.log_path, "ab") as log:
            log.write(f"# specperf: {' '.join(redact_command(self.command))}\n".encode())
            log.flush()
            self.started_at = time.monotonic()
            try:
                self.proc = subprocess.Popen(
                    self.command,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=env,
                    cwd=self.cwd,
                    start_new_session=True,
                    close_fds=True,
                    # PDEATHSIG fires when the *thread* that forked dies: only from the main thread
                    preexec_fn=_child_setup(self.cpus, os.getpid(), self.pdeathsig and in_main),
                )
            except OSError as exc:
                raise EngineStartError(
                    f"{self.name}: cannot run {self.command[0]!r}: {exc}"
                ) from exc
        self.pgid = self.proc.pid  # session leader: pgid == pid
        with _LIVE_LOCK:
            _LIVE.add(self)
        if self.use_watchdog:
            self.watchdog = _start_watchdog(
                self.pgid, min(self.grace_s, 10.0), self.cleanup_commands
            )
        self._write_pidfile()

    def start(
        self, health_url: str, timeout_s: float, headers: Mapping[str, str] | None = None
    ) -> None:
        """Launch and wait until ``health_url`` answers 2xx; on failure stop the group and raise
        EngineStartError with the log tail."""
        self.launch()
        ok = wait_http_ok(health_url, timeout_s, alive=self.is_alive, headers=headers)
        if ok:
            self.startup_s = time.monotonic() - (self.started_at or time.monotonic())
            return
        code = self.proc.poll() if self.proc else None
        self.stop()
        why = (
            f"exited with code {code} before it was ready"
            if code is not None
            else f"not ready after {timeout_s:.0f}s ({health_url})"
        )
        raise EngineStartError(
            f"{self.name} {why}; log {self.log_path}, last lines:\n{self.log_tail()}"
        )

    def is_alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    @property
    def returncode(self) -> int | None:
        return self.proc.poll() if self.proc else None

    def log_tail(self, n: int = LOG_TAIL_LINES) -> str:
        return tail_lines(self.log_path, n)

    def stop(self, grace_s: float | None = None) -> None:
        """TERM the group, wait, KILL; then descendants that left the group, the watchdog,
        cleanup commands and the pidfile. Idempotent and safe from any exit path."""
        with self._lock:
            if self._stopped or self.proc is None:
                return
            self._stopped = True
        grace = self.grace_s if grace_s is None else grace_s
        try:
            descendants: list[psutil.Process] = []
            with contextlib.suppress(psutil.Error):
                descendants = psutil.Process(self.proc.pid).children(recursive=True)
            assert self.pgid is not None
            kill_group(self.pgid, grace, extra=descendants, leader=self.proc)
            for cmd in self.cleanup_commands:
                with contextlib.suppress(OSError, subprocess.SubprocessError):
                    subprocess.run(cmd, capture_output=True, timeout=60, check=False)
        finally:
            if self.watchdog is not None:
                with contextlib.suppress(OSError):
                    self.watchdog.kill()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.watchdog.wait(timeout=5)
            if self.pidfile is not None:
                with contextlib.suppress(OSError):
                    self.pidfile.unlink(missing_ok=True)
            with _LIVE_LOCK:
                _LIVE.discard(self)

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- records

    def _write_pidfile(self) -> None:
        assert self.proc is not None
        entry = {
            "pid": self.proc.pid,
            "pgid": self.pgid,
            "create_time": _create_time(self.proc.pid),
            "owner_pid": os.getpid(),
            "owner_create_time": _create_time(os.getpid()),
            "watchdog_pid": self.watchdog.pid if self.watchdog else None,
            "name": self.name,
            "device": self.device,
            "digest": self.digest,
            "command": redact_command(self.command),
            "log_path": str(self.log_path),
            "cleanup_commands": self.cleanup_commands,
            "started": time.time(),
        }
        folder = runtime_dir() / self.device
        folder.mkdir(parents=True, exist_ok=True)
        self.pidfile = folder / f"{self.proc.pid}.json"
        with _pidfile_lock():
            tmp = self.pidfile.with_suffix(".tmp")
            tmp.write_text(json.dumps(entry, indent=1))
            tmp.replace(self.pidfile)
