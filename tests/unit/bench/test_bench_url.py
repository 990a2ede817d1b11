"""`specperf bench --url`: the engine is told by the counter names on
/metrics (vLLM or SGLang), /version is only a hint; a refused connection says "refused"; the
summary counts what was run; a run where nothing completed prints no table of dashes."""

from __future__ import annotations

import json
import socket

import pytest

from specperf import bench
from specperf.errors import SpecperfError
from tests.calibration.server import CalibrationConfig, CalibrationServer
from tests.sglang_standin.server import StandinConfig, StandinServer

# the bench tests' helpers and autouse fixture (fast counter settling), not a copy
from tests.unit.bench.test_bench import parse, prompts_file, quick_counter_settle  # noqa: F401


def prompts(tmp_path, n=4):
    return str(prompts_file(tmp_path, n))


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again when the block ends: nothing listens


def run(tmp_path, url, *extra):
    out = tmp_path / "run.json"
    argv = ["--url", url, "--dataset", prompts(tmp_path), "--output", str(out), "--quiet", *extra]
    rc = bench.run(parse(argv))
    return rc, json.loads(out.read_text())


def test_vllm_counters_without_version_still_give_acceptance(tmp_path, capsys):
    # K=3, 3 accepted at every step: MAL 4; /version answers 404
    cfg = CalibrationConfig(
        ttft_s=0.002,
        step_interval_s=0.002,
        num_speculative_tokens=3,
        accept_pattern=[3],
        output_tokens=21,
        version_endpoint=False,
    )
    with CalibrationServer(cfg) as srv:
        rc, s = run(tmp_path, srv.url, "--num-requests", "2", "--warmup", "0")
    assert rc == 0 and s["engine"] == "vllm"
    assert s["mean_acceptance_length"] == 4.0 and s["acceptance_rate"] == 1.0
    det = s["environment"]["detection"]
    assert det["detected_by"] == "/metrics counter names" and det["family"] == "vllm"
    assert det["version_hint"] is None
    assert "vllm:spec_decode_num_drafts_total" in det["spec_counter_names"]
    assert "2 requests at concurrency 1" in capsys.readouterr().out


def test_sglang_counter_names_pick_the_sglang_client(tmp_path):
    cfg = StandinConfig(algorithm="EAGLE3", num_steps=3, num_draft_tokens=4, accept_pattern=[2])
    with StandinServer(cfg) as srv:
        client, found = bench.connect(srv.url, None, None)
    assert found.family == "sglang" and client.kind == "sglang"
    assert client.model == "standin-model"


def test_unknown_server_falls_back_to_generic(tmp_path):
    # no metrics at all: the SGLang stand-in without --enable-metrics is still found by its
    # server info (the engine detectors); the probe itself says no known counters
    with StandinServer(StandinConfig(enable_metrics=False)) as srv:
        _client, found = bench.connect(srv.url, None, None)
    assert found.family is None and found.record()["detected_by"] == "no known counters"


def test_refused_connection_says_refused(tmp_path):
    port = closed_port()
    with pytest.raises(SpecperfError, match=r"refused \(nothing accepts connections at"):
        bench.run(parse(["--url", f"http://127.0.0.1:{port}", "--model", "m", "--dataset",
                         prompts(tmp_path), "--output", str(tmp_path / "o.json")]))  # fmt: skip


def test_nothing_completed_prints_no_table(tmp_path, capsys):
    cfg = CalibrationConfig(ttft_s=0.002, step_interval_s=0.001, output_tokens=4, fail_every=1)
    with CalibrationServer(cfg) as srv:
        rc, s = run(tmp_path, srv.url, "--num-requests", "2", "--warmup", "0")
    out = capsys.readouterr().out
    assert rc == 1 and s["completed"] == 0 and s["num_requests"] == 2
    assert "nothing completed: 0 of 2 requests (2 failed, 0 not sent)" in out
    assert "- / - / -" not in out and "TTFT ms" not in out
    assert "2 requests at concurrency 1, prompts from" in out  # what was run, not the set size
    assert "(4 in the set)" in out
