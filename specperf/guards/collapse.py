"""MAL collapse: the mean acceptance length against the same config at other concurrencies."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping
from typing import Any

from specperf.guards.common import (
    THRESHOLDS,
    GuardResult,
    Record,
    _output_text,
    _usable,
    quote,
)
from specperf.guards.degenerate import record_degeneracy

# ---- MAL collapse ------------------------------------------------------------------------

SAME_CONFIG_KEYS = (
    "engine",
    "engine_version",
    "model",
    "method",
    "num_speculative_tokens",
    "dataset",
)


def mal_collapse(
    summary: Mapping[str, Any],
    peers: Iterable[Mapping[str, Any]],
    records: Iterable[Record] = (),
    *,
    min_share: float = THRESHOLDS["min_mal_share_of_peers"],
) -> GuardResult:
    """Flags a MAL that collapses against the same config at other concurrencies: fails when
    (MAL − 1) < ``min_share`` × median(peer MAL − 1). Peers that differ in any of
    ``SAME_CONFIG_KEYS`` present in both, or share this concurrency, are ignored. Quotes a
    degenerate output from ``records`` when there is one."""
    name = "mal_collapse"
    mal = summary.get("mean_acceptance_length")
    conc = summary.get("concurrency")
    usable = [
        p
        for p in peers
        if p.get("mean_acceptance_length") is not None
        and p.get("concurrency") != conc
        and all(p.get(k) == summary.get(k) for k in SAME_CONFIG_KEYS if k in p and k in summary)
    ]
    if mal is None or not usable:
        why = "no MAL for this run" if mal is None else "no peer at another concurrency"
        return GuardResult(name, None, mal, None, f"not evaluated: {why}")
    ref = statistics.median(float(p["mean_acceptance_length"]) for p in usable) - 1.0
    share = (float(mal) - 1.0) / ref if ref > 0 else math.inf
    details = {
        "mal": mal,
        "concurrency": conc,
        "peers": {str(p.get("concurrency")): p["mean_acceptance_length"] for p in usable},
    }
    summary_line = (
        f"MAL {float(mal):.2f} at c={conc} vs peers' median {ref + 1:.2f} "
        f"(accepted/step {share:.0%} of peers', min {min_share:.0%})"
    )
    if ref <= 0 or share >= min_share:
        return GuardResult(name, True, share if ref > 0 else None, min_share, summary_line, details)
    example = next(
        ((r, w) for r in _usable(records) if (w := record_degeneracy(r)) is not None), None
    )
    if example:
        r, why = example
        summary_line += f"; e.g. {r['prompt_id']}: {why}: {quote(_output_text(r))}"
    return GuardResult(name, False, share, min_share, summary_line, details)
