"""Per-start values on the log scale: which values count as measured, the geometric mean, the
means of passes, and the one pooled spread every test of the verdict uses.

A value that was not measured (None, NaN) is dropped; 0 and negatives are values, which cannot
go on the log scale (``non_positive``: the decision says what they mean, never this module).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence


def measured(values: Sequence[float | None]) -> list[float]:
    """The values that were measured: None and NaN are "not measured"; 0 and negatives stay."""
    return [float(v) for v in values if v is not None and not math.isnan(float(v))]


def log_values(values: Sequence[float | None]) -> list[float]:
    """Log values of the positive, finite measured values (callers decide first what a value
    <= 0 means: the decision and the engine-wide test never drop one silently)."""
    return [math.log(v) for v in measured(values) if v > 0 and math.isfinite(v)]


def non_positive(values: Sequence[float | None]) -> list[float]:
    """The measured values <= 0 (they cannot go on the log scale)."""
    return [v for v in measured(values) if v <= 0]


def geometric_mean(values: Sequence[float | None]) -> float | None:
    """The geometric mean of the measured values: the figure a per-start comparison reports
    (0.0 when a value is <= 0, the log scale's limit; None when nothing was measured)."""
    vals = measured(values)
    if not vals:
        return None
    if non_positive(vals):
        return 0.0
    logs = log_values(vals)
    return math.exp(sum(logs) / len(logs)) if logs else None


def sd(xs: Sequence[float]) -> float:
    """The sample standard deviation (n - 1); 0.0 for fewer than 2 values."""
    if len(xs) < 2:
        return 0.0
    m = sum(xs) / len(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))


def pass_groups(values: Sequence[float], passes: Sequence[Hashable]) -> list[list[float]]:
    """The log values grouped by pass label, in the order passes first appear."""
    if len(passes) != len(values):
        raise ValueError(f"{len(values)} values but {len(passes)} pass labels")
    groups: dict[Hashable, list[float]] = {}
    for v, label in zip(values, passes, strict=True):
        if v is not None and v > 0 and math.isfinite(v):
            groups.setdefault(label, []).append(math.log(v))
    return list(groups.values())


def pass_means(values: Sequence[float], passes: Sequence[Hashable]) -> list[tuple[float, int]]:
    """(mean of the log values, number of starts) per pass, in the order passes first appear.
    ``passes`` labels each value with the pass (run) it was measured in."""
    return [(sum(g) / len(g), len(g)) for g in pass_groups(values, passes)]


def pooled_spread(
    groups: Sequence[Sequence[float]],
    *,
    shared: bool = True,
    prior: tuple[float, int] | None = None,
) -> tuple[float, int]:
    """The standard deviation of LOG values pooled over groups, and its degrees of freedom;
    groups of fewer than 2 values add nothing, no df gives (0.0, 0).

    ``shared``: the groups are items measured on the same engine starts (or passes: the items
    of one engine config), so together they estimate one start effect and the df are ONE
    item's (the largest group's n - 1), not their sum — exact when a start moves every item
    alike, conservative when the items vary independently. Else the groups are independent
    (this run's starts and the baseline's) and their df add up. ``prior``: a spread already
    pooled elsewhere, (sd, df), that the groups are pooled with, its df counted as one group's."""
    ss, df, most = 0.0, 0, 0
    if prior is not None and prior[1] > 0:
        ss, df, most = prior[0] ** 2 * prior[1], prior[1], prior[1]
    for xs in groups:
        if len(xs) >= 2:
            ss += sd(xs) ** 2 * (len(xs) - 1)
            df += len(xs) - 1
            most = max(most, len(xs) - 1)
    if not df:
        return 0.0, 0
    return math.sqrt(ss / df), (most if shared else df)
