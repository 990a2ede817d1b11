#!/usr/bin/env python3
"""False-alarm rate and power of the verdict statistics, from the per-start values a baseline
file recorded (resampling, no engine needed).

    python scripts/verdict_power.py baselines/cpu-amd-epyc-avx512-2c.json [--suite cpu-tiny]
        [--starts 1] [--write-docs docs/baselines.md]

For every gated metric of every entry with at least MIN_BASELINE_STARTS + 1 starts, each
subset of ``--starts`` starts in turn plays "tonight's run" and the remaining starts the
baseline (leave-k-out). Unchanged: the share of those splits judged a regression (the
false-alarm rate). Power at -5/-10/-25 %: the same splits with tonight's values moved by that
much in the bad direction (x(1-e) for higher-is-better metrics, x(1+e) for lower). The same for
the engine-wide check, where the k-th start of every item of an engine plays tonight together.
alpha is the suite's per-check level (the run's 1 % budget split over its gated checks,
``stats.split_alpha``), exactly as ``pytest -m perf`` decides. With ``--write-docs`` the table
replaces the block between ``<!-- power:begin -->`` and ``<!-- power:end -->`` in that file.

The baseline part of each split keeps its starts' pass labels, so the verdict is pass-level
where the file holds enough passes (stats.MIN_BASELINE_PASSES), as in a real run. Leave-k-out
takes tonight's k starts from different passes when each start is its own pass: for k > 1 it
then OVER-states what one pass of k starts gives (a pass's starts share its speed).

What it cannot show: effects that are not a uniform shift of every start (a bimodal engine), and
noise sources absent from the recorded starts (another host, another day): the table is only as
good as the spread the baseline captured.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from specperf import stats  # noqa: E402
from specperf import verdict as vd  # noqa: E402
from specperf.baselines import BaselineFile, cannot_fail, load_baselines  # noqa: E402
from specperf.config import MetricPolicy, load_suite  # noqa: E402

EFFECTS = (0.05, 0.10, 0.25)
BEGIN, END = "<!-- power:begin -->", "<!-- power:end -->"


def _moved(values: list[float], direction: str, effect: float) -> list[float]:
    f = (1 - effect) if direction != "lower" else (1 + effect)
    return [v * f for v in values]


def _splits(n: int, k: int) -> list[tuple[list[int], list[int]]]:
    out = []
    for cur in itertools.combinations(range(n), k):
        out.append((list(cur), [i for i in range(n) if i not in cur]))
    return out


def item_rows(
    bf: BaselineFile, policies: dict[str, MetricPolicy], alpha: float, k: int
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
            if len(vals) < stats.MIN_BASELINE_STARTS + k:
                continue
            row: dict[str, Any] = {
                "key": key,
                "metric": metric,
                "starts": len(vals),
                "cv": statistics.stdev(vals) / statistics.fmean(vals) if len(vals) > 1 else 0.0,
                "min_effect": pol.tolerance,
            }
            splits = _splits(len(vals), k)
            labels = entry.start_passes(metric)
            peer_entries = vd.spread_peers(entry, vd.config_siblings(bf, entry.key), metric)
            peers = [p.start_values(metric) for p in peer_entries]
            peer_labels = [p.start_passes(metric) for p in peer_entries]
            row["pooled_items"] = 1 + len(peers)
            for effect in (0.0, *EFFECTS):
                red = 0
                for cur, base in splits:
                    current = _moved([vals[i] for i in cur], pol.direction, effect)
                    # the peers' starts of the same runs are left out too (starts are aligned
                    # by index when every run measured every item, as in a baseline campaign)
                    spread = (
                        stats.pooled_spread(
                            [[vals[i] for i in base]]
                            + [[v[i] for i in base if i < len(v)] for v in peers]
                        )
                        if peers
                        else None
                    )
                    pass_spread = (
                        stats.pooled_pass_spread(
                            [([vals[i] for i in base], [labels[i] for i in base])]
                            + [
                                (
                                    [v[i] for i in base if i < len(v)],
                                    [lab[i] for i in base if i < len(lab)],
                                )
                                for v, lab in zip(peers, peer_labels, strict=True)
                            ]
                        )
                        if peers
                        else None
                    )
                    d = stats.decide(
                        current,
                        [vals[i] for i in base],
                        pol.direction,
                        min_effect=pol.tolerance,
                        alpha=alpha,
                        spread=spread,
                        baseline_passes=[labels[i] for i in base],
                        pass_spread=pass_spread,
                    )
                    red += bool(d.regressed)
                row[effect] = red / len(splits)
            rows.append(row)
    return rows


def engine_rows(
    bf: BaselineFile, policies: dict[str, MetricPolicy], alpha: float, k: int = 1
) -> list[dict[str, Any]]:
    """Engine-wide: the same ``k`` start indices of every item of an engine play tonight (a
    run of ``k`` engine starts per config), the other starts the baseline."""
    rows = []
    engines = sorted({e.key.engine for e in bf.entries.values()})
    for engine in engines:
        for metric in vd.ENGINE_WIDE_METRICS:
            pol = policies.get(metric)
            if pol is None or pol.gate == "never":
                continue
            series, units = [], []
            for entry in bf.entries.values():
                if entry.key.engine != engine or metric not in entry.metrics:
                    continue
                bm = entry.metrics[metric]
                vals = entry.start_values(metric)
                if bm.report_only or cannot_fail(metric, bm.value, bm.direction, pol.tolerance):
                    continue
                if len(vals) >= stats.MIN_BASELINE_STARTS + k:
                    series.append((vals, entry.start_passes(metric)))
                    units.append(entry.key.method)  # one engine config: one start per run
            if len(series) < 2:
                continue
            n = min(len(v) for v, _ in series)
            row: dict[str, Any] = {
                "key": f"engine {engine} ({len(series)} items)",
                "metric": f"engine-wide {metric}",
                "starts": n,
                "cv": statistics.median(
                    statistics.stdev(v) / statistics.fmean(v) for v, _ in series
                ),
                "min_effect": pol.tolerance,
            }
            splits = _splits(n, k)
            for effect in (0.0, *EFFECTS):
                red = 0
                for cur, base in splits:
                    groups = [
                        (
                            _moved([v[i] for i in cur], pol.direction, effect),
                            [v[i] for i in base] + v[n:],
                            [lab[i] for i in base] + lab[n:],
                        )
                        for v, lab in series
                    ]
                    d = stats.engine_wide(
                        groups, pol.direction, min_effect=pol.tolerance, alpha=alpha, units=units
                    )
                    red += bool(d.regressed)
                row[effect] = red / len(splits)
            rows.append(row)
    return rows


def _spread_from(row: dict[str, Any]) -> str:
    if "pooled_items" not in row:
        return "engine-wide"
    n = row["pooled_items"]
    return "this item" if n == 1 else f"{n} items pooled"


def table(
    rows: list[dict[str, Any]],
    alpha: stats.AlphaSplit,
    k: int,
    source: str,
    suite: str = "cpu-tiny",
) -> str:
    suite_arg = "" if suite == "cpu-tiny" else f" --suite {suite}"
    starts_arg = "" if k == 1 else f" --starts {k}"
    head = (
        f"Resampled from `{source}` (leave-{k}-out over recorded engine starts; "
        f"alpha per item check {alpha.item:.2g}, per engine-wide check {alpha.engine_wide:.2g}; "
        f"`python scripts/verdict_power.py {source}{suite_arg}{starts_arg}`):\n\n"
        "| item | metric | starts | spread from | CV | min effect | false alarm | power -5 % | "
        "power -10 % | power -25 % |\n|---|---|---|---|---|---|---|---|---|---|\n"
    )
    lines = [
        f"| {r['key']} | {r['metric']} | {r['starts']} | {_spread_from(r)} | {r['cv']:.1%} | "
        f"{r['min_effect']:.0%} | {r[0.0]:.0%} | {r[0.05]:.0%} | {r[0.10]:.0%} | {r[0.25]:.0%} |"
        for r in rows
    ]
    return head + "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("baseline", type=Path, help="a baseline file with per-start values")
    ap.add_argument("--suite", default="cpu-tiny", help="suite whose policies/alpha apply")
    ap.add_argument("--starts", type=int, default=1, help="starts per simulated run (default 1)")
    ap.add_argument("--write-docs", type=Path, default=None, help="replace the power block")
    args = ap.parse_args(argv)
    suite = load_suite(args.suite)
    alpha = vd.suite_levels(suite)
    bf = load_baselines(args.baseline)
    if not bf.entries:
        print(f"{args.baseline}: no entries", file=sys.stderr)
        return 2
    rows = item_rows(bf, dict(suite.metrics), alpha.item, args.starts)
    rows += engine_rows(bf, dict(suite.metrics), alpha.engine_wide, args.starts)
    if not rows:
        print(f"{args.baseline}: no gated metric has enough starts to resample", file=sys.stderr)
        return 2
    rel = args.baseline.resolve()
    if rel.is_relative_to(ROOT):
        rel = rel.relative_to(ROOT)
    text = table(rows, alpha, args.starts, str(rel), args.suite)
    print(text)
    if args.write_docs:
        doc = args.write_docs.read_text(encoding="utf-8")
        if BEGIN not in doc or END not in doc:
            print(f"{args.write_docs}: no {BEGIN} ... {END} block", file=sys.stderr)
            return 2
        pre, rest = doc.split(BEGIN, 1)
        _, post = rest.split(END, 1)
        args.write_docs.write_text(pre + BEGIN + "\n" + text + END + post, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
