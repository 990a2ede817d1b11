"""CPU placement (specperf.placement): the split, pinning a real process tree, the client's
cores, and the load record. Uses real child processes (no mocks); needs >= 2 CPUs for the
pinning tests, which skip with the reason otherwise."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from specperf import placement as pl
from specperf.errors import ConfigError

TWO_CPUS = len(os.sched_getaffinity(0)) >= 2
needs_two = pytest.mark.skipif(not TWO_CPUS, reason="needs 2 CPUs to split")

# a parent that starts one child; both sleep (a stand-in for API server -> engine core)
TREE = (
    "import subprocess, sys, time\n"
    "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
    "print(c.pid, flush=True)\n"
    "time.sleep(60)\n"
)


def test_plan_splits_frontend_from_engine():
    assert pl.plan((0, 1)) == pl.Placement(frontend=(0,), engine=(1,), compute=(1,))
    p = pl.plan((3, 2, 1, 0))
    assert p == pl.Placement(frontend=(0,), engine=(1, 2, 3), compute=(2, 3))
    assert pl.plan((0,)) is None  # nothing to split
    assert pl.plan((0, 1), mode="none") is None


def test_mode_from_env_wins_and_bad_values_are_one_line(monkeypatch):
    monkeypatch.delenv(pl.PLACEMENT_ENV, raising=False)
    assert pl.placement_mode(None) == "split"
    assert pl.placement_mode("none") == "none"
    monkeypatch.setenv(pl.PLACEMENT_ENV, "none")
    assert pl.placement_mode("split") == "none"
    monkeypatch.setenv(pl.PLACEMENT_ENV, "sideways")
    with pytest.raises(ConfigError, match="SPECPERF_CPU_PLACEMENT"):
        pl.placement_mode(None)


@needs_two
def test_apply_pins_leader_and_descendants_and_client_goes_off_the_engine():
    cpus = sorted(os.sched_getaffinity(0))[:2]
    proc = subprocess.Popen([sys.executable, "-c", TREE], stdout=subprocess.PIPE, text=True)
    child = 0
    try:
        assert proc.stdout is not None
        child = int(proc.stdout.readline())
        split = pl.plan(cpus)
        assert split is not None
        # before: nothing placed, the engine may use every core: the client is not pinned
        assert pl.client_cpus(proc.pid) is None
        done = pl.apply(proc.pid, split)
        assert [p["role"] for p in done["pinned"]] == ["frontend", "engine"]
        rec = pl.engine_affinity(proc.pid)
        assert rec is not None
        leader, kid = rec["processes"]
        assert leader["role"] == "api_server" and leader["cpus"] == [cpus[0]]
        assert kid["pid"] == child and kid["cpus"] == [cpus[1]]
        assert set(kid["thread_cpus"]) == {str(cpus[1])}
        # the client runs with the API server, off the engine's cores
        assert pl.client_cpus(proc.pid) == (cpus[0],)
    finally:
        if child:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGKILL)
        proc.kill()
        proc.wait(10)


def test_engine_affinity_of_a_missing_process_is_none():
    assert pl.engine_affinity(None) is None
    assert pl.client_cpus(None) is None


def test_pressure_file_and_load_over_an_item(tmp_path: Path):
    f = tmp_path / "cpu"
    f.write_text(
        "some avg10=1.50 avg60=0.50 avg300=0.10 total=1000000\n"
        "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
    )
    p = pl.read_pressure(f)
    assert p == {
        "some": {"avg10": 1.5, "avg60": 0.5, "avg300": 0.1, "total": 1e6},
        "full": {"avg10": 0.0, "avg60": 0.0, "avg300": 0.0, "total": 0.0},
    }
    assert pl.read_pressure(tmp_path / "missing") is None
    before = pl.LoadSnapshot(t=10.0, loadavg=(1.0, 1.0, 1.0), pressure=p)
    later = {"some": {**p["some"], "total": 1.5e6}, "full": p["full"]}
    after = pl.LoadSnapshot(t=12.0, loadavg=(2.0, 1.2, 1.0), pressure=later)
    out = pl.load_over(before, after)
    assert out["seconds"] == 2.0
    assert out["cpu_pressure_some_share"] == pytest.approx(0.25)  # 0.5 s stalled in 2 s
    assert out["cpu_pressure_full_share"] == 0.0
    assert out["loadavg_after"] == [2.0, 1.2, 1.0]


def test_live_snapshot_reads_this_machine():
    s = pl.LoadSnapshot.take()
    time.sleep(0.01)
    out = pl.load_over(s, pl.LoadSnapshot.take())
    assert out["seconds"] > 0 and len(out["loadavg_before"]) == 3
