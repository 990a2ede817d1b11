"""``specperf verdict``: judge saved results folders again (exit 1 on a regression)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from specperf.baselines import load_baselines
from specperf.errors import ConfigError
from specperf.verdict.judge import evaluate_results
from specperf.verdict.outcome import gated_not_evaluated
from specperf.verdict.table import format_table


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("results", nargs="+", type=Path, help="results directories (one run)")
    parser.add_argument(
        "--baselines-dir",
        type=Path,
        default=Path("baselines"),
        help="directory of per-hardware baseline files (default ./baselines)",
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        default=None,
        help="a baseline file (overrides --baselines-dir and the profile)",
    )
    parser.add_argument(
        "--hardware-profile",
        default=None,
        help="profile whose baseline file to use (default: each item's own); an item's "
        "machine-moved metrics are compared only with values measured on its own profile",
    )
    parser.add_argument("--json", type=Path, default=None, help="write the verdict as JSON")
    parser.add_argument("--all", action="store_true", help="list passing checks too")
    parser.add_argument(
        "--strict-baselines",
        action="store_true",
        help="missing or stale baselines, and gated checks that could not be evaluated, "
        "count as failures",
    )


def run(args: argparse.Namespace) -> int:
    baselines = load_baselines(args.baseline) if args.baseline else None
    if args.baseline and not args.baseline.exists():
        raise ConfigError(f"--baseline {args.baseline}: no such file")
    v = evaluate_results(
        args.results,
        baselines=baselines,
        baselines_dir=args.baselines_dir,
        hardware_profile=args.hardware_profile,
    )
    print(format_table(v.checks, include_pass=args.all))
    print("\n" + v.summary_line())
    for c in v.failed:
        print(f"FAIL {c.line()}", file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps(v.to_json(), indent=2) + "\n", encoding="utf-8")
    bad = v.failed
    if args.strict_baselines:
        bad = bad + [c for c in v.checks if c.status in ("missing", "stale")]
        bad = bad + gated_not_evaluated(v.checks)
    return 1 if bad else 0
