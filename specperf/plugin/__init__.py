"""The pytest surface of specperf (a ``pytest11`` entry point): options, the ``perf`` marker,
item generation from the suite, grouping and ordering, device pinning per xdist worker, the
``specperf`` fixture and the end-of-session summary table. Thin glue: the work is done by
specperf.config (the matrix), specperf.suite_run (measuring and judging an item), specperf.pool
(engines and devices) and specperf.verdict (every comparison).

pytest registers THIS module as the plugin, so every hook and fixture of the package is
imported here (pytest finds them by name in this namespace):

- ``options``: the command-line options; ``configure``: pinning, suite, results folder,
  preflight; ``collection``: items, filters, shards, order; ``fixtures``: ``specperf`` and
  ``specperf_session``; ``scheduler``: xdist grouping; ``reporter``: the end of the session.
"""

from __future__ import annotations

from specperf.plugin.collection import pytest_collection_modifyitems, pytest_generate_tests
from specperf.plugin.configure import (
    pytest_cmdline_main,
    pytest_configure,
    pytest_load_initial_conftests,
)
from specperf.plugin.fixtures import (
    SpecperfFixture,
    detect_hardware_profile,
    pytest_runtest_teardown,
    specperf,
    specperf_session,
)
from specperf.plugin.options import pytest_addoption
from specperf.plugin.reporter import Reporter
from specperf.plugin.scheduler import (
    group_scope,
    pytest_configure_node,
    pytest_xdist_make_scheduler,
)
from specperf.plugin.state import DEFAULT_SUITE, ITEM_FIXTURE, MAX_TABLE_ROWS

__all__ = [
    "DEFAULT_SUITE",
    "ITEM_FIXTURE",
    "MAX_TABLE_ROWS",
    "Reporter",
    "SpecperfFixture",
    "detect_hardware_profile",
    "group_scope",
    "pytest_addoption",
    "pytest_cmdline_main",
    "pytest_collection_modifyitems",
    "pytest_configure",
    "pytest_configure_node",
    "pytest_generate_tests",
    "pytest_load_initial_conftests",
    "pytest_runtest_teardown",
    "pytest_xdist_make_scheduler",
    "specperf",
    "specperf_session",
]
