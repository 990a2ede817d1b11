"""Delivery artefacts: bursts are flagged, engine-side chunking is not.

The positive case is the calibration server writing a request's chunks in one burst (made on
schedule, handed to the socket together); the negative controls are its normal schedule, with
and without speculative-decoding chunks (several tokens per chunk is NOT a burst)."""

from __future__ import annotations

import asyncio

from specperf.delivery import (
    BURST_GAP_S,
    DELIVERY_BOUND_SHARE,
    delivery_summary,
    request_bursts,
)
from specperf.metrics import summarize
from specperf.schemas import PromptItem, RequestRecord, SamplingParams, WorkloadSpec
from specperf.workload import run_workload
from tests.calibration.client import CalibrationClient
from tests.calibration.server import CalibrationConfig, CalibrationServer


def rec(i: int, chunks: list[float], turn: int = 1) -> RequestRecord:
    return RequestRecord(
        index=i,
        prompt_id=f"p{i}",
        category="c",
        turn=turn,
        ttft_s=chunks[0],
        e2e_s=chunks[-1],
        chunk_times_s=chunks,
        output_tokens=len(chunks),
        output_tokens_source="usage",
        finish_reason="stop",
    )


def paced(n: int, start: float = 0.05, gap: float = 0.004) -> list[float]:
    return [start + k * gap for k in range(n)]


def burst(n: int, start: float = 0.18, gap: float = 0.000005) -> list[float]:
    return [start + k * gap for k in range(n)]


def test_paced_chunks_are_not_a_burst():
    d = request_bursts(paced(64))
    assert d["evaluated"] and not d["burst"]
    assert d["burst_gap_share"] == 0.0


def test_all_chunks_in_one_read_is_a_burst():
    # 64 chunks within 0.3 ms, 180 ms after sending
    d = request_bursts(burst(64))
    assert d["burst"] and d["burst_gap_share"] == 1.0 and d["largest_burst_share"] == 1.0


def test_most_of_the_output_in_one_read_is_a_burst():
    # 10 paced chunks, then the remaining 40 at once: most gaps fast AND one burst of 41 chunks
    chunks = paced(10) + burst(40, start=0.5)
    d = request_bursts(chunks)
    assert d["burst"] and d["largest_burst_share"] > 0.5


def test_a_few_coalesced_reads_are_not_a_burst():
    # pairs of chunks in one read now and then (a client briefly behind): 5 of 63 gaps
    chunks = paced(64)
    for k in (10, 20, 30, 40, 50):
        chunks[k] = chunks[k - 1] + 0.00001
    d = request_bursts(chunks)
    assert not d["burst"] and 0 < d["burst_gap_share"] < 0.1


def test_short_outputs_are_not_evaluated():
    assert not request_bursts(burst(3))["evaluated"]
    s = delivery_summary([rec(0, burst(2))])
    assert s["bound"] is False and s["burst_request_share"] is None
    assert s["reason"].startswith("not evaluated")


def test_item_is_bound_when_a_quarter_or_more_of_the_requests_burst():
    # half the requests (the turn-2 ones in the issue) bursty: bound, with a one-line reason
    recs = [rec(i, paced(64)) for i in range(4)] + [rec(i, burst(64), turn=2) for i in range(4)]
    s = delivery_summary(recs)
    assert s["bound"] is True and s["burst_request_share"] == 0.5
    assert "\n" not in s["reason"] and "4 of 8 requests" in s["reason"]
    assert s["burst_request_ids"] == ["p0#2", "p1#2", "p2#2", "p3#2"]
    # one of eight: below the share, not bound, still said
    recs = [rec(i, paced(64)) for i in range(7)] + [rec(7, burst(64))]
    s = delivery_summary(recs)
    assert s["bound"] is False and s["burst_request_share"] == 1 / 8 < DELIVERY_BOUND_SHARE
    assert "1 of 8" in s["reason"]


def test_failed_requests_are_left_out():
    bad = rec(1, burst(64))
    bad.error = "HTTP 500"
    s = delivery_summary([rec(0, paced(64)), bad])
    assert s["requests_evaluated"] == 1 and s["bound"] is False


# -- end to end through the calibration server -------------------------------------------------


def measure(cfg: CalibrationConfig, n: int = 8, concurrency: int = 4) -> dict:
    items = tuple(PromptItem(id=f"q{i}", category="c", turns=(f"question {i}",)) for i in range(n))
    with CalibrationServer(cfg) as srv:
        res = asyncio.run(
            run_workload(
                CalibrationClient(srv.url),
                items,
                SamplingParams(max_tokens=512),
                WorkloadSpec(concurrency=concurrency, num_requests=n, warmup_requests=0),
            )
        )
    return summarize(res, run_info={"method": "native"})


def test_calibration_server_bursts_are_flagged():
    # every request's 64 chunks made at 3 ms a step but written in one burst at the end
    cfg = CalibrationConfig(ttft_s=0.01, step_interval_s=0.003, output_tokens=64, burst_chunks=64)
    s = measure(cfg)
    assert s["completed"] == 8
    d = s["delivery"]
    assert d["bound"] is True and d["burst_request_share"] == 1.0, d
    assert any(n.startswith("delivery-bound:") for n in s["notes"])
    # the TPOT such an item reports is physically impossible for the schedule it was made on
    assert s["tpot_ms"]["p50"] < BURST_GAP_S * 1000 < 3.0


# The negative controls pace chunks 10 ms apart: the server runs in this process (a thread), so
# on a loaded 2-core machine a tighter schedule could really reach the client in bursts.
def test_calibration_server_normal_schedule_is_not_flagged():
    cfg = CalibrationConfig(ttft_s=0.01, step_interval_s=0.01, output_tokens=32)
    d = measure(cfg)["delivery"]
    assert d["bound"] is False and d["burst_request_share"] == 0.0, d


def test_speculative_chunks_are_not_bursts():
    # K=3, all accepted: 4 tokens per chunk, one chunk per 10 ms verify step
    cfg = CalibrationConfig(
        ttft_s=0.01,
        step_interval_s=0.01,
        num_speculative_tokens=3,
        accept_pattern=[3],
        output_tokens=65,
    )
    s = measure(cfg)
    assert s["tokens_per_chunk"] > 3.5
    assert s["delivery"]["bound"] is False and s["delivery"]["burst_request_share"] == 0.0
