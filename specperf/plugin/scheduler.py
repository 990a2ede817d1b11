"""xdist glue: one results folder for every worker, and a scheduler that keeps each
(model, engine) group on one worker in the suite's order."""

from __future__ import annotations

from typing import Any

import pytest

from specperf.plugin.collection import _perf_requested
from specperf.plugin.state import _STATE, _State


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
