"""One item's requests: N closed-loop slots over the planned conversations, each request streamed
and timed into a ``RequestRecord``, a liveness watch that ends the item when the engine dies."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import httpx

from specperf.engines.base import EngineClient
from specperf.schemas import RequestRecord, SamplingParams, WorkloadSpec
from specperf.workload.plan import Conversation, _messages
from specperf.workload.sse import SSEData, _delta_text
from specperf.workload.transport import _CLOCKS, is_refused

LIVENESS_INTERVAL_S = 1.0
LIVENESS_CONFIRM_S = 0.5
DEFAULT_TIMEOUT_BASE_S = 30.0
DEFAULT_TIMEOUT_PER_TOKEN_S = 0.5


def default_request_timeout(sampling: SamplingParams) -> float:
    """Generous: 30 s plus 0.5 s per allowed output token."""
    return DEFAULT_TIMEOUT_BASE_S + DEFAULT_TIMEOUT_PER_TOKEN_S * sampling.max_tokens


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
                    # a wave many requests finish together)
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
