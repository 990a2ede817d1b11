"""Checks → what pytest does with an item (pass, fail, xfail, skip) and the summary line."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from specperf.verdict.checks import Check


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
        fails = [c for c in fails if c.metric in ("engine", "failed_requests") or c.rule]
    if fails:
        return Outcome("fail", [c.line() for c in fails])
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


def summary_line(checks: Iterable[Check]) -> str:
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
