"""``specperf report RESULTS_DIR... [--baseline FILE] [--compare DIR ...] [--out DIR]``."""

from __future__ import annotations

import argparse
from pathlib import Path

from specperf.errors import ConfigError, SpecperfError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "results", nargs="+", type=Path, help="results directories, read as one run"
    )
    parser.add_argument(
        "--baseline", type=Path, default=None, help="baseline file to compare this run with"
    )
    parser.add_argument(
        "--compare",
        type=Path,
        action="append",
        nargs="+",
        default=[],
        metavar="OTHER_RESULTS_DIR",
        help="another run to compare with (repeat the flag for several runs; several "
        "directories after one flag are one run)",
    )
    parser.add_argument(
        "--out", type=Path, default=None, help="output directory (default RESULTS_DIR/report)"
    )
    parser.add_argument("--title", default="specperf report", help="report title")
    parser.add_argument(
        "--step-summary",
        action="store_true",
        help="also append a compact markdown summary to $GITHUB_STEP_SUMMARY (when set)",
    )


def load_builder():
    """``build_report``, or a one-line error naming the missing report dependency."""
    try:
        from specperf.report.build import build_report
    except ImportError as exc:
        raise SpecperfError(
            f"reports need the 'report' extra (pip install 'specperf[report]'): {exc}"
        ) from None
    return build_report


def run(args: argparse.Namespace) -> int:
    build_report = load_builder()

    if args.baseline is not None and not args.baseline.is_file():
        raise ConfigError(f"--baseline {args.baseline}: no such file")
    paths = build_report(
        args.results,
        baseline=args.baseline,
        compare_with=args.compare,
        out=args.out,
        title=args.title,
    )
    print(f"report: {paths.markdown}")
    print(f"report: {paths.html}")
    if args.step_summary:
        from specperf.report.terminal import write_step_summary

        written = write_step_summary(
            args.results[0], paths.checks, report_paths=[paths.markdown, paths.html]
        )
        print(f"job summary: {written}" if written else "job summary: $GITHUB_STEP_SUMMARY not set")
    if paths.regressions:
        print(f"{paths.regressions} regressions (listed first in the comparison sections)")
    return 0
