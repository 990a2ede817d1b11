"""Judging the candidate release: the pinned runs of the same night as an in-memory baseline,
and the verdict module's checks of the candidate against it.

Several pinned runs (``--pinned-runs``, default 3, bracketing the candidate: watch.py) give the
baseline one start per item each, the starts a gate needs (``verdict.evidence``); the drift of
the host between them is in the baseline's spread. They run minutes apart on one machine, so
they are one pass (``baselines.pass_labels``) and the test is start-level. With fewer pinned
runs every metric is only reported and the candidate's items are judged by their same-run
rules alone."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from specperf.errors import SpecperfError
from specperf.verdict.decision import MIN_BASELINE_STARTS


def _run_date(res: Any, run: int) -> str:
    """The start date of one pinned run: when its item started, and which run it was."""
    started = (res.summary.get("wall_clock") or {}).get("started")
    when = _dt.datetime.now(_dt.timezone.utc)
    if isinstance(started, int | float):
        when = _dt.datetime.fromtimestamp(started, _dt.timezone.utc)
    return f"{when.strftime('%Y-%m-%dT%H:%M:%SZ')} pinned run {run}"


def baseline_from_results(runs: Sequence[Mapping[str, Any]], policies: Mapping[str, Any]) -> Any:
    """The pinned runs as an in-memory baseline file (one entry per item key): each run's
    starts appended."""
    from specperf.baselines import BaselineFile, make_entry
    from specperf.verdict import figure

    bf = BaselineFile(Path("<pinned run>"))
    for i, run in enumerate(runs, 1):
        for k, res in run.items():
            figures = res.figures or {m: {"value": figure(res.summary, m)} for m in policies}
            bf.entries[k] = make_entry(
                res.key,
                figures,
                policies,
                fingerprint=res.fingerprint,
                provenance={
                    "source": "measured",
                    "engine_version": res.engine_version,
                    "date": _run_date(res, i),
                    "note": "pinned engine, same night and machine (release watch)",
                    # measured beside the candidate: one host state, so a one-day baseline gates
                    "same_window": True,
                },
                hardware_profile=res.hardware_profile or "unknown",
                previous=bf.entries.get(k),
            )
    return bf


def what_green_rules_out(c: Any) -> str | None:
    """The note a passing engine-wide check leaves on the watch: how large a change it would have
    named (None: not a passing engine-wide test). A green watch on a noisy host rules out only
    large slowdowns, and the summary must not read as "no regression" where it means "none that
    large"."""
    from specperf.verdict import ENGINE_WIDE_RULE, sees_cell

    sees = sees_cell(c)
    if c.rule != ENGINE_WIDE_RULE or c.status != "pass" or not sees:
        return None
    delta = "" if c.delta is None else f" {c.delta:+.1%}"
    return (
        f"{c.key}: {c.metric}{delta}: green rules out a change of {sees} or worse "
        "(named 9 times in 10), not a smaller one"
    )


def judge(
    pinned_dirs: Path | Sequence[Path], candidate_dir: Path
) -> tuple[list[Any], list[str], dict[str, int]]:
    """(failed checks to blame on the candidate, notes, status counts): the candidate results
    judged by the verdict module against the pinned runs of the same night (all their starts). An
    item whose fingerprint differs from the pinned run's (stale) fails: it was not compared, and
    "not compared" is not a pass; a gated check that could not be evaluated is a note."""
    from specperf import verdict

    dirs = [pinned_dirs] if isinstance(pinned_dirs, Path) else list(pinned_dirs)
    runs = []
    for d in dirs:
        run = verdict.load_results([d])
        if not run:
            raise SpecperfError(f"{d}: the pinned run wrote no item results")
        runs.append(run)
    pinned: dict[str, Any] = {}  # every item any pinned run measured (the first run's result)
    for run in reversed(runs):
        pinned.update(run)
    cand = verdict.load_results([candidate_dir]) if candidate_dir.is_dir() else {}
    snap = verdict.read_suite_snapshot(dirs[:1])
    policies = verdict.policies_from_snapshot(snap)
    bf = baseline_from_results(runs, policies)
    notes: list[str] = []
    if len(runs) < MIN_BASELINE_STARTS:
        notes.append(
            f"judged against {len(runs)} pinned run(s): fewer than {MIN_BASELINE_STARTS} "
            "starts per item, so the baseline gates are report-only (--pinned-runs 3 brackets "
            "the candidate and arms them)"
        )
    fails: list[Any] = []
    counts: dict[str, int] = {}
    if cand:
        v = verdict.evaluate_results([candidate_dir], baselines=bf)
        pinned_rule_fails = {
            (c.key, c.rule)
            for d in dirs
            for c in verdict.evaluate_results([d], baselines=bf).failed
            if c.rule
        }
        for c in v.checks:
            counts[c.status] = counts.get(c.status, 0) + 1
            if c.status != "fail":
                continue
            if c.rule and (c.key, c.rule) in pinned_rule_fails:
                notes.append(f"also fails with the pinned version (not blamed): {c.line()}")
                continue
            fails.append(c)
        for c in v.checks:
            if c.status == "missing" and c.metric == "baseline":
                notes.append(f"{c.key}: no pinned result to compare with")
            elif c.status == "stale":
                # measured differently from the pinned run (the fingerprint says how): nothing
                # of the item was compared, so the release is not shown to be as good
                fails.append(c)
            elif c.status == "not_evaluated" and c.gated:
                notes.append(f"not evaluated (gated): {c.line()}")
            elif note := what_green_rules_out(c):
                notes.append(note)
    for k in sorted(set(pinned) - set(cand)):
        fails.append(
            verdict.Check(
                k,
                "result",
                "fail",
                reason="measured with the pinned version but not with the candidate",
                engine_version=None,
                baseline_engine_version=pinned[k].engine_version,
            )
        )
    compared = sum(n for s, n in counts.items() if s in ("pass", "fail", "xfail", "info"))
    if not compared and not fails:
        raise SpecperfError(f"{candidate_dir}: nothing could be compared with the pinned run")
    return fails, notes, counts
