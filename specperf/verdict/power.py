"""False-alarm rate and power of the verdict statistics, from the per-start values a baseline
file recorded (resampling with the verdict's own functions; no engine needed).

The verdict's unit is the pass (one run: its starts share the host and the window,
``variance`` module docstring), so in ``leave_out="pass"`` each recorded pass in turn plays
"tonight's run", ALL its starts, and the other passes' starts (with their pass labels) the
baseline (leave-one-pass-out). ``leave_out="start"`` instead lets each subset of ``k`` starts play
tonight (leave-k-out); for k > 1 it takes tonight's starts from different passes when each start
is its own pass, and then OVER-states what one pass of k starts gives. A metric is resampled
when every split leaves at least ``decision.MIN_BASELINE_STARTS`` baseline starts (leave-k-out: at
least ``MIN_BASELINE_STARTS + k``).

``leave_out="machine"`` asks what a nightly on a machine the baseline has never seen would get:
each pass in turn plays tonight, and the baseline is only the passes of OTHER machines (a GPU by
its UUID, else the boot id, else the host name); each machine counts once (its passes' splits
share one weight), so the rates are over machines. A metric whose starts come from one machine
gives no split in this mode.

For every gated metric of every entry: unchanged, the share of the splits judged a regression
(the false-alarm rate); power at -5/-10/-25 %, the same splits with tonight's values moved by
that much in the bad direction (x(1-e) for higher-is-better metrics, x(1+e) for lower). The
same for the engine-wide check, where one pass (or the k-th starts) of every item of an engine
plays tonight together. The starts of config siblings that pool into an item's spread
(``spread_peers``) from tonight's run are left out of that spread too. Runs are matched across
items by pass label; where the items share no label and have as many passes, the i-th pass of
each is taken as one run. alpha is the suite's per-check level (``suite_levels``), exactly as
``pytest -m perf`` decides.

The ``gate`` column applies the verdict's evidence rule (``evidence.unarmed``): a metric that
rule does not arm is only reported; its power is what the check would have once armed. An
engine-wide row is report-only when every item of the engine is; otherwise it is computed, as
the verdict does, over the items that gate.

What it cannot show: effects that are not a uniform shift of every start (a bimodal engine),
and noise sources absent from the recorded starts: the tables are only as good as the spread
the baseline captured.
"""

from __future__ import annotations

import re
import statistics
from collections import Counter
from collections.abc import Hashable, Mapping
from typing import Any

from specperf.baselines import BaselineEntry, BaselineFile, cannot_fail
from specperf.config import MetricPolicy
from specperf.verdict.decision import MIN_BASELINE_STARTS, decide
from specperf.verdict.engine_effect import engine_wide
from specperf.verdict.engine_wide import ENGINE_WIDE_METRICS
from specperf.verdict.evidence import unarmed
from specperf.verdict.levels import AlphaSplit
from specperf.verdict.splits import (
    Split,
    index_splits,
    leave_run_out,
    machine_weights,
    match_runs,
    moved,
    off_machine,
    pass_splits,
    rate,
    start_machines,
)
from specperf.verdict.spread import config_siblings, pass_spread, spread_peers, start_spread

EFFECTS = (0.05, 0.10, 0.25)
LEAVE_OUT = ("pass", "start", "machine")
GATED = "gated"


def gate_of(
    entry: BaselineEntry,
    metric: str,
    pol: MetricPolicy,
    summary: Mapping[str, Any] | None = None,
) -> str:
    """``gated``, or ``report-only: <why>`` where the product only reports the metric from
    this baseline: the verdict's evidence rule (``evidence.unarmed``: too few starts; for a
    hardware-bound metric too few windows or passes; ``summary`` an item summary, {} for the
    default rule)."""
    why = unarmed(summary or {}, entry, metric, pol)
    if not why:
        return GATED
    m = re.search(r"from (\d+) (window|pass)", why) or re.search(r"has (\d+) engine (start)", why)
    if not m:
        return "report-only"
    n, unit = int(m.group(1)), m.group(2)
    plural = {"window": "windows", "pass": "passes", "start": "starts"}[unit]
    return f"report-only: {n} {unit if n == 1 else plural}"


def item_rows(
    bf: BaselineFile,
    policies: dict[str, MetricPolicy],
    alpha: float,
    k: int = 1,
    leave_out: str = "pass",
    summaries: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    rows = []
    for key, entry in sorted(bf.entries.items()):
        for metric, pol in policies.items():
            if pol.gate == "never" or metric not in entry.metrics:
                continue
            bm = entry.metrics[metric]
            vals = entry.start_values(metric)
            if bm.report_only or cannot_fail(metric, bm.value, bm.direction, pol.tolerance):
                continue
            labels = entry.start_passes(metric)
            peer_entries = spread_peers(entry, config_siblings(bf, entry.key), metric)
            peers = [p.start_values(metric) for p in peer_entries]
            peer_labels = [p.start_passes(metric) for p in peer_entries]
            splits: list[Split] = []
            split_machines: list[Hashable] = []
            if leave_out == "machine":
                machines = start_machines(entry, metric)
                peer_machines = [start_machines(p, metric) for p in peer_entries]
                for r in dict.fromkeys(labels):
                    cur = leave_run_out(labels, r)[0]
                    m = machines[cur[0]]
                    keep = [off_machine(pm, m) for pm in peer_machines]
                    splits.append((cur, off_machine(machines, m), keep))
                    split_machines.append(m)
                if not splits or min(len(b) for _, b, _ in splits) < MIN_BASELINE_STARTS:
                    continue
            elif leave_out == "start":
                if len(vals) < MIN_BASELINE_STARTS + k:
                    continue
                # the peers' starts of the same runs are left out too (starts are aligned by
                # index when every run measured every item, as in a baseline campaign)
                for cur, base in index_splits(len(vals), k):
                    splits.append((cur, base, [[i for i in base if i < len(v)] for v in peers]))
            else:
                runs = match_runs([labels, *peer_labels])
                for r, cur, base in pass_splits(runs[0]):
                    keep = [leave_run_out(pr, r)[1] for pr in runs[1:]]
                    splits.append((cur, base, keep))
                if not splits or min(len(b) for _, b, _ in splits) < MIN_BASELINE_STARTS:
                    continue
            weights = machine_weights(split_machines) if split_machines else [1.0] * len(splits)
            row: dict[str, Any] = {
                "key": key,
                "metric": metric,
                "gate": gate_of(entry, metric, pol, (summaries or {}).get(key)),
                "starts": len(vals),
                "passes": len(set(labels)),
                "machines": len(set(start_machines(entry, metric))),
                "splits": len(splits),
                "cv": statistics.stdev(vals) / statistics.fmean(vals) if len(vals) > 1 else 0.0,
                "min_effect": pol.tolerance,
                "pooled_items": 1 + len(peers),
            }
            for effect in (0.0, *EFFECTS):
                red = []
                for cur, base, keep in splits:
                    current = moved([vals[i] for i in cur], pol.direction, effect)
                    spread = (
                        start_spread(
                            [[vals[i] for i in base]]
                            + [[v[j] for j in kp] for v, kp in zip(peers, keep, strict=True)]
                        )
                        if peers
                        else None
                    )
                    between = (
                        pass_spread(
                            [([vals[i] for i in base], [labels[i] for i in base])]
                            + [
                                ([v[j] for j in kp], [lab[j] for j in kp])
                                for v, lab, kp in zip(peers, peer_labels, keep, strict=True)
                            ]
                        )
                        if peers
                        else None
                    )
                    d = decide(
                        current,
                        [vals[i] for i in base],
                        pol.direction,
                        min_effect=pol.tolerance,
                        alpha=alpha,
                        spread=spread,
                        baseline_passes=[labels[i] for i in base],
                        pass_spread=between,
                    )
                    red.append(bool(d.regressed))
                row[effect] = rate(red, weights)
            rows.append(row)
    return rows


def _engine_gate(gates: list[str]) -> str:
    if any(g == GATED for g in gates):
        return GATED
    return "; ".join(dict.fromkeys(gates))


def engine_rows(
    bf: BaselineFile,
    policies: dict[str, MetricPolicy],
    alpha: float,
    k: int = 1,
    leave_out: str = "pass",
    summaries: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """Engine-wide, for every engine with at least one item: one pass of every item of the
    engine (``leave_out`` "pass", runs matched by ``splits.match_runs``) or the same ``k``
    start indices ("start") play tonight, the other starts the baseline."""
    rows = []
    engines = sorted({e.key.engine for e in bf.entries.values()})
    for engine in engines:
        for metric in ENGINE_WIDE_METRICS:
            pol = policies.get(metric)
            if pol is None or pol.gate == "never" or pol.direction not in ("higher", "lower"):
                continue
            series, units, gates, machines = [], [], [], []
            for entry in bf.entries.values():
                if entry.key.engine != engine or metric not in entry.metrics:
                    continue
                bm = entry.metrics[metric]
                vals = entry.start_values(metric)
                labels = entry.start_passes(metric)
                if bm.report_only or cannot_fail(metric, bm.value, bm.direction, pol.tolerance):
                    continue
                ms = start_machines(entry, metric)
                if leave_out == "start":
                    if len(vals) < MIN_BASELINE_STARTS + k:
                        continue
                else:  # the starts off tonight's pass (or machine) must make a baseline
                    where = ms if leave_out == "machine" else labels
                    if len(vals) - max(Counter(where).values()) < MIN_BASELINE_STARTS:
                        continue
                series.append((vals, labels))
                machines.append(ms)
                units.append(entry.key.method)  # one engine config: one start per run
                gates.append(gate_of(entry, metric, pol, (summaries or {}).get(entry.key.as_str())))
            if not series:
                continue
            gate = _engine_gate(gates)
            if gate == GATED:  # as the verdict: the items that gate, the others reported
                keep = [i for i, g in enumerate(gates) if g == GATED]
                series = [series[i] for i in keep]
                units = [units[i] for i in keep]
                machines = [machines[i] for i in keep]
            n = min(len(v) for v, _ in series)
            splits: list[list[tuple[list[int], list[int]]]] = []  # per split, per item
            split_machines = []
            if leave_out == "start":
                for cur, base in index_splits(n, k):
                    splits.append([(cur, base + list(range(n, len(v)))) for v, _ in series])
            elif leave_out == "machine":
                runs = match_runs([lab for _, lab in series])
                machine_of = {
                    r: m
                    for rs, ms in zip(runs, machines, strict=True)
                    for r, m in zip(rs, ms, strict=True)
                }
                for r, m in machine_of.items():
                    split_machines.append(m)
                    splits.append(
                        [
                            (leave_run_out(rs, r)[0], off_machine(ms, m))
                            for rs, ms in zip(runs, machines, strict=True)
                        ]
                    )
            else:
                runs = match_runs([lab for _, lab in series])
                for r in dict.fromkeys(x for rs in runs for x in rs):
                    splits.append([leave_run_out(rs, r) for rs in runs])
            weights = machine_weights(split_machines) if split_machines else [1.0] * len(splits)
            row: dict[str, Any] = {
                "key": f"engine {engine} ({len(series)} item{'s' if len(series) != 1 else ''})",
                "metric": f"engine-wide {metric}",
                "gate": gate,
                "starts": n,
                "passes": min(len(set(lab)) for _, lab in series),
                "machines": min(len(set(ms)) for ms in machines),
                "splits": len(splits),
                "cv": statistics.median(
                    statistics.stdev(v) / statistics.fmean(v) for v, _ in series
                ),
                "min_effect": pol.tolerance,
            }
            for effect in (0.0, *EFFECTS):
                red = []
                for split in splits:
                    groups, group_units = [], []
                    for (v, lab), (cur, base), unit in zip(series, split, units, strict=True):
                        if not cur:  # this item was not measured in tonight's run
                            continue
                        groups.append(
                            (
                                moved([v[i] for i in cur], pol.direction, effect),
                                [v[i] for i in base],
                                [lab[i] for i in base],
                            )
                        )
                        group_units.append(unit)
                    d = engine_wide(
                        groups,
                        pol.direction,
                        min_effect=pol.tolerance,
                        alpha=alpha,
                        units=group_units,
                    )
                    red.append(bool(d.regressed))
                row[effect] = rate(red, weights)
            rows.append(row)
    return rows


def _spread_from(row: dict[str, Any]) -> str:
    if "pooled_items" not in row:
        return "engine-wide"
    n = row["pooled_items"]
    return "this item" if n == 1 else f"{n} items pooled"


def _starts_cell(row: dict[str, Any]) -> str:
    n, p, m = row["starts"], row.get("passes", row["starts"]), row.get("machines", 1)
    where = f", {m} machines" if m > 1 else ""
    return str(n) if p >= n and not where else f"{n} ({p} passes{where})"


def describe(leave_out: str, k: int = 1) -> str:
    """How the splits of ``leave_out`` (with ``k`` starts for "start") are made, in words."""
    if leave_out == "start":
        return f"leave-{k}-out over recorded engine starts"
    if leave_out == "machine":
        return (
            "leave-one-machine-out: each recorded pass in turn is tonight's run, judged against "
            "the passes of the other machines only; rates over machines, each counted once"
        )
    return "leave-one-pass-out: each recorded pass in turn is tonight's run, all its starts"


def table(
    rows: list[dict[str, Any]],
    alpha: AlphaSplit,
    k: int,
    source: str,
    leave_out: str = "pass",
) -> str:
    """A Markdown table of ``rows`` (``item_rows`` + ``engine_rows``), headed by how it was
    resampled from ``source``."""
    head = (
        f"Resampled from `{source}` ({describe(leave_out, k)}; "
        f"alpha per item check {alpha.item:.2g}, per engine-wide check {alpha.engine_wide:.2g}):"
        "\n\n"
        "| item | metric | gate | starts | spread from | CV | min effect | false alarm | "
        "power -5 % | power -10 % | power -25 % |\n|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    lines = [
        f"| {r['key']} | {r['metric']} | {r['gate']} | {_starts_cell(r)} | {_spread_from(r)} | "
        f"{r['cv']:.1%} | {r['min_effect']:.0%} | {r[0.0]:.0%} | {r[0.05]:.0%} | "
        f"{r[0.10]:.0%} | {r[0.25]:.0%} |"
        for r in rows
    ]
    return head + "\n".join(lines) + "\n"
