"""Comparison sections: a run against a baseline, recorded verdicts, rules or another run."""

from __future__ import annotations

from specperf.report.compare import Comparison, checks_frame, visible
from specperf.report.sections.parts import Section
from specperf.verdict import STATUS_ORDER


def comparison(cmp: Comparison, reference: str = "baseline") -> Section:
    """One comparison (baseline, recorded verdicts, rules, another run), regressions first."""
    s = Section(
        "comparison-" + _slug(cmp.id),
        cmp.title,
        f"Reference: {cmp.reference}. Statuses, deltas and tolerances are the verdict "
        "module's (specperf.verdict); regressions first, worst first.",
    )
    counts = cmp.counts()
    if counts:
        order = sorted(counts, key=lambda k: STATUS_ORDER.get(k, 9))
        s.note(" · ".join(f"{counts[k]} {k.replace('_', ' ')}" for k in order))
    regs = cmp.regressions
    if regs:
        s.note(
            "Regressions: "
            + "; ".join(c.line() for c in regs[:5])
            + (" …" if len(regs) > 5 else ""),
            "warning",
        )
    s.table(
        "Checks that need attention",
        checks_frame(visible(cmp.checks), reference),
        missing="every check passed"
        if cmp.checks
        else "nothing could be compared: " + ("; ".join(cmp.notes) or "no checks"),
        drop_constant=(),
    )
    for n in cmp.notes:
        s.note(n)
    if cmp.side_by_side is not None and not cmp.side_by_side.empty:
        s.table("Side by side", cmp.side_by_side, missing="", drop_constant=())
    return s


def no_comparison(reason: str) -> Section:
    s = Section("comparison", "Comparison with baseline")
    s.empty = reason
    return s


def _slug(text: str) -> str:
    out = "".join(ch if ch.isalnum() else "-" for ch in text.lower()).strip("-")
    return "-".join(filter(None, out.split("-")))[:60] or "run"
