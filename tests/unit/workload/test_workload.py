"""The workload runner against the calibration server: protocol, failures, bounds."""

from __future__ import annotations

import asyncio
import threading
import time

import httpx
import pytest

from specperf.errors import ConfigError
from specperf.schemas import PromptItem, SamplingParams, WorkloadSpec
from specperf.workload import WARMUP_PROMPTS, plan_requests, rank_items, run_workload
from tests.calibration.client import CalibrationClient
from tests.calibration.server import CalibrationConfig, CalibrationServer

FAST = dict(ttft_s=0.005, step_interval_s=0.001, output_tokens=8)


def items(n: int, prefix: str = "p") -> tuple[PromptItem, ...]:
    return tuple(
        PromptItem(id=f"{prefix}{i}", category="c", turns=(f"prompt {i}",)) for i in range(n)
    )


def run(client, its, sampling=None, **wl):
    sampling = sampling or SamplingParams(max_tokens=32)
    return asyncio.run(run_workload(client, its, sampling, WorkloadSpec(**wl)))


@pytest.fixture(autouse=True)
def quick_counter_settle(monkeypatch):
    monkeypatch.setattr("specperf.workload.COUNTER_SETTLE_INTERVAL_S", 0.05)


@pytest.fixture
def server():
    with CalibrationServer(CalibrationConfig(**FAST)) as srv:
        yield srv


def sent_bodies(srv):
    return httpx.get(f"{srv.url}/debug/requests", trust_env=False).json()


# -- plan ------------------------------------------------------------------------------------


def test_order_is_hash_ranked_and_independent_of_input_order():
    its = items(10)
    _plan_a, order_a, rf, _ = plan_requests(its, 10, seed=7)
    _plan_b, order_b, _, _ = plan_requests(tuple(reversed(its)), 10, seed=7)
    assert order_a == order_b
    assert sorted(order_a) == sorted(i.id for i in its)  # no repeats
    assert rf == 1.0
    _, order_c, _, _ = plan_requests(its, 10, seed=8)
    assert order_c != order_a
    assert [i.id for i in rank_items(its, 7)] == order_a


def test_smaller_set_cycles_and_records_repeat_factor():
    its = items(4)
    _, order, rf, unmeasured = plan_requests(its, 10, seed=0)
    assert len(order) == 10 and rf == pytest.approx(2.5)
    assert order[:4] == order[4:8] == [i.id for i in rank_items(its, 0)]
    assert unmeasured == []


def test_larger_set_leaves_unmeasured_items_for_warmup():
    its = items(10)
    plan, _order, _, unmeasured = plan_requests(its, 6, seed=0)
    assert {p.item.id for p in plan}.isdisjoint({u.id for u in unmeasured})
    assert len(unmeasured) == 4


def test_multi_turn_counts_turns_and_truncates_last_conversation():
    its = tuple(PromptItem(id=f"m{i}", category="c", turns=("a", "b")) for i in range(3))
    plan, order, rf, _ = plan_requests(its, 5, seed=0)
    assert len(order) == 5
    assert [c.turns for c in plan] == [2, 2, 1]
    assert order[1] == f"{plan[0].item.id}#2"
    assert rf == 1.0


@pytest.mark.parametrize("bad", [(), items(2) + items(1)])
def test_bad_sets_are_config_errors(bad):
    with pytest.raises(ConfigError):
        plan_requests(bad, 3, seed=0)


# -- protocol against the calibration server -------------------------------------------------


def test_every_sampling_field_and_streaming_options_are_sent(server):
    client = CalibrationClient(server.url)
    sp = SamplingParams(
        temperature=0.6, top_p=0.95, top_k=20, min_p=0.0, seed=3, max_tokens=16, thinking=True
    )
    res = run(client, items(3), sp, concurrency=1, num_requests=3, warmup_requests=0)
    assert len(res.records) == 3 and all(r.ok for r in res.records)
    for body in sent_bodies(server):
        assert body["model"] == "calibration-model"
        assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
        for key, val in sp.body().items():
            assert body[key] == val, key
        assert body["chat_template_kwargs"] == {"enable_thinking": True}


def test_same_order_on_every_run_and_warmup_outside_measured_set(server):
    client = CalibrationClient(server.url)
    its = items(12)
    res1 = run(client, its, concurrency=1, num_requests=6, warmup_requests=3)
    bodies1 = sent_bodies(server)
    res2 = run(client, its, concurrency=1, num_requests=6, warmup_requests=3)
    assert res1.order == res2.order and res1.order_hash == res2.order_hash
    assert [r.prompt_id for r in res1.records] == res1.order  # serial: sent in order
    warm = [b["messages"][-1]["content"] for b in bodies1[:3]]
    measured = [b["messages"][-1]["content"] for b in bodies1[3:]]
    assert set(warm).isdisjoint(measured)
    assert res1.warmup == 3 and len(res1.records) == 6


def test_builtin_warmup_prompts_when_the_whole_set_is_measured(server):
    client = CalibrationClient(server.url)
    res = run(client, items(2), concurrency=2, num_requests=4)
    bodies = sent_bodies(server)
    assert res.warmup == 2  # default: one per slot
    assert {b["messages"][-1]["content"] for b in bodies[:2]} <= set(WARMUP_PROMPTS)


def test_closed_loop_keeps_exactly_n_in_flight():
    cfg = CalibrationConfig(ttft_s=0.01, step_interval_s=0.005, output_tokens=10)
    with CalibrationServer(cfg) as srv:
        client = CalibrationClient(srv.url)
        res = run(client, items(16), concurrency=4, num_requests=16, warmup_requests=0)
        assert srv.stats()["max_active"] == 4
        assert len(res.records) == 16 and res.duration_s > 0
        httpx.post(f"{srv.url}/stats/reset", trust_env=False)
        run(client, items(4), concurrency=1, num_requests=4, warmup_requests=0)
        assert srv.stats()["max_active"] == 1


def test_counter_window_excludes_warmup_and_prefix_cache_is_reset(server):
    client = CalibrationClient(server.url)
    its = items(8)
    # same prompts twice: without a reset the second run would hit the prefix cache
    run(client, its, concurrency=2, num_requests=4, warmup_requests=0, prefix_cache="keep")
    res = run(client, its, concurrency=2, num_requests=4, warmup_requests=2)
    delta = res.after.minus(res.before)
    assert res.prefix_cache_reset is True
    assert delta.generation_tokens == sum(r.output_tokens for r in res.records)  # no warmup
    assert delta.prefix_cache_hits == 0
    res_keep = run(
        client, its, concurrency=2, num_requests=4, warmup_requests=0, prefix_cache="keep"
    )
    assert res_keep.prefix_cache_reset is None
    assert res_keep.after.minus(res_keep.before).prefix_cache_hits > 0


def test_reset_unavailable_is_recorded(server):
    server.update(reset_endpoint=False)
    res = run(CalibrationClient(server.url), items(2), num_requests=2, warmup_requests=0)
    assert res.prefix_cache_reset is False
    assert any("prefix cache could not be reset" in n for n in res.notes)


def test_multi_turn_sends_the_models_own_answer(server):
    conv = PromptItem(
        id="mt", category="c", turns=("first question", "second question"), system="be brief"
    )
    res = run(CalibrationClient(server.url), (conv,), num_requests=2, warmup_requests=0)
    assert [r.turn for r in res.records] == [1, 2]
    assert res.order == ["mt", "mt#2"]
    second = sent_bodies(server)[-1]["messages"]
    assert [m["role"] for m in second] == ["system", "user", "assistant", "user"]
    assert second[2]["content"] == res.records[0].text != ""


def test_reasoning_counts_for_ttft_and_is_kept_apart(server):
    server.update(reasoning_tokens=3, ttft_s=0.05)
    res = run(CalibrationClient(server.url), items(1), num_requests=1, warmup_requests=0)
    rec = res.records[0]
    assert rec.reasoning_text == " r0 r1 r2"
    assert rec.text.startswith(" t3")
    assert rec.ttft_s == pytest.approx(rec.chunk_times_s[0])
    assert 0.04 < rec.ttft_s < 1.0


def test_usage_only_chunk_does_not_move_e2e(server):
    server.update(usage_delay_s=0.3, step_interval_s=0.002, output_tokens=5)
    t = time.perf_counter()
    res = run(CalibrationClient(server.url), items(1), num_requests=1, warmup_requests=0)
    rec = res.records[0]
    assert rec.output_tokens_source == "usage" and rec.output_tokens == 5
    assert rec.e2e_s is not None and rec.e2e_s < 0.25
    assert time.perf_counter() - t >= 0.3


def test_output_tokens_fall_back_to_client_count_without_usage(server):
    server.update(usage=False, num_speculative_tokens=2, accept_pattern=[2], output_tokens=7)
    res = run(CalibrationClient(server.url), items(1), num_requests=1, warmup_requests=0)
    rec = res.records[0]
    assert rec.output_tokens_source == "client"
    assert rec.output_tokens == 3  # 1 + 3 + 3 tokens in 3 content chunks: chunks counted
    res_ids = run(
        CalibrationClient(server.url, token_ids=True), items(1), num_requests=1, warmup_requests=0
    )
    rec = res_ids.records[0]
    assert rec.output_tokens_source == "client" and rec.output_tokens == 7  # token ids counted
    assert rec.token_ids == [3, 4, 5, 6, 7, 8, 9] and rec.chunk_tokens == [1, 3, 3]


def test_http_errors_are_recorded_and_counted(server):
    server.update(fail_every=3)
    res = run(CalibrationClient(server.url), items(6), num_requests=6, warmup_requests=0)
    failed = [r for r in res.records if not r.ok]
    assert len(failed) == 2 and len(res.records) == 6
    assert all(r.error.startswith("HTTP 500") and "injected failure" in r.error for r in failed)


def test_stall_timeout_fails_the_request_quickly(server):
    server.update(stall_after_chunks=2, stall_s=5.0, output_tokens=6)
    t = time.perf_counter()
    res = run(
        CalibrationClient(server.url),
        items(1),
        num_requests=1,
        warmup_requests=0,
        stall_timeout_s=0.3,
    )
    assert time.perf_counter() - t < 3.0
    assert res.records[0].error.startswith("stall timeout")
    assert len(res.records[0].chunk_times_s) == 2  # what arrived before the stall is kept


def test_request_timeout(server):
    server.update(step_interval_s=0.05, output_tokens=100)
    res = run(
        CalibrationClient(server.url),
        items(1),
        num_requests=1,
        warmup_requests=0,
        request_timeout_s=0.3,
    )
    assert res.records[0].error.startswith("request timeout")


def test_abort_mid_stream_is_a_failed_request(server):
    server.update(abort_after_chunks=2, output_tokens=10)
    res = run(CalibrationClient(server.url), items(2), num_requests=2, warmup_requests=0)
    assert all(not r.ok for r in res.records)


def test_item_deadline_ends_the_item_and_counts_unsent(server):
    server.update(step_interval_s=0.02, output_tokens=150)  # 3 s per request
    t = time.perf_counter()
    res = run(
        CalibrationClient(server.url),
        items(20),
        SamplingParams(max_tokens=400),
        concurrency=2,
        num_requests=20,
        warmup_requests=0,
        item_deadline_s=2.0,
    )
    assert time.perf_counter() - t < 6.0
    assert res.stop_reason == "item deadline exceeded"
    assert res.not_sent > 0
    assert len(res.records) + res.not_sent == 20
    assert any(r.error and r.error.startswith("cancelled") for r in res.records)


def test_dead_engine_ends_the_item_at_once():
    srv = CalibrationServer(CalibrationConfig(ttft_s=0.01, step_interval_s=0.02, output_tokens=200))
    srv.start()
    client = CalibrationClient(srv.url)
    threading.Timer(1.0, srv.stop).start()
    t = time.perf_counter()
    res = run(
        client,
        items(50),
        SamplingParams(max_tokens=400),
        concurrency=4,
        num_requests=50,
        warmup_requests=0,
    )
    assert time.perf_counter() - t < 8.0
    assert res.engine_died is True
    assert res.not_sent > 0 and all(not r.ok for r in res.records)
    assert any("engine died" in n for n in res.notes)


def test_bad_workload_is_a_config_error(server):
    with pytest.raises(ConfigError, match="concurrency"):
        run(CalibrationClient(server.url), items(1), concurrency=0, num_requests=1)


# -- the SSE reader ------------------------------------------------------------------------------


def test_sse_data_splits_events_across_reads_and_line_ends():
    from specperf.workload import SSEData

    sse = SSEData()
    assert sse.feed(b'data: {"a": 1}\n\nda') == [b'{"a": 1}']
    assert sse.feed(b"ta: x\n") == []  # incomplete event: nothing yet
    assert sse.feed(b"\n: a comment\n\ndata: [DONE]\n\n") == [b"x", b"[DONE]"]
    crlf = SSEData()
    assert crlf.feed(b"data: one\r") == []  # a CR at the end may be half of a CRLF
    assert crlf.feed(b"\n\r\ndata:two\r\n\r\n") == [b"one", b"two"]
    multi = SSEData()
    assert multi.feed(b"event: x\ndata: l1\ndata: l2\nid: 3\n\nevent: ping\n\n") == [b"l1\nl2"]


def test_reads_timed_at_the_select_follow_the_schedule():
    """run_timed: chunk times come from the loop's select (ReadClock); they never precede the
    send, never go backwards, and follow the server's schedule."""
    from specperf.metrics import summarize
    from specperf.workload import ReadClock, new_event_loop, run_timed

    loop = new_event_loop()
    try:
        assert isinstance(loop._selector, ReadClock)  # type: ignore[attr-defined]
    finally:
        loop.close()
    cfg = CalibrationConfig(ttft_s=0.03, step_interval_s=0.005, output_tokens=20)
    items = [PromptItem(id=f"q{i}", category="c", turns=(f"question {i}",)) for i in range(6)]
    with CalibrationServer(cfg) as srv:
        res = run_timed(
            run_workload(
                CalibrationClient(srv.url),
                items,
                SamplingParams(max_tokens=64),
                WorkloadSpec(concurrency=3, num_requests=6, warmup_requests=0),
            )
        )
        served = srv.stats()
    for r in res.records:
        assert r.ok and r.ttft_s is not None and r.ttft_s >= 0.03
        assert all(b >= a for a, b in zip(r.chunk_times_s, r.chunk_times_s[1:], strict=False))
    s = summarize(res, run_info={"method": "native"})
    assert s["tpot_ms"]["mean"] == pytest.approx(served["mean_tpot_ms"], rel=0.5)


# -- sizing: the request count by measured duration, fixed by the baseline entry ---------------
def test_a_short_item_grows_by_a_whole_multiple_to_twice_the_minimum():
    from specperf.workload import sizing

    assert sizing.grown_count(32, 4.1, 5.0) == 96  # ceil(10 / 4.1) = 3
    assert sizing.grown_count(16, 0.5, 5.0) == 16 * 16  # capped at MAX_SIZE_FACTOR
    assert sizing.grown_count(16, 4.99, 5.0) == 48  # just short: still sized to twice the minimum
    # long enough only with a margin: a later start up to SIZE_TARGET times faster still lasts
    # the minimum (a count accepted at 5.15 s timed 4.998 s on a start 3 % faster)
    assert sizing.grown_count(32, 5.0, 5.0) == 64
    assert sizing.grown_count(32, 9.9, 5.0) == 64
    assert sizing.grown_count(32, 10.0, 5.0) is None
    assert sizing.grown_count(32, None, 5.0) is None  # nothing measured
    assert sizing.grown_count(32, 1.0, 0.0) is None  # minimum switched off
    assert sizing.grown_count(8, 1.0, 5.0, deadline_s=6.0) == 24  # ends within half the deadline
    assert sizing.grown_count(8, 2.0, 5.0, deadline_s=3.0) is None  # no multiple fits


def test_a_baseline_entry_fixes_the_count_only_for_the_same_workload():
    from specperf.workload import sizing

    fp = {"model": "m", "num_requests": 32, "concurrency": 1}
    assert sizing.count_from_entry({**fp, "num_requests": 96}, fp, 32) == 96
    assert sizing.count_from_entry(fp, fp, 32) == 32
    assert sizing.count_from_entry(None, fp, 32) is None
    # anything else differs: the entry is stale and will be replaced, so the item may be sized
    assert sizing.count_from_entry({**fp, "num_requests": 96, "model": "x"}, fp, 32) is None
    # the suite's count changed since (not a whole multiple, or fewer): stale too
    assert sizing.count_from_entry({**fp, "num_requests": 100}, fp, 32) is None
    assert sizing.count_from_entry({**fp, "num_requests": 16}, fp, 32) is None
