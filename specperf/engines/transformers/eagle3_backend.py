"""Our EAGLE3 as a generation path of the transformers engine (chain of K drafts, batch size 1):
:class:`specperf.engines.transformers.eagle3.speculate.Eagle3Speculator` over the served target."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from specperf.engines.transformers.backend import (
    Backend,
    Cancelled,
    OnStep,
    Request,
    collect_tokens,
)
from specperf.engines.transformers.eagle3.sampling import Sampling, TokenSampler
from specperf.engines.transformers.eagle3.speculate import Eagle3Speculator, StepInfo
from specperf.engines.transformers.eagle3.target import TargetRunner
from specperf.engines.transformers.fast_path import compare_verify_paths


class Eagle3Backend(Backend):
    """Our EAGLE3 (chain of K drafts), batch size 1."""

    method = "eagle3"

    def __init__(
        self,
        model: Any,
        eos_ids: set[int],
        pad_id: int,
        max_len: int,
        *,
        head: Any,
        k: int,
        static_cache: bool = False,
        compile_mode: str = "auto",
        phase_timing: bool = True,
    ) -> None:
        super().__init__(model, eos_ids, pad_id, max_len)
        self.head = head
        self.k = k
        self.compile_mode = compile_mode
        compiled = None
        if static_cache and self.device.type == "cuda" and compile_mode != "off":
            from transformers import CompileConfig

            compiled = model.get_compiled_call(CompileConfig())
        self.runner = TargetRunner(
            model,
            aux_layer_ids=head.cfg.aux_layer_ids,
            cache="static" if static_cache else "dynamic",
            max_len=max_len,
            compiled=compiled,
        )
        self.spec = Eagle3Speculator(
            self.runner, head, k, use_compiled=compiled is not None, timing=phase_timing
        )

    def run(self, reqs: Sequence[Request], on_step: OnStep) -> None:
        (req,) = reqs
        sampler = TokenSampler(req.sampling, self.device)
        eos = set() if req.ignore_eos else self.eos

        def step(info: StepInfo) -> None:
            if req.cancelled.is_set():
                raise Cancelled()
            on_step(0, info, info.finish)

        try:
            self.spec.generate(req.prompt_ids, req.max_tokens, sampler, eos, step)
        except Cancelled:
            return

    def check_fast_path(self, prompt: list[int], tokens: int) -> None:
        """Use the compiled verify step only if it computes what eager computes.

        Token equality of two greedy runs is too strict here: in bf16 a block of K+1 tokens
        already rounds differently from the same tokens one at a time, and a random-weight
        target's near-tied logits turn any rounding into another argmax. So the check is
        teacher-forced: the same blocks through eager and compiled verify, both compared with an
        fp32 twin of the target on the same inputs; compiled must be as accurate as eager
        (``accept_compiled``). A broken graph (stale cache or positions) is far off."""
        if self.runner.compiled is None:
            self.fast_path = {"compiled": False, "reason": "eager: not CUDA + static cache"}
            return
        try:
            self.fast_path = compare_verify_paths(self.runner, prompt, self.k)
        except Exception as exc:  # a compile failure must not take the engine down
            self.fast_path = {"compiled": False, "reason": f"compile failed: {exc!r}"[:500]}
        self.spec.use_compiled = bool(self.fast_path["compiled"])
        if self.spec.use_compiled:  # warm the graphs on the real loop once
            self.run([Request(prompt, tokens, Sampling())], collect_tokens([]))
        else:
            self.notes.append(f"EAGLE3 verify runs eager: {self.fast_path['reason']}")

    def config(self) -> dict[str, Any]:
        return {
            **super().config(),
            "num_speculative_tokens": self.k,
            "topology": {"kind": "chain", "k": self.k, "topk": 1, "num_draft_tokens": self.k},
            "head": self.head.cfg.to_dict(),
        }
