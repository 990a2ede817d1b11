"""SglangEngine end to end against the stand-in, launched the way a real SGLang is: a fake
``sglang`` distribution on PYTHONPATH (tests/sglang_standin/fake_package.py) whose
``python -m sglang.launch_server`` serves the stand-in. Version lookup (package metadata),
command, ServerProcess start with /health_generate readiness, the resolved-topology check,
the engine record, the summary contract through ``measure`` and teardown are all real.
"""

from __future__ import annotations

import os
from pathlib import Path

import psutil
import pytest

from specperf.engines import sglang as sg
from specperf.engines.base import Devices, EngineSpec
from specperf.errors import EngineStartError
from specperf.measure import measure
from specperf.schemas import Dataset, PromptItem, SamplingParams, WorkloadSpec
from tests.sglang_standin import fake_package

START_TIMEOUT_S = 60.0


@pytest.fixture
def fake_sglang(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = fake_package.install(tmp_path / "site", "0.5.23")
    old = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", f"{root}{os.pathsep}{old}" if old else str(root))
    monkeypatch.setenv("SPECPERF_RUNTIME_DIR", str(tmp_path / "run"))
    sg.installed_version.cache_clear()
    yield root
    sg.installed_version.cache_clear()


def eagle3(*extra: str, label: str = "sglang-standin") -> EngineSpec:
    return EngineSpec(
        kind="sglang",
        label=label,
        model="/models/tiny",
        served_model_name="tiny",
        method="eagle3",
        num_speculative_tokens=3,
        topk=1,
        draft_model="/models/tiny-eagle3",
        extra_args=("--standin-startup-s", "1.0", *extra),
    )


def _dataset() -> Dataset:
    items = tuple(PromptItem(id=f"p{i}", category="c", turns=(f"q {i}",)) for i in range(6))
    return Dataset(name="standin", version="0", items=items)


def _gone(pid: int | None) -> bool:
    if pid is None:
        return True
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_engine_start_measure_record_stop(fake_sglang: Path, tmp_path: Path) -> None:
    spec = eagle3("--standin-accept-pattern", "3,1", "--standin-output-tokens", "16")
    engine = sg.SglangEngine(spec, Devices(), tmp_path / "logs")
    try:
        engine.start(START_TIMEOUT_S)
        assert engine.sglang_version is not None and str(engine.sglang_version) == "0.5.23"
        assert engine.command[1:3] == ["-m", "sglang.launch_server"]  # no bin/sglang here
        client = engine.client()
        summary = measure(
            client,
            _dataset(),
            SamplingParams(max_tokens=16),
            WorkloadSpec(concurrency=2, num_requests=4, warmup_requests=2),
            tmp_path / "run1",
            run_info={"method": "eagle3"},
            engine_record=engine.record(),
        )
        # pattern 3,1 on 16 tokens: prefill 1, then 4+2+4+2+3(truncated 4) → 5 verify steps,
        # correct drafts 3+1+3+1+3 = 11 (the verifier's count); from the counters:
        # accepted = gen − verify − requests = 16 − 5 − 1 = 10 per request
        assert summary["spec_decode_counters"]["drafts"] == 4 * 5
        assert summary["mean_acceptance_length"] == pytest.approx(1 + 10 / 5)
        rec = summary["environment"]["engine"]
        assert rec["version"] == "0.5.23"
        assert rec["server_config"]["speculative"]["speculative_num_draft_tokens"] == 4
        assert rec["server_config"]["requested_topology"]["num_steps"] == 3
        assert rec["startup_s"] >= 1.0
        pid = engine.server.pid if engine.server else None
    finally:
        engine.stop()
    assert _gone(pid)
    assert engine.record().version == "0.5.23"  # kept from the live server


def test_sglang_rewriting_the_topology_fails_the_start(fake_sglang: Path, tmp_path: Path) -> None:
    spec = eagle3("--standin-resolved-overrides", '{"speculative_num_draft_tokens": 5}')
    engine = sg.SglangEngine(spec, Devices(), tmp_path / "logs")
    with pytest.raises(EngineStartError, match="resolved the speculative topology"):
        engine.start(START_TIMEOUT_S)
    assert engine.server is not None and not engine.server.is_alive()


def test_server_dying_during_start_up_is_reported_with_its_log(
    fake_sglang: Path, tmp_path: Path
) -> None:
    spec = eagle3("--standin-startup-s", "30", "--standin-die-after-s", "0.5")
    engine = sg.SglangEngine(spec, Devices(), tmp_path / "logs")
    with pytest.raises(EngineStartError, match="exited with code 3") as err:
        engine.start(START_TIMEOUT_S)
    assert "dying as asked" in str(err.value)
