"""The standard error of a decision: the variance of (this run's log mean - the baseline's log
mean) and its degrees of freedom, at the start level or, with enough baseline passes, at the
pass level (docs/verdict.md, "The decision").

Above the start there is the PASS: one run on one host in one window (a night's job, a GPU
machine's lease). Its starts share the host's and the hour's speed, so K starts of one pass are
not K independent draws, any more than a start's requests are: where the pass-to-pass spread is
as large as the start-to-start spread, a test that takes a 3-start run as 3 independent values
has a false-alarm rate many times its level. So when the baseline's starts come from at least
``MIN_BASELINE_PASSES`` passes, the unit is the pass: this run's starts are averaged into one
pass value, compared with the spread of the baseline's pass means. With fewer passes the starts
are tested as independent values, and the note says so.

A spread below ``MIN_LOG_SD`` (a metric that does not vary between starts) is floored; the floor
is a stated spread, not an estimate, so it is used with ``FLOOR_DF`` degrees of freedom (normal
quantiles): three identical starts then gate as firmly as thirty.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, replace

from specperf.verdict.logscale import pass_groups, pass_means, pooled_spread

# 0.1 % on the log scale: below any meaningful spread, above floating-point noise.
MIN_LOG_SD = 1e-3
# Degrees of freedom of the floored spread: a stated value, not an estimate (normal quantiles).
FLOOR_DF = 10**6
FLOOR_NOTE = f"spread below its floor {MIN_LOG_SD:.1%}: the floor, a stated value"
# The pass-level test needs at least this many baseline passes to estimate their spread.
MIN_BASELINE_PASSES = 3


@dataclass(frozen=True)
class Variance:
    """The variance of (this run's log mean - the baseline's log mean), its df, and the note
    the decision's line carries about how it was estimated."""

    var: float
    df: int
    note: str
    pass_level: bool = False


def pass_variance(
    a: Sequence[float],
    baseline: Sequence[float],
    passes: Sequence[Hashable],
    pass_spread: tuple[float, int] | None,
) -> Variance | None:
    """The pass-level variance (``a``: this run's log values; ``baseline``: the baseline's
    values, labelled by ``passes``), or None when the baseline has fewer than
    MIN_BASELINE_PASSES passes. The baseline mean is the mean over its starts (as shown in
    tables); its pass means vary by s_m (their spread, pooled over the config's items when
    ``pass_spread`` is given), so var(baseline mean) = s_m² Σn_i²/N². This run is one pass:
    var = s_m² when it has as many starts as the baseline's passes on average (1/K = mean
    1/n_i); when it has fewer, its mean is noisier by s_w² (1/K - mean 1/n_i), s_w the
    within-pass spread."""
    means = pass_means(baseline, passes)
    n_pass = len(means)
    if n_pass < MIN_BASELINE_PASSES:
        return None
    sizes = [n for _, n in means]
    total = sum(sizes)
    if pass_spread is not None and pass_spread[1] > 0:
        s_m, df = pass_spread
    else:
        s_m, df = pooled_spread([[m for m, _ in means]], shared=False)
    var = s_m**2 * (1 + sum(n * n for n in sizes) / total**2)
    short = 1 / max(len(a), 1) - sum(1 / n for n in sizes) / n_pass
    if short > 0:
        within = [g for g in pass_groups(baseline, passes) if len(g) >= 2]
        within += [list(a)] if len(a) >= 2 else []
        s_w, df_w = pooled_spread(within, shared=False)
        var += (s_w**2 if df_w else s_m**2 * n_pass / sum(1 / n for n in sizes)) * short
    note = (
        f"unit: the pass — this run's {len(a)} start(s) as one value vs {n_pass} baseline "
        f"passes ({total} starts)"
    )
    if pass_spread is not None and pass_spread[1] > 0:
        note += f", spread pooled over {df} df"
    return Variance(var, max(df, 1), note, pass_level=True)


def start_variance(
    a: Sequence[float], b: Sequence[float], spread: tuple[float, int] | None
) -> tuple[float, int]:
    """The start-level variance of the difference of log means (``a``, ``b``: log values) and
    its df: starts taken as independent; their spread pooled over the config's items when
    ``spread`` is given, with this run's own starts pooled in, else over both groups."""
    if spread is not None and spread[1] > 0:
        s, df = pooled_spread([a], shared=False, prior=spread)
    else:
        s, df = pooled_spread([a, b], shared=False)
    if s < MIN_LOG_SD:
        return MIN_LOG_SD**2 * (1 / len(a) + 1 / len(b)), FLOOR_DF
    return s**2 * (1 / len(a) + 1 / len(b)), max(df, 1)


def variance(
    a: Sequence[float],
    b: Sequence[float],
    raw_baseline: Sequence[float],
    baseline_passes: Sequence[Hashable] | None,
    spread: tuple[float, int] | None,
    pass_spread: tuple[float, int] | None,
) -> Variance:
    """Pass-level when the baseline names its passes and has enough of them, else start-level
    (``a``, ``b``: log values of this run and the baseline; ``raw_baseline``: the baseline's
    values as ``baseline_passes`` labels them)."""
    if baseline_passes is not None:
        pv = pass_variance(a, raw_baseline, baseline_passes, pass_spread)
        if pv is not None:
            floor = MIN_LOG_SD**2 * (1 / len(a) + 1 / len(b))
            if pv.var < floor:
                note = f"{pv.note}; {FLOOR_NOTE}"
                return replace(pv, var=floor, df=FLOOR_DF, note=note)
            return pv
    var, df = start_variance(a, b, spread)
    note = f"spread pooled over {df} df" if spread is not None and spread[1] > 0 else ""
    if df == FLOOR_DF:
        note = FLOOR_NOTE
    if baseline_passes is not None:
        n_pass = len(pass_means(raw_baseline, baseline_passes))
        note = ", ".join(
            x
            for x in (
                note,
                f"baseline from {n_pass} pass(es), fewer than {MIN_BASELINE_PASSES}: "
                "starts taken as independent",
            )
            if x
        )
    return Variance(var, df, note)
