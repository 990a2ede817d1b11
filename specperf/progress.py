"""Engine start progress: what is starting, for which item, its log, how long it has taken.

Why: an engine start takes 20-60 s on a CPU and minutes on a GPU box, and the run was silent
meanwhile. The engine pool and the engines know nothing about terminals, so this watches from
outside what they already write: a new log file in ``<results>/engines/`` (the server's log)
and the ``start`` / ``start_failed`` row in ``engine-starts.jsonl``. A daemon thread polls both
while the item is being measured and prints a bounded number of lines per start: starting,
the log path, "still starting" after 15, 30, 60, 120 … s (doubling), and ready / failed.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType
from typing import Any

FIRST_HEARTBEAT_S = 15.0
POLL_S = 0.25


def _show(path: Path) -> str:
    """The path relative to the working directory when it lies under it (shorter lines)."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


class EngineStartWatch:
    """Context manager around measuring one item; prints through ``say`` (one line per call,
    serialised by the caller). ``what`` names the engine, e.g. ``vllm 'vllm-cpu' (eagle3)``."""

    def __init__(
        self,
        results_dir: Path,
        what: str,
        item_id: str,
        say: Callable[[str], None],
        *,
        expect_start: bool,
        first_heartbeat_s: float = FIRST_HEARTBEAT_S,
        poll_s: float = POLL_S,
    ) -> None:
        self.engines_dir = Path(results_dir) / "engines"
        self.start_log = Path(results_dir) / "engine-starts.jsonl"
        self.what, self.item_id, self.say = what, item_id, say
        self.expect_start = expect_start
        self.first_heartbeat_s, self.poll_s = first_heartbeat_s, poll_s
        self._stop = threading.Event()
        self._lock = threading.RLock()  # the thread and other progress lines both poll
        self._polling = False
        self._thread: threading.Thread | None = None
        self._logs_seen = self._logs()
        self._rows_seen = self._row_count()
        self._since: float | None = None  # a start is under way since
        self._next_beat = 0.0
        self._log: Path | None = None

    # ------------------------------------------------------------------ what is on disk
    def _logs(self) -> set[Path]:
        return set(self.engines_dir.glob("*.log")) if self.engines_dir.is_dir() else set()

    def _row_count(self) -> int:
        if not self.start_log.is_file():
            return 0
        return len(self.start_log.read_text(encoding="utf-8").splitlines())

    def _new_rows(self) -> list[dict]:
        if not self.start_log.is_file():
            return []
        lines = self.start_log.read_text(encoding="utf-8").splitlines()
        fresh, self._rows_seen = lines[self._rows_seen :], len(lines)
        rows = []
        for line in fresh:
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:  # a line being written: read it next time
                self._rows_seen -= 1
                break
        return rows

    # ------------------------------------------------------------------ one poll
    def poll(self, now: float | None = None) -> None:
        """Look once and print what changed (the thread calls this; tests call it directly).
        Printing may come back here (a progress line lets the watch flush first): a nested
        call returns at once, and the state is updated before anything is printed."""
        with self._lock:
            if self._polling:
                return
            self._polling = True
            try:
                lines = self._poll(time.monotonic() if now is None else now)
            finally:
                self._polling = False
        for line in lines:
            self.say(line)

    def _poll(self, now: float) -> list[str]:
        out: list[str] = []
        new_logs = sorted(self._logs() - self._logs_seen, key=lambda p: p.stat().st_mtime)
        for log in new_logs:
            self._logs_seen.add(log)
            out += self._begin(now)
            self._log = log
            out.append(f"engine {self.what}: log {_show(log)}")
        for row in self._new_rows():
            event = row.get("event")
            if event not in ("start", "start_failed"):
                continue
            out += self._begin(now)
            assert self._since is not None
            took = row.get("startup_s")
            took = f"{float(took):.1f} s" if took is not None else f"{now - self._since:.0f} s"
            if event == "start":
                out.append(f"engine {self.what}: ready in {took} (pid {row.get('pid')})")
            else:
                where = f"; log {_show(self._log)}" if self._log else ""
                out.append(f"engine {self.what}: failed to start after {took}{where}")
            self._since, self._log = None, None
        if self._since is not None and now >= self._next_beat:
            where = f" (log {self._log.name})" if self._log else ""
            out.append(f"engine {self.what}: still starting, {now - self._since:.0f} s{where}")
            gap = max(2 * (self._next_beat - self._since), self.first_heartbeat_s)
            self._next_beat = self._since + gap
        return out

    def _begin(self, now: float) -> list[str]:
        if self._since is not None:
            return []
        self._since = now
        self._next_beat = now + self.first_heartbeat_s
        return [f"engine {self.what}: starting for {self.item_id}"]

    # ------------------------------------------------------------------ thread
    def _run(self) -> None:
        while not self._stop.wait(self.poll_s):
            try:
                self.poll()
            except OSError:  # results directory being rewritten: next poll
                continue

    def __enter__(self) -> EngineStartWatch:
        if self.expect_start:
            for line in self._begin(time.monotonic()):
                self.say(line)
        self._thread = threading.Thread(target=self._run, name="specperf-start-watch", daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        with contextlib.suppress(OSError):
            self.poll()  # the start row written just before the item ended
        self._since = None


@contextlib.contextmanager
def watch_engine_starts(suite_run: Any, item: Any) -> Iterator[EngineStartWatch]:
    """The watch around measuring ``item`` in a SuiteRun: it prints through the run's
    progress lines (terminal without xdist, ``progress.log`` always), and any other progress
    line first lets the watch print what it has seen, so "ready" comes before "repeat 1/1
    started" on the terminal."""
    pool = suite_run.pool
    running = pool.engine is not None and pool.spec == item.spec and pool.engine.is_alive()
    what = f"{item.spec.kind} {item.spec.label!r} ({item.spec.method})"
    watch = EngineStartWatch(
        suite_run.results_dir, what, item.id, suite_run.progress_line, expect_start=not running
    )
    log = suite_run.log
    if log is not None:

        def ordered(line: str) -> None:
            watch.poll()
            log(line)

        suite_run.log = ordered
    try:
        with watch:
            yield watch
    finally:
        suite_run.log = log


__all__ = ["EngineStartWatch", "watch_engine_starts"]
