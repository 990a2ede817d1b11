"""The rows an item shows where nothing is compared statistically: reference figures copied
from notes, the figures of an item without a comparable baseline, and the "missing" row of an
entry measured only on other profiles."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from specperf.baselines import BaselineEntry
from specperf.config import MetricPolicy
from specperf.verdict.checks import Check
from specperf.verdict.conditions import other_profile
from specperf.verdict.results import ItemResult


def foreign_entry(
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
