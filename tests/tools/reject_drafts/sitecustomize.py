"""TEST-ONLY: make vLLM reject a seeded share of draft tokens, to prove the suite sees a MAL drop.

Put this folder first on PYTHONPATH of the engine and set SPECPERF_TEST_REJECT_DRAFTS=<q> (the
probability that a draft token is replaced by another id before verification; seeded by
SPECPERF_TEST_REJECT_SEED, default 0). Every Python process started with it imports this file
(``sitecustomize``); the patch lands only when vLLM's rejection sampler module is imported, so
the pytest process and anything without vLLM are untouched. At temperature 0 a replaced draft
is simply rejected (the target's token is kept), so outputs stay lossless: only the number of
accepted tokens per verify step falls — exactly the regression "a release that makes EAGLE3
accept fewer tokens" looks like. Never on a production engine: it exists for
docs/baselines.md's "(c)" proof (``benchmarks/verdict_proofs.py``).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys

_TARGET = "vllm.v1.sample.rejection_sampler"
_RATE = float(os.environ.get("SPECPERF_TEST_REJECT_DRAFTS") or 0)


def _patch(module) -> None:
    import torch

    cls = module.RejectionSampler
    original = cls.forward
    gen = torch.Generator().manual_seed(int(os.environ.get("SPECPERF_TEST_REJECT_SEED", "0")))

    def forward(self, metadata, draft_probs, logits, sampling_metadata):
        ids = metadata.draft_token_ids
        if ids.numel():
            hit = torch.rand(ids.shape, generator=gen) < _RATE
            if bool(hit.any()):
                vocab = logits.shape[-1]
                moved = (ids.cpu() + 1 + torch.randint(0, 7, ids.shape, generator=gen)) % vocab
                metadata.draft_token_ids = torch.where(hit, moved, ids.cpu()).to(ids.device)
        return original(self, metadata, draft_probs, logits, sampling_metadata)

    cls.forward = forward
    print(f"[specperf test] rejecting drafts with probability {_RATE}", file=sys.stderr)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != _TARGET:
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        exec_module = loader.exec_module

        def exec_and_patch(module):
            exec_module(module)
            _patch(module)

        loader.exec_module = exec_and_patch  # type: ignore[method-assign]
        return spec


if _RATE > 0:
    sys.meta_path.insert(0, _Finder())
