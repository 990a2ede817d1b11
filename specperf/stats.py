"""The statistics of a verdict: is this run's metric worse than the baseline's, beyond noise?

Why this shape (docs/verdict.md, "The decision"):
- The unit is the ENGINE START. Requests of one start share that start's speed (its memory
  layout, thread placement, clocks), so pooling requests would count one start's luck many
  times (pseudo-replication) and flag ordinary start-to-start differences. Baselines therefore
  keep one value per start, and a run contributes one value per start it measured.
- Values are compared on the log scale (a 10 % slowdown is the same effect at 50 or 500 tok/s,
  and ratios of speeds are roughly log-normal).
- A regression needs BOTH a one-sided Student t test on the log values rejecting "no change" at
  level ``alpha`` (the baseline's start-to-start spread estimates the noise) AND a point
  estimate at least ``min_effect`` in the bad direction. The first keeps noise from failing a
  run; the second keeps a real but negligible change (1 %) from failing it.
- ``alpha`` is per gated check; the suite divides its run-wide false-alarm budget (default 1 %)
  over the gated checks of the run (weighted Bonferroni, ``split_alpha``: half to the few
  engine-wide checks, half to the many per-item ones), so a whole unchanged run stays red
  <= 1 % of the time.
- A metric that does not vary between starts (MAL at concurrency 1 at temperature 0) has a
  spread of ~0: the test then reduces to "the point moved by at least ``min_effect``". A small
  floor on the spread (``MIN_LOG_SD``) keeps the arithmetic finite. Where the floor is used it
  is a stated spread, not an estimate, so the test uses it with ``FLOOR_DF`` degrees of freedom
  (normal quantiles): three identical starts then gate as firmly as thirty.
- Zero and other boundary values are values. A start measured at or below 0 cannot go on the
  log scale; against a positive baseline it is an infinite drop, so for "higher is better"
  (acceptance 0, throughput 0) and "equal" the check is a regression outright and its reason
  says so; for "lower is better" it is no regression. A baseline with a value <= 0 cannot give
  a log-scale spread: such a check is not decided (the gates make a baseline that could never
  fail report-only first). Only a value that was not measured (None, NaN) is dropped.
- Items of one engine config share each engine start (a start's speed moves all of them), so
  their spreads pooled together (``pooled_spread``, ``pooled_pass_spread``) estimate one start
  effect: the pooled standard deviation is taken over all of them, but its degrees of freedom
  are those of ONE item (the most starts any item has, less one), not their sum. Exact when a
  start moves every item alike; conservative when the items vary independently.
- The engine-wide check averages the per-item log ratios of one engine's items: a small uniform
  slowdown that no single noisy item can show stands out in the mean of many.
- Above the start there is the PASS: one run on one host in one window (a night's job, a GPU
  machine's lease). Its starts share the host's and the hour's speed, so K starts of one pass are
  not K independent draws, any more than a start's requests are: where the pass-to-pass spread
  is as large as the start-to-start spread, a test that takes a 3-start run as 3 independent
  values has a false-alarm rate many times its level. So when the baseline's starts come from
  at least ``MIN_BASELINE_PASSES`` passes, the unit is the pass: this run's starts are averaged
  into one pass value, compared with the spread of the baseline's pass means (``decide(...,
  baseline_passes=...)``). With fewer passes the starts are tested as independent values, and
  the reason says so.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, replace

from scipy import stats as _st

from specperf.textfmt import percent_change

# 0.1 % on the log scale: below any meaningful spread, above floating-point noise.
MIN_LOG_SD = 1e-3
# Degrees of freedom of the floored spread: a stated value, not an estimate (normal quantiles).
FLOOR_DF = 10**6
FLOOR_NOTE = f"spread below its floor {MIN_LOG_SD:.1%}: the floor, a stated value"
DEFAULT_MIN_EFFECT = 0.05
DEFAULT_RUN_ALPHA = 0.01
# "What a check can see": the change it calls a regression with this probability (its power).
DETECT_POWER = 0.9
# A spread estimate needs at least this many baseline starts; fewer: not gated statistically.
MIN_BASELINE_STARTS = 3
# The pass-level test needs at least this many baseline passes to estimate their spread.
MIN_BASELINE_PASSES = 3
METHOD = "one-sided t test on log per-start values"


@dataclass(frozen=True)
class Decision:
    """The outcome of one comparison. ``regressed`` is None when it could not be decided."""

    regressed: bool | None
    ratio: float | None  # current / baseline (geometric means of the starts)
    p_value: float | None
    interval: tuple[float, float] | None  # 95 % interval of the ratio
    n_current: int
    n_baseline: int
    alpha: float
    min_effect: float
    reason: str = ""
    # the smallest relative change in the bad direction this test flags DETECT_POWER of the
    # time (negative for "higher is better"); None when nothing was tested
    detectable: float | None = None
    two_sided: bool = False  # direction "equal": ``detectable`` is a size either way

    @property
    def delta(self) -> float | None:
        return None if self.ratio is None else self.ratio - 1.0

    def describe(self) -> str:
        """One line: method, sample sizes, p, the minimum effect it gates."""
        if self.ratio is None or (self.p_value is None and self.regressed is not None):
            return self.reason
        p = "n/a" if self.p_value is None else f"{self.p_value:.2g}"
        note = f" ({self.reason})" if self.reason else ""
        sees = (
            ""
            if self.detectable is None
            else f"; sees {percent_change(self.detectable, self.two_sided)} "
            f"{DETECT_POWER:.0%} of the time"
        )
        return (
            f"{METHOD}: {self.n_current} start(s) vs {self.n_baseline} baseline starts{note}, "
            f"p={p} (alpha {self.alpha:.2g}), min effect {self.min_effect:.0%}{sees}"
        )


def detectable_change(se: float, df: int, alpha: float, min_effect: float, direction: str) -> float:
    """The smallest relative change in the bad direction that a one-sided t test at ``alpha``
    with standard error ``se`` (log scale) and ``df`` degrees of freedom, plus the
    ``min_effect`` floor, calls a regression DETECT_POWER of the time. Why: a green verdict
    means "no regression this check could see"; a check on noisy starts may see only -40 %,
    and a reader must be told so rather than read green as "no slowdown". The noncentral t
    gives the power exactly for the estimated spread; "equal" uses the two-sided level.
    Negative for "higher is better", positive otherwise (the size for "equal")."""
    from scipy.optimize import brentq

    level = alpha / 2 if direction not in ("higher", "lower") else alpha
    crit = float(_st.t.ppf(1 - level, df))
    hi = max(crit, 1.0) + 5.0
    while _st.nct.sf(crit, df, hi) < DETECT_POWER:
        hi *= 2
    nc = brentq(lambda x: _st.nct.sf(crit, df, x) - DETECT_POWER, 0.0, hi, xtol=1e-6)
    effect = nc * se
    if direction == "higher":
        return -max(1 - math.exp(-effect), min_effect)
    return max(math.exp(effect) - 1, min_effect)


def _measured(values: Sequence[float | None]) -> list[float]:
    """The values that were measured: None and NaN are "not measured"; 0 and negatives stay."""
    return [float(v) for v in values if v is not None and not math.isnan(float(v))]


def _logs(values: Sequence[float | None]) -> list[float]:
    """Log values of the positive, finite measured values (callers decide first what a value
    <= 0 means: ``decide`` and ``engine_wide`` never drop one silently)."""
    return [math.log(v) for v in _measured(values) if v > 0 and math.isfinite(v)]


def non_positive(values: Sequence[float | None]) -> list[float]:
    """The measured values <= 0 (they cannot go on the log scale)."""
    return [v for v in _measured(values) if v <= 0]


def geometric_mean(values: Sequence[float | None]) -> float | None:
    """The geometric mean of the measured values: the figure a per-start comparison reports
    (0.0 when a value is <= 0, the log scale's limit; None when nothing was measured)."""
    vals = _measured(values)
    if not vals:
        return None
    if non_positive(vals):
        return 0.0
    logs = _logs(vals)
    return math.exp(sum(logs) / len(logs)) if logs else None


def _sd(xs: Sequence[float]) -> float:
    if len(xs) < 2:
        return 0.0
    m = sum(xs) / len(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))


def pooled_log_sd(current: Sequence[float], baseline: Sequence[float]) -> tuple[float, int]:
    """Pooled standard deviation of the log values of both groups and its degrees of freedom."""
    return _pooled_sd(_logs(current), _logs(baseline))


def _pooled_sd(a: Sequence[float], b: Sequence[float]) -> tuple[float, int]:
    """Pooled standard deviation of two groups of (already log) values, and its df."""
    ss, df = 0.0, 0
    for xs in (a, b):
        if len(xs) >= 2:
            ss += _sd(xs) ** 2 * (len(xs) - 1)
            df += len(xs) - 1
    return (math.sqrt(ss / df) if df else 0.0), df


def pooled_spread(groups: Sequence[Sequence[float]]) -> tuple[float, int]:
    """Standard deviation of the log values pooled over several groups (each: one item's
    baseline starts, the items of one engine config) and its degrees of freedom. The items
    share their engine starts, so the df are one item's (the largest group's, less one), not
    the sum over items (module docstring); groups of fewer than 2 values add nothing."""
    return _pooled_sd_groups([_logs(g) for g in groups])


def _pass_groups(values: Sequence[float], passes: Sequence[Hashable]) -> list[list[float]]:
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
    return [(sum(g) / len(g), len(g)) for g in _pass_groups(values, passes)]


def pooled_pass_spread(
    groups: Sequence[tuple[Sequence[float], Sequence[Hashable]]],
) -> tuple[float, int]:
    """The standard deviation of pass means (log) pooled over several items' baselines (each:
    values and their pass labels) and its degrees of freedom: one item's (the most passes any
    item has, less one), since the items of a config share each pass."""
    return _pooled_sd_groups([[m for m, _ in pass_means(v, p)] for v, p in groups])


def _pooled_sd_groups(groups: Sequence[Sequence[float]], shared: bool = True) -> tuple[float, int]:
    """Pooled standard deviation of several groups of (log) values and its df. ``shared``: the
    groups are items measured on the same starts (or passes), so the df are the largest
    group's (n - 1), not the sum; else the groups are independent and their df add up."""
    ss, df, most = 0.0, 0, 0
    for xs in groups:
        if len(xs) >= 2:
            ss += _sd(xs) ** 2 * (len(xs) - 1)
            df += len(xs) - 1
            most = max(most, len(xs) - 1)
    if not df:
        return 0.0, 0
    return math.sqrt(ss / df), (most if shared else df)


@dataclass(frozen=True)
class _Variance:
    """The variance of (this run's log mean - the baseline's log mean) and its df."""

    var: float
    df: int
    note: str
    pass_level: bool = False


def _pass_variance(
    a: Sequence[float],
    baseline: Sequence[float],
    passes: Sequence[Hashable],
    pass_spread: tuple[float, int] | None,
) -> _Variance | None:
    """The pass-level variance, or None when the baseline has fewer than MIN_BASELINE_PASSES
    passes. The baseline mean is the mean over its starts (as shown in tables); its pass means
    vary by s_m (their spread, pooled over the config's items when ``pass_spread`` is given),
    so var(baseline mean) = s_m² Σn_i²/N². This run is one pass: var = s_m² when it has as many
    starts as the baseline's passes on average (1/K = mean 1/n_i); when it has fewer, its
    mean is noisier by s_w² (1/K - mean 1/n_i), s_w the within-pass spread."""
    means = pass_means(baseline, passes)
    n_pass = len(means)
    if n_pass < MIN_BASELINE_PASSES:
        return None
    sizes = [n for _, n in means]
    total = sum(sizes)
    if pass_spread is not None and pass_spread[1] > 0:
        s_m, df = pass_spread
    else:
        s_m, df = _pooled_sd_groups([[m for m, _ in means]], shared=False)
    var = s_m**2 * (1 + sum(n * n for n in sizes) / total**2)
    short = 1 / max(len(a), 1) - sum(1 / n for n in sizes) / n_pass
    if short > 0:
        within = [g for g in _pass_groups(baseline, passes) if len(g) >= 2]
        within += [list(a)] if len(a) >= 2 else []
        s_w, df_w = _pooled_sd_groups(within, shared=False)
        var += (s_w**2 if df_w else s_m**2 * n_pass / sum(1 / n for n in sizes)) * short
    note = (
        f"unit: the pass — this run's {len(a)} start(s) as one value vs {n_pass} baseline "
        f"passes ({total} starts)"
    )
    if pass_spread is not None and pass_spread[1] > 0:
        note += f", spread pooled over {df} df"
    return _Variance(var, max(df, 1), note, pass_level=True)


def _start_variance(
    a: Sequence[float], b: Sequence[float], spread: tuple[float, int] | None
) -> tuple[float, int]:
    """The start-level variance of the difference of log means and its df (starts taken as
    independent; their spread pooled over the config's items when ``spread`` is given, and
    over this run's own starts)."""
    if spread is not None and spread[1] > 0:
        ss, df = spread[0] ** 2 * spread[1], spread[1]
        if len(a) >= 2:
            ss += _sd(a) ** 2 * (len(a) - 1)
            df += len(a) - 1
        sd = math.sqrt(ss / df)
    else:
        sd, df = _pooled_sd(a, b)
    if sd < MIN_LOG_SD:
        return MIN_LOG_SD**2 * (1 / len(a) + 1 / len(b)), FLOOR_DF
    return sd**2 * (1 / len(a) + 1 / len(b)), max(df, 1)


def _variance(
    a: Sequence[float],
    b: Sequence[float],
    raw_baseline: Sequence[float],
    baseline_passes: Sequence[Hashable] | None,
    spread: tuple[float, int] | None,
    pass_spread: tuple[float, int] | None,
) -> _Variance:
    """Pass-level when the baseline names its passes and has enough of them, else start-level."""
    if baseline_passes is not None:
        pv = _pass_variance(a, raw_baseline, baseline_passes, pass_spread)
        if pv is not None:
            floor = MIN_LOG_SD**2 * (1 / len(a) + 1 / len(b))
            if pv.var < floor:
                note = f"{pv.note}; {FLOOR_NOTE}"
                return replace(pv, var=floor, df=FLOOR_DF, note=note)
            return pv
    var, df = _start_variance(a, b, spread)
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
    return _Variance(var, df, note)


def decide(
    current: Sequence[float],
    baseline: Sequence[float],
    direction: str,
    *,
    min_effect: float = DEFAULT_MIN_EFFECT,
    alpha: float = DEFAULT_RUN_ALPHA,
    min_baseline_starts: int = MIN_BASELINE_STARTS,
    spread: tuple[float, int] | None = None,
    baseline_passes: Sequence[Hashable] | None = None,
    pass_spread: tuple[float, int] | None = None,
) -> Decision:
    """Decide one metric from per-start values. ``direction``: higher / lower is better, or
    equal (a change either way is a regression).

    ``spread`` (sd of the log values, degrees of freedom): the start-to-start spread estimated
    from more than this item's baseline — ``pooled_spread`` over the items of one engine
    config, which share each engine start, so their log spreads estimate the same start
    effect. With 6 starts per item one item alone has 5 degrees of freedom and a t quantile
    of ~9.7 at the item level; three items pooled have 15 and ~5.3. This run's own starts (when
    more than one) are pooled in too.

    ``baseline_passes`` labels each baseline value with the pass (run) that measured it; with
    at least MIN_BASELINE_PASSES passes the test is pass-level (module docstring), its spread
    the spread of pass means (``pass_spread``: pooled over the config's items)."""
    now, base = _measured(current), _measured(baseline)
    if not now or not base:
        why = "not measured in this run" if not now else "the baseline has no measured value"
        return Decision(None, None, None, None, len(now), len(base), alpha, min_effect, why)
    if non_positive(base):
        return Decision(
            None,
            None,
            None,
            None,
            len(now),
            len(base),
            alpha,
            min_effect,
            f"the baseline holds a value <= 0 ({min(base):g}): no log-scale spread",
        )
    if len(base) >= min_baseline_starts and non_positive(now):
        return _boundary(now, base, direction, min_effect, alpha, min_baseline_starts)
    a, b = _logs(now), _logs(base)
    if not a:  # every start <= 0 and too few baseline starts to decide
        return Decision(
            None,
            0.0,
            None,
            None,
            len(now),
            len(b),
            alpha,
            min_effect,
            f"baseline has {len(b)} start(s); at least {min_baseline_starts} are needed "
            "to know its spread",
        )
    d = sum(a) / len(a) - sum(b) / len(b)
    ratio = math.exp(d)
    if len(b) < min_baseline_starts:
        return Decision(
            None,
            ratio,
            None,
            None,
            len(a),
            len(b),
            alpha,
            min_effect,
            f"baseline has {len(b)} start(s); at least {min_baseline_starts} are needed "
            "to know its spread",
        )
    v = _variance(a, b, baseline, baseline_passes, spread, pass_spread)
    df = v.df
    se = math.sqrt(v.var)
    t = d / se
    if direction == "higher":
        p = float(_st.t.cdf(t, df))
        worse = ratio <= 1 - min_effect + 1e-12
    elif direction == "lower":
        p = float(_st.t.sf(t, df))
        worse = ratio >= 1 + min_effect - 1e-12
    else:
        p = float(2 * _st.t.sf(abs(t), df))
        worse = abs(ratio - 1) >= min_effect - 1e-12
    q = float(_st.t.ppf(0.975, df))
    interval = (math.exp(d - q * se), math.exp(d + q * se))
    return Decision(
        worse and p < alpha,
        ratio,
        p,
        interval,
        len(a),
        len(b),
        alpha,
        min_effect,
        v.note,
        detectable_change(se, df, alpha, min_effect, direction),
        direction not in ("higher", "lower"),
    )


def _boundary(
    now: Sequence[float],
    base: Sequence[float],
    direction: str,
    min_effect: float,
    alpha: float,
    min_baseline_starts: int,
) -> Decision:
    """A run with a start measured <= 0 against a positive baseline (module docstring): for
    "higher is better" and "equal" a regression outright (an infinite drop on the log scale,
    ratio 0); for "lower is better" the starts <= 0 are improvements and the others decide."""
    bad = non_positive(now)
    what = f"{len(bad)} of {len(now)} start(s) measured {min(bad):g} (<= 0)"
    if direction != "lower":
        return Decision(
            True,
            0.0,
            None,
            None,
            len(now),
            len(base),
            alpha,
            min_effect,
            f"{what} against a positive baseline: an infinite drop on the log scale, a "
            "regression outright",
            two_sided=direction != "higher",
        )
    rest = [v for v in now if v > 0]
    if rest:
        d = decide(
            rest, base, direction, min_effect=min_effect, alpha=alpha,
            min_baseline_starts=min_baseline_starts,
        )  # fmt: skip
        return replace(d, reason=f"{what} (lower is better: not a regression); {d.reason}")
    return Decision(
        False,
        0.0,
        None,
        None,
        len(now),
        len(base),
        alpha,
        min_effect,
        f"{what} against a positive baseline: lower is better, not a regression",
    )


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
    conservative otherwise. Seeded simulations of the H200's measured two-level noise
    (tests/unit/test_stats_passes.py) put a 3-start run's false-alarm rate at 1.1 % for a level
    of 1 % when passes move both configs alike, 0.3 % when they move them nearly independently;
    the start-level test gave 6.8 % there.

    One item is enough: an engine config with a single item (the H200 suite's decode-loop
    engine) is then judged at the engine-wide level, which the run's budget reserves for every
    engine (``split_alpha``) whether or not it has a second item; the mean of one ratio is that
    ratio, so nothing is averaged, and the line says ``over 1 item``."""
    by_unit: dict[str, list[tuple[float, float, int, bool]]] = {}
    zero: list[int] = []
    n_cur = n_base = 0
    for i, group in enumerate(groups):
        current, baseline = group[0], group[1]
        passes = group[2] if len(group) > 2 else None  # type: ignore[misc]
        a, b = _logs(current), _logs(baseline)
        if non_positive(baseline) or len(b) < min_baseline_starts:
            continue
        if non_positive(current) and direction != "lower":
            zero.append(i)  # an infinite drop: the engine-wide effect is a regression outright
        if not a:
            continue
        v = _variance(a, b, baseline, passes, None, None)
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


def per_check_alpha(run_alpha: float, gated_checks: int) -> float:
    """Bonferroni: the run-wide false-alarm budget shared by the run's gated checks."""
    return run_alpha / max(1, gated_checks)


# The engine-wide checks get this share of the run's false-alarm budget, the per-item checks the
# rest (weighted Bonferroni: the run-wide rate stays <= run_alpha whatever the weights). Why not
# equal shares: the few engine-wide checks are the ones built to see a small uniform slowdown
# (their noise is averaged over an engine's items), while one item of a noisy metric cannot see
# 10 % at any level; a level of 0.0025 instead of 0.00016 lowers the engine-wide check's t
# quantile from ~4.2 to ~3.1 (28 df) and costs each item check little (7.3 instead of 6.6, 7 df).
ENGINE_WIDE_SHARE = 0.5


@dataclass(frozen=True)
class AlphaSplit:
    """Per-check levels of one run: ``item`` for each gated per-item check, ``engine_wide``
    for each engine-wide check."""

    item: float
    engine_wide: float


def split_alpha(
    run_alpha: float,
    item_checks: int,
    engine_checks: int,
    engine_share: float = ENGINE_WIDE_SHARE,
) -> AlphaSplit:
    """Weighted Bonferroni over the run's gated checks: ``engine_share`` of ``run_alpha`` to the
    engine-wide checks, the rest to the per-item checks (all of it to one kind when the other
    has none)."""
    if engine_checks <= 0:
        return AlphaSplit(per_check_alpha(run_alpha, item_checks), run_alpha)
    if item_checks <= 0:
        return AlphaSplit(run_alpha, per_check_alpha(run_alpha, engine_checks))
    return AlphaSplit(
        per_check_alpha(run_alpha * (1 - engine_share), item_checks),
        per_check_alpha(run_alpha * engine_share, engine_checks),
    )


__all__ = [
    "DEFAULT_MIN_EFFECT",
    "DEFAULT_RUN_ALPHA",
    "ENGINE_WIDE_SHARE",
    "METHOD",
    "MIN_BASELINE_PASSES",
    "MIN_BASELINE_STARTS",
    "AlphaSplit",
    "Decision",
    "decide",
    "engine_wide",
    "pass_means",
    "per_check_alpha",
    "pooled_log_sd",
    "pooled_pass_spread",
    "pooled_spread",
    "split_alpha",
]
