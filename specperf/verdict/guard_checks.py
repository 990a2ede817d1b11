"""Quality guards as rules: specperf.guards computes, this turns a GuardResult into a Check (a
guard that could not be evaluated is "not_evaluated", never a pass; one that cannot fail in
this run, the MAL-collapse guard whose peers accept nothing, is counted as switched off)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from specperf.config import ItemKey, Rule
from specperf.verdict.checks import Check
from specperf.verdict.results import ItemResult, unusable


def evaluate_guard(
    rule: Rule, key: ItemKey, res: ItemResult, results: Mapping[str, ItemResult], c: Check
) -> Check:
    """Quality guards: specperf.guards computes, this turns a GuardResult into a Check (a guard
    that could not be evaluated is "not_evaluated", never a pass)."""
    from specperf import guards

    c.metric = f"rule:{rule.id} {rule.guard}"
    if rule.guard == "mal_collapse":
        peers = [
            r.summary
            for r in results.values()
            if r.key != key
            and dataclasses.replace(r.key, concurrency=0) == dataclasses.replace(key, concurrency=0)
            and unusable(r) is None
        ]
        kw = {"min_share": rule.min} if rule.min is not None else {}
        g = guards.mal_collapse(res.summary, peers, res.requests(), **kw)
        c = _guard_check(c, g)
        peer_mals = list(((g.details or {}).get("peers") or {}).values())
        if g.passed and g.value is None and peer_mals:
            # the peers accept nothing (MAL <= 1.0): there is no level to collapse from, so the
            # guard cannot fail; counted as switched off, never shown as a pass
            c.status, c.gated = "not_evaluated", False
            c.switched_off = "mal-collapse guard: peers accept nothing"
            c.reason = (
                f"peers' MAL {', '.join(f'{float(m):.2f}' for m in peer_mals)} (<= 1.0): "
                "nothing to collapse from, the guard cannot fail; " + c.reason
            )
        return c
    native = results.get(key.native().as_str())
    native_recs = native.requests() if native is not None and unusable(native) is None else None
    if rule.guard == "gsm8k_accuracy":
        refs = _dataset_references(res)
        if not refs:
            c.reason = "no GSM8K references for this dataset"
            return c
        kw = {"min_accuracy": rule.min} if rule.min is not None else {}
        return _guard_check(
            c, guards.gsm8k_accuracy(res.requests(), refs, native=native_recs, **kw)
        )
    if native_recs is None:
        c.reason = f"native ({key.native().as_str()}) {unusable(native) or 'has no requests'}"
        return c
    if rule.guard == "greedy_match":
        temp = (res.summary.get("sampling") or {}).get("temperature")
        if temp not in (0, 0.0):
            c.reason = f"greedy match needs temperature 0 (this run: {temp})"
            return c
        kw = {"min_rate": rule.min} if rule.min is not None else {}
        return _guard_check(c, guards.greedy_equivalence(res.requests(), native_recs, **kw))
    if rule.guard == "degenerate":
        kw = {"max_excess": rule.max} if rule.max is not None else {}
        return _guard_check(c, guards.degenerate_outputs(res.requests(), native_recs, **kw))
    c.reason = f"unknown guard {rule.guard}"
    return c


def _guard_check(c: Check, g: Any) -> Check:
    c.measured, c.baseline = g.value, g.threshold
    c.reason = g.message
    c.status = "not_evaluated" if g.passed is None else ("pass" if g.passed else "fail")
    return c


def _dataset_references(res: ItemResult) -> dict[str, str]:
    from specperf import datasets

    try:
        ds = datasets.load_dataset(res.key.dataset, tier=res.summary.get("tier", "full"))
    except Exception:  # no references: the guard is then not evaluated
        return {}
    return {it.id: it.reference for it in ds.items if it.reference}
