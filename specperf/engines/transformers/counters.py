"""The transformers engine's counters: per-step draft/accept figures, the candidate tokens
transformers' assisted decoding proposed (it reports none itself), this process' CUDA memory."""

from __future__ import annotations

import threading
from typing import Any

import torch

from specperf.engines.transformers.eagle3.speculate import StepInfo


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
