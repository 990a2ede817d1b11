"""``specperf report RESULTS_DIR... [--baseline FILE] [--compare DIR ...] [--out DIR]``, or
``specperf report --matrix matrix.json [--out DIR]`` for a release matrix."""

from __future__ import annotations

import argparse
from pathlib import Path

from specperf.errors import ConfigError, SpecperfError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "results", nargs="*", type=Path, help="results directories, read as one run"
    )
    parser.add_argument(
        "--matrix",
        type=Path,
        default=None,
        help="a release matrix (specperf watch matrix's matrix.json) instead of results "
        "directories: one table and one chart per metric family",
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
    if args.matrix is not None:
        return run_matrix(args)
    if not args.results:
        raise ConfigError("specperf report: give RESULTS_DIR... or --matrix matrix.json")
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


def run_matrix(args: argparse.Namespace) -> int:
    """``--matrix``: report.md / report.html of a release matrix, and its terminal summary."""
    if args.results or args.baseline or args.compare:
        raise ConfigError("--matrix takes no results directories, --baseline or --compare")
    try:
        from specperf.report.matrix import build_matrix_report, summary_text
    except ImportError as exc:
        raise SpecperfError(
            f"reports need the 'report' extra (pip install 'specperf[report]'): {exc}"
        ) from None
    title = None if args.title == "specperf report" else args.title
    paths = build_matrix_report(args.matrix, args.out, title)
    print(f"report: {paths.markdown}")
    print(f"report: {paths.html}")
    print(summary_text(paths.matrix))
    return 0
