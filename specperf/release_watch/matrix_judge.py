"""Judging a release matrix: every cell (release × item × metric) against the matrix's own
reference runs and against the previous release, by the verdict module.

Against the reference: the finished reference runs become an in-memory baseline, all their
starts (``judging.baseline_from_results``), and ``verdict.evaluate_results`` judges a candidate
run against it — the speeds once three reference starts exist, the same-run rules (guards) in
the candidate's own run, the engine-wide check over all items of the engine. Never a stored
baseline file.

Exact metrics (MAL, acceptance rate, per-position acceptance, output tokens: at temperature 0
on one host and one build they move only when the engine's arithmetic or algorithm changed) are
compared exactly where the reference's own runs agree on the item's value: identical is
``same``; a difference is ``changed``, and ``fail`` when it is a change in the bad direction of
at least the suite's tolerance (``verdict.compare``). Where the reference's runs disagree, the
row is "reference not repeatable" for the whole matrix and those cells keep the verdict
module's tolerance verdict instead.

Against the previous release (the nearest older release with results): exact metrics as above;
speeds and latencies are shown as a change only (``info``): speed is judged against the
interleaved reference runs alone.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specperf import verdict
from specperf.config import ItemKey, MetricPolicy
from specperf.release_watch.judging import baseline_from_results
from specperf.release_watch.matrix_model import (
    Cell,
    Matrix,
    ReleaseRow,
    Stack,
    Verdict,
)
from specperf.release_watch.matrix_run import has_results, start_failures
from specperf.verdict import ENGINE_WIDE_RULE, EPS, Check, ItemResult

MAL = "mean_acceptance_length"
RATE = "acceptance_rate"
TOKENS = "output_tokens"
TOKS = "output_throughput_tok_s"
POSITION = "per_position_acceptance"
GREEDY = "greedy_match"
ENGINE_WIDE = f"engine-wide {TOKS}"
EXACT = (MAL, RATE, TOKENS)


def family(metric: str) -> str:
    if metric == MAL:
        return "mal"
    if metric == RATE:
        return "acceptance"
    if metric.startswith(POSITION):
        return "positions"
    if metric == TOKENS:
        return "tokens"
    if metric == GREEDY:
        return "greedy"
    if metric in (TOKS, ENGINE_WIDE):
        return "speed"
    if metric.startswith(("ttft_ms", "tpot_ms")):
        return "latency"
    return "other"


def is_exact(metric: str) -> bool:
    return metric in EXACT or metric.startswith(POSITION)


def position_metric(i: int) -> str:
    return f"{POSITION}[{i + 1}]"


# --------------------------------------------------------------------------- one run's values
Values = dict[tuple[str, str], list[float]]


def run_values(results: Mapping[str, ItemResult], policies: Mapping[str, MetricPolicy]) -> Values:
    """(item, metric) -> values per engine start of one run: every policy metric (the figure's
    starts, else its value) and each position of the per-position acceptance."""
    out: Values = {}
    for key, res in results.items():
        for metric in policies:
            fig = res.figures.get(metric) or {}
            starts = [float(v) for v in fig.get("starts") or [] if v is not None]
            value = res.value(metric)
            if starts or value is not None:
                out[(key, metric)] = starts or [float(value)]  # type: ignore[arg-type]
        positions = res.summary.get(POSITION)
        if isinstance(positions, list):
            for i, v in enumerate(positions):
                if isinstance(v, int | float) and not isinstance(v, bool):
                    out[(key, position_metric(i))] = [float(v)]
    return out


def rule_values(checks: Sequence[Check]) -> Values:
    """The greedy-match guard's measured share per item, from a run's rule checks."""
    out: Values = {}
    for c in checks:
        if c.rule and c.metric.endswith(f" {GREEDY}") and c.measured is not None:
            out[(c.key, GREEDY)] = [float(c.measured)]
    return out


def _stack(results: Mapping[str, ItemResult]) -> Stack:
    """Engine, torch (and its build) and transformers versions from a run's summaries: the
    engine's reported version, and the engine environment's record
    (``environment.engine.env``: its ``torch_build`` and package ``versions``), else the first
    ``torch`` / ``transformers`` / ``torch_build`` text anywhere in the environment record."""
    found: dict[str, str] = {}

    def walk(node: Any) -> None:
        if isinstance(node, Mapping):
            for k, v in node.items():
                if k in ("torch", "transformers", "torch_build") and isinstance(v, str):
                    found.setdefault(k, v)
                else:
                    walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    engine = None
    for res in results.values():
        engine = engine or res.engine_version
        env = res.summary.get("environment") or {}
        walk(((env.get("engine") or {}).get("env")) or {})
        walk(env)
    return Stack(
        engine=engine,
        torch=found.get("torch"),
        torch_build=found.get("torch_build"),
        transformers=found.get("transformers"),
    )


# --------------------------------------------------------------------------- the reference
@dataclass
class Reference:
    """The reference runs as the comparand: an in-memory baseline (one pass per run), their
    values per (item, metric), and which exact rows the runs agree on."""

    release: str
    dirs: list[Path]
    runs: list[dict[str, ItemResult]]
    policies: dict[str, MetricPolicy]
    baseline: Any
    values: Values = field(default_factory=dict)
    rule_fails: set[tuple[str, str]] = field(default_factory=set)
    not_repeatable: dict[tuple[str, str], str] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"reference {self.release} ({len(self.dirs)} run(s))"

    @classmethod
    def from_dirs(cls, release: str, dirs: Sequence[Path]) -> Reference:
        runs = [verdict.load_results([d]) for d in dirs]
        snap = verdict.read_suite_snapshot(list(dirs)[:1])
        policies = verdict.policies_from_snapshot(snap)
        ref = cls(release, list(dirs), runs, policies, baseline_from_results(runs, policies))
        per_run: list[Values] = []
        for d, run in zip(dirs, runs, strict=True):
            checks = verdict.evaluate_results([d], baselines=ref.baseline).checks
            ref.rule_fails |= {(c.key, c.rule) for c in checks if c.rule and c.failed}
            per_run.append({**run_values(run, policies), **rule_values(checks)})
        for vals in per_run:
            for k, v in vals.items():
                ref.values.setdefault(k, []).extend(v)
        for k, v in ref.values.items():
            if not is_exact(k[1]) and k[1] != GREEDY:
                continue
            seen = sum(1 for vals in per_run if k in vals)
            if seen < 2:
                ref.not_repeatable[k] = f"reference not repeatable: measured in {seen} run(s)"
            elif max(v) - min(v) > EPS * max(1.0, abs(max(v))):
                ref.not_repeatable[k] = (
                    f"reference not repeatable: {min(v):.6g} … {max(v):.6g} over {seen} runs"
                )
        return ref

    def value(self, k: tuple[str, str]) -> float | None:
        v = self.values.get(k)
        return statistics.median(v) if v else None


# --------------------------------------------------------------------------- verdicts
def exact_verdict(measured: float, base: float, pol: MetricPolicy | None, against: str) -> Verdict:
    """same / changed / fail for an exact metric (see the module doc)."""
    differs, delta = verdict.compare(measured, base, "equal", 0.0)
    if not differs:
        return Verdict(status="same", against=against, method="exact", delta=delta)
    regressed = False
    if pol is not None and pol.gate != "never" and pol.direction != "equal":
        regressed, _ = verdict.compare(measured, base, pol.direction, pol.tolerance)
    elif pol is not None and pol.gate != "never":
        regressed, _ = verdict.compare(measured, base, "equal", pol.tolerance)
    tol = f" (suite tolerance {pol.tolerance:.1%})" if pol is not None else ""
    return Verdict(
        status="fail" if regressed else "changed",
        against=against,
        method="exact",
        delta=delta,
        reason=f"{measured:.6g} vs {base:.6g}{tol}",
    )


def _from_check(c: Check, against: str, method: str = "verdict") -> Verdict:
    return Verdict(status=c.status, against=against, method=method, delta=c.delta, reason=c.line())


def judge_run(ref: Reference, run_dir: Path) -> tuple[dict[tuple[str, str], Verdict], Values]:
    """One run against the reference: the verdict of every (item, metric) it measured, and its
    values. Items the reference measured and this run did not are ``not_evaluated``."""
    results = verdict.load_results([run_dir])
    v = verdict.evaluate_results([run_dir], baselines=ref.baseline)
    values = {**run_values(results, ref.policies), **rule_values(v.checks)}
    out: dict[tuple[str, str], Verdict] = {}
    item_state: dict[str, Check] = {}
    for c in v.checks:
        if c.metric == "baseline" and c.status in ("stale", "missing"):
            item_state[c.key] = c
    for c in v.checks:
        if c.rule == ENGINE_WIDE_RULE:
            if c.metric == ENGINE_WIDE:
                out[(c.key, ENGINE_WIDE)] = _from_check(c, ref.label)
                if c.measured is not None:
                    values[(c.key, ENGINE_WIDE)] = [float(c.measured)]
            continue
        if c.rule:
            metric = GREEDY if c.metric.endswith(f" {GREEDY}") else c.metric
            vd = _from_check(c, ref.label, "same-run rule")
            if c.failed and (c.key, c.rule) in ref.rule_fails:
                vd.status = "info"
                vd.reason = f"also fails with the reference (not blamed): {c.line()}"
            out[(c.key, metric)] = vd
            continue
        if c.key in item_state or c.metric not in ref.policies:
            continue
        out[(c.key, c.metric)] = _from_check(c, ref.label)
    for key, c in item_state.items():
        for k in [k for k in values if k[0] == key]:
            out[k] = _from_check(c, ref.label)
    for k, vals in values.items():
        base = ref.value(k)
        if not is_exact(k[1]) or k[0] in item_state:
            continue
        if k in ref.not_repeatable:
            prev = out.get(k)
            reason = ref.not_repeatable[k] + (f"; {prev.reason}" if prev else "")
            status = prev.status if prev else "not_evaluated"
            out[k] = Verdict(
                status=status,
                against=ref.label,
                method="verdict" if prev else "none",
                delta=prev.delta if prev else None,
                reason=reason,
            )
        elif base is None:
            out[k] = Verdict(
                status="missing", against=ref.label, method="none", reason="not in the reference"
            )
        else:
            out[k] = exact_verdict(statistics.median(vals), base, ref.policies.get(k[1]), ref.label)
    refused = start_failures(run_dir)
    for key in {k[0] for k in ref.values} - set(results) - {k[0] for k in values}:
        if key.startswith("engine "):
            continue
        method = ItemKey.parse(key).method
        why = f"NOT EVALUATED: {refused[method]}" if method in refused else ""
        for k in [k for k in ref.values if k[0] == key]:
            out[k] = Verdict(
                status="not_evaluated",
                against=ref.label,
                method="none",
                reason=why or "not measured by this release's run",
            )
    return out, values


def previous_verdict(
    k: tuple[str, str],
    value: float | None,
    prev_value: float | None,
    prev_release: str,
    ref: Reference,
) -> Verdict:
    """A cell against the previous release's cell (see the module doc)."""
    against = f"previous {prev_release}"
    if value is None or prev_value is None:
        return Verdict(
            status="missing", against=against, method="none", reason="no value on one side"
        )
    if is_exact(k[1]) or k[1] == GREEDY:
        if k in ref.not_repeatable:
            return Verdict(
                status="not_evaluated", against=against, method="none", reason=ref.not_repeatable[k]
            )
        return exact_verdict(value, prev_value, ref.policies.get(k[1]), against)
    _, delta = verdict.compare(value, prev_value, "equal", 0.0)
    return Verdict(
        status="info",
        against=against,
        method="none",
        delta=delta,
        reason="speed is judged against the interleaved reference runs only",
    )


# --------------------------------------------------------------------------- the matrix
def reference_of(m: Matrix) -> Reference | None:
    dirs = [Path(r.results_dir) for r in m.done(m.reference, "reference")]
    dirs = [d for d in dirs if has_results(d)]
    return Reference.from_dirs(m.reference, dirs) if dirs else None


def judge_matrix(m: Matrix) -> Reference | None:
    """Fill ``m.cells``, ``m.rows`` and ``m.not_repeatable`` from the runs on disk (None: no
    reference run finished, nothing judged). A candidate's cells come from its first finished
    run; the reference's from all of its runs."""
    ref = reference_of(m)
    m.cells, m.rows, m.not_repeatable = [], [], []
    per_release: dict[str, tuple[dict[tuple[str, str], Verdict], Values]] = {}
    for rel in m.releases:
        done = [r for r in m.done(rel) if has_results(r.results_dir)]
        role = "reference" if rel == m.reference else "candidate"
        row = ReleaseRow(release=rel, role=role, status="not run", runs=len(done))
        m.rows.append(row)
        if rel in m.not_installable:
            row.status, row.reason = "not installable", m.not_installable[rel]
            continue
        if not done:
            for status in ("not_evaluated", "failed"):
                runs = [r for r in m.runs_of(rel) if r.status == status]
                if runs:
                    row.status, row.reason = status.replace("_", " "), runs[0].reason or ""
                    break
            continue
        row.stack = _stack(verdict.load_results([Path(done[0].results_dir)]))
        for r in done:
            r.stack = _stack(verdict.load_results([Path(r.results_dir)]))
        if ref is None:
            continue
        if role == "reference":
            row.status = "reference"
            vals = dict(ref.values)
            ew = {k[0] for k in vals if k[1] == TOKS}
            for key in {f"engine {ItemKey.parse(k).engine}" for k in ew}:
                vals[(key, ENGINE_WIDE)] = [1.0]
            per_release[rel] = ({}, vals)
        else:
            per_release[rel] = judge_run(ref, Path(done[0].results_dir))
    if ref is None:
        m.notes.append("no reference run finished: nothing was judged")
        return None
    m.not_repeatable = sorted(f"{k[0]} | {k[1]}: {why}" for k, why in ref.not_repeatable.items())
    prev: str | None = None
    for rel in m.releases:
        if rel not in per_release:
            continue
        verdicts, values = per_release[rel]
        prev_values = per_release[prev][1] if prev else {}
        for k in sorted(set(values) | set(verdicts)):
            vals = values.get(k, [])
            value = statistics.median(vals) if vals else None
            cell = Cell(
                release=rel,
                item=k[0],
                metric=k[1],
                family=family(k[1]),
                values=vals,
                value=value,
                vs_reference=verdicts.get(k)
                or (
                    Verdict(status="reference", against=ref.label, method="none")
                    if rel == m.reference
                    else None
                ),
            )
            if prev is not None:
                pv = prev_values.get(k)
                cell.vs_previous = previous_verdict(
                    k, value, statistics.median(pv) if pv else None, prev, ref
                )
            m.cells.append(cell)
        row = m.row(rel)
        if row is not None and row.role == "candidate":
            mine = [c for c in m.cells if c.release == rel and c.vs_reference]
            fails = [c for c in mine if c.vs_reference.status == "fail"]  # type: ignore[union-attr]
            changed = [c for c in mine if c.vs_reference.status == "changed"]  # type: ignore[union-attr]
            # items the reference measured that this release did not (a method it refused):
            # the release is not shown to be as good there, so it is not a plain pass
            unmeasured = sorted(
                {c.item for c in mine if c.value is None and c.vs_reference.method == "none"}  # type: ignore[union-attr]
            )
            row.status = (
                "regression"
                if fails
                else "changed" if changed else "incomplete" if unmeasured else "pass"
            )
            row.reason = "; ".join(
                f"{c.item}: {c.metric} {c.vs_reference.status}"  # type: ignore[union-attr]
                + ("" if c.vs_reference.delta is None else f" {c.vs_reference.delta:+.1%}")  # type: ignore[union-attr]
                for c in (fails + changed)[:5]
            )
            if row.status == "incomplete":
                row.reason = f"not evaluated: {', '.join(unmeasured)}"
        prev = rel
    return ref


def exit_code(m: Matrix) -> int:
    """1: a candidate regressed against the reference; 2: no candidate could be judged."""
    cands = [r for r in m.rows if r.role == "candidate"]
    if any(r.status == "regression" for r in cands):
        return 1
    if not any(r.status in ("pass", "changed", "incomplete") for r in cands):
        return 2
    return 0
