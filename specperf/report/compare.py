"""Comparisons: this run vs a baseline file, vs the verdicts recorded during the run, and vs
other runs (e.g. vLLM 0.32 vs 0.33 on one GPU).

Every status, delta and tolerance comes from :mod:`specperf.verdict` (the ONE place rules are
evaluated). This module only chooses what to feed it and orders what comes back: regressions
first (worst first), then rule failures, expected failures, stale, not evaluated.

Run vs run: the other run's items become baseline entries (``baselines.make_entry`` with the
same metric policies) and each item of this run goes through ``verdict.evaluate_item``. Items
are matched by key; when the engine's suite name differs between the runs (e.g. ``vllm-0.32``
vs ``vllm-0.33``) an item matches the single item of the other run with the same model, engine
kind, method, dataset, concurrency and sampling. Because comparing two engines is the point,
the engine identity (label, kind) is not part of the comparability check there; every other
fingerprint field still is, and a difference makes the pair stale.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from specperf import verdict
from specperf.baselines import BaselineEntry, load_baselines, make_entry
from specperf.config import ItemKey
from specperf.errors import ConfigError

ENGINE_IDENTITY = ("engine_label", "engine_kind")
# Info checks are listed only when they moved beyond tolerance.
BEYOND = "beyond tolerance"


@dataclass
class Comparison:
    """Checks of this run against one reference, plus what could not be compared."""

    title: str
    reference: str
    checks: list[verdict.Check]
    notes: list[str] = field(default_factory=list)
    side_by_side: pd.DataFrame | None = None
    column: str = "baseline"  # what the reference value is called in tables
    id: str = "baseline"  # section id suffix

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for c in self.checks:
            out[c.status] = out.get(c.status, 0) + 1
        return out

    @property
    def regressions(self) -> list[verdict.Check]:
        return [c for c in ordered(self.checks) if is_regression(c)]


def is_regression(c: verdict.Check) -> bool:
    """A failed comparison of a measured figure with a reference value (not a rule)."""
    return c.status == "fail" and c.rule is None and c.baseline is not None


def _badness(c: verdict.Check) -> float:
    """How far in the bad direction a check moved (bigger is worse), for ordering only."""
    if c.delta is None or math.isinf(c.delta):
        return 0.0
    if c.direction == "higher":
        return -c.delta
    if c.direction == "lower":
        return c.delta
    return abs(c.delta)


def ordered(checks: Sequence[verdict.Check]) -> list[verdict.Check]:
    """Regressions first (worst first), then the verdict module's status order."""
    return sorted(
        checks,
        key=lambda c: (
            0 if is_regression(c) else 1,
            verdict.STATUS_ORDER.get(c.status, 9),
            -_badness(c),
            c.key,
            c.metric,
        ),
    )


def visible(checks: Sequence[verdict.Check]) -> list[verdict.Check]:
    """What a reader needs to see: every non-pass check except routine "info" lines and
    "missing" (those are counted in a note)."""
    return [
        c
        for c in checks
        if c.status not in ("pass", "missing") and (c.status != "info" or BEYOND in c.reason)
    ]


def checks_frame(checks: Sequence[verdict.Check], reference: str = "baseline") -> pd.DataFrame:
    """Checks as a table, regressions first."""
    rows = []
    for c in ordered(checks):
        rows.append(
            {
                "verdict": c.status.upper().replace("_", " "),
                "key": c.key,
                "metric": c.metric,
                "measured": c.measured,
                reference: c.baseline,
                "delta": None if c.delta is None or math.isinf(c.delta) else c.delta,
                "tolerance": c.tolerance,
                "interval": f"{c.interval[0]:.4g}–{c.interval[1]:.4g}" if c.interval else "",
                "engine": c.engine_version or "",
                f"{reference} engine": c.baseline_engine_version or "",
                "why": c.reason,
            }
        )
    return pd.DataFrame(rows)


def _notes(checks: Sequence[verdict.Check], what: str) -> list[str]:
    notes = []
    missing = sorted({c.key for c in checks if c.status == "missing"})
    if missing:
        shown = ", ".join(missing[:12]) + (
            f" and {len(missing) - 12} more" if len(missing) > 12 else ""
        )
        notes.append(f"{len(missing)} items have no {what}: {shown}")
    passed = sum(c.status == "pass" for c in checks)
    info = sum(c.status == "info" and BEYOND not in c.reason for c in checks)
    notes.append(f"{passed} checks passed; {info} reported-only figures stayed within tolerance")
    return notes


# --------------------------------------------------------------------------- vs baseline
def against_baseline(dirs: Sequence[Path], baseline: Path) -> Comparison:
    """Every item against a baseline file, plus the suite's same-run rules."""
    if not baseline.is_file():
        raise ConfigError(f"--baseline {baseline}: no such file")
    bf = load_baselines(baseline)  # a malformed file is the user's error: it propagates
    try:
        v = verdict.evaluate_results(list(dirs), baselines=bf)
    except ConfigError as exc:  # e.g. `specperf bench` summaries: no suite keys to judge
        return Comparison(
            f"Comparison with baseline {baseline.name}", str(baseline), [], [str(exc)]
        )
    return Comparison(
        f"Comparison with baseline {baseline.name}",
        str(baseline),
        v.checks,
        _notes(v.checks, "baseline entry"),
    )


def recorded(dirs: Sequence[Path]) -> Comparison | None:
    """The verdicts the suite appended to ``verdicts.jsonl`` during the run (None if absent)."""
    from specperf.report.load import read_jsonl

    checks = []
    for d in dirs:
        f = Path(d) / verdict.VERDICTS
        if f.is_file():
            checks += [verdict.Check.from_json(row) for row in read_jsonl(f)]
    if not checks:
        return None
    return Comparison(
        "Verdicts recorded by the suite during the run",
        ", ".join(str(d / verdict.VERDICTS) for d in dirs),
        checks,
        _notes(checks, "baseline entry"),
        id="recorded",
    )


def rules_only(dirs: Sequence[Path]) -> Comparison | None:
    """No baseline and no recorded verdicts: the same-run rules of the suite snapshot still
    apply (speedup floors, cross-engine, guards)."""
    try:
        v = verdict.evaluate_results(list(dirs))
    except ConfigError:
        return None
    checks = [c for c in v.checks if c.rule or c.metric in ("engine", "failed_requests")]
    return Comparison(
        "Same-run rules (no baseline given)",
        "suite.json",
        checks,
        ["No baseline: pass --baseline FILE to compare with stored figures."],
        id="rules",
    )


# --------------------------------------------------------------------------- vs another run
def _loose(k: ItemKey) -> tuple[Any, ...]:
    return (k.model, k.method, k.dataset, k.concurrency, k.sampling)


def _match(
    cur: dict[str, verdict.ItemResult], other: dict[str, verdict.ItemResult]
) -> dict[str, verdict.ItemResult]:
    """Current key → the other run's item it is compared with."""
    loose: dict[tuple[Any, ...], list[verdict.ItemResult]] = {}
    for r in other.values():
        kind = r.summary.get("engine")
        loose.setdefault((kind, *_loose(r.key)), []).append(r)
    out = {}
    for k, r in cur.items():
        if k in other:
            out[k] = other[k]
            continue
        cands = loose.get((r.summary.get("engine"), *_loose(r.key)), [])
        if len(cands) == 1:
            out[k] = cands[0]
    return out


def _entry_from(
    other: verdict.ItemResult, cur: verdict.ItemResult, policies: dict[str, Any], label: str
) -> BaselineEntry:
    fp = dict(other.fingerprint)
    if cur.key != other.key:  # matched across engine names: the engines are what is compared
        for f in ENGINE_IDENTITY:
            if f in cur.fingerprint:
                fp[f] = cur.fingerprint[f]
    figures = other.figures or verdict.aggregate([other.summary], policies, other.requests())
    return make_entry(
        cur.key,
        figures,
        policies,
        fingerprint=fp,
        provenance={
            "engine_version": other.engine_version,
            "source": "measured",
            "run": label,
            "item": other.item_id,
        },
        hardware_profile=other.hardware_profile or "unknown",
    )


def against_run(dirs: Sequence[Path], other_dirs: Sequence[Path], label: str) -> Comparison:
    cur = verdict.load_results(dirs)
    oth = verdict.load_results(other_dirs)
    if not cur or not oth:
        which = dirs if not cur else other_dirs
        return Comparison(
            f"Comparison with {label}",
            label,
            [],
            [f"{', '.join(map(str, which))}: no suite items (summaries without a key)"],
            column="other",
            id=f"run-{label}",
        )
    snap = verdict.read_suite_snapshot(dirs)
    policies = verdict.policies_from_snapshot(snap)
    issues = verdict.known_issues_from_snapshot(snap)
    matched = _match(cur, oth)
    checks: list[verdict.Check] = []
    rows = []
    for k in sorted(cur):
        res = cur[k]
        o = matched.get(k)
        entry = _entry_from(o, res, policies, label) if o is not None else None
        item_checks = verdict.evaluate_item(
            res, entry, policies, hardware_profile=res.hardware_profile, known_issues=issues
        )
        for c in item_checks:
            if c.status == "missing":
                c.reason = f"not measured in {label}"
        # checks that need no reference (failed requests) belong to the run's own verdict
        checks += [c for c in item_checks if c.metric not in ("engine", "failed_requests")]
        if o is not None:
            rows.append(_side_by_side(res, o, cur, oth))
    gone = sorted(set(oth) - {o.key.as_str() for o in matched.values()})
    notes = _notes(checks, f"counterpart in {label}")
    if gone:
        notes.append(
            f"{len(gone)} items of {label} were not measured in this run: " + ", ".join(gone[:12])
        )
    return Comparison(
        f"Comparison with {label}",
        label,
        checks,
        notes,
        pd.DataFrame(rows) if rows else None,
        column="other",
        id=f"run-{label}",
    )


def _speedup(r: verdict.ItemResult, results: dict[str, verdict.ItemResult]) -> float | None:
    native = results.get(r.key.native().as_str())
    if native is None or r.key.method == "native":
        return None
    a = r.value("output_throughput_tok_s")
    b = native.value("output_throughput_tok_s")
    return None if a is None or not b else a / b


def _side_by_side(
    cur: verdict.ItemResult,
    oth: verdict.ItemResult,
    cur_all: dict[str, verdict.ItemResult],
    oth_all: dict[str, verdict.ItemResult],
) -> dict[str, Any]:
    """The figures a person puts next to each other when comparing two versions."""
    row: dict[str, Any] = {
        "key": cur.key.as_str(),
        "engine": f"{cur.engine_version or '?'} vs {oth.engine_version or '?'}",
    }
    for metric, label, direction in (
        ("output_throughput_tok_s", "tok/s", "higher"),
        ("mean_acceptance_length", "MAL", "higher"),
        ("tpot_ms.p50", "TPOT p50", "lower"),
    ):
        a, b = cur.value(metric), oth.value(metric)
        row[f"{label} now"], row[f"{label} other"] = a, b
        row[f"Δ {label}"] = (
            verdict.compare(a, b, direction, 0.0)[1] if a is not None and b is not None else None
        )
    sa, sb = _speedup(cur, cur_all), _speedup(oth, oth_all)
    row["speedup now"], row["speedup other"] = sa, sb
    row["Δ speedup"] = verdict.compare(sa, sb, "higher", 0.0)[1] if sa and sb else None
    return row
