"""Checks as a plain-text table (``specperf verdict``, the pytest summary)."""

from __future__ import annotations

import math
from collections.abc import Iterable

from specperf.textfmt import number as fmt
from specperf.verdict.checks import Check

STATUS_ORDER = {
    "fail": 0,
    "xfail": 1,
    "stale": 2,
    "missing": 3,
    "not_evaluated": 4,
    "info": 5,
    "pass": 6,
}
TABLE_COLUMNS = ("key", "metric", "measured", "baseline", "delta", "verdict")


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
                c.status.upper().replace("_", " "),
            ]
        )
    return rows


def format_table(checks: Iterable[Check], *, include_pass: bool = True, width: int = 60) -> str:
    """The checks as a plain-text table (keys longer than ``width`` cut on the left), then the
    reasons of the rows that were not judged (``reason_lines``)."""
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
    why = reason_lines(checks)
    return table + ("\n\nwhy:\n" + "\n".join(why) if why else "")


# Rows whose verdict a reader cannot act on without its reason (a FAIL's goes to stderr).
EXPLAINED = ("not_evaluated", "stale", "missing", "xfail")


def reason_lines(checks: Iterable[Check]) -> list[str]:
    """One line per not-evaluated, stale, missing or quarantined check: its key, metric and
    reason (``specperf verdict`` and ``specperf merge`` print them under the table, so a row
    that was not judged always says why)."""
    return [
        f"  {c.status.upper().replace('_', ' ')} {c.key} {c.metric}: {' '.join(c.reason.split())}"
        for c in sorted(checks, key=lambda c: (STATUS_ORDER.get(c.status, 9), c.key, c.metric))
        if c.status in EXPLAINED and c.reason
    ]
