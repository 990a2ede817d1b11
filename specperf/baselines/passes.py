"""Which stored starts are independent: the time a start was measured, the 12-hour windows
starts fall into, and the pass (machine and window) of each start, the unit the verdict's
statistics count (docs/verdict.md, "What is compared")."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping
from typing import Any

# Starts count as independent draws of the host's state (separate passes on one machine,
# separate days for a speed gate) only when at least this many hours apart: starts made within
# one afternoon share its load, clocks and thermal state whatever the calendar says, so neither
# the UTC date nor the number of updates tells them apart.
INDEPENDENT_AFTER_H = 12.0


def start_time(start: Mapping[str, Any]) -> _dt.datetime | None:
    """When a stored start was measured (its ``date``, UTC: the leading ISO time; text after
    it is a label), or None when not recorded."""
    raw = str(start.get("date") or "").split(" ", 1)[0]
    if not raw:
        return None
    try:
        t = _dt.datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=_dt.timezone.utc)


def _windows(times: list[_dt.datetime]) -> list[_dt.datetime]:
    """Per time (in the given order), the start of its window: times sorted, a window opens at
    its first time and holds every time less than INDEPENDENT_AFTER_H later."""
    opened: dict[_dt.datetime, _dt.datetime] = {}
    begin: _dt.datetime | None = None
    gap = _dt.timedelta(hours=INDEPENDENT_AFTER_H)
    for t in sorted(set(times)):
        if begin is None or t - begin >= gap:
            begin = t
        opened[t] = begin
    return [opened[t] for t in times]


def pass_labels(starts: list[Mapping[str, Any]]) -> list[tuple[Any, ...]]:
    """The pass each stored start belongs to: its machine (host and boot id: a fresh VM or a
    reboot is a new host state) and its window on that machine (starts less than
    INDEPENDENT_AFTER_H after the window's first start are one pass, however many updates
    wrote them). Starts without a recorded time are one pass per machine."""
    by_machine: dict[tuple[Any, Any], list[int]] = {}
    for i, st in enumerate(starts):
        by_machine.setdefault((st.get("host"), st.get("boot_id")), []).append(i)
    labels: list[tuple[Any, ...]] = [()] * len(starts)
    for machine, idx in by_machine.items():
        timed = [i for i in idx if start_time(starts[i]) is not None]
        begins = _windows([start_time(starts[i]) for i in timed])  # type: ignore[misc]
        for i, b in zip(timed, begins, strict=True):
            labels[i] = (*machine, b.strftime("%Y-%m-%dT%H:%M:%SZ"))
        for i in idx:
            if i not in timed:
                labels[i] = (*machine, None)
    return labels


def pass_label(start: Mapping[str, Any]) -> tuple[Any, ...]:
    """The pass of one start taken alone (``pass_labels`` of a list of one)."""
    return pass_labels([start])[0]


def independent_windows(starts: list[Mapping[str, Any]]) -> list[str] | None:
    """The windows (their first start's date and time) the starts fall into, on any machine:
    starts less than INDEPENDENT_AFTER_H apart share one. None when a start has no time."""
    times = [start_time(st) for st in starts]
    if not times or any(t is None for t in times):
        return None
    begins = sorted(set(_windows(times)))  # type: ignore[arg-type]
    return [b.strftime("%Y-%m-%dT%H:%MZ") for b in begins]
