"""One item against its baseline entry: fingerprint, run checks, and per metric the gates that
decide whether a comparison is fair (length drift, delivery-bound latencies, too-short runs)
before the statistics decide it."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from specperf import stats
from specperf.baselines import BaselineEntry, cannot_fail, fingerprint_diff
from specperf.config import LENGTH_METRIC, KnownIssue, MetricPolicy
from specperf.verdict.checks import EPS, TOLERANCE_NOTE, Check, Status, compare, join
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


DEFAULT_MIN_BASELINE_DAYS = 2


def speed_baseline_short(
    summary: Mapping[str, Any], entry: BaselineEntry, metric: str, min_days: int | None = None
) -> str | None:
    """Why a hardware-bound metric's baseline cannot gate yet (None: it can). Starts made in one
    afternoon share that afternoon's host state: measured on the 2-core EPYC, the unchanged main
    job 3.5 hours after its baseline ran 21 % slower engine-wide (p 0.0015), a spread the
    baseline's starts had never shown. So a speed gate needs starts from ``min_days`` UTC days
    (the item's ``[workload] min_baseline_days``, default 2) and from at least
    ``stats.MIN_BASELINE_PASSES`` passes (runs): the verdict's unit is the pass, and fewer
    passes cannot show how much runs differ (stats module docstring); until then it reports. Starts
    without a date (older files), and a baseline measured in the same window as the run it
    judges (``provenance.same_window``: release watch's pinned run), are not judged by it."""
    if min_days is None:
        wl = summary.get("workload") or {}
        min_days = int(wl.get("min_baseline_days", DEFAULT_MIN_BASELINE_DAYS))
    bm = entry.metrics.get(metric)
    if (
        min_days <= 1
        or bm is None
        or len(bm.starts or []) < stats.MIN_BASELINE_STARTS  # too few for a spread: _decide says
        or entry.provenance.get("same_window")
    ):
        return None
    dates = [str(s.get("date") or "")[:10] for s in bm.starts]
    if not all(dates):
        return None
    days = sorted(set(dates))
    if len(days) < min_days:
        return (
            f"baseline starts from {len(days)} day(s) ({', '.join(days)}); a speed gate needs "
            f"starts from >= {min_days} days: append another day's with --update-baselines "
            "(or [workload] min_baseline_days)"
        )
    passes = len(set(bm.start_passes()))
    if passes < stats.MIN_BASELINE_PASSES:
        return (
            f"baseline starts from {passes} pass(es) (runs); a speed gate needs >= "
            f"{stats.MIN_BASELINE_PASSES} to know how much runs differ: append another run's "
            "with --update-baselines"
        )
    return None


def speed_baseline_other_cpu(
    summary: Mapping[str, Any], entry: BaselineEntry, metric: str
) -> str | None:
    """Why a hardware-bound metric's baseline cannot judge this machine's CPU (None: it can).
    Where the engine computes on the CPU (no GPU in the run's environment), a start's speed
    belongs to its CPU generation, and a VM's model name may not say which: two 2-core VMs
    named "AMD EPYC" (AVX-512) share the profile ``cpu-amd-epyc-avx512-2c``. So when the
    baseline's starts record their CPU (``cpu``: vendor, family, model, stepping) and none was
    this one, the speed is reported, not judged, until this CPU's starts are appended.
    Starts without the record (files made before it), and a ``specperf bench --url`` summary
    (its record is the client's machine, the server may be elsewhere) are not judged by it."""
    env = summary.get("environment") or {}
    here = env.get("cpu_signature")
    bm = entry.metrics.get(metric)
    if (
        env.get("gpus")
        or env.get("measured_from") == "client machine"
        or not here
        or bm is None
        or entry.provenance.get("same_window")
    ):
        return None
    seen = sorted({str(s["cpu"]) for s in bm.starts or [] if s.get("cpu")})
    if not seen or here in seen:
        return None
    return (
        f"baseline starts measured on CPU {'; '.join(seen)}, this host is {here}: one profile "
        "name, another CPU generation; give this CPU a profile of its own "
        "(--hardware-profile NAME) and adopt it with --update-baselines"
    )


def speed_baseline_unfit(
    summary: Mapping[str, Any], entry: BaselineEntry, metric: str
) -> str | None:
    """Why a hardware-bound metric's baseline cannot gate this run (None: it can): its starts
    span too few days or passes (``speed_baseline_short``), or none ran on this CPU
    (``speed_baseline_other_cpu``). Items and the engine-wide check both ask this."""
    return speed_baseline_short(summary, entry, metric) or speed_baseline_other_cpu(
        summary, entry, metric
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
        )
        if fig.get("interval"):
            c.interval = (float(fig["interval"][0]), float(fig["interval"][1]))
            c.interval_method = fig.get("interval_method")
        if bm is None:
            if measured is None:
                continue  # neither side has it (e.g. acceptance of a native run)
            c.status = "not_evaluated" if c.gated else "info"
            c.reason = "the baseline entry has no value for this metric"
            checks.append(c)
            continue
        c.baseline = bm.value
        if abs(bm.tolerance - pol.tolerance) > EPS:
            c.reason = (
                f"{TOLERANCE_NOTE} {pol.tolerance:.1%} used (the baseline file says "
                f"{bm.tolerance:.1%})"
            )
        never = bm.report_only or cannot_fail(metric, bm.value, bm.direction, pol.tolerance)
        if measured is None:
            c.reason = join(c.reason, "not measured in this run (the baseline has it)")
            if pol.gate == "never" or never:  # report-only metrics never fail
                c.status, c.gated = "info", False
                c.reason = join(c.reason, f"report only: {never or 'suite policy'}")
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
        if delivery and metric.startswith(LATENCY_PREFIXES):
            c.status, c.gated = "not_evaluated", False
            c.reason = f"delivery-bound: {delivery}"
            checks.append(c)
            continue
        if pol.length_dependent and length_note:
            c.status = "not_evaluated"
            c.reason = length_note
            checks.append(c)
            continue
        # A baseline too young (or from another CPU) to gate speed makes the metric report-only
        # whatever else holds (a fast machine's short item must not turn it into a gated,
        # unevaluated check: that skips the item and fails --strict-baselines for a gate that
        # was not on). Then the item's own length: a gated speed of a too-short item is not
        # evaluated.
        unfit = speed_baseline_unfit(result.summary, entry, metric) if pol.hardware_bound else None
        if unfit:
            c.status, c.gated = "not_evaluated", False
            c.reason = join(c.reason, unfit)
            if short:
                c.reason = join(c.reason, short)
            checks.append(_as_the_gate_compares(c, metric, entry, fig))
            continue
        if pol.hardware_bound and short:
            c.status = "not_evaluated"
            c.reason = short
            checks.append(_as_the_gate_compares(c, metric, entry, fig))
            continue
        _decide(c, metric, pol, entry, fig, measured, alpha, siblings)
        checks.append(quarantine(c, issues, key, today))
    return checks


def _as_the_gate_compares(
    c: Check, metric: str, entry: BaselineEntry, fig: Mapping[str, Any]
) -> Check:
    """Show a row that is not judged with the figures its gate would compare (``_decide``:
    the geometric mean of this run's starts against that of the baseline's), not the run's
    median against the stored value: a report-only row and the gated row it becomes once the
    baseline is armed then say the same change for the same data (session 28: an H100 row read
    -2.1 % report-only and -1.6 % gated). Rows whose baseline has too few starts for the
    statistics keep the point values."""
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
    """Set ``c``'s status from the per-start statistics (or a point comparison where the suite
    declares the metric deterministic and the baseline has fewer starts than a spread needs)."""
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
    if pol.gate == "always":
        regressed, c.delta = compare(
            measured, entry.metrics[metric].value, pol.direction, pol.tolerance
        )
        c.status = "fail" if regressed else "pass"
        c.reason = join(
            c.reason,
            f"point comparison with the tolerance: baseline has {len(base)} start(s) and the "
            'suite gates this metric "always"',
        )
        if (
            regressed
            and c.interval
            and _interval_crosses(
                c.interval, entry.metrics[metric].value, pol.direction, pol.tolerance
            )
        ):
            c.reason = join(c.reason, "borderline: the interval crosses the threshold")
        return
    c.status = "not_evaluated"
    c.reason = join(
        c.reason,
        f"baseline has {len(base)} engine start(s); >= {stats.MIN_BASELINE_STARTS} are needed "
        "to know its spread (re-make it with --update-baselines --repeat 5)",
    )


def _interval_crosses(iv: tuple[float, float], base: float, direction: str, tol: float) -> bool:
    if direction == "higher":
        return iv[1] > base * (1 - tol)
    if direction == "lower":
        return iv[0] < base * (1 + tol)
    return iv[0] < base * (1 + tol) and iv[1] > base * (1 - tol)
