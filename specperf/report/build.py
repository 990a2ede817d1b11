"""Results directories → report.md + report.html (+ charts/ for the markdown)."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specperf.report import compare, html, markdown, sections
from specperf.report.load import ResultsSet, load_results, requests_frame
from specperf.report.prompts import prompt_meta
from specperf.report.tables import request_rows
from specperf.results import write_json_atomic

REPORT_MD = "report.md"
REPORT_HTML = "report.html"
CHARTS = "charts"
TITLE = "specperf report"


@dataclass
class ReportPaths:
    markdown: Path
    html: Path
    charts: Path
    regressions: int
    sections: list[str]
    checks: list[Any]  # this run's own verdict checks (baseline, recorded or rules)


def comparisons(
    dirs: Sequence[Path], baseline: Path | None, others: Sequence[Sequence[Path]]
) -> list[compare.Comparison]:
    """Baseline (given) → else the verdicts recorded during the run → else the same-run rules;
    then one comparison per other run."""
    out: list[compare.Comparison] = []
    if baseline is not None:
        out.append(compare.against_baseline(dirs, baseline))
    else:
        found = compare.recorded(dirs) or compare.rules_only(dirs)
        if found is not None:
            out.append(found)
    for other in others:
        label = ",".join(p.name for p in other)
        out.append(compare.against_run(dirs, other, label))
    return out


def build_sections(rs: ResultsSet, cmps: Sequence[compare.Comparison]) -> list[sections.Section]:
    reqs = request_rows(requests_frame(rs.items), prompt_meta(rs.runs["dataset"].unique()))
    parts = [sections.overview(rs)]
    if cmps:
        parts += [sections.comparison(c, c.column) for c in cmps]
    else:
        parts.append(
            sections.no_comparison(
                "no baseline given (--baseline FILE), no verdicts.jsonl in the results and no "
                "suite.json snapshot with rules"
            )
        )
    parts += [
        sections.speedup(rs),
        sections.acceptance(rs),
        sections.concurrency(rs),
        sections.positions(rs),
        sections.sensitivity(rs, reqs),
        sections.engines(rs),
        sections.quality(rs),
        sections.environment(rs),
        sections.details(rs),
    ]
    return parts


def build_report(
    results: Sequence[Path | str],
    *,
    baseline: Path | str | None = None,
    compare_with: Sequence[Sequence[Path | str]] = (),
    out: Path | str | None = None,
    title: str = TITLE,
) -> ReportPaths:
    """Write ``report.md``, ``report.html`` and ``charts/`` under ``out`` (default:
    ``<first results dir>/report``) and return where they are."""
    dirs = [Path(d) for d in results]
    rs = load_results(dirs)
    others = [[Path(d) for d in grp] for grp in compare_with]
    for grp in others:
        load_results(grp)  # same one-line errors for a bad --compare directory
    cmps = comparisons(dirs, Path(baseline) if baseline else None, others)
    secs = build_sections(rs, cmps)
    out_dir = Path(out) if out else dirs[0] / "report"
    out_dir.mkdir(parents=True, exist_ok=True)
    when = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    subtitle = f"{len(rs.items)} items from {', '.join(map(str, dirs))} · generated {when}"
    md_path, html_path = out_dir / REPORT_MD, out_dir / REPORT_HTML
    md = markdown.render(
        secs, title=title, subtitle=subtitle, chart_dir=out_dir / CHARTS, chart_rel=CHARTS
    )
    _write(md_path, md)
    _write(html_path, html.render(secs, title=title, subtitle=subtitle))
    regressions = sum(len(c.regressions) for c in cmps)
    write_json_atomic(
        out_dir / "report.json",
        {
            "results": [str(d) for d in dirs],
            "baseline": str(baseline) if baseline else None,
            "compare": [[str(p) for p in g] for g in others],
            "sections": [{"id": s.id, "title": s.title, "has_data": s.has_data} for s in secs],
            "comparisons": [
                {
                    "title": c.title,
                    "counts": c.counts(),
                    "regressions": [r.to_json() for r in c.regressions],
                }
                for c in cmps
            ],
        },
    )
    own = [c for c in cmps if not c.id.startswith("run-")]  # baseline, recorded or rules
    first = list(own[0].checks) if own else []
    return ReportPaths(
        md_path, html_path, out_dir / CHARTS, regressions, [s.id for s in secs], first
    )


def _write(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
