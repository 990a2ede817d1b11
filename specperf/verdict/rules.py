"""Same-run rules (speedup, cross-engine, floors, ceilings, guards): numbers of one run compared
with each other or with a bound, never with a baseline."""

from __future__ import annotations

import dataclasses
import datetime as _dt
from collections.abc import Collection, Iterable, Mapping

from specperf.config import ItemKey, KnownIssue, Rule
from specperf.schemas import NATIVE
from specperf.textfmt import number as fmt
from specperf.verdict.checks import EPS, Check, join
from specperf.verdict.guard_checks import evaluate_guard
from specperf.verdict.quarantine import quarantine
from specperf.verdict.results import ItemResult, unusable


def _rule_value(res: ItemResult, metric: str, results: Mapping[str, ItemResult]) -> float | None:
    if metric == "speedup":
        native = results.get(res.key.native().as_str())
        if native is None:
            return None
        a, b = res.value("output_throughput_tok_s"), native.value("output_throughput_tok_s")
        return None if a is None or not b else a / b
    return res.value(metric)


def _bound_check(c: Check, value: float, rule: Rule) -> Check:
    c.measured = value
    lo_bad = rule.min is not None and value < rule.min - EPS
    hi_bad = rule.max is not None and value > rule.max + EPS
    c.baseline = rule.min if rule.min is not None else rule.max
    c.direction = "higher" if rule.min is not None else "lower"
    if rule.min is not None and rule.max is not None:
        c.reason = join(c.reason, f"allowed {rule.min:g}–{rule.max:g}")
    c.status = "fail" if lo_bad or hi_bad else "pass"
    return c


def evaluate_rules(
    rules: Iterable[Rule],
    results: Mapping[str, ItemResult],
    *,
    subject: ItemKey | None = None,
    kinds: Iterable[str] | None = None,
    known_issues: Iterable[KnownIssue] = (),
    today: _dt.date | None = None,
    selected: Collection[str] | None = None,
) -> list[Check]:
    """Same-run rules over ``results``. ``subject`` limits them to the checks whose subject is
    that item (the plugin evaluates an item's own rules right after measuring it); ``kinds``
    limits the rule kinds. A rule whose inputs were not measured is "not_evaluated" and gated
    (it fails under --strict-baselines) — unless ``selected`` (the item keys the run selected)
    shows the run never asked for the missing reference: a ``--method ngram`` or ``-k`` run
    that leaves native out cannot judge "lossless vs native", and that is its scope, not a
    failure to measure; such a check is not evaluated and report-only, with the reason."""
    kinds = set(kinds) if kinds is not None else None
    wanted = set(selected) if selected is not None else None
    issues = list(known_issues)
    out: list[Check] = []
    for rule in rules:
        if kinds is not None and rule.kind not in kinds:
            continue
        subjects = _rule_subjects(rule, results, subject)
        if not subjects:
            if subject is None:
                out.append(_matches_nothing(rule, wanted))
            continue
        for key in subjects:
            res = results.get(key.as_str())
            c = (
                _not_selected(rule, key, results, wanted)
                or _no_peer_in_matrix(rule, key, results, wanted)
                or _evaluate_rule(rule, key, res, results)
            )
            rule_issues = ([rule.known_issue] if rule.known_issue else []) + issues
            out.append(quarantine(c, rule_issues, key, today))
    return out


def _matches_nothing(rule: Rule, wanted: set[str] | None) -> Check:
    """The row of a rule no measured item matches: report-only and counted as a gate that
    switched itself off. Where the run's selection is known and the rule's scope matches none
    of it either, the scope itself is suspect (a typo in a baseline file's rule)."""
    in_scope = [
        k for k in wanted or () if k.count("/") == 5 and ItemKey.parse(k).matches(rule.match)
    ]
    if wanted is not None and not in_scope:
        kind = "rule scope matches no item"
        why = (
            f"its scope {dict(rule.match)} matches no item this run selected (a filter left "
            "them out, a rule for another suite, or a typo in the scope)"
        )
    else:
        kind = "rule not measured"
        why = "no measured item matches the rule (none selected in this run)"
    return Check(
        f"rule {rule.id}",
        f"rule:{rule.id}",
        "not_evaluated",
        rule=rule.id,
        reason=why,
        gated=False,
        switched_off=kind,
    )


def _references(rule: Rule, key: ItemKey) -> list[ItemKey]:
    """The other items a rule on ``key`` compares with."""
    if rule.kind == "speedup" or (
        rule.kind == "guard" and rule.guard in ("greedy_match", "degenerate")
    ):
        return [key.native()]
    if rule.kind == "cross_engine":
        return [dataclasses.replace(key, engine=rule.reference_engine or "")]
    return []


def _not_selected(
    rule: Rule,
    key: ItemKey,
    results: Mapping[str, ItemResult],
    wanted: set[str] | None,
) -> Check | None:
    """A report-only "not evaluated" check when a reference this rule needs was not selected
    in this run (None when every reference was selected, measured, or selection is unknown)."""
    if wanted is None:
        return None
    gone = [
        r.as_str() for r in _references(rule, key)
        if r.as_str() not in results and r.as_str() not in wanted
    ]  # fmt: skip
    if not gone:
        return None
    return Check(
        key.as_str(),
        f"rule:{rule.id}",
        "not_evaluated",
        rule=rule.id,
        reason=f"{', '.join(gone)} not selected in this run (not in the suite's matrix, or a "
        "filter left it out): run it too to judge this rule",
        gated=False,
    )


def _no_peer_in_matrix(
    rule: Rule,
    key: ItemKey,
    results: Mapping[str, ItemResult],
    wanted: set[str] | None,
) -> Check | None:
    """A report-only "not evaluated" check when the MAL-collapse guard has nothing to compare:
    no item of this config at another concurrency was measured or selected (a dataset the suite
    runs at one concurrency only). That is the matrix's shape, not a failure to measure, so a
    --strict-baselines run is not red for it; a peer that was selected and produced nothing
    still leaves the guard a gated not-evaluated."""
    if rule.kind != "guard" or rule.guard != "mal_collapse":
        return None
    same = dataclasses.replace(key, concurrency=0)
    peers = [r.key for r in results.values()]
    peers += [ItemKey.parse(k) for k in wanted or () if k.count("/") == 5]
    if any(
        p.concurrency != key.concurrency and dataclasses.replace(p, concurrency=0) == same
        for p in peers
    ):
        return None
    return Check(
        key.as_str(),
        f"rule:{rule.id} {rule.guard}",
        "not_evaluated",
        rule=rule.id,
        reason="no item of this config at another concurrency in this run: nothing to compare "
        "(outside the rule's scope)",
        gated=False,
    )


def _rule_subjects(
    rule: Rule, results: Mapping[str, ItemResult], subject: ItemKey | None
) -> list[ItemKey]:
    keys = [r.key for r in results.values()]
    if subject is not None:
        keys = [subject]
    out = []
    for k in keys:
        if not k.matches(rule.match):
            continue
        if (
            rule.kind in ("speedup", "guard")
            and k.method == NATIVE
            and rule.guard != "gsm8k_accuracy"
        ):
            continue
        if rule.guard == "mal_collapse" and k.method == NATIVE:
            continue
        out.append(k)
    return out


def _evaluate_rule(
    rule: Rule, key: ItemKey, res: ItemResult | None, results: Mapping[str, ItemResult]
) -> Check:
    ks = key.as_str()
    ev = res.engine_version if res else None
    c = Check(ks, f"rule:{rule.id}", "not_evaluated", rule=rule.id, engine_version=ev)
    why = unusable(res)
    if why:
        c.reason = why
        return c
    assert res is not None
    if rule.kind == "speedup":
        native_key = key.native()
        why = unusable(results.get(native_key.as_str()))
        if why:
            c.reason = f"native ({native_key.as_str()}) {why}"
            return c
        value = _rule_value(res, "speedup", results)
        if value is None:
            c.reason = "throughput missing"
            return c
        c.metric = f"rule:{rule.id} speedup vs native"
        return _bound_check(c, value, rule)
    if rule.kind == "cross_engine":
        ref_key = dataclasses.replace(key, engine=rule.reference_engine or "")
        ref = results.get(ref_key.as_str())
        why = unusable(ref)
        if why:
            c.reason = f"reference {ref_key.as_str()} {why}"
            return c
        assert ref is not None
        mine, theirs = (
            _rule_value(res, rule.metric, results),
            _rule_value(ref, rule.metric, results),
        )
        if mine is None or theirs is None or theirs == 0:
            c.reason = f"{rule.metric} missing for {ks if mine is None else ref_key.as_str()}"
            return c
        c.metric = f"rule:{rule.id} {rule.metric} / {rule.reference_engine}'s"
        c.reason = f"{fmt(mine)} vs {fmt(theirs)} ({ref.engine_version or '?'})"
        return _bound_check(c, mine / theirs, rule)
    if rule.kind in ("floor", "ceiling"):
        value = _rule_value(res, rule.metric, results)
        if value is None:
            c.reason = f"{rule.metric} not measured"
            return c
        c.metric = f"rule:{rule.id} {rule.metric}"
        return _bound_check(c, value, rule)
    if rule.kind == "guard":
        return evaluate_guard(rule, key, res, results, c)
    c.reason = f"unknown rule kind {rule.kind}"
    return c
