"""Which baseline starts pool into an item's start-to-start spread: the entries of the same
engine config (items that differ only in dataset and concurrency run on one engine start) whose
engine fingerprint matches, so a spread from 3 items x 5 starts is used instead of 5 starts."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from specperf.baselines import BaselineEntry, BaselineFile, fingerprint_diff
from specperf.config import ItemKey
from specperf.verdict.logscale import log_values, pass_means, pooled_spread


def config_key(key: ItemKey) -> tuple[str, str, str, str]:
    """The engine config an item runs on: items that differ only in dataset and concurrency
    are measured on the same engine start in a run."""
    return (key.model, key.engine, key.method, key.sampling)


def config_siblings(baselines: BaselineFile, key: ItemKey) -> list[BaselineEntry]:
    """The baseline entries of ``key``'s engine config (itself included)."""
    ck = config_key(key)
    return [e for e in baselines.entries.values() if config_key(e.key) == ck]


# The fingerprint fields that describe the engine start itself (not the workload run on it).
ENGINE_FINGERPRINT_FIELDS = (
    "engine_label",
    "engine_kind",
    "model",
    "tokenizer",
    "topology",
    "server_shape",
    "sampling",
)


def _engine_part(fingerprint: Mapping[str, Any]) -> dict[str, Any]:
    return {k: fingerprint.get(k) for k in ENGINE_FINGERPRINT_FIELDS}


def spread_peers(
    entry: BaselineEntry, siblings: Sequence[BaselineEntry], metric: str
) -> list[BaselineEntry]:
    """The siblings (not ``entry`` itself) whose starts may pool with ``entry``'s: same engine
    fingerprint (``ENGINE_FINGERPRINT_FIELDS``), the metric recorded."""
    mine = _engine_part(entry.fingerprint)
    return [
        e
        for e in siblings
        if e is not entry
        and metric in e.metrics
        and not fingerprint_diff(_engine_part(e.fingerprint), mine)
    ]


def start_spread(items: Sequence[Sequence[float]]) -> tuple[float, int]:
    """The start-to-start spread (log) of items of one engine config, each given by its start
    values: ``logscale.pooled_spread`` with one item's df."""
    return pooled_spread([log_values(v) for v in items])


def pass_spread(items: Sequence[tuple[Sequence[float], Sequence[Hashable]]]) -> tuple[float, int]:
    """The spread of pass means (log) of items of one engine config, each given by its start
    values and their pass labels: ``logscale.pooled_spread`` with one item's df (the most
    passes any item has, less one), since the items of a config share each pass."""
    return pooled_spread([[m for m, _ in pass_means(v, p)] for v, p in items])


def config_spread(
    entry: BaselineEntry, siblings: Sequence[BaselineEntry], metric: str
) -> tuple[float, int] | None:
    """The start-to-start spread of ``metric`` pooled over the entry and its peers of the same
    engine config (``start_spread``), or None when there are no peers to pool: the item's own
    spread is used then."""
    same = spread_peers(entry, siblings, metric)
    if not same:
        return None
    return start_spread([e.start_values(metric) for e in (entry, *same)])


def config_pass_spread(
    entry: BaselineEntry, siblings: Sequence[BaselineEntry], metric: str
) -> tuple[float, int] | None:
    """The spread of pass means of ``metric`` pooled over the entry and its peers of the same
    engine config (``pass_spread``), or None without peers."""
    same = spread_peers(entry, siblings, metric)
    if not same:
        return None
    return pass_spread([(e.start_values(metric), e.start_passes(metric)) for e in (entry, *same)])
