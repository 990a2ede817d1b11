"""Reports from results directories: tables (pandas), charts (matplotlib), report.md and a
self-contained report.html, comparisons with baselines and other runs, merging of shards, and
the end-of-session terminal / GitHub job summary.

Modules follow the data flow: ``load`` (files → frames) → ``tables`` / ``charts`` →
``sections`` → ``markdown`` / ``html``; ``compare`` and ``merge`` call ``specperf.verdict`` for
every verdict; ``terminal`` is what the pytest plugin calls at session end.
"""

from __future__ import annotations

from typing import Any

__all__ = ["build_report", "merge", "session_summary", "summary_table", "write_step_summary"]


def __getattr__(name: str) -> Any:  # lazy: importing the package must not load matplotlib
    if name == "build_report":
        from specperf.report.build import build_report

        return build_report
    if name == "merge":
        from specperf.report.merge import merge

        return merge
    if name in ("session_summary", "summary_table", "write_step_summary"):
        from specperf.report import terminal

        return getattr(terminal, name)
    raise AttributeError(name)
