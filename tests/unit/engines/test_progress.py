"""Engine start progress (specperf.progress): starting, log path, a bounded number of
"still starting" lines (15, 30, 60 … s), ready / failed, from what the pool writes."""

from __future__ import annotations

import json
from pathlib import Path

from specperf.progress import EngineStartWatch


def watch(tmp_path: Path, lines: list[str], **kw) -> EngineStartWatch:
    return EngineStartWatch(tmp_path, "vllm 'cpu' (eagle3)", "item-1", lines.append, **kw)


def row(event: str, **kw) -> str:
    return json.dumps({"event": event, **kw}) + "\n"


def test_a_start_prints_what_where_how_long_and_ready(tmp_path: Path) -> None:
    lines: list[str] = []
    w = watch(tmp_path, lines, expect_start=True)
    lines += w._begin(0.0)  # what __enter__ does, at a known time
    (tmp_path / "engines").mkdir()
    log = tmp_path / "engines" / "vllm-abc.log"
    log.write_text("")
    w.poll(1.0)
    for t in range(2, 200):  # 3 min of polls: heartbeats at 15, 30, 60, 120 s only
        w.poll(float(t))
    (tmp_path / "engine-starts.jsonl").write_text(row("start", startup_s=201.5, pid=42))
    w.poll(201.6)
    assert lines[0] == "engine vllm 'cpu' (eagle3): starting for item-1"
    assert lines[1] == f"engine vllm 'cpu' (eagle3): log {log}"
    beats = [line for line in lines if "still starting" in line]
    assert [b.split(", ")[1].split(" s")[0] for b in beats] == ["15", "30", "60", "120"]
    assert beats[0].endswith("(log vllm-abc.log)")
    assert lines[-1] == "engine vllm 'cpu' (eagle3): ready in 201.5 s (pid 42)"
    w.poll(500.0)
    assert len(lines) == 7  # nothing more once ready


def test_a_reused_engine_prints_nothing(tmp_path: Path) -> None:
    lines: list[str] = []
    with watch(tmp_path, lines, expect_start=False, poll_s=0.01):
        pass
    assert lines == []


def test_a_failed_start_names_the_log_and_a_restart_is_seen_again(tmp_path: Path) -> None:
    lines: list[str] = []
    (tmp_path / "engines").mkdir()
    starts = tmp_path / "engine-starts.jsonl"
    starts.write_text(row("start", startup_s=1.0, pid=1))  # before the item: not reported
    w = watch(tmp_path, lines, expect_start=False)
    (tmp_path / "engines" / "a.log").write_text("")
    w.poll(0.0)
    with starts.open("a") as fh:
        fh.write(row("stop") + row("start_failed"))
    w.poll(3.0)
    assert lines[0].endswith("starting for item-1")
    assert lines[-1] == "engine vllm 'cpu' (eagle3): failed to start after 3 s; log " + str(
        tmp_path / "engines" / "a.log"
    )
    (tmp_path / "engines" / "b.log").write_text("")  # the next repeat's fresh engine
    w.poll(10.0)
    assert lines[-2].endswith("starting for item-1") and lines[-1].endswith("b.log")


def test_a_say_that_polls_again_does_not_recurse(tmp_path):
    """The session's progress log calls poll() before printing (so "ready" comes first); a
    line the watch itself prints goes through that same log. Found by a restart-between-repeats
    baseline run: "still starting" re-entered poll() until RecursionError."""
    from specperf.progress import EngineStartWatch

    lines: list[str] = []
    watch: EngineStartWatch

    def say(line: str) -> None:
        watch.poll(now=1000.0)  # what the session's ordered log does
        lines.append(line)

    (tmp_path / "engines").mkdir()
    watch = EngineStartWatch(tmp_path, "vllm 'x' (native)", "item", say, expect_start=True)
    (tmp_path / "engines" / "a.log").write_text("")
    watch.poll(now=0.0)
    watch.poll(now=1000.0)  # far past every heartbeat
    assert any("still starting" in line for line in lines)
    assert len(lines) < 10


class FakePool:
    engine = None
    spec = None


class FakeSession:
    """A SuiteRun's surface the watch uses: progress lines go through ``log``."""

    def __init__(self, results_dir: Path) -> None:
        self.results_dir = results_dir
        self.pool = FakePool()
        self.printed: list[str] = []
        self.log = self.printed.append

    def progress_line(self, text: str) -> None:
        if self.log:
            self.log(text)


class FakeSpec:
    kind, label, method = "vllm", "cpu", "native"


class FakeItem:
    id = "item-1"
    spec = FakeSpec()


def test_progress_lines_while_a_heartbeat_is_due_print_it_once(tmp_path: Path) -> None:
    """A progress line lets the watch print first; printing comes back into the watch, which
    must not print the same line again (it recursed until RecursionError once)."""
    from specperf.progress import watch_engine_starts

    session = FakeSession(tmp_path)
    (tmp_path / "engines").mkdir()
    with watch_engine_starts(session, FakeItem()) as w:
        w._stop.set()  # no background polls: this test drives the clock
        assert w._since is not None
        (tmp_path / "engines" / "x.log").write_text("")
        w.poll(w._since + 1)
        w._next_beat = w._since  # a heartbeat is due
        session.progress_line("item-1: repeat 1/1 started")
    beats = [x for x in session.printed if "still starting" in x]
    assert len(beats) == 1, session.printed
    assert session.printed[-1] == "item-1: repeat 1/1 started"
    assert session.printed.index(beats[0]) < len(session.printed) - 1
