"""Judging the candidate release: the pinned run of the same night as an in-memory baseline,
and the verdict module's checks of the candidate against it."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from specperf.errors import SpecperfError


def baseline_from_results(pinned: Mapping[str, Any], policies: Mapping[str, Any]) -> Any:
    """The pinned run as an in-memory baseline file (one entry per item key)."""
    from specperf.baselines import BaselineFile, make_entry
    from specperf.verdict import figure

    bf = BaselineFile(Path("<pinned run>"))
    for k, res in pinned.items():
        figures = res.figures or {m: {"value": figure(res.summary, m)} for m in policies}
        bf.entries[k] = make_entry(
            res.key,
            figures,
            policies,
            fingerprint=res.fingerprint,
            provenance={
                "source": "measured",
                "engine_version": res.engine_version,
                "note": "pinned engine, same night and machine (release watch)",
                # measured beside the candidate: one host state, so a one-day baseline gates
                "same_window": True,
            },
            hardware_profile=res.hardware_profile or "unknown",
        )
    return bf


def judge(pinned_dir: Path, candidate_dir: Path) -> tuple[list[Any], list[str], dict[str, int]]:
    """(failed checks to blame on the candidate, notes, status counts): the candidate results
    judged by the verdict module against the pinned results of the same night. An item whose
    fingerprint differs from the pinned run's (stale) fails: it was not compared, and "not
    compared" is not a pass; a gated check that could not be evaluated is a note."""
    from specperf import verdict

    pinned = verdict.load_results([pinned_dir])
    if not pinned:
        raise SpecperfError(f"{pinned_dir}: the pinned run wrote no item results")
    cand = verdict.load_results([candidate_dir]) if candidate_dir.is_dir() else {}
    snap = verdict.read_suite_snapshot([pinned_dir])
    policies = verdict.policies_from_snapshot(snap)
    bf = baseline_from_results(pinned, policies)
    notes: list[str] = []
    fails: list[Any] = []
    counts: dict[str, int] = {}
    if cand:
        v = verdict.evaluate_results([candidate_dir], baselines=bf)
        own = verdict.evaluate_results([pinned_dir], baselines=bf)
        pinned_rule_fails = {(c.key, c.rule) for c in own.failed if c.rule}
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
