"""What a suite run is given (``RunOptions``: the command line and the suite, resolved) and what
measuring one item gives back (``ItemRun``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specperf import verdict as vd
from specperf.config import Item, Suite
from specperf.engines.base import Devices

UPDATE_MODES = ("all", "missing", "failed")


@dataclass
class RunOptions:
    suite: Suite
    results_dir: Path
    baselines_dir: Path
    hardware_profile: str
    devices: Devices = field(default_factory=Devices)
    hardware_profile_overridden: bool = False  # --hardware-profile given, not detected
    repeat: int = 1
    restart_between_repeats: bool = False  # each repeat on a fresh engine start
    tier: str | None = None
    update: str | None = None  # None | all | missing | failed
    strict: bool = False
    one_at_a_time: bool = False
    progress_every: int = 0  # requests per progress line; 0: about every 10 %
    rerun_hint: str = "pytest -m perf"  # the command line that selects this run's items
    # item keys this run selected (after --method/-k/--shard); None: not known (every item)
    selected: tuple[str, ...] | None = None
    # Called with the repeat number k >= 2 after the previous start's engine is stopped and before
    # the next one starts (``restart_between_repeats`` only). An A/B comparison on a shared host
    # runs the other configuration's start here, so both sides share the window start by start
    # (a one-block baseline misses the drift that follows it: docs/baselines.md, "Same-window
    # comparisons must interleave").
    between_starts: Callable[[int], None] | None = None


@dataclass
class ItemRun:
    """What measuring one item produced."""

    item: Item
    dir: Path
    result: vd.ItemResult
    summaries: list[dict[str, Any]]
    engine_version: str | None
    checks: list[vd.Check] = field(default_factory=list)
    outcome: vd.Outcome | None = None
    updated: bool = False
