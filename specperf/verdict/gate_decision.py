"""A gated metric's row from the per-start statistics (``decision.decide``), and the figures a
row that is not judged shows: those its gate would compare."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from specperf.baselines import BaselineEntry
from specperf.config import MetricPolicy
from specperf.verdict.checks import Check, join
from specperf.verdict.decision import MIN_BASELINE_STARTS, decide
from specperf.verdict.evidence import unarmed
from specperf.verdict.logscale import geometric_mean
from specperf.verdict.spread import config_pass_spread, config_spread


def as_the_gate_compares(
    c: Check, metric: str, entry: BaselineEntry, fig: Mapping[str, Any]
) -> Check:
    """Show a row that is not judged with the figures its gate would compare (``decide_check``:
    the geometric mean of this run's starts against that of the baseline's), not the run's
    median against the stored value: a report-only row and the gated row it becomes once the
    baseline is armed then say the same change for the same data. Rows whose baseline has too
    few starts for the statistics keep the point values."""
    base = entry.start_values(metric)
    current = [float(v) for v in (fig.get("starts") or []) if v is not None]
    if len(base) < MIN_BASELINE_STARTS or not current:
        return c
    geo_base, geo_now = geometric_mean(base), geometric_mean(current)
    if geo_base is None or geo_now is None:
        return c
    c.measured, c.baseline, c.delta = geo_now, geo_base, geo_now / geo_base - 1
    if len(current) > 1:  # the figure's own interval was described around its median
        c.interval = (min(current), max(current))
        c.interval_method = f"min–max of {len(current)} starts; value is their geometric mean"
    return c


def decide_check(
    c: Check,
    metric: str,
    pol: MetricPolicy,
    entry: BaselineEntry,
    fig: Mapping[str, Any],
    measured: float,
    alpha: float,
    siblings: Sequence[BaselineEntry] = (),
) -> None:
    """Set ``c``'s status from the per-start statistics (``evidence.unarmed`` has made a
    baseline with too few starts report-only before this is called)."""
    base = entry.start_values(metric)
    current = [float(v) for v in (fig.get("starts") or [measured]) if v is not None]
    if len(base) >= MIN_BASELINE_STARTS:
        d = decide(
            current,
            base,
            pol.direction,
            min_effect=pol.tolerance,
            alpha=alpha,
            spread=config_spread(entry, siblings, metric),
            baseline_passes=entry.start_passes(metric),
            pass_spread=config_pass_spread(entry, siblings, metric),
        )
        if d.ratio is None or d.regressed is None:
            c.status = "not_evaluated"
            c.reason = join(c.reason, d.reason)
            return
        geo = geometric_mean(base) or 0.0
        c.baseline = geo
        if len(current) > 1:  # the figure compared is the geometric mean of this run's starts
            c.measured = geometric_mean(current)
        c.delta = d.ratio - 1
        if d.interval:
            c.interval = (d.interval[0] * geo, d.interval[1] * geo)
            c.interval_method = "95 % t interval over starts"
        c.status = "fail" if d.regressed else "pass"
        c.detectable = d.detectable
        c.p_value = d.p_value
        c.reason = join(c.reason, d.describe())
        return
    c.status, c.gated = "not_evaluated", False
    c.reason = join(c.reason, unarmed({}, entry, metric, pol) or "report only")
