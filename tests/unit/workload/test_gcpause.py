"""The measured window keeps the client's garbage collector off the old heap (gcpause)."""

from __future__ import annotations

import asyncio
import gc
import weakref

from specperf.schemas import PromptItem, SamplingParams, WorkloadSpec
from specperf.workload import run_workload
from specperf.workload.gcpause import NOTE_PAUSE_S, GcPauses, pause_note, quiet_gc
from tests.calibration.client import CalibrationClient
from tests.calibration.server import CalibrationConfig, CalibrationServer


def test_the_heap_is_frozen_inside_the_window_and_released_after():
    assert gc.get_freeze_count() == 0
    keep = [[i] for i in range(10_000)]  # survives the first collection: frozen
    with quiet_gc() as outer:
        assert gc.get_freeze_count() >= len(keep)
        assert outer.frozen_objects >= len(keep)
        with quiet_gc():  # nested: one freeze, still frozen when the inner block ends
            pass
        assert gc.get_freeze_count() >= len(keep)
    assert gc.get_freeze_count() == 0
    with quiet_gc(freeze=False):
        assert gc.get_freeze_count() == 0


class _Node:
    """A weak-referenceable object for a reference cycle only the collector can free."""

    ref: object = None


def test_a_full_collection_inside_the_window_walks_only_what_the_window_made():
    """Deterministic, not timed: garbage made before the window (an old cycle) is not even
    looked at by a full collection inside it, while the window's own cycle is freed; the old
    cycle goes at the first collection after the window."""
    gc.disable()  # no automatic collection may free the old cycle before the window opens
    try:
        old = _Node()
        old.ref = old
        old_alive = weakref.ref(old)
        del old
        with quiet_gc() as pauses:
            new = _Node()
            new.ref = new
            new_alive = weakref.ref(new)
            del new
            gc.collect()
            assert new_alive() is None  # the window's garbage is still collected
            assert old_alive() is not None  # the old heap was not walked
        assert pauses.full_collections == 1
        gc.collect()
        assert old_alive() is None
    finally:
        gc.enable()


def test_pauses_over_the_note_level_are_named_in_one_line():
    assert pause_note(GcPauses(collections=3, pause_s=NOTE_PAUSE_S / 2), 2.0) is None
    note = pause_note(GcPauses(collections=2, full_collections=1, pause_s=0.5), 2.5)
    assert note is not None and "\n" not in note
    assert "0.50 s" in note and "2 collection(s), 1 full" in note and "20.0%" in note


def test_run_workload_reports_its_window_and_leaves_nothing_frozen():
    cfg = CalibrationConfig(ttft_s=0.005, step_interval_s=0.001, output_tokens=8)
    its = tuple(PromptItem(id=f"p{i}", category="c", turns=(f"prompt {i}",)) for i in range(4))
    with CalibrationServer(cfg) as srv:
        res = asyncio.run(
            run_workload(
                CalibrationClient(srv.url),
                its,
                SamplingParams(max_tokens=8),
                WorkloadSpec(concurrency=2, num_requests=4, warmup_requests=0),
            )
        )
    assert len(res.records) == 4 and res.client_gc is not None
    assert res.client_gc.frozen_objects > 0
    assert gc.get_freeze_count() == 0
