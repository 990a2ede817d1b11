"""The transformers engine's start-up check of its fast paths: the compiled decode step (native,
CUDA + static cache), the bare decode loop and EAGLE3's compiled verify are used only when their
logits are as close to an fp32 computation of the same inputs as eager's are."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import torch

from specperf.engines.transformers.backend import Request
from specperf.engines.transformers.decode_loop import DecodeLoop
from specperf.engines.transformers.eagle3.sampling import Sampling
from specperf.engines.transformers.eagle3.target import TargetRunner


def first_difference(a: Sequence[int], b: Sequence[int]) -> int | None:
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


# The compiled path is kept when its logits are as close to an fp32 computation of the same
# inputs as eager's are: error(compiled) <= SLACK * error(eager) + FLOOR, errors as RMS of the
# difference over the fp32 logits' standard deviation. A broken graph (stale cache, wrong
# positions) is far off; bf16 fusion rounding is eager's own order of error.
COMPILE_ERROR_SLACK = 1.5
COMPILE_ERROR_FLOOR = 0.01


@torch.inference_mode()
def fp32_copy(model: Any) -> Any:
    """An fp32 twin of ``model`` on its device for reference logits (freed by the caller).
    Built from the config and loaded from the state dict: a deepcopy would also copy what
    ``torch.compile`` attached to the model."""
    from transformers import AutoModelForCausalLM

    dev = next(model.parameters()).device
    with torch.device(dev):
        ref = AutoModelForCausalLM.from_config(model.config, dtype=torch.float32)
    ref.load_state_dict({k: v.float() for k, v in model.state_dict().items()})
    return ref.eval()


def accept_compiled(err_eager: float, err_compiled: float) -> bool:
    return err_compiled <= COMPILE_ERROR_SLACK * err_eager + COMPILE_ERROR_FLOOR


def logit_rms(ref: torch.Tensor, other: torch.Tensor) -> float:
    ref, other = ref.float(), other.float()
    if not torch.isfinite(other).all():
        return float("inf")
    return float((other - ref).pow(2).mean().sqrt() / (ref.std() or 1.0))


@torch.inference_mode()
def compare_verify_paths(
    runner: TargetRunner, prompt: Sequence[int], k: int, blocks: int = 4
) -> dict[str, Any]:
    """Teacher-forced verify blocks through eager, compiled and an fp32 twin of the target
    (see Eagle3Backend.check_fast_path)."""
    dev = runner.device
    ref_model = fp32_copy(runner.model)
    try:
        ref = TargetRunner(ref_model, cache="dynamic")
        n = len(prompt) + blocks * (k + 1) + 1
        runner.start(n)
        ref.start(n)
        prompt_t = torch.tensor([list(prompt)], device=dev)
        runner.forward(prompt_t)
        ref.forward(prompt_t)
        err_e = err_c = 0.0
        agree = total = 0
        for b in range(blocks):
            ids = [prompt[(b * (k + 1) + i) % len(prompt)] for i in range(k + 1)]
            block = torch.tensor([ids], device=dev)
            start = runner.length
            comp, _ = runner.forward(block, use_compiled=True)
            runner.rewind(start)
            eager, _ = runner.forward(block)  # eager last: the cache keeps eager's entries
            want, _ = ref.forward(block)
            err_e = max(err_e, logit_rms(want, eager))
            err_c = max(err_c, logit_rms(want, comp))
            agree += int((comp.argmax(-1) == eager.argmax(-1)).sum())
            total += k + 1
    finally:
        ref = None  # the runner holds the twin too: drop both before freeing memory
        del ref_model
        if dev.type == "cuda":
            torch.cuda.empty_cache()
    ok = accept_compiled(err_e, err_c)
    return {
        "compiled": ok,
        "check": "teacher-forced verify blocks; eager and compiled logits vs an fp32 twin",
        "blocks": blocks,
        "error_eager": round(err_e, 5),
        "error_compiled": round(err_c, 5),
        "top1_agree_compiled_vs_eager": agree / total,
        **({} if ok else {"reason": f"compiled error {err_c:.3g} vs eager {err_e:.3g}"}),
    }


class NativeFastPath:
    """``check_fast_path`` of :class:`~specperf.engines.transformers.generate.GenerateBackend`
    (mixed into it): sets its ``fast_path``, ``disable_compile`` and ``loop`` from greedy probes.
    Uses the backend's ``model``, ``device``, ``method``, ``static_cache``, ``compile_mode``,
    ``decode_loop``, ``notes``, ``_cache`` and ``_kwargs``."""

    model: Any
    device: torch.device
    method: str
    static_cache: bool
    compile_mode: str
    decode_loop: str
    disable_compile: bool
    loop: DecodeLoop | None
    notes: list[str]
    fast_path: dict[str, Any]
    _cache: Any
    _kwargs: Any

    def check_fast_path(self, prompt: list[int], tokens: int) -> None:
        """On CUDA with a static cache ``generate`` compiles its decode step. Keep it only if it
        is as accurate as eager: greedy probes through both paths; at every step up to and
        including the first differing token (before it the inputs are equal) both paths'
        logits are compared with an fp32 forward of the same prefix (``accept_compiled``). On
        a random-weight model near-tied logits make token equality flip on bf16 rounding, so
        tokens alone cannot decide."""
        eager = self._check_compiled(prompt, tokens)
        self._check_decode_loop(prompt, tokens, eager)

    def _errors_vs_fp32(
        self, prompt: list[int], eager: tuple[list, list], other: tuple[list, list]
    ) -> tuple[int | None, float, float]:
        """(first differing token, eager's error, the other path's error): both paths' greedy
        logits against an fp32 forward, at every step up to and including the first token where
        the two differ (before it their inputs are equal)."""
        (eager_t, eager_l), (other_t, other_l) = eager, other
        diff = first_difference(eager_t, other_t)
        upto = min(len(eager_l), len(other_l), len(eager_t) if diff is None else diff + 1)
        ref_l = self._reference_logits(prompt, eager_t[: upto - 1], upto)
        err_e = max(logit_rms(ref_l[i], eager_l[i]) for i in range(upto))
        err_o = max(logit_rms(ref_l[i], other_l[i]) for i in range(upto))
        return diff, err_e, err_o

    def _check_compiled(self, prompt: list[int], tokens: int) -> tuple[list, list] | None:
        """Sets ``fast_path`` and ``disable_compile``; returns the eager probe when it ran."""
        if not (self.static_cache and self.device.type == "cuda") or self.compile_mode == "off":
            self.disable_compile = True
            self.fast_path = {"compiled": False, "reason": "eager: not CUDA + static cache"}
            return None
        started = time.monotonic()
        eager = None
        try:
            eager = self._probe(prompt, tokens, compiled=False)
            comp = self._probe(prompt, tokens, compiled=True)
            self._probe(prompt, tokens, compiled=True)  # graphs recorded
            compile_s = time.monotonic() - started
            diff, err_e, err_c = self._errors_vs_fp32(prompt, eager, comp)
        except Exception as exc:  # a compile failure must not take the engine down
            self.disable_compile = True
            self.fast_path = {"compiled": False, "reason": f"check failed: {exc!r}"[:500]}
            self.notes.append(f"native decode runs eager: {self.fast_path['reason']}")
            return eager
        ok = accept_compiled(err_e, err_c)
        self.disable_compile = not ok
        self.fast_path = {
            "compiled": ok,
            "check": "greedy probe; logits vs fp32 up to the first differing token",
            "probe_tokens": len(eager[0]),
            "first_difference": diff,
            "error_eager": round(err_e, 5),
            "error_compiled": round(err_c, 5),
            "compile_s": round(compile_s, 1),
            **({} if ok else {"reason": f"compiled error {err_c:.3g} vs eager {err_e:.3g}"}),
        }
        if not ok:
            self.notes.append(f"native decode runs eager: {self.fast_path['reason']}")
        return eager

    def _check_decode_loop(
        self, prompt: list[int], tokens: int, eager: tuple[list, list] | None
    ) -> None:
        """Native greedy requests of batch 1 go through ``DecodeLoop`` (no per-token host
        work of ``generate``; decode_loop says why) when ``decode_loop`` is
        "on", or "auto" with the compiled step accepted — and only if its logits are as close
        to an fp32 forward as eager's, up to its first token that differs from eager's."""
        compiled = bool(self.fast_path.get("compiled"))
        wanted = self.decode_loop == "on" or (self.decode_loop == "auto" and compiled)
        if self.method != "native" or not wanted:
            why = "not asked for" if self.decode_loop != "auto" else "no compiled decode step"
            self.fast_path["decode_loop"] = {"used": False, "reason": why}
            return
        step = self.model.get_compiled_call(None) if compiled else None
        loop = DecodeLoop(self.model, lambda: self._cache(1), step)
        try:
            eager = eager or self._probe(prompt, tokens, compiled=False)
            loop.run(prompt, tokens, lambda t: True)  # records its graphs
            loop_t: list[int] = []

            def keep(t: int) -> bool:
                loop_t.append(t)
                return True

            loop_l = loop.run(prompt, tokens, keep, keep_logits=True)
            diff, err_e, err_l = self._errors_vs_fp32(prompt, eager, (loop_t, loop_l))
        except Exception as exc:  # the loop is an optimisation: generate() still works
            reason = f"check failed: {exc!r}"[:500]
            self.fast_path["decode_loop"] = {"used": False, "reason": reason}
            self.notes.append(f"native decode runs through generate(): {reason}")
            return
        ok = accept_compiled(err_e, err_l)
        self.loop = loop if ok else None
        self.fast_path["decode_loop"] = {
            "used": ok,
            "depth": loop.depth,
            "compiled_step": step is not None,
            "check": "greedy probe; logits vs fp32 up to the first token differing from eager",
            "first_difference": diff,
            "error_eager": round(err_e, 5),
            "error_loop": round(err_l, 5),
            **({} if ok else {"reason": f"loop error {err_l:.3g} vs eager {err_e:.3g}"}),
        }
        if not ok:
            self.notes.append(f"native decode runs through generate(): loop error {err_l:.3g}")

    @torch.inference_mode()
    def _reference_logits(self, prompt: list[int], cont: list[int], n: int) -> list:
        """fp32 logits predicting continuation tokens 0..n-1 (teacher-forced on ``cont``)."""
        ref = fp32_copy(self.model)
        try:
            ids = torch.tensor([list(prompt) + list(cont)], device=self.device)
            logits = ref(input_ids=ids, use_cache=False).logits[0].float()
            return [logits[len(prompt) - 1 + i] for i in range(n)]
        finally:
            del ref
            if self.device.type == "cuda":
                torch.cuda.empty_cache()

    @torch.inference_mode()
    def _probe(self, prompt: list[int], tokens: int, compiled: bool) -> tuple[list, list]:
        req = Request(prompt, tokens, Sampling())
        kw = self._kwargs([req], disable_compile=not compiled)
        gc = kw["generation_config"]
        gc.return_dict_in_generate = True
        gc.output_logits = True
        out = self.model.generate(
            input_ids=torch.tensor([prompt], device=self.device),
            attention_mask=torch.ones((1, len(prompt)), dtype=torch.long, device=self.device),
            **kw,
        )
        toks = out.sequences[0, len(prompt) :].tolist()
        return toks, [lg[0].float() for lg in out.logits]
