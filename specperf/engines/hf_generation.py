"""Generation paths of the transformers engine, counted per verify step.

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
* eagle3: :class:`specperf.eagle3.speculate.Eagle3Speculator` (ours).
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from specperf.eagle3.sampling import Sampling, TokenSampler
from specperf.eagle3.speculate import Eagle3Speculator, StepInfo
from specperf.eagle3.target import TargetRunner, cache_kwarg, new_cache
from specperf.engines.hf_decode_loop import DecodeLoop, stream_one

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


class Counters:
    """Cumulative, thread-safe counters served at /specperf/counters (design.md's
    acceptance definitions: one draft = one verify step that had draft tokens)."""

    def __init__(self, k: int | None, speculative: bool, timed: bool = False) -> None:
        self.lock = threading.Lock()
        self.speculative = speculative
        self.timed = timed  # draft/verify seconds exist only where we run the loop (EAGLE3)
        self.k = k or 0
        self.requests = 0
        self.prompt_tokens = 0
        self.generation_tokens = 0
        self.steps = 0
        self.drafts = 0
        self.draft_tokens = 0
        self.accepted_tokens = 0
        self.accepted_per_position = [0] * self.k
        self.draft_time_s = 0.0
        self.verify_time_s = 0.0
        self.batches = 0  # generate calls (native batches requests that arrive together)
        self.max_batch = 0

    def add_batch(self, size: int) -> None:
        with self.lock:
            self.batches += 1
            self.max_batch = max(self.max_batch, size)

    def add_request(self, prompt_tokens: int) -> None:
        with self.lock:
            self.requests += 1
            self.prompt_tokens += prompt_tokens

    def add_step(self, info: StepInfo) -> None:
        with self.lock:
            self.steps += 1
            self.generation_tokens += len(info.tokens)
            if info.drafted > 0:
                self.drafts += 1
                self.draft_tokens += info.drafted
                self.accepted_tokens += info.accepted
                while len(self.accepted_per_position) < info.drafted:
                    self.accepted_per_position.append(0)
                for i in range(info.accepted):
                    self.accepted_per_position[i] += 1
                self.draft_time_s += info.draft_s
                self.verify_time_s += info.verify_s

    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            spec = self.speculative
            return {
                **cuda_memory(),
                "requests": self.requests,
                "prompt_tokens": self.prompt_tokens,
                "generation_tokens": self.generation_tokens,
                "steps": self.steps,
                "batches": self.batches,
                "max_batch": self.max_batch,
                "drafts": self.drafts if spec else None,
                "draft_tokens": self.draft_tokens if spec else None,
                "accepted_tokens": self.accepted_tokens if spec else None,
                "accepted_per_position": list(self.accepted_per_position) if spec else None,
                "draft_time_s": self.draft_time_s if self.timed else None,
                "verify_time_s": self.verify_time_s if self.timed else None,
            }


def cuda_memory() -> dict[str, int]:
    """This process' CUDA allocator figures (empty on CPU)."""
    if not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return {}
    return {
        "cuda_memory_allocated_bytes": int(torch.cuda.memory_allocated()),
        "cuda_max_memory_allocated_bytes": int(torch.cuda.max_memory_allocated()),
        "cuda_memory_reserved_bytes": int(torch.cuda.memory_reserved()),
    }


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


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


def _collect(out: list[int]) -> OnStep:
    return lambda row, info, reason: out.extend(info.tokens)


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


class CandidateCounter:
    """Records how many candidate tokens the candidate generator proposed in the last step."""

    def __init__(self) -> None:
        self.last = 0

    def install(self, model: Any) -> None:
        original = model._get_candidate_generator

        def patched(*args: Any, **kwargs: Any) -> Any:
            gen = original(*args, **kwargs)
            get = gen.get_candidates

            def counted(input_ids: torch.Tensor, *a: Any, **kw: Any) -> Any:
                out = get(input_ids, *a, **kw)
                self.last = int(out[0].shape[-1] - input_ids.shape[-1])
                return out

            gen.get_candidates = counted
            return gen

        model._get_candidate_generator = patched

    def take(self) -> int:
        n, self.last = self.last, 0
        return n


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


class GenerateBackend(Backend):
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
        work of ``generate``; specperf.engines.hf_decode_loop says why) when ``decode_loop`` is
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
            self.run([Request(prompt, tokens, Sampling())], _collect([]))
        else:
            self.notes.append(f"EAGLE3 verify runs eager: {self.fast_path['reason']}")

    def config(self) -> dict[str, Any]:
        return {
            **super().config(),
            "num_speculative_tokens": self.k,
            "topology": {"kind": "chain", "k": self.k, "topk": 1, "num_draft_tokens": self.k},
            "head": self.head.cfg.to_dict(),
        }
