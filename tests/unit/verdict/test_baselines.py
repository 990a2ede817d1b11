"""Baseline files: shape, one-line errors, fingerprints, measured tolerances, and updates that
merge under a lock and replace the file atomically (N writers lose nothing)."""

from __future__ import annotations

import json
import multiprocessing
import os
from pathlib import Path

import pytest

from specperf import baselines as bl
from specperf.config import DEFAULT_METRICS, ItemKey, MetricPolicy, load_suite
from specperf.errors import ConfigError

KEY = ItemKey("m", "vllm", "eagle3", "mt-bench", 4, "greedy")
FP = {
    "engine_label": "vllm",
    "topology": {"method": "eagle3", "num_speculative_tokens": 3},
    "num_requests": 80,
    "tier": "full",
    "dataset_version": "abc",
}


def entry(key: ItemKey = KEY, tok_s: float = 100.0, **prov: object) -> bl.BaselineEntry:
    figures = {
        "output_throughput_tok_s": {"value": tok_s, "samples": [tok_s]},
        "mean_acceptance_length": {"value": 2.5},
        "acceptance_rate": {"value": 0.5},
    }
    return bl.make_entry(
        key,
        figures,
        DEFAULT_METRICS,
        fingerprint=FP,
        provenance={"engine_version": "0.32.0", **prov},
        hardware_profile="hw",
    )


@pytest.fixture(autouse=True)
def _run_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECPERF_RUNTIME_DIR", str(tmp_path / "run"))


def test_round_trip_shape(tmp_path):
    path = tmp_path / "hw.json"
    bl.update_baselines(path, [entry()], hardware_profile="hw")
    data = json.loads(path.read_text())
    e = data["entries"]["m/vllm/eagle3/mt-bench/c4/greedy"]
    assert e["metrics"]["output_throughput_tok_s"] == {
        "value": 100.0,
        "direction": "higher",
        "tolerance": 0.05,
        "tolerance_source": "suite",
        "hardware_profile": "hw",
        "starts": [
            {
                "value": 100.0,
                "host": None,
                "date": e["provenance"]["date"],
                "engine_version": "0.32.0",
            }
        ],
    }
    assert e["metrics"]["mean_acceptance_length"]["direction"] == "higher"
    assert e["provenance"]["source"] == "measured"
    assert e["provenance"]["engine_version"] == "0.32.0"
    assert e["fingerprint"] == FP and len(e["fingerprint_digest"]) == 16
    loaded = bl.load_baselines(path)
    assert loaded.hardware_profile == "hw"
    assert loaded.get(KEY).metrics["acceptance_rate"].value == 0.5


def test_missing_file_is_empty(tmp_path):
    assert bl.load_baselines(tmp_path / "none.json").entries == {}


def test_update_merges_and_keeps_other_entries(tmp_path):
    path = tmp_path / "hw.json"
    other = ItemKey("m", "vllm", "native", "mt-bench", 4, "greedy")
    bl.update_baselines(path, [entry(), entry(other, 50.0)])
    bl.update_baselines(path, [entry(tok_s=120.0)])
    loaded = bl.load_baselines(path)
    assert set(loaded.entries) == {KEY.as_str(), other.as_str()}
    assert loaded.get(KEY).metrics["output_throughput_tok_s"].value == 120.0
    assert loaded.get(other).metrics["output_throughput_tok_s"].value == 50.0


def _writer(args: tuple[str, str, int]) -> None:
    path, run_dir, i = args
    os.environ["SPECPERF_RUNTIME_DIR"] = run_dir
    for j in range(5):
        k = ItemKey("m", f"e{i}", "native", "mt-bench", j + 1, "greedy")
        bl.update_baselines(path, [entry(k, float(i * 10 + j))])


def test_concurrent_writers_lose_nothing(tmp_path):
    path = tmp_path / "hw.json"
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(4) as pool:
        pool.map(_writer, [(str(path), str(tmp_path / "run"), i) for i in range(4)])
    loaded = bl.load_baselines(path)
    assert len(loaded.entries) == 20
    assert not list(tmp_path.glob(".hw.json.*.tmp"))


def test_atomic_write_never_leaves_a_partial_file(tmp_path, monkeypatch):
    path = tmp_path / "hw.json"
    bl.update_baselines(path, [entry()])
    before = path.read_text()

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        bl.update_baselines(path, [entry(tok_s=1.0)])
    assert path.read_text() == before
    assert not list(tmp_path.glob(".hw.json.*"))


def test_known_issue_survives_an_update(tmp_path):
    path = tmp_path / "hw.json"
    bl.update_baselines(path, [entry()])
    data = json.loads(path.read_text())
    data["entries"][KEY.as_str()]["known_issue"] = {
        "reason": "engine bug",
        "link": "https://x/1",
        "until_engine_version": "0.40.0",
    }
    path.write_text(json.dumps(data))
    previous = bl.load_baselines(path).get(KEY)
    new = bl.make_entry(
        KEY,
        {"acceptance_rate": {"value": 0.4}},
        DEFAULT_METRICS,
        fingerprint=FP,
        provenance={},
        hardware_profile="hw",
        previous=previous,
    )
    bl.update_baselines(path, [new])
    assert bl.load_baselines(path).get(KEY).known_issue.reason == "engine bug"


def test_measured_tolerance_from_repeats():
    assert bl.measured_tolerance([100.0, 101.0], 0.05) is None  # too few repeats
    tol, note = bl.measured_tolerance([100.0, 100.0, 100.0], 0.05)
    assert tol == 0.05 and "CV=0.0000" in note
    tol, note = bl.measured_tolerance([90.0, 100.0, 110.0], 0.05)
    # 99 % prediction half-width for one new run: t(0.995, 2) * sqrt(4/3) * CV(0.1)
    assert tol == pytest.approx(9.925 * (4 / 3) ** 0.5 * 0.1, abs=1e-3) and "3 repeats" in note
    tol5, _ = bl.measured_tolerance([95.0, 100.0, 105.0, 97.5, 102.5], 0.05)
    assert tol5 == pytest.approx(4.604 * 1.2**0.5 * 0.0395, abs=2e-3)


def _tok_entry(starts, *, fp=FP, version="0.32.0", previous=None, host="a", date=None):
    from specperf.config import MetricPolicy

    pol = {
        "output_throughput_tok_s": MetricPolicy(
            "output_throughput_tok_s", "higher", 0.05, "measured", True, True
        )
    }
    return bl.make_entry(
        KEY,
        {"output_throughput_tok_s": {"value": starts[0], "starts": starts}},
        pol,
        fingerprint=fp,
        provenance={"engine_version": version, "host": host, **({"date": date} if date else {})},
        hardware_profile="cpu-x-2c",
        previous=previous,
    )


def test_updates_append_starts_and_keep_the_last_n():
    first = _tok_entry([98.0, 100.0, 104.0], host="a", date="2026-11-01T10:00:00Z")
    m = first.metrics["output_throughput_tok_s"]
    assert [s["value"] for s in m.starts] == [98.0, 100.0, 104.0] and m.value == 100.0
    assert {s["host"] for s in m.starts} == {"a"}
    second = _tok_entry([90.0, 91.0], previous=first, host="b", date="2026-11-01T10:30:00Z")
    m = second.metrics["output_throughput_tok_s"]
    assert [s["value"] for s in m.starts] == [98.0, 100.0, 104.0, 90.0, 91.0]
    assert [s["host"] for s in m.starts] == ["a", "a", "a", "b", "b"]
    assert m.value == 98.0  # median of the kept starts
    # what is kept is counted in passes (the statistics' unit): 12 nightly updates of 3 starts
    # keep the last 10 nights, and one huge update is capped at KEEP_STARTS starts
    many = second
    for night in range(12):
        many = _tok_entry([100.0 + night] * 3, previous=many, date=f"2026-12-{night + 3:02d}")
    kept = many.metrics["output_throughput_tok_s"].starts
    assert len(kept) == 3 * bl.KEEP_PASSES and kept[0]["date"] == "2026-12-05"
    assert len(set(many.metrics["output_throughput_tok_s"].start_passes())) == bl.KEEP_PASSES
    huge = _tok_entry([1.0] * 50, previous=many, date="2026-12-20")
    assert len(huge.metrics["output_throughput_tok_s"].starts) == bl.KEEP_STARTS
    # another engine version or fingerprint starts afresh: never mixed with the old figures
    fresh = _tok_entry([50.0], previous=second, version="0.33.0")
    assert [s["value"] for s in fresh.metrics["output_throughput_tok_s"].starts] == [50.0]
    fresh = _tok_entry([50.0], previous=second, fp={**FP, "num_requests": 99})
    assert len(fresh.metrics["output_throughput_tok_s"].starts) == 1


def test_a_run_interval_is_stored_only_while_the_entry_is_that_run_alone():
    """After an append the stored value is the median of every kept start; the last run's own
    interval would describe another figure (seen on the H200 file: value 211.4 beside an
    interval of 212.6-238.1), so it is not stored."""
    from specperf.config import MetricPolicy

    pol = {
        "output_throughput_tok_s": MetricPolicy(
            "output_throughput_tok_s", "higher", 0.05, "measured", True, True
        )
    }

    def entry(starts, previous=None):
        fig = {"value": starts[0], "starts": starts, "interval": [min(starts), max(starts)]}
        return bl.make_entry(
            KEY,
            {"output_throughput_tok_s": fig},
            pol,
            fingerprint=FP,
            provenance={"engine_version": "0.32.0", "host": "a"},
            hardware_profile="cpu-x-2c",
            previous=previous,
        )

    first = entry([98.0, 100.0, 104.0])
    assert first.metrics["output_throughput_tok_s"].interval == [98.0, 104.0]
    second = entry([120.0, 130.0], previous=first)
    m = second.metrics["output_throughput_tok_s"]
    assert m.value == 104.0 and m.interval is None


def test_old_per_repeat_samples_count_as_starts_only_with_fresh_starts():
    m = bl.BaselineMetric(100.0, "higher", 0.05, samples=[99.0, 100.0, 101.0])
    assert m.start_values(engine_starts=3) == [99.0, 100.0, 101.0]
    assert m.start_values(engine_starts=1) == [100.0]  # repeats on one start: one value


@pytest.mark.parametrize(
    ("metric", "value", "direction", "tol", "why"),
    [
        ("acceptance_rate", 0.0, "higher", 0.02, "no measured value can fall below it"),
        ("mean_acceptance_length", 1.0, "higher", 0.0, "the draft accepts nothing"),
        # a random head's 1.01: failing needs MAL <= 0.99, which no run can give
        ("mean_acceptance_length", 1.01, "higher", 0.02, "MAL never falls below 1"),
        ("mean_acceptance_length", 1.0204, "higher", 0.02, "MAL never falls below 1"),
        ("mean_acceptance_length", 1.03, "higher", 0.02, None),  # 1.0094 is reachable
        ("mean_acceptance_length", 1.01, "higher", 0.0, None),  # any drop fails
        ("mean_acceptance_length", 1.8, "higher", 0.02, None),
        ("ttft_ms.p50", 0.0, "lower", 0.05, None),
    ],
)
def test_gates_that_cannot_fail_are_stored_report_only(metric, value, direction, tol, why):
    got = bl.cannot_fail(metric, value, direction, tol)
    assert (got is None) if why is None else (why in got)


def test_an_update_stores_a_mal_that_cannot_fail_report_only_and_the_verdict_never_fails_it():
    """make_entry marks a near-1.0 MAL report-only with its reason (the suite's 2 % tolerance
    could never see it drop), and the verdict reports it as such even when the run's MAL is
    far lower than the stored value would allow under a live gate."""
    from specperf import verdict as vd

    key = ItemKey("m", "vllm", "eagle3", "mt-bench", 1, "greedy")
    pol = {"mean_acceptance_length": MetricPolicy("mean_acceptance_length", "higher", 0.02)}
    figs = {"mean_acceptance_length": {"value": 1.012, "starts": [1.012]}}
    e = bl.make_entry(key, figs, pol, fingerprint={}, provenance={}, hardware_profile="hw")
    why = e.metrics["mean_acceptance_length"].report_only
    assert why and "MAL never falls below 1" in why
    live = bl.make_entry(
        key,
        {"mean_acceptance_length": {"value": 1.5}},
        pol,
        fingerprint={},
        provenance={},
        hardware_profile="hw",
    )
    assert live.metrics["mean_acceptance_length"].report_only is None
    s = {
        "key": key.as_str(),
        "item_id": "x",
        "hardware_profile": "hw",
        "fingerprint": {},
        "completed": 4,
        "failed": 0,
        "mean_acceptance_length": 1.0,
        "figures": {"mean_acceptance_length": {"value": 1.0}},
    }
    (c,) = [c for c in vd.evaluate_item(vd.ItemResult(s), e, pol) if c.metric.startswith("mean")]
    assert (c.status, c.gated) == ("info", False) and "report only" in c.reason


def test_fingerprint_diff_names_fields():
    a = {"sampling": {"temperature": 0.0}, "num_requests": 80}
    b = {"sampling": {"temperature": 0.6}, "num_requests": 80, "tier": "full"}
    diffs = bl.fingerprint_diff(a, b)
    assert diffs == ["sampling.temperature: 0.0 → 0.6", "tier: '<absent>' → 'full'"]
    assert bl.fingerprint_diff(a, dict(a)) == []


def test_baseline_path_is_file_safe(tmp_path):
    assert bl.baseline_path(tmp_path, "nvidia-l40x1").name == "nvidia-l40x1.json"
    assert bl.baseline_path(tmp_path, "cpu a/b").name == "cpu-a-b.json"


def good_entry_json() -> dict:
    return entry().to_json()


BAD = [
    ("not json", "not valid JSON"),
    ([], "<top>: expected a JSON object"),
    ({"schema": 9}, "schema: unsupported schema 9"),
    ({"entries": {"a/b": good_entry_json()}}, "entries.a/b: baseline key 'a/b'"),
    (
        {"entries": {KEY.as_str(): {**good_entry_json(), "metrics": {}}}},
        f"entries.{KEY.as_str()}.metrics: missing or empty",
    ),
    (
        {
            "entries": {
                KEY.as_str(): {
                    **good_entry_json(),
                    "metrics": {"x": {"value": "1", "direction": "higher", "tolerance": 0.1}},
                }
            }
        },
        f"entries.{KEY.as_str()}.metrics.x.value: expected a number",
    ),
    (
        {
            "entries": {
                KEY.as_str(): {
                    **good_entry_json(),
                    "metrics": {"x": {"value": 1, "direction": "up", "tolerance": 0.1}},
                }
            }
        },
        "metrics.x.direction: must be higher, lower or equal",
    ),
    (
        {
            "entries": {
                KEY.as_str(): {
                    **good_entry_json(),
                    "metrics": {"x": {"value": 1, "direction": "higher", "tolerance": 5e1}},
                }
            }
        },
        "metrics.x.tolerance: expected a relative tolerance",
    ),
    (
        {
            "entries": {
                KEY.as_str(): {
                    **good_entry_json(),
                    "metrics": {
                        "x": {
                            "value": 1,
                            "direction": "higher",
                            "tolerance": 0.1,
                            "tolerance_source": "measured",
                        }
                    },
                }
            }
        },
        "metrics.x.tolerance_note: a measured tolerance must say how",
    ),
    (
        {"entries": {KEY.as_str(): {**good_entry_json(), "provenance": {"source": "guess"}}}},
        "provenance.source: must be one of measured, seed-note",
    ),
    (
        {"entries": {KEY.as_str(): {**good_entry_json(), "provenance": {"source": "seed-note"}}}},
        "provenance.how_measured: seed-note figures must say how",
    ),
    (
        {
            "entries": {
                KEY.as_str(): {**good_entry_json(), "known_issue": {"reason": "r", "link": "l"}}
            }
        },
        "known_issue: needs an expiry",
    ),
    ({"entries": {}, "rules": [{"kind": "speedup", "min": 1.3}]}, "rules[0].method: missing"),
    ({"entries": {}, "extra": 1}, "extra: unknown top-level key"),
]


@pytest.mark.parametrize(("data", "message"), BAD, ids=[m for _, m in BAD])
def test_bad_baseline_file_is_one_line_error(tmp_path, data, message):
    path = tmp_path / "hw.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    with pytest.raises(ConfigError) as exc:
        bl.load_baselines(path)
    msg = str(exc.value)
    assert "\n" not in msg and msg.startswith(str(path)) and message in msg, msg


def test_committed_baseline_files_load():
    root = Path(__file__).resolve().parents[3] / "baselines"
    files = sorted(root.glob("*.json"))
    assert files, "no committed baseline files"
    for f in files:
        assert bl.load_baselines(f).entries, f


def test_l40_seed_note_entries_match_the_qwen3_8b_suite():
    """The seed-2 figures must be comparable (not stale) with what the suite measures, or a
    team with an L40 would only ever see "stale"."""
    from specperf import datasets

    path = Path(__file__).resolve().parents[3] / "baselines" / "nvidia-l40x1.json"
    bf = bl.load_baselines(path)
    suite = load_suite("qwen3-8b")
    items = {i.key.as_str(): i for i in suite.items()}
    assert bf.entries
    for key, e in bf.entries.items():
        assert e.provenance["source"] == "seed-note"
        assert "how_measured" in e.provenance
        item = items[key]
        fp = item.fingerprint_base()
        fp["dataset_version"] = datasets.load_dataset(item.key.dataset, tier=item.tier).version
        assert bl.fingerprint_diff(e.fingerprint, fp) == [], key
    assert any(r.kind == "speedup" and r.min == 1.3 for r in bf.rules)


def test_starts_ten_minutes_apart_across_midnight_are_one_day_and_one_pass():
    """Independence is elapsed time, not the calendar: two updates 10 minutes apart on either
    side of midnight (UTC) are one window for the speed gate's days and one pass."""
    first = _tok_entry([100.0] * 3, host="h", date="2026-12-01T23:55:00Z")
    both = _tok_entry([101.0] * 3, previous=first, host="h", date="2026-12-02T00:05:00Z")
    starts = both.metrics["output_throughput_tok_s"].starts
    assert bl.independent_windows(starts) == ["2026-12-01T23:55Z"]
    assert len(set(both.metrics["output_throughput_tok_s"].start_passes())) == 1
    later = _tok_entry(
        [99.0] * 3,
        previous=both,
        host="h",
        date=f"2026-12-02T{int(bl.INDEPENDENT_AFTER_H):02d}:00:00Z",
    )
    starts = later.metrics["output_throughput_tok_s"].starts
    assert len(bl.independent_windows(starts)) == 2
    assert len(set(later.metrics["output_throughput_tok_s"].start_passes())) == 2


def test_six_updates_within_36_minutes_on_one_host_are_one_pass():
    """Six updates of one machine within 36 minutes share its state: one pass, not six (a
    fresh machine, another boot id, is a pass of its own however soon it follows)."""
    entry = None
    for i in range(6):
        entry = _tok_entry(
            [100.0 + i], previous=entry, host="vm", date=f"2026-12-01T15:{i * 6 + 4:02d}:00Z"
        )
    assert entry is not None
    m = entry.metrics["output_throughput_tok_s"]
    assert len(m.starts) == 6 and len(set(m.start_passes())) == 1
    for st, boot in zip(m.starts, "aabbcc", strict=True):
        st["boot_id"] = boot
    assert len(set(m.start_passes())) == 3
