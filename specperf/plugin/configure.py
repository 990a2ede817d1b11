"""Start of a session: rootdir, device pinning per xdist worker (before anything touches CUDA),
the suite and filters, the results folder, the input preflight, and the reporter."""

from __future__ import annotations

import datetime as _dt
import os
from pathlib import Path
from typing import Any

import pytest

from specperf.errors import SpecperfError
from specperf.plugin.collection import _filters, _perf_requested
from specperf.plugin.fixtures import detect_hardware_profile
from specperf.plugin.reporter import Reporter
from specperf.plugin.state import _STATE, DEFAULT_SUITE, _load_suite_from, _State


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(
    early_config: pytest.Config, parser: pytest.Parser, args: list[str]
) -> None:
    """Rootdir/ini file from the project (specperf.rootdir), then pin this xdist worker's GPUs
    before any conftest or test module can touch CUDA."""
    from specperf.rootdir import use_project_rootdir

    use_project_rootdir(early_config, args)
    state = _State()
    early_config.stash[_STATE] = state
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    ns = early_config.known_args_namespace
    if not worker and not getattr(ns, "gpus", None):
        return
    _assign(early_config, state, ns)
    if state.devices is not None and state.devices.gpus:
        from specperf.pool import pin_process

        pin_process(state.devices)


def _assign(config: pytest.Config, state: _State, ns: Any) -> None:
    from specperf.pool import assign_devices, visible_gpus

    worker = os.environ.get("PYTEST_XDIST_WORKER", "master")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    try:
        suite = _load_suite_from(ns)
        per = max((e.gpus for e in suite.engines), default=1)
        gpus = visible_gpus(getattr(ns, "gpus", None))
        state.devices = assign_devices(worker, count, gpus=gpus, gpus_per_worker=per)
    except SpecperfError as exc:
        state.device_error = str(exc)


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """A perf run's terminal output is specperf's: pytest-benchmark's table (one round of a
    whole item, meaningless there) only with --benchmark-table; --benchmark-json still gets
    every figure."""
    if _perf_requested(config) and not config.getoption("benchmark_table", False):
        config.option.benchmark_quiet = True


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "perf: performance matrix items (engines started, slow)")
    state = config.stash.get(_STATE, None)
    if state is None:
        state = config.stash[_STATE] = _State()
    workerinput = getattr(config, "workerinput", None)
    controller = workerinput is None or not workerinput.get("specperf_results_dir")
    state.results_dir = (
        _results_dir(config) if controller else Path(workerinput["specperf_results_dir"])
    )
    try:
        state.suite = _load_suite_from(config.option)
        state.filters = _filters(config)
    except SpecperfError as exc:
        if controller and _perf_requested(config):
            _stop_on_input_errors([str(exc)], state.results_dir)
        if _explicit_suite(config):
            raise pytest.UsageError(f"specperf: {exc}") from None
        state.suite_error = str(exc)
    if state.devices is None and state.device_error is None:
        _assign(config, state, config.option)
    if controller:
        if _perf_requested(config):
            _preflight(config, state)
        config.pluginmanager.register(Reporter(config, state), "specperf-reporter")


def _stop_on_input_errors(errors: list[str], results_dir: Path) -> None:
    from specperf.preflight import failure_text

    raise pytest.UsageError(failure_text(errors, results_dir))


def _preflight(config: pytest.Config, state: _State) -> None:
    """Every input file the selected items read, before any engine starts (specperf.preflight):
    one line per problem, then the results path, and the run stops (usage error)."""
    from specperf.preflight import check_inputs

    assert state.suite is not None and state.results_dir is not None
    try:
        items = state.suite.items(state.filters, tier=config.getoption("tier"))
    except SpecperfError:
        return  # a filter that selects nothing: reported at collection, as before
    errors = check_inputs(items, _baseline_files(config, state))
    if errors:
        _stop_on_input_errors(errors, state.results_dir)


def _baseline_files(config: pytest.Config, state: _State) -> list[Path]:
    """The baseline file of each worker of this run (workers of one run may differ in CPU-set
    size, which is part of a CPU hardware profile)."""
    from specperf.baselines import baseline_path
    from specperf.pool import assign_devices, visible_gpus

    assert state.suite is not None
    bdir = Path(config.getoption("baselines_dir")).resolve()
    folder = state.suite.baseline_file  # a suite that keeps its files apart: <dir>/<folder>/
    given = config.getoption("hardware_profile")
    if given:
        return [baseline_path(bdir, given, folder)]
    count = int(getattr(config.option, "numprocesses", 0) or 0)
    if getattr(config.option, "dist", "no") == "no":
        count = 0
    names = [f"gw{i}" for i in range(count)] or ["master"]
    per = max((e.gpus for e in state.suite.engines), default=1)
    try:
        gpus = visible_gpus(config.getoption("gpus"))
        devices = [assign_devices(w, len(names), gpus=gpus, gpus_per_worker=per) for w in names]
    except SpecperfError:
        return []  # device errors are reported by the session, as before
    return [baseline_path(bdir, detect_hardware_profile(d), folder) for d in devices]


def _explicit_suite(config: pytest.Config) -> bool:
    """Options naming the suite or its items were given: their errors are usage errors."""
    o = config.option
    return bool(
        o.suite != DEFAULT_SUITE
        or o.setting
        or any(
            getattr(o, f"specperf_{n}")
            for n in ("engine", "method", "dataset", "concurrency", "model", "sampling")
        )
        or o.markexpr
    )


def _results_dir(config: pytest.Config) -> Path:
    given = config.getoption("results_dir")
    if given:
        return Path(given).resolve()
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return (Path(config.invocation_params.dir) / "results" / stamp).resolve()
