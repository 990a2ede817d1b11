"""The outcome of the watch: one ``WatchResult`` per watched engine, the ``watch.json`` /
``watch.md`` summary and the exit code."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specperf.release_watch.targets import Target


@dataclass
class WatchResult:
    """The outcome for one watched engine."""

    target: Target
    suite: str
    candidate: str | None
    status: str  # up-to-date | pass | regression | error
    message: str
    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    pinned_dir: str | None = None  # the first pinned run (the report compares with it)
    pinned_dirs: list[str] = field(default_factory=list)  # every pinned run, in run order
    candidate_dir: str | None = None
    report: str | None = None

    @property
    def release(self) -> str:
        return f"{self.target.package} {self.candidate}"

    def to_json(self) -> dict[str, Any]:
        return {
            "engine": self.target.engine,
            "package": self.target.package,
            "setting": self.target.setting,
            "pinned": self.target.pinned,
            "candidate": self.candidate,
            "suite": self.suite,
            "status": self.status,
            "message": self.message,
            "failures": self.failures,
            "notes": self.notes,
            "counts": self.counts,
            "pinned_dir": self.pinned_dir,
            "pinned_dirs": self.pinned_dirs,
            "candidate_dir": self.candidate_dir,
            "report": self.report,
        }

    def to_markdown(self) -> str:
        icon = {"regression": "❌", "error": "⚠️", "pass": "✅"}.get(self.status, "➖")
        lines = [
            f"### {icon} {self.target.engine}: {self.target.package} "
            f"{self.candidate or '-'} vs pinned {self.target.pinned}",
            "",
            self.message,
        ]
        if self.failures:
            lines += ["", *[f"- {f}" for f in self.failures]]
        if self.notes:
            lines += ["", *[f"- note: {n}" for n in self.notes]]
        if self.report:
            lines += ["", f"Report: `{self.report}`"]
        return "\n".join(lines) + "\n"


def write_summary(results: Sequence[WatchResult], results_dir: Path) -> str:
    """watch.json + watch.md in ``results_dir`` (and $GITHUB_STEP_SUMMARY); the markdown."""
    from specperf.results import write_json_atomic

    results_dir.mkdir(parents=True, exist_ok=True)
    write_json_atomic(results_dir / "watch.json", {"results": [r.to_json() for r in results]})
    md = "## Release watch\n\n" + "\n".join(r.to_markdown() for r in results)
    (results_dir / "watch.md").write_text(md, encoding="utf-8")
    step = os.environ.get("GITHUB_STEP_SUMMARY")
    if step:
        with open(step, "a", encoding="utf-8") as fh:
            fh.write(md)
    return md


def exit_code(results: Sequence[WatchResult]) -> int:
    if any(r.status == "regression" for r in results):
        return 1
    if any(r.status == "error" for r in results):
        return 2
    return 0
