"""The controller's end of the session: every item's checks (xdist ships them back), the
rules judged over the whole run, ``verdict.json``, and the terminal table."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path
from typing import Any

import pytest

from specperf import verdict as vd
from specperf.errors import SpecperfError
from specperf.plugin.state import MAX_TABLE_ROWS, _State
from specperf.verdict.outcome import counts_line, gates_line


class Reporter:
    """Controller-side: collects every item's checks (xdist ships user_properties back),
    evaluates cross-engine rules at the end, writes verdict.json, prints the table."""

    def __init__(self, config: pytest.Config, state: _State) -> None:
        self.config = config
        self.state = state

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "call" and not (report.when == "setup" and report.skipped):
            return
        for name, value in report.user_properties:
            if name == "specperf_checks":
                self.state.checks.extend(vd.Check.from_json(c) for c in value)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        state, config = self.state, self.config
        if state.suite is None or state.results_dir is None or not state.checks:
            return
        from specperf.baselines import baseline_path
        from specperf.fileio import write_text_atomic
        from specperf.suite_run import merge_rule_checks, run_level_checks

        profile = config.getoption("hardware_profile") or _profile_from_results(state.results_dir)
        bfile = baseline_path(
            Path(config.getoption("baselines_dir")).resolve(),
            profile or "unknown",
            state.suite.baseline_file,
        )
        try:
            run_checks = run_level_checks(state.suite, state.results_dir, bfile)
        except SpecperfError as exc:  # rules that cannot be judged never end as a pass
            run_checks = [
                vd.Check("session", "rules", "fail", reason=f"rules not evaluated: {exc}")
            ]
        strict = bool(config.getoption("strict_baselines")) and not config.getoption(
            "update_baselines"
        )
        state.checks, state.session_failures = merge_rule_checks(
            state.checks, run_checks, strict=strict
        )
        counts: dict[str, int] = {}
        for c in state.checks:
            counts[c.status] = counts.get(c.status, 0) + 1
        out = {
            "counts": counts,
            "summary_line": vd.summary_line(state.checks, profile),
            "gates": vd.gate_summary(state.checks, profile),
            "checks": [c.to_json() for c in state.checks],
        }
        write_text_atomic(state.results_dir / "verdict.json", json.dumps(out, indent=1) + "\n")
        if state.session_failures and session.exitstatus == 0:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        state = self.state
        if not state.checks:
            return
        tr = terminalreporter
        tr.section("specperf verdict")
        checks = state.checks
        many = len(checks) > MAX_TABLE_ROWS
        from specperf.report.terminal import verdict_table

        tr.write_line(verdict_table(checks, include_pass=not many, width=_width(tr)))
        if many:
            passed = sum(c.status == "pass" for c in checks)
            tr.write_line(f"({passed} passing checks not shown; all in verdict.json)")
        for c in state.session_failures:
            strict = (
                ", --strict-baselines: a gated check not evaluated" if c.status != "fail" else ""
            )
            tr.write_line(f"FAIL (judged at the end of the session{strict}) {c.line()}", red=True)
        profile = self.config.getoption("hardware_profile") or (
            _profile_from_results(state.results_dir) if state.results_dir else None
        )
        tr.write_line(f"specperf: {counts_line(checks)}")
        for line in textwrap.wrap(f"specperf: {gates_line(checks, profile)}", _width(tr)):
            tr.write_line(line)
        for line in stored_report_only(state.results_dir):
            tr.write_line(line, yellow=True)
        fails = sum(c.status == "fail" for c in checks)
        tr.write_line(f"results: {state.results_dir}  ({fails} failed check(s))")
        self._report(tr)

    def _report(self, tr: Any) -> None:
        """The report helper's outputs: report files (--report) and the job summary when
        $GITHUB_STEP_SUMMARY is set."""
        state = self.state
        want_report = self.config.getoption("report")
        if not want_report and not os.environ.get("GITHUB_STEP_SUMMARY"):
            return
        try:
            from specperf.report import terminal

            if want_report:
                text = terminal.session_summary(state.results_dir, state.checks)
                for line in text.splitlines():
                    if line.startswith(("report:", "report not written")):
                        tr.write_line(line)
            else:
                terminal.write_step_summary(state.results_dir, state.checks)
        except (ImportError, SpecperfError) as exc:
            tr.write_line(f"report not written: {exc}")


def stored_report_only(results_dir: Path) -> list[str]:
    """One WARNING line per metric an update stored report-only (a gate that could not fail):
    said at the end by the controller, since under xdist a worker's progress lines are not."""
    from specperf.suite_run.baseline_update import BASELINE_UPDATES, report_only_line

    path = results_dir / BASELINE_UPDATES
    if not path.exists():
        return []
    lines = []
    for row in map(json.loads, path.read_text(encoding="utf-8").splitlines()):
        for metric, why in (row.get("report_only") or {}).items():
            lines.append(report_only_line(row.get("item") or row["key"], metric, why))
    return lines


def _width(tr: Any) -> int:
    """The terminal's width, at most 100 (the verdict table's layout width)."""
    return min(100, int(getattr(getattr(tr, "_tw", None), "fullwidth", 100) or 100))


def _profile_from_results(results_dir: Path) -> str | None:
    snap = results_dir / vd.SUITE_SNAPSHOT
    if snap.exists():
        return json.loads(snap.read_text()).get("hardware_profile")
    return None
