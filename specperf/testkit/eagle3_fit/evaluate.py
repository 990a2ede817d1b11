"""Judging a fitted head: greedy EAGLE3 decoding with it, MAL and per-position acceptance, on the
tiny target (``evaluate_mal``) or on the engine's served path (``evaluate_engine_path``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from specperf.engines.transformers.eagle3.head import Eagle3Head
from specperf.engines.transformers.eagle3.sampling import Sampling, TokenSampler
from specperf.engines.transformers.eagle3.speculate import Eagle3Speculator, StepInfo
from specperf.engines.transformers.eagle3.target import TargetRunner


def evaluate_mal(
    model: Any,
    head: Eagle3Head,
    prompts: Sequence[list[int]],
    *,
    k: int,
    max_tokens: int,
    eos_ids: set[int],
) -> dict[str, Any]:
    """Greedy EAGLE3 decoding of every prompt; MAL and per-position acceptance as design.md."""
    runner = TargetRunner(model, aux_layer_ids=head.cfg.aux_layer_ids, cache="dynamic")
    spec = Eagle3Speculator(runner, head, k, timing=False)
    drafts = accepted = tokens = 0
    per_pos = [0] * k

    def on_step(info: StepInfo) -> None:
        nonlocal drafts, accepted, tokens
        tokens += len(info.tokens)
        if info.drafted:
            drafts += 1
            accepted += info.accepted
            for i in range(info.accepted):
                per_pos[i] += 1

    for p in prompts:
        spec.generate(p, max_tokens, TokenSampler(Sampling()), eos_ids, on_step)
    return {
        "prompts": len(prompts),
        "k": k,
        "max_tokens": max_tokens,
        "drafts": drafts,
        "accepted": accepted,
        "output_tokens": tokens,
        "mean_acceptance_length": 1 + accepted / drafts if drafts else None,
        "acceptance_rate": accepted / (drafts * k) if drafts else None,
        "per_position_acceptance": [a / drafts for a in per_pos] if drafts else None,
    }


def evaluate_engine_path(
    backend: Any,
    head: Eagle3Head,
    prompts: Sequence[list[int]],
    max_tokens: int,
    eos: set[int],
    expected: Sequence[list[int]] | None = None,
) -> dict[str, Any]:
    """Greedy EAGLE3 decoding with ``head`` on the backend's served target path: MAL and
    per-position acceptance as the engine's counters count them, and how many continuations
    equal ``expected`` (the collection's: the served path reproduces itself)."""
    spec = Eagle3Speculator(
        backend.runner, head, backend.spec.k, use_compiled=backend.spec.use_compiled, timing=False
    )
    k = spec.k
    drafts = accepted = tokens = same = 0
    per_pos = [0] * k
    for i, p in enumerate(prompts):
        out: list[int] = []

        def on_step(info: StepInfo, out: list = out) -> None:
            nonlocal drafts, accepted, tokens
            out.extend(info.tokens)
            tokens += len(info.tokens)
            if info.drafted:
                drafts += 1
                accepted += info.accepted
                for j in range(info.accepted):
                    per_pos[j] += 1

        spec.generate(p, max_tokens, TokenSampler(Sampling(), backend.device), eos, on_step)
        same += int(expected is not None and out == list(expected[i]))
    return {
        "prompts": len(prompts),
        "k": k,
        "max_tokens": max_tokens,
        "drafts": drafts,
        "accepted": accepted,
        "output_tokens": tokens,
        "mean_acceptance_length": 1 + accepted / drafts if drafts else None,
        "per_position_acceptance": [a / drafts for a in per_pos] if drafts else None,
        "continuations_equal_collection": same if expected is not None else None,
    }
