"""Closed-loop (or serial) workload over an OpenAI-compatible streaming chat endpoint.

Follows design.md's measurement protocol: a seeded request order that is the same for every
engine and method, warmup at the measured concurrency with prompts outside the measured set,
a prefix-cache reset before measuring, every sampling field sent explicitly, counters scraped
around the measured phase only, per-request / stall / item timeouts, and a dead engine ending
the item at once.

Times in a ``RequestRecord``: ``sent_s`` is relative to the start of the measured phase;
``ttft_s``, ``e2e_s`` and every entry of ``chunk_times_s`` are relative to that request's
``sent_s`` (they are latencies).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import httpx

from specperf.engines.base import EngineClient
from specperf.errors import ConfigError
from specperf.schemas import Counters, PromptItem, RequestRecord, SamplingParams, WorkloadSpec
from specperf.workload.gcpause import GcPauses, pause_note, quiet_gc
from specperf.workload.plan import (
    WARMUP_PROMPTS,
    Conversation,
    _messages,
    _warmup_prompts,
    order_hash,
    plan_requests,
    rank_items,
)
from specperf.workload.runner import (
    DEFAULT_TIMEOUT_BASE_S,
    DEFAULT_TIMEOUT_PER_TOKEN_S,
    LIVENESS_CONFIRM_S,
    LIVENESS_INTERVAL_S,
    _run_slots,
    _Runner,
    default_request_timeout,
)
from specperf.workload.sse import SSEData
from specperf.workload.transport import (
    TRANSPORT,
    ReadClock,
    _http_client,
    is_refused,
    new_event_loop,
    run_timed,
    transport_name,
)

__all__ = [
    "COUNTER_SETTLE_INTERVAL_S",
    "COUNTER_SETTLE_TRIES",
    "DEFAULT_TIMEOUT_BASE_S",
    "DEFAULT_TIMEOUT_PER_TOKEN_S",
    "LIVENESS_CONFIRM_S",
    "LIVENESS_INTERVAL_S",
    "TRANSPORT",
    "WARMUP_PROMPTS",
    "Conversation",
    "ReadClock",
    "SSEData",
    "WorkloadResult",
    "_messages",
    "default_request_timeout",
    "is_refused",
    "new_event_loop",
    "order_hash",
    "plan_requests",
    "rank_items",
    "run_timed",
    "run_workload",
    "transport_name",
]

COUNTER_SETTLE_INTERVAL_S = 0.25
COUNTER_SETTLE_TRIES = 8


@dataclass
class WorkloadResult:
    """Everything the measured phase produced; metrics.summarize turns it into a summary."""

    records: list[RequestRecord]  # measured only, in send order
    duration_s: float  # first measured request sent -> last finished
    before: Counters
    after: Counters  # engine counter snapshots around the measured phase
    order: list[str]  # prompt ids in request order (turn k>1 as "id#k")
    repeat_factor: float  # >1 when the set is smaller than the request count
    warmup: int  # warmup requests sent (excluded from everything)
    prefix_cache_reset: bool | None
    engine_died: bool
    notes: list[str] = field(default_factory=list)
    num_requests: int = 0  # requests planned (completed + failed + not_sent)
    not_sent: int = 0  # planned requests never sent (deadline, dead engine, failed turn)
    stop_reason: str | None = None  # why the item ended early, if it did
    warmup_failed: int = 0
    seed: int = 0
    client_gc: GcPauses | None = None  # the measuring process's collector in the window

    @property
    def order_hash(self) -> str:
        return order_hash(self.order)


async def _settled_counters(client: EngineClient, notes: list[str], what: str) -> Counters:
    """Scrape until two snapshots agree: engines update counters just after the last chunk."""
    prev: Counters | None = None
    for _ in range(COUNTER_SETTLE_TRIES):
        try:
            cur = await asyncio.to_thread(client.counters)
        except Exception as exc:
            notes.append(f"counters could not be read {what}: {type(exc).__name__}: {exc}")
            return Counters()
        if cur == prev or cur == Counters():
            return cur  # settled, or an engine without counters
        prev = cur
        await asyncio.sleep(COUNTER_SETTLE_INTERVAL_S)
    notes.append(f"counters still moving {what} after {COUNTER_SETTLE_TRIES} scrapes")
    return prev or Counters()


async def run_workload(
    client: EngineClient,
    items: Sequence[PromptItem],
    sampling: SamplingParams,
    workload: WorkloadSpec,
    *,
    warmup_items: Sequence[PromptItem] = (),
    progress: Callable[[int, int], None] | None = None,
    on_record: Callable[[RequestRecord], None] | None = None,
    freeze_gc: bool = True,
) -> WorkloadResult:
    """Warm up, reset the prefix cache, snapshot counters, run the measured closed loop,
    snapshot again. ``on_record`` sees each measured record as soon as it finishes.
    ``freeze_gc``: keep this process's garbage collector from scanning its old heap during the
    measured loop (specperf.workload.gcpause; off only to measure what that changes)."""
    if workload.concurrency < 1:
        raise ConfigError(f"workload: concurrency must be >= 1, got {workload.concurrency}")
    plan, order, repeat, unmeasured = plan_requests(items, workload.num_requests, workload.seed)
    measured_ids = {c.item.id for c in plan}
    warm_src = [w for w in warmup_items if w.id not in measured_ids]
    n_warm = (
        workload.warmup_requests
        if workload.warmup_requests is not None
        else max(1, workload.concurrency)
    )
    notes: list[str] = []
    if warmup_items and len(warm_src) < len(warmup_items):
        notes.append("warmup_items that are also in the measured set were not used for warmup")
    if repeat > 1:
        notes.append(
            f"the set has fewer requests than num_requests: prompts repeat "
            f"(repeat factor {repeat:.3g})"
        )
    deadline = time.monotonic() + workload.item_deadline_s
    conns = workload.concurrency + 4
    timeout = httpx.Timeout(connect=30.0, read=workload.stall_timeout_s, write=60.0, pool=None)
    limits = httpx.Limits(max_connections=conns, max_keepalive_connections=conns)
    records: list[RequestRecord] = []
    ends: list[float] = []
    reset: bool | None = None
    before = after = Counters()
    warm_failed = 0
    gc_pauses: GcPauses | None = None
    async with _http_client(timeout=timeout, limits=limits, trust_env=False) as http:
        runner = _Runner(client, http, sampling, workload, deadline)

        # -- warmup: same concurrency and sampling, prompts outside the measured set --------
        warm_plan = [
            Conversation(item=w, turns=1, first_index=i)
            for i, w in enumerate(_warmup_prompts(warm_src, unmeasured, n_warm))
        ]
        warm_errors: list[str] = []

        def warm_done(rec: RequestRecord, _end: float) -> None:
            if not rec.ok:
                warm_errors.append(rec.error or "")

        if warm_plan:
            await _run_slots(runner, warm_plan, workload.concurrency, None, warm_done)
        warm_failed = len(warm_errors)
        if warm_errors:
            notes.append(f"{warm_failed} of {n_warm} warmup requests failed: {warm_errors[0]}")

        if not runner.stop_reason:
            if workload.prefix_cache == "reset":
                try:
                    reset = bool(await asyncio.to_thread(client.reset_prefix_cache))
                except Exception as exc:
                    reset = False
                    notes.append(f"prefix cache reset raised {type(exc).__name__}: {exc}")
                if not reset:
                    notes.append("prefix cache could not be reset (no endpoint or refused)")
            before = await _settled_counters(client, notes, "before the measured phase")

            # -- measured phase --------------------------------------------------------------
            total = workload.num_requests

            def done(rec: RequestRecord, end: float) -> None:
                records.append(rec)
                ends.append(end)
                if progress:
                    progress(len(records), total)

            with quiet_gc(freeze_gc) as gc_pauses:
                runner.t0 = time.perf_counter()
                await _run_slots(runner, plan, workload.concurrency, on_record, done)
            if not runner.engine_died:
                after = await _settled_counters(client, notes, "after the measured phase")
            else:
                after = Counters()
    if runner.stop_reason:
        notes.append(f"item ended early: {runner.stop_reason}")
    records.sort(key=lambda r: (r.sent_s, r.index))
    duration = (max(ends) - runner.t0 - min(r.sent_s for r in records)) if records else 0.0
    if gc_pauses is not None and (note := pause_note(gc_pauses, duration)):
        notes.append(note)
    return WorkloadResult(
        records=records,
        duration_s=max(0.0, duration),
        before=before,
        after=after,
        order=order,
        repeat_factor=repeat,
        warmup=len(warm_plan),
        prefix_cache_reset=reset,
        engine_died=runner.engine_died,
        notes=notes,
        num_requests=workload.num_requests,
        not_sent=workload.num_requests - len(records),
        stop_reason=runner.stop_reason,
        warmup_failed=warm_failed,
        seed=workload.seed,
        client_gc=gc_pauses,
    )
