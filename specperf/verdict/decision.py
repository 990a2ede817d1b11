"""The decision rule of a noisy metric: is this run's metric worse than the baseline's, beyond
noise? (docs/verdict.md, "The decision").

- The unit is the ENGINE START. Requests of one start share that start's speed (its memory
  layout, thread placement, clocks), so pooling requests would count one start's luck many
  times (pseudo-replication) and flag ordinary start-to-start differences. Baselines therefore
  keep one value per start, and a run contributes one value per start it measured; with enough
  baseline passes the unit is the pass (``variance``).
- Values are compared on the log scale (a 10 % slowdown is the same effect at 50 or 500 tok/s,
  and ratios of speeds are roughly log-normal).
- A regression needs BOTH a one-sided Student t test on the log values rejecting "no change" at
  level ``alpha`` (the baseline's start-to-start spread estimates the noise) AND a point
  estimate at least ``min_effect`` in the bad direction. The first keeps noise from failing a
  run; the second keeps a real but negligible change (1 %) from failing it.
- ``alpha`` is per gated check; the suite divides its run-wide false-alarm budget (default 1 %)
  over the gated checks of the run (``levels.split_alpha``), so a whole unchanged run stays
  red <= 1 % of the time.
- A metric that does not vary between starts (MAL at concurrency 1 at temperature 0) has a
  spread of ~0: the test then reduces to "the point moved by at least ``min_effect``"
  (``variance.MIN_LOG_SD``, a stated floor used with normal quantiles).
- Zero and other boundary values are values. A start measured at or below 0 cannot go on the
  log scale; against a positive baseline it is an infinite drop, so for "higher is better"
  (acceptance 0, throughput 0) and "equal" the check is a regression outright and its reason
  says so; for "lower is better" it is no regression. A baseline with a value <= 0 cannot give
  a log-scale spread: such a check is not decided (the gates make a baseline that could never
  fail report-only first). Only a value that was not measured (None, NaN) is dropped.
- Items of one engine config share each engine start, so their spreads pooled together
  (``logscale.pooled_spread``) estimate one start effect, with one item's degrees of freedom.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, replace

from scipy import optimize as _opt
from scipy import stats as _st

from specperf.textfmt import percent_change
from specperf.verdict.logscale import log_values, measured, non_positive
from specperf.verdict.variance import variance

DEFAULT_MIN_EFFECT = 0.05
DEFAULT_RUN_ALPHA = 0.01
# "What a check can see": the change it calls a regression with this probability (its power).
DETECT_POWER = 0.9
# A spread estimate needs at least this many baseline starts; fewer: not gated statistically.
MIN_BASELINE_STARTS = 3
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
    level = alpha / 2 if direction not in ("higher", "lower") else alpha
    crit = float(_st.t.ppf(1 - level, df))
    hi = max(crit, 1.0) + 5.0
    while _st.nct.sf(crit, df, hi) < DETECT_POWER:
        hi *= 2
    nc = _opt.brentq(lambda x: _st.nct.sf(crit, df, x) - DETECT_POWER, 0.0, hi, xtol=1e-6)
    effect = nc * se
    if direction == "higher":
        return -max(1 - math.exp(-effect), min_effect)
    return max(math.exp(effect) - 1, min_effect)


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
    from more than this item's baseline — ``spread.start_spread`` over the items of one engine
    config, which share each engine start, so their log spreads estimate the same start
    effect. With 6 starts per item one item alone has 5 degrees of freedom and a t quantile
    of ~9.7 at the item level; three items pooled have 15 and ~5.3. This run's own starts (when
    more than one) are pooled in too.

    ``baseline_passes`` labels each baseline value with the pass (run) that measured it; with
    at least ``variance.MIN_BASELINE_PASSES`` passes the test is pass-level, its spread
    the spread of pass means (``pass_spread``: pooled over the config's items)."""
    now, base = measured(current), measured(baseline)
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
    a, b = log_values(now), log_values(base)
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
    v = variance(a, b, baseline, baseline_passes, spread, pass_spread)
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
