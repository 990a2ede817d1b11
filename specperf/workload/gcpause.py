"""Keep the measuring process's garbage collector out of the measured window.

Why: the client that times each chunk is the pytest process, which by the measured phase holds
torch, transformers, pandas and everything earlier tests left behind (a million objects and
more). A full collection scans all of them and stops every thread of the process meanwhile:
0.3 s for a million objects on the 2-core dev VM, longer on a bigger heap. One such pause in a
2.5 s item is a 10-30 % "slowdown" that no engine made (a CI run judged an unchanged
calibration engine −26 % against its baseline; not shown to be this). ``quiet_gc`` freezes
the heap as the window opens (``gc.freeze``: what exists is never scanned until the window
ends), so a collection inside the window only walks what the window itself allocated. The
freeze costs nothing (no collection first: garbage already on the heap waits for the first
full collection after the window), and the collector stays enabled, so cyclic garbage the
window makes is still freed.

It also sums the collector's pauses inside the window (``gc.callbacks``), so a run can say when
the client itself stopped for long enough to matter.
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

# A pause sum worth a note in the run: 1 % of a 5 s item (the default minimum duration).
NOTE_PAUSE_S = 0.05

_lock = threading.Lock()
_depth = 0  # windows open in this process; the heap is frozen while any is


@dataclass
class GcPauses:
    """What the collector did inside one window: collections per generation and their total
    stop time."""

    collections: int = 0
    full_collections: int = 0
    pause_s: float = 0.0
    frozen_objects: int = 0


@contextmanager
def quiet_gc(freeze: bool = True) -> Iterator[GcPauses]:
    """Freeze the heap for the duration of the block (when ``freeze``), and count
    the collector's pauses inside it. Nested or concurrent blocks share one freeze: the heap
    is unfrozen when the last one ends."""
    global _depth
    stats = GcPauses()
    started: list[float] = []

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started.append(time.perf_counter())
        elif started:
            stats.pause_s += time.perf_counter() - started.pop()
            stats.collections += 1
            if info.get("generation") == 2:
                stats.full_collections += 1

    if freeze:
        with _lock:
            if _depth == 0:
                gc.freeze()
            _depth += 1
            stats.frozen_objects = gc.get_freeze_count()
    gc.callbacks.append(on_gc)
    try:
        yield stats
    finally:
        gc.callbacks.remove(on_gc)
        if freeze:
            with _lock:
                _depth -= 1
                if _depth == 0:
                    gc.unfreeze()


def pause_note(stats: GcPauses, duration_s: float) -> str | None:
    """One line for the run's notes when the client's collector stopped it for long enough to
    move the item's figures (>= NOTE_PAUSE_S in total), else None."""
    if stats.pause_s < NOTE_PAUSE_S:
        return None
    share = f" ({stats.pause_s / duration_s:.1%} of the measured window)" if duration_s > 0 else ""
    return (
        f"the measuring client's garbage collector paused it {stats.pause_s:.2f} s in "
        f"{stats.collections} collection(s), {stats.full_collections} full{share}: "
        "timings in that window include the pause"
    )
