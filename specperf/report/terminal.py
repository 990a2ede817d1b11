"""End-of-session output for the pytest plugin: a compact verdict table for the terminal and
a markdown summary for ``$GITHUB_STEP_SUMMARY``.

The plugin calls :func:`session_summary` (or the two pieces) with the checks it evaluated;
without checks, the verdicts the suite recorded in ``verdicts.jsonl`` are used.
"""

from __future__ import annotations

import os
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import pandas as pd

from specperf import verdict
from specperf.errors import SpecperfError
from specperf.report.compare import ordered, visible
from specperf.report.load import read_jsonl
from specperf.textfmt import number

STEP_SUMMARY_ENV = "GITHUB_STEP_SUMMARY"
MAX_ROWS = 40
TABLE_WIDTH = 100  # the end-of-session table fits a 100-column terminal
REASON_LINES = 3  # a reason longer than this many wrapped lines ends with "…"


def recorded_checks(results_dir: Path | str) -> list[verdict.Check]:
    """Checks the suite appended to ``<results>/verdicts.jsonl`` (empty when absent)."""
    f = Path(results_dir) / verdict.VERDICTS
    return [verdict.Check.from_json(r) for r in read_jsonl(f)] if f.is_file() else []


def _counts(checks: Sequence[verdict.Check]) -> str:
    counts: dict[str, int] = {}
    for c in checks:
        counts[c.status] = counts.get(c.status, 0) + 1
    order = sorted(counts, key=lambda s: verdict.STATUS_ORDER.get(s, 9))
    return ", ".join(f"{counts[s]} {s.replace('_', ' ')}" for s in order) or "no checks"


def summary_table(
    results_dir: Path | str,
    checks: Sequence[verdict.Check] | None = None,
    *,
    report_paths: Sequence[Path | str] = (),
    include_pass: bool = False,
) -> str:
    """Compact text: key, metric, measured, baseline, delta, sees, verdict (the verdict module's
    table, regressions first, with its "sees" legend), the status counts and where the report
    is."""
    checks = list(checks) if checks is not None else recorded_checks(results_dir)
    shown = ordered(checks if include_pass else visible(checks))
    lines = ["specperf verdict: " + _counts(checks)]
    if shown:
        lines.append(verdict.format_table(shown[:MAX_ROWS], include_pass=include_pass))
        if len(shown) > MAX_ROWS:
            lines.append(
                f"… {len(shown) - MAX_ROWS} more in {Path(results_dir) / verdict.VERDICTS}"
            )
    lines += [f"report: {p}" for p in report_paths]
    return "\n".join(lines)


def step_summary_markdown(
    results_dir: Path | str,
    checks: Sequence[verdict.Check] | None = None,
    *,
    report_paths: Sequence[Path | str] = (),
) -> str:
    """The markdown appended to the GitHub job summary: counts, the checks that need
    attention (regressions first; the verdict module's columns, with the "sees" legend under
    the table when a row has one) and the headline speedups."""
    from specperf.report.fmt import display
    from specperf.report.load import load_results
    from specperf.report.markdown import table_md
    from specperf.report.tables import method_ranking

    checks = list(checks) if checks is not None else recorded_checks(results_dir)
    shown = ordered(visible(checks))
    out = [f"## specperf — {Path(results_dir).name}", "", f"**Verdict:** {_counts(checks)}", ""]
    if shown:
        rows = verdict.table_rows(shown[:MAX_ROWS])
        df = pd.DataFrame(rows, columns=list(verdict.TABLE_COLUMNS))
        out += [table_md(df), ""]
        legend = verdict.sees_legend(rows)
        if legend:
            out += [legend, ""]
        if len(shown) > MAX_ROWS:
            out += [f"… and {len(shown) - MAX_ROWS} more.", ""]
    try:
        ranking = method_ranking(load_results([Path(results_dir)]).runs)
    except SpecperfError:
        ranking = pd.DataFrame()
    if not ranking.empty:
        out += ["**Methods by mean speedup over native**", "", table_md(display(ranking)), ""]
    out += [f"Report: `{p}`" for p in report_paths]
    return "\n".join(out).rstrip() + "\n"


def write_step_summary(
    results_dir: Path | str,
    checks: Sequence[verdict.Check] | None = None,
    *,
    report_paths: Sequence[Path | str] = (),
    environ: Mapping[str, str] | None = None,
) -> Path | None:
    """Append the markdown summary to ``$GITHUB_STEP_SUMMARY`` when it is set; returns the
    file written, or None."""
    target = (environ if environ is not None else os.environ).get(STEP_SUMMARY_ENV)
    if not target:
        return None
    text = step_summary_markdown(results_dir, checks, report_paths=report_paths)
    path = Path(target)
    with path.open("a", encoding="utf-8") as fh:
        fh.write(text + "\n")
    return path


def session_summary(
    results_dir: Path | str,
    checks: Sequence[verdict.Check] | None = None,
    *,
    build_report: bool = True,
    baseline: Path | str | None = None,
    environ: Mapping[str, str] | None = None,
) -> str:
    """Everything the plugin does at session end, in one call: write the report (unless told
    not to), append the job summary when ``$GITHUB_STEP_SUMMARY`` is set, and return the text
    to print. A report that cannot be written is said in the text; it never hides the table."""
    paths: list[Path] = []
    note = ""
    if build_report:
        from specperf.report.command import load_builder

        try:
            rp = load_builder()([Path(results_dir)], baseline=baseline)
            paths = [rp.markdown, rp.html]
        except SpecperfError as exc:
            note = f"report not written: {exc}"
    write_step_summary(results_dir, checks, report_paths=paths, environ=environ)
    text = summary_table(results_dir, checks, report_paths=paths)
    return f"{text}\n{note}" if note else text


# --------------------------------------------------------------------------- the verdict table
def _rank(status: str) -> int:
    """Failures first, then rows that were not evaluated, then the verdict module's order; a
    pass last. A status this layout does not know sorts before the passes."""
    if status == "fail":
        return 0
    if status == "not_evaluated":
        return 1
    if status == "pass":
        return 99
    return 2 + verdict.STATUS_ORDER.get(status, 50)


def _num(x: float | None) -> str:
    return number(x, missing="")


def _delta(c: verdict.Check) -> str:
    d = c.delta
    return "" if d is None or d != d or d in (float("inf"), float("-inf")) else f"{d:+.1%}"


def _clip(text: str, width: int, *, left: bool = False) -> str:
    if len(text) <= width:
        return text
    return "…" + text[-(width - 1) :] if left else text[: width - 1] + "…"


def _metric_name(c: verdict.Check) -> str:
    """The metric, with the rule's id when the metric does not already name it."""
    return f"{c.metric} ({c.rule})" if c.rule and c.rule not in c.metric else c.metric


def verdict_table(
    checks: Iterable[verdict.Check], *, include_pass: bool = True, width: int = TABLE_WIDTH
) -> str:
    """The end-of-session table: one block per item (its id on a line of its own), items with a
    failure first, then items with a check that was not evaluated; inside a block, failures
    and not-evaluated rows first, each non-passing row followed by its reason. Every line fits
    ``width`` columns (long ids are cut on the left, long reasons wrapped, then cut). The
    "sees" column gives each statistical check's detectable change (``verdict.sees_cell``, as
    in ``specperf verdict``'s table), explained by a legend under the table when any row has
    one."""
    checks = list(checks)
    rows = [c for c in checks if include_pass or c.status != "pass"]
    if not rows:
        return "(no checks)" if not checks else f"(all {len(checks)} checks passed)"
    width = max(60, width)
    groups: dict[str, list[verdict.Check]] = {}
    for c in rows:
        groups.setdefault(c.item or c.key, []).append(c)
    order = sorted(groups, key=lambda g: min(_rank(c.status) for c in groups[g]))
    vals = [9, 9, 8, 5, 13]  # measured, baseline, delta, sees, verdict ("NOT EVALUATED")
    names = [_metric_name(c) for c in rows]
    metric_w = min(width - 2 - sum(vals) - 2 * len(vals), max(len("metric"), *map(len, names)))

    def line(metric: str, *cells: str) -> str:
        m, b, d, s, v = cells
        return (
            f"  {_clip(metric, metric_w):<{metric_w}}  {m:>{vals[0]}}  {b:>{vals[1]}}  "
            f"{d:>{vals[2]}}  {s:>{vals[3]}}  {v}"
        ).rstrip()

    out = [line("metric", "measured", "baseline", "delta", "sees", "verdict")]
    out.append("  " + "-" * (len(out[0]) - 2))
    for g in order:
        out.append(_clip(g, width, left=True))
        for c in sorted(groups[g], key=lambda c: (_rank(c.status), c.metric)):
            name = _metric_name(c)
            status = c.status.upper().replace("_", " ")
            sees = verdict.sees_cell(c)
            out.append(line(name, _num(c.measured), _num(c.baseline), _delta(c), sees, status))
            if c.reason and (c.status != "pass" or verdict.tolerance_differs(c)):
                wrapped = textwrap.wrap(
                    " ".join(c.reason.split()),
                    width=width - 6,
                    max_lines=REASON_LINES,
                    placeholder=" …",
                    break_on_hyphens=False,  # paths and keys stay whole where they fit
                )
                out += [f"      {w}" for w in wrapped]
    if any(verdict.sees_cell(c) for c in rows):
        out += ["", *textwrap.wrap(verdict.SEES_LEGEND, width=width)]
    return "\n".join(out)
