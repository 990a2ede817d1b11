"""One item against its baseline entry: fingerprint, run checks, and per metric the gates that
decide whether a comparison is fair (the evidence rule of ``evidence``, length drift,
delivery-bound latencies, too-short runs: ``conditions``) before the statistics decide it
(``gate_decision``)."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable, Mapping, Sequence

from specperf.baselines import BaselineEntry, cannot_fail, fingerprint_diff
from specperf.config import LENGTH_METRIC, KnownIssue, MetricPolicy
from specperf.verdict.checks import EPS, TOLERANCE_NOTE, Check, compare, join
from specperf.verdict.conditions import (
    LATENCY_PREFIXES,
    delivery_bound,
    other_profile,
    run_checks,
    too_short,
)
from specperf.verdict.decision import DEFAULT_RUN_ALPHA
from specperf.verdict.evidence import reference_only, unarmed
from specperf.verdict.gate_decision import as_the_gate_compares, decide_check
from specperf.verdict.quarantine import quarantine
from specperf.verdict.report_rows import figures_only, foreign_entry, reference_rows
from specperf.verdict.results import ItemResult


def evaluate_item(
    result: ItemResult,
    entry: BaselineEntry | None,
    policies: Mapping[str, MetricPolicy],
    *,
    hardware_profile: str | None = None,
    known_issues: Iterable[KnownIssue] = (),
    max_failed_fraction: float = 0.0,
    today: _dt.date | None = None,
    alpha: float = DEFAULT_RUN_ALPHA,
    missing_reason: str | None = None,
    min_duration_s: float | None = None,
    siblings: Sequence[BaselineEntry] = (),
) -> list[Check]:
    """Every check of one item against its baseline entry (None: missing). ``alpha`` is the
    per-check level of the statistical decisions; ``siblings`` are the baseline entries of the
    same engine config (``config_siblings``), whose starts pool into the start-to-start
    spread; ``missing_reason`` says why no entry exists
    (e.g. no baseline file for this hardware profile); speeds of an item that lasted less than
    ``min_duration_s`` (default: the item's own workload setting, else 5 s) are not judged."""
    key = result.key
    ks = key.as_str()
    profile = result.hardware_profile or hardware_profile  # where this item was measured
    checks = run_checks(result, max_failed_fraction)
    if entry is None:
        checks.append(
            Check(
                ks,
                "baseline",
                "missing",
                item=result.item_id,
                engine_version=result.engine_version,
                reason=missing_reason or f"no baseline entry for this key (profile {profile})",
            )
        )
        return checks + figures_only(result, policies)
    reference = reference_only(entry)
    if reference:
        checks.append(
            Check(
                ks,
                "baseline",
                "missing",
                item=result.item_id,
                engine_version=result.engine_version,
                baseline_engine_version=entry.engine_version,
                reason=f"no measured baseline for this key; {reference}",
            )
        )
        return checks + reference_rows(result, entry, policies, reference)
    diffs = fingerprint_diff(entry.fingerprint, result.fingerprint)
    if diffs:
        shown = "; ".join(diffs[:4]) + (f"; and {len(diffs) - 4} more" if len(diffs) > 4 else "")
        checks.append(
            Check(
                ks,
                "baseline",
                "stale",
                item=result.item_id,
                engine_version=result.engine_version,
                baseline_engine_version=entry.engine_version,
                reason=f"fingerprint differs ({shown}); not compared",
            )
        )
        return checks + figures_only(result, policies)

    issues = list(known_issues)
    if entry.known_issue:
        issues.insert(0, entry.known_issue)
    figures = result.figures
    length_note: str | None = None
    delivery = delivery_bound(result.summary)
    short = too_short(result.summary, min_duration_s)
    ordered = sorted(policies, key=lambda m: m != LENGTH_METRIC)  # length first
    for metric in ordered:
        pol = policies[metric]
        bm = entry.metrics.get(metric)
        measured = result.value(metric)
        fig = figures.get(metric, {})
        c = Check(
            ks,
            metric,
            "pass",
            measured=measured,
            direction=pol.direction,
            tolerance=pol.tolerance,
            item=result.item_id,
            engine_version=result.engine_version,
            baseline_engine_version=entry.engine_version,
            gated=pol.gate != "never",
            baseline_gate=pol.gate != "never",
        )
        if fig.get("interval"):
            c.interval = (float(fig["interval"][0]), float(fig["interval"][1]))
            c.interval_method = fig.get("interval_method")
        if bm is None:
            if measured is None:
                continue  # neither side has it (e.g. acceptance of a native run)
            c.status, c.gated = "info", False
            c.reason = "the baseline entry has no value for this metric" + (
                "; report only: arm it with --update-baselines" if c.baseline_gate else ""
            )
            checks.append(c)
            continue
        c.baseline = bm.value
        if abs(bm.tolerance - pol.tolerance) > EPS:
            c.reason = (
                f"{TOLERANCE_NOTE} {pol.tolerance:.1%} used (the baseline file says "
                f"{bm.tolerance:.1%})"
            )
        never = bm.report_only or cannot_fail(metric, bm.value, bm.direction, pol.tolerance)
        # the evidence rule (specperf.verdict.evidence): too little evidence reports, never
        # gates harder
        armed_by_policy = pol.gate != "never" and not never
        unfit = unarmed(result.summary, entry, metric, pol) if armed_by_policy else None
        if measured is None:
            c.reason = join(c.reason, "not measured in this run (the baseline has it)")
            if pol.gate == "never" or never or unfit:  # report-only metrics never fail
                c.status, c.gated = "info", False
                c.reason = join(c.reason, unfit or f"report only: {never or 'suite policy'}")
            elif other_profile(bm.hardware_profile, profile):
                c.status = "not_evaluated"
                c.reason = join(
                    c.reason, f"baseline measured on {bm.hardware_profile}, this is {profile}"
                )
            else:
                c.status = "fail"
                c = quarantine(c, issues, key, today)
            checks.append(c)
            continue
        drifted, c.delta = compare(measured, bm.value, bm.direction, pol.tolerance)
        if metric == LENGTH_METRIC and drifted:  # gated or not, it blocks speed comparisons
            length_note = (
                f"output length drifted {c.delta:+.1%} from the baseline "
                f"(tolerance {pol.tolerance:.0%}); throughput not compared"
            )
        if pol.gate == "never":
            c.status = "info"
            c.reason = join(c.reason, "report only (suite policy)")
            checks.append(c)
            continue
        if never:
            c.status, c.gated = "info", False
            c.reason = join(c.reason, f"report only: {never}")
            checks.append(c)
            continue
        if other_profile(bm.hardware_profile, profile):
            c.status = "not_evaluated"
            c.reason = f"baseline measured on {bm.hardware_profile}, this is {profile}"
            checks.append(as_the_gate_compares(c, metric, entry, fig))
            continue
        # A baseline without the evidence a gate needs makes the metric report-only whatever
        # else holds (a fast machine's short item must not turn it into a gated, unevaluated
        # check: that skips the item and fails --strict-baselines for a gate that was not on).
        if unfit:
            c.status, c.gated = "not_evaluated", False
            c.reason = join(c.reason, unfit)
            if short and pol.hardware_bound:
                c.reason = join(c.reason, short)
            checks.append(as_the_gate_compares(c, metric, entry, fig))
            continue
        if delivery and metric.startswith(LATENCY_PREFIXES):
            c.status, c.gated = "not_evaluated", False
            c.reason = f"delivery-bound: {delivery}"
            c.switched_off = "delivery-bound latency"
            checks.append(c)
            continue
        if pol.length_dependent and length_note:
            c.status = "not_evaluated"
            c.reason = length_note
            checks.append(c)
            continue
        # the item's own length: a gated speed of a too-short item is not evaluated
        if pol.hardware_bound and short:
            c.status = "not_evaluated"
            c.reason = short
            checks.append(as_the_gate_compares(c, metric, entry, fig))
            continue
        decide_check(c, metric, pol, entry, fig, measured, alpha, siblings)
        checks.append(quarantine(c, issues, key, today))
    return checks + foreign_entry(result, entry, checks, profile)
