"""Checks → what pytest does with an item (pass, fail, xfail, skip) and the summary line.

Green must mean something was judged: an item none of whose checks judged it (no armed
baseline gate and no same-run rule reached pass, fail or xfail) fails, unless it has no
baseline at all (a new profile or a new item: its "missing" line says how to adopt one) or the
run just wrote its baseline. The summary line counts the baseline gates that were armed and
every gate that switched itself off, with the profile they belong to.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from specperf.verdict.checks import Check

# Checks every item gets whatever its baseline: the engine stayed up, requests did not fail.
# They guard the measurement; they judge nothing about the engine's speed or acceptance.
RUN_CHECKS = ("engine", "failed_requests")
JUDGED = "judged"  # the metric of the check that fails an item judged by nothing


@dataclass
class Outcome:
    """What pytest does with an item: pass, fail, xfail or skip, and the lines to show."""

    status: Literal["pass", "fail", "xfail", "skip"]
    lines: list[str] = field(default_factory=list)


def gated_not_evaluated(checks: Iterable[Check]) -> list[Check]:
    """Gated checks that could not be judged (their reason says why)."""
    return [c for c in checks if c.status == "not_evaluated" and c.gated]


def outcome(
    checks: Sequence[Check],
    *,
    strict: bool = False,
    updated: bool = False,
    update_command: str = "",
) -> Outcome:
    """Fold checks into one outcome. A failure fails. Missing/stale baselines and gated checks
    that could not be evaluated are NOT a pass: the item is skipped with one line each saying
    why (``strict``: it fails), with the command that adopts a baseline. ``updated``: the
    baseline was just rewritten from this run, so only baseline-independent failures (requests,
    engine, same-run rules) still fail."""
    fails = [c for c in checks if c.status == "fail"]
    if updated:
        fails = [c for c in fails if c.metric in RUN_CHECKS or c.rule]
    if fails:
        return Outcome("fail", [c.line() for c in fails])
    nothing = None if updated else judged_by_nothing(checks)
    if nothing:
        return Outcome("fail", [nothing])
    nob = [c for c in checks if c.status in ("missing", "stale")] if not updated else []
    unjudged = [c for c in gated_not_evaluated(checks) if not (updated and not c.rule)]
    if nob or unjudged:
        lines = [c.line() for c in nob + unjudged]
        if nob and update_command:
            lines.append(f"adopt a baseline with: {update_command}")
        return Outcome("fail" if strict else "skip", ["NOT EVALUATED: " + lines[0], *lines[1:]])
    xf = [c for c in checks if c.status == "xfail"]
    if xf:
        return Outcome("xfail", [c.line() for c in xf])
    # only report-only checks remain unjudged here: show why they were not judged
    return Outcome("pass", [c.line() for c in checks if c.status == "not_evaluated"])


def judged_by_nothing(checks: Sequence[Check]) -> str | None:
    """Why one item's checks judged nothing (None: an armed baseline gate or a same-run rule
    reached pass, fail or xfail, or the item has no baseline at all: ``missing``; an item
    with a failing check fails for that already)."""
    if any(c.status == "fail" for c in checks):
        return None
    if any(
        c.status in ("pass", "fail", "xfail")
        and c.gated
        and c.metric not in RUN_CHECKS
        and c.metric not in ("baseline", JUDGED)
        for c in checks
    ):
        return None
    if any(c.status == "missing" for c in checks):
        return None
    why = [c for c in checks if c.status == "stale"]
    why = why or [c for c in checks if c.status == "not_evaluated" and c.reason]
    first = f"{why[0].metric}: {' '.join(why[0].reason.split())}" if why else "no checks"
    more = f" (and {len(why) - 1} more)" if len(why) > 1 else ""
    return (
        "judged by nothing: no armed baseline gate and no same-run rule judged this item; "
        f"{first}{more}"
    )


def unjudged_items(checks: Sequence[Check], keys: Iterable[str]) -> list[Check]:
    """One failing check per item of ``keys`` whose checks (``Check.key``) judged nothing
    (``judged_by_nothing``): what a whole run's verdict adds so that it fails as the items'
    own outcomes did."""
    by_key: dict[str, list[Check]] = {}
    for c in checks:
        by_key.setdefault(c.key, []).append(c)
    out = []
    for k in keys:
        mine = by_key.get(k, [])
        why = judged_by_nothing(mine) if mine else None
        if why:
            item = next((c.item for c in mine if c.item), None)
            out.append(Check(k, JUDGED, "fail", reason=why, item=item))
    return out


def summary_counts(checks: Iterable[Check]) -> dict[str, int]:
    """Counts for the summary line: not-evaluated split into gated and report-only."""
    counts: dict[str, int] = {}
    for c in checks:
        name = c.status
        if c.status == "not_evaluated":
            name = "not_evaluated" if c.gated else "not_evaluated_report_only"
        elif c.status == "info":
            name = "report_only"
        counts[name] = counts.get(name, 0) + 1
    return counts


def gate_summary(checks: Iterable[Check], profile: str | None = None) -> dict[str, Any]:
    """The baseline gates of a run: ``armed`` of ``baseline_gates`` (checks of a metric the
    suite gates against a baseline entry; armed: still gated, i.e. not report-only for too
    little evidence, a young or foreign baseline, or a missing one), the hardware ``profile``
    they belong to, and every gate that ``switched_off`` in this run with its reason."""
    checks = list(checks)
    gates = [c for c in checks if c.baseline_gate]
    return {
        "armed": sum(1 for c in gates if c.gated),
        "baseline_gates": len(gates),
        "profile": profile,
        "switched_off": [
            {"key": c.key, "metric": c.metric, "kind": c.switched_off, "reason": c.reason}
            for c in checks
            if c.switched_off
        ],
    }


def gates_line(checks: Iterable[Check], profile: str | None = None) -> str:
    """``baseline gates armed: N of M (profile P)``, then the gates that switched themselves
    off by kind."""
    g = gate_summary(checks, profile)
    line = f"baseline gates armed: {g['armed']} of {g['baseline_gates']}"
    line += f" (profile {profile or 'unknown'})"
    off: dict[str, int] = {}
    for row in g["switched_off"]:
        off[row["kind"]] = off.get(row["kind"], 0) + 1
    if off:
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(off.items()))
        line += f"; gates switched off: {len(g['switched_off'])} ({kinds})"
    return line


def summary_line(checks: Iterable[Check], profile: str | None = None) -> str:
    """``counts_line``, then ``gates_line``."""
    checks = list(checks)
    return counts_line(checks) + "; " + gates_line(checks, profile)


def counts_line(checks: Iterable[Check]) -> str:
    """``12 pass, 1 fail, 3 not evaluated (gated), 20 report only, ...`` in a fixed order."""
    counts = summary_counts(checks)
    order = (
        "fail",
        "pass",
        "xfail",
        "stale",
        "missing",
        "not_evaluated",
        "not_evaluated_report_only",
        "report_only",
    )
    names = {
        "not_evaluated": "not evaluated (gated)",
        "not_evaluated_report_only": "not evaluated (report-only)",
        "report_only": "report only",
    }
    parts = [f"{counts[k]} {names.get(k, k)}" for k in order if counts.get(k)]
    return ", ".join(parts) or "no checks"
