"""What every generation path of the transformers engine shares: the request as the worker
sees it, the per-step callback, the ``Backend`` base and the GenerationConfig helpers.

Each path reports every decoding step as soon as its tokens are on the host (``on_step``), so
the server streams one chunk per step (tokens per chunk then reflect acceptance) and timestamps
follow the device. The paths: ``generate`` (native, draft_model, ngram through ``generate()``)
and ``eagle3_backend`` (our EAGLE3).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from specperf.engines.transformers.eagle3.sampling import Sampling
from specperf.engines.transformers.eagle3.speculate import StepInfo

SPECULATIVE = ("eagle3", "draft_model", "ngram")
DECODE_LOOP_MODES = ("off", "auto", "on")  # GenerateBackend's decode_loop (native, batch 1)
METHODS = ("native", *SPECULATIVE)


class Cancelled(Exception):
    """The client went away; generation of its request stops at the next step."""


@dataclass
class Request:
    """One generation request as the worker sees it."""

    prompt_ids: list[int]
    max_tokens: int
    sampling: Sampling
    ignore_eos: bool = False
    cancelled: threading.Event = field(default_factory=threading.Event)

    def batch_key(self) -> tuple[Any, ...]:
        """Requests with equal keys can share one ``generate`` call."""
        return (self.sampling, self.max_tokens, self.ignore_eos)


OnStep = Callable[[int, StepInfo, str | None], None]  # (row in batch, step, finish reason)


def neutral_generation_config(model: Any, eos_ids: Sequence[int], pad_id: int) -> Any:
    """A GenerationConfig with the library's defaults only: transformers 5 replaces arguments
    equal to a library default by the checkpoint's own default (e.g. temperature 1.0 → Qwen3's
    0.6); the engine sends every sampling parameter, so the checkpoint's must not leak in."""
    from transformers import GenerationConfig

    return GenerationConfig(
        eos_token_id=list(eos_ids),
        pad_token_id=pad_id,
        bos_token_id=getattr(model.config, "bos_token_id", None),
    )


def sampling_fields(s: Sampling) -> dict[str, Any]:
    """GenerationConfig fields for a request's sampling (every one explicit; greedy keeps the
    library's neutral values so transformers warns about nothing)."""
    if s.greedy:
        return {"do_sample": False}
    return {
        "do_sample": True,
        "temperature": s.temperature,
        "top_p": s.top_p,
        "top_k": s.top_k if s.top_k and s.top_k > 0 else 0,
        "min_p": s.min_p if s.min_p > 0 else None,
    }


def collect_tokens(out: list[int]) -> OnStep:
    return lambda row, info, reason: out.extend(info.tokens)


class Backend:
    """One generation path over a loaded target."""

    method = "native"
    max_batch = 1

    def __init__(self, model: Any, eos_ids: set[int], pad_id: int, max_len: int) -> None:
        self.model = model
        self.eos = eos_ids
        self.pad = pad_id
        self.max_len = max_len
        self.device = next(model.parameters()).device
        self.notes: list[str] = []
        self.fast_path: dict[str, Any] = {}

    def run(self, reqs: Sequence[Request], on_step: OnStep) -> None:
        raise NotImplementedError

    def config(self) -> dict[str, Any]:
        return {"method": self.method, "max_batch": self.max_batch, "fast_path": self.fast_path}
