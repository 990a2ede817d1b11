"""Target-side token choice for speculative decoding: greedy, or sampling with the standard
lossless acceptance rule for a greedy (one-hot) draft.

With a one-hot draft q = δ(d), the rejection rule of speculative sampling reduces to: accept d with
probability p(d); on rejection sample from p with d removed (renormalised). The output then has
exactly the target's (warped) distribution — the same rule vLLM applies when its draft samples
greedily (its default ``draft_sample_method``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Sampling:
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = -1
    min_p: float = 0.0
    seed: int | None = None

    @property
    def greedy(self) -> bool:
        return self.temperature <= 0.0


class TokenSampler:
    """Warps logits like ``generate()`` does (transformers' own warpers) and samples with a
    per-request generator, so a seeded request is reproducible."""

    def __init__(self, sampling: Sampling, device: torch.device | str = "cpu") -> None:
        from transformers.generation.logits_process import (
            LogitsProcessorList,
            MinPLogitsWarper,
            TemperatureLogitsWarper,
            TopKLogitsWarper,
            TopPLogitsWarper,
        )

        self.sampling = sampling
        self.device = torch.device(device)
        self.warpers = LogitsProcessorList()
        if not sampling.greedy:
            self.warpers.append(TemperatureLogitsWarper(sampling.temperature))
            if sampling.top_k and sampling.top_k > 0:
                self.warpers.append(TopKLogitsWarper(sampling.top_k))
            if sampling.top_p < 1.0:
                self.warpers.append(TopPLogitsWarper(sampling.top_p))
            if sampling.min_p > 0.0:
                self.warpers.append(MinPLogitsWarper(sampling.min_p))
        self.generator = torch.Generator(device=self.device)
        if sampling.seed is not None:
            self.generator.manual_seed(sampling.seed)
        else:
            self.generator.seed()

    @property
    def greedy(self) -> bool:
        return self.sampling.greedy

    def probs(self, logits: torch.Tensor) -> torch.Tensor:
        """(n, V) fp32 logits → (n, V) probabilities after warping."""
        scores = self.warpers(None, logits.float())  # these warpers ignore input_ids
        return torch.softmax(scores, dim=-1)

    def uniform(self, n: int) -> torch.Tensor:
        return torch.rand(n, generator=self.generator, device=self.device)

    def draw(self, probs: torch.Tensor) -> int:
        return int(torch.multinomial(probs, 1, generator=self.generator).item())

    def next_token(self, logits: torch.Tensor) -> int:
        """One token from a (V,) logit row."""
        if self.greedy:
            return int(logits.argmax(-1).item())
        return self.draw(self.probs(logits[None])[0])

    def verify(self, logits: torch.Tensor, drafts: torch.Tensor) -> tuple[int, int]:
        """Target logits for K+1 positions and K draft ids → (accepted count m, bonus token).

        Row i of ``logits`` predicts the token after the i-th verify input, so draft i (0-based)
        is judged by row i and the bonus comes from row m."""
        m, emitted = self.verify_emit(logits, drafts)
        return m, emitted[-1]

    def verify_emit(self, logits: torch.Tensor, drafts: torch.Tensor) -> tuple[int, list[int]]:
        """As :meth:`verify`, returning the emitted tokens (m accepted drafts + the bonus) on the
        host. Greedy: one device→host copy per step (target argmaxes and drafts together); the
        accepted drafts equal the target's argmaxes, so the emitted tokens are its first m+1."""
        k = drafts.shape[-1]
        if self.greedy:
            host = torch.cat([logits.argmax(-1), drafts.to(torch.long)]).tolist()
            best, drafted = host[: k + 1], host[k + 1 :]
            m = 0
            while m < k and best[m] == drafted[m]:
                m += 1
            return m, best[: m + 1]
        m, bonus = self._verify_sampled(logits, drafts)
        return m, [*drafts[:m].tolist(), bonus]

    def _verify_sampled(self, logits: torch.Tensor, drafts: torch.Tensor) -> tuple[int, int]:
        k = drafts.shape[-1]
        probs = self.probs(logits)
        p_draft = probs[torch.arange(k, device=probs.device), drafts]
        ok = (self.uniform(k) < p_draft).int()
        m = int(ok.cumprod(0).sum().item())
        if m == k:
            return m, self.draw(probs[k])
        residual = probs[m].clone()
        residual[drafts[m]] = 0.0
        total = float(residual.sum().item())
        if total <= 0.0:  # p(d) was 1 yet rejected: cannot happen with u < 1; keep d's row
            return m, int(probs[m].argmax().item())
        return m, self.draw(residual / total)
