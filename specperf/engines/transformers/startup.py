"""What the transformers engine server does before it listens: load the target (checkpoint, or
random weights from its config), build the method's backend, run the fast-path check."""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

import torch

from specperf.engines.transformers.backend import Backend
from specperf.engines.transformers.eagle3.target import eos_token_ids
from specperf.engines.transformers.eagle3_backend import Eagle3Backend
from specperf.engines.transformers.generate import GenerateBackend
from specperf.engines.transformers.protocol import encode_chat

PROBE_TEXT = "Warm up: say something about caches and speed."


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
        from specperf.engines.transformers.eagle3.checkpoint import load_head, new_head
        from specperf.engines.transformers.eagle3.config import load_config

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
