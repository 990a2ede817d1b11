"""When a speed baseline gates: starts from one day, from two runs or from another CPU
generation report instead of gating, the report-only row still shows its figures, and an
update records the machine and CPU of each start."""

from __future__ import annotations

from pathlib import Path

import pytest

from specperf import baselines as bl
from specperf import verdict as vd
from tests.unit.verdict.verdict_kit import (
    FP,
    KEY,
    POL,
    base_entry,
    by_metric,
    summary,
)


def test_a_speed_baseline_from_one_day_reports_instead_of_gating():
    """Starts made in one afternoon know that afternoon's host state only (the unchanged main
    job ran 21 % slower 3.5 h after its baseline): speed is report-only, with the reason and
    the way out, until the starts span [workload] min_baseline_days (default 2) days; MAL
    still gates; a release-watch pinned run (same window) gates at once."""
    one_day = base_entry()
    for start in one_day.metrics["output_throughput_tok_s"].starts:
        start["date"] = "2026-12-01T16:00:00Z"
    slow = summary(tok_s=70.0, mal=2.0)
    by = by_metric(vd.evaluate_item(vd.ItemResult(slow), one_day, POL, hardware_profile="hw"))
    tok = by["output_throughput_tok_s"]
    assert (tok.status, tok.gated) == ("not_evaluated", False)
    assert "baseline starts from 1 window(s) 12 h apart (from 2026-12-01T16:00Z)" in tok.reason
    assert "--update-baselines" in tok.reason
    assert by["mean_acceptance_length"].status == "fail"
    one_day_ok = dict(slow, workload={"min_baseline_days": 1})
    by = by_metric(vd.evaluate_item(vd.ItemResult(one_day_ok), one_day, POL, hardware_profile="hw"))
    assert by["output_throughput_tok_s"].status == "fail"
    one_day.provenance["same_window"] = True
    by = by_metric(vd.evaluate_item(vd.ItemResult(slow), one_day, POL, hardware_profile="hw"))
    assert by["output_throughput_tok_s"].status == "fail"
    assert (
        by_metric(vd.evaluate_item(vd.ItemResult(slow), base_entry(), POL, hardware_profile="hw"))[
            "output_throughput_tok_s"
        ].status
        == "fail"
    )  # two days: gated


def test_a_report_only_speed_row_shows_the_figures_its_gate_would_compare():
    """A young baseline's speed row is not judged, but it shows what the armed gate will
    compare — the geometric mean of this run's starts against the baseline starts' — not the
    run's median against the stored value, so the row says the same change on the day the
    gate arms. The engine-wide row carries its ratio too, instead of n/a."""
    one_day = base_entry(tok_starts=[90.0, 100.0, 100.0, 104.0, 130.0])
    for start in one_day.metrics["output_throughput_tok_s"].starts:
        start["date"] = "2026-12-01T16:00:00Z"
    figs = summary(tok_s=70.0)["figures"]  # 70: the median of its starts
    figs["output_throughput_tok_s"]["starts"] = [60.0, 70.0, 71.0]
    run = summary(tok_s=70.0, figures=figs)
    young = by_metric(vd.evaluate_item(vd.ItemResult(run), one_day, POL, hardware_profile="hw"))
    armed_run = dict(run, workload={"min_baseline_days": 1})
    armed = by_metric(
        vd.evaluate_item(vd.ItemResult(armed_run), one_day, POL, hardware_profile="hw")
    )
    tok, gated = young["output_throughput_tok_s"], armed["output_throughput_tok_s"]
    assert (tok.status, tok.gated, gated.status) == ("not_evaluated", False, "fail")
    geo_now = (60.0 * 70.0 * 71.0) ** (1 / 3)
    geo_base = (90.0 * 100.0 * 100.0 * 104.0 * 130.0) ** (1 / 5)
    assert tok.measured == pytest.approx(geo_now) and tok.baseline == pytest.approx(geo_base)
    assert (tok.measured, tok.baseline) == pytest.approx((gated.measured, gated.baseline))
    assert tok.delta == pytest.approx(gated.delta) == pytest.approx(geo_now / geo_base - 1)
    assert tok.delta != pytest.approx(70.0 / 100.0 - 1, abs=1e-3)  # not median vs stored value
    assert tok.interval == (60.0, 71.0) and "geometric mean" in (tok.interval_method or "")
    bf = bl.BaselineFile(Path("x.json"))
    bf.entries[KEY.as_str()] = one_day
    wide = {
        c.metric: c
        for c in vd.engine_wide_checks({KEY.as_str(): vd.ItemResult(run)}, bf, POL, alpha=0.0025)
    }["engine-wide output_throughput_tok_s"]
    assert (wide.status, wide.gated) == ("not_evaluated", False)
    assert "a speed gate needs starts from >= 2" in wide.reason
    assert wide.measured == pytest.approx(geo_now / geo_base) and wide.baseline == 1.0
    assert "n/a" not in wide.line()


def test_a_speed_baseline_from_two_runs_reports_instead_of_gating():
    """The verdict's unit is the pass (run): two runs' starts cannot show how much runs differ,
    however many starts each had, so speed reports until a third run's starts are appended."""
    two_runs = base_entry()
    for i, start in enumerate(two_runs.metrics["output_throughput_tok_s"].starts):
        start["date"] = f"2026-11-{20 + i % 2}T21:00:00Z"
    slow = summary(tok_s=70.0, mal=2.0)
    by = by_metric(vd.evaluate_item(vd.ItemResult(slow), two_runs, POL, hardware_profile="hw"))
    tok = by["output_throughput_tok_s"]
    assert (tok.status, tok.gated) == ("not_evaluated", False)
    assert "baseline starts from 2 pass(es)" in tok.reason
    assert "a speed gate needs >= 3" in tok.reason
    assert by["mean_acceptance_length"].status == "fail"
    by = by_metric(vd.evaluate_item(vd.ItemResult(slow), base_entry(), POL, hardware_profile="hw"))
    assert by["output_throughput_tok_s"].status == "fail"
    assert "unit: the pass" in by["output_throughput_tok_s"].reason


def test_a_cpu_speed_baseline_from_another_cpu_generation_reports_instead_of_gating():
    """One profile name can cover two CPU generations (a VM's model name may be only "AMD
    EPYC"): where the engine computes on the CPU and the baseline's starts record their CPU,
    a run on a CPU none of them had reports its speed with the reason and the way out; MAL
    still gates. The same CPU, a GPU run, and starts without the record are judged as before."""
    entry = base_entry()
    for start in entry.metrics["output_throughput_tok_s"].starts:
        start["cpu"] = "amd family 25 model 17 stepping 1"
    env = {"cpu_signature": "amd family 26 model 2 stepping 1", "gpus": []}
    slow = summary(tok_s=70.0, mal=2.0, environment=env)
    by = by_metric(vd.evaluate_item(vd.ItemResult(slow), entry, POL, hardware_profile="hw"))
    tok = by["output_throughput_tok_s"]
    assert (tok.status, tok.gated) == ("not_evaluated", False)
    assert "baseline starts measured on CPU amd family 25 model 17 stepping 1" in tok.reason
    assert "this host is amd family 26 model 2 stepping 1" in tok.reason
    assert "--update-baselines" in tok.reason
    assert by["mean_acceptance_length"].status == "fail"
    assert vd.gated_not_evaluated(list(by.values())) == []
    bf = bl.BaselineFile(Path("x.json"))
    bf.entries[KEY.as_str()] = entry
    wide = {
        c.metric: c
        for c in vd.engine_wide_checks({KEY.as_str(): vd.ItemResult(slow)}, bf, POL, alpha=0.0025)
    }
    tok_wide = wide["engine-wide output_throughput_tok_s"]
    assert (tok_wide.status, tok_wide.gated) == ("not_evaluated", False)
    assert "this host is amd family 26" in tok_wide.reason

    def tok_status(env: dict, e: bl.BaselineEntry = entry) -> str:
        s = summary(tok_s=70.0, mal=2.0, environment=env)
        return by_metric(vd.evaluate_item(vd.ItemResult(s), e, POL, hardware_profile="hw"))[
            "output_throughput_tok_s"
        ].status

    same_cpu = {"cpu_signature": "amd family 25 model 17 stepping 1", "gpus": []}
    assert tok_status(same_cpu) == "fail"
    on_a_gpu = dict(env, gpus=[{"name": "NVIDIA H200"}])
    assert tok_status(on_a_gpu) == "fail"
    assert tok_status({"gpus": []}) == "fail"  # this run does not know its CPU
    assert tok_status(dict(env, measured_from="client machine")) == "fail"  # bench --url
    assert tok_status(env, base_entry()) == "fail"  # the starts do not record theirs


def test_an_update_records_the_machine_and_cpu_of_each_start():
    """The starts an update appends carry the run's boot id (its pass, where every VM's host
    name is "vm") and CPU signature, from the provenance the session writes."""
    e = bl.make_entry(
        KEY,
        {"output_throughput_tok_s": {"value": 100.0, "starts": [99.0, 101.0]}},
        POL,
        fingerprint=dict(FP),
        provenance={
            "engine_version": "0.32.0",
            "host": "vm",
            "boot_id": "b-1",
            "cpu_signature": "amd family 26 model 2 stepping 1",
        },
        hardware_profile="hw",
    )
    starts = e.metrics["output_throughput_tok_s"].starts
    assert [(s["boot_id"], s["cpu"]) for s in starts] == [
        ("b-1", "amd family 26 model 2 stepping 1")
    ] * 2
    assert len({bl.pass_label(s) for s in starts}) == 1
    bare = bl.make_entry(
        KEY,
        {"completed": {"value": 16}},
        POL,
        fingerprint=dict(FP),
        provenance={"engine_version": "0.32.0"},
        hardware_profile="hw",
    )
    assert set(bare.metrics["completed"].starts[0]) == {"value", "host", "date", "engine_version"}
