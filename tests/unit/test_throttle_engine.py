"""tests/tools/throttle_engine.py, the test-only slowdown behind the verdict proofs: it must find
the engines a process started (by their pidfile and by their command line), stop them the share of
the time it was asked, report what it did, and leave every group running when it ends.

A throttle that silently finds nothing turns a "the verdict sees a slowdown" proof into a
measurement of an unchanged engine (a 60 % share that reached nothing read −10.6 %, like the
unchanged run's −10.3 %); these tests make that a failure of the throttle, not of the verdict."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parents[2]
THROTTLE = ROOT / "tests" / "tools" / "throttle_engine.py"
BUSY = "import time\nwhile True:\n    time.sleep(0) or sum(range(1000))\n"


def _busy_engine(argv_tail: list[str]) -> subprocess.Popen[bytes]:
    """A CPU-bound stand-in 'engine' in its own session, like ServerProcess starts engines."""
    return subprocess.Popen(
        [sys.executable, "-c", BUSY, *argv_tail], start_new_session=True, close_fds=True
    )


def _write_pidfile(runtime: Path, proc: subprocess.Popen[bytes], command: list[str]) -> None:
    folder = runtime / "cpu"
    folder.mkdir(parents=True, exist_ok=True)
    entry = {"pid": proc.pid, "pgid": proc.pid, "owner_pid": os.getpid(), "command": command}
    (folder / f"{proc.pid}.json").write_text(json.dumps(entry))


def _throttle(tmp_path: Path, runtime: Path, share: float, seconds: float, *extra: str) -> dict:
    report = tmp_path / "throttle.json"
    env = {**os.environ, "SPECPERF_RUNTIME_DIR": str(runtime)}
    cmd = [sys.executable, str(THROTTLE), "--share", str(share), "--under", str(os.getpid())]
    cmd += ["--report", str(report), "--duration", str(seconds), *extra]
    subprocess.run(cmd, env=env, check=True, timeout=seconds + 30)
    return json.loads(report.read_text())


def _stop(proc: subprocess.Popen[bytes]) -> None:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)


@pytest.mark.parametrize(
    "found_by", ["pidfile", "command line"], ids=["by-pidfile", "by-command-line"]
)
def test_throttle_stops_its_owners_engine_the_share_asked_and_reports_it(tmp_path, found_by):
    runtime = tmp_path / "run"
    runtime.mkdir()
    mark = ["-m", "vllm.entrypoints.openai.api_server"]
    # by pidfile: the process's own command line does not carry the mark (only the record does)
    engine = _busy_engine([] if found_by == "pidfile" else mark)
    try:
        if found_by == "pidfile":
            _write_pidfile(runtime, engine, [sys.executable, *mark])
        cpu0 = psutil.Process(engine.pid).cpu_times()
        report = _throttle(tmp_path, runtime, share=0.5, seconds=3.0)
        assert engine.poll() is None
        assert psutil.Process(engine.pid).status() != psutil.STATUS_STOPPED  # continued at exit
        cpu1 = psutil.Process(engine.pid).cpu_times()
    finally:
        _stop(engine)
    assert set(report["groups"]) == {str(engine.pid)}, report
    rec = report["groups"][str(engine.pid)]
    assert rec["cycles"] >= 15, rec  # ~30 cycles of 0.1 s in 3 s
    # read from /proc at the end of a stop window; a loaded machine may deliver a stop late
    assert rec["checks"] >= 2 and rec["seen_stopped"] >= rec["checks"] / 2, rec
    stopped_share = rec["stopped_s"] / report["ran_s"]
    assert 0.4 <= stopped_share <= 0.75, (stopped_share, report)
    # its own account of the share it kept, from the first stop to the last
    assert 0.45 <= rec["share_held"] <= 0.56, rec
    assert rec["held_s"] <= report["ran_s"] and rec["stopped_s"] <= rec["held_s"], rec
    assert report["priority"], report
    used = (cpu1.user + cpu1.system) - (cpu0.user + cpu0.system)
    # a busy loop given the CPU half the time uses at most ~half a CPU (+ slack for oversleep)
    assert used <= 0.7 * report["ran_s"], (used, report)


def test_throttle_leaves_engines_other_processes_started_alone(tmp_path):
    """A pidfile naming another owner is not ours, even when its command carries the mark."""
    runtime = tmp_path / "run"
    engine = _busy_engine([])  # our child, but nothing in its command line says engine
    try:
        folder = runtime / "cpu"
        folder.mkdir(parents=True)
        entry = {"pid": engine.pid, "pgid": engine.pid, "owner_pid": os.getppid()}
        entry["command"] = [sys.executable, "-m", "vllm.entrypoints.openai.api_server"]
        (folder / f"{engine.pid}.json").write_text(json.dumps(entry))
        report = _throttle(tmp_path, runtime, share=0.5, seconds=1.5)
    finally:
        _stop(engine)
    assert report["groups"] == {}, report
    assert report["scans"] >= 1


# A stand-in server: /health answers 503 for its first READY_AFTER seconds, then 200.
SLOW_SERVER = r"""
import http.server, sys, time
ready_at = time.monotonic() + float(sys.argv[1])
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if time.monotonic() >= ready_at else 503)
        self.end_headers()
    def log_message(self, *a):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[3])), H).serve_forever()
"""


def test_after_ready_holds_an_engine_only_once_its_health_answers(tmp_path):
    from specperf.engines.process import free_port

    runtime = tmp_path / "run"
    port = free_port()
    cmd = [sys.executable, "-c", SLOW_SERVER, "2.0", "--port", str(port)]
    engine = subprocess.Popen(cmd, start_new_session=True, close_fds=True)
    try:
        _write_pidfile(
            runtime, engine, [*cmd[:1], "-m", "vllm.entrypoints.openai.api_server", *cmd[3:]]
        )
        report = _throttle(tmp_path, runtime, 0.5, 5.0, "--after-ready")
    finally:
        _stop(engine)
    rec = report["groups"][str(engine.pid)]
    assert rec["first_seen_s"] < 1.0, rec  # found at once ...
    assert 1.5 <= rec["held_from_s"] <= 4.0, rec  # ... held only once /health said 200
    assert 5 <= rec["cycles"] <= 35, rec  # ~30 in the ~3 s after it, none before


def _record():
    """The throttle's module and a fresh group record of it."""
    from tests.tools import throttle_engine

    return throttle_engine, throttle_engine.GroupRecord(first_seen_s=0.0)


def test_a_run_window_that_overran_is_made_up_by_a_longer_stop():
    """On two busy cores the throttle may wake late: the engine then ran longer than asked, and
    the next stop is lengthened so the share lost over the hold stays the one asked for (capped
    at CATCH_UP nominal stops, so one long stall does not freeze the engine for seconds)."""
    mod, rec = _record()
    assert rec.stop_length(0.75, 0.1, now=5.0) == pytest.approx(0.075)  # first stop: nominal
    mod._account(rec, began=0.0, ended=0.075)
    # on time (ran 25 ms): nominal again
    assert rec.stop_length(0.75, 0.1, now=0.1) == pytest.approx(0.075)
    # woke 75 ms late (ran 100 ms, not 25): stop 225 ms, so that at its end 0.3 of 0.4 s is stopped
    assert rec.stop_length(0.75, 0.1, now=0.175) == pytest.approx(0.225)
    # a 10 s stall: capped
    assert rec.stop_length(0.75, 0.1, now=10.0) == pytest.approx(mod.CATCH_UP * 0.075)
    mod._account(rec, began=0.175, ended=0.4)
    assert rec.held_s == pytest.approx(0.4) and rec.stopped_s == pytest.approx(0.3)
    assert rec.longest_run_s == pytest.approx(0.1)
    assert rec.share_held == pytest.approx(0.75)


def test_share_out_of_range_is_a_one_line_error(tmp_path):
    out = subprocess.run(
        [sys.executable, str(THROTTLE), "--share", "0.95"], capture_output=True, text=True
    )
    assert out.returncode == 2
    assert out.stderr.strip() == "--share: between 0 and 0.9"
