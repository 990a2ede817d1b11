"""Judging whole results folders: every item against its baseline, then the rules and the
engine-wide check over all items together."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specperf.baselines import BaselineFile, baseline_path, load_baselines
from specperf.config import Rule
from specperf.errors import ConfigError
from specperf.verdict.checks import Check
from specperf.verdict.engine_wide import check_alpha, engine_wide_checks
from specperf.verdict.gates import evaluate_item
from specperf.verdict.outcome import gate_summary, summary_counts, summary_line, unjudged_items
from specperf.verdict.results import SUITE_SNAPSHOT, ItemResult, load_results
from specperf.verdict.rules import evaluate_rules
from specperf.verdict.snapshot import (
    alpha_from_snapshot,
    known_issues_from_snapshot,
    policies_from_snapshot,
    read_suite_snapshot,
    rules_from_snapshot,
    selected_from_snapshots,
)
from specperf.verdict.spread import config_siblings


@dataclass
class Verdict:
    checks: list[Check]
    results: dict[str, ItemResult]
    profile: str | None = None  # the hardware profile(s) judged, for the summary line

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if c.status == "fail"]

    def to_json(self) -> dict[str, Any]:
        counts: dict[str, int] = {}
        for c in self.checks:
            counts[c.status] = counts.get(c.status, 0) + 1
        return {
            "counts": counts,
            "summary": summary_counts(self.checks),
            "summary_line": self.summary_line(),
            "gates": gate_summary(self.checks, self.profile),
            "checks": [c.to_json() for c in self.checks],
        }

    def summary_line(self) -> str:
        return summary_line(self.checks, self.profile)


def evaluate_results(
    dirs: Sequence[Path | str],
    *,
    baselines: BaselineFile | None = None,
    baselines_dir: Path | str | None = None,
    hardware_profile: str | None = None,
    today: _dt.date | None = None,
) -> Verdict:
    """Judge results directories: every item against the baseline file, then every rule of the
    suite (and of the baseline file) over all items together; an item judged by nothing fails
    (``outcome.judged_by_nothing``). Policies, rules and quarantines
    come from the ``suite.json`` snapshot the plugin wrote into the results directory."""
    results = load_results(dirs)
    if not results:
        raise ConfigError(f"{', '.join(map(str, dirs))}: no suite item results found")
    snap = read_suite_snapshot(dirs)
    policies = policies_from_snapshot(snap)
    issues = known_issues_from_snapshot(snap)
    rules = rules_from_snapshot(snap, str(Path(dirs[0]) / SUITE_SNAPSHOT))
    max_failed = float(((snap or {}).get("workload") or {}).get("max_failed_fraction", 0.0))
    # each item is judged with the profile it was measured on: a folder may hold items of two
    # profiles (merged shards of two GPU kinds), and neither may be compared with the other's file
    groups: dict[str | None, list[str]] = {}
    for k in sorted(results):
        groups.setdefault(results[k].hardware_profile or hardware_profile, []).append(k)
    # the run's own levels (whole matrix), so a filtered run or one folder is judged as it was
    alpha = alpha_from_snapshot(snap) or check_alpha(policies, [r.key for r in results.values()])
    checks: list[Check] = []
    engine_wide: list[Check] = []
    file_rules: list[Rule] = []
    for own_profile, keys in groups.items():
        file, missing = _baseline_file_for(
            baselines, baselines_dir, hardware_profile or own_profile, snap
        )
        file_rules += [r for r in file.rules if r not in file_rules]
        for k in keys:
            checks.extend(
                evaluate_item(
                    results[k],
                    file.get(results[k].key),
                    policies,
                    hardware_profile=own_profile,
                    known_issues=issues,
                    max_failed_fraction=max_failed,
                    today=today,
                    alpha=alpha.item,
                    missing_reason=missing,
                    siblings=config_siblings(file, results[k].key),
                )
            )
        group = {k: results[k] for k in keys}
        for c in engine_wide_checks(group, file, policies, alpha=alpha.engine_wide):
            if len(groups) > 1:  # one engine may run on two profiles: one row each
                c.key = f"{c.key} ({own_profile})"
            engine_wide.append(c)
    selected = selected_from_snapshots(dirs)
    checks.extend(
        evaluate_rules(
            rules + file_rules, results, known_issues=issues, today=today, selected=selected
        )
    )
    checks.extend(unjudged_items(checks, sorted(results)))
    profile = hardware_profile or ", ".join(sorted(p for p in groups if p)) or None
    return Verdict(checks + engine_wide, results, profile)


def _baseline_file_for(
    given: BaselineFile | None,
    baselines_dir: Path | str | None,
    profile: str | None,
    snap: dict[str, Any] | None,
) -> tuple[BaselineFile, str | None]:
    """The baseline file an item of ``profile`` is judged against, and why none exists (None:
    it does). A file given explicitly is used for every profile; each item's hardware-bound
    metrics are still compared only where the file's values were measured on its profile."""
    if given is not None:
        return given, None
    if baselines_dir is None or not profile:
        return BaselineFile(Path("<none>")), "no baseline file given"
    path = baseline_path(baselines_dir, profile, (snap or {}).get("baseline_folder"))
    return load_baselines(path), None if path.exists() else no_baseline_reason(profile, path)


def no_baseline_reason(profile: str, path: Path) -> str:
    return f"no baseline for profile {profile} ({path}); adopt with --update-baselines"
