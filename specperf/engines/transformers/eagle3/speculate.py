"""Chain drafting with an EAGLE3 head and verification by the Hugging Face target.

One verify step, for a sequence whose target cache holds positions 0..L-1 and whose next token
``b`` (position L) is chosen but not yet in the cache:

1. draft: the head's first pass runs over the positions committed by the previous step, pairing
   the fused target state of position p with the token at p+1 (vLLM's convention); its last row
   proposes d1. Steps 2..K feed the previous draft and the head's own pre-norm state.
2. verify: the target runs ``[b, d1..dK]`` at positions L..L+K; drafts are accepted while they
   match (greedy) or pass the rejection test (sampling); the target's token after the last
   accepted draft is the bonus.
3. rewind: the target cache keeps L..L+m; the head cache drops its draft-derived entries, which the
   next first pass rewrites from target states (as vLLM does).

Counted per step: one draft (verify step) with K draft tokens, m accepted, accepted positions
0..m-1 — the counters MAL = 1 + accepted/drafts is computed from (design.md).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from specperf.engines.transformers.eagle3.head import Eagle3Head, Eagle3KVCache
from specperf.engines.transformers.eagle3.sampling import TokenSampler
from specperf.engines.transformers.eagle3.target import TargetRunner


@dataclass
class StepInfo:
    """One verify step (``drafted`` = 0 for the prefill's first token)."""

    tokens: list[int]  # emitted by this step (after EOS / length truncation)
    drafted: int
    accepted: int
    draft_s: float = 0.0
    verify_s: float = 0.0
    finish: str | None = None  # "stop" / "length" on the request's last step


OnStep = Callable[[StepInfo], None]


class PhaseClock:
    """Draft/verify seconds of one verify step without a host sync of its own.

    On CUDA two events bracket the draft phase on the stream; they are read after the verify's
    tokens reached the host (that copy already waits for the stream, so both events are done).
    draft = event time from the step's start to the end of the draft kernels (the GPU is idle at
    the step's start: the previous step ended with a host copy); verify = the rest of the step's
    wall time (a ``torch.cuda.synchronize`` after the draft phase would give the same split at
    the price of one more host round trip per step). On CPU the host clock is the device
    clock."""

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"
        if self.cuda:
            self.begin = torch.cuda.Event(enable_timing=True)
            self.drafted = torch.cuda.Event(enable_timing=True)
        self.t0 = self.t1 = 0.0

    def start(self) -> None:
        self.t0 = time.perf_counter()
        if self.cuda:
            self.begin.record()

    def draft_done(self) -> None:
        self.t1 = time.perf_counter()
        if self.cuda:
            self.drafted.record()

    def split(self) -> tuple[float, float]:
        """(draft_s, verify_s); call once the step's tokens are on the host."""
        t2 = time.perf_counter()
        if not self.cuda:
            return self.t1 - self.t0, t2 - self.t1
        self.drafted.synchronize()  # already complete: the verify's host copy came after it
        draft = self.begin.elapsed_time(self.drafted) / 1000.0
        return draft, max(0.0, (t2 - self.t0) - draft)


def _to_device(tokens: list[int], device: torch.device) -> torch.Tensor:
    """(1, n) token ids on ``device`` without a host sync: a blocking host→device copy waits for
    the whole stream (torch synchronises after it), the non-blocking one only stages the few
    bytes (pageable memory is copied to a staging buffer before the call returns)."""
    return torch.tensor([tokens], dtype=torch.long).to(device, non_blocking=True)


def _finish(tokens: list[int], eos: set[int], budget: int) -> tuple[list[int], str | None]:
    """Cut at the first EOS (kept) or at the token budget; returns (kept, finish_reason)."""
    for i, t in enumerate(tokens):
        if i >= budget:
            return tokens[:budget], "length"
        if t in eos:
            return tokens[: i + 1], "stop"
    if len(tokens) >= budget:
        return tokens[:budget], "length"
    return tokens, None


class Eagle3Speculator:
    """Batch size 1 EAGLE3 decoding over a :class:`TargetRunner` (chain of ``k`` drafts)."""

    topology = "chain"

    def __init__(
        self,
        target: TargetRunner,
        head: Eagle3Head,
        k: int,
        *,
        use_compiled: bool = False,
        timing: bool = True,
    ) -> None:
        if k < 1:
            raise ValueError("num_speculative_tokens must be >= 1")
        self.target = target
        self.head = head
        self.k = k
        self.use_compiled = use_compiled
        self.timing = timing
        self.device = target.device
        if head.embed_tokens is None:
            head.share_embeddings(target.model.get_input_embeddings())

    def _draft(
        self,
        cache: Eagle3KVCache,
        tokens: torch.Tensor,
        fused: torch.Tensor,
    ) -> torch.Tensor:
        """First pass over committed positions, then K-1 chained steps → (1, K) target ids."""
        head = self.head
        normed, pre = head.step(tokens, fused, cache.length, cache)
        last_n, last_p = normed[:, -1:], pre[:, -1:]
        out = []
        for j in range(self.k):
            draft = head.draft_to_target(head.logits(last_n).argmax(-1))  # (1, 1)
            out.append(draft)
            if j + 1 < self.k:
                last_n, last_p = head.step(draft, last_p, cache.length, cache)
        return torch.cat(out, dim=-1)

    @torch.inference_mode()
    def generate(
        self,
        prompt_ids: Sequence[int],
        max_new_tokens: int,
        sampler: TokenSampler,
        eos_ids: set[int],
        on_step: OnStep,
    ) -> str:
        """Decode up to ``max_new_tokens``; every step is reported through ``on_step`` as soon
        as its tokens are known. Returns the finish reason (``stop`` or ``length``)."""
        dev = self.device
        n = len(prompt_ids)
        self.target.start(n + max_new_tokens + self.k + 1)
        cache = Eagle3KVCache(n + max_new_tokens + self.k + 1)
        head_dtype = self.head.fc.weight.dtype

        prompt = torch.tensor([list(prompt_ids)], dtype=torch.long, device=dev)
        logits, aux = self.target.forward(prompt)
        assert aux is not None
        first = sampler.next_token(logits[-1])
        kept, reason = _finish([first], eos_ids, max_new_tokens)
        on_step(StepInfo(tokens=kept, drafted=0, accepted=0, finish=reason))
        produced = len(kept)
        if reason is not None:
            return reason
        # inputs of the next first pass: tokens one ahead of the fused states' positions; the
        # last one is the pending token, which opens the next verify block
        next_tokens = torch.cat([prompt[:, 1:], _to_device([first], dev)], dim=-1)
        fused = self.head.fuse(aux.to(head_dtype)).unsqueeze(0)
        clock = PhaseClock(dev) if self.timing else None
        while True:
            if clock is not None:
                clock.start()
            committed = self.target.length  # host-side: no sync
            cache.rewind(committed - next_tokens.shape[1])  # drop the head's draft entries
            drafts = self._draft(cache, next_tokens, fused)
            if clock is not None:
                clock.draft_done()
            block = torch.cat([next_tokens[:, -1:].to(drafts.device), drafts], dim=-1)
            logits, aux = self.target.forward(block, use_compiled=self.use_compiled)
            assert aux is not None
            m, emitted = sampler.verify_emit(logits, drafts[0])  # the step's one host sync
            draft_s, verify_s = clock.split() if clock is not None else (0.0, 0.0)
            self.target.rewind(committed + m + 1)
            kept, reason = _finish(emitted, eos_ids, max_new_tokens - produced)
            produced += len(kept)
            on_step(
                StepInfo(
                    tokens=kept,
                    drafted=self.k,
                    accepted=m,
                    draft_s=draft_s,
                    verify_s=verify_s,
                    finish=reason,
                )
            )
            if reason is not None:
                return reason
            next_tokens = _to_device(emitted, dev)
            fused = self.head.fuse(aux[: m + 1].to(head_dtype)).unsqueeze(0)
