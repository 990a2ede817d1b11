"""The command-line options of the perf suite (``pytest --help`` lists them)."""

from __future__ import annotations

import pytest

from specperf.plugin.state import DEFAULT_SUITE
from specperf.suite_run import UPDATE_MODES


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("specperf", "specperf: speculative-decoding perf suite")
    g.addoption(
        "--suite",
        default=DEFAULT_SUITE,
        metavar="NAME|PATH",
        help=f"packaged suite name or a suite TOML path (default {DEFAULT_SUITE})",
    )
    g.addoption(
        "--setting",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="override a [settings] value of the suite (repeatable)",
    )
    for name, what, metavar in (
        ("engine", "engine names", "NAME[,NAME]"),
        ("method", "method names", "NAME[,NAME]"),
        ("dataset", "dataset names", "NAME[,NAME]"),
        ("concurrency", "concurrencies", "N[,N]"),
        ("model", "model names", "NAME[,NAME]"),
        ("sampling", "sampling profile names", "NAME[,NAME]"),
    ):
        g.addoption(
            f"--{name}",
            action="append",
            default=[],
            dest=f"specperf_{name}",
            metavar=metavar,
            help=f"run only these {what} (comma-separated, repeatable)",
        )
    g.addoption(
        "--tier",
        choices=("smoke", "full"),
        default=None,
        help="dataset tier (default: the suite's)",
    )
    g.addoption(
        "--results-dir",
        default=None,
        metavar="DIR",
        help="results directory (default results/<time>)",
    )
    g.addoption(
        "--repeat",
        type=int,
        default=None,
        metavar="N",
        help="measure each item N times; the verdict uses the median (default: the suite's "
        "[suite] repeat, else 1)",
    )
    g.addoption(
        "--restart-between-repeats",
        action="store_true",
        default=None,
        help="start a fresh engine for every repeat, so measured tolerances cover "
        "start-to-start variance (default: the suite's restart_between_repeats)",
    )
    g.addoption(
        "--gpus",
        default=None,
        metavar="LIST",
        help="GPUs to use, e.g. 0,1,2,3 (default: outer CUDA_VISIBLE_DEVICES or all); "
        "xdist worker i gets the i-th GPU (or TP group)",
    )
    g.addoption(
        "--hardware-profile",
        default=None,
        metavar="NAME",
        help="baseline profile name (default: derived from the hardware)",
    )
    g.addoption(
        "--baselines-dir",
        default="baselines",
        metavar="DIR",
        help="directory of per-hardware baseline files (default ./baselines)",
    )
    g.addoption(
        "--update-baselines",
        nargs="?",
        const="all",
        default=None,
        choices=UPDATE_MODES,
        metavar="all|missing|failed",
        help="write measured figures into the baseline file: all (the default when the flag "
        "has no value) every measured item; missing only items without an entry (or with a "
        "stale one); failed only items whose metric checks failed. Review the JSON diff",
    )
    g.addoption(
        "--strict-baselines",
        action="store_true",
        help="a missing or stale baseline fails the item instead of skipping it",
    )
    g.addoption(
        "--one-at-a-time",
        action="store_true",
        help="measure one item at a time on this host while every engine stays up",
    )
    g.addoption(
        "--shard",
        default=None,
        metavar="I/N",
        help="run only shard I of N (1-based); (model, engine) groups stay whole",
    )
    g.addoption(
        "--report",
        action="store_true",
        help="write report.md and report.html into the results directory at the end",
    )
    g.addoption(
        "--progress-every",
        type=int,
        default=0,
        metavar="N",
        help="print a progress line every N requests (default: every 10%%)",
    )
    g.addoption(
        "--benchmark-table",
        action="store_true",
        help="also print pytest-benchmark's own table after a perf run (off: it times one "
        "round of a whole item; the figures are in the verdict table and --benchmark-json)",
    )
