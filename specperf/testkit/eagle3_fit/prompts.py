"""The prompts a fit trains and is judged on: chat token ids as the servers build them, the
prompts of a suite (the cpu-tiny ones), and other shipped prompts, hash-ranked."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def chat_ids(tokenizer: Any, text: str, thinking: bool = False) -> list[int]:
    """Token ids of a one-turn chat prompt, as the servers build it from the chat template (the
    transformers server's own encoder, so the head is fitted on exactly what it will be sent)."""
    from specperf.engines.transformers.protocol import encode_chat

    messages = [{"role": "user", "content": text}]
    return encode_chat(tokenizer, messages, {"enable_thinking": thinking})


def suite_prompts(suite: str = "cpu-tiny") -> list[tuple[str, str]]:
    """(id, first turn) of every prompt a suite's datasets send, at the suite's tier — "the
    cpu-tiny prompts" the fitted head is judged on."""
    from specperf.config import load_suite
    from specperf.datasets import load_dataset

    s = load_suite(suite)
    out: list[tuple[str, str]] = []
    for d in s.datasets:
        ds = load_dataset(d.path or d.name, d.tier or s.tier)
        out.extend((f"{ds.name}:{it.id}", it.turns[0]) for it in ds.items)
    return out


def pool_prompts(exclude: set[str], n: int, sets: Sequence[str] = ("gsm8k", "mt-bench")) -> list:
    """(id, first turn) of up to ``n`` shipped prompts not in ``exclude``, hash-ranked."""
    from specperf.datasets import load_dataset

    items = [
        (f"{name}:{it.id}", it.turns[0])
        for name in sets
        for it in load_dataset(name).items
        if f"{name}:{it.id}" not in exclude
    ]
    items.sort(key=lambda kv: hash_rank(kv[0]))
    return items[:n]


def hash_rank(text: str) -> str:
    import hashlib

    return hashlib.sha256(f"fit:{text}".encode()).hexdigest()
