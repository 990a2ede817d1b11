"""TEST-ONLY: make the engine reject a seeded share of draft tokens, to prove the suite sees a MAL
drop.

Put this folder first on PYTHONPATH of the engine and set SPECPERF_TEST_REJECT_DRAFTS=<q> (the
probability that a draft token is replaced by another id before verification; seeded by
SPECPERF_TEST_REJECT_SEED, default 0). Every Python process started with it imports this file
(``sitecustomize``); a patch lands only when the module it targets is imported, so anything
without it is untouched. Targets:

- ``vllm.v1.sample.rejection_sampler``: vLLM's ``RejectionSampler.forward`` (every method);
- ``specperf.engines.transformers.eagle3.speculate``: the transformers engine's
  ``Eagle3Speculator._draft`` (its EAGLE3 path, the one the GPU suite's check pass measures).

At temperature 0 a replaced draft is simply rejected (the target's token is kept), so outputs
stay lossless: only the number of accepted tokens per verify step falls — exactly the regression
"a release that makes EAGLE3 accept fewer tokens" looks like. Never on a production engine: it
exists to prove that the verdict sees a MAL drop (``benchmarks/verdict_proofs.py --condition
reject``, ``specperf gpu-night`` with the variables set).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
from collections.abc import Callable
from typing import Any

_RATE = float(os.environ.get("SPECPERF_TEST_REJECT_DRAFTS") or 0)
_SEED = int(os.environ.get("SPECPERF_TEST_REJECT_SEED", "0"))


def _replace(ids: Any, vocab: int, gen: Any) -> Any:
    """``ids`` with each entry, with probability _RATE, moved to another id (1-7 further on)."""
    import torch

    host = ids.cpu()
    hit = torch.rand(host.shape, generator=gen) < _RATE
    if not bool(hit.any()):
        return ids
    moved = (host + 1 + torch.randint(0, 7, host.shape, generator=gen)) % vocab
    return torch.where(hit, moved, host).to(ids.device)


def _patch_vllm(module: Any) -> None:
    import torch

    cls = module.RejectionSampler
    original = cls.forward
    gen = torch.Generator().manual_seed(_SEED)

    def forward(self, metadata, draft_probs, logits, sampling_metadata):
        ids = metadata.draft_token_ids
        if ids.numel():
            metadata.draft_token_ids = _replace(ids, logits.shape[-1], gen)
        return original(self, metadata, draft_probs, logits, sampling_metadata)

    cls.forward = forward


def _patch_eagle3(module: Any) -> None:
    import torch

    cls = module.Eagle3Speculator
    original = cls._draft
    gen = torch.Generator().manual_seed(_SEED)

    def _draft(self, cache, tokens, fused):
        drafts = original(self, cache, tokens, fused)  # (1, K) target ids
        return _replace(drafts, int(self.head.t2d.shape[0]), gen)

    cls._draft = _draft


_TARGETS: dict[str, Callable[[Any], None]] = {
    "vllm.v1.sample.rejection_sampler": _patch_vllm,
    "specperf.engines.transformers.eagle3.speculate": _patch_eagle3,
}


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        patch = _TARGETS.get(name)
        if patch is None:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.machinery.PathFinder.find_spec(name, path)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        exec_module = loader.exec_module

        def exec_and_patch(module):
            exec_module(module)
            patch(module)
            print(f"[specperf test] {name}: drafts replaced with p={_RATE}", file=sys.stderr)

        loader.exec_module = exec_and_patch  # type: ignore[method-assign]
        return spec


if _RATE > 0:
    sys.meta_path.insert(0, _Finder())
