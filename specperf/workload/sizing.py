"""How many requests an item sends: sized by measured duration, fixed by its baseline.

A suite file names one request count per item, but how long that count lasts depends on the
machine: on the 2-core AVX-512 EPYC the committed cpu-tiny items last 5-15 s, on a quiet run of
the same VM ngram MT-Bench c=1 lasted 4.1 s, and an AVX-512/AMX CPU decodes 3-5x faster, so 16
requests can be over in 0.3-0.7 s. An item shorter than ``[workload] min_duration_s`` is mostly
ramp-up and tail, and the verdict does not judge its speed. So, where the count is not fixed yet,
the first start measures the suite's count and, when it lasted less than ``SIZE_TARGET`` times
the minimum, the item is measured again with a whole multiple of it, sized to that target (a
quieter run of the same machine can be much faster than a loaded one: it must stay above the
minimum too). The margin applies to the suite's own count as well: a count accepted just above
the minimum leaves a slightly faster later start below it, and that run's speed unjudged. The
short start stays on disk (``sizing/``) and is not one
of the item's starts.

A count is fixed by the item's baseline entry: once an entry of this hardware profile exists
with the same fingerprint but for ``num_requests`` (a whole multiple of the suite's count),
every later run sends that count, so run and baseline measure the same workload. To size an
item again (e.g. the entry was made on a loaded machine), remove its entry and run
``--update-baselines=missing``.

Sizing applies only where the suite gates a speed or latency metric: it costs engine time, and
without such a gate nothing reads the item's duration.

``[workload] size_to_min_duration = false`` pins the count: every run sends the suite's count,
and an entry made with another count fixes nothing (it is stale). A suite whose EAGLE3 head is
fitted to its own measured prompts needs this (the engine-path fit refuses it otherwise): the
grown count's extra prompts are ones the head never saw, so its MAL would depend on the count.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

SIZE_TARGET = 2.0  # sized items last this many times [workload] min_duration_s
MAX_SIZE_FACTOR = 16  # bound on the multiple, whatever the first start measured
SIZING_DIR = "sizing"  # where the too-short first start is kept (not an item start)
SIZING_SUMMARY = "summary.sizing.json"  # its summary, renamed so no result loader takes it


@dataclass(frozen=True)
class Sizing:
    """What decided the item's request count, written into each start's run info."""

    configured: int  # the suite file's count
    requests: int  # the count measured
    source: str  # "suite", "baseline" (the entry's count) or "measured" (grown here)
    first_duration_s: float | None = None  # the suite count's start that was too short

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "configured_requests": self.configured,
            "requests": self.requests,
            "source": self.source,
        }
        if self.first_duration_s is not None:
            out["first_duration_s"] = round(self.first_duration_s, 3)
        return out

    def describe(self) -> str:
        if self.source == "baseline":
            return (
                f"{self.requests} requests, the count of its baseline entry "
                f"(suite: {self.configured})"
            )
        if self.source == "measured" and self.first_duration_s is not None:
            return (
                f"{self.requests} requests (x{self.requests // self.configured}): the suite's "
                f"{self.configured} lasted {self.first_duration_s:.2f} s"
            )
        return f"{self.requests} requests (the suite's count)"


def count_from_entry(
    entry_fingerprint: Mapping[str, Any] | None,
    fingerprint: Mapping[str, Any],
    configured: int,
) -> int | None:
    """The request count a baseline entry fixes for this item, or None when it fixes none: no
    entry, an entry that differs in anything but ``num_requests`` (it is stale and will be
    replaced, so the item may be sized), or a count that is not a whole multiple of the suite's
    (the suite's count changed since: the entry is stale)."""
    if not entry_fingerprint:
        return None
    stored = entry_fingerprint.get("num_requests")
    if not isinstance(stored, int) or stored < configured or stored % configured:
        return None
    strip = {"num_requests"}
    same = {k: v for k, v in entry_fingerprint.items() if k not in strip} == {
        k: v for k, v in fingerprint.items() if k not in strip
    }
    return stored if same else None


def grown_count(
    configured: int,
    duration_s: float | None,
    min_duration_s: float,
    deadline_s: float | None = None,
) -> int | None:
    """The count to measure with when ``configured`` requests lasted ``duration_s`` less than
    ``SIZE_TARGET`` times the minimum; None when it was long enough (or nothing was measured).
    A whole multiple of the suite's count, at most ``MAX_SIZE_FACTOR`` times it, and expected to
    end within half the item deadline."""
    target = SIZE_TARGET * min_duration_s
    if min_duration_s <= 0 or duration_s is None or duration_s >= target:
        return None
    took = max(duration_s, 1e-3)
    factor = min(max(2, math.ceil(target / took)), MAX_SIZE_FACTOR)
    if deadline_s:
        factor = min(factor, int(0.5 * deadline_s / took))
    return configured * factor if factor >= 2 else None
