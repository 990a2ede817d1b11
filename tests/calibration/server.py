"""Calibration server: an OpenAI-compatible streaming chat server whose timing and acceptance
are set by the test, so the measuring client can be checked against known truth.

* Timing: TTFT, a decode-step interval (one chunk per step), optional jitter and batch slowdown.
* Speculative decoding mimicked like vLLM: the first token comes from prefill; then each verify
  step proposes K draft tokens, accepts ``a`` of them (a cycled ``accept_pattern`` or a seeded
  per-position probability) and emits ``a + 1`` tokens in one chunk.
* vLLM-style ``/metrics`` (prometheus_client, exact vLLM names and labels) whose counters follow
  what was actually served: ``vllm:spec_decode_*`` (incl. per position), generation / prompt
  tokens, prefix-cache queries / hits, request_success.
* ``/v1/models``, ``/version``, ``/health``, ``POST /reset_prefix_cache`` (vLLM's name),
  ``GET|POST /control`` to read or change any setting at runtime, ``GET /stats`` (server-side
  truth of emitted timing) and ``GET /debug/requests`` (recent request bodies, no headers).

Run it: ``python -m tests.calibration.server --port P --step-ms 5 -k 3 --accept-pattern 3,1,2``
or in a thread: ``with CalibrationServer(CalibrationConfig(...)) as srv: srv.url``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import hashlib
import json
import random
import signal
import socket
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge
from prometheus_client.exposition import generate_latest

RECENT_REQUESTS = 512
SERVED_KEPT = 100_000  # per-request timing kept for /stats (bounded for long suite runs)


@dataclass
class CalibrationConfig:
    """Everything a test can dial. ``num_speculative_tokens`` 0 means native: no spec series."""

    model: str = "calibration-model"
    version: str = "0.0.0+calibration"
    version_endpoint: bool = True  # False: /version answers 404 (counters on /metrics only)
    ttft_s: float = 0.02
    prefill_s_per_token: float = 0.0
    step_interval_s: float = 0.005
    interval_jitter: float = 0.0  # ± fraction of the step interval, uniform
    batch_slowdown: float = 0.0  # interval × (1 + batch_slowdown × (active − 1))
    num_speculative_tokens: int = 0
    accept_pattern: list[int] = field(default_factory=list)  # accepted per step, cycled
    accept_prob: float | None = None  # per-position acceptance probability (seeded)
    output_tokens: int = 64  # natural length (finish "stop"); capped by max_tokens
    output_tokens_max: int | None = None  # per-prompt length in [output_tokens, this]
    usage: bool = True  # honour stream_options.include_usage
    usage_delay_s: float = 0.0  # send the usage-only chunk this much after the last choice
    role_chunk: bool = True  # vLLM sends {"role": "assistant", "content": ""} first
    reasoning_tokens: int = 0  # the first N tokens go to the reasoning field
    reasoning_field: str = "reasoning"  # vLLM 0.32: "reasoning"; older/SGLang: "reasoning_content"
    prefix_caching: bool = True
    reset_endpoint: bool = True  # False: /reset_prefix_cache answers 404
    fail_every: int = 0  # every Nth request answers HTTP 500
    abort_after_chunks: int | None = None  # close the connection after N content chunks
    stall_after_chunks: int | None = None  # pause once after N content chunks ...
    stall_s: float = 0.0  # ... for this long
    # delivery artefact: chunks are made on schedule but written to the socket only every N
    # chunks (and at the end), so the client receives them in bursts; 0 = write each at once
    burst_chunks: int = 0
    seed: int = 0
    engine_index: str = "0"

    def check(self) -> None:
        if self.num_speculative_tokens < 0:
            raise ValueError("num_speculative_tokens must be >= 0")
        if any(a < 0 for a in self.accept_pattern):
            raise ValueError("accept_pattern entries must be >= 0")
        if self.accept_prob is not None and not 0.0 <= self.accept_prob <= 1.0:
            raise ValueError("accept_prob must be in [0, 1]")
        if self.step_interval_s < 0 or self.ttft_s < 0:
            raise ValueError("times must be >= 0")
        if self.output_tokens < 1:
            raise ValueError("output_tokens must be >= 1")
        if self.burst_chunks < 0:
            raise ValueError("burst_chunks must be >= 0")

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _stable_rng(*parts: Any) -> random.Random:
    digest = hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def prompt_tokens_of(messages: list[dict[str, Any]]) -> int:
    """Deterministic stand-in for tokenization: 1 token per 4 characters, at least 1."""
    return max(1, sum(len(str(m.get("content") or "")) for m in messages) // 4)


def plan_steps(cfg: CalibrationConfig, n_out: int, rng: random.Random) -> list[int]:
    """Tokens per chunk: 1 from prefill, then one verify step per chunk with a + 1 tokens."""
    steps = [1]
    left = n_out - 1
    k = cfg.num_speculative_tokens
    i = 0
    while left > 0:
        if k <= 0:
            a = 0
        elif cfg.accept_pattern:
            a = min(k, cfg.accept_pattern[i % len(cfg.accept_pattern)])
        elif cfg.accept_prob is not None:
            a = 0
            while a < k and rng.random() < cfg.accept_prob:
                a += 1
        else:
            a = k
        n = min(a + 1, left)
        steps.append(n)
        left -= n
        i += 1
    return steps


class _Metrics:
    """vLLM's metric names and labels (reference/vllm.md §1-2) in a private registry."""

    def __init__(self, model: str, engine: str) -> None:
        self.registry = CollectorRegistry()
        self.labels = {"model_name": model, "engine": engine}
        names = ["model_name", "engine"]
        r = self.registry
        self.generation = Counter("vllm:generation_tokens", "Generated tokens", names, registry=r)
        self.prompt = Counter("vllm:prompt_tokens", "Prefill tokens", names, registry=r)
        self.pc_queries = Counter(
            "vllm:prefix_cache_queries", "Prefix cache queries (tokens)", names, registry=r
        )
        self.pc_hits = Counter(
            "vllm:prefix_cache_hits", "Prefix cache hits (tokens)", names, registry=r
        )
        self.success = Counter(
            "vllm:request_success", "Finished requests", [*names, "finished_reason"], registry=r
        )
        self.running = Gauge("vllm:num_requests_running", "Running", names, registry=r)
        for c in (self.generation, self.prompt, self.pc_queries, self.pc_hits):
            c.labels(**self.labels)
        self.running.labels(**self.labels).set(0)
        self.spec: dict[str, Counter] | None = None
        self.positions = 0

    def ensure_spec(self, k: int) -> None:
        """Spec series exist only once speculation is configured (as in vLLM)."""
        if k <= 0:
            return
        r = self.registry
        names = ["model_name", "engine"]
        if self.spec is None:
            self.spec = {
                "drafts": Counter("vllm:spec_decode_num_drafts", "Drafts", names, registry=r),
                "draft_tokens": Counter(
                    "vllm:spec_decode_num_draft_tokens", "Draft tokens", names, registry=r
                ),
                "accepted": Counter(
                    "vllm:spec_decode_num_accepted_tokens", "Accepted tokens", names, registry=r
                ),
                "per_pos": Counter(
                    "vllm:spec_decode_num_accepted_tokens_per_pos",
                    "Accepted tokens per draft position",
                    [*names, "position"],
                    registry=r,
                ),
            }
            for key in ("drafts", "draft_tokens", "accepted"):
                self.spec[key].labels(**self.labels)
        while self.positions < k:
            self.spec["per_pos"].labels(**self.labels, position=str(self.positions))
            self.positions += 1

    def step(self, k: int, tokens: int, first: bool) -> None:
        self.generation.labels(**self.labels).inc(tokens)
        if first or k <= 0:
            return
        self.ensure_spec(k)
        assert self.spec is not None
        accepted = tokens - 1
        self.spec["drafts"].labels(**self.labels).inc()
        self.spec["draft_tokens"].labels(**self.labels).inc(k)
        if accepted:
            self.spec["accepted"].labels(**self.labels).inc(accepted)
            for pos in range(accepted):
                self.spec["per_pos"].labels(**self.labels, position=str(pos)).inc()


@dataclass
class _ServedRequest:
    arrival: float
    first: float | None = None
    last: float | None = None
    tokens: int = 0
    chunks: int = 0


class CalibrationApp:
    """The aiohttp application and its state; one per server."""

    def __init__(self, config: CalibrationConfig) -> None:
        config.check()
        self.config = config
        self.metrics = _Metrics(config.model, config.engine_index)
        self.metrics.ensure_spec(config.num_speculative_tokens)
        self.cache: set[str] = set()
        self.requests_seen = 0
        self.active = 0
        self.max_active = 0
        self.recent: deque[dict[str, Any]] = deque(maxlen=RECENT_REQUESTS)
        self.served: deque[_ServedRequest] = deque(maxlen=SERVED_KEPT)
        self.app = web.Application()
        self.app.add_routes(
            [
                web.post("/v1/chat/completions", self.chat),
                web.get("/v1/models", self.models),
                web.get("/metrics", self.metrics_page),
                web.get("/health", self.health),
                web.get("/version", self.version),
                web.post("/reset_prefix_cache", self.reset_prefix_cache),
                web.get("/control", self.get_control),
                web.post("/control", self.post_control),
                web.get("/stats", self.get_stats),
                web.post("/stats/reset", self.reset_stats),
                web.get("/debug/requests", self.debug_requests),
            ]
        )

    # -- small endpoints ----------------------------------------------------------------------
    async def models(self, _req: web.Request) -> web.Response:
        model = {"id": self.config.model, "object": "model", "owned_by": "calibration"}
        return web.json_response({"object": "list", "data": [model]})

    async def metrics_page(self, _req: web.Request) -> web.Response:
        body = generate_latest(self.metrics.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def health(self, _req: web.Request) -> web.Response:
        return web.Response(text="")

    async def version(self, _req: web.Request) -> web.Response:
        if not self.config.version_endpoint:
            return web.json_response({"detail": "Not Found"}, status=404)
        return web.json_response({"version": self.config.version})

    async def reset_prefix_cache(self, _req: web.Request) -> web.Response:
        if not self.config.reset_endpoint:
            return web.json_response({"detail": "Not Found"}, status=404)
        self.cache.clear()
        return web.Response(text="")

    async def get_control(self, _req: web.Request) -> web.Response:
        return web.json_response(self.config.to_json())

    async def post_control(self, req: web.Request) -> web.Response:
        try:
            changes = await req.json()
            self.update(**changes)
        except (ValueError, TypeError) as exc:
            return web.json_response({"error": str(exc)}, status=400)
        return web.json_response(self.config.to_json())

    def update(self, **changes: Any) -> None:
        known = {f.name for f in dataclasses.fields(CalibrationConfig)}
        bad = sorted(set(changes) - known)
        if bad:
            raise ValueError(f"unknown calibration setting(s): {', '.join(bad)}")
        new = dataclasses.replace(self.config, **changes)
        new.check()
        self.config = new
        self.metrics.ensure_spec(new.num_speculative_tokens)

    async def get_stats(self, _req: web.Request) -> web.Response:
        return web.json_response(self.stats())

    async def reset_stats(self, _req: web.Request) -> web.Response:
        self.served.clear()
        self.max_active = self.active
        return web.Response(text="")

    async def debug_requests(self, _req: web.Request) -> web.Response:
        return web.json_response(list(self.recent))

    def stats(self) -> dict[str, Any]:
        """Server-side truth of what was emitted (when each chunk was handed to the socket)."""
        done = [
            (s.arrival, s.first, s.last, s.tokens, s.chunks)
            for s in self.served
            if s.first is not None and s.last is not None
        ]
        tpots = [(last - first) / (tok - 1) for _, first, last, tok, _ in done if tok > 1]
        gaps = sum(last - first for _, first, last, _, ch in done if ch > 1)
        n_gaps = sum(ch - 1 for *_, ch in done if ch > 1)
        ttfts = [first - arrival for arrival, first, *_ in done]
        span = (max(d[2] for d in done) - min(d[0] for d in done)) if done else 0.0
        chunks = sum(d[4] for d in done)
        return {
            "requests": len(done),
            "tokens": sum(d[3] for d in done),
            "chunks": chunks,
            "mean_tpot_ms": 1000 * sum(tpots) / len(tpots) if tpots else None,
            "mean_itl_ms": 1000 * gaps / n_gaps if n_gaps else None,
            "mean_ttft_ms": 1000 * sum(ttfts) / len(ttfts) if ttfts else None,
            "chunks_per_s": chunks / span if span > 0 else None,
            "span_s": span,
            "max_active": self.max_active,
            "requests_seen": self.requests_seen,
        }

    # -- chat streaming -----------------------------------------------------------------------
    def _prefix_hit(self, messages: list[dict[str, Any]]) -> int:
        """Longest cached message prefix, in (stand-in) tokens; then cache every prefix."""
        keys = [
            hashlib.sha256(json.dumps(messages[: i + 1], sort_keys=True).encode()).hexdigest()
            for i in range(len(messages))
        ]
        hit = 0
        if self.config.prefix_caching:
            for i in range(len(messages), 0, -1):
                if keys[i - 1] in self.cache:
                    hit = prompt_tokens_of(messages[:i])
                    break
            self.cache.update(keys)
        return hit

    async def chat(self, req: web.Request) -> web.StreamResponse:
        arrival = time.perf_counter()
        cfg = self.config
        try:
            body = await req.json()
            messages = body["messages"]
            if not isinstance(messages, list) or not messages:
                raise ValueError("messages must be a non-empty list")
        except (ValueError, KeyError, TypeError) as exc:
            return web.json_response({"error": {"message": f"bad request: {exc}"}}, status=400)
        self.requests_seen += 1
        entry = {k: v for k, v in body.items()}
        entry["_seq"] = self.requests_seen
        entry["_authorized"] = "Authorization" in req.headers
        self.recent.append(entry)
        if body.get("model") != cfg.model:
            msg = f"The model `{body.get('model')}` does not exist."
            return web.json_response({"error": {"message": msg}}, status=404)
        if cfg.fail_every and self.requests_seen % cfg.fail_every == 0:
            return web.json_response({"error": {"message": "injected failure"}}, status=500)

        key = json.dumps(messages, sort_keys=True)
        rng = _stable_rng(cfg.seed, key)
        natural = cfg.output_tokens
        if cfg.output_tokens_max and cfg.output_tokens_max > cfg.output_tokens:
            natural = rng.randint(cfg.output_tokens, cfg.output_tokens_max)
        max_tokens = body.get("max_tokens") or body.get("max_completion_tokens")
        n_out = int(max_tokens) if body.get("ignore_eos") and max_tokens else natural
        finish = "length" if body.get("ignore_eos") else "stop"
        if max_tokens and int(max_tokens) < n_out:
            n_out, finish = int(max_tokens), "length"
        k = cfg.num_speculative_tokens
        steps = plan_steps(cfg, n_out, rng)
        p_tokens = prompt_tokens_of(messages)
        hit = self._prefix_hit(messages)
        m = self.metrics
        m.prompt.labels(**m.labels).inc(p_tokens)
        m.pc_queries.labels(**m.labels).inc(p_tokens)
        if hit:
            m.pc_hits.labels(**m.labels).inc(hit)
        include_usage = cfg.usage and bool((body.get("stream_options") or {}).get("include_usage"))
        want_ids = bool(body.get("return_token_ids"))

        resp = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await resp.prepare(req)
        served = _ServedRequest(arrival=arrival)
        self.served.append(served)
        rid = f"chatcmpl-cal{self.requests_seen}"
        head = (
            f'{{"id":"{rid}","object":"chat.completion.chunk","created":{int(time.time())},'
            f'"model":{json.dumps(cfg.model)},"choices":[{{"index":0,"delta":'
        )
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        m.running.labels(**m.labels).set(self.active)
        loop = asyncio.get_running_loop()
        emitted = 0
        held: list[tuple[str, int, int]] = []  # burst mode: (chunk, tokens, step) not written
        try:
            due = loop.time() + cfg.ttft_s + cfg.prefill_s_per_token * (p_tokens - hit)
            for i, n in enumerate(steps):
                if i:
                    cfg = self.config  # runtime changes apply from the next step on
                    step = cfg.step_interval_s * (1 + cfg.batch_slowdown * (self.active - 1))
                    if cfg.interval_jitter:
                        step *= 1 + cfg.interval_jitter * (2 * rng.random() - 1)
                    due += step
                    if cfg.stall_after_chunks is not None and i == cfg.stall_after_chunks:
                        due += cfg.stall_s
                delay = due - loop.time()
                if delay > 0:
                    await asyncio.sleep(delay)
                if cfg.abort_after_chunks is not None and i >= cfg.abort_after_chunks:
                    if req.transport is not None:
                        req.transport.close()
                    return resp
                made = emitted + sum(h[1] for h in held)  # tokens made before this step
                ids = list(range(made, made + n))
                content_ids = [t for t in ids if t >= cfg.reasoning_tokens]
                reason_ids = [t for t in ids if t < cfg.reasoning_tokens]
                delta: dict[str, Any] = {}
                if reason_ids:
                    delta[cfg.reasoning_field] = "".join(f" r{t}" for t in reason_ids)
                if content_ids or not reason_ids:
                    delta["content"] = "".join(f" t{t}" for t in content_ids)
                last = i == len(steps) - 1
                tail = f',"token_ids":{json.dumps([t % 1000 + 3 for t in ids])}' if want_ids else ""
                fin = json.dumps(finish) if last else "null"
                out = ""
                if i == 0 and cfg.role_chunk:
                    out += (
                        f'data: {head}{{"role":"assistant","content":""}},'
                        f'"logprobs":null,"finish_reason":null}}]}}\n\n'
                    )
                out += (
                    f'data: {head}{json.dumps(delta)},"logprobs":null,'
                    f'"finish_reason":{fin}{tail}}}]}}\n\n'
                )
                if cfg.burst_chunks and not last and (i + 1) % cfg.burst_chunks:
                    held.append((out, n, i))  # made now, written with a later chunk
                    continue
                if held:
                    out = "".join(h[0] for h in held) + out
                if last and include_usage:
                    usage = {
                        "prompt_tokens": p_tokens,
                        "completion_tokens": n_out,
                        "total_tokens": p_tokens + n_out,
                    }
                    usage_chunk = (
                        f'data: {{"id":"{rid}","object":"chat.completion.chunk",'
                        f'"created":{int(time.time())},"model":{json.dumps(cfg.model)},'
                        f'"choices":[],"usage":{json.dumps(usage)}}}\n\n'
                    )
                    if cfg.usage_delay_s:
                        await resp.write(out.encode())
                        emitted = self._account_held(served, m, k, held, emitted)
                        self._account(served, m, k, n, i, emitted)
                        emitted += n
                        await asyncio.sleep(cfg.usage_delay_s)
                        out, n = "", 0
                    out += usage_chunk
                if last:
                    out += "data: [DONE]\n\n"
                await resp.write(out.encode())
                emitted = self._account_held(served, m, k, held, emitted)
                if n:
                    self._account(served, m, k, n, i, emitted)
                    emitted += n
            m.success.labels(**m.labels, finished_reason=finish).inc()
            await resp.write_eof()
        except asyncio.CancelledError:
            m.success.labels(**m.labels, finished_reason="abort").inc()
            raise
        except ConnectionError:  # the client went away: stop generating, like an engine abort
            m.success.labels(**m.labels, finished_reason="abort").inc()
        finally:
            self.active -= 1
            m.running.labels(**m.labels).set(self.active)
        return resp

    @classmethod
    def _account_held(
        cls,
        served: _ServedRequest,
        m: _Metrics,
        k: int,
        held: list[tuple[str, int, int]],
        emitted: int,
    ) -> int:
        """Account the held chunks just written (burst mode); returns tokens emitted so far."""
        for _, n, i in held:
            cls._account(served, m, k, n, i, emitted)
            emitted += n
        held.clear()
        return emitted

    @staticmethod
    def _account(served: _ServedRequest, m: _Metrics, k: int, n: int, i: int, emitted: int) -> None:
        """Counters and server-side timing follow what was handed to the socket."""
        now = time.perf_counter()
        m.step(k, n, first=i == 0)
        if served.first is None:
            served.first = now
        served.last = now
        served.tokens = emitted + n
        served.chunks = i + 1


class CalibrationServer:
    """The calibration server on 127.0.0.1 in a background thread (its own event loop)."""

    def __init__(
        self, config: CalibrationConfig | None = None, host: str = "127.0.0.1", port: int = 0
    ) -> None:
        self.state = CalibrationApp(config or CalibrationConfig())
        self.host = host
        self.port = port
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def config(self) -> CalibrationConfig:
        return self.state.config

    def start(self) -> CalibrationServer:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.port))
        self.port = sock.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, args=(sock,), daemon=True)
        self._thread.start()
        self._ready.wait(30)
        if self._error is not None:
            raise RuntimeError(f"calibration server failed to start: {self._error}")
        return self

    def _serve(self, sock: socket.socket) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        try:
            self._runner = web.AppRunner(self.state.app, access_log=None, shutdown_timeout=1.0)
            loop.run_until_complete(self._runner.setup())
            loop.run_until_complete(web.SockSite(self._runner, sock).start())
        except BaseException as exc:
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            loop.run_until_complete(self._runner.cleanup())
            pending = asyncio.all_tasks(loop)
            for task in pending:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.close()

    def update(self, **changes: Any) -> None:
        """Change settings at runtime (same as POST /control)."""
        if self._loop is None:
            self.state.update(**changes)
            return
        fut = asyncio.run_coroutine_threadsafe(self._call(self.state.update, **changes), self._loop)
        fut.result(10)

    @staticmethod
    async def _call(fn: Any, **kw: Any) -> Any:
        return fn(**kw)

    def stats(self) -> dict[str, Any]:
        return self.state.stats()

    def stop(self) -> None:
        """Stop serving: connections in flight are cut (that is how tests kill the 'engine')."""
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(15)
        self._loop = None

    def __enter__(self) -> CalibrationServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _parse_args(argv: list[str] | None) -> tuple[argparse.Namespace, CalibrationConfig]:
    p = argparse.ArgumentParser(prog="python -m tests.calibration.server", description=__doc__)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--model", default=CalibrationConfig.model)
    p.add_argument("--ttft-ms", type=float, default=CalibrationConfig.ttft_s * 1000)
    p.add_argument("--step-ms", type=float, default=CalibrationConfig.step_interval_s * 1000)
    p.add_argument("--jitter", type=float, default=0.0, help="± fraction of the step interval")
    p.add_argument("--num-speculative-tokens", "-k", type=int, default=0)
    p.add_argument("--accept-pattern", default="", help="accepted drafts per step, e.g. 3,1,2")
    p.add_argument("--accept-prob", type=float, default=None)
    p.add_argument("--output-tokens", type=int, default=CalibrationConfig.output_tokens)
    p.add_argument("--output-tokens-max", type=int, default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--config", default=None, help="JSON object of any CalibrationConfig field")
    args = p.parse_args(argv)
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        p.error("--host: the calibration server binds loopback only")
    cfg = CalibrationConfig(
        model=args.model,
        ttft_s=args.ttft_ms / 1000,
        step_interval_s=args.step_ms / 1000,
        interval_jitter=args.jitter,
        num_speculative_tokens=args.num_speculative_tokens,
        accept_pattern=[int(x) for x in args.accept_pattern.split(",") if x.strip()],
        accept_prob=args.accept_prob,
        output_tokens=args.output_tokens,
        output_tokens_max=args.output_tokens_max,
        seed=args.seed,
    )
    if args.config:
        cfg = dataclasses.replace(cfg, **json.loads(args.config))
    try:
        cfg.check()
    except ValueError as exc:
        p.error(str(exc))
    return args, cfg


def main(argv: list[str] | None = None) -> int:
    args, cfg = _parse_args(argv)
    state = CalibrationApp(cfg)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((args.host, args.port))
    print(f"calibration server on http://{args.host}:{sock.getsockname()[1]}", flush=True)

    async def serve() -> None:
        runner = web.AppRunner(state.app, access_log=None, shutdown_timeout=1.0)
        await runner.setup()
        await web.SockSite(runner, sock).start()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError):
                loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        await runner.cleanup()

    asyncio.run(serve())
    return 0


if __name__ == "__main__":
    sys.exit(main())
