"""The engine-wide check (one effect over all of an engine's items) and the per-check alpha:
the run's false-alarm budget spread over its gated statistical checks."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from specperf.baselines import BaselineFile, cannot_fail, fingerprint_diff
from specperf.config import ItemKey, MetricPolicy, Suite
from specperf.schemas import NATIVE
from specperf.verdict.checks import Check
from specperf.verdict.conditions import other_profile
from specperf.verdict.decision import DEFAULT_RUN_ALPHA
from specperf.verdict.engine_effect import engine_wide
from specperf.verdict.evidence import unarmed
from specperf.verdict.levels import AlphaSplit, split_alpha
from specperf.verdict.results import ItemResult, unusable

ENGINE_WIDE_METRICS = ("output_throughput_tok_s", "mean_acceptance_length")
ENGINE_WIDE_RULE = "engine-wide"  # Check.rule of every engine-wide check


def engine_wide_checks(
    results: Mapping[str, ItemResult],
    baselines: BaselineFile,
    policies: Mapping[str, MetricPolicy],
    *,
    alpha: float = DEFAULT_RUN_ALPHA,
    min_effect: float | None = None,
) -> list[Check]:
    """Per engine (the key's engine name) and metric: the geometric-mean ratio over the
    engine's comparable items (same fingerprint, no failed requests, a baseline the evidence
    rule arms: ``evidence.unarmed``), tested as one effect (``engine_effect.engine_wide``),
    items of one engine config (which share an engine start) counted as one unit. It sees a
    small uniform slowdown — a new release that costs every item 7 % — that no single noisy
    item can. An engine with one
    comparable item is judged too (at the engine-wide level ``check_alpha`` reserves for every
    engine): the H200 suite's decode-loop engine has one item, and a 10 % slowdown of it is
    what this check is for. An engine none of whose items is armed gets one report-only row
    with the first item's reason."""
    out: list[Check] = []
    by_engine: dict[str, list[ItemResult]] = {}
    for r in results.values():
        by_engine.setdefault(r.key.engine, []).append(r)
    for engine, items in sorted(by_engine.items()):
        for metric in ENGINE_WIDE_METRICS:
            pol = policies.get(metric)
            if pol is None or pol.gate == "never" or pol.direction not in ("higher", "lower"):
                continue
            groups = []
            units: list[str] = []
            unfit: list[str] = []
            shadow: list[tuple] = []  # items whose own baseline is not armed yet (report-only)
            shadow_units: list[str] = []
            for r in items:
                entry = baselines.get(r.key)
                fig = r.figures.get(metric) or {}
                if (
                    entry is None
                    or metric not in entry.metrics
                    or fingerprint_diff(entry.fingerprint, r.fingerprint)
                    or unusable(r) is not None
                    or fig.get("value") is None
                ):
                    continue
                bm = entry.metrics[metric]
                if bm.report_only or cannot_fail(metric, bm.value, bm.direction, pol.tolerance):
                    continue
                if other_profile(bm.hardware_profile, r.hardware_profile):
                    unfit.append(
                        f"baseline measured on {bm.hardware_profile}, this is {r.hardware_profile}"
                    )
                    continue
                group = (
                    fig.get("starts") or [fig["value"]],
                    entry.start_values(metric),
                    entry.start_passes(metric),
                )
                # items of one engine config share its start(s) in a run: one unit
                unit = r.summary.get("spec_digest") or r.key.method
                why = unarmed(r.summary, entry, metric, pol)  # the items' own evidence rule
                if why:
                    unfit.append(why)
                    shadow.append(group)
                    shadow_units.append(unit)
                    continue
                groups.append(group)
                units.append(unit)
            effect = pol.tolerance if min_effect is None else min_effect
            if not groups:
                if unfit:  # said once for the engine, report-only like its items' rows
                    out.append(
                        _report_only(engine, metric, pol, effect, unfit[0], shadow, shadow_units)
                    )
                continue
            d = engine_wide(groups, pol.direction, min_effect=effect, alpha=alpha, units=units)
            c = Check(
                f"engine {engine}",
                f"engine-wide {metric}",
                "not_evaluated" if d.regressed is None else ("fail" if d.regressed else "pass"),
                measured=None if d.ratio is None else d.ratio,
                baseline=1.0,
                delta=d.delta,
                tolerance=effect,
                direction=pol.direction,
                interval=d.interval,
                interval_method="95 % t interval of the geometric-mean ratio",
                reason=d.describe(),
                rule=ENGINE_WIDE_RULE,
                gated=True,
                detectable=d.detectable,
                p_value=d.p_value,
            )
            out.append(c)
    return out


def _report_only(
    engine: str,
    metric: str,
    pol: MetricPolicy,
    effect: float,
    reason: str,
    groups: list[tuple],
    units: list[str],
) -> Check:
    """The engine-wide row of an engine none of whose items' baselines can gate yet (the
    evidence rule: too few starts, days or passes, another CPU): not evaluated and never
    failing, but with the geometric-mean ratio of the items whose baselines are merely young,
    so the row shows the figure the armed check will judge (not "n/a"), as the items'
    report-only rows do."""
    c = Check(
        f"engine {engine}",
        f"engine-wide {metric}",
        "not_evaluated",
        tolerance=effect,
        direction=pol.direction,
        reason=reason,
        rule=ENGINE_WIDE_RULE,
        gated=False,
    )
    if groups:
        d = engine_wide(groups, pol.direction, min_effect=effect, units=units)
        if d.ratio is not None:
            c.measured, c.baseline, c.delta = d.ratio, 1.0, d.delta
    return c


# What only a speculative item measures: a native item's acceptance keys are null, so these
# checks never exist for it (gates.evaluate_item skips a metric neither side has).
SPECULATIVE_METRICS = frozenset({"mean_acceptance_length", "acceptance_rate"})


def check_alpha(
    policies: Mapping[str, MetricPolicy],
    keys: Iterable[ItemKey],
    run_alpha: float = DEFAULT_RUN_ALPHA,
) -> AlphaSplit:
    """The per-check levels: the run's false-alarm budget split by ``levels.split_alpha`` over
    the gated checks the matrix ``keys`` can have — per item its gated metrics, less the
    acceptance metrics of a native item; per engine its gated engine-wide metrics, less MAL
    where the engine has no speculative item (counting checks that cannot occur would spend
    budget on nothing). Bonferroni holds whatever the dependence between checks, so items of
    one engine start (which move together) need no other correction here."""
    keys = list(keys)
    gated = [m for m, p in policies.items() if p.gate != "never"]
    item_checks = sum(
        1 for k in keys for m in gated if k.method != NATIVE or m not in SPECULATIVE_METRICS
    )
    engine_checks = 0
    for engine in {k.engine for k in keys}:
        speculative = any(k.method != NATIVE for k in keys if k.engine == engine)
        for m in ENGINE_WIDE_METRICS:
            pol = policies.get(m)
            if pol is None or pol.gate == "never" or pol.direction not in ("higher", "lower"):
                continue
            if speculative or m not in SPECULATIVE_METRICS:
                engine_checks += 1
    return split_alpha(run_alpha, item_checks, engine_checks)


def suite_levels(suite: Suite, run_alpha: float = DEFAULT_RUN_ALPHA) -> AlphaSplit:
    """The levels of the suite's whole matrix: what every run of it decides with, filtered or
    sharded (``suite.json`` records them, so a later ``specperf verdict`` uses them too)."""
    return check_alpha(suite.metrics, [it.key for it in suite.items()], run_alpha)
