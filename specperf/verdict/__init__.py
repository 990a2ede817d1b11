"""The ONE place rules are evaluated: measured figures vs baselines, same-run rules (speedup,
cross-engine, floors, guards), the engine-wide check, quarantine, staleness. The plugin,
``specperf verdict``, reports and merges all call these functions; nothing else compares numbers.

How a metric is decided (docs/verdict.md):
- Baselines are per hardware profile and keep one value per ENGINE START; a run contributes one
  value per start it measured (``--repeat N --restart-between-repeats``: N starts; repeats
  within one start count as one start, their median).
- With >= 3 baseline starts a gated metric is decided by ``decision.decide``: a one-sided t
  test on log per-start values against the baseline's start-to-start spread, at the per-check
  alpha of the run's false-alarm budget, AND a change of at least the suite's tolerance (the
  minimum effect) in the bad direction. The line states method, p, alpha and minimum effect.
- Less evidence than ``evidence`` asks (fewer than 3 starts; for speeds and latencies also
  too few days or passes, another CPU; figures copied from notes): the metric is reported,
  never gated, and its row says how to arm it. There is no point comparison in its place.
- A start measured at or below 0 against a positive baseline is a regression outright
  (``decision``); only a value that was not measured is not evaluated.
- Statuses: pass, fail, xfail (quarantined), stale / missing (no comparable baseline),
  not_evaluated (a gated metric that could not be judged: its reason says why) and info
  (report-only by suite policy or by a baseline that could never fail). ``outcome`` folds them:
  a gated not-evaluated never ends as a pass (skip; ``--strict-baselines``: fail), and an item
  judged by nothing fails.

The package follows the data flow, one job per module:

- ``checks``: the ``Check`` record and the comparison arithmetic;
- the statistics: ``logscale`` (log values, the one pooled spread), ``variance`` (start or pass
  level), ``decision`` (the test), ``engine_effect`` (the engine-wide test), ``levels`` (alpha);
- ``results``: reading an item's ``summary.json`` and a results folder, appending verdicts;
- ``snapshot``: the ``suite.json`` policies a folder is judged with;
- ``noise``: figures from repeats (median, per-start values, intervals);
- ``evidence``: how much evidence a baseline gate needs (one rule for every metric);
- ``gates``: one item against its baseline entry (``conditions`` before it, ``gate_decision``,
  ``report_rows`` for rows not compared); ``quarantine``: known issues;
- ``spread``: which baseline starts pool into an item's spread (same engine config);
- ``rules`` / ``guard_checks``: same-run rules; ``engine_wide``: the engine-wide check and alpha;
- ``outcome``: checks → pytest outcome; ``judge``: whole folders; ``table``; ``cli``;
- ``power`` (resampled with ``splits``) and ``pages``: ``specperf validation``.

Every name below stays importable from ``specperf.verdict``.
"""

from __future__ import annotations

from specperf.verdict.checks import EPS, Check, Status, compare, tolerance_differs
from specperf.verdict.cli import add_arguments, run
from specperf.verdict.conditions import (
    DEFAULT_MIN_DURATION_S,
    LATENCY_PREFIXES,
    delivery_bound,
    run_checks,
    too_short,
)
from specperf.verdict.decision import (
    DEFAULT_MIN_EFFECT,
    DEFAULT_RUN_ALPHA,
    MIN_BASELINE_STARTS,
    Decision,
    decide,
)
from specperf.verdict.engine_wide import (
    ENGINE_WIDE_METRICS,
    ENGINE_WIDE_RULE,
    check_alpha,
    engine_wide_checks,
    suite_levels,
)
from specperf.verdict.gates import evaluate_item
from specperf.verdict.judge import Verdict, evaluate_results, no_baseline_reason
from specperf.verdict.levels import AlphaSplit, split_alpha
from specperf.verdict.logscale import geometric_mean, pooled_spread
from specperf.verdict.noise import (
    BOOTSTRAP_LEVEL,
    BOOTSTRAP_RESAMPLES,
    aggregate,
    bootstrap_interval,
)
from specperf.verdict.outcome import (
    Outcome,
    gate_summary,
    gated_not_evaluated,
    judged_by_nothing,
    outcome,
    summary_counts,
    summary_line,
    unjudged_items,
)
from specperf.verdict.quarantine import issue_active
from specperf.verdict.results import (
    REQUESTS,
    SUITE_SNAPSHOT,
    SUMMARY,
    VERDICTS,
    ItemResult,
    figure,
    load_item,
    load_results,
    write_verdicts,
)
from specperf.verdict.rules import _rule_subjects, evaluate_rules
from specperf.verdict.snapshot import (
    alpha_from_snapshot,
    known_issues_from_snapshot,
    policies_from_snapshot,
    read_suite_snapshot,
    rules_from_snapshot,
    selected_from_snapshots,
)
from specperf.verdict.spread import (
    ENGINE_FINGERPRINT_FIELDS,
    config_key,
    config_siblings,
    config_spread,
    spread_peers,
)
from specperf.verdict.table import (
    SEES_LEGEND,
    STATUS_ORDER,
    TABLE_COLUMNS,
    format_table,
    sees_cell,
    sees_legend,
    table_rows,
)
from specperf.verdict.variance import MIN_BASELINE_PASSES

__all__ = [
    "BOOTSTRAP_LEVEL",
    "BOOTSTRAP_RESAMPLES",
    "DEFAULT_MIN_DURATION_S",
    "DEFAULT_MIN_EFFECT",
    "DEFAULT_RUN_ALPHA",
    "ENGINE_FINGERPRINT_FIELDS",
    "ENGINE_WIDE_METRICS",
    "ENGINE_WIDE_RULE",
    "EPS",
    "LATENCY_PREFIXES",
    "MIN_BASELINE_PASSES",
    "MIN_BASELINE_STARTS",
    "REQUESTS",
    "SEES_LEGEND",
    "STATUS_ORDER",
    "SUITE_SNAPSHOT",
    "SUMMARY",
    "TABLE_COLUMNS",
    "VERDICTS",
    "AlphaSplit",
    "Check",
    "Decision",
    "ItemResult",
    "Outcome",
    "Status",
    "Verdict",
    "_rule_subjects",
    "add_arguments",
    "aggregate",
    "alpha_from_snapshot",
    "bootstrap_interval",
    "check_alpha",
    "compare",
    "config_key",
    "config_siblings",
    "config_spread",
    "decide",
    "delivery_bound",
    "engine_wide_checks",
    "evaluate_item",
    "evaluate_results",
    "evaluate_rules",
    "figure",
    "format_table",
    "gate_summary",
    "gated_not_evaluated",
    "geometric_mean",
    "issue_active",
    "judged_by_nothing",
    "known_issues_from_snapshot",
    "load_item",
    "load_results",
    "no_baseline_reason",
    "outcome",
    "policies_from_snapshot",
    "pooled_spread",
    "read_suite_snapshot",
    "rules_from_snapshot",
    "run",
    "run_checks",
    "sees_cell",
    "sees_legend",
    "selected_from_snapshots",
    "split_alpha",
    "spread_peers",
    "suite_levels",
    "summary_counts",
    "summary_line",
    "table_rows",
    "tolerance_differs",
    "too_short",
    "unjudged_items",
    "write_verdicts",
]
