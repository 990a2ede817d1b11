"""The pytest surface of specperf (a ``pytest11`` entry point): options, the ``perf`` marker,
item generation from the suite, grouping and ordering, device pinning per xdist worker, the
``specperf`` fixture and the end-of-session summary table. Thin glue: the work is done by
specperf.config (the matrix), specperf.session (measuring and judging an item), specperf.pool
(engines and devices) and specperf.verdict (every comparison).
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import shlex
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from specperf import verdict as vd
from specperf.config import Filters, Item, Suite, load_suite
from specperf.engines.base import Devices
from specperf.errors import EngineStartError, SpecperfError, UnsupportedError
from specperf.progress import watch_engine_starts
from specperf.session import UPDATE_MODES, ItemRun, SessionOptions, SuiteSession

DEFAULT_SUITE = "cpu-tiny"
MAX_TABLE_ROWS = 200  # beyond this the end-of-session table leaves out passing checks
ITEM_FIXTURE = "specperf_item"
_STATE = pytest.StashKey["_State"]()


class _State:
    """Per-process plugin state (controller and every worker have their own)."""

    def __init__(self) -> None:
        self.suite: Suite | None = None
        self.suite_error: str | None = None
        self.filters: Filters = Filters()
        self.results_dir: Path | None = None
        self.devices: Devices | None = None
        self.device_error: str | None = None
        self.hardware_profile: str | None = None
        self.checks: list[vd.Check] = []  # controller: every item's checks
        self.session_failures: list[vd.Check] = []  # rule failures no item reported
        self.perf_items = 0


# --------------------------------------------------------------------------- options
def _csv(value: str) -> list[str]:
    return [v for v in (x.strip() for x in value.split(",")) if v]


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
        default=1,
        metavar="N",
        help="measure each item N times; the verdict uses the median",
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


# --------------------------------------------------------------------------- early pinning
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


def _load_suite_from(ns: Any) -> Suite:
    settings = {}
    for s in getattr(ns, "setting", []) or []:
        name, eq, value = s.partition("=")
        if not eq or not name:
            raise SpecperfError(f"--setting {s!r}: expected NAME=VALUE")
        settings[name.strip()] = value
    return load_suite(getattr(ns, "suite", None) or DEFAULT_SUITE, settings)


# --------------------------------------------------------------------------- configure
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
        config.pluginmanager.register(_Reporter(config, state), "specperf-reporter")


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


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist controller → worker: one results directory for the whole run."""
    state = node.config.stash[_STATE]
    node.workerinput["specperf_results_dir"] = str(state.results_dir)


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Keep each (model, engine) group on one worker, in collection order (native first), with
    ``-n N`` alone or ``--dist load/loadgroup``. The group is looked up from the item id in the
    node id, so it does not depend on xdist rewriting node ids (which pytest 9 ignores)."""
    state: _State = config.stash[_STATE]
    if config.getvalue("dist") not in ("load", "loadgroup") or state.suite is None:
        return None
    if not _perf_requested(config):
        return None  # no perf items will run: leave xdist's own scheduling alone
    from xdist.scheduler import LoadScopeScheduling

    groups = {it.id: it.group for it in state.suite.items(tier=config.getoption("tier"))}

    class SpecperfGroupScheduling(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return group_scope(nodeid, groups)

    return SpecperfGroupScheduling(config, log)


def group_scope(nodeid: str, groups: dict[str, str]) -> str:
    """Scheduling scope of a node id: its specperf group, else the node id itself."""
    base = nodeid.split("@")[0] if nodeid.rfind("@") > nodeid.rfind("]") else nodeid
    if base.endswith("]") and "[" in base:
        param = base[base.rindex("[") + 1 : -1]
        if param in groups:
            return f"specperf-group:{groups[param]}"
    return base


# --------------------------------------------------------------------------- collection
def _filters(config: pytest.Config) -> Filters:
    def many(name: str) -> tuple[str, ...]:
        return tuple(v for raw in config.getoption(f"specperf_{name}") for v in _csv(raw))

    conc = many("concurrency")
    try:
        concurrency = tuple(int(c) for c in conc)
    except ValueError:
        raise SpecperfError(f"--concurrency {','.join(conc)}: expected integers") from None
    return Filters(
        engine=many("engine"),
        method=many("method"),
        dataset=many("dataset"),
        concurrency=concurrency,
        model=many("model"),
        sampling=many("sampling"),
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if ITEM_FIXTURE not in metafunc.fixturenames:
        return
    state: _State = metafunc.config.stash[_STATE]
    if state.suite_error:
        raise pytest.UsageError(f"specperf: {state.suite_error}")
    assert state.suite is not None
    try:
        items = state.suite.items(state.filters, tier=metafunc.config.getoption("tier"))
    except SpecperfError as exc:
        raise pytest.UsageError(f"specperf: {exc}") from None
    params = [
        pytest.param(it, id=it.id, marks=[pytest.mark.perf, pytest.mark.xdist_group(it.group)])
        for it in items
    ]
    metafunc.parametrize(ITEM_FIXTURE, params)


def _perf_requested(config: pytest.Config) -> bool:
    """Perf items start engines: they run with ``-m ...`` or when a perf path is named."""
    if config.option.markexpr:
        return True
    if config.args_source != pytest.Config.ArgsSource.ARGS:
        return False  # testpaths or the current directory: not an explicit request
    for arg in config.args:
        path = Path(arg.split("::")[0])
        if "perf" in path.parts or (path.suffix == ".py" and path.name.startswith("test_perf")):
            return True
    return False


def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    perf = [i for i in items if _item_of(i) is not None]
    if not perf:
        return
    if not _perf_requested(config):
        config.hook.pytest_deselected(items=perf)
        keep = [i for i in items if _item_of(i) is None]
        items[:] = keep
        return
    shard = config.getoption("shard")
    if shard:
        from specperf.shard import parse_shard, select_shard

        try:
            index, total = parse_shard(shard)
        except SpecperfError as exc:
            raise pytest.UsageError(f"specperf: {exc}") from None
        mine = {id(i) for i in select_shard(perf, index, total, key=lambda i: _item_of(i).group)}  # type: ignore[union-attr]
        dropped = [i for i in perf if id(i) not in mine]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = [i for i in items if id(i) not in {id(d) for d in dropped}]
            perf = [i for i in perf if id(i) in mine]
    # stable order: the suite's run order (per (model, engine): native first, then methods)
    order = {id(i): n for n, i in enumerate(items)}
    state: _State = config.stash[_STATE]
    suite_order = {}
    if state.suite is not None:
        for n, it in enumerate(state.suite.items(tier=config.getoption("tier"))):
            suite_order[it.id] = n
    items.sort(
        key=lambda i: (
            (0, suite_order.get(_item_of(i).id, 0), order[id(i)])  # type: ignore[union-attr]
            if _item_of(i) is not None
            else (1, 0, order[id(i)])
        )
    )
    state.perf_items = len(perf)


def _item_of(node: pytest.Item) -> Item | None:
    callspec = getattr(node, "callspec", None)
    if callspec is None:
        return None
    value = callspec.params.get(ITEM_FIXTURE)
    return value if isinstance(value, Item) else None


# --------------------------------------------------------------------------- fixtures
class SpecperfFixture:
    """What a perf test uses: measure an item, then conclude it (pass/fail/skip/xfail)."""

    def __init__(self, session: SuiteSession, request: pytest.FixtureRequest) -> None:
        self.session = session
        self.request = request

    def measure(self, item: Item, benchmark: Any = None) -> ItemRun:
        wrap = None
        if benchmark is not None:

            def wrap(fn: Any) -> Any:
                return benchmark.pedantic(fn, rounds=1, iterations=1, warmup_rounds=0)

        try:
            with watch_engine_starts(self.session, item):
                run = self.session.measure(item, wrap=wrap)
        except UnsupportedError as exc:
            pytest.skip(f"not supported by this engine: {exc}")
        except EngineStartError as exc:
            pytest.fail(f"engine did not start: {exc}", pytrace=False)
        except SpecperfError as exc:
            pytest.fail(str(exc), pytrace=False)
        if benchmark is not None:
            benchmark.extra_info.update(_extra_info(run))
        return run

    def conclude(self, run: ItemRun) -> None:
        try:
            run = self.session.judge(run)
        except SpecperfError as exc:  # e.g. a malformed baseline file: one line, no traceback
            pytest.fail(str(exc), pytrace=False)
        node = self.request.node
        node.user_properties.append(("specperf_checks", [c.to_json() for c in run.checks]))
        assert run.outcome is not None
        lines = "\n".join(run.outcome.lines)
        if run.updated:
            lines = (
                lines + "\n" if lines else ""
            ) + f"baseline updated: {self.session.baseline_file}"
        if run.outcome.status == "fail":
            pytest.fail(lines, pytrace=False)
        if run.outcome.status == "skip":
            pytest.skip(lines)
        if run.outcome.status == "xfail":
            pytest.xfail(lines)
        if lines:
            node.user_properties.append(("specperf_notes", lines))


def _extra_info(run: ItemRun) -> dict[str, Any]:
    figs = {m: f.get("value") for m, f in run.result.figures.items()}
    return {
        "specperf_key": run.item.key.as_str(),
        "engine_version": run.engine_version,
        "hardware_profile": run.result.hardware_profile,
        **figs,
    }


@pytest.fixture(scope="session")
def specperf_session(request: pytest.FixtureRequest) -> Iterator[SuiteSession]:
    """The worker's suite session: engine pool (one engine per spec, reused across modules)."""
    config = request.config
    state: _State = config.stash[_STATE]
    if state.suite_error:
        pytest.fail(f"specperf: {state.suite_error}", pytrace=False)
    if state.device_error:
        pytest.fail(f"specperf: {state.device_error}", pytrace=False)
    assert state.suite is not None and state.results_dir is not None
    opts = SessionOptions(
        suite=state.suite,
        results_dir=state.results_dir,
        baselines_dir=Path(config.getoption("baselines_dir")).resolve(),
        hardware_profile=_hardware_profile(config, state),
        devices=state.devices or Devices(worker=os.environ.get("PYTEST_XDIST_WORKER", "master")),
        repeat=config.getoption("repeat"),
        restart_between_repeats=bool(
            config.getoption("restart_between_repeats") or state.suite.restart_between_repeats
        ),
        tier=config.getoption("tier"),
        update=config.getoption("update_baselines"),
        strict=config.getoption("strict_baselines"),
        one_at_a_time=config.getoption("one_at_a_time"),
        progress_every=config.getoption("progress_every"),
        rerun_hint=_rerun_hint(config),
    )
    log = None if hasattr(config, "workerinput") else _terminal_logger(config)
    try:
        session = SuiteSession(opts, log=log)
    except SpecperfError as exc:
        pytest.fail(f"specperf: {exc}", pytrace=False)
    try:
        yield session
    finally:
        session.close()


@pytest.fixture
def specperf(specperf_session: SuiteSession, request: pytest.FixtureRequest) -> SpecperfFixture:
    return SpecperfFixture(specperf_session, request)


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


# --------------------------------------------------------------------------- reporting
class _Reporter:
    """Controller-side: collects every item's checks (xdist ships user_properties back),
    evaluates cross-engine rules at the end, writes verdict.json, prints the table."""

    def __init__(self, config: pytest.Config, state: _State) -> None:
        self.config = config
        self.state = state

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "call" and not (report.when == "setup" and report.skipped):
            return
        for name, value in report.user_properties:
            if name == "specperf_checks":
                self.state.checks.extend(vd.Check.from_json(c) for c in value)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        state, config = self.state, self.config
        if state.suite is None or state.results_dir is None or not state.checks:
            return
        from specperf.baselines import baseline_path, write_atomic
        from specperf.session import merge_rule_checks, session_rule_checks

        profile = config.getoption("hardware_profile") or _profile_from_results(state.results_dir)
        bfile = baseline_path(
            Path(config.getoption("baselines_dir")).resolve(),
            profile or "unknown",
            state.suite.baseline_file,
        )
        try:
            session_checks = session_rule_checks(state.suite, state.results_dir, bfile)
        except SpecperfError as exc:  # rules that cannot be judged never end as a pass
            session_checks = [
                vd.Check("session", "rules", "fail", reason=f"rules not evaluated: {exc}")
            ]
        state.checks, state.session_failures = merge_rule_checks(state.checks, session_checks)
        counts: dict[str, int] = {}
        for c in state.checks:
            counts[c.status] = counts.get(c.status, 0) + 1
        out = {"counts": counts, "checks": [c.to_json() for c in state.checks]}
        write_atomic(state.results_dir / "verdict.json", json.dumps(out, indent=1) + "\n")
        if state.session_failures and session.exitstatus == 0:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        state = self.state
        if not state.checks:
            return
        tr = terminalreporter
        tr.section("specperf verdict")
        checks = state.checks
        many = len(checks) > MAX_TABLE_ROWS
        from specperf.report.terminal import verdict_table

        tr.write_line(verdict_table(checks, include_pass=not many, width=_width(tr)))
        if many:
            passed = sum(c.status == "pass" for c in checks)
            tr.write_line(f"({passed} passing checks not shown; all in verdict.json)")
        for c in state.session_failures:
            tr.write_line(f"FAIL (judged at the end of the session) {c.line()}", red=True)
        tr.write_line(f"specperf: {vd.summary_line(checks)}")
        fails = sum(c.status == "fail" for c in checks)
        tr.write_line(f"results: {state.results_dir}  ({fails} failed check(s))")
        self._report(tr)

    def _report(self, tr: Any) -> None:
        """The report helper's outputs: report files (--report) and the job summary when
        $GITHUB_STEP_SUMMARY is set."""
        state = self.state
        want_report = self.config.getoption("report")
        if not want_report and not os.environ.get("GITHUB_STEP_SUMMARY"):
            return
        try:
            from specperf.report import terminal

            if want_report:
                text = terminal.session_summary(state.results_dir, state.checks)
                for line in text.splitlines():
                    if line.startswith(("report:", "report not written")):
                        tr.write_line(line)
            else:
                terminal.write_step_summary(state.results_dir, state.checks)
        except (ImportError, SpecperfError) as exc:
            tr.write_line(f"report not written: {exc}")


def _width(tr: Any) -> int:
    """The terminal's width, at most 100 (the verdict table's layout width)."""
    return min(100, int(getattr(getattr(tr, "_tw", None), "fullwidth", 100) or 100))


def _profile_from_results(results_dir: Path) -> str | None:
    snap = results_dir / vd.SUITE_SNAPSHOT
    if snap.exists():
        return json.loads(snap.read_text()).get("hardware_profile")
    return None


__all__ = ["SpecperfFixture", "detect_hardware_profile"]
