"""Typed records shared by every stage of the data flow.

datasets → (PromptItem) → workload → (RequestRecord, Counters) → metrics → run summary dict
→ baselines/verdict → report. Engines only appear through ``specperf.engines``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal

PrefixCachePolicy = Literal["reset", "disabled", "keep"]
# The method name of a run without speculation (every item key and engine spec uses it).
NATIVE = "native"


@dataclass(frozen=True)
class PromptItem:
    """One prompt of a set. ``turns`` are user turns; turn n>1 is sent with the model's own
    answers to the earlier turns (MT-Bench style)."""

    id: str
    category: str
    turns: tuple[str, ...]
    reference: str | None = None
    lang: str = "en"
    twin: str | None = None  # id of the matched item in the other language, if any
    system: str | None = None


@dataclass(frozen=True)
class Dataset:
    """A named prompt set with a content hash (part of every baseline fingerprint)."""

    name: str
    version: str  # sha256 prefix of the canonical content
    items: tuple[PromptItem, ...]
    tier: str = "full"


@dataclass(frozen=True)
class SamplingParams:
    """Every sampling parameter is sent explicitly: server defaults differ by model/version."""

    name: str = "greedy"
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = -1
    min_p: float = 0.0
    seed: int | None = 0
    max_tokens: int = 512
    ignore_eos: bool = False
    thinking: bool = False

    def body(self) -> dict[str, Any]:
        """Fields of an OpenAI-compatible chat request (vLLM and SGLang accept the extras)."""
        out: dict[str, Any] = {
            "temperature": self.temperature,
            "top_p": self.top_p,
            "top_k": self.top_k,
            "min_p": self.min_p,
            "max_tokens": self.max_tokens,
            "ignore_eos": self.ignore_eos,
            "chat_template_kwargs": {"enable_thinking": self.thinking},
        }
        if self.seed is not None:
            out["seed"] = self.seed
        return out

    def fingerprint(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class WorkloadSpec:
    """How one item is driven: closed loop at ``concurrency`` for ``num_requests`` requests."""

    concurrency: int = 1
    num_requests: int = 32
    warmup_requests: int | None = None  # None: one per concurrency slot (at least 1)
    seed: int = 0
    request_timeout_s: float | None = None  # None: derived from max_tokens
    stall_timeout_s: float = 60.0
    item_deadline_s: float = 1800.0
    prefix_cache: PrefixCachePolicy = "reset"
    max_failed_fraction: float = 0.0
    # below this measured duration an item's speed is start-up noise: not judged (verdict)
    min_duration_s: float = 5.0
    # where no baseline fixes the count, a first start shorter than twice min_duration_s is
    # measured again with a whole multiple of the requests (specperf.workload.sizing)
    size_to_min_duration: bool = True
    # a speed baseline whose starts all come from fewer days than this knows one afternoon's
    # host state, not the machine's: its speeds are reported, not gated (verdict)
    min_baseline_days: int = 2

    @property
    def serial(self) -> bool:
        return self.concurrency == 1


@dataclass
class RequestRecord:
    """What one measured request did. Times are seconds relative to the run start."""

    index: int
    prompt_id: str
    category: str
    turn: int = 1
    sent_s: float = 0.0
    ttft_s: float | None = None
    e2e_s: float | None = None
    chunk_times_s: list[float] = field(default_factory=list)  # arrival of each content chunk
    chunk_tokens: list[int] = field(default_factory=list)  # tokens per chunk where known
    output_tokens: int = 0
    output_tokens_source: Literal["usage", "client", "none"] = "none"
    prompt_tokens: int | None = None
    finish_reason: str | None = None
    text: str = ""
    reasoning_text: str = ""
    token_ids: list[int] | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class Counters:
    """Cumulative engine counters at one instant; ``None`` where the engine has no such
    counter. Acceptance always comes from ``after - before`` of two snapshots."""

    drafts: float | None = None
    draft_tokens: float | None = None
    accepted_tokens: float | None = None
    accepted_per_position: tuple[float, ...] | None = None
    generation_tokens: float | None = None
    prompt_tokens: float | None = None
    prefix_cache_queries: float | None = None
    prefix_cache_hits: float | None = None
    extra: tuple[tuple[str, float], ...] = ()

    def minus(self, before: Counters) -> Counters:
        """Delta over a run (``self`` is the later snapshot)."""

        def d(a: float | None, b: float | None) -> float | None:
            return None if a is None or b is None else a - b

        per_pos = None
        if self.accepted_per_position is not None and before.accepted_per_position is not None:
            n = max(len(self.accepted_per_position), len(before.accepted_per_position))
            a = list(self.accepted_per_position) + [0.0] * (n - len(self.accepted_per_position))
            b = list(before.accepted_per_position) + [0.0] * (n - len(before.accepted_per_position))
            per_pos = tuple(x - y for x, y in zip(a, b, strict=True))
        bx = dict(before.extra)
        return Counters(
            drafts=d(self.drafts, before.drafts),
            draft_tokens=d(self.draft_tokens, before.draft_tokens),
            accepted_tokens=d(self.accepted_tokens, before.accepted_tokens),
            accepted_per_position=per_pos,
            generation_tokens=d(self.generation_tokens, before.generation_tokens),
            prompt_tokens=d(self.prompt_tokens, before.prompt_tokens),
            prefix_cache_queries=d(self.prefix_cache_queries, before.prefix_cache_queries),
            prefix_cache_hits=d(self.prefix_cache_hits, before.prefix_cache_hits),
            extra=tuple((k, v - bx[k]) for k, v in self.extra if k in bx),
        )
