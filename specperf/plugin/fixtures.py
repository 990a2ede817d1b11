"""The ``specperf_session`` and ``specperf`` fixtures: measure an item, then conclude it
(pass / fail / skip / xfail) through the worker's ``SuiteRun``."""

from __future__ import annotations

import os
import shlex
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from specperf import verdict as vd
from specperf.config import Item
from specperf.engines.base import Devices
from specperf.errors import EngineStartError, SpecperfError, UnsupportedError
from specperf.plugin.collection import _item_of
from specperf.plugin.state import _STATE, DEFAULT_SUITE, _State
from specperf.progress import watch_engine_starts
from specperf.suite_run import ItemRun, RunOptions, SuiteRun


class SpecperfFixture:
    """What a perf test uses: measure an item, then conclude it (pass/fail/skip/xfail)."""

    def __init__(self, suite_run: SuiteRun, request: pytest.FixtureRequest) -> None:
        self.suite_run = suite_run
        self.request = request

    def measure(self, item: Item, benchmark: Any = None) -> ItemRun:
        wrap = None
        if benchmark is not None:

            def wrap(fn: Any) -> Any:
                return benchmark.pedantic(fn, rounds=1, iterations=1, warmup_rounds=0)

        try:
            with watch_engine_starts(self.suite_run, item):
                run = self.suite_run.measure(item, wrap=wrap)
        except UnsupportedError as exc:
            pytest.skip(f"NOT EVALUATED: not supported by this engine: {exc}")
        except EngineStartError as exc:
            pytest.fail(f"engine did not start: {exc}", pytrace=False)
        except SpecperfError as exc:
            pytest.fail(str(exc), pytrace=False)
        if benchmark is not None:
            benchmark.extra_info.update(_extra_info(run))
        return run

    def conclude(self, run: ItemRun) -> vd.Outcome:
        """Judge the item and record its checks; a failed, skipped or quarantined outcome ends
        the test here (pytest.fail / skip / xfail) with its lines. Returns the outcome (then
        "pass") so the test asserts on it."""
        try:
            run = self.suite_run.judge(run)
        except SpecperfError as exc:  # e.g. a malformed baseline file: one line, no traceback
            pytest.fail(str(exc), pytrace=False)
        node = self.request.node
        node.user_properties.append(("specperf_checks", [c.to_json() for c in run.checks]))
        assert run.outcome is not None
        lines = "\n".join(run.outcome.lines)
        if run.updated:
            lines = (
                lines + "\n" if lines else ""
            ) + f"baseline updated: {self.suite_run.baseline_file}"
        if run.outcome.status == "fail":
            pytest.fail(lines, pytrace=False)
        if run.outcome.status == "skip":
            pytest.skip(lines)
        if run.outcome.status == "xfail":
            pytest.xfail(lines)
        if lines:
            node.user_properties.append(("specperf_notes", lines))
        return run.outcome


def _extra_info(run: ItemRun) -> dict[str, Any]:
    figs = {m: f.get("value") for m, f in run.result.figures.items()}
    return {
        "specperf_key": run.item.key.as_str(),
        "engine_version": run.engine_version,
        "hardware_profile": run.result.hardware_profile,
        **figs,
    }


@pytest.fixture(scope="session")
def specperf_session(request: pytest.FixtureRequest) -> Iterator[SuiteRun]:
    """The worker's ``SuiteRun``: its engine pool (one engine per spec, reused across modules)."""
    config = request.config
    state: _State = config.stash[_STATE]
    if state.suite_error:
        pytest.fail(f"specperf: {state.suite_error}", pytrace=False)
    if state.device_error:
        pytest.fail(f"specperf: {state.device_error}", pytrace=False)
    assert state.suite is not None and state.results_dir is not None
    opts = RunOptions(
        suite=state.suite,
        results_dir=state.results_dir,
        baselines_dir=Path(config.getoption("baselines_dir")).resolve(),
        hardware_profile=_hardware_profile(config, state),
        hardware_profile_overridden=bool(config.getoption("hardware_profile")),
        devices=state.devices or Devices(worker=os.environ.get("PYTEST_XDIST_WORKER", "master")),
        repeat=_repeat(config, state.suite.repeat),
        restart_between_repeats=bool(
            config.getoption("restart_between_repeats") or state.suite.restart_between_repeats
        ),
        tier=config.getoption("tier"),
        update=config.getoption("update_baselines"),
        strict=config.getoption("strict_baselines"),
        one_at_a_time=config.getoption("one_at_a_time"),
        progress_every=config.getoption("progress_every"),
        rerun_hint=_rerun_hint(config),
        selected=_selected_keys(request.session),
    )
    log = None if hasattr(config, "workerinput") else _terminal_logger(config)
    try:
        suite_run = SuiteRun(opts, log=log)
    except SpecperfError as exc:
        pytest.fail(f"specperf: {exc}", pytrace=False)
    try:
        yield suite_run
    finally:
        suite_run.close()


def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """Stop the worker's engine after the last perf item that needs it when more tests follow
    (the order puts each spec's items together): an idle server would hold its CPUs or GPU
    memory through the rest of the session. The last test of the session leaves it to the
    ``specperf_session`` teardown."""
    mine = _item_of(item)
    suite_run = getattr(item, "funcargs", {}).get("specperf_session")
    if mine is None or nextitem is None or not isinstance(suite_run, SuiteRun):
        return
    following = _item_of(nextitem)
    if following is None or following.spec != mine.spec:
        suite_run.release_engine("no later item of this worker needs it")


@pytest.fixture
def specperf(specperf_session: SuiteRun, request: pytest.FixtureRequest) -> SpecperfFixture:
    return SpecperfFixture(specperf_session, request)


def _selected_keys(session: pytest.Session) -> tuple[str, ...]:
    """Keys of the perf items this run selected (after --method, -k, --shard): a same-run rule
    whose reference item was left out says so instead of failing as unmeasured."""
    items = (_item_of(node) for node in session.items)
    return tuple(sorted({it.key.as_str() for it in items if it is not None}))


def _hardware_profile(config: pytest.Config, state: _State) -> str:
    given = config.getoption("hardware_profile")
    if given:
        return str(given)
    if state.hardware_profile is None:
        state.hardware_profile = detect_hardware_profile(state.devices)
    return state.hardware_profile


def detect_hardware_profile(devices: Devices | None) -> str:
    """The profile of what this worker's engines run on (specperf.environment): its GPUs
    (``nvidia-l40x1`` for one L40 per worker), else its CPU model and CPU-set size."""
    from specperf import environment

    if devices is not None and devices.gpus:
        rows = environment.visible_gpus(list(devices.gpus))
        return environment.hardware_profile(gpus=rows)
    cpus = len(devices.cpus) if devices is not None and devices.cpus else None
    return environment.hardware_profile(gpus=[], cpus=cpus)


def _rerun_hint(config: pytest.Config) -> str:
    parts = ["pytest", "-m", "perf"]
    opt = config.option
    if opt.suite != DEFAULT_SUITE:
        parts += ["--suite", opt.suite]
    for s in opt.setting:
        parts += ["--setting", s]
    if opt.baselines_dir != "baselines":
        parts += ["--baselines-dir", opt.baselines_dir]
    if opt.hardware_profile:
        parts += ["--hardware-profile", opt.hardware_profile]
    if opt.tier:
        parts += ["--tier", opt.tier]
    return " ".join(shlex.quote(p) for p in parts)


def _terminal_logger(config: pytest.Config) -> Any:
    tr = config.pluginmanager.get_plugin("terminalreporter")
    capman = config.pluginmanager.get_plugin("capturemanager")
    if tr is None:
        return None
    lock = threading.Lock()  # the engine start watch prints from its own thread

    def log(line: str) -> None:
        with lock:
            if capman is not None:
                with capman.global_and_fixture_disabled():
                    tr.write_line(line)
            else:
                tr.write_line(line)

    return log


def _repeat(config: pytest.Config, suite_repeat: int) -> int:
    """--repeat when given (0 included, so SuiteRun rejects it by name), else the suite's."""
    given = config.getoption("repeat")
    return suite_repeat if given is None else given
