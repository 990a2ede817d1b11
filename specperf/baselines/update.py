"""Building and updating an entry from a run's figures: one value per engine start appended to
the previous entry of the same fingerprint and engine version (the last ``KEEP_PASSES`` passes,
at most ``KEEP_STARTS`` starts), the stored median, the values that could never fail a gate
(``cannot_fail``), and the measured tolerance of the nightly drift check."""

from __future__ import annotations

import datetime as _dt
import math
import statistics
from collections.abc import Mapping
from typing import Any

from scipy import stats as _st

from specperf.baselines.entries import BaselineEntry, BaselineMetric, fingerprint_digest
from specperf.baselines.passes import pass_labels
from specperf.config import ItemKey, MetricPolicy

# Used by the nightly drift check (specperf.history): max(suite tolerance, t(0.995, n-1) ×
# sqrt(1 + 1/n) × CV), the half-width of a two-sided 99 % prediction interval for ONE new night.
MIN_REPEATS_FOR_TOLERANCE = 3

# start field <- provenance field: the machine a start ran on
_START_MACHINE = {"boot_id": "boot_id", "cpu": "cpu_signature"}


def measured_tolerance(samples: list[float], floor: float) -> tuple[float, str] | None:
    """Tolerance from the spread of repeats: max(floor, t(0.995, n-1)·sqrt(1+1/n)·CV), the
    99 % prediction half-width for one new run. None below MIN_REPEATS_FOR_TOLERANCE repeats
    (one run says nothing about noise)."""
    vals = [s for s in samples if s is not None]
    n = len(vals)
    if n < MIN_REPEATS_FOR_TOLERANCE:
        return None
    mean = statistics.fmean(vals)
    if mean == 0:
        return None
    cv = statistics.stdev(vals) / abs(mean)
    k = float(_st.t.ppf(0.995, n - 1)) * math.sqrt(1 + 1 / n)
    tol = max(floor, k * cv)
    note = (
        f"max(suite {floor:.3g}, t(0.995,{n - 1})*sqrt(1+1/{n}) = {k:.2f} x CV) with "
        f"CV={cv:.4f} over {n} repeats (min {min(vals):.4g}, max {max(vals):.4g})"
    )
    return round(tol, 4), note


# Per metric, older starts fall off as updates append new ones. The statistics' unit is the pass
# (the run that measured them, verdict.variance.MIN_BASELINE_PASSES), so what is kept is counted
# in passes: a nightly of 3 starts per item keeps 10 nights, not 3.
KEEP_PASSES = 10
KEEP_STARTS = 40


def _keep_recent(
    starts: list[dict[str, Any]], keep_passes: int, keep_starts: int
) -> list[dict[str, Any]]:
    """The starts of the last ``keep_passes`` passes (``pass_labels``), at most ``keep_starts``
    of them, in their order."""
    labels = pass_labels(starts)
    recent = set(list(dict.fromkeys(labels))[-keep_passes:])
    return [st for st, lab in zip(starts, labels, strict=True) if lab in recent][-keep_starts:]


MAL_METRIC = "mean_acceptance_length"


MAL_FLOOR = 1.0  # a verify step always emits one token: MAL never falls below 1


def cannot_fail(metric: str, value: float, direction: str, tolerance: float = 0.0) -> str | None:
    """Why a stored value would make a gate that can never fail (None: it can fail). MAL
    cannot fall below 1.0, so a baseline within ``tolerance`` of 1.0 (a random head's 1.00-1.03
    against a 2 % tolerance) could never drop far enough to fail, not only one of exactly 1.0."""
    if direction == "higher" and value <= 0:
        return f"baseline {value:g} with direction higher: no measured value can fall below it"
    if metric == MAL_METRIC and direction == "higher":
        if value <= MAL_FLOOR + 1e-9:
            return (
                f"MAL {value:g}: the draft accepts nothing (a random head?), so 'accepts fewer "
                "tokens' can never be seen; use a draft that accepts tokens"
            )
        if value * (1 - tolerance) <= MAL_FLOOR + 1e-9:
            return (
                f"MAL {value:g} with tolerance {tolerance:.1%}: failing needs a MAL of "
                f"{value * (1 - tolerance):.4f} or less, and MAL never falls below "
                f"{MAL_FLOOR:g}; the draft accepts almost nothing (a random head?): use a draft "
                "that accepts tokens"
            )
    return None


def make_entry(
    key: ItemKey,
    figures: Mapping[str, Mapping[str, Any]],
    policies: Mapping[str, MetricPolicy],
    *,
    fingerprint: Mapping[str, Any],
    provenance: Mapping[str, Any],
    hardware_profile: str,
    previous: BaselineEntry | None = None,
    keep_starts: int = KEEP_STARTS,
    keep_passes: int = KEEP_PASSES,
) -> BaselineEntry:
    """A baseline entry from an item's figures ({metric: {value, starts, interval}}).

    Each metric keeps one value per engine start. When ``previous`` has the same fingerprint
    and engine version, its starts are kept and this run's appended (those of the last
    ``keep_passes`` passes stay, at most ``keep_starts``); otherwise the entry starts afresh.
    The stored value is the median of the kept starts. A value that would make a gate unable
    to fail is stored ``report_only`` with the reason. A quarantine on the previous entry is
    kept."""
    prov = dict(provenance)
    prov.setdefault("source", "measured")
    prov.setdefault("date", _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"))
    prov.setdefault("hardware_profile", hardware_profile)
    same = (
        previous is not None
        and previous.fingerprint_digest == fingerprint_digest(fingerprint)
        and previous.engine_version == prov.get("engine_version")
        and previous.provenance.get("source") == "measured"
    )
    stamp = {
        "host": prov.get("host"),
        "date": prov["date"],
        "engine_version": prov.get("engine_version"),
    }
    # which machine and CPU each start ran on, where the run knows (pass_labels, and the speed
    # verdict's other-CPU rule); older files' starts lack them
    stamp.update({k: prov[f] for k, f in _START_MACHINE.items() if prov.get(f)})
    metrics: dict[str, BaselineMetric] = {}
    for name, fig in figures.items():
        value = fig.get("value")
        if value is None or name not in policies:
            continue
        pol = policies[name]
        new_starts = [
            {"value": float(v), **stamp} for v in (fig.get("starts") or [value]) if v is not None
        ]
        kept: list[dict[str, Any]] = []
        if same and previous is not None and name in previous.metrics:
            old = previous.metrics[name]
            kept = list(old.starts or []) or [
                {"value": v, "host": None, "date": previous.provenance.get("date")}
                for v in old.start_values(previous.engine_starts)
            ]
        starts = _keep_recent(kept + new_starts, keep_passes, keep_starts)
        median = statistics.median(float(s["value"]) for s in starts)
        metrics[name] = BaselineMetric(
            value=float(median),
            direction=pol.direction,
            tolerance=pol.tolerance,
            hardware_profile=hardware_profile,
            starts=starts,
            # the run's own interval describes the value only when the entry is this run's
            # alone: after an append the median of all kept starts may lie outside it
            interval=list(fig["interval"]) if fig.get("interval") and not kept else None,
            report_only=cannot_fail(name, float(median), pol.direction, pol.tolerance),
        )
    if same and previous is not None:
        size = dict(prov.get("sample_size") or {})
        size["engine_starts_kept"] = max((len(m.starts or []) for m in metrics.values()), default=0)
        prov["sample_size"] = size
        prov["appended_to"] = previous.provenance.get("date")
    return BaselineEntry(
        key=key,
        metrics=metrics,
        provenance=prov,
        fingerprint=dict(fingerprint),
        known_issue=previous.known_issue if previous else None,
    )
