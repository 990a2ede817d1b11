"""The engine-wide test: one effect over all of an engine's items, the geometric mean of their
per-item ratios. A small uniform slowdown that no single noisy item can show stands out in the
mean of many (docs/verdict.md, "The engine-wide check")."""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence

from scipy import stats as _st

from specperf.verdict.decision import (
    DEFAULT_MIN_EFFECT,
    DEFAULT_RUN_ALPHA,
    MIN_BASELINE_STARTS,
    Decision,
    detectable_change,
)
from specperf.verdict.logscale import log_values, non_positive
from specperf.verdict.variance import variance


def engine_wide(
    groups: Sequence[
        tuple[Sequence[float], Sequence[float]]
        | tuple[Sequence[float], Sequence[float], Sequence[Hashable] | None]
    ],
    direction: str,
    *,
    min_effect: float = DEFAULT_MIN_EFFECT,
    alpha: float = DEFAULT_RUN_ALPHA,
    min_baseline_starts: int = MIN_BASELINE_STARTS,
    units: Sequence[str] | None = None,
) -> Decision:
    """The geometric mean of per-item ratios over an engine's items, tested as one effect.

    Each group is (current starts, baseline starts[, baseline pass labels]) of one item;
    ``units`` names the engine start each item was measured on (items of one engine config
    share a start in a normal run, so their deviations are NOT independent). Items of one unit
    are averaged first and that unit's variance is taken as the mean of its items' variances —
    exact when a start moves all its items alike, conservative when they vary independently.

    Start-level (no pass labels, or too few passes): the units are independent,
    var(mean) = Σ var_unit / U². Pass-level (any item's baseline has MIN_BASELINE_PASSES passes):
    every unit of this run was measured in the same pass (one host, one window), whose speed
    moves them all, so the units' standard deviations are averaged instead,
    var(mean) = (Σ sd_unit / U)² — exact when a pass moves every engine config alike,
    conservative otherwise. Seeded simulations of two-level noise
    (tests/unit/verdict/test_stats_passes.py) hold a 3-start run's false-alarm rate near the
    level whether passes move the configs alike or independently, where the start-level test
    would exceed it several-fold.

    One item is enough: an engine config with a single item (the H200 suite's decode-loop
    engine) is then judged at the engine-wide level, which the run's budget reserves for every
    engine (``levels.split_alpha``) whether or not it has a second item; the mean of one ratio
    is that ratio, so nothing is averaged, and the line says ``over 1 item``."""
    by_unit: dict[str, list[tuple[float, float, int, bool]]] = {}
    zero: list[int] = []
    n_cur = n_base = 0
    for i, group in enumerate(groups):
        current, baseline = group[0], group[1]
        passes = group[2] if len(group) > 2 else None  # type: ignore[misc]
        a, b = log_values(current), log_values(baseline)
        if non_positive(baseline) or len(b) < min_baseline_starts:
            continue
        if non_positive(current) and direction != "lower":
            zero.append(i)  # an infinite drop: the engine-wide effect is a regression outright
        if not a:
            continue
        v = variance(a, b, baseline, passes, None, None)
        d = sum(a) / len(a) - sum(b) / len(b)
        unit = units[i] if units is not None else str(i)
        by_unit.setdefault(unit, []).append((d, v.var, v.df, v.pass_level))
        n_cur += len(a)
        n_base += len(b)
    items = sum(len(v) for v in by_unit.values())
    if zero:
        return Decision(
            True,
            0.0,
            None,
            None,
            n_cur,
            n_base,
            alpha,
            min_effect,
            f"{len(zero)} item(s) measured a start <= 0 against a positive baseline: an "
            "infinite drop on the log scale, a regression outright",
        )
    if items < 1:
        return Decision(
            None,
            None,
            None,
            None,
            n_cur,
            n_base,
            alpha,
            min_effect,
            f"no item whose baseline has >= {min_baseline_starts} engine starts",
        )
    ds, unit_vars, unit_dfs = [], [], []
    for rows in by_unit.values():
        ds.append(sum(r[0] for r in rows) / len(rows))
        unit_vars.append(sum(r[1] for r in rows) / len(rows))
        unit_dfs.append(max(r[2] for r in rows))
    pass_level = any(r[3] for rows in by_unit.values() for r in rows)
    d = sum(ds) / len(ds)
    if pass_level:
        se = sum(math.sqrt(v) for v in unit_vars) / len(ds)
        how = "units share this run's pass"
    else:
        se = math.sqrt(sum(unit_vars)) / len(ds)
        how = "units independent"
    df = sum(unit_dfs)
    t = d / se
    ratio = math.exp(d)
    if direction == "lower":
        p = float(_st.t.sf(t, df))
        worse = ratio >= 1 + min_effect - 1e-12
    else:
        p = float(_st.t.cdf(t, df))
        worse = ratio <= 1 - min_effect + 1e-12
    q = float(_st.t.ppf(0.975, df))
    return Decision(
        worse and p < alpha,
        ratio,
        p,
        (math.exp(d - q * se), math.exp(d + q * se)),
        n_cur,
        n_base,
        alpha,
        min_effect,
        f"geometric mean over {items} item{'s' if items != 1 else ''} on {len(ds)} engine start "
        f"group(s), {how}",
        detectable_change(se, df, alpha, min_effect, "lower" if direction == "lower" else "higher"),
    )
