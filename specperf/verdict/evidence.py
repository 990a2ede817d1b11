"""How much evidence a baseline gate needs: ONE rule, asked by every item check and by the
engine-wide check, for every metric of every baseline file.

A stored metric gates (is "armed") when

1. its entry was measured on this profile (``provenance.source`` "measured"): figures copied
   from notes (``seed-note``) are reference rows, shown beside the measured value and never
   judged (``reference_only``);
2. it holds at least ``decision.MIN_BASELINE_STARTS`` engine starts: fewer cannot say how much
   starts differ, so no test can tell a change from noise;
3. for a metric the host can move (``hardware_bound``: speeds, latencies) also: its starts
   span at least ``[workload] min_baseline_days`` (default 2) windows that are at least
   ``baselines.INDEPENDENT_AFTER_H`` hours apart, and at least ``variance.MIN_BASELINE_PASSES``
   passes (``baselines.pass_labels``), and at least one ran on this CPU where the engine
   computes on the CPU.

A metric that is not armed is reported, never gated, and its row says why and how to arm it.
Less evidence never makes a gate harder: there is no point comparison in place of the test.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from specperf.baselines import INDEPENDENT_AFTER_H, BaselineEntry, independent_windows
from specperf.config import MetricPolicy
from specperf.verdict.decision import MIN_BASELINE_STARTS
from specperf.verdict.variance import MIN_BASELINE_PASSES

DEFAULT_MIN_BASELINE_DAYS = 2
ARM_STARTS = "--update-baselines --repeat 3 --restart-between-repeats"


def reference_only(entry: BaselineEntry) -> str | None:
    """Why ``entry`` holds reference figures only (None: it was measured on this profile)."""
    source = entry.provenance.get("source")
    if source == "measured":
        return None
    how = entry.provenance.get("how_measured")
    return (
        f"reference figures (source {source}{': ' + str(how) if how else ''}), shown beside "
        "the measured values and never judged; adopt this profile's own starts with "
        "--update-baselines"
    )


def too_few_starts(entry: BaselineEntry, metric: str) -> str | None:
    """Why ``metric``'s baseline has too few engine starts to gate (None: enough)."""
    n = len(entry.start_values(metric))
    if n >= MIN_BASELINE_STARTS:
        return None
    return (
        f"report only: the baseline has {n} engine start(s); a gate needs >= "
        f"{MIN_BASELINE_STARTS} to know its spread; arm it with {ARM_STARTS}"
    )


def speed_baseline_short(
    summary: Mapping[str, Any], entry: BaselineEntry, metric: str, min_days: int | None = None
) -> str | None:
    """Why a hardware-bound metric's baseline cannot gate yet (None: it can). Starts made in one
    window share that window's host state, so a speed gate needs starts from ``min_days``
    windows at least ``INDEPENDENT_AFTER_H`` hours apart (the item's ``[workload]
    min_baseline_days``) and from at least ``variance.MIN_BASELINE_PASSES`` passes
    (``baselines.pass_labels``: machine and window), the verdict's unit (``variance`` module
    docstring). Starts without a time (older files), and a baseline measured in the same window
    as the run it judges (``provenance.same_window``: release watch's pinned run), are not
    held back by it."""
    if min_days is None:
        wl = summary.get("workload") or {}
        min_days = int(wl.get("min_baseline_days", DEFAULT_MIN_BASELINE_DAYS))
    bm = entry.metrics.get(metric)
    if min_days <= 1 or bm is None or not bm.starts or entry.provenance.get("same_window"):
        return None
    windows = independent_windows(bm.starts)
    if windows is None:
        return None
    if len(windows) < min_days:
        return (
            f"baseline starts from {len(windows)} window(s) {INDEPENDENT_AFTER_H:g} h apart "
            f"(from {', '.join(windows)}); a speed gate needs starts from >= {min_days}: "
            "append another day's with --update-baselines (or [workload] min_baseline_days)"
        )
    passes = len(set(bm.start_passes()))
    if passes < MIN_BASELINE_PASSES:
        return (
            f"baseline starts from {passes} pass(es) (a machine's starts less than "
            f"{INDEPENDENT_AFTER_H:g} h apart are one); a speed gate needs >= "
            f"{MIN_BASELINE_PASSES} to know how much runs differ: append another run's "
            "with --update-baselines"
        )
    return None


def speed_baseline_other_cpu(
    summary: Mapping[str, Any], entry: BaselineEntry, metric: str
) -> str | None:
    """Why a hardware-bound metric's baseline cannot judge this machine's CPU (None: it can).
    Where the engine computes on the CPU (no GPU in the run's environment), a start's speed
    belongs to its CPU generation, and a VM's model name may not say which. So when the
    baseline's starts record their CPU (``cpu``: vendor, family, model, stepping) and none was
    this one, the speed is reported, not judged, until this CPU's starts are appended. Starts
    without the record, and a ``specperf bench --url`` summary (its record is the client's
    machine), are not held back by it."""
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
    """Rule 3 of the module docstring: why a hardware-bound metric's baseline cannot gate this
    run (None: it can)."""
    return speed_baseline_short(summary, entry, metric) or speed_baseline_other_cpu(
        summary, entry, metric
    )


def unarmed(
    summary: Mapping[str, Any], entry: BaselineEntry, metric: str, policy: MetricPolicy
) -> str | None:
    """Why ``metric``'s baseline in ``entry`` cannot gate this run (report only, with how to
    arm it), or None when it is armed: the module docstring's rule, the same for every metric,
    item and engine-wide check."""
    return (
        reference_only(entry)
        or too_few_starts(entry, metric)
        or (speed_baseline_unfit(summary, entry, metric) if policy.hardware_bound else None)
    )


__all__ = [
    "ARM_STARTS",
    "DEFAULT_MIN_BASELINE_DAYS",
    "reference_only",
    "speed_baseline_other_cpu",
    "speed_baseline_short",
    "speed_baseline_unfit",
    "too_few_starts",
    "unarmed",
]
