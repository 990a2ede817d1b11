"""specperf.verdict.power: leave-one-pass-out resampling, engine-wide rows of one-item engines,
the gate column, leave-one-machine-out."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import pytest

from specperf.baselines import BaselineEntry, BaselineFile, BaselineMetric
from specperf.config import ItemKey, MetricPolicy
from specperf.verdict import power as vp
from specperf.verdict import splits as vs

TPS = "output_throughput_tok_s"
MAL = "mean_acceptance_length"
POLICIES = {
    TPS: MetricPolicy(TPS, "higher", 0.05, "measured", True, True),
    MAL: MetricPolicy(MAL, "higher", 0.02, "always"),
}
ALPHA = 0.001


def _starts(
    passes: list[list[float]], days: tuple[str, ...] = ("2026-12-01", "2026-12-02")
) -> list[dict[str, Any]]:
    """Per-start records, pass i stamped with its own date and boot id (its pass label), the
    passes spread over ``days``."""
    out = []
    for i, values in enumerate(passes):
        date = f"{days[i % len(days)]}T{10 + i:02d}:00:00Z"
        for v in values:
            out.append({"value": v, "host": "h", "date": date, "boot_id": f"boot-{i}"})
    return out


def _entry(key: str, metrics: dict[str, list[dict[str, Any]]]) -> BaselineEntry:
    bms = {
        name: BaselineMetric(
            value=statistics.median(s["value"] for s in starts),
            direction="higher",
            tolerance=POLICIES[name].tolerance,
            starts=starts,
        )
        for name, starts in metrics.items()
    }
    return BaselineEntry(
        ItemKey.parse(key), bms, {"source": "measured", "engine_version": "1"}, {"model": "m"}
    )


def _file(*entries: BaselineEntry, path: Path = Path("mem.json")) -> BaselineFile:
    return BaselineFile(path, entries={e.key.as_str(): e for e in entries})


def _tight(n_pass: int, per_pass: int = 3, level: float = 100.0) -> list[list[float]]:
    """Passes of nearly equal values (0.1 % apart)."""
    return [
        [level * (1 + 0.001 * ((i + j) % 3 - 1)) for j in range(per_pass)] for i in range(n_pass)
    ]


def test_pass_mode_leaves_out_whole_passes() -> None:
    bf = _file(_entry("m/e/native/d/c1/greedy", {TPS: _starts(_tight(5))}))
    (by_pass,) = vp.item_rows(bf, POLICIES, ALPHA, leave_out="pass")
    (by_start,) = vp.item_rows(bf, POLICIES, ALPHA, leave_out="start")
    assert by_pass["splits"] == 5 and by_pass["passes"] == 5 and by_pass["starts"] == 15
    assert by_start["splits"] == 15
    (engine,) = vp.engine_rows(bf, POLICIES, ALPHA, leave_out="pass")
    assert engine["splits"] == 5


def test_pass_mode_differs_from_start_mode_where_one_pass_is_slow() -> None:
    # one pass ran 30 % slow on all three starts: as tonight's run it is red against the four
    # others (1 split of 5); leaving out one of its starts keeps the other two in the baseline,
    # whose pass means then spread widely, so no start-level split is red
    passes = [[70.0, 70.07, 69.93], *_tight(4)]
    bf = _file(_entry("m/e/native/d/c1/greedy", {TPS: _starts(passes)}))
    (by_pass,) = vp.item_rows(bf, POLICIES, ALPHA, leave_out="pass")
    (by_start,) = vp.item_rows(bf, POLICIES, ALPHA, leave_out="start")
    assert by_pass[0.0] == pytest.approx(1 / 5)
    assert by_start[0.0] == 0.0


def test_runs_match_by_label_else_by_pass_order() -> None:
    a, b, c, d = ("h", "t1", "x"), ("h", "t2", "y"), ("h", "t3", "z"), ("h", "t4", "w")
    # labels shared between items: matched by label
    assert vs.match_runs([[a, a, b], [b, a]]) == [[a, a, b], [b, a]]
    # no label shared, as many passes (each item stamped with its own time): the i-th passes
    assert vs.match_runs([[a, a, b], [c, d, d]]) == [[0, 0, 1], [0, 1, 1]]


def test_one_item_engine_gets_an_engine_wide_row() -> None:
    passes = _tight(4)
    bf = _file(_entry("m/solo/native/d/c1/greedy", {TPS: _starts(passes)}))
    rows = vp.engine_rows(bf, POLICIES, ALPHA, leave_out="pass")
    (row,) = rows
    assert row["key"] == "engine solo (1 item)"
    assert row["metric"] == f"engine-wide {TPS}"
    assert row["splits"] == 4 and row["gate"] == "gated"
    assert row[0.0] == 0.0 and row[0.25] == 1.0
    # leave-k-out too
    (by_start,) = vp.engine_rows(bf, POLICIES, ALPHA, leave_out="start")
    assert by_start["key"] == "engine solo (1 item)" and by_start["splits"] == 12


def test_gate_column_follows_the_speed_baseline_rule() -> None:
    one_day = _entry(
        "m/e1/native/d/c1/greedy",
        {TPS: _starts(_tight(4), days=("2026-12-01",)), MAL: _starts(_tight(4), ("2026-12-01",))},
    )
    two_days = _entry("m/e2/native/d/c1/greedy", {TPS: _starts(_tight(4))})
    two_passes = _entry("m/e3/native/d/c1/greedy", {TPS: _starts(_tight(2))})
    bf = _file(one_day, two_days, two_passes)
    gates = {(r["key"], r["metric"]): r["gate"] for r in vp.item_rows(bf, POLICIES, ALPHA)}
    assert gates[("m/e1/native/d/c1/greedy", TPS)] == "report-only: 1 window"
    assert gates[("m/e1/native/d/c1/greedy", MAL)] == "gated"  # not hardware-bound
    assert gates[("m/e2/native/d/c1/greedy", TPS)] == "gated"
    assert gates[("m/e3/native/d/c1/greedy", TPS)] == "report-only: 2 passes"
    engine = {(r["key"], r["metric"]): r["gate"] for r in vp.engine_rows(bf, POLICIES, ALPHA)}
    assert engine[("engine e1 (1 item)", f"engine-wide {TPS}")] == "report-only: 1 window"
    assert engine[("engine e2 (1 item)", f"engine-wide {TPS}")] == "gated"
    assert engine[("engine e1 (1 item)", f"engine-wide {MAL}")] == "gated"


def test_engine_with_some_report_only_items_gates_over_the_others() -> None:
    one_day = _entry("m/e/native/a/c1/greedy", {TPS: _starts(_tight(4), days=("2026-12-01",))})
    two_days = _entry("m/e/native/b/c1/greedy", {TPS: _starts(_tight(4))})
    (row,) = vp.engine_rows(_file(one_day, two_days), POLICIES, ALPHA)
    assert row["gate"] == "gated" and row["key"] == "engine e (1 item)"


def _on_machines(passes_per_machine: dict[str, list[list[float]]]) -> list[dict[str, Any]]:
    """Per-start records of several GPUs (``gpu_uuid``), each pass its own date and boot."""
    out, i = [], 0
    for uuid, passes in passes_per_machine.items():
        for values in passes:
            date = f"2026-12-0{1 + i % 2}T{10 + i:02d}:00:00Z"
            out += [
                {"value": v, "host": "vm", "date": date, "boot_id": f"b{i}", "gpu_uuid": uuid}
                for v in values
            ]
            i += 1
    return out


def test_machine_mode_judges_a_pass_against_other_machines_only() -> None:
    """A GPU 10 % slower than another, three tight passes each: leave-one-pass-out keeps the
    slow GPU's other passes in the baseline, so its pass is not red; judged as a machine the
    baseline has never seen (only the fast GPU's passes), it is, and so is every slow pass."""
    starts = _on_machines({"GPU-slow": _tight(3, level=90.0), "GPU-fast": _tight(3)})
    bf = _file(_entry("m/e/native/d/c1/greedy", {TPS: starts}))
    (by_pass,) = vp.item_rows(bf, POLICIES, ALPHA, leave_out="pass")
    (by_machine,) = vp.item_rows(bf, POLICIES, ALPHA, leave_out="machine")
    assert by_machine["splits"] == 6 and by_machine["machines"] == 2
    assert by_pass[0.0] == 0.0
    assert by_machine[0.0] == pytest.approx(3 / 6)
    (engine,) = vp.engine_rows(bf, POLICIES, ALPHA, leave_out="machine")
    assert engine["splits"] == 6 and engine[0.0] == pytest.approx(3 / 6)
    assert vp._starts_cell(by_machine) == "18 (6 passes, 2 machines)"


def test_machine_mode_counts_each_machine_once() -> None:
    """A machine with three passes holds three splits; weighted, it counts as one machine."""
    assert vs.machine_weights(["a", "a", "a", "b"]) == pytest.approx([1 / 3, 1 / 3, 1 / 3, 1])
    assert vs.rate([True, True, True, False], vs.machine_weights(["a", "a", "a", "b"])) == 0.5
    assert vs.rate([True, False], [1.0, 1.0]) == 0.5


def test_machine_mode_on_one_machine_gives_no_rows() -> None:
    # as a CPU file stores them: host and date only, so every pass ran on one machine
    starts = [{k: v for k, v in s.items() if k != "boot_id"} for s in _starts(_tight(4))]
    bf = _file(_entry("m/e/native/d/c1/greedy", {TPS: starts}))
    assert vp.item_rows(bf, POLICIES, ALPHA, leave_out="pass")
    assert vp.item_rows(bf, POLICIES, ALPHA, leave_out="machine") == []
