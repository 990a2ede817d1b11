"""Nightly history: storage round trip and the drift check (several small regressions in a row
are caught; one noisy night is not; too little history is never a pass)."""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from specperf import history
from specperf.config import DEFAULT_METRICS, MetricPolicy
from specperf.errors import ConfigError

KEY = "tiny/vllm/ngram/mt-bench/c1/greedy"
HW = "cpu-test-2c"


def summary(
    tok_s: float,
    *,
    mal: float = 3.5,
    tpot: float = 10.0,
    version: str = "0.32.0",
    key: str = KEY,
    fingerprint: str | None = None,
) -> dict[str, Any]:
    s: dict[str, Any] = {
        "key": key,
        "engine": "vllm",
        "engine_version": version,
        "method": "ngram",
        "model": "tiny",
        "dataset": "mt-bench",
        "concurrency": 1,
        "hardware_profile": HW,
        "completed": 8,
        "failed": 0,
        "output_throughput_tok_s": tok_s,
        "mean_acceptance_length": mal,
        "acceptance_rate": (mal - 1) / 3,
        "tpot_ms": {"mean": tpot, "p50": tpot, "p90": tpot, "p99": tpot},
        "ttft_ms": {"mean": 5.0, "p50": 5.0, "p90": 5.0, "p99": 5.0},
    }
    if fingerprint:
        s["fingerprint_digest"] = fingerprint
    return s


def write_results(root: Path, summaries: list[dict[str, Any]]) -> Path:
    for i, s in enumerate(summaries):
        d = root / f"item-{i}"
        d.mkdir(parents=True, exist_ok=True)
        (d / "summary.json").write_text(json.dumps(s))
    return root


def store_nights(store: Path, tmp: Path, nights: list[list[dict[str, Any]]]) -> None:
    start = dt.datetime(2026, 11, 1, 2, 0, tzinfo=dt.timezone.utc)
    for i, sums in enumerate(nights):
        res = write_results(tmp / f"res-{i}", sums)
        history.add_night(store, [res], date=start + dt.timedelta(days=i), run_id=str(100 + i))


# A fixed 5 % throughput tolerance (gate "always"), as a GPU suite would set it; the built-in
# default gates throughput only with a spread measured from history ("measured").
FIXED = {
    **DEFAULT_METRICS,
    "output_throughput_tok_s": MetricPolicy(
        "output_throughput_tok_s", "higher", 0.05, "always", True, True
    ),
}


def check(store: Path, tonight: list[dict[str, Any]], **kw: Any) -> history.DriftReport:
    kw.setdefault("policies", FIXED)
    return history.drift_check(tonight, history.load_nights(store), **kw)


def find(report: history.DriftReport, metric: str) -> history.Finding:
    (f,) = [f for f in report.findings if f.metric == metric]
    return f


def test_several_small_regressions_in_a_row_are_caught(tmp_path: Path) -> None:
    store = tmp_path / "store"
    # 3% per night: each night is within the 5% tolerance of the night before.
    series = [100.0, 100.5, 99.5, 100.0, 97.0, 94.0]
    store_nights(store, tmp_path, [[summary(v)] for v in series])
    for a, b in itertools.pairwise(series):
        assert (a - b) / a < 0.05
    report = check(store, [summary(91.0)])
    f = find(report, "output_throughput_tok_s")
    assert f.status == "drift" and report.failed
    assert f.reference == pytest.approx(100.0)  # median of the older half
    assert [p.value for p in f.recent] == [94.0, 91.0]
    msg = f.message()
    assert KEY in msg and "91" in msg and "tolerance 5%" in msg and "+9.0%" in msg
    # MAL did not move: steady.
    assert find(report, "mean_acceptance_length").status == "ok"


def test_steady_noisy_history_passes(tmp_path: Path) -> None:
    store = tmp_path / "store"
    store_nights(store, tmp_path, [[summary(v)] for v in (100, 102, 98.5, 101, 99, 100.5, 98)])
    report = check(store, [summary(99.0)])
    assert not report.failed
    assert {f.status for f in report.findings} == {"ok"}


def test_one_bad_night_is_the_baseline_gates_business_two_are_drift(tmp_path: Path) -> None:
    store = tmp_path / "store"
    store_nights(store, tmp_path, [[summary(v)] for v in (100, 101, 99, 100, 100)])
    assert not check(store, [summary(90.0)]).failed
    store_nights(tmp_path / "s2", tmp_path / "x", [[summary(v)] for v in (100, 101, 99, 100, 90)])
    assert check(tmp_path / "s2", [summary(91.0)]).failed


def test_only_the_last_n_nights_count(tmp_path: Path) -> None:
    store = tmp_path / "store"
    # a slow level 20% higher long ago, then a steady level: not drift against the last 4
    store_nights(store, tmp_path, [[summary(v)] for v in (120, 120, 120, 100, 100, 100, 100)])
    assert check(store, [summary(100.0)], last=4).findings[0].status == "ok"
    assert check(store, [summary(100.0)], last=7).failed


def test_too_little_history_is_not_evaluated(tmp_path: Path) -> None:
    store = tmp_path / "store"
    store_nights(store, tmp_path, [[summary(100.0)], [summary(80.0)]])
    report = check(store, [summary(60.0)])
    f = find(report, "output_throughput_tok_s")
    assert f.status == "insufficient" and not report.failed
    assert "not evaluated" in f.message()
    assert report.counts()["insufficient"] >= 1


def test_report_only_metric_gives_a_warning_not_a_failure(tmp_path: Path) -> None:
    store = tmp_path / "store"
    store_nights(store, tmp_path, [[summary(100, tpot=t)] for t in (10, 10, 10, 10, 12)])
    report = check(store, [summary(100, tpot=12.5)])
    f = find(report, "tpot_ms.p50")
    assert f.direction == "lower" and f.status == "warning"
    assert not report.failed and report.warnings


def test_fingerprint_change_restarts_the_series(tmp_path: Path) -> None:
    store = tmp_path / "store"
    store_nights(store, tmp_path, [[summary(v, fingerprint="aaa")] for v in (100, 100, 100, 90)])
    assert check(store, [summary(90.0, fingerprint="aaa")]).failed
    other = check(store, [summary(90.0, fingerprint="bbb")])
    assert find(other, "output_throughput_tok_s").status == "insufficient"


def test_engine_versions_are_named_when_they_change(tmp_path: Path) -> None:
    store = tmp_path / "store"
    nights = [[summary(v, version="0.32.0")] for v in (100, 100, 100, 100)]
    nights.append([summary(92, version="0.33.0")])
    store_nights(store, tmp_path, nights)
    f = find(check(store, [summary(91, version="0.33.0")]), "output_throughput_tok_s")
    assert f.status == "drift" and "engine 0.33.0" in f.message()


def test_store_round_trip_order_and_prune(tmp_path: Path) -> None:
    store = tmp_path / "store"
    store_nights(store, tmp_path, [[summary(100.0 + i), summary(5.0, key="k2")] for i in range(5)])
    nights = history.load_nights(store)
    assert [n.meta["run_id"] for n in nights] == ["100", "101", "102", "103", "104"]
    assert nights[0].meta["items"] == 2 and nights[0].meta["engine_versions"] == ["vllm==0.32.0"]
    assert nights[-1].summaries[0]["output_throughput_tok_s"] == 104.0
    assert history.prune(store, 2) == [n.id for n in nights[:3]]
    assert [n.meta["run_id"] for n in history.load_nights(store)] == ["103", "104"]
    with pytest.raises(ConfigError, match="already stored"):
        history.add_night(
            store,
            [tmp_path / "res-4"],
            date=dt.datetime(2026, 11, 5, 2, 0, tzinfo=dt.timezone.utc),
            run_id="104",
        )
    assert not list((store / "nights").glob(".*"))  # no temporary directory left behind


def test_bad_input_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        history.read_summaries([tmp_path / "nope"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="no item results"):
        history.read_summaries([tmp_path / "empty"])
    with pytest.raises(ConfigError, match="--min-history"):
        history.drift_check([], [], min_history=1, persist=2)
    assert history.load_nights(tmp_path / "missing") == []


def cli(argv: list[str]) -> int:
    p = argparse.ArgumentParser()
    history.add_arguments(p)
    return history.run(p.parse_args(argv))


def test_cli_add_check_list(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "store"
    for i, v in enumerate((100, 100, 100, 94)):
        res = write_results(tmp_path / f"r{i}", [summary(v)])
        assert (
            cli(
                [
                    "add",
                    str(res),
                    "--store",
                    str(store),
                    "--run-id",
                    str(i),
                    "--date",
                    f"2026-11-0{i + 1}T02:00:00Z",
                    "--keep",
                    "10",
                ]
            )
            == 0
        )
    step = tmp_path / "step.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step))
    tonight = write_results(tmp_path / "tonight", [summary(93)])
    out_json = tmp_path / "drift.json"
    assert cli(["check", str(tonight), "--store", str(store), "--json", str(out_json)]) == 1
    data = json.loads(out_json.read_text())
    assert data["failed"] and data["findings"][0]["metric"] == "output_throughput_tok_s"
    assert "Drift (fails)" in step.read_text()
    # a looser tolerance for every metric passes the same nights
    assert cli(["check", str(tonight), "--store", str(store), "--tolerance", "0.1"]) == 0
    capsys.readouterr()
    assert cli(["list", "--store", str(store)]) == 0
    assert capsys.readouterr().out.count("vllm==0.32.0") == 4


FIXTURES = Path(__file__).resolve().parents[2] / "fixtures_results"


def test_plugin_written_results_one_bad_night_then_drift(tmp_path: Path) -> None:
    """Committed suite results (figures, fingerprints, suite.json policies): the planted
    regression of run-main is one night — not drift; the second such night is."""
    store = tmp_path / "store"
    start = dt.datetime(2026, 11, 1, 2, 0, tzinfo=dt.timezone.utc)
    for i in range(4):
        history.add_night(store, [FIXTURES / "run-prev"], date=start + dt.timedelta(days=i))
    tonight = history.read_summaries([FIXTURES / "run-main"])
    pols = history._policies(None, [FIXTURES / "run-main"])
    first = history.drift_check(tonight, history.load_nights(store), policies=pols)
    assert not first.failed
    history.add_night(store, [FIXTURES / "run-main"], date=start + dt.timedelta(days=4))
    second = history.drift_check(tonight, history.load_nights(store), policies=pols)
    keys = {(f.key, f.metric) for f in second.drifts}
    assert ("qwen3-8b/vllm/eagle3/humaneval/c4/greedy", "mean_acceptance_length") in keys
    assert all("/sglang/" not in k for k, _ in keys)  # no sglang history: not judged
    assert any("/sglang/" in f.key for f in second.insufficient)


def test_wired_into_the_specperf_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from specperf.cli import main

    res = write_results(tmp_path / "r", [summary(100.0)])
    assert main(["history", "add", str(res), "--store", str(tmp_path / "s")]) == 0
    assert main(["history", "check", str(res), "--store", str(tmp_path / "s")]) == 0
    assert "not evaluated (too little history)" in capsys.readouterr().out
    assert main(["history", "check", str(tmp_path / "nope"), "--store", "x"]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_night_records_the_merged_verdict_counts(tmp_path: Path) -> None:
    from specperf.cli import main

    merged = tmp_path / "merged"
    assert (
        main(
            [
                "merge",
                str(FIXTURES / "run-main"),
                "--out",
                str(merged),
                "--baseline",
                str(FIXTURES / "baseline-nvidia-l40sx1.json"),
            ]
        )
        == 0
    )
    night = history.add_night(tmp_path / "s", [merged], run_id="7")
    expected = json.loads((merged / "verdict.json").read_text())["counts"]
    assert night.meta["verdicts"] == expected and expected.get("fail", 0) > 0
    assert history.load_nights(tmp_path / "s")[0].meta["verdicts"] == expected


def test_measured_gate_takes_its_tolerance_from_the_history_spread(tmp_path: Path) -> None:
    """CPU throughput (gate "measured"): a noisy history widens the tolerance to 3 x CV."""
    from specperf.config import DEFAULT_METRICS, MetricPolicy

    pols = dict(DEFAULT_METRICS)
    pols["output_throughput_tok_s"] = MetricPolicy(
        "output_throughput_tok_s", "higher", 0.05, "measured", True, True
    )
    noisy = tmp_path / "noisy"
    store_nights(noisy, tmp_path / "a", [[summary(v)] for v in (100, 90, 110, 95, 105, 88)])
    f = find(check(noisy, [summary(88.0)], policies=pols), "output_throughput_tok_s")
    assert f.status == "ok" and f.tolerance > 0.2 and "CV=" in (f.tolerance_note or "")
    steady = tmp_path / "steady"
    store_nights(steady, tmp_path / "b", [[summary(v)] for v in (100, 101, 99, 100, 100, 93)])
    f = find(check(steady, [summary(92.0)], policies=pols), "output_throughput_tok_s")
    assert f.status == "drift" and f.tolerance == pytest.approx(0.05, abs=0.05)
