"""A release matrix (``matrix.json``, specperf.release_watch) as report sections: the releases
with the stack each ran with (engine, torch and its build, transformers), then one table and
one chart per metric family (MAL, acceptance rate, per-position acceptance, output tokens,
greedy-match guard, tok/s against the reference, TTFT/TPOT), and the terminal summary.

A table cell reads ``value · ref VERDICT · prev VERDICT``: the release's value (the median over
its engine starts), its verdict against the matrix's reference runs and against the previous
release (``=`` same, ``Δ±x%`` changed, ``FAIL ±x%`` regressed, ``ok`` pass, ``n/e`` not
evaluated; none for a reported-only figure). The chart draws each row's value by release; red
markers are failures against the reference, a release without values says why on the axis,
and a dotted line marks where the torch or transformers version changed, so a step that
coincides with a dependency change is visible.
"""

from __future__ import annotations

import datetime as _dt
import io
import itertools
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from tabulate import tabulate

from specperf.release_watch.matrix_model import FAMILIES, Cell, Matrix, Verdict, load_matrix
from specperf.report import html, markdown
from specperf.report.sections import Section

REPORT_MD = "report.md"
REPORT_HTML = "report.html"
CHARTS = "charts"
MAX_LINES = 12  # rows drawn per chart (the table has them all)
KEY_PARTS = ("model", "engine", "method", "dataset", "c", "sampling")


def short(v: Verdict | None) -> str:
    """A verdict as a few characters (see the module doc)."""
    if v is None:
        return ""
    d = "" if v.delta is None else f"{v.delta:+.1%}"
    return {
        "same": "=",
        "changed": f"Δ{d}",
        "fail": f"FAIL {d}".strip(),
        "pass": "ok",
        "not_evaluated": "n/e",
        "reference": "ref",
        "stale": "stale",
        "missing": "–",
        "xfail": "xfail",
    }.get(v.status, "")


def cell_text(c: Cell) -> str:
    parts = ["—" if c.value is None else f"{c.value:.4g}"]
    ref, prev = short(c.vs_reference), short(c.vs_previous)
    if ref and ref != "ref":
        parts.append(f"ref {ref}")
    if prev:
        parts.append(f"prev {prev}")
    return " · ".join(parts)


def _key_columns(item: str) -> dict[str, str]:
    if item.startswith("engine "):
        return {"engine": item.split(" ", 1)[1], "method": "engine-wide"}
    parts = item.split("/")
    return dict(zip(KEY_PARTS, parts, strict=False))


def releases_frame(m: Matrix) -> pd.DataFrame:
    """One row per release: role, status, the stack it ran with, runs and wall time."""
    rows = []
    for r in m.rows:
        runs = [x for x in m.runs_of(r.release) if x.wall_s is not None]
        stack = r.stack
        torch = (stack.torch if stack else None) or "—"
        if stack and stack.torch_build:
            torch += f" ({stack.torch_build})"
        rows.append(
            {
                "release": r.release,
                "role": r.role,
                "status": r.status,
                "engine": (stack.engine if stack else None) or "—",
                "torch": torch,
                "transformers": (stack.transformers if stack else None) or "—",
                "runs": r.runs,
                "wall (s)": round(sum(x.wall_s or 0 for x in runs), 1) if runs else None,
                "why": r.reason,
            }
        )
    return pd.DataFrame(rows)


def family_frame(m: Matrix, fam: str) -> pd.DataFrame:
    """Rows (item, metric) × one column per release, each cell ``cell_text``; a release
    without cells (not installable, not run) says its status in every row. The last two rows
    are the torch and transformers versions each release ran with."""
    cells = [c for c in m.cells if c.family == fam]
    if not cells:
        return pd.DataFrame()
    by_row: dict[tuple[str, str], dict[str, str]] = {}
    for c in cells:
        by_row.setdefault((c.item, c.metric), {})[c.release] = cell_text(c)
    status = {r.release: r.status for r in m.rows}
    rows = []
    for (item, metric), per in sorted(by_row.items()):
        row: dict[str, str] = {**_key_columns(item), "metric": metric}
        for rel in m.releases:
            if rel in per:
                row[rel] = per[rel]
            elif status.get(rel) in ("not installable", "not evaluated", "not run", "failed"):
                row[rel] = status[rel]
            else:
                row[rel] = "—"
        rows.append(row)
    stacks = {r.release: r.stack for r in m.rows}
    # a key column that holds one value for every item keeps it on the stack rows too, so the
    # table still says it once in its caption
    same = {
        col: vals.pop()
        for col in ("model", "engine", "sampling")
        if len(vals := {r.get(col, "") for r in rows}) == 1
    }
    for name in ("torch", "transformers"):  # a step beside a dependency change shows here
        row = {**same, "method": "(stack)", "metric": name}
        for rel in m.releases:
            st = stacks.get(rel)
            val = getattr(st, name) if st else None
            if val and name == "torch" and st and st.torch_build:
                val += f" ({st.torch_build})"
            row[rel] = val or "—"
        rows.append(row)
    return pd.DataFrame(rows)


def _png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def dependency_steps(m: Matrix) -> list[tuple[int, str]]:
    """(x position between two releases, what changed) where torch or transformers differs
    between consecutive releases that ran."""
    out = []
    ran = [(i, r) for i, r in enumerate(m.rows) if r.stack is not None]
    for (_, a), (j, b) in itertools.pairwise(ran):
        what = []
        for name in ("torch", "torch_build", "transformers"):
            va, vb = getattr(a.stack, name), getattr(b.stack, name)
            if va != vb and (va or vb):
                what.append(f"{name} {va or '?'}→{vb or '?'}")
        if what:
            out.append((j, ", ".join(what)))
    return out


def family_chart(m: Matrix, fam: str) -> bytes | None:
    """Values by release, one line per row (the first ``MAX_LINES``); failures against the
    reference in red; dotted lines where a dependency changed."""
    cells = [c for c in m.cells if c.family == fam and c.value is not None]
    if not cells:
        return None
    x_of = {r: i for i, r in enumerate(m.releases)}
    rows: dict[tuple[str, str], list[Cell]] = {}
    for c in cells:
        rows.setdefault((c.item, c.metric), []).append(c)
    fig = Figure(figsize=(max(6.0, 0.6 * len(m.releases) + 3), 4.2), dpi=80)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    for (item, metric), cs in sorted(rows.items())[:MAX_LINES]:
        cs = sorted(cs, key=lambda c: x_of[c.release])
        xs = [x_of[c.release] for c in cs]
        ys = [c.value for c in cs]
        label = f"{'/'.join(item.split('/')[2:5]) or item} {metric}"
        ax.plot(xs, ys, marker="o", label=label[:60])
        bad = [
            (x, y)
            for x, y, c in zip(xs, ys, cs, strict=True)
            if c.vs_reference and c.vs_reference.status == "fail"
        ]
        if bad:
            ax.scatter(*zip(*bad, strict=True), color="red", zorder=5, s=60)
    for r in m.rows:  # releases without values say why on the axis
        if r.status in ("not installable", "not evaluated", "not run", "failed"):
            ax.text(
                x_of[r.release],
                ax.get_ylim()[0],
                r.status,
                fontsize=7,
                rotation=90,
                va="bottom",
                ha="center",
                color="grey",
            )
    for x, what in dependency_steps(m):
        ax.axvline(x - 0.5, color="grey", linestyle=":")
        ax.text(x - 0.5, ax.get_ylim()[1], what, fontsize=7, rotation=90, va="top")
    ax.set_xticks(range(len(m.releases)))
    ax.set_xticklabels(
        [f"{r}*" if r == m.reference else r for r in m.releases], rotation=45, fontsize=8
    )
    ax.set_title(FAMILIES[fam], fontsize=10)
    ax.legend(fontsize=7, loc="best")
    fig.subplots_adjust(bottom=0.22)
    return _png(fig)


def sections(m: Matrix) -> list[Section]:
    """The matrix as report sections: releases and stack first, then one per metric family."""
    intro = (
        f"{m.package} releases {', '.join(m.releases)} on suite {m.suite}, engine {m.engine}; "
        f"reference {m.reference} (*), run {len(m.runs_of(m.reference, 'reference'))} times "
        "between the candidates. Cells: value · verdict against the reference runs · verdict "
        "against the previous release (= same, Δ changed, FAIL regressed, ok pass, n/e not "
        "evaluated)."
    )
    top = Section("matrix-releases", "Release matrix: releases and stack", intro)
    top.table("Releases", releases_frame(m), missing="no release planned")
    if m.not_repeatable:
        top.note(
            "Reference not repeatable (compared with the suite's tolerance, not exactly): "
            + "; ".join(m.not_repeatable)
        )
    for n in m.notes:
        top.note(n, "warning")
    out = [top]
    for fam, title in FAMILIES.items():
        s = Section(f"matrix-{fam}", f"Release matrix: {title}")
        df = family_frame(m, fam)
        s.table(
            title,
            df,
            missing="no release measured it",
            drop_constant=("model", "engine", "sampling"),
        )
        s.chart(title, family_chart(m, fam), missing="no values to draw")
        out.append(s)
    return out


def summary_text(m: Matrix) -> str:
    """The terminal summary: one row per release with its status, stack and what moved."""
    rows = [
        [
            r.release + (" (ref)" if r.role == "reference" else ""),
            r.status,
            r.stack.line() if r.stack else "—",
            r.reason[:120],
        ]
        for r in m.rows
    ]
    head = f"release matrix {m.package} on {m.suite} (reference {m.reference})"
    return head + "\n" + tabulate(rows, headers=["release", "status", "stack", "what moved"])


@dataclass
class MatrixReport:
    markdown: Path
    html: Path
    matrix: Matrix


def build_matrix_report(
    matrix: Matrix | Path | str, out: Path | str | None = None, title: str | None = None
) -> MatrixReport:
    """``report.md`` (charts beside it) and ``report.html`` for a matrix (default directory:
    ``report/`` beside the matrix file)."""
    if isinstance(matrix, Matrix):
        m, where = matrix, Path(out or "report")
    else:
        m = load_matrix(matrix)
        where = Path(out) if out else Path(matrix).parent / "report"
    where.mkdir(parents=True, exist_ok=True)
    secs = sections(m)
    title = title or f"specperf release matrix: {m.package}"
    when = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    subtitle = f"{len(m.releases)} releases, {len(m.runs)} runs · generated {when}"
    md = markdown.render(
        secs, title=title, subtitle=subtitle, chart_dir=where / CHARTS, chart_rel=CHARTS
    )
    (where / REPORT_MD).write_text(md, encoding="utf-8")
    (where / REPORT_HTML).write_text(
        html.render(secs, title=title, subtitle=subtitle), encoding="utf-8"
    )
    return MatrixReport(where / REPORT_MD, where / REPORT_HTML, m)


__all__ = [
    "MatrixReport",
    "build_matrix_report",
    "cell_text",
    "family_frame",
    "releases_frame",
    "sections",
    "summary_text",
]
