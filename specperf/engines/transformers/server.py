"""OpenAI-compatible streaming server around a transformers model (``python -m
specperf.engines.transformers.server``), started and owned by
:class:`specperf.engines.transformers.engine.TransformersEngine`.

Why a server of our own rather than ``transformers serve``: the suite measures every engine
through one path (streaming chat + counter deltas), and ``transformers serve`` neither loads a
draft model nor reports acceptance (reference/transformers.md §3). Here each decoding step is one
SSE chunk carrying its text and ``token_ids`` (so tokens per chunk show acceptance), usage comes
last, and ``GET /specperf/counters`` serves the per-step counters (drafts, draft tokens, accepted,
per position, generation tokens, draft/verify seconds).

One worker thread owns the model; the aiohttp event loop only parses, detokenises and streams.
Native requests that arrive together with equal sampling are batched; speculative methods run one
request at a time (batch size 1, as transformers' assisted decoding).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import threading
import time
import uuid
from collections.abc import Sequence
from typing import Any

import torch

from specperf.engines.transformers.backend import DECODE_LOOP_MODES, METHODS, SPECULATIVE
from specperf.engines.transformers.counters import Counters
from specperf.engines.transformers.protocol import BadRequest, Detokenizer, parse_request
from specperf.engines.transformers.startup import start_backend
from specperf.engines.transformers.worker import Job, Worker

ENGINE_NAME = "specperf-transformers"


class Server:
    def __init__(
        self, tokenizer: Any, worker: Worker, model_name: str, max_len: int, info: dict
    ) -> None:
        self.tok = tokenizer
        self.worker = worker
        self.model_name = model_name
        self.max_len = max_len
        self.info = info

    def app(self) -> Any:
        from aiohttp import web

        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_get("/health", self.health)
        app.router.add_get("/version", self.version)
        app.router.add_get("/v1/models", self.models)
        app.router.add_get("/specperf/counters", self.counters)
        app.router.add_get("/specperf/config", self.config)
        app.router.add_post("/v1/chat/completions", self.chat)
        return app

    async def health(self, request: Any) -> Any:
        from aiohttp import web

        return web.json_response({"status": "ok"})

    async def version(self, request: Any) -> Any:
        from aiohttp import web

        return web.json_response({"engine": ENGINE_NAME, **self.info["versions"]})

    async def models(self, request: Any) -> Any:
        from aiohttp import web

        data = [{"id": self.model_name, "object": "model", "owned_by": "specperf"}]
        return web.json_response({"object": "list", "data": data})

    async def counters(self, request: Any) -> Any:
        from aiohttp import web

        return web.json_response(self.worker.counters.snapshot())

    async def config(self, request: Any) -> Any:
        from aiohttp import web

        return web.json_response(
            {
                **self.info,
                "backend": self.worker.backend.config(),
                "notes": self.worker.backend.notes,
            }
        )

    def _chunk(self, cid: str, created: int, delta: dict, ids: list | None, reason: Any) -> str:
        choice: dict[str, Any] = {"index": 0, "delta": delta, "finish_reason": reason}
        if ids is not None:
            choice["token_ids"] = ids
        obj = {
            "id": cid,
            "object": "chat.completion.chunk",
            "created": created,
            "model": self.model_name,
            "choices": [choice],
        }
        return f"data: {json.dumps(obj)}\n\n"

    async def chat(self, request: Any) -> Any:
        from aiohttp import web

        try:
            body = await request.json()
            if not isinstance(body, dict):
                raise BadRequest("body must be a JSON object")
            req, stream, include_usage = parse_request(body, self.tok, self.max_len)
        except (BadRequest, ValueError) as exc:
            return web.json_response(
                {"error": {"message": str(exc), "type": "invalid_request_error"}}, status=400
            )
        loop = asyncio.get_running_loop()
        job = Job(req, loop, asyncio.Queue())
        self.worker.counters.add_request(len(req.prompt_ids))
        self.worker.submit(job)
        cid, created = f"chatcmpl-{uuid.uuid4().hex[:16]}", int(time.time())
        detok = Detokenizer(self.tok)
        usage = {
            "prompt_tokens": len(req.prompt_ids),
            "completion_tokens": 0,
            "total_tokens": len(req.prompt_ids),
        }
        if not stream:
            try:
                ids: list[int] = []
                reason = None
                while reason is None:
                    kind, a, b = await job.events.get()
                    if kind == "error":
                        return web.json_response({"error": {"message": a}}, status=500)
                    ids.extend(a)
                    reason = b
            except asyncio.CancelledError:
                req.cancelled.set()
                raise
            usage["completion_tokens"] = len(ids)
            usage["total_tokens"] += len(ids)
            msg = {"role": "assistant", "content": detok.add(ids, final=True)}
            return web.json_response(
                {
                    "id": cid,
                    "object": "chat.completion",
                    "created": created,
                    "model": self.model_name,
                    "choices": [
                        {"index": 0, "message": msg, "finish_reason": reason, "token_ids": ids}
                    ],
                    "usage": usage,
                }
            )
        resp = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        try:
            await resp.prepare(request)
            await resp.write(self._chunk(cid, created, {"role": "assistant"}, None, None).encode())
            while True:
                kind, a, b = await job.events.get()
                if kind == "error":
                    err = {"error": {"message": a, "type": "internal_error"}}
                    await resp.write(f"data: {json.dumps(err)}\n\n".encode())
                    break
                text = detok.add(a, final=b is not None)
                usage["completion_tokens"] += len(a)
                await resp.write(self._chunk(cid, created, {"content": text}, a, b).encode())
                if b is not None:
                    break
            if include_usage:
                usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
                obj = {
                    "id": cid,
                    "object": "chat.completion.chunk",
                    "created": created,
                    "model": self.model_name,
                    "choices": [],
                    "usage": usage,
                }
                await resp.write(f"data: {json.dumps(obj)}\n\n".encode())
            await resp.write(b"data: [DONE]\n\n")
            await resp.write_eof()
        except (asyncio.CancelledError, ConnectionResetError):
            req.cancelled.set()
            raise
        return resp


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    prog = "python -m specperf.engines.transformers.server"
    ap = argparse.ArgumentParser(prog=prog, description=__doc__)
    ap.add_argument("--model", required=True, help="target checkpoint (or config) directory")
    ap.add_argument("--tokenizer", default=None)
    ap.add_argument("--served-model-name", default=None)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--method", choices=METHODS, default="native")
    ap.add_argument("--num-speculative-tokens", type=int, default=None)
    ap.add_argument("--draft-model", default=None, help="draft model dir / EAGLE3 head dir")
    ap.add_argument("--ngram-max", type=int, default=None)
    ap.add_argument("--dtype", default="auto")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--max-model-len", type=int, default=4096)
    ap.add_argument("--max-batch-size", type=int, default=8)
    ap.add_argument("--cache", choices=("auto", "static", "dynamic"), default="auto")
    ap.add_argument("--compile", choices=("auto", "off"), default="auto")
    ap.add_argument(
        "--decode-loop",
        choices=DECODE_LOOP_MODES,
        default="off",
        help="native greedy batch-1 requests without generate()'s per-token host work "
        "(auto: where the compiled decode step is used; specperf.engines.transformers.decode_loop)",
    )
    ap.add_argument("--random-weights", action="store_true", help="random target from config")
    ap.add_argument("--draft-random-weights", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--probe-tokens", type=int, default=16)
    ap.add_argument(
        "--phase-timing",
        choices=("on", "off"),
        default="on",
        help="EAGLE3 draft/verify seconds per step in the counters (CUDA events: no extra sync)",
    )
    ap.add_argument(
        "--sdpa-cudnn",
        choices=("on", "off"),
        default="off",
        help="cuDNN attention for torch SDPA (off: it plans per shape, slow for growing caches)",
    )
    args = ap.parse_args(argv)
    if args.method in SPECULATIVE and not args.num_speculative_tokens:
        ap.error(f"--method {args.method} needs --num-speculative-tokens")
    if args.method in ("eagle3", "draft_model") and not args.draft_model:
        ap.error(f"--method {args.method} needs --draft-model")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    import transformers
    from aiohttp import web

    import specperf

    started = time.monotonic()
    tokenizer, backend, loaded = start_backend(args)
    counters = Counters(
        args.num_speculative_tokens,
        args.method in SPECULATIVE,
        timed=args.method == "eagle3" and args.phase_timing == "on",
    )
    worker = Worker(backend, counters)
    threading.Thread(target=worker.run, name="hf-worker", daemon=True).start()
    name = args.served_model_name or args.model
    info = {
        "model": args.model,
        "served_model_name": name,
        "method": args.method,
        "num_speculative_tokens": args.num_speculative_tokens,
        "draft_model": args.draft_model,
        "max_model_len": args.max_model_len,
        "threads": torch.get_num_threads(),
        "sdpa_cudnn": args.sdpa_cudnn,
        "phase_timing": args.phase_timing,
        "random_weights": args.random_weights,
        "draft_random_weights": args.draft_random_weights,
        "startup_s": round(time.monotonic() - started, 2),
        **loaded,
        "versions": {
            "transformers": transformers.__version__,
            "torch": torch.__version__,
            "specperf": getattr(specperf, "__version__", None),
            "cuda": torch.version.cuda,
        },
    }
    print(f"specperf hf_server ready: {json.dumps(info, default=str)}", flush=True)
    server = Server(tokenizer, worker, name, args.max_model_len, info)
    try:
        web.run_app(server.app(), host=args.host, port=args.port, print=None)
    finally:
        worker.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
