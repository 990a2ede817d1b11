"""``specperf watch matrix`` and ``specperf watch bisect``: arguments → plan → runs →
judgement → ``matrix.json`` / ``bisect.json``, the report and the terminal summary."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from specperf.errors import ConfigError, SpecperfError
from specperf.release_versions import VersionSource
from specperf.release_watch.bisect import Bisector, pair_from_matrix
from specperf.release_watch.bisect import exit_code as bisect_exit
from specperf.release_watch.matrix_judge import exit_code as matrix_exit
from specperf.release_watch.matrix_judge import judge_matrix
from specperf.release_watch.matrix_model import MATRIX_FILE, Matrix, load_matrix
from specperf.release_watch.matrix_run import (
    Executor,
    MatrixPlan,
    open_matrix,
    parse_versions,
    releases_between,
    run_schedule,
)
from specperf.release_watch.running import Runner, run_logged
from specperf.release_watch.targets import Target


def matrix_releases(args: argparse.Namespace, target: Target, source: VersionSource) -> list[str]:
    """``--versions a,b,c``, or the releases from ``--from`` to ``--to`` of the version
    source (stable ones unless ``--pre``)."""
    if args.versions:
        if args.from_ or args.to:
            raise ConfigError("--versions cannot be combined with --from/--to")
        return parse_versions(args.versions)
    if not (args.from_ and args.to):
        raise ConfigError("give the releases: --from A --to B, or --versions A,B,C")
    found = releases_between(source.versions(target.package), args.from_, args.to, pre=args.pre)
    if not found:
        raise ConfigError(
            f"--from {args.from_} --to {args.to}: no release of {target.package} in that range"
        )
    return found


def finish_matrix(m: Matrix, path: Path, *, report: bool) -> int:
    """Judge, save, write the report and print the summary; the exit code."""
    judge_matrix(m)
    m.save(path)
    print(f"matrix: {path}")
    try:
        from specperf.report.matrix import build_matrix_report, summary_text
    except ImportError as exc:  # the report extra (pandas, matplotlib) is optional
        print(f"no report: the 'report' extra is not installed ({exc})", file=sys.stderr)
    else:
        if report:
            paths = build_matrix_report(m, path.parent / "report")
            print(f"report: {paths.markdown}\nreport: {paths.html}")
        print(summary_text(m))
    code = matrix_exit(m)
    for r in m.rows:
        if r.status == "regression":
            print(
                f"specperf watch matrix: REGRESSION in {m.package} {r.release}: {r.reason}",
                file=sys.stderr,
            )
    if code == 2:
        print("specperf watch matrix: no candidate could be judged", file=sys.stderr)
    return code


def run_matrix_command(
    args: argparse.Namespace,
    target: Target,
    source: VersionSource,
    settings: Mapping[str, str],
    pytest_args: Sequence[str],
    runner: Runner = run_logged,
) -> int:
    if args.retry_uninstallable and not args.resume:
        raise ConfigError("--retry-uninstallable goes with --resume")
    plan = MatrixPlan(
        target,
        args.suite,
        matrix_releases(args, target, source),
        args.reference or target.pinned,
        args.results_dir,
        {k: v for k, v in settings.items() if k != target.setting},
        pytest_args,
        args.torch_build,
        args.reference_every,
    )
    m = open_matrix(plan, resume=args.resume, retry_uninstallable=args.retry_uninstallable)
    path = args.results_dir / MATRIX_FILE
    ex = Executor(m, path, target, runner=runner)
    ex.save()
    try:
        run_schedule(ex)
    except KeyboardInterrupt:
        done = sum(1 for r in m.runs if r.status == "done")
        print(
            f"specperf watch matrix: interrupted after {done} of {len(m.runs)} runs; "
            f"{path} keeps them: add --resume to go on",
            file=sys.stderr,
        )
        return 130
    except SpecperfError as exc:
        print(f"specperf watch matrix: {exc}", file=sys.stderr)
        finish_matrix(m, path, report=False)
        return 2
    return finish_matrix(m, path, report=not args.no_report)


def run_bisect_command(
    args: argparse.Namespace,
    target: Target,
    source: VersionSource,
    settings: Mapping[str, str],
    pytest_args: Sequence[str],
    runner: Runner = run_logged,
) -> int:
    if (args.results_dir / MATRIX_FILE).exists():
        raise ConfigError(f"{args.results_dir / MATRIX_FILE} exists: give another --results-dir")
    good, bad = args.good, args.bad
    if args.matrix is not None:
        m = load_matrix(args.matrix)
        if (m.package, m.engine) != (target.package, target.engine):
            raise ConfigError(
                f"--matrix {args.matrix}: a matrix of {m.package} (engine {m.engine}), not "
                f"{target.package} (engine {target.engine})"
            )
        found_good, found_bad = pair_from_matrix(m, args.check)
        good, bad = good or found_good, bad or found_bad
        print(f"bisect: from {args.matrix}: good {good}, bad {bad}")
    if not (good and bad):
        raise ConfigError("specperf watch bisect: give --good and --bad (or --matrix FILE)")
    b = Bisector(
        target,
        args.suite,
        good,
        bad,
        args.check,
        source.versions(target.package),
        args.results_dir,
        {k: v for k, v in settings.items() if k != target.setting},
        pytest_args,
        args.torch_build,
        args.pre,
        runner=runner,
    )
    res = b.bisect()
    print("\n".join(res.lines()))
    return bisect_exit(res)
