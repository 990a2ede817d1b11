"""Items from the suite: the command-line filters, the parametrized ``specperf_item``, which
runs select perf items at all, sharding and the suite's run order."""

from __future__ import annotations

from pathlib import Path

import pytest

from specperf.config import Filters, Item
from specperf.errors import SpecperfError
from specperf.plugin.state import _STATE, ITEM_FIXTURE, _State


def _csv(value: str) -> list[str]:
    return [v for v in (x.strip() for x in value.split(",")) if v]


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
