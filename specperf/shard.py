"""Split the perf matrix across hosts: ``--shard i/n`` (1-based, like a CI matrix index).

Every (model, engine) group lands whole on one shard, so native and method items of one model
and engine still run back to back on the same GPU kind and their speedup stays fair.

The split is a pure function of the collected items: every shard host collects the same suite
with the same filters and computes the same assignment, so the shards are disjoint and together
complete without any coordination. Groups are placed heaviest first on the least-loaded shard
(longest-processing-time greedy), ties broken by the group's text, never by ``hash()`` (which
is salted per process).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import TypeVar

from specperf.errors import ConfigError

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)

_SHARD_RE = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


def parse_shard(text: str, flag: str = "--shard") -> tuple[int, int]:
    """``"2/4"`` → ``(2, 4)``; anything else is a one-line error naming ``flag``."""
    m = _SHARD_RE.match(text or "")
    if not m:
        raise ConfigError(f"{flag} {text!r}: expected INDEX/TOTAL, e.g. 1/4")
    index, total = int(m.group(1)), int(m.group(2))
    check_shard(index, total, flag)
    return index, total


def check_shard(index: int, total: int, flag: str = "--shard") -> None:
    if total < 1:
        raise ConfigError(f"{flag} {index}/{total}: TOTAL must be at least 1")
    if not 1 <= index <= total:
        raise ConfigError(f"{flag} {index}/{total}: INDEX must be between 1 and {total}")


def key_text(key: Hashable) -> str:
    """Canonical text of a group key: the same on every host and Python process."""
    if isinstance(key, str):
        return key
    if isinstance(key, tuple):
        return json.dumps([key_text(k) for k in key], ensure_ascii=False)
    return json.dumps(key, ensure_ascii=False, sort_keys=True, default=str)


def assign_groups(weights: Mapping[K, float], total: int) -> dict[K, int]:
    """Group → shard index (1-based). Heaviest group first onto the least-loaded shard."""
    check_shard(1, total)
    for key, w in weights.items():
        if not w >= 0:
            raise ConfigError(f"shard weight of group {key_text(key)!r} must be >= 0, got {w}")
    order = sorted(weights, key=lambda k: (-float(weights[k]), key_text(k)))
    loads = [0.0] * total
    out: dict[K, int] = {}
    for key in order:
        target = min(range(total), key=lambda s: (loads[s], s))
        loads[target] += float(weights[key])
        out[key] = target + 1
    return out


def _identity(x: T) -> T:
    return x


def group_weights(
    items: Iterable[T],
    key: Callable[[T], Hashable] = _identity,
    weight: Callable[[T], float] | None = None,
) -> dict[Hashable, float]:
    """Sum of item weights (1 each by default) per group key."""
    out: dict[Hashable, float] = {}
    for it in items:
        k = key(it)
        out[k] = out.get(k, 0.0) + (1.0 if weight is None else float(weight(it)))
    return out


def split(
    items: Sequence[T],
    total: int,
    key: Callable[[T], Hashable] = _identity,
    weight: Callable[[T], float] | None = None,
) -> list[list[T]]:
    """All shards at once (shard 1 first); each keeps the items' original order."""
    assignment = assign_groups(group_weights(items, key, weight), total)
    shards: list[list[T]] = [[] for _ in range(total)]
    for it in items:
        shards[assignment[key(it)] - 1].append(it)
    return shards


def select_shard(
    items_or_group_keys: Sequence[T],
    index: int,
    total: int,
    key: Callable[[T], Hashable] = _identity,
    weight: Callable[[T], float] | None = None,
) -> list[T]:
    """The items of shard ``index`` of ``total`` (1-based), in their original order.

    Pass the collected items with ``key`` returning their (model, engine) group, or pass the
    group keys themselves (one per item, duplicates allowed; ``key`` defaults to identity).
    """
    check_shard(index, total)
    return split(items_or_group_keys, total, key, weight)[index - 1]
