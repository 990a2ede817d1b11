"""Metric definitions (design.md) on hand-made records, and exact counters/MAL end to end
through the calibration server."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from specperf.metrics import acceptance, evalscope_estimate, stats, summarize
from specperf.schemas import Counters, PromptItem, RequestRecord, SamplingParams, WorkloadSpec
from specperf.workload import WorkloadResult, run_workload
from tests.calibration.client import CalibrationClient
from tests.calibration.server import CalibrationConfig, CalibrationServer, plan_steps

# Timing checks on a shared, often overloaded 2-core machine: generous, in one place. Nothing
# can arrive before the server sent it (lower bounds are tight); scheduling delays only add.
TIMING_RTOL = 0.5
TIMING_SLACK_MS = 250.0


@pytest.fixture(autouse=True)
def quick_counter_settle(monkeypatch):
    monkeypatch.setattr("specperf.workload.COUNTER_SETTLE_INTERVAL_S", 0.05)


def rec(i, *, sent, ttft, chunks, tokens, source="usage", error=None, finish="stop"):
    return RequestRecord(
        index=i,
        prompt_id=f"p{i}",
        category="c",
        sent_s=sent,
        ttft_s=ttft,
        e2e_s=chunks[-1] if chunks else None,
        chunk_times_s=list(chunks),
        output_tokens=tokens,
        output_tokens_source=source,
        error=error,
        finish_reason=None if error else finish,
    )


def result(records, *, before=None, after=None, duration=None, **kw):
    dur = duration if duration is not None else max(r.sent_s + (r.e2e_s or 0) for r in records)
    return WorkloadResult(
        records=records,
        duration_s=dur,
        before=before or Counters(),
        after=after or Counters(),
        order=[r.prompt_id for r in records],
        repeat_factor=1.0,
        warmup=0,
        prefix_cache_reset=True,
        engine_died=False,
        num_requests=len(records),
        **kw,
    )


# -- definitions on hand-made numbers --------------------------------------------------------


def test_acceptance_formulas():
    d = Counters(drafts=10, draft_tokens=30, accepted_tokens=18, accepted_per_position=(8, 6, 4))
    a = acceptance(d)
    assert a["acceptance_rate"] == 18 / 30
    assert a["mean_acceptance_length"] == 1 + 18 / 10
    assert a["per_position_acceptance"] == [0.8, 0.6, 0.4]


def test_acceptance_is_null_without_counters_or_drafts():
    assert acceptance(Counters())["mean_acceptance_length"] is None
    zero = acceptance(Counters(drafts=0, draft_tokens=0, accepted_tokens=0))
    assert zero["acceptance_rate"] is None and zero["mean_acceptance_length"] is None


def test_evalscope_estimate_averages_L_over_requests_with_L_above_one():
    r1 = rec(0, sent=0, ttft=0.1, chunks=[0.1, 0.2, 0.3], tokens=7)  # L = 6/2 = 3
    r2 = rec(1, sent=0, ttft=0.1, chunks=[0.1, 0.2, 0.3, 0.4, 0.5], tokens=5)  # L = 1: left out
    r3 = rec(2, sent=0, ttft=0.1, chunks=[0.1, 0.2], tokens=3)  # L = 2
    est = evalscope_estimate([r1, r2, r3])
    assert est["decoded_tokens_per_iter"] == 2.5 and est["requests"] == 2
    assert est["acceptance_rate"] == pytest.approx(1 - 1 / 2.5)


def test_stats_percentiles():
    s = stats([1, 2, 3, 4], scale=1000)
    assert s["mean"] == 2500 and s["p50"] == 2500 and s["n"] == 4
    assert stats([])["mean"] is None


def test_summary_definitions():
    records = [
        rec(0, sent=0.0, ttft=0.1, chunks=[0.1, 0.2, 0.4], tokens=9),
        rec(1, sent=0.5, ttft=0.2, chunks=[0.2, 0.3], tokens=5),
        rec(2, sent=0.6, ttft=None, chunks=[], tokens=0, error="HTTP 500: boom"),
    ]
    before = Counters(
        drafts=5,
        draft_tokens=15,
        accepted_tokens=3,
        accepted_per_position=(2, 1, 0),
        generation_tokens=100,
    )
    after = Counters(
        drafts=9,
        draft_tokens=27,
        accepted_tokens=11,
        accepted_per_position=(6, 3, 2),
        generation_tokens=114,
    )
    s = summarize(
        result(records, before=before, after=after, duration=1.0),
        run_info={"method": "eagle3", "engine": "vllm"},
    )
    assert s["completed"] == 2 and s["failed"] == 1
    assert s["errors"] == ["p2#1: HTTP 500: boom"]
    assert s["output_tokens"] == 14 and s["output_throughput_tok_s"] == 14.0
    assert s["ttft_ms"]["mean"] == pytest.approx(150.0)
    # TPOT = (E2E − TTFT)/(tokens − 1)
    assert s["tpot_ms"]["mean"] == pytest.approx(((0.4 - 0.1) / 8 + (0.3 - 0.2) / 4) / 2 * 1000)
    assert s["itl_ms"]["n"] == 3 and s["itl_ms"]["mean"] == pytest.approx(400 / 3)
    assert s["e2e_ms"]["p50"] == pytest.approx(350.0)
    assert s["tokens_per_chunk"] == 14 / 5
    assert s["output_tok_s"]["max"] == pytest.approx(9 / 0.4)  # tokens / E2E
    assert s["output_tok_s"]["min"] == pytest.approx(5 / 0.3)
    assert s["decode_tok_s"]["min"] == pytest.approx(8 / 0.3)
    assert s["mean_acceptance_length"] == 1 + 8 / 4
    assert s["acceptance_rate"] == 8 / 12
    assert s["per_position_acceptance"] == [1.0, 0.5, 0.5]
    assert s["server_generation_tokens"] == 14 and s["generation_tokens_mismatch"] == 0
    assert s["output_length"]["finish_reasons"] == {"stop": 2}
    assert s["engine"] == "vllm" and s["method"] == "eagle3"


def test_native_runs_have_null_acceptance_and_say_so():
    records = [rec(0, sent=0, ttft=0.1, chunks=[0.1, 0.2], tokens=2)]
    c = Counters(drafts=1, draft_tokens=1, accepted_tokens=1)
    s = summarize(
        result(records, before=Counters(drafts=0, draft_tokens=0, accepted_tokens=0), after=c),
        run_info={"method": "native"},
    )
    assert s["mean_acceptance_length"] is None and s["acceptance_rate"] is None
    assert any("native" in n for n in s["notes"])
    s2 = summarize(result(records), run_info={"method": "eagle3"})
    assert s2["mean_acceptance_length"] is None
    assert any("no speculative-decoding counters" in n for n in s2["notes"])


def test_generation_token_mismatch_is_reported_not_hidden():
    records = [rec(0, sent=0, ttft=0.1, chunks=[0.1, 0.2], tokens=10)]
    s = summarize(
        result(records, before=Counters(generation_tokens=0), after=Counters(generation_tokens=12)),
        run_info={},
    )
    assert s["generation_tokens_mismatch"] == 2
    assert any("differs from the client's usage sum" in n for n in s["notes"])


def test_client_counted_tokens_are_flagged():
    records = [rec(0, sent=0, ttft=0.1, chunks=[0.1, 0.2], tokens=2, source="client")]
    s = summarize(result(records), run_info={})
    assert s["output_tokens_source"] == {"client": 1}
    assert any("counted by the client" in n for n in s["notes"])


# -- exact counters and MAL through the calibration server -----------------------------------


def measure_on(cfg, n=8, concurrency=4, method="eagle3", **wl):
    items = tuple(PromptItem(id=f"q{i}", category="c", turns=(f"question {i}",)) for i in range(n))
    with CalibrationServer(cfg) as srv:
        client = CalibrationClient(srv.url)
        res = asyncio.run(
            run_workload(
                client,
                items,
                SamplingParams(max_tokens=512),
                WorkloadSpec(concurrency=concurrency, num_requests=n, **wl),
            )
        )
        return summarize(res, run_info={"method": method}), res, srv.stats()


def test_pattern_acceptance_is_exact():
    # K=3, accepted per step 3,1,2 (cycled), 40 tokens: 1 prefill token + 39 in steps of 4,2,3
    # → 13 steps (the last one has 3 tokens): accepted 26, drafts 13, draft tokens 39;
    # per position: 13, 9, 4 steps accepted at least 1, 2, 3 drafts.
    cfg = CalibrationConfig(
        ttft_s=0.002,
        step_interval_s=0.001,
        num_speculative_tokens=3,
        accept_pattern=[3, 1, 2],
        output_tokens=40,
    )
    assert plan_steps(cfg, 40, None) == [1, *[4, 2, 3] * 4, 3]  # type: ignore[arg-type]
    s, _res, _ = measure_on(cfg, n=8)
    assert s["completed"] == 8
    assert s["spec_decode_counters"]["drafts"] == 13 * 8
    assert s["spec_decode_counters"]["draft_tokens"] == 39 * 8
    assert s["spec_decode_counters"]["accepted_tokens"] == 26 * 8
    assert s["mean_acceptance_length"] == 3.0
    assert s["acceptance_rate"] == 26 / 39
    assert s["per_position_acceptance"] == [1.0, 9 / 13, 4 / 13]
    assert s["server_generation_tokens"] == 40 * 8 == s["output_tokens"]
    assert s["generation_tokens_mismatch"] == 0
    assert s["tokens_per_chunk"] == 40 / 14
    assert s["evalscope_estimate"]["decoded_tokens_per_iter"] == 39 / 13


def test_probabilistic_acceptance_is_reproducible_and_consistent():
    cfg = CalibrationConfig(
        ttft_s=0.002,
        step_interval_s=0.001,
        num_speculative_tokens=4,
        accept_prob=0.6,
        output_tokens=30,
        output_tokens_max=60,
        seed=5,
    )
    s1, _, _ = measure_on(cfg, n=10)
    s2, _, _ = measure_on(cfg, n=10, concurrency=2)
    assert s1["spec_decode_counters"] == s2["spec_decode_counters"]  # seeded per prompt
    c = s1["spec_decode_counters"]
    assert c["draft_tokens"] == 4 * c["drafts"]
    ppa = s1["per_position_acceptance"]
    assert all(a >= b for a, b in itertools.pairwise(ppa))  # prefix acceptance: non-increasing
    assert sum(c["accepted_per_position"]) == c["accepted_tokens"]
    assert s1["mean_acceptance_length"] == 1 + c["accepted_tokens"] / c["drafts"]
    assert s1["server_generation_tokens"] == s1["output_tokens"]


def test_native_server_has_no_spec_series():
    cfg = CalibrationConfig(ttft_s=0.002, step_interval_s=0.001, output_tokens=10)
    s, _, _ = measure_on(cfg, n=4, method=None)
    assert s["spec_decode_counters"]["drafts"] is None and s["mean_acceptance_length"] is None
    assert s["tokens_per_chunk"] == 1.0
    assert s["server_generation_tokens"] == 40


def test_timings_follow_the_server_settings():
    cfg = CalibrationConfig(
        ttft_s=0.05,
        step_interval_s=0.01,
        num_speculative_tokens=2,
        accept_pattern=[2],
        output_tokens=31,
    )
    s, _, server = measure_on(cfg, n=4, concurrency=2)
    # 31 tokens: 1 prefill + 10 steps of 3: E2E ≈ 50 + 10·10 ms; TPOT = 100 ms / 30; ITL = 10 ms
    assert 50 * 0.95 <= s["ttft_ms"]["mean"] <= 50 + TIMING_SLACK_MS
    assert 150 * 0.95 <= s["e2e_ms"]["mean"] <= 150 + TIMING_SLACK_MS
    assert s["itl_ms"]["mean"] == pytest.approx(10, rel=TIMING_RTOL)
    assert s["tpot_ms"]["mean"] == pytest.approx(100 / 30, rel=TIMING_RTOL)
    assert s["tokens_per_chunk"] == 31 / 11
    # what the client saw vs what the server emitted
    assert s["tpot_ms"]["mean"] == pytest.approx(server["mean_tpot_ms"], rel=TIMING_RTOL)
