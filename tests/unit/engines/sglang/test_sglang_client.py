"""SglangClient against the stand-in server, which emits what SGLang's source defines per
version (tests/sglang_standin/server.py cites the files: 0.5.23 http_server.py,
observability/metrics_collector.py, scheduler_components/batch_result_processor.py,
entrypoints/openai/serving_chat.py; 0.5.2 http_server.py and metrics/collector.py).

Counters and MAL are checked EXACTLY against what the stand-in served.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from specperf.engines import detect_client
from specperf.engines import sglang as sg
from specperf.engines.process import wait_http_ok
from specperf.measure import measure
from specperf.schemas import Dataset, PromptItem, SamplingParams, WorkloadSpec
from specperf.workload import runner as workload_runner
from tests.sglang_standin.server import StandinConfig, StandinServer

EAGLE3_CHAIN = {"algorithm": "EAGLE3", "num_steps": 3, "topk": 1, "num_draft_tokens": 4}
EAGLE_TREE = {"algorithm": "EAGLE", "num_steps": 3, "topk": 2, "num_draft_tokens": 6}


@pytest.fixture
def standin(request: pytest.FixtureRequest) -> Iterator[StandinServer]:
    cfg = StandinConfig(**getattr(request, "param", {}))
    with StandinServer(cfg) as srv:
        yield srv


def chat(url: str, prompt: str, max_tokens: int, **extra: object) -> list[dict]:
    """One streamed chat request; returns the parsed chunks."""
    body = {
        "model": "standin-model",
        "messages": [{"role": "user", "content": prompt}],
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_tokens": max_tokens,
        "temperature": 0,
        **extra,
    }
    chunks = []
    with httpx.stream("POST", f"{url}/v1/chat/completions", json=body, timeout=30) as resp:
        for line in resp.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                chunks.append(json.loads(line[6:]))
    return chunks


def expected_tokens(pattern: list[int], depth: int, n_out: int) -> tuple[int, int]:
    """(verify steps, correct drafts) SGLang records for one request: prefill token first,
    then correct+1 tokens per verify step (truncated at n_out)."""
    emitted, steps, correct = 1, 0, 0
    while emitted < n_out:
        c = min(depth, pattern[steps % len(pattern)])
        emitted += c + 1
        correct += c
        steps += 1
    return steps, correct


@pytest.mark.parametrize(
    "standin", [{**EAGLE3_CHAIN, "startup_s": 2.0, "version": "0.5.23"}], indirect=True
)
def test_readiness_waits_for_health_generate(standin: StandinServer) -> None:
    assert httpx.get(f"{standin.url}{sg.HEALTH_PATH}").status_code == 503
    assert wait_http_ok(f"{standin.url}{sg.HEALTH_PATH}", 10, interval=0.1)


@pytest.mark.parametrize(
    "standin",
    [
        {**EAGLE3_CHAIN, "accept_pattern": [3, 0, 1, 2], "output_tokens": 23},
        {**EAGLE_TREE, "accept_pattern": [2, 3, 1], "output_tokens": 17},
    ],
    indirect=True,
)
def test_counter_deltas_give_exact_mal_without_the_prefill_token(standin: StandinServer) -> None:
    cfg = standin.state.cfg
    client = sg.SglangClient(standin.url, "standin-model")
    chat(standin.url, "warm up please", 8)
    before = client.counters()
    lengths = [23, 5, 1, 17]  # max_tokens; 1 = a request that never reaches a verify step
    for i, n in enumerate(lengths):
        chat(standin.url, f"prompt number {i}", n)
    delta = client.counters().minus(before)
    depth = cfg.num_draft_tokens - 1 if cfg.topk == 1 else cfg.num_steps
    outs = [min(n, cfg.output_tokens) for n in lengths]
    steps = [expected_tokens(cfg.accept_pattern, depth, n) for n in outs]
    verify = sum(s for s, _ in steps)
    assert delta.drafts == verify
    assert delta.generation_tokens == sum(outs)
    assert delta.accepted_tokens == sum(outs) - verify - len(outs)
    assert delta.draft_tokens == verify * depth
    assert dict(delta.extra)["sglang_proposed_draft_tokens"] == verify * (cfg.num_draft_tokens - 1)
    mal = 1 + delta.accepted_tokens / delta.drafts
    # SGLang's own Σcompletion/Σverify counts the prefill token; ours does not
    assert mal == pytest.approx((sum(outs) - len(outs)) / verify)
    assert mal < sum(outs) / verify
    assert client.notes()[0].startswith("SGLang acceptance from Prometheus deltas")


@pytest.mark.parametrize("standin", [{**EAGLE3_CHAIN}], indirect=True)
def test_flush_cache_resets_the_prefix_cache_and_is_refused_while_busy(
    standin: StandinServer,
) -> None:
    client = sg.SglangClient(standin.url, "standin-model")
    chat(standin.url, "same prompt twice", 4)
    chat(standin.url, "same prompt twice", 4)
    hits = client.counters().prefix_cache_hits
    assert hits and hits > 0
    assert client.reset_prefix_cache() is True
    before = client.counters()
    chat(standin.url, "same prompt twice", 4)
    assert client.counters().minus(before).prefix_cache_hits == 0
    standin.state.active = 1  # a request in flight: SGLang answers 400
    try:
        assert client.reset_prefix_cache() is False
    finally:
        standin.state.active = 0


@pytest.mark.parametrize("standin", [{**EAGLE3_CHAIN, "version": "0.5.2"}], indirect=True)
def test_old_server_info_endpoint_and_no_acceptance_on_0_5_2(standin: StandinServer) -> None:
    client = sg.SglangClient(standin.url, "standin-model")
    assert httpx.get(f"{standin.url}/server_info").status_code == 404
    assert client.version() == "0.5.2"  # read from /get_server_info
    assert client.topology == sg.Topology("EAGLE3", 3, 1, 4)
    before = client.counters()
    chat(standin.url, "a prompt", 12)
    delta = client.counters().minus(before)
    assert delta.drafts is None and delta.accepted_tokens is None
    assert delta.generation_tokens == 12
    body = client.adapt_request({"model": "m"})
    assert "return_spec_tokens_details" not in body  # 0.5.2 has no such field
    note = client.notes()[0]
    assert "SGLang 0.5.2 has no verify counter" in note and "avg_spec_accept_length" in note


@pytest.mark.parametrize(
    "standin", [{**EAGLE_TREE, "enable_metrics": False, "accept_pattern": [3, 1]}], indirect=True
)
def test_per_request_fallback_sums_spec_tokens_details(standin: StandinServer) -> None:
    """A 0.5.23 server started without --enable-metrics: no /metrics, so acceptance comes from
    each response's sglext.spec_tokens_details (entrypoints/openai/protocol.py)."""
    client = sg.SglangClient(standin.url, "standin-model")
    before = client.counters()
    assert client._mode == "per_request"
    body = client.adapt_request({"model": "m"})
    assert body["return_spec_tokens_details"] is True
    outs = [9, 14]
    for i, n in enumerate(outs):
        for ch in chat(standin.url, f"p{i}", n, **{k: v for k, v in body.items() if k != "model"}):
            client.observe_chunk(ch)
    delta = client.counters().minus(before)
    steps = [expected_tokens([3, 1], 3, n) for n in outs]
    assert delta.drafts == sum(s for s, _ in steps)
    assert delta.accepted_tokens == sum(c for _, c in steps)
    assert delta.draft_tokens == delta.drafts * 3  # depth (steps) for a tree
    # histogram → per position: position i accepted in steps that accepted > i drafts
    per_pos = delta.accepted_per_position
    assert per_pos is not None and sum(per_pos) == delta.accepted_tokens
    assert per_pos[0] == delta.drafts  # every step of pattern [3, 1] accepts position 0
    assert dict(delta.extra)["sglang_proposed_draft_tokens"] == delta.drafts * 5
    assert any("tree rates are not comparable" in n for n in client.notes())


@pytest.mark.parametrize("standin", [{**EAGLE3_CHAIN, "version": "0.5.2"}], indirect=True)
def test_detect_finds_sglang_by_its_server_info(standin: StandinServer) -> None:
    found = detect_client(standin.url + "/v1", None, None)
    assert isinstance(found, sg.SglangClient)
    assert found.model == "standin-model"
    assert found.base_url == standin.url


def test_detect_leaves_other_servers_alone() -> None:
    from tests.calibration.server import CalibrationConfig, CalibrationServer

    with CalibrationServer(CalibrationConfig()) as srv:
        assert sg.detect(srv.url, None, None) is None


def _dataset(n: int) -> Dataset:
    items = tuple(
        PromptItem(id=f"p{i}", category="c", turns=(f"prompt {i} " * (i + 1),)) for i in range(n)
    )
    return Dataset(name="standin", version="0", items=items)


@pytest.mark.parametrize(
    "standin", [{**EAGLE3_CHAIN, "accept_pattern": [2, 3, 0], "output_tokens": 20}], indirect=True
)
def test_measure_through_the_summary_contract(standin: StandinServer, tmp_path: Path) -> None:
    """`specperf bench --url` path: detected as SGLang, MAL the SGLang way, prefill excluded."""
    client = detect_client(standin.url, None, None)
    assert isinstance(client, sg.SglangClient)
    sampling = SamplingParams(max_tokens=20)
    wl = WorkloadSpec(concurrency=2, num_requests=6, warmup_requests=2)
    summary = measure(client, _dataset(8), sampling, wl, tmp_path, run_info={"method": "eagle3"})
    assert summary["engine"] == "sglang" and summary["engine_version"] == "0.5.23"
    assert summary["completed"] == 6 and summary["failed"] == 0
    steps, correct = expected_tokens([2, 3, 0], 3, 20)
    # every request runs the same pattern from its start: exact
    assert summary["spec_decode_counters"]["drafts"] == 6 * steps
    assert summary["mean_acceptance_length"] == pytest.approx(1 + correct / steps)
    assert summary["acceptance_rate"] == pytest.approx(correct / (3 * steps))
    assert summary["server_generation_tokens"] == 6 * 20
    assert summary["prefix_cache"]["reset"] is True
    assert standin.state.flushes == 1
    assert any("Prometheus deltas" in n for n in summary["notes"])


def _workload_feeds_observe_chunk() -> bool:
    return "observe_chunk" in inspect.getsource(workload_runner)


@pytest.mark.skipif(
    not _workload_feeds_observe_chunk(),
    reason="specperf/workload/runner.py does not call EngineClient.observe_chunk yet (measurement "
    "helper's file): the per-request fallback is tested on the client above",
)
@pytest.mark.parametrize(
    "standin", [{**EAGLE3_CHAIN, "enable_metrics": False, "accept_pattern": [1, 2]}], indirect=True
)
def test_measure_per_request_fallback(standin: StandinServer, tmp_path: Path) -> None:
    client = detect_client(standin.url, None, None)
    sampling = SamplingParams(max_tokens=15)
    wl = WorkloadSpec(concurrency=1, num_requests=3, warmup_requests=1)
    summary = measure(client, _dataset(5), sampling, wl, tmp_path, run_info={"method": "eagle3"})
    steps, correct = expected_tokens([1, 2], 3, 15)
    assert summary["spec_decode_counters"]["drafts"] == 3 * steps
    assert summary["mean_acceptance_length"] == pytest.approx(1 + correct / steps)


@pytest.mark.parametrize(
    "standin", [{**EAGLE_TREE, "accept_pattern": [1, 3], "output_tokens": 12}], indirect=True
)
def test_bench_url_reads_acceptance_the_sglang_way(
    standin: StandinServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`specperf bench --url` on SGLang: detected (no flag), MAL from SGLang's counters."""
    from specperf.cli import main

    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"prompt": f"question {i}"}) + "\n" for i in range(6)))
    out = tmp_path / "summary.json"
    rc = main(
        [
            "bench", "--url", standin.url, "--dataset", str(prompts), "--concurrency", "2",
            "--num-requests", "4", "--max-tokens", "12", "--output", str(out), "--quiet",
        ]
    )  # fmt: skip
    assert rc == 0, capsys.readouterr().err
    summary = json.loads(out.read_text())
    steps, _ = expected_tokens([1, 3], 3, 12)  # tree: depth = steps = 3
    assert summary["engine"] == "sglang"
    assert summary["spec_decode_counters"]["drafts"] == 4 * steps
    assert summary["mean_acceptance_length"] == pytest.approx(1 + (12 - 1 - steps) / steps)
    assert summary["acceptance_rate"] == pytest.approx((12 - 1 - steps) / (3 * steps))
    assert any("tree rates are not comparable" in n for n in summary["notes"])


@pytest.mark.parametrize(
    "standin", [{**EAGLE3_CHAIN, "version": "0.5.16", "accept_pattern": [1]}], indirect=True
)
def test_0_5_16_counts_with_metrics_and_has_no_per_request_fallback(
    standin: StandinServer,
) -> None:
    client = sg.SglangClient(standin.url, "standin-model")
    before = client.counters()
    chat(standin.url, "x", 9)  # prefill 1 + 4 steps of 2 tokens
    assert client.counters().minus(before).drafts == 4
    standin.state.cfg.enable_metrics = False  # the same version started without metrics
    bare = sg.SglangClient(standin.url, "standin-model")
    assert bare.counters().drafts is None
    assert "return_spec_tokens_details" not in bare.adapt_request({})
    assert "exposes no /metrics" in bare.notes()[0]
