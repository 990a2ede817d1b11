"""The request plan: a seeded, engine-independent order of conversations, and the warmup prompts
drawn from outside the measured set."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass

from specperf.errors import ConfigError
from specperf.schemas import PromptItem

# Used for warmup only when neither warmup_items nor unmeasured items of the set exist.
# Generic, short and unlike any dataset prompt, so they never prime the measured prefixes.
WARMUP_PROMPTS: tuple[str, ...] = (
    "Describe a quiet morning in a small harbour town.",
    "List five uses for a paperclip.",
    "Explain what a binary search does, in plain words.",
    "Write a short poem about autumn leaves.",
    "What are the main differences between a lake and a pond?",
    "Give three tips for keeping houseplants alive.",
    "Summarise the rules of tic-tac-toe.",
    "Why is the sky blue? Answer briefly.",
    "Suggest a name for a friendly robot and explain it.",
    "Write a haiku about a train at night.",
    "How does a bicycle stay upright while moving?",
    "Describe the taste of fresh bread to someone who never had it.",
    "What is the difference between weather and climate?",
    "Write two sentences about the history of the compass.",
    "Explain recursion to a ten-year-old.",
    "Plan a simple three-course dinner menu.",
)


@dataclass(frozen=True)
class Conversation:
    """One planned item: ``turns`` user turns of ``item`` (a multi-turn item may be cut short
    at the end of the plan so that the total equals the request count)."""

    item: PromptItem
    turns: int
    first_index: int  # index of its first request in the request order


def rank_items(items: Sequence[PromptItem], seed: int) -> list[PromptItem]:
    """Deterministic, engine-independent permutation: rank by sha256(f"{seed}:{id}")."""
    return sorted(
        items, key=lambda it: (hashlib.sha256(f"{seed}:{it.id}".encode()).digest(), it.id)
    )


def plan_requests(
    items: Sequence[PromptItem], num_requests: int, seed: int
) -> tuple[list[Conversation], list[str], float, list[PromptItem]]:
    """The request plan: conversations in order, the prompt-id order, the repeat factor, and the
    ranked items left out of the measured set (usable for warmup)."""
    if not items:
        raise ConfigError("workload: the prompt set is empty")
    if num_requests < 1:
        raise ConfigError(f"workload: num_requests must be >= 1, got {num_requests}")
    ids = [it.id for it in items]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise ConfigError(f"workload: duplicate prompt id {dup!r} in the set")
    for it in items:
        if not it.turns:
            raise ConfigError(f"workload: prompt {it.id!r} has no turns")
    ranked = rank_items(items, seed)
    per_pass = sum(len(it.turns) for it in ranked)
    plan: list[Conversation] = []
    order: list[str] = []
    used = 0
    i = 0
    while len(order) < num_requests:
        item = ranked[i % len(ranked)]
        n = min(len(item.turns), num_requests - len(order))
        plan.append(Conversation(item=item, turns=n, first_index=len(order)))
        order.extend(item.id if k == 1 else f"{item.id}#{k}" for k in range(1, n + 1))
        i += 1
        used = max(used, min(i, len(ranked)))
    repeat = num_requests / per_pass if num_requests > per_pass else 1.0
    unmeasured = ranked[used:]
    return plan, order, repeat, unmeasured


def order_hash(order: Sequence[str]) -> str:
    return hashlib.sha256(json.dumps(list(order)).encode()).hexdigest()[:16]


def _messages(item: PromptItem) -> list[dict[str, str]]:
    return [{"role": "system", "content": item.system}] if item.system else []


def _warmup_prompts(
    warmup_items: Sequence[PromptItem], unmeasured: Sequence[PromptItem], n: int
) -> list[PromptItem]:
    pool = list(warmup_items) or list(unmeasured)
    if not pool:
        pool = [
            PromptItem(id=f"warmup-{i}", category="warmup", turns=(p,))
            for i, p in enumerate(WARMUP_PROMPTS)
        ]
    out = []
    for i in range(n):
        src = pool[i % len(pool)]
        out.append(
            PromptItem(id=f"warmup-{i}", category="warmup", turns=src.turns[:1], system=src.system)
        )
    return out
