"""Per-process plugin state and the names every part of the plugin shares."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from specperf import verdict as vd
from specperf.config import Filters, Suite, load_suite
from specperf.engines.base import Devices
from specperf.errors import SpecperfError

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


def _load_suite_from(ns: Any) -> Suite:
    settings = {}
    for s in getattr(ns, "setting", []) or []:
        name, eq, value = s.partition("=")
        if not eq or not name:
            raise SpecperfError(f"--setting {s!r}: expected NAME=VALUE")
        settings[name.strip()] = value
    return load_suite(getattr(ns, "suite", None) or DEFAULT_SUITE, settings)
