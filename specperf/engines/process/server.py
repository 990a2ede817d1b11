"""``ServerProcess`` (start in its own process group, wait for readiness, stop the group) and
the owner-side exit hooks that stop every live server on Ctrl-C, SIGTERM/SIGHUP and exit."""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import psutil

from specperf.engines.process.groups import DEFAULT_GRACE_S, _create_time, kill_group
from specperf.engines.process.helpers import (
    LOG_TAIL_LINES,
    redact_command,
    tail_lines,
    wait_http_ok,
)
from specperf.engines.process.pidfiles import _pidfile_lock, sweep_stale
from specperf.engines.process.watchdog import _start_watchdog
from specperf.errors import EngineStartError
from specperf.fileio import runtime_dir

_PR_SET_PDEATHSIG = 1


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
