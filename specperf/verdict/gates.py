"""One item against its baseline entry: fingerprint, run checks, and per metric the gates that
decide whether a comparison is fair (the evidence rule of ``evidence``, length drift,
delivery-bound latencies, too-short runs) before the statistics decide it."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from specperf import stats
from specperf.baselines import BaselineEntry, cannot_fail, fingerprint_diff
from specperf.config import LENGTH_METRIC, KnownIssue, MetricPolicy
from specperf.verdict.checks import EPS, TOLERANCE_NOTE, Check, Status, compare, join
from specperf.verdict.evidence import reference_only, unarmed
from specperf.verdict.quarantine import quarantine
from specperf.verdict.results import ItemResult, figure
from specperf.verdict.spread import config_pass_spread, config_spread


def run_checks(result: ItemResult, max_failed_fraction: float = 0.0) -> list[Check]:
    """Checks that need no baseline: the engine stayed up, requests did not fail."""
    s = result.summary
    key = result.key.as_str()
    out: list[Check] = []
    completed = int(s.get("completed") or 0)
    failed = int(s.get("failed") or 0)
    total = completed + failed
    if s.get("engine_died"):
        out.append(
            Check(
                key,
                "engine",
                "fail",
                reason="the engine died during the item",
                item=result.item_id,
                engine_version=result.engine_version,
            )
        )
    allowed = max_failed_fraction * total
    status: Status = "fail" if failed > allowed + EPS or total == 0 else "pass"
    errors = s.get("errors") or s.get("first_errors") or []
    reason = f"{failed} of {total} requests failed (allowed {max_failed_fraction:.0%})"
    if errors:
        reason += f"; first error: {str(errors[0])[:200]}"
    out.append(
        Check(
            key,
            "failed_requests",
            status,
            measured=float(failed),
            baseline=float(allowed),
            reason=reason if status == "fail" else "",
            item=result.item_id,
            engine_version=result.engine_version,
        )
    )
    return out


LATENCY_PREFIXES = ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms")
DEFAULT_MIN_DURATION_S = 5.0


def too_short(summary: Mapping[str, Any], min_duration_s: float | None = None) -> str | None:
    """Why the item's speed says nothing (None: long enough). A run of half a second is mostly
    ramp-up and tail: one late wake-up moves it by tens of per cent. The shortest repeat
    counts."""
    if min_duration_s is None:
        wl = summary.get("workload") or {}
        min_duration_s = float(wl.get("min_duration_s", DEFAULT_MIN_DURATION_S))
    if min_duration_s <= 0:
        return None
    # an item summary lists its starts; a start's own summary (all a run cut before the item's
    # end leaves on disk) holds the planned repeat count there instead
    repeats = summary.get("repeats")
    durations = [figure(r, "duration_s") for r in repeats] if isinstance(repeats, list) else []
    durations = [d for d in durations if d is not None] or [figure(summary, "duration_s")]
    shortest = min((d for d in durations if d is not None), default=None)
    if shortest is None or shortest >= min_duration_s:
        return None
    size = summary.get("sizing") or {}
    n = size.get("requests")
    if size.get("source") == "baseline":
        fix = (
            f"its {n} requests are its baseline entry's: remove the entry and run "
            "--update-baselines=missing to size it on this machine"
        )
    elif size.get("source") == "measured":
        fix = f"already sized to {n} requests (the most allowed); raise its requests"
    else:
        fix = "raise its requests (or [workload] min_duration_s)"
    return (
        f"the item lasted {shortest:.2f} s < {min_duration_s:g} s: too short to time on this "
        f"machine; {fix}"
    )


def other_profile(baseline_profile: str | None, profile: str | None) -> bool:
    """True where a baseline value was measured on another hardware profile than the item:
    every metric a machine can move (speed, latency, acceptance, lengths) is compared only
    with its own profile's values. Unknown on either side (older files) is not a mismatch."""
    return bool(baseline_profile and profile and baseline_profile != profile)


def delivery_bound(summary: Mapping[str, Any]) -> str | None:
    """Why the item's latencies describe the delivery of the stream, not the engine (None: they
    describe the engine). Set by the client when chunks arrived in bursts."""
    d = summary.get("delivery")
    if isinstance(d, Mapping) and d.get("bound"):
        return str(d.get("reason") or "chunks arrived in bursts")
    return None


def evaluate_item(
    result: ItemResult,
    entry: BaselineEntry | None,
    policies: Mapping[str, MetricPolicy],
    *,
    hardware_profile: str | None = None,
    known_issues: Iterable[KnownIssue] = (),
    max_failed_fraction: float = 0.0,
    today: _dt.date | None = None,
    alpha: float = stats.DEFAULT_RUN_ALPHA,
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
            checks.append(_as_the_gate_compares(c, metric, entry, fig))
            continue
        # A baseline without the evidence a gate needs makes the metric report-only whatever
        # else holds (a fast machine's short item must not turn it into a gated, unevaluated
        # check: that skips the item and fails --strict-baselines for a gate that was not on).
        if unfit:
            c.status, c.gated = "not_evaluated", False
            c.reason = join(c.reason, unfit)
            if short and pol.hardware_bound:
                c.reason = join(c.reason, short)
            checks.append(_as_the_gate_compares(c, metric, entry, fig))
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
            checks.append(_as_the_gate_compares(c, metric, entry, fig))
            continue
        _decide(c, metric, pol, entry, fig, measured, alpha, siblings)
        checks.append(quarantine(c, issues, key, today))
    return checks + _foreign_entry(result, entry, checks, profile)


def _foreign_entry(
    result: ItemResult, entry: BaselineEntry, checks: Sequence[Check], profile: str | None
) -> list[Check]:
    """A "missing" row when every stored value the item was compared with was measured on
    another profile (a file of another machine given explicitly): for this profile there is no
    baseline, as on a new machine, and the row says so."""
    foreign = {
        bm.hardware_profile
        for c in checks
        if c.baseline_gate and (bm := entry.metrics.get(c.metric)) is not None
        if other_profile(bm.hardware_profile, profile)
    }
    here = [
        c
        for c in checks
        if c.baseline_gate
        and (bm := entry.metrics.get(c.metric)) is not None
        and not other_profile(bm.hardware_profile, profile)
    ]
    if not foreign or here:
        return []
    return [
        Check(
            result.key.as_str(),
            "baseline",
            "missing",
            item=result.item_id,
            engine_version=result.engine_version,
            baseline_engine_version=entry.engine_version,
            reason=f"no baseline of profile {profile} for this key: the entry's values were "
            f"measured on {', '.join(sorted(str(p) for p in foreign))}",
        )
    ]


def reference_rows(
    result: ItemResult,
    entry: BaselineEntry,
    policies: Mapping[str, MetricPolicy],
    why: str,
) -> list[Check]:
    """Reference figures (``evidence.reference_only``) beside what the item measured: one
    not-evaluated, report-only row per metric of the entry (its value in the baseline column,
    its reason "reference row: ..."), then the item's other figures (``figures_only``). Never
    judged."""
    rows = []
    for metric, bm in sorted(entry.metrics.items()):
        measured = result.value(metric)
        delta = None if measured is None or not bm.value else measured / bm.value - 1
        rows.append(
            Check(
                result.key.as_str(),
                metric,
                "not_evaluated",  # shown with its reason wherever unjudged rows are
                measured=measured,
                baseline=bm.value,
                delta=delta,
                direction=bm.direction,
                tolerance=bm.tolerance,
                item=result.item_id,
                engine_version=result.engine_version,
                baseline_engine_version=entry.engine_version,
                reason=f"reference row: {why}",
                gated=False,
                baseline_gate=metric in policies and policies[metric].gate != "never",
            )
        )
    shown = set(entry.metrics)
    return rows + [c for c in figures_only(result, policies) if c.metric not in shown]


def _as_the_gate_compares(
    c: Check, metric: str, entry: BaselineEntry, fig: Mapping[str, Any]
) -> Check:
    """Show a row that is not judged with the figures its gate would compare (``_decide``:
    the geometric mean of this run's starts against that of the baseline's), not the run's
    median against the stored value: a report-only row and the gated row it becomes once the
    baseline is armed then say the same change for the same data. Rows whose baseline has too
    few starts for the statistics keep the point values."""
    base = entry.start_values(metric)
    current = [float(v) for v in (fig.get("starts") or []) if v is not None]
    if len(base) < stats.MIN_BASELINE_STARTS or not current:
        return c
    geo_base, geo_now = stats.geometric_mean(base), stats.geometric_mean(current)
    if geo_base is None or geo_now is None:
        return c
    c.measured, c.baseline, c.delta = geo_now, geo_base, geo_now / geo_base - 1
    if len(current) > 1:  # the figure's own interval was described around its median
        c.interval = (min(current), max(current))
        c.interval_method = f"min–max of {len(current)} starts; value is their geometric mean"
    return c


def figures_only(result: ItemResult, policies: Mapping[str, MetricPolicy]) -> list[Check]:
    """Every figure of an item that has nothing to be compared with, as report-only rows: a
    machine without baselines still sees what it measured (and what --update-baselines would
    store) in the table. No reason of their own: the item's baseline row above says why."""
    rows = []
    for metric, pol in policies.items():
        measured = result.value(metric)
        if measured is None:
            continue
        rows.append(
            Check(
                result.key.as_str(),
                metric,
                "info",
                measured=measured,
                direction=pol.direction,
                tolerance=pol.tolerance,
                item=result.item_id,
                engine_version=result.engine_version,
                gated=False,
                baseline_gate=pol.gate != "never",
            )
        )
    return rows


def _decide(
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
    if len(base) >= stats.MIN_BASELINE_STARTS:
        d = stats.decide(
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
        geo = stats.geometric_mean(base) or 0.0
        c.baseline = geo
        if len(current) > 1:  # the figure compared is the geometric mean of this run's starts
            c.measured = stats.geometric_mean(current)
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
