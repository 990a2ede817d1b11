"""SGLang stand-in server: what SGLang's HTTP server, metrics and OpenAI streaming emit, per
version, with speculative decoding mimicked the way SGLang counts it.

Sources (read from the release wheels; paths are package paths):

* 0.5.23 ``srt/entrypoints/http_server.py``: ``/health_generate`` (503 while starting, then a
  one-token generation, 200), ``/server_info`` (resolved server args + ``internal_states`` +
  ``version``) with ``/get_server_info`` as a deprecated alias, ``/flush_cache`` GET|POST (400
  while requests run), ``/v1/models``, ``/metrics`` only with ``--enable-metrics``.
  0.5.2: the same, but only ``/get_server_info``.
* 0.5.23 ``srt/observability/metrics_collector.py::TokenizerMetricsCollector``:
  ``sglang:prompt_tokens_total`` / ``generation_tokens_total`` / ``num_requests_total`` (labels
  + ``is_streaming``), ``sglang:cached_tokens_total`` (``cache_source``),
  ``sglang:spec_verify_calls_total`` — all incremented once per FINISHED request in
  ``observe_one_finished_request``. 0.5.2 ``srt/metrics/collector.py``: the same minus
  ``spec_verify_calls_total`` (it appears in 0.5.13).
* 0.5.23 ``srt/managers/scheduler_components/batch_result_processor.py``: ``spec_verify_ct``
  += 1 per verify step; the first output token comes from prefill (not a verify step); each
  verify step commits ``correct drafts + 1`` tokens. ``tokenizer_manager.py``:
  ``spec_num_proposed_drafts = spec_verify_ct × (speculative_num_draft_tokens − 1)``,
  ``spec_accept_length = completion_tokens / spec_verify_ct``.
* 0.5.23 ``srt/entrypoints/openai/serving_chat.py`` (~l. 2700): with
  ``return_spec_tokens_details`` the stream ends with a ``choices: []`` chunk carrying
  ``sglext.spec_tokens_details`` (``protocol.py::SpecTokensDetails``), then the usage chunk.
  0.5.2 has no such field (it appears by 0.5.19).

Run: ``python -m tests.sglang_standin.server --port P --version 0.5.23 --speculative-algorithm
EAGLE3 --speculative-num-steps 3 ...`` (accepts SGLang's own launch flags), or in a thread:
``with StandinServer(StandinConfig(...)) as srv: srv.url``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import socket
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge
from prometheus_client.exposition import generate_latest


@dataclass(frozen=True)
class Profile:
    """What one SGLang release exposes (see the module docstring for the sources)."""

    version: str
    server_info: bool  # /server_info (else only /get_server_info)
    verify_counter: bool  # sglang:spec_verify_calls_total
    spec_details: bool  # return_spec_tokens_details → sglext.spec_tokens_details


PROFILES = {
    "0.5.23": Profile("0.5.23", server_info=True, verify_counter=True, spec_details=True),
    "0.5.2": Profile("0.5.2", server_info=False, verify_counter=False, spec_details=False),
    # 0.5.16 wheel: /server_info and sglang:spec_verify_calls_total, no return_spec_tokens_details
    "0.5.16": Profile("0.5.16", server_info=True, verify_counter=True, spec_details=False),
}


@dataclass
class StandinConfig:
    version: str = "0.5.23"
    model: str = "standin-model"
    served_model_name: str | None = None
    algorithm: str | None = None  # EAGLE3, NEXTN, ... (None: native)
    draft_model: str | None = None
    num_steps: int = 0
    topk: int = 1
    num_draft_tokens: int = 0  # SGLang's value: root included
    accept_pattern: list[int] = field(default_factory=lambda: [2])  # correct drafts per step
    output_tokens: int = 24
    ttft_s: float = 0.005
    step_interval_s: float = 0.002
    startup_s: float = 0.0
    enable_metrics: bool = True
    resolved_overrides: dict[str, Any] = field(default_factory=dict)  # SGLang rewriting args

    @property
    def profile(self) -> Profile:
        return PROFILES[self.version]


class _Metrics:
    """SGLang's tokenizer-side counters (labels as in 0.5.23: model_name, engine_type)."""

    def __init__(self, cfg: StandinConfig) -> None:
        self.registry = CollectorRegistry()
        base = ["model_name", "engine_type"]
        self.labels = {"model_name": cfg.served_model_name or cfg.model, "engine_type": "unified"}
        r = self.registry
        self.prompt = Counter("sglang:prompt_tokens", "", [*base, "is_streaming"], registry=r)
        self.gen = Counter("sglang:generation_tokens", "", [*base, "is_streaming"], registry=r)
        self.reqs = Counter("sglang:num_requests", "", [*base, "is_streaming"], registry=r)
        self.cached = Counter("sglang:cached_tokens", "", [*base, "cache_source"], registry=r)
        self.verify = (
            Counter("sglang:spec_verify_calls", "", base, registry=r)
            if cfg.profile.verify_counter
            else None
        )
        self.accept_len = Gauge("sglang:spec_accept_length", "", base, registry=r)

    def finished(self, prompt: int, gen: int, cached: int, verify_ct: int, stream: bool) -> None:
        s = {**self.labels, "is_streaming": "true" if stream else "false"}
        self.prompt.labels(**s).inc(prompt)
        self.gen.labels(**s).inc(gen)
        if self.verify is not None and verify_ct > 0:
            self.verify.labels(**self.labels).inc(verify_ct)
        if cached > 0:
            self.cached.labels(**self.labels, cache_source="device").inc(cached)
        self.reqs.labels(**s).inc(1)


class StandinApp:
    def __init__(self, cfg: StandinConfig) -> None:
        self.cfg = cfg
        self.started = time.monotonic()
        self.metrics = _Metrics(cfg)
        self.active = 0
        self.cache: set[str] = set()
        self.flushes = 0
        self.accept_tokens = 0  # SGLang's internal avg (reset by /flush_cache)
        self.forward_ct = 0
        self.requests_seen: list[dict[str, Any]] = []
        app = web.Application()
        app.router.add_get("/health_generate", self.health)
        app.router.add_get("/health", self.health)
        if cfg.profile.server_info:
            app.router.add_get("/server_info", self.server_info)
        app.router.add_get("/get_server_info", self.server_info)
        app.router.add_route("*", "/flush_cache", self.flush_cache)
        app.router.add_get("/v1/models", self.models)
        app.router.add_get("/metrics", self.metrics_page)
        app.router.add_post("/v1/chat/completions", self.chat)
        self.app = app

    # -- plain endpoints

    def ready(self) -> bool:
        return time.monotonic() - self.started >= self.cfg.startup_s

    async def health(self, request: web.Request) -> web.Response:
        return web.Response(status=200 if self.ready() else 503)

    def info(self) -> dict[str, Any]:
        c = self.cfg
        states: dict[str, Any] = {"last_gen_throughput": 0.0}
        if c.algorithm and self.forward_ct:
            states["avg_spec_accept_length"] = self.accept_tokens / self.forward_ct
        out = {
            "model_path": c.model,
            "served_model_name": c.served_model_name or c.model,
            "tokenizer_path": c.model,
            "speculative_algorithm": c.algorithm,
            "speculative_draft_model_path": c.draft_model,
            "speculative_num_steps": c.num_steps if c.algorithm else None,
            "speculative_eagle_topk": c.topk if c.algorithm else None,
            "speculative_num_draft_tokens": c.num_draft_tokens if c.algorithm else None,
            "enable_metrics": c.enable_metrics,
            "max_running_requests": 48 if c.algorithm else None,
            "internal_states": [states],
            "version": c.version,
        }
        out.update(c.resolved_overrides)
        return out

    async def server_info(self, request: web.Request) -> web.Response:
        return web.json_response(self.info())

    async def flush_cache(self, request: web.Request) -> web.Response:
        if self.active:
            return web.Response(status=400, text="Flush cache failed.\n")
        self.cache.clear()
        self.accept_tokens = self.forward_ct = 0
        self.flushes += 1
        return web.Response(text="Cache flushed.\n")

    async def models(self, request: web.Request) -> web.Response:
        name = self.cfg.served_model_name or self.cfg.model
        return web.json_response({"object": "list", "data": [{"id": name, "object": "model"}]})

    async def metrics_page(self, request: web.Request) -> web.Response:
        if not self.cfg.enable_metrics:
            return web.Response(status=404, text="Not Found")
        body = generate_latest(self.metrics.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    # -- chat streaming

    def plan(self, n_out: int) -> tuple[list[int], list[int]]:
        """Tokens per chunk (prefill token first, then correct+1 per verify step) and the
        correct-draft count of each verify step (before truncation, as the verifier counts)."""
        if not self.cfg.algorithm:
            return [1] * n_out, []
        depth = self.cfg.num_draft_tokens - 1 if self.cfg.topk == 1 else self.cfg.num_steps
        chunks, steps = [1], []
        emitted, i = 1, 0
        while emitted < n_out:
            correct = max(0, min(depth, self.cfg.accept_pattern[i % len(self.cfg.accept_pattern)]))
            take = min(correct + 1, n_out - emitted)
            chunks.append(take)
            steps.append(correct)
            emitted += take
            i += 1
        return chunks, steps

    async def chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.requests_seen.append({k: v for k, v in body.items() if k != "messages"})
        prompt_text = " ".join(str(m.get("content", "")) for m in body.get("messages", []))
        prompt_tokens = max(1, len(prompt_text.split()))
        cached = prompt_tokens - 1 if prompt_text in self.cache else 0
        self.cache.add(prompt_text)
        max_tokens = int(body.get("max_tokens") or 16)
        n_out = min(max_tokens, self.cfg.output_tokens)
        finish = "length" if max_tokens <= self.cfg.output_tokens else "stop"
        chunks, steps = self.plan(n_out)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        rid, created, model = "chatcmpl-standin", int(time.time()), body.get("model")
        self.active += 1
        try:

            async def send(obj: dict[str, Any]) -> None:
                await resp.write(f"data: {json.dumps(obj)}\n\n".encode())

            def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
                return {
                    "id": rid,
                    "object": "chat.completion.chunk",
                    "created": created,
                    "model": model,
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
                }

            await asyncio.sleep(self.cfg.ttft_s)
            for j, n in enumerate(chunks):
                if j:
                    await asyncio.sleep(self.cfg.step_interval_s)
                delta = {"content": "tok " * n}
                if j == 0:
                    delta["role"] = "assistant"
                await send(chunk(delta))
            await send(chunk({}, finish))
            verify_ct = len(steps)
            correct = sum(steps)
            self.accept_tokens += correct + verify_ct
            self.forward_ct += verify_ct
            if (
                self.cfg.algorithm
                and body.get("return_spec_tokens_details")
                and self.cfg.profile.spec_details
                and verify_ct
            ):
                hist = [0] * (max(steps) + 1)
                for s in steps:
                    hist[s] += 1
                proposed = verify_ct * (self.cfg.num_draft_tokens - 1)
                details = {
                    "spec_accept_rate": correct / proposed if proposed else 0.0,
                    "spec_accept_length": n_out / verify_ct,
                    "spec_cap_length": 0.0,
                    "spec_block_accept_length": 0.0,
                    "spec_num_correct_drafts": correct,
                    "spec_num_proposed_drafts": proposed,
                    "spec_verify_ct": verify_ct,
                    "spec_correct_drafts_histogram": hist,
                    "spec_cap_lens_histogram": [],
                }
                await send(
                    {
                        "id": rid,
                        "object": "chat.completion.chunk",
                        "created": created,
                        "model": model,
                        "choices": [],
                        "sglext": {"spec_tokens_details": details},
                    }
                )
            stream = bool(body.get("stream"))
            self.metrics.finished(prompt_tokens, n_out, cached, verify_ct, stream)
            if (body.get("stream_options") or {}).get("include_usage"):
                usage = {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": n_out,
                    "total_tokens": prompt_tokens + n_out,
                }
                await send(
                    {
                        "id": rid,
                        "object": "chat.completion.chunk",
                        "created": created,
                        "model": model,
                        "choices": [],
                        "usage": usage,
                    }
                )
            await resp.write(b"data: [DONE]\n\n")
        finally:
            self.active -= 1
        return resp


class StandinServer:
    """The stand-in on 127.0.0.1 in a background thread (its own event loop)."""

    def __init__(self, cfg: StandinConfig | None = None, port: int = 0) -> None:
        self.state = StandinApp(cfg or StandinConfig())
        self.port = port
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> StandinServer:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self.port))
        self.port = sock.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, args=(sock,), daemon=True)
        self._thread.start()
        if not self._ready.wait(30):
            raise RuntimeError("stand-in did not start")
        return self

    def _serve(self, sock: socket.socket) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        runner = web.AppRunner(self.state.app, access_log=None, shutdown_timeout=1.0)
        loop.run_until_complete(runner.setup())
        loop.run_until_complete(web.SockSite(runner, sock).start())
        self.state.started = time.monotonic()  # "starting" counts from listening
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            loop.run_until_complete(runner.cleanup())
            loop.close()

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(15)
        self._loop = None

    def __enter__(self) -> StandinServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def config_from_args(argv: Sequence[str]) -> tuple[StandinConfig, str, int, float | None]:
    """SGLang's own launch flags (the ones specperf emits) → config, host, port, die_after."""
    p = argparse.ArgumentParser(prog="sglang-standin")
    p.add_argument("--version", default="0.5.23", choices=sorted(PROFILES))
    p.add_argument("--model-path", "--model", dest="model", required=True)
    p.add_argument("--served-model-name")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=30000)
    p.add_argument("--enable-metrics", action="store_true")
    p.add_argument("--speculative-algorithm")
    p.add_argument("--speculative-draft-model-path", "--speculative-draft-model")
    p.add_argument("--speculative-num-steps", type=int, default=0)
    p.add_argument("--speculative-eagle-topk", type=int, default=1)
    p.add_argument("--speculative-num-draft-tokens", type=int, default=0)
    # stand-in controls (not SGLang flags)
    p.add_argument("--standin-accept-pattern", default="2")
    p.add_argument("--standin-output-tokens", type=int, default=24)
    p.add_argument("--standin-startup-s", type=float, default=0.0)
    p.add_argument("--standin-die-after-s", type=float, default=None)
    p.add_argument("--standin-resolved-overrides", default="{}")
    a, _unknown = p.parse_known_args(list(argv))
    cfg = StandinConfig(
        version=a.version,
        model=a.model,
        served_model_name=a.served_model_name,
        algorithm=a.speculative_algorithm,
        draft_model=a.speculative_draft_model_path,
        num_steps=a.speculative_num_steps,
        topk=a.speculative_eagle_topk,
        num_draft_tokens=a.speculative_num_draft_tokens,
        accept_pattern=[int(x) for x in a.standin_accept_pattern.split(",")],
        output_tokens=a.standin_output_tokens,
        startup_s=a.standin_startup_s,
        enable_metrics=a.enable_metrics,
        resolved_overrides=json.loads(a.standin_resolved_overrides),
    )
    return cfg, a.host, a.port, a.standin_die_after_s


def main(argv: Sequence[str] | None = None) -> int:
    cfg, host, port, die_after = config_from_args(sys.argv[1:] if argv is None else argv)
    app = StandinApp(cfg)
    print(f"sglang stand-in {cfg.version} on {host}:{port}", flush=True)

    async def run() -> None:
        runner = web.AppRunner(app.app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, host, port).start()
        app.started = time.monotonic()
        if die_after is not None:
            await asyncio.sleep(die_after)
            print("stand-in: dying as asked", flush=True)
            raise SystemExit(3)
        while True:
            await asyncio.sleep(3600)

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
