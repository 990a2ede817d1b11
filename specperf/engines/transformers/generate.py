"""The ``generate()`` paths of the transformers engine, counted per verify step.

Every path reports each decoding step as soon as its tokens are on the host (``on_step``), so
the server streams one chunk per step (tokens per chunk then reflect acceptance) and timestamps
follow the device (``generate`` copies each step's tokens to the host, which synchronises; our
EAGLE3 loop synchronises explicitly).

* native: ``generate()`` — greedy or sampling, several requests batched (left padding). On CUDA a
  static KV cache of the server's fixed length, so ``generate`` compiles its decode step once;
  the compiled path is used only when it reproduces the eager tokens (checked at start-up).
* draft_model / ngram: ``generate(assistant_model=...)`` / ``generate(prompt_lookup_num_tokens=K)``,
  batch size 1 (transformers' limit). Accepted tokens per step come from the streamer (one put per
  verify pass: accepted + 1 tokens); proposed tokens from a wrapper around the candidate
  generator's ``get_candidates`` (transformers reports neither; reference/transformers.md §2.1).

EAGLE3 runs through ``eagle3_backend``; the start-up check of the compiled and loop paths is
``fast_path``.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

import torch

from specperf.engines.transformers.backend import (
    DECODE_LOOP_MODES,
    Backend,
    Cancelled,
    OnStep,
    Request,
    neutral_generation_config,
    sampling_fields,
)
from specperf.engines.transformers.counters import CandidateCounter
from specperf.engines.transformers.decode_loop import DecodeLoop, stream_one
from specperf.engines.transformers.eagle3.speculate import StepInfo
from specperf.engines.transformers.eagle3.target import cache_kwarg, new_cache
from specperf.engines.transformers.fast_path import NativeFastPath


class StepStreamer:
    """A ``BaseStreamer`` that turns ``generate``'s puts into per-row steps.

    First put: the prompt (skipped). Native: (B,) or (B, 1) — one token per row. Assisted:
    (1, n) — one verify pass that kept n tokens (n-1 accepted drafts + 1)."""

    def __init__(
        self,
        rows: Sequence[Request],
        eos_ids: set[int],
        on_step: OnStep,
        drafted: Callable[[], int] | None = None,
    ) -> None:
        self.rows = list(rows)
        self.eos = eos_ids
        self.on_step = on_step
        self.drafted = drafted
        self.seen_prompt = False
        self.count = [0] * len(rows)
        self.done = [False] * len(rows)

    def put(self, value: torch.Tensor) -> None:
        if not self.seen_prompt:
            self.seen_prompt = True
            return
        v = value.reshape(len(self.rows), -1) if value.dim() == 1 else value
        drafted = self.drafted() if self.drafted is not None else 0
        for r, req in enumerate(self.rows):
            if self.done[r]:
                continue
            if req.cancelled.is_set():
                raise Cancelled()
            toks = [int(t) for t in v[r].tolist()]
            kept: list[int] = []
            reason = None
            for t in toks:
                if self.count[r] + len(kept) >= req.max_tokens:
                    break
                kept.append(t)
                if t in self.eos and not req.ignore_eos:
                    reason = "stop"
                    break
            self.count[r] += len(kept)
            if reason is None and self.count[r] >= req.max_tokens:
                reason = "length"
            info = StepInfo(tokens=kept, drafted=drafted, accepted=max(0, len(toks) - 1))
            if reason is not None:
                self.done[r] = True
            self.on_step(r, info, reason)

    def end(self) -> None:
        pass


class _CancelCriteria:
    """StoppingCriteria: stop the whole ``generate`` once every row's client has gone."""

    def __init__(self, rows: Sequence[Request]) -> None:
        self.rows = rows

    def __call__(self, input_ids: torch.Tensor, scores: Any, **kwargs: Any) -> torch.Tensor:
        stop = all(r.cancelled.is_set() for r in self.rows)
        return torch.full((input_ids.shape[0],), stop, dtype=torch.bool, device=input_ids.device)


class GenerateBackend(NativeFastPath, Backend):
    """native / draft_model / ngram through ``generate()``."""

    def __init__(
        self,
        model: Any,
        eos_ids: set[int],
        pad_id: int,
        max_len: int,
        *,
        method: str = "native",
        k: int | None = None,
        draft: Any = None,
        ngram_max: int | None = None,
        max_batch: int = 8,
        static_cache: bool = False,
        compile_mode: str = "auto",
        decode_loop: str = "off",
    ) -> None:
        super().__init__(model, eos_ids, pad_id, max_len)
        self.method = method
        if decode_loop not in DECODE_LOOP_MODES:
            raise ValueError(f"decode_loop {decode_loop!r}: one of {', '.join(DECODE_LOOP_MODES)}")
        self.decode_loop = decode_loop
        self.loop: DecodeLoop | None = None  # set by check_fast_path when accepted
        self.k = k
        self.draft = draft
        self.ngram_max = ngram_max or 2
        self.max_batch = max_batch if method == "native" else 1
        self.static_cache = static_cache and method == "native"
        self.compile_mode = compile_mode
        self.disable_compile = compile_mode == "off"
        self._caches: dict[int, Any] = {}
        self._kw = cache_kwarg(model)
        self.counter = CandidateCounter()
        base = neutral_generation_config(model, sorted(eos_ids), pad_id)
        self.base_config = base
        # the checkpoint's defaults must not fill in anything (see neutral_generation_config)
        model.generation_config = copy.deepcopy(base)
        # generate() fills every None of the config it is given from the model's own (transformers
        # 5, _prepare_generation_config): a request with ignore_eos (eos None) stopped at EOS
        # anyway. Every call passes a complete config that names its EOS, so the model's has none.
        model.generation_config.eos_token_id = None
        if method != "native":
            self.counter.install(model)
        if method == "draft_model":
            if draft is None or k is None:
                raise ValueError("draft_model needs a draft model and num_speculative_tokens")
            dcfg = neutral_generation_config(draft, sorted(eos_ids), pad_id)
            # read from the assistant's config, not generate() kwargs (reference §1.2)
            dcfg.num_assistant_tokens = k
            dcfg.num_assistant_tokens_schedule = "constant"
            dcfg.assistant_confidence_threshold = 0.0
            draft.generation_config = dcfg
        if method == "ngram" and not k:
            raise ValueError("ngram needs num_speculative_tokens")

    def _cache(self, batch: int) -> Any:
        if batch not in self._caches:
            self._caches[batch] = new_cache(self.model, "static", self.max_len)
        cache = self._caches[batch]
        cache.reset()
        return cache

    def _kwargs(self, reqs: Sequence[Request], disable_compile: bool) -> dict[str, Any]:
        """One complete GenerationConfig (no loose generation kwargs: transformers 5 merges
        those with the config in ways that moved between releases)."""
        first = reqs[0]
        gc = copy.deepcopy(self.base_config)
        if first.ignore_eos:
            gc.eos_token_id = None
        gc.disable_compile = disable_compile
        gc.max_new_tokens = first.max_tokens
        for k, v in sampling_fields(first.sampling).items():
            setattr(gc, k, v)
        kw: dict[str, Any] = {"generation_config": gc}
        if self.method == "draft_model":
            kw["assistant_model"] = self.draft
        elif self.method == "ngram":
            gc.prompt_lookup_num_tokens = self.k
            gc.max_matching_ngram_size = self.ngram_max
        if self.static_cache:
            kw[self._kw] = self._cache(len(reqs))
        return kw

    @torch.inference_mode()
    def generate(
        self, reqs: Sequence[Request], on_step: OnStep, *, disable_compile: bool | None = None
    ) -> None:
        if disable_compile is None:
            disable_compile = self.disable_compile
        width = max(len(r.prompt_ids) for r in reqs)
        ids = torch.full((len(reqs), width), self.pad, dtype=torch.long)
        mask = torch.zeros((len(reqs), width), dtype=torch.long)
        for i, r in enumerate(reqs):
            ids[i, width - len(r.prompt_ids) :] = torch.tensor(r.prompt_ids)
            mask[i, width - len(r.prompt_ids) :] = 1
        if reqs[0].sampling.seed is not None and not reqs[0].sampling.greedy:
            torch.manual_seed(reqs[0].sampling.seed)
        streamer = StepStreamer(
            reqs,
            self.eos,
            on_step,
            drafted=self.counter.take if self.method != "native" else None,
        )
        from transformers import StoppingCriteriaList

        try:
            self.model.generate(
                input_ids=ids.to(self.device),
                attention_mask=mask.to(self.device),
                streamer=streamer,
                stopping_criteria=StoppingCriteriaList([_CancelCriteria(reqs)]),
                **self._kwargs(reqs, disable_compile),
            )
        except Cancelled:
            return
        # rows generate() ended without telling us (e.g. every row cancelled): close them
        for r, done in enumerate(streamer.done):
            if not done and not reqs[r].cancelled.is_set():
                on_step(r, StepInfo(tokens=[], drafted=0, accepted=0), "length")

    def run(self, reqs: Sequence[Request], on_step: OnStep) -> None:
        req = reqs[0]
        if self.loop is not None and len(reqs) == 1 and req.sampling.greedy:
            stop = set() if req.ignore_eos else self.eos
            gone = req.cancelled.is_set
            stream_one(self.loop, req.prompt_ids, req.max_tokens, stop, on_step, gone)
            return
        self.generate(reqs, on_step)
