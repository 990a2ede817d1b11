"""Sections → report.md (GitHub-flavoured: pipe tables, PNG charts beside the file)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from specperf.report.sections import Chart, Section, Table, Text

ICONS = {"missing": "_No data:_ ", "warning": "**Warning:** ", "note": ""}


def _cell(v: object) -> str:
    return str(v).replace("|", "\\|").replace("\n", " ")


def table_md(df: pd.DataFrame) -> str:
    """A pipe table (tabulate through pandas); pipes and newlines in cells escaped."""
    safe = df.map(_cell)
    safe.columns = [_cell(c) for c in df.columns]
    return safe.to_markdown(index=False, disable_numparse=True)


def render(
    sections: list[Section], *, title: str, subtitle: str, chart_dir: Path | None, chart_rel: str
) -> str:
    """Markdown text. Charts are written to ``chart_dir`` (when given) and linked as
    ``chart_rel/<id>.png``; without a directory they are left out (summaries)."""
    out = [f"# {title}", "", subtitle, "", "## Contents", ""]
    out += [f"- [{s.title}](#{s.id})" for s in sections]
    for s in sections:
        out += ["", f'<a id="{s.id}"></a>', "", f"## {s.title}", ""]
        if s.intro:
            out += [s.intro, ""]
        if s.empty:
            out += [f"{ICONS['missing']}{s.empty}", ""]
            continue
        for p in s.parts:
            if isinstance(p, Table):
                out += [f"**{p.caption}**", "", table_md(p.frame), ""]
            elif isinstance(p, Chart):
                if chart_dir is None:
                    continue
                chart_dir.mkdir(parents=True, exist_ok=True)
                (chart_dir / f"{p.id}.png").write_bytes(p.png)
                out += [f"![{p.caption}]({chart_rel}/{p.id}.png)", ""]
            elif isinstance(p, Text):
                out += [f"{ICONS.get(p.kind, '')}{p.text}", ""]
    return "\n".join(out).rstrip() + "\n"
