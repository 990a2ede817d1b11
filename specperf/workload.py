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
import hashlib
import json
import os
import selectors
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from specperf.engines.base import EngineClient
from specperf.errors import ConfigError
from specperf.schemas import Counters, PromptItem, RequestRecord, SamplingParams, WorkloadSpec

# Used for warmup only when neither warmup_items nor unmeasured items of the set exist.
# Generic, short and unlike any dataset prompt, so they never prime the measured prefixes.
WARMUP_PROMPTS: tuple[str, ...] = (
    "Describe a quiet morning in a small harbour town.",
    "List five uses for a paperclip.",
    "Explain what a binary search does, in plain words.",
    "Write a short poem about autumn leaves.",
    "What are the main differences between a lake and a pond?",
    "Give three tips for keeping houseplants alive.",
    "Summarise the rules of tic-tac-toe.",
    "Why is the sky blue? Answer briefly.",
    "Suggest a name for a friendly robot and explain it.",
    "Write a haiku about a train at night.",
    "How does a bicycle stay upright while moving?",
    "Describe the taste of fresh bread to someone who never had it.",
    "What is the difference between weather and climate?",
    "Write two sentences about the history of the compass.",
    "Explain recursion to a ten-year-old.",
    "Plan a simple three-course dinner menu.",
)

LIVENESS_INTERVAL_S = 1.0
LIVENESS_CONFIRM_S = 0.5
COUNTER_SETTLE_INTERVAL_S = 0.25
COUNTER_SETTLE_TRIES = 8
DEFAULT_TIMEOUT_BASE_S = 30.0
DEFAULT_TIMEOUT_PER_TOKEN_S = 0.5
TRANSPORT = os.environ.get("SPECPERF_HTTP_TRANSPORT", "aiohttp")  # "aiohttp" | "httpx"


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

    @property
    def order_hash(self) -> str:
        return order_hash(self.order)


@dataclass(frozen=True)
class Conversation:
    """One planned item: ``turns`` user turns of ``item`` (a multi-turn item may be cut short
    at the end of the plan so that the total equals the request count)."""

    item: PromptItem
    turns: int
    first_index: int  # index of its first request in the request order


def rank_items(items: Sequence[PromptItem], seed: int) -> list[PromptItem]:
    """Deterministic, engine-independent permutation: rank by sha256(f"{seed}:{id}")."""
    return sorted(
        items, key=lambda it: (hashlib.sha256(f"{seed}:{it.id}".encode()).digest(), it.id)
    )


def plan_requests(
    items: Sequence[PromptItem], num_requests: int, seed: int
) -> tuple[list[Conversation], list[str], float, list[PromptItem]]:
    """The request plan: conversations in order, the prompt-id order, the repeat factor, and the
    ranked items left out of the measured set (usable for warmup)."""
    if not items:
        raise ConfigError("workload: the prompt set is empty")
    if num_requests < 1:
        raise ConfigError(f"workload: num_requests must be >= 1, got {num_requests}")
    ids = [it.id for it in items]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise ConfigError(f"workload: duplicate prompt id {dup!r} in the set")
    for it in items:
        if not it.turns:
            raise ConfigError(f"workload: prompt {it.id!r} has no turns")
    ranked = rank_items(items, seed)
    per_pass = sum(len(it.turns) for it in ranked)
    plan: list[Conversation] = []
    order: list[str] = []
    used = 0
    i = 0
    while len(order) < num_requests:
        item = ranked[i % len(ranked)]
        n = min(len(item.turns), num_requests - len(order))
        plan.append(Conversation(item=item, turns=n, first_index=len(order)))
        order.extend(item.id if k == 1 else f"{item.id}#{k}" for k in range(1, n + 1))
        i += 1
        used = max(used, min(i, len(ranked)))
    repeat = num_requests / per_pass if num_requests > per_pass else 1.0
    unmeasured = ranked[used:]
    return plan, order, repeat, unmeasured


def order_hash(order: Sequence[str]) -> str:
    return hashlib.sha256(json.dumps(list(order)).encode()).hexdigest()[:16]


def default_request_timeout(sampling: SamplingParams) -> float:
    """Generous: 30 s plus 0.5 s per allowed output token."""
    return DEFAULT_TIMEOUT_BASE_S + DEFAULT_TIMEOUT_PER_TOKEN_S * sampling.max_tokens


def _http_client(**kw: Any) -> httpx.AsyncClient:
    """httpx on aiohttp's transport where installed: the same httpx API and exceptions, with
    aiohttp's C HTTP parser, which costs the client less CPU per streamed chunk than h11 and so
    distorts high-rate measurements less (docs/measurement.md has the figures)."""
    if TRANSPORT == "aiohttp":
        try:
            from httpx_aiohttp import HttpxAiohttpClient
        except ImportError:
            pass
        else:
            return HttpxAiohttpClient(**kw)
    return httpx.AsyncClient(**kw)


class ReadClock(selectors.DefaultSelector):
    """The event loop's selector, remembering when each ``select`` returned.

    Why: a chunk's arrival is best timed when the loop first learns that its socket is
    readable. A task reading a stream resumes one loop iteration after its data was received,
    and behind every other task woken in that iteration (at the end of a closed-loop wave, 32
    requests' last chunks arrive together): timing it when it resumes adds the others' work.
    Data a task finds in its buffer was received by a read callback of an earlier iteration, so
    the select that began the previous iteration (``prev``) is never before its arrival and is
    the earliest time the client could have known it."""

    def __init__(self) -> None:
        super().__init__()
        self.prev = self.last = time.perf_counter()

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        ready = super().select(timeout)
        self.prev, self.last = self.last, time.perf_counter()
        return ready


_CLOCKS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, ReadClock] = (
    weakref.WeakKeyDictionary()
)


def new_event_loop() -> asyncio.AbstractEventLoop:
    """A selector event loop whose reads are timed by ``ReadClock``."""
    clock = ReadClock()
    loop = asyncio.SelectorEventLoop(clock)
    _CLOCKS[loop] = clock
    return loop


def run_timed(coro: Any) -> Any:
    """``asyncio.run`` on a loop from ``new_event_loop`` (use it to run ``run_workload``)."""
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        return runner.run(coro)


def is_refused(exc: BaseException) -> bool:
    """A refused connection, whichever layer reports it: httpx, aiohttp (through httpx-aiohttp,
    which maps it to ConnectTimeout) or the OS."""
    seen: BaseException | None = exc
    for _ in range(8):
        if seen is None:
            break
        if isinstance(seen, ConnectionRefusedError):
            return True
        text = str(seen)
        if "Connection refused" in text or "Connect call failed" in text:
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def transport_name() -> str:
    """The HTTP transport ``_http_client`` uses now (recorded with every item)."""
    if TRANSPORT == "aiohttp":
        try:
            import httpx_aiohttp  # noqa: F401
        except ImportError:
            name = "httpx (h11; httpx-aiohttp not installed)"
        else:
            name = "httpx on aiohttp (httpx-aiohttp)"
    else:
        name = "httpx (h11)"
    return f"{name}, specperf SSE reader, reads timed by the event loop's select"


def _delta_text(delta: dict[str, Any]) -> tuple[str, str]:
    content = delta.get("content") or ""
    reasoning = delta.get("reasoning_content") or delta.get("reasoning") or ""
    return (content if isinstance(content, str) else ""), (
        reasoning if isinstance(reasoning, str) else ""
    )


class SSEData:
    """Server-sent events from raw bytes as they arrive: ``feed`` returns the ``data`` field of
    each event completed so far (bytes; several ``data:`` lines joined by newlines; events
    without data, and comments, skipped). Why not httpx-sse's line iterator: it runs several
    async generators per line, and its events carry no read boundary; here an event's time is
    that of the read that completed it, and the client spends less CPU per chunk, which is
    what keeps it accurate at tens of thousands of chunks/s (docs/measurement.md)."""

    def __init__(self) -> None:
        self._buf = b""

    def feed(self, raw: bytes) -> list[bytes]:
        buf = self._buf + raw
        if b"\r" in buf:  # CRLF / CR line ends; a CR at the very end may start a CRLF
            hold = buf.endswith(b"\r")
            if hold:
                buf = buf[:-1]
            buf = buf.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
            parts = buf.split(b"\n\n")
            self._buf = parts.pop() + (b"\r" if hold else b"")
        else:
            parts = buf.split(b"\n\n")
            self._buf = parts.pop()
        out: list[bytes] = []
        for ev in parts:
            if ev.startswith(b"data: ") and b"\n" not in ev:  # the usual one-line event
                out.append(ev[6:])
                continue
            data: bytes | None = None
            for line in ev.split(b"\n"):
                if line.startswith(b"data:"):
                    v = line[6:] if line.startswith(b"data: ") else line[5:]
                    data = v if data is None else data + b"\n" + v
                elif line == b"data":
                    data = b"" if data is None else data + b"\n"
            if data is not None:
                out.append(data)
        return out


class _ItemStopped(Exception):
    """Raised inside a slot when the item has ended (deadline or dead engine)."""


class _Runner:
    def __init__(
        self,
        client: EngineClient,
        http: httpx.AsyncClient,
        sampling: SamplingParams,
        workload: WorkloadSpec,
        deadline: float,
    ) -> None:
        self.client = client
        self.http = http
        self.sampling = sampling
        self.workload = workload
        self.deadline = deadline
        self.request_timeout = workload.request_timeout_s or default_request_timeout(sampling)
        self.stop_reason: str | None = None
        self.engine_died = False
        self.t0 = time.perf_counter()
        self.headers = {**client.headers(), "Accept": "text/event-stream"}

    # -- one request -------------------------------------------------------------------------
    def body(self, messages: list[dict[str, str]]) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.client.model,
            "messages": messages,
            "stream": True,
            "stream_options": {"include_usage": True},
            **self.sampling.body(),
        }
        return self.client.adapt_request(body)

    async def send(self, rec: RequestRecord, messages: list[dict[str, str]]) -> float:
        """Run one streamed request into ``rec``; returns its end time (perf_counter)."""
        body = self.body(messages)
        sent = time.perf_counter()
        rec.sent_s = sent - self.t0
        state: dict[str, Any] = {"last_choice": None, "n_content": 0, "ids": None}
        try:
            await asyncio.wait_for(self._stream(rec, body, sent, state), self.request_timeout)
        except (asyncio.TimeoutError, TimeoutError):
            rec.error = f"request timeout: not finished within {self.request_timeout:.0f} s"
        except httpx.TimeoutException as exc:
            if is_refused(exc):
                rec.error = f"refused: {self.client.chat_url} ({exc})"
                await self.check_alive()
            elif isinstance(exc, httpx.ReadTimeout):
                rec.error = f"stall timeout: no data for {self.workload.stall_timeout_s:g} s"
            else:
                rec.error = f"{type(exc).__name__}: {exc or 'timeout'}"
        except (httpx.TransportError, OSError) as exc:
            what = "refused" if is_refused(exc) else type(exc).__name__
            rec.error = f"{what}: {exc}"
            await self.check_alive()
        except httpx.HTTPError as exc:
            rec.error = f"{type(exc).__name__}: {exc}"
        except (ValueError, KeyError, TypeError) as exc:
            rec.error = f"bad stream data: {type(exc).__name__}: {exc}"
        except asyncio.CancelledError:
            rec.error = f"cancelled: {self.stop_reason or 'item ended'}"
            self._finish(rec, state, sent)
            raise
        self._finish(rec, state, sent)
        return time.perf_counter()

    async def _stream(
        self, rec: RequestRecord, body: dict[str, Any], sent: float, state: dict[str, Any]
    ) -> None:
        content_parts: list[str] = []
        reasoning_parts: list[str] = []
        done = False
        extract = self.client.extract_token_ids
        async with self.http.stream(
            "POST", self.client.chat_url, json=body, headers=self.headers
        ) as resp:
            if resp.status_code != 200:
                text = (await resp.aread()).decode("utf-8", "replace").strip()
                rec.error = f"HTTP {resp.status_code}: {text[:300]}"
                return
            ctype = resp.headers.get("content-type", "").partition(";")[0].strip()
            if ctype != "text/event-stream":
                rec.error = f"not an event stream: content-type {ctype or 'missing'!r}"
                return
            events = SSEData()
            clock = _CLOCKS.get(asyncio.get_running_loop())
            try:
                async for raw in resp.aiter_bytes():
                    # one timestamp per read: the events in it reached us together, and the
                    # time spent parsing the earlier ones is not theirs; on a ReadClock loop,
                    # the select that reported them (ReadClock says why)
                    now = clock.prev if clock is not None else time.perf_counter()
                    for data in events.feed(raw):
                        if data == b"[DONE]":
                            done = True
                            break
                        if not data:
                            continue
                        chunk = json.loads(data)
                        if not isinstance(chunk, dict):
                            continue
                        # engine-specific per-request fields (e.g. SGLang's spec details ride
                        # on a chunk with empty choices): the client sees every chunk
                        self.client.observe_chunk(chunk)
                        choices = chunk.get("choices")
                        if choices:
                            state["last_choice"] = now
                            choice = choices[0]
                            content, reasoning = _delta_text(choice.get("delta") or {})
                            ids = extract(chunk)
                            if content or reasoning or ids:
                                if rec.ttft_s is None:
                                    rec.ttft_s = now - sent
                                rec.chunk_times_s.append(now - sent)
                                if content:
                                    content_parts.append(content)
                                if reasoning:
                                    reasoning_parts.append(reasoning)
                                if ids is not None:
                                    if state["ids"] is None:
                                        state["ids"] = []
                                    state["ids"].extend(ids)
                                    rec.chunk_tokens.append(len(ids))
                                state["n_content"] += 1
                            if choice.get("finish_reason"):
                                rec.finish_reason = choice["finish_reason"]
                        elif chunk.get("error") is not None:
                            err = chunk["error"]
                            msg = err.get("message", err) if isinstance(err, dict) else err
                            rec.error = f"stream error: {str(msg)[:300]}"
                            return
                        usage = chunk.get("usage")
                        if isinstance(usage, dict):
                            if usage.get("completion_tokens") is not None:
                                rec.output_tokens = int(usage["completion_tokens"])
                                rec.output_tokens_source = "usage"
                            if usage.get("prompt_tokens") is not None:
                                rec.prompt_tokens = int(usage["prompt_tokens"])
                    if done:
                        # closing the response costs more than reading a chunk: let the streams
                        # whose last chunks arrived with ours take their timestamps first
                        await asyncio.sleep(0)
                        break
            finally:
                rec.text = "".join(content_parts)
                rec.reasoning_text = "".join(reasoning_parts)
        if rec.error is None and rec.finish_reason is None:
            rec.error = "incomplete stream: ended without a finish_reason" + (
                "" if done else " or [DONE]"
            )

    def _finish(self, rec: RequestRecord, state: dict[str, Any], sent: float) -> None:
        if state["last_choice"] is not None:
            rec.e2e_s = state["last_choice"] - sent
        if state["ids"] is not None:
            rec.token_ids = state["ids"]
        if len(rec.chunk_tokens) != len(rec.chunk_times_s):
            rec.chunk_tokens = []  # token counts only where every chunk carried its ids
        if rec.output_tokens_source != "usage":
            if rec.token_ids is not None:
                rec.output_tokens, rec.output_tokens_source = len(rec.token_ids), "client"
            elif state["n_content"]:
                rec.output_tokens, rec.output_tokens_source = state["n_content"], "client"

    # -- liveness ----------------------------------------------------------------------------
    async def check_alive(self) -> bool:
        """Dead only when two probes LIVENESS_CONFIRM_S apart both say so: a busy engine
        whose health endpoint answers slowly once must not end the item."""
        if self.engine_died:
            return False
        for attempt in range(2):
            try:
                alive = await asyncio.to_thread(self.client.is_alive)
            except Exception:  # a liveness probe that errors says nothing about death
                return True
            if alive:
                return True
            if attempt == 0:
                await asyncio.sleep(LIVENESS_CONFIRM_S)
        self.engine_died = True
        self.stop_reason = "engine died"
        return False


def _messages(item: PromptItem) -> list[dict[str, str]]:
    return [{"role": "system", "content": item.system}] if item.system else []


async def _run_slots(
    runner: _Runner,
    plan: Sequence[Conversation],
    concurrency: int,
    on_record: Callable[[RequestRecord], None] | None,
    on_done: Callable[[RequestRecord, float], None],
) -> None:
    """N closed-loop slots over the conversations; returns when all are done or the item
    stops (deadline / dead engine), cancelling requests in flight."""
    it: Iterator[Conversation] = iter(plan)

    async def slot() -> None:
        for conv in it:
            messages = _messages(conv.item)
            for k in range(1, conv.turns + 1):
                if runner.stop_reason:
                    raise _ItemStopped
                messages.append({"role": "user", "content": conv.item.turns[k - 1]})
                rec = RequestRecord(
                    index=conv.first_index + k - 1,
                    prompt_id=conv.item.id,
                    category=conv.item.category,
                    turn=k,
                )
                try:
                    end = await runner.send(rec, list(messages))
                    # let the streams whose chunks already arrived take their timestamps
                    # before this slot's bookkeeping and next send use the loop (at the end of
                    # a wave many requests finish together; issue 15)
                    await asyncio.sleep(0)
                except asyncio.CancelledError:
                    if on_record:
                        on_record(rec)  # persisted first: nothing measured is lost
                    on_done(rec, time.perf_counter())
                    raise
                if on_record:
                    on_record(rec)
                on_done(rec, end)
                if not rec.ok:
                    break  # later turns need this answer: they count as not sent
                messages.append({"role": "assistant", "content": rec.text})

    async def watch() -> None:
        while True:
            await asyncio.sleep(LIVENESS_INTERVAL_S)
            if not await runner.check_alive():
                return

    slots = [asyncio.ensure_future(slot()) for _ in range(max(1, concurrency))]
    watcher = asyncio.ensure_future(watch())
    pending: set[asyncio.Future[Any]] = set(slots)
    try:
        while pending:
            remaining = runner.deadline - time.monotonic()
            if remaining <= 0:
                runner.stop_reason = runner.stop_reason or "item deadline exceeded"
                break
            done, pending = await asyncio.wait(
                pending | {watcher}, timeout=remaining, return_when=asyncio.FIRST_COMPLETED
            )
            pending.discard(watcher)
            for fut in done:
                if fut is watcher:
                    continue
                exc = fut.exception()
                if exc is not None and not isinstance(exc, _ItemStopped):
                    raise exc
            if runner.stop_reason:
                break
    finally:
        for fut in [*pending, watcher]:
            fut.cancel()
        await asyncio.gather(*pending, watcher, return_exceptions=True)


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


def _warmup_prompts(
    warmup_items: Sequence[PromptItem], unmeasured: Sequence[PromptItem], n: int
) -> list[PromptItem]:
    pool = list(warmup_items) or list(unmeasured)
    if not pool:
        pool = [
            PromptItem(id=f"warmup-{i}", category="warmup", turns=(p,))
            for i, p in enumerate(WARMUP_PROMPTS)
        ]
    out = []
    for i in range(n):
        src = pool[i % len(pool)]
        out.append(
            PromptItem(id=f"warmup-{i}", category="warmup", turns=src.turns[:1], system=src.system)
        )
    return out


async def run_workload(
    client: EngineClient,
    items: Sequence[PromptItem],
    sampling: SamplingParams,
    workload: WorkloadSpec,
    *,
    warmup_items: Sequence[PromptItem] = (),
    progress: Callable[[int, int], None] | None = None,
    on_record: Callable[[RequestRecord], None] | None = None,
) -> WorkloadResult:
    """Warm up, reset the prefix cache, snapshot counters, run the measured closed loop,
    snapshot again. ``on_record`` sees each measured record as soon as it finishes."""
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
            runner.t0 = time.perf_counter()
            total = workload.num_requests

            def done(rec: RequestRecord, end: float) -> None:
                records.append(rec)
                ends.append(end)
                if progress:
                    progress(len(records), total)

            await _run_slots(runner, plan, workload.concurrency, on_record, done)
            if not runner.engine_died:
                after = await _settled_counters(client, notes, "after the measured phase")
            else:
                after = Counters()
    if runner.stop_reason:
        notes.append(f"item ended early: {runner.stop_reason}")
    records.sort(key=lambda r: (r.sent_s, r.index))
    duration = (max(ends) - runner.t0 - min(r.sent_s for r in records)) if records else 0.0
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
    )
