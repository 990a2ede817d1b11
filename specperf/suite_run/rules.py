"""The checks judged once every item of a suite run is done (the controller's end of the run):
same-run rules over all items and the engine-wide checks, merged with what the items reported."""

from __future__ import annotations

from pathlib import Path

from specperf import baselines as bl
from specperf import verdict as vd
from specperf.config import Suite


def run_level_checks(suite: Suite, results_dir: Path, baselines_file: Path) -> list[vd.Check]:
    """Every same-run rule over every item of the run, once all items are done: cross-engine
    rules, rules whose inputs were measured on another worker (``group_by = "method"``), and
    the engine-wide checks (a geometric mean over each engine's items)."""
    results = vd.load_results([results_dir]) if results_dir.exists() else {}
    if not results:
        return []
    bfile = bl.load_baselines(baselines_file)
    rules = list(suite.rules) + list(bfile.rules)
    alpha = vd.suite_levels(suite)
    selected = vd.selected_from_snapshots([results_dir])
    out = (
        vd.evaluate_rules(rules, results, known_issues=suite.known_issues, selected=selected)
        if rules
        else []
    )
    return out + vd.engine_wide_checks(results, bfile, suite.metrics, alpha=alpha.engine_wide)


def merge_rule_checks(
    item_checks: list[vd.Check], run_checks: list[vd.Check], *, strict: bool = False
) -> tuple[list[vd.Check], list[vd.Check]]:
    """(all checks, newly failed): run-level rule checks replace the item-level ones with the
    same key and rule; "newly failed" are failures no item reported (they fail the run).
    Under ``strict`` (--strict-baselines) a gated run-level check that could not be judged
    fails the run too, as ``specperf verdict --strict-baselines`` counts it."""
    by = {(c.key, c.rule): c for c in item_checks if c.rule}
    out = [c for c in item_checks if not c.rule]
    seen = set()
    new_fail = []
    for c in run_checks:
        before = by.get((c.key, c.rule))
        seen.add((c.key, c.rule))
        unjudged = strict and bool(vd.gated_not_evaluated([c]))
        if (c.status == "fail" or unjudged) and (before is None or before.status != "fail"):
            new_fail.append(c)
        out.append(c)
    out += [c for k, c in by.items() if k not in seen]
    return out, new_fail
