"""OpenAI-compatible streaming server around a transformers model (``python -m
specperf.engines.hf_server``), started and owned by :class:`specperf.engines.transformers.
TransformersEngine`.

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
import collections
import json
import os
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from specperf.eagle3.sampling import Sampling
from specperf.eagle3.speculate import StepInfo
from specperf.eagle3.target import eos_token_ids
from specperf.engines.hf_generation import (
    DECODE_LOOP_MODES,
    METHODS,
    SPECULATIVE,
    Backend,
    Counters,
    Eagle3Backend,
    GenerateBackend,
    Request,
)

ENGINE_NAME = "specperf-transformers"
PROBE_TEXT = "Warm up: say something about caches and speed."


# ---------------------------------------------------------------- text


class Detokenizer:
    """Incremental detokenisation with a small prefix window (vLLM's scheme): text is released
    once it no longer ends in an incomplete UTF-8 sequence."""

    def __init__(self, tokenizer: Any) -> None:
        self.tok = tokenizer
        self.ids: list[int] = []
        self.prefix = 0
        self.read = 0

    def _decode(self, ids: Sequence[int]) -> str:
        return str(self.tok.decode(list(ids), skip_special_tokens=True))

    def add(self, new: Sequence[int], final: bool = False) -> str:
        self.ids.extend(new)
        before = self._decode(self.ids[self.prefix : self.read])
        full = self._decode(self.ids[self.prefix :])
        if len(full) > len(before) and (final or not full.endswith("\ufffd")):
            self.prefix, self.read = self.read, len(self.ids)
            return full[len(before) :]
        return ""


def encode_chat(tokenizer: Any, messages: list[dict[str, Any]], kwargs: dict[str, Any]) -> list:
    out = tokenizer.apply_chat_template(
        messages, add_generation_prompt=True, tokenize=True, **kwargs
    )
    if isinstance(out, dict) or hasattr(out, "keys"):
        out = out["input_ids"]
    if out and isinstance(out[0], list):
        out = out[0]
    return [int(t) for t in out]


# ---------------------------------------------------------------- worker


@dataclass
class Job:
    req: Request
    loop: asyncio.AbstractEventLoop
    events: asyncio.Queue[tuple[str, Any, Any]]
    finished: bool = False
    produced: int = 0

    def emit(self, kind: str, a: Any = None, b: Any = None) -> None:
        self.loop.call_soon_threadsafe(self.events.put_nowait, (kind, a, b))


@dataclass
class Worker:
    """The one thread that touches the model."""

    backend: Backend
    counters: Counters
    pending: collections.deque[Job] = field(default_factory=collections.deque)
    cond: threading.Condition = field(default_factory=threading.Condition)
    stopping: bool = False

    def submit(self, job: Job) -> None:
        with self.cond:
            self.pending.append(job)
            self.cond.notify()

    def _take(self) -> list[Job] | None:
        with self.cond:
            while not self.pending and not self.stopping:
                self.cond.wait()
            if self.stopping:
                return None
            first = self.pending.popleft()
            batch = [first]
            if self.backend.max_batch > 1:
                keep: collections.deque[Job] = collections.deque()
                while self.pending and len(batch) < self.backend.max_batch:
                    job = self.pending.popleft()
                    same = job.req.batch_key() == first.req.batch_key()
                    (batch if same else keep).append(job)
                keep.extend(self.pending)
                self.pending = keep
            return [j for j in batch if not j.req.cancelled.is_set()] or []

    def run(self) -> None:
        while True:
            batch = self._take()
            if batch is None:
                return
            if not batch:
                continue

            def on_step(row: int, info: StepInfo, reason: str | None, batch: list = batch) -> None:
                job = batch[row]
                self.counters.add_step(info)
                job.produced += len(info.tokens)
                if reason is not None:
                    job.finished = True
                job.emit("tokens", info.tokens, reason)

            self.counters.add_batch(len(batch))
            try:
                self.backend.run([j.req for j in batch], on_step)
            except Exception as exc:
                traceback.print_exc()
                for j in batch:
                    if not j.finished:
                        j.finished = True
                        j.emit("error", f"{type(exc).__name__}: {exc}")
                continue
            for j in batch:
                if not j.finished and not j.req.cancelled.is_set():
                    j.finished = True
                    j.emit("error", "generation ended without a finish reason")

    def stop(self) -> None:
        with self.cond:
            self.stopping = True
            self.cond.notify_all()


# ---------------------------------------------------------------- HTTP


class BadRequest(ValueError):
    pass


def _num(body: dict[str, Any], key: str, default: Any, kind: type) -> Any:
    v = body.get(key, default)
    if v is None:
        return default
    try:
        return kind(v)
    except (TypeError, ValueError):
        raise BadRequest(f"field {key!r} must be a {kind.__name__}, got {v!r}") from None


def parse_request(body: dict[str, Any], tokenizer: Any, max_len: int) -> tuple[Request, bool, bool]:
    """(request, stream, include_usage) from an OpenAI chat body; BadRequest names the field."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("field 'messages' must be a non-empty list")
    kwargs = body.get("chat_template_kwargs") or {}
    if not isinstance(kwargs, dict):
        raise BadRequest("field 'chat_template_kwargs' must be an object")
    try:
        prompt = encode_chat(tokenizer, messages, kwargs)
    except Exception as exc:
        raise BadRequest(f"chat template failed: {exc}") from None
    room = max_len - len(prompt)
    max_tokens = body.get("max_completion_tokens") or body.get("max_tokens") or room
    max_tokens = _num({"max_tokens": max_tokens}, "max_tokens", room, int)
    if max_tokens < 1:
        raise BadRequest("field 'max_tokens' must be >= 1")
    if max_tokens > room:
        raise BadRequest(
            f"prompt ({len(prompt)} tokens) + max_tokens ({max_tokens}) exceeds the server's "
            f"max model length {max_len}"
        )
    seed = body.get("seed")
    sampling = Sampling(
        temperature=_num(body, "temperature", 1.0, float),
        top_p=_num(body, "top_p", 1.0, float),
        top_k=_num(body, "top_k", -1, int),
        min_p=_num(body, "min_p", 0.0, float),
        seed=None if seed is None else _num(body, "seed", 0, int),
    )
    req = Request(prompt, max_tokens, sampling, ignore_eos=bool(body.get("ignore_eos", False)))
    stream = bool(body.get("stream", False))
    usage = bool((body.get("stream_options") or {}).get("include_usage", False))
    return req, stream, usage


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


# ---------------------------------------------------------------- loading


def _dtype(name: str, device: torch.device, path: str) -> torch.dtype:
    if name == "auto":
        cfg = json.loads((Path(path) / "config.json").read_text())
        name = str(cfg.get("dtype") or cfg.get("torch_dtype") or "float32")
    try:
        dt = getattr(torch, name)
    except AttributeError:
        raise SystemExit(f"--dtype {name!r}: not a torch dtype") from None
    return dt


def load_model(path: str, dtype: torch.dtype, device: torch.device, random: bool, seed: int):
    """A causal LM from a checkpoint, or (``random``) from its config.json alone with seeded
    random weights made on the device (for random-weight shapes of real models)."""
    from transformers import AutoConfig, AutoModelForCausalLM

    if random:
        cfg = AutoConfig.from_pretrained(path)
        torch.manual_seed(seed)
        with torch.device(device):
            model = AutoModelForCausalLM.from_config(cfg, dtype=dtype)
    else:
        model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype).to(device)
    for p in model.parameters():
        p.requires_grad_(False)
    return model.eval()


def build_backend(args: argparse.Namespace, tokenizer: Any) -> tuple[Backend, dict[str, Any]]:
    device = torch.device(
        args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    )
    dtype = _dtype(args.dtype, device, args.model)
    started = time.monotonic()
    model = load_model(args.model, dtype, device, args.random_weights, args.seed)
    eos = eos_token_ids(model, tokenizer)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else min(eos)
    static = args.cache == "static" or (args.cache == "auto" and device.type == "cuda")
    loaded: dict[str, Any] = {"target_load_s": round(time.monotonic() - started, 2)}
    backend: Backend
    if args.method == "eagle3":
        from specperf.eagle3.checkpoint import load_head, new_head
        from specperf.eagle3.config import load_config

        if args.draft_random_weights:
            hcfg = load_config(args.draft_model, model.config.num_hidden_layers)
            head = new_head(hcfg, torch.arange(hcfg.draft_vocab_size), seed=args.seed + 1)
            head = head.to(device=device, dtype=dtype).eval()
        else:
            head = load_head(
                args.draft_model,
                num_target_layers=model.config.num_hidden_layers,
                target_vocab_size=model.config.vocab_size,
                target_hidden_size=model.config.hidden_size,
                device=device,
                dtype=dtype,
            )
        backend = Eagle3Backend(
            model,
            eos,
            pad,
            args.max_model_len,
            head=head,
            k=args.num_speculative_tokens,
            static_cache=static,
            compile_mode=args.compile,
            phase_timing=args.phase_timing == "on",
        )
    else:
        draft = None
        if args.method == "draft_model":
            draft = load_model(
                args.draft_model, dtype, device, args.draft_random_weights, args.seed + 1
            )
        backend = GenerateBackend(
            model,
            eos,
            pad,
            args.max_model_len,
            method=args.method,
            k=args.num_speculative_tokens,
            draft=draft,
            ngram_max=args.ngram_max,
            max_batch=args.max_batch_size,
            static_cache=static,
            compile_mode=args.compile,
            decode_loop=args.decode_loop,
        )
    loaded.update(
        {
            "device": str(device),
            "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
            # which physical GPU this is, as the worker's pinning left it (multi-GPU runs)
            "device_uuid": _device_uuid(torch, device),
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "cuda_device_count": torch.cuda.device_count() if device.type == "cuda" else 0,
            "dtype": str(dtype).removeprefix("torch."),
            "static_cache": static,
            "eos_token_ids": sorted(eos),
            "params": sum(p.numel() for p in model.parameters()),
            "weight_bytes": sum(p.numel() * p.element_size() for p in model.parameters()),
        }
    )
    return backend, loaded


def _device_uuid(torch: Any, device: Any) -> str | None:
    if device.type != "cuda":
        return None
    uuid = getattr(torch.cuda.get_device_properties(device), "uuid", None)
    return f"GPU-{uuid}" if uuid is not None else None


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m specperf.engines.hf_server", description=__doc__)
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
        "(auto: where the compiled decode step is used; specperf.engines.hf_decode_loop)",
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


def start_backend(args: argparse.Namespace) -> tuple[Any, Backend, dict[str, Any]]:
    """Everything the server does before it listens: attention backends, tokenizer, model and
    method, the compiled-vs-eager start-up check (also the warm-up). Shared with the EAGLE3 fit
    on the engine path (specperf.testkit.eagle3_fit), which must see exactly the numerics served."""
    from transformers import AutoTokenizer

    if args.sdpa_cudnn == "off" and torch.cuda.is_available():
        torch.backends.cuda.enable_cudnn_sdp(False)
    tokenizer = AutoTokenizer.from_pretrained(args.tokenizer or args.model)
    backend, loaded = build_backend(args, tokenizer)
    probe = encode_chat(
        tokenizer, [{"role": "user", "content": PROBE_TEXT}], {"enable_thinking": False}
    )
    backend.check_fast_path(probe, args.probe_tokens)  # also the warm-up
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        # peak memory of serving, not of the start-up check's fp32 twin
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    return tokenizer, backend, loaded


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
