"""What a perf run prints (pytester + the calibration engine): specperf's lines only — engine
start progress and the grouped verdict table — and pytest-benchmark's table only when asked."""

from __future__ import annotations

import json

import pytest

from tests.unit.plugin.test_plugin import perf  # noqa: F401  (the pytester project fixture)

pytest_plugins = ["pytester"]

ONE_ITEM = ("-m", "perf", "--suite", "suite.toml", "-p", "no:cacheprovider")
ONE_ITEM += ("--method", "native", "--concurrency", "1")
BENCH_TABLE = "Name (time in"  # pytest-benchmark's table header


def test_perf_output_is_specperfs_and_figures_still_reach_benchmark_json(perf):  # noqa: F811
    out = perf.path / "bench.json"
    r = perf.runpytest_subprocess(*ONE_ITEM, f"--benchmark-json={out}", timeout=600)
    text = r.stdout.str()
    assert BENCH_TABLE not in text and "Legend:" not in text
    info = json.loads(out.read_text())["benchmarks"][0]["extra_info"]
    assert info["specperf_key"] == "m/cal/native/mt-bench/c1/greedy"
    # engine start progress: what is starting, its log, ready
    r.stdout.fnmatch_lines(
        [
            "*engine calibration 'cal' (native): starting for cal-native-mt-bench-c1",
            "*engine calibration 'cal' (native): log *engines*.log",
            "*engine calibration 'cal' (native): ready in * s (pid *)",
        ]
    )
    lines = r.outlines
    ready = next(i for i, x in enumerate(lines) if "ready in" in x)
    started = next(i for i, x in enumerate(lines) if "repeat 1/1 started" in x)
    assert ready < started, lines  # "ready" before the item's first progress line
    # the verdict table: grouped by item, 100 columns at most
    r.stdout.fnmatch_lines(
        ["*specperf verdict*", "  metric*verdict", "*", "cal-native-mt-bench-c1"]
    )
    table = text.split("specperf verdict", 1)[1].split("results:", 1)[0]
    assert all(len(line) <= 100 for line in table.splitlines())


def test_benchmark_table_when_asked(perf):  # noqa: F811
    r = perf.runpytest_subprocess(*ONE_ITEM, "--benchmark-table", timeout=600)
    assert BENCH_TABLE in r.stdout.str()


@pytest.mark.parametrize("flag", ["--concurrency", "--baselines-dir", "--update-baselines"])
def test_help_metavars_are_readable(perf, flag):  # noqa: F811
    r = perf.runpytest_subprocess("--help")
    text = r.stdout.str()
    assert "SPECPERF_" not in text.split("specperf:", 1)[1].split("\n\n", 1)[0]
    line = next(x for x in r.outlines if x.strip().startswith(flag))
    assert (
        line.split()[0]
        in {
            "--concurrency": {"--concurrency=N[,N]"},
            "--baselines-dir": {"--baselines-dir=DIR"},
            "--update-baselines": {"--update-baselines=[all|missing|failed]"},
        }[flag]
    ), line
