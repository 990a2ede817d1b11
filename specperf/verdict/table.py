"""Checks as a plain-text table (``specperf verdict``, the pytest summary)."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Iterable, Sequence

from specperf.textfmt import number as fmt
from specperf.textfmt import percent_change
from specperf.verdict.checks import Check, tolerance_differs

STATUS_ORDER = {
    "fail": 0,
    "xfail": 1,
    "stale": 2,
    "missing": 3,
    "not_evaluated": 4,
    "info": 5,
    "pass": 6,
}
TABLE_COLUMNS = ("key", "metric", "measured", "baseline", "delta", "sees", "verdict")
LEGEND_WIDTH = 100  # the legend under the plain-text table is wrapped to this many columns

SEES_LEGEND = (
    "sees: the change in the bad direction that check flags 9 times in 10 (its starts' spread, "
    "its level, its minimum effect); a PASS rules out a regression that large, not a smaller one"
)


def sees_cell(c: Check) -> str:
    """The change a statistical check flags 9 times in 10 (``Check.detectable``): "-22%", or
    "±2.0%" for direction "equal"; empty when the check made no statistical test."""
    d = c.detectable
    if d is None or d != d:
        return ""
    return percent_change(d, either_way=c.direction == "equal")


def sees_legend(rows: Sequence[Sequence[str]]) -> str | None:
    """``SEES_LEGEND`` when a row of ``table_rows`` has a "sees" cell, else None."""
    col = TABLE_COLUMNS.index("sees")
    return SEES_LEGEND if any(r[col] for r in rows) else None


def table_rows(checks: Iterable[Check], *, include_pass: bool = True) -> list[list[str]]:
    rows = []
    for c in sorted(checks, key=lambda c: (STATUS_ORDER.get(c.status, 9), c.key, c.metric)):
        if not include_pass and c.status == "pass":
            continue
        rows.append(
            [
                c.key,
                c.metric,
                fmt(c.measured),
                fmt(c.baseline),
                "" if c.delta is None or math.isinf(c.delta) else f"{c.delta:+.1%}",
                sees_cell(c),
                c.status.upper().replace("_", " "),
            ]
        )
    return rows


def format_table(checks: Iterable[Check], *, include_pass: bool = True, width: int = 60) -> str:
    """The checks as a plain-text table (keys longer than ``width`` cut on the left), the "sees"
    legend when a row has one, then the reasons of the rows that were not judged
    (``reason_lines``)."""
    from tabulate import tabulate

    checks = list(checks)

    rows = table_rows(checks, include_pass=include_pass)
    if not rows:
        return "(no checks)"
    rows = [[r[0] if len(r[0]) <= width else "…" + r[0][-(width - 1) :], *r[1:]] for r in rows]
    table = tabulate(
        rows,
        headers=list(TABLE_COLUMNS),
        tablefmt="simple",
        disable_numparse=True,  # cells are formatted text already: keep them as they are
        stralign="left",
    )
    legend = sees_legend(rows)
    if legend:
        table += "\n\n" + "\n".join(textwrap.wrap(legend, width=LEGEND_WIDTH))
    why = reason_lines(checks)
    return table + ("\n\nwhy:\n" + "\n".join(why) if why else "")


# Rows whose verdict a reader cannot act on without its reason (a FAIL's goes to stderr).
EXPLAINED = ("not_evaluated", "stale", "missing", "xfail")


def reason_lines(checks: Iterable[Check]) -> list[str]:
    """One line per not-evaluated, stale, missing or quarantined check, and per check judged
    with a tolerance other than the baseline file's: its key, metric and reason (``specperf
    verdict`` and ``specperf merge`` print them under the table, so a row that was not judged
    always says why)."""
    return [
        f"  {c.status.upper().replace('_', ' ')} {c.key} {c.metric}: {' '.join(c.reason.split())}"
        for c in sorted(checks, key=lambda c: (STATUS_ORDER.get(c.status, 9), c.key, c.metric))
        if c.reason and (c.status in EXPLAINED or tolerance_differs(c))
    ]
