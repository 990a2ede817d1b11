"""ServerProcess lifecycle with real child processes (a tiny http.server stands in for an engine):
readiness, failed starts, group teardown, stale-engine sweep, and no orphan when the owner is
SIGKILLed, SIGTERMed or interrupted."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from specperf.engines import process as proc_mod
from specperf.engines.base import Devices
from specperf.engines.process import (
    ServerProcess,
    device_key,
    free_port,
    group_members,
    redact_command,
    sweep_stale,
    wait_http_ok,
)
from specperf.errors import EngineStartError

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(autouse=True)
def runtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    run = tmp_path / "run"
    monkeypatch.setenv("SPECPERF_RUNTIME_DIR", str(run))
    return run


def server_cmd(port: int, grandchild: bool = True) -> list[str]:
    """An http.server whose shell parent also leaves a grandchild ``sleep`` in the group."""
    serve = f"{sys.executable} -m http.server --bind 127.0.0.1 {port}"
    if grandchild:
        return ["sh", "-c", f"sleep 300 & exec {serve}"]
    return serve.split()


def wait_gone(pgid: int, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not group_members(pgid):
            return True
        time.sleep(0.2)
    return False


def pid_gone(pid: int, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.2)
    return False


def force_kill_group(pgid: int) -> None:
    for p in group_members(pgid):
        p.kill()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[ServerProcess, int]]:
    port = free_port()
    sp = ServerProcess(server_cmd(port), log_path=tmp_path / "logs" / "srv.log", cwd=tmp_path)
    yield sp, port
    sp.stop()


def test_start_ready_then_stop_kills_whole_group(
    server: tuple[ServerProcess, int], runtime: Path
) -> None:
    sp, port = server
    sp.start(f"http://127.0.0.1:{port}/", timeout_s=30)
    assert sp.is_alive() and sp.startup_s is not None and sp.startup_s < 30
    members = group_members(sp.pgid)
    assert len(members) >= 2  # the server and the grandchild sleep
    pidfiles = list(runtime.glob("*/*.json"))
    assert len(pidfiles) == 1
    entry = json.loads(pidfiles[0].read_text())
    assert entry["pid"] == sp.pid and entry["owner_pid"] == os.getpid()
    sp.stop()
    assert not group_members(sp.pgid)
    assert not sp.is_alive()
    assert list(runtime.glob("*/*.json")) == []
    assert sp.watchdog is not None and sp.watchdog.poll() is not None
    sp.stop()  # idempotent


def test_failed_start_raises_with_log_tail(tmp_path: Path) -> None:
    cmd = [sys.executable, "-c", "print('line one'); print('bad flag --x'); raise SystemExit(3)"]
    sp = ServerProcess(cmd, log_path=tmp_path / "fail.log", name="fake-engine")
    with pytest.raises(EngineStartError) as err:
        sp.start(f"http://127.0.0.1:{free_port()}/health", timeout_s=20)
    msg = str(err.value)
    assert "fake-engine exited with code 3" in msg and "bad flag --x" in msg
    assert str(tmp_path / "fail.log") in msg


def test_start_timeout_stops_the_group(tmp_path: Path) -> None:
    sp = ServerProcess(["sh", "-c", "sleep 300 & sleep 300"], log_path=tmp_path / "t.log")
    t0 = time.monotonic()
    with pytest.raises(EngineStartError, match="not ready after 2s"):
        sp.start(f"http://127.0.0.1:{free_port()}/health", timeout_s=2)
    assert time.monotonic() - t0 < 20
    assert not group_members(sp.pgid)


def test_term_ignoring_server_is_killed_after_grace(tmp_path: Path) -> None:
    port = free_port()
    code = textwrap.dedent(
        f"""
        import signal, http.server
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        http.server.test(HandlerClass=http.server.SimpleHTTPRequestHandler,
                         port={port}, bind="127.0.0.1")
        """
    )
    sp = ServerProcess([sys.executable, "-c", code], log_path=tmp_path / "s.log", cwd=tmp_path)
    sp.start(f"http://127.0.0.1:{port}/", timeout_s=30)
    t0 = time.monotonic()
    sp.stop(grace_s=1.0)
    assert 0.9 < time.monotonic() - t0 < 15
    assert not group_members(sp.pgid)


def test_cpu_affinity_and_env_reach_the_child(tmp_path: Path) -> None:
    cpu = sorted(os.sched_getaffinity(0))[0]
    out = tmp_path / "child.json"
    code = (
        "import json, os; json.dump({'cpus': sorted(os.sched_getaffinity(0)), "
        f"'env': os.environ.get('SPECPERF_TEST_ENV')}}, open({str(out)!r}, 'w')); "
        "import time; time.sleep(300)"
    )
    sp = ServerProcess(
        [sys.executable, "-c", code],
        log_path=tmp_path / "a.log",
        cpus=(cpu,),
        env={"SPECPERF_TEST_ENV": "yes"},
    )
    sp.launch()
    try:
        deadline = time.monotonic() + 20
        while not out.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(0.2)
        data = json.loads(out.read_text())
        assert data == {"cpus": [cpu], "env": "yes"}
    finally:
        sp.stop()


def test_wait_http_ok_stops_early_when_process_dies() -> None:
    t0 = time.monotonic()
    assert not wait_http_ok(f"http://127.0.0.1:{free_port()}/", 30, alive=lambda: False)
    assert time.monotonic() - t0 < 2
    assert not wait_http_ok(f"http://127.0.0.1:{free_port()}/", 0.5)


def test_helpers() -> None:
    assert device_key(Devices(gpus=("0", "1"))) == "gpu-0-1"
    assert device_key(Devices(cpus=(0, 1))) == "cpu-0-1"
    assert device_key(Devices()) == "cpu"
    cmd = ["serve", "--api-key", "sekret", "--token=abc", "--port", "1"]
    assert redact_command(cmd) == ["serve", "--api-key", "***", "--token=***", "--port", "1"]
    a, b = free_port(), free_port()
    assert 1024 < a < 65536 and 1024 < b < 65536


# ---------------------------------------------------------------- sweep of stale pidfiles


def _spawn_orphan_like() -> subprocess.Popen[bytes]:
    return subprocess.Popen(["sh", "-c", "sleep 300 & sleep 300"], start_new_session=True)


def _dead_pid() -> tuple[int, float]:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    ct = psutil.Process(p.pid).create_time()
    p.wait()
    return p.pid, ct


def _write_entry(runtime: Path, device: str, **entry: object) -> Path:
    folder = runtime / device
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{entry['pid']}.json"
    path.write_text(json.dumps(entry))
    return path


def test_sweep_kills_engines_of_dead_owners_only(runtime: Path, tmp_path: Path) -> None:
    dead_owner, dead_ct = _dead_pid()
    me, my_ct = os.getpid(), psutil.Process().create_time()
    orphan, kept, reused = _spawn_orphan_like(), _spawn_orphan_like(), _spawn_orphan_like()
    marker = tmp_path / "cleanup-ran"
    try:
        time.sleep(0.3)
        ct = {p.pid: psutil.Process(p.pid).create_time() for p in (orphan, kept, reused)}
        _write_entry(
            runtime,
            "gpu-0",
            pid=orphan.pid,
            pgid=orphan.pid,
            create_time=ct[orphan.pid],
            owner_pid=dead_owner,
            owner_create_time=dead_ct,
            cleanup_commands=[["touch", str(marker)]],
        )
        # owner alive (another run using it): left alone
        live = _write_entry(
            runtime,
            "gpu-1",
            pid=kept.pid,
            pgid=kept.pid,
            create_time=ct[kept.pid],
            owner_pid=me,
            owner_create_time=my_ct,
        )
        # pid reused by an unrelated process (create_time differs): never killed
        _write_entry(
            runtime,
            "cpu",
            pid=reused.pid,
            pgid=reused.pid,
            create_time=ct[reused.pid] - 1000.0,
            owner_pid=dead_owner,
            owner_create_time=dead_ct,
        )
        (runtime / "cpu" / "broken.json").write_text("{not json")
        swept = {e["pid"]: e["action"] for e in sweep_stale()}
        assert swept == {orphan.pid: "killed", reused.pid: "gone"}
        orphan.wait(timeout=10)
        assert not group_members(orphan.pid)
        assert marker.exists()
        assert kept.poll() is None and reused.poll() is None
        assert live.exists() and not (runtime / "cpu" / "broken.json").exists()
        assert sorted(p.name for p in runtime.glob("*/*.json")) == [live.name]
    finally:
        for p in (orphan, kept, reused):
            force_kill_group(p.pid)
            p.wait(timeout=10)


# ---------------------------------------------------------------- owner killed / signalled

OWNER = textwrap.dedent(
    """
    import json, signal, sys, time
    from pathlib import Path
    from specperf.engines.process import ServerProcess, free_port
    pdeathsig, watchdog, log = sys.argv[1] == "1", sys.argv[2] == "1", Path(sys.argv[3])
    # an owner as a terminal starts it, whatever started this test (a background job starts
    # with SIGINT ignored, nohup with SIGHUP ignored); "keep" leaves the inherited ones
    if sys.argv[4] != "keep":
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
    port = free_port()
    serve = f"{sys.executable} -m http.server --bind 127.0.0.1 {port}"
    sp = ServerProcess(["sh", "-c", f"sleep 300 & exec {serve}"], log_path=log,
                       pdeathsig=pdeathsig, watchdog=watchdog, grace_s=2.0)
    sp.start(f"http://127.0.0.1:{port}/", 30)
    print(json.dumps({"pid": sp.pid, "pgid": sp.pgid}), flush=True)
    time.sleep(120)
    """
)


def start_owner(
    tmp_path: Path, pdeathsig: bool, watchdog: bool, signals: str = "default", **popen: Any
) -> tuple[subprocess.Popen, dict]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    args = [str(int(pdeathsig)), str(int(watchdog)), str(tmp_path / "o"), signals]
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, *args],
        stdout=subprocess.PIPE,
        env=env,
        cwd=tmp_path,
        start_new_session=True,
        **popen,
    )
    assert owner.stdout is not None
    line = owner.stdout.readline()
    if not line:
        owner.kill()
        pytest.fail(f"owner did not start the server: rc={owner.wait()}")
    return owner, json.loads(line)


@pytest.mark.parametrize(
    ("pdeathsig", "watchdog"), [(True, True), (False, True)], ids=["both", "watchdog-only"]
)
def test_sigkill_of_owner_leaves_no_process(
    tmp_path: Path, pdeathsig: bool, watchdog: bool
) -> None:
    owner, info = start_owner(tmp_path, pdeathsig, watchdog)
    assert len(group_members(info["pgid"])) >= 2
    try:
        owner.send_signal(signal.SIGKILL)
        owner.wait(timeout=10)
        assert wait_gone(info["pgid"]), "engine group survived its owner's SIGKILL"
    finally:
        force_kill_group(info["pgid"])


def test_pdeathsig_alone_takes_down_the_direct_child(tmp_path: Path) -> None:
    owner, info = start_owner(tmp_path, pdeathsig=True, watchdog=False)
    try:
        owner.send_signal(signal.SIGKILL)
        owner.wait(timeout=10)
        assert pid_gone(info["pid"]), "server survived without the parent-death signal"
    finally:
        force_kill_group(info["pgid"])  # its grandchild is the watchdog's job


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_signalled_owner_tears_down_before_exiting(tmp_path: Path, signum: int) -> None:
    owner, info = start_owner(tmp_path, pdeathsig=False, watchdog=False)
    try:
        owner.send_signal(signum)
        owner.wait(timeout=20)
        # no watchdog, no pdeathsig: only the owner's own handler/atexit can have done it
        assert not group_members(info["pgid"])
    finally:
        force_kill_group(info["pgid"])


def test_ignored_sighup_leaves_owner_and_engine_running(tmp_path: Path) -> None:
    """Under nohup (SIGHUP ignored) a hang-up must not tear the engines down under a run that
    goes on."""

    def ignore_hup() -> None:
        signal.signal(signal.SIGHUP, signal.SIG_IGN)

    owner, info = start_owner(
        tmp_path, pdeathsig=False, watchdog=False, signals="keep", preexec_fn=ignore_hup
    )
    try:
        owner.send_signal(signal.SIGHUP)
        time.sleep(1.0)
        assert owner.poll() is None and group_members(info["pgid"])
    finally:
        owner.kill()
        owner.wait(timeout=10)
        force_kill_group(info["pgid"])


def test_launch_sweeps_before_starting(runtime: Path, tmp_path: Path) -> None:
    dead_owner, dead_ct = _dead_pid()
    orphan = _spawn_orphan_like()
    try:
        time.sleep(0.2)
        _write_entry(
            runtime,
            "cpu",
            pid=orphan.pid,
            pgid=orphan.pid,
            create_time=psutil.Process(orphan.pid).create_time(),
            owner_pid=dead_owner,
            owner_create_time=dead_ct,
        )
        port = free_port()
        with ServerProcess(server_cmd(port, grandchild=False), log_path=tmp_path / "l") as sp:
            sp.start(f"http://127.0.0.1:{port}/", 30)
            assert orphan.wait(timeout=10) is not None
    finally:
        force_kill_group(orphan.pid)


def test_stop_all_stops_live_servers(tmp_path: Path) -> None:
    port = free_port()
    sp = ServerProcess(server_cmd(port), log_path=tmp_path / "x.log", watchdog=False)
    sp.start(f"http://127.0.0.1:{port}/", 30)
    assert sp in proc_mod._LIVE
    proc_mod.stop_all()
    assert not group_members(sp.pgid) and sp not in proc_mod._LIVE
