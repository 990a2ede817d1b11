"""The verdict module: comparisons, staleness, drift, quarantine, same-run rules, noise
intervals, outcomes and the `specperf verdict` command."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from pathlib import Path

import pytest

from specperf import baselines as bl
from specperf import stats
from specperf import verdict as vd
from specperf.cli import main as cli_main
from specperf.config import DEFAULT_METRICS, ItemKey, KnownIssue, MetricPolicy, parse_rules
from specperf.errors import ConfigError

KEY = ItemKey("m", "vllm", "eagle3", "mt-bench", 4, "greedy")
FP = {"engine_label": "vllm", "num_requests": 16, "tier": "smoke"}
POL = dict(DEFAULT_METRICS)


def summary(
    key: ItemKey = KEY,
    tok_s: float = 100.0,
    mal: float | None = 2.5,
    rate=0.5,
    out_tokens: float = 1000.0,
    version: str = "0.33.0",
    failed: int = 0,
    profile: str = "hw",
    **extra,
) -> dict:
    figures = {
        "output_throughput_tok_s": {
            "value": tok_s,
            "interval": [tok_s * 0.97, tok_s * 1.03],
            "interval_method": "95% bootstrap over 16 requests",
        },
        "mean_acceptance_length": {"value": mal},
        "acceptance_rate": {"value": rate},
        "output_tokens": {"value": out_tokens},
        "completed": {"value": 16 - failed},
    }
    s = {
        "key": key.as_str(),
        "item_id": "x",
        "engine_version": version,
        "hardware_profile": profile,
        "fingerprint": dict(FP),
        "figures": figures,
        "completed": 16 - failed,
        "failed": failed,
        "output_throughput_tok_s": tok_s,
        "mean_acceptance_length": mal,
        "acceptance_rate": rate,
        "output_tokens": out_tokens,
        "concurrency": key.concurrency,
        "method": key.method,
        "sampling": {"name": "greedy", "temperature": 0.0},
    }
    s.update(extra)
    return s


def base_entry(
    tok_s=100.0,
    mal=2.5,
    rate=0.5,
    out_tokens=1000.0,
    version="0.32.0",
    fp=None,
    known=None,
    profile="hw",
    tok_starts=None,
) -> bl.BaselineEntry:
    if tok_starts is None:  # five engine starts, ~0.8 % apart, geometric mean = tok_s
        tok_starts = [tok_s * f for f in (1 / 1.01, 1 / 1.005, 1.0, 1.005, 1.01)]
    # the deterministic metrics: three identical starts, the least evidence that arms a gate
    figs = {
        "output_throughput_tok_s": {"value": tok_s, "starts": tok_starts},
        "mean_acceptance_length": {"value": mal, "starts": [mal] * 3},
        "acceptance_rate": {"value": rate, "starts": [rate] * 3},
        "output_tokens": {"value": out_tokens, "starts": [out_tokens] * 3},
        "completed": {"value": 16, "starts": [16] * 3},
    }
    e = bl.make_entry(
        KEY,
        figs,
        POL,
        fingerprint=fp or dict(FP),
        provenance={"engine_version": version},
        hardware_profile=profile,
    )
    for i, start in enumerate(e.metrics["output_throughput_tok_s"].starts or []):
        # five runs on five days: a speed gate (>= 2 days, >= 3 passes)
        start["date"] = f"2026-11-{16 + i}T20:00:00Z"
    e.known_issue = known
    return e


def by_metric(checks):
    return {c.metric: c for c in checks}


# --------------------------------------------------------------------------- compare
@pytest.mark.parametrize(
    ("measured", "direction", "regressed"),
    [
        (95.0, "higher", True),
        (95.1, "higher", False),
        (105.0, "lower", True),
        (104.9, "lower", False),
        (105.0, "equal", True),
        (95.0, "equal", True),
        (100.0, "equal", False),
        (200.0, "higher", False),
    ],
)
def test_compare_tolerance_is_the_smallest_change_that_counts(measured, direction, regressed):
    assert vd.compare(measured, 100.0, direction, 0.05)[0] is regressed


def test_compare_zero_tolerance_and_zero_baseline():
    assert vd.compare(15.0, 16.0, "higher", 0.0)[0] is True
    assert vd.compare(16.0, 16.0, "higher", 0.0)[0] is False
    assert vd.compare(0.0, 0.0, "equal", 0.05)[0] is False
    assert vd.compare(1.0, 0.0, "lower", 0.05)[0] is True


# --------------------------------------------------------------------------- item checks
def test_all_within_tolerance_passes():
    checks = vd.evaluate_item(vd.ItemResult(summary()), base_entry(), POL, hardware_profile="hw")
    gated = [c for c in checks if c.gated]
    assert gated and all(c.status == "pass" for c in gated), [c.line() for c in checks]
    assert vd.outcome(checks).status == "pass"


def test_failure_message_names_everything():
    checks = vd.evaluate_item(
        vd.ItemResult(summary(tok_s=89.0)), base_entry(), POL, hardware_profile="hw"
    )
    c = by_metric(checks)["output_throughput_tok_s"]
    assert c.status == "fail"
    line = c.line()
    for part in (
        "m/vllm/eagle3/mt-bench/c4/greedy",
        "output_throughput_tok_s",
        "; 89 vs",
        "baseline 100.0 ",
        "-11.0%",
        "tolerance -5.0%",
        "interval 8",
        "95 % t interval over starts",
        "engine 0.33.0 (baseline 0.32.0)",
        "one-sided t test on log per-start values: 1 start(s) vs 5 baseline starts",
        "min effect 5%",
    ):
        assert part in line, (part, line)
    out = vd.outcome(checks)
    assert out.status == "fail" and line in out.lines


def test_mal_drop_of_five_percent_fails():
    checks = vd.evaluate_item(
        vd.ItemResult(summary(mal=2.375)), base_entry(), POL, hardware_profile="hw"
    )
    assert by_metric(checks)["mean_acceptance_length"].status == "fail"


def test_missing_and_stale_baselines():
    res = vd.ItemResult(summary())
    missing = vd.evaluate_item(res, None, POL)
    assert [c.status for c in missing if c.metric == "baseline"] == ["missing"]
    out = vd.outcome(missing, update_command="pytest -m perf -k x --update-baselines=missing")
    assert out.status == "skip" and "adopt a baseline with: pytest -m perf" in out.lines[-1]
    assert out.lines[0].startswith("NOT EVALUATED: ")
    assert vd.outcome(missing, strict=True).status == "fail"

    stale = vd.evaluate_item(res, base_entry(fp={**FP, "num_requests": 80}), POL)
    c = by_metric(stale)["baseline"]
    assert c.status == "stale" and "num_requests: 80 → 16" in c.reason
    # never compared, but every figure is shown (report only), as for a missing entry
    for checks in (stale, missing):
        row = by_metric(checks)["output_throughput_tok_s"]
        assert row.status == "info" and not row.gated and row.baseline is None
        assert row.measured == res.value("output_throughput_tok_s")
    # a stale entry judges nothing: green would mean nothing, so the item fails and says why
    out = vd.outcome(stale)
    assert out.status == "fail" and out.lines[0].startswith("judged by nothing")
    assert "fingerprint differs" in out.lines[0]


def test_failed_requests_and_dead_engine_fail_without_baseline():
    checks = vd.evaluate_item(
        vd.ItemResult(summary(failed=2, errors=["p1#1: HTTP 500"])), None, POL
    )
    c = by_metric(checks)["failed_requests"]
    assert c.status == "fail" and "2 of 16 requests failed" in c.reason and "HTTP 500" in c.reason
    assert vd.outcome(checks).status == "fail"
    allowed = vd.run_checks(vd.ItemResult(summary(failed=2)), max_failed_fraction=0.2)
    assert by_metric(allowed)["failed_requests"].status == "pass"
    died = vd.run_checks(vd.ItemResult(summary(engine_died=True)))
    assert by_metric(died)["engine"].status == "fail"


def test_output_length_drift_blocks_throughput_comparison():
    checks = vd.evaluate_item(
        vd.ItemResult(summary(tok_s=50.0, out_tokens=800.0)),
        base_entry(),
        POL,
        hardware_profile="hw",
    )
    c = by_metric(checks)["output_throughput_tok_s"]
    assert c.status == "not_evaluated"
    assert "output length drifted -20.0%" in c.reason and "throughput not compared" in c.reason
    # with the default policy output length is reported, not gated
    assert by_metric(checks)["output_tokens"].status == "info"
    gated = dict(POL)
    gated["output_tokens"] = MetricPolicy("output_tokens", "equal", 0.02, "always")
    checks = vd.evaluate_item(
        vd.ItemResult(summary(out_tokens=800.0)), base_entry(), gated, hardware_profile="hw"
    )
    assert by_metric(checks)["output_tokens"].status == "fail"


def test_hardware_bound_metric_not_compared_on_other_hardware():
    checks = vd.evaluate_item(
        vd.ItemResult(summary(tok_s=10.0, profile="other")),
        base_entry(),
        POL,
        hardware_profile="other",
    )
    c = by_metric(checks)["output_throughput_tok_s"]
    assert c.status == "not_evaluated" and "baseline measured on hw, this is other" in c.reason
    # acceptance moves with the hardware too (bf16 kernels differ by ISA): never compared
    c = by_metric(checks)["mean_acceptance_length"]
    assert c.status == "not_evaluated" and c.gated
    # no value of this profile: a "missing" row says so, green as on a new machine
    assert "no baseline of profile other" in by_metric(checks)["baseline"].reason
    assert vd.outcome(checks).status == "skip"
    assert vd.outcome(checks, strict=True).status == "fail"


def test_measured_gate_needs_three_baseline_starts():
    pol = dict(POL)
    pol["output_throughput_tok_s"] = MetricPolicy(
        "output_throughput_tok_s", "higher", 0.05, "measured", True, True
    )
    entry = base_entry(tok_starts=[100.0])  # one start
    checks = vd.evaluate_item(vd.ItemResult(summary(tok_s=80.0)), entry, pol, hardware_profile="hw")
    c = by_metric(checks)["output_throughput_tok_s"]
    assert c.status == "not_evaluated" and not c.gated and "1 engine start(s)" in c.reason
    assert "--repeat 3 --restart-between-repeats" in c.reason  # how to arm it
    assert vd.outcome(checks).status == "pass"  # judged by its armed MAL, acceptance, ...
    entry = base_entry(tok_starts=[97.0, 99.0, 100.0, 101.0, 103.0])
    checks = vd.evaluate_item(vd.ItemResult(summary(tok_s=80.0)), entry, pol, hardware_profile="hw")
    c = by_metric(checks)["output_throughput_tok_s"]
    assert c.status == "fail" and "one-sided t test on log per-start values" in c.reason
    assert "5 baseline starts" in c.reason and "min effect 5%" in c.reason
    checks = vd.evaluate_item(vd.ItemResult(summary(tok_s=98.0)), entry, pol, hardware_profile="hw")
    assert by_metric(checks)["output_throughput_tok_s"].status == "pass"


def test_gated_metric_missing_in_the_run_fails():
    checks = vd.evaluate_item(
        vd.ItemResult(summary(mal=None, rate=None)), base_entry(), POL, hardware_profile="hw"
    )
    c = by_metric(checks)["mean_acceptance_length"]
    assert c.status == "fail" and "not measured in this run" in c.reason


# --------------------------------------------------------------------------- quarantine
ISSUE = KnownIssue(
    reason="dflash collapses", link="https://x/issues/1", until_engine_version="0.34.0"
)


def test_quarantine_turns_failure_into_expected_failure():
    checks = vd.evaluate_item(
        vd.ItemResult(summary(mal=1.0)), base_entry(known=ISSUE), POL, hardware_profile="hw"
    )
    c = by_metric(checks)["mean_acceptance_length"]
    assert c.status == "xfail" and "dflash collapses (https://x/issues/1)" in c.reason
    assert vd.outcome(checks).status == "xfail"


def test_quarantine_expires_with_engine_version_and_date():
    checks = vd.evaluate_item(
        vd.ItemResult(summary(mal=1.0, version="0.34.1")),
        base_entry(known=ISSUE),
        POL,
        hardware_profile="hw",
    )
    c = by_metric(checks)["mean_acceptance_length"]
    assert c.status == "fail" and "quarantine expired: engine 0.34.1 >= 0.34.0" in c.reason
    dated = KnownIssue(reason="r", link="l", until_date="2026-01-01", match=(("concurrency", 4),))
    checks = vd.evaluate_item(
        vd.ItemResult(summary(mal=1.0)),
        base_entry(),
        POL,
        hardware_profile="hw",
        known_issues=[dated],
        today=dt.date(2025, 12, 31),
    )
    assert by_metric(checks)["mean_acceptance_length"].status == "xfail"
    checks = vd.evaluate_item(
        vd.ItemResult(summary(mal=1.0)),
        base_entry(),
        POL,
        hardware_profile="hw",
        known_issues=[dated],
        today=dt.date(2026, 1, 1),
    )
    assert "expired on 2026-01-01" in by_metric(checks)["mean_acceptance_length"].reason
    other = KnownIssue(reason="r", link="l", until_date="2099-01-01", match=(("concurrency", 16),))
    checks = vd.evaluate_item(
        vd.ItemResult(summary(mal=1.0)),
        base_entry(),
        POL,
        hardware_profile="hw",
        known_issues=[other],
    )
    assert by_metric(checks)["mean_acceptance_length"].status == "fail"  # does not match c4


# --------------------------------------------------------------------------- rules
def results(*summaries: dict) -> dict[str, vd.ItemResult]:
    return {s["key"]: vd.ItemResult(s) for s in summaries}


def rules(*tables: dict):
    return list(parse_rules(list(tables), "<test>", engine_names=None))


def test_speedup_rule():
    native = summary(KEY.native(), tok_s=40.0, mal=None)
    r = rules({"kind": "speedup", "method": "eagle3", "min": 1.3, "id": "s"})
    ok = vd.evaluate_rules(r, results(native, summary(tok_s=60.0)))
    assert [(c.status, round(c.measured, 2)) for c in ok] == [("pass", 1.5)]
    bad = vd.evaluate_rules(r, results(native, summary(tok_s=50.0)))
    assert bad[0].status == "fail" and "speedup vs native" in bad[0].line()
    missing = vd.evaluate_rules(r, results(summary(tok_s=60.0)))
    assert missing[0].status == "not_evaluated" and "native" in missing[0].reason
    failed_native = vd.evaluate_rules(r, results(summary(KEY.native(), failed=1), summary()))
    assert failed_native[0].status == "not_evaluated"
    nothing = vd.evaluate_rules(r, {})
    assert nothing[0].status == "not_evaluated" and "no measured item" in nothing[0].reason


def test_a_rule_whose_reference_the_run_did_not_select_is_report_only_not_a_failure():
    """`--method eagle3 --strict-baselines` leaves native out: the speedup and lossless rules
    cannot be judged, which is the run's scope (report-only), not a failure to measure; a
    native that was selected but produced nothing stays a gated not-evaluated."""
    r = rules(
        {"kind": "speedup", "method": "eagle3", "min": 1.3, "id": "s"},
        {"kind": "guard", "guard": "greedy_match", "method": "eagle3", "id": "g"},
    )
    res = results(summary(tok_s=60.0))
    left_out = vd.evaluate_rules(r, res, selected=[KEY.as_str()])
    assert [(c.status, c.gated) for c in left_out] == [("not_evaluated", False)] * 2
    assert all("not selected in this run" in c.reason for c in left_out)
    assert vd.gated_not_evaluated(left_out) == []
    judged = [vd.Check(KEY.as_str(), "mean_acceptance_length", "pass")]  # the item's own gate
    assert vd.outcome(judged + left_out, strict=True).status == "pass"
    chosen = vd.evaluate_rules(r, res, selected=[KEY.as_str(), KEY.native().as_str()])
    assert [(c.status, c.gated) for c in chosen] == [("not_evaluated", True)] * 2
    assert vd.outcome(chosen, strict=True).status == "fail"
    unknown = vd.evaluate_rules(r, res)  # older results folders say nothing: as before
    assert [(c.status, c.gated) for c in unknown] == [("not_evaluated", True)] * 2


def test_selection_is_read_from_the_snapshots_and_shards_add_up(tmp_path):
    a, b, old = tmp_path / "a", tmp_path / "b", tmp_path / "old"
    for d, sel in ((a, ["k1"]), (b, ["k2"]), (old, None)):
        d.mkdir()
        snap = {"name": "s"} if sel is None else {"name": "s", "selected": sel}
        (d / vd.SUITE_SNAPSHOT).write_text(json.dumps(snap))
    assert vd.selected_from_snapshots([a, b]) == {"k1", "k2"}
    assert vd.selected_from_snapshots([a, old]) is None


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


def test_cross_engine_rule():
    sk = ItemKey("m", "sglang", "eagle3", "mt-bench", 4, "greedy")
    r = rules(
        {
            "kind": "cross_engine",
            "metric": "speedup",
            "engine": "vllm",
            "reference_engine": "sglang",
            "method": "eagle3",
            "min": 0.8,
            "id": "x",
        }
    )
    res = results(
        summary(KEY.native(), tok_s=40.0),
        summary(tok_s=50.0),
        summary(sk.native(), tok_s=40.0),
        summary(sk, tok_s=80.0),
    )
    c = vd.evaluate_rules(r, res)[0]
    assert c.status == "fail" and c.measured == pytest.approx(0.625)
    res.pop(sk.as_str())
    assert vd.evaluate_rules(r, res)[0].status == "not_evaluated"


def test_floor_rule_and_rule_quarantine():
    r = rules(
        {
            "kind": "floor",
            "metric": "mean_acceptance_length",
            "method": "eagle3",
            "min": 3.99,
            "id": "f",
            "known_issue": {"reason": "r", "link": "l", "until_date": "2099-01-01"},
        }
    )
    c = vd.evaluate_rules(r, results(summary(mal=2.0)))[0]
    assert c.status == "xfail"
    r = rules(
        {
            "kind": "floor",
            "metric": "mean_acceptance_length",
            "method": "eagle3",
            "min": 3.99,
            "id": "f",
        }
    )
    assert vd.evaluate_rules(r, results(summary(mal=4.0)))[0].status == "pass"
    assert vd.evaluate_rules(r, results(summary(mal=None)))[0].status == "not_evaluated"


def _reqs(path: Path, texts: list[str]) -> None:
    path.mkdir(parents=True, exist_ok=True)
    lines = [
        json.dumps(
            {
                "prompt_id": f"p{i}",
                "turn": 1,
                "text": t,
                "output_tokens": 8,
                "e2e_s": 1.0,
                "ttft_s": 0.1,
            }
        )
        for i, t in enumerate(texts)
    ]
    (path / "requests.jsonl").write_text("\n".join(lines) + "\n")


def test_guards_greedy_match_and_degenerate(tmp_path):
    native_dir, spec_dir = tmp_path / "n", tmp_path / "s"
    _reqs(native_dir, ["alpha beta", "gamma delta", "eps zeta", "eta theta"])
    _reqs(spec_dir, ["alpha beta", "gamma delta", "x" * 200, "eta theta"])
    res = {
        KEY.native().as_str(): vd.ItemResult(summary(KEY.native()), native_dir),
        KEY.as_str(): vd.ItemResult(summary(), spec_dir),
    }
    r = rules(
        {"kind": "guard", "guard": "greedy_match", "method": "eagle3", "min": 0.8, "id": "g"},
        {"kind": "guard", "guard": "degenerate", "method": "eagle3", "id": "d"},
    )
    g, d = vd.evaluate_rules(r, res)
    assert g.status == "fail" and g.measured == 0.75
    assert d.status == "fail" and "x" in d.reason


def test_mal_collapse_guard():
    r = rules({"kind": "guard", "guard": "mal_collapse", "method": "eagle3", "id": "c"})
    c1 = ItemKey("m", "vllm", "eagle3", "mt-bench", 1, "greedy")
    c16 = ItemKey("m", "vllm", "eagle3", "mt-bench", 16, "greedy")
    res = results(summary(c1, mal=3.0), summary(mal=1.02), summary(c16, mal=2.9))
    out = {c.key: c for c in vd.evaluate_rules(r, res)}
    assert out[KEY.as_str()].status == "fail"
    assert out[c1.as_str()].status == "pass"


def test_mal_collapse_without_a_peer_in_the_matrix_is_out_of_scope_but_a_lost_peer_is_not():
    """A dataset the suite runs at one concurrency only has no peer to compare: report-only
    (the matrix's shape, so --strict-baselines is not red for it). A peer that the run selected
    and that produced nothing leaves the guard a gated not-evaluated."""
    r = rules({"kind": "guard", "guard": "mal_collapse", "method": "eagle3", "id": "c"})
    c1 = ItemKey("m", "vllm", "eagle3", "mt-bench", 1, "greedy")
    (alone,) = vd.evaluate_rules(r, results(summary(c1, mal=3.0)))
    assert (alone.status, alone.gated) == ("not_evaluated", False)
    assert "no item of this config at another concurrency" in alone.reason
    selected = {c1.as_str(), KEY.as_str()}  # c=4 was selected but wrote nothing
    (lost,) = vd.evaluate_rules(r, results(summary(c1, mal=3.0)), selected=selected)
    assert (lost.status, lost.gated) == ("not_evaluated", True)
    assert vd.gated_not_evaluated([lost]) == [lost]


# --------------------------------------------------------------------------- noise
def test_aggregate_median_of_repeats_with_interval():
    runs = [
        {"output_throughput_tok_s": v, "ttft_ms": {"p50": t}}
        for v, t in [(100.0, 10.0), (90.0, 12.0), (104.0, 11.0)]
    ]
    figs = vd.aggregate(runs, ["output_throughput_tok_s", "ttft_ms.p50", "acceptance_rate"])
    f = figs["output_throughput_tok_s"]
    assert f["value"] == 100.0 and f["interval"] == [90.0, 104.0]
    assert f["samples"] == [100.0, 90.0, 104.0] and "median" in f["interval_method"]
    assert figs["ttft_ms.p50"]["value"] == 11.0
    assert figs["acceptance_rate"] == {"value": None}


def test_bootstrap_interval_is_deterministic_and_brackets_the_value():
    reqs = [
        {"output_tokens": 60 + (i % 7), "e2e_s": 1.0 + (i % 5) * 0.05, "ttft_s": 0.1}
        for i in range(40)
    ]
    figs = vd.aggregate(
        [{"output_throughput_tok_s": 200.0, "ttft_ms": {"p50": 100.0}}],
        ["output_throughput_tok_s", "ttft_ms.p50"],
        reqs,
    )
    lo, hi = figs["output_throughput_tok_s"]["interval"]
    assert lo < 200.0 < hi and hi / lo < 1.2
    again = vd.aggregate([{"output_throughput_tok_s": 200.0}], ["output_throughput_tok_s"], reqs)
    assert again["output_throughput_tok_s"]["interval"] == [lo, hi]
    assert figs["ttft_ms.p50"]["interval"] == [100.0, 100.0]


# --------------------------------------------------------------------------- CLI
def _write_results(root: Path, items: list[dict], snapshot: dict | None = None) -> None:
    for s in items:
        d = root / s["key"].replace("/", "_")
        d.mkdir(parents=True)
        (d / "summary.json").write_text(json.dumps(s))
    if snapshot is not None:
        (root / "suite.json").write_text(json.dumps(snapshot))


def test_cli_verdict_exit_codes(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SPECPERF_RUNTIME_DIR", str(tmp_path / "run"))
    res = tmp_path / "res"
    _write_results(
        res,
        [summary(KEY.native(), tok_s=40.0), summary(tok_s=89.0)],
        {
            "metrics": {k: v.to_json() for k, v in POL.items()},
            "rules": [
                {
                    "id": "s",
                    "kind": "speedup",
                    "match": {"method": "eagle3"},
                    "min": 1.3,
                    "metric": "output_throughput_tok_s",
                }
            ],
            "known_issues": [],
            "baseline_file": "hw",
            "hardware_profile": "hw",
        },
    )
    bdir = tmp_path / "baselines"
    bl.update_baselines(bl.baseline_path(bdir, "hw"), [base_entry()])
    rc = cli_main(
        [
            "verdict",
            str(res),
            "--baselines-dir",
            str(bdir),
            "--all",
            "--json",
            str(tmp_path / "v.json"),
        ]
    )
    out = capsys.readouterr()
    assert rc == 1
    assert "output_throughput_tok_s" in out.out and "FAIL" in out.out
    assert "rule:s speedup vs native" in out.out
    assert "FAIL m/vllm/eagle3/mt-bench/c4/greedy: output_throughput_tok_s" in out.err
    data = json.loads((tmp_path / "v.json").read_text())
    assert data["counts"]["fail"] >= 1
    # the native item has no baseline: missing is a failure only when strict
    rc = cli_main(
        [
            "verdict",
            str(res / "m_vllm_native_mt-bench_c4_greedy"),
            "--baselines-dir",
            str(bdir),
            "--hardware-profile",
            "hw",
        ]
    )
    assert rc == 0
    rc = cli_main(
        [
            "verdict",
            str(res / "m_vllm_native_mt-bench_c4_greedy"),
            "--baselines-dir",
            str(bdir),
            "--hardware-profile",
            "hw",
            "--strict-baselines",
        ]
    )
    assert rc == 1


def test_cli_verdict_on_report_fixtures(tmp_path):
    """The report helper's committed results judged against their committed baseline
    (tests/fixtures_results/build.py): exactly the planted regression fails — EAGLE3 on
    HumanEval at c=4 runs 8 % slower and accepts 10.6 % fewer tokens per step (its acceptance
    rate is the same planted change: rate = (MAL - 1) / K). DFlash's collapse at c=4 is
    quarantined (xfail), never a pass; everything else passes or is not evaluated with a
    reason."""
    root = Path(__file__).resolve().parents[2] / "fixtures_results"
    baseline = root / "baseline-nvidia-l40sx1.json"
    v = vd.evaluate_results([root / "run-main"], baselines=bl.load_baselines(baseline))
    planted = "qwen3-8b/vllm/eagle3/humaneval/c4/greedy"
    failing = {(c.key, c.metric) for c in v.checks if c.status == "fail"}
    assert failing == {
        (planted, "output_throughput_tok_s"),
        (planted, "mean_acceptance_length"),
        (planted, "acceptance_rate"),
    }, [c.line() for c in v.checks if c.status == "fail"]
    deltas = {c.metric: c.delta for c in v.checks if c.status == "fail"}
    assert deltas["output_throughput_tok_s"] == pytest.approx(-0.08, abs=0.005)
    assert deltas["mean_acceptance_length"] == pytest.approx(-0.106, abs=0.005)
    xfails = {c.key for c in v.checks if c.status == "xfail"}
    assert xfails and all("/dflash/" in k and "/c4/" in k for k in xfails)
    assert all(c.reason for c in v.checks if c.status == "not_evaluated")
    # everything else passes: an item with a baseline entry has no other non-passing gated
    # check; "missing" only for items the baseline run did not have (ngram, DFlash, SGLang, zh)
    entries = set(bl.load_baselines(baseline).entries)
    assert len(entries) == 8
    for c in v.checks:
        if c.status in ("fail", "xfail") or not c.gated:
            continue
        if c.status == "missing":
            assert c.key not in entries, c.line()
            continue
        assert c.status == "pass", c.line()
    judged = {c.key for c in v.checks if c.status == "pass" and not c.rule}
    assert entries <= judged  # every baseline entry was compared
    assert not vd.gated_not_evaluated(v.checks)
    # the same through the command line: exit 1, the planted key on stderr
    out = tmp_path / "v.json"
    rc = cli_main(
        ["verdict", str(root / "run-main"), "--baseline", str(baseline), "--json", str(out)]
    )
    assert rc == 1
    assert json.loads(out.read_text())["counts"]["fail"] == 3


def test_table_orders_failures_first():
    checks = [
        vd.Check("b", "m", "pass", measured=1.0, baseline=1.0, delta=0.0),
        vd.Check("a", "m", "fail", measured=0.5, baseline=1.0, delta=-0.5),
    ]
    table = vd.format_table(checks)
    lines = table.splitlines()
    assert lines[0].split() == [
        "key",
        "metric",
        "measured",
        "baseline",
        "delta",
        "sees",
        "verdict",
    ]
    assert lines[2].split()[-1] == "FAIL" and lines[3].split()[-1] == "PASS"
    assert "-50.0%" in lines[2]
    assert "why:" not in table  # nothing left unjudged
    assert "sees:" not in table  # no statistical check, no legend


def test_table_says_what_each_statistical_check_could_see():
    checks = [
        vd.Check(
            "a", "tok/s", "pass", measured=95.0, baseline=100.0, delta=-0.05, detectable=-0.218
        ),
        vd.Check(
            "b",
            "len",
            "pass",
            measured=9.0,
            baseline=9.0,
            delta=0.0,
            direction="equal",
            detectable=0.02,
        ),
        vd.Check("c", "mal", "pass", measured=2.0, baseline=2.0, delta=0.0),
        vd.Check("d", "tok/s", "not_evaluated", reason="baseline starts from 2 pass(es) (runs)"),
    ]
    rows = {r[0]: dict(zip(vd.TABLE_COLUMNS, r, strict=True)) for r in vd.table_rows(checks)}
    assert [rows[k]["sees"] for k in "abcd"] == ["-22%", "±2.0%", "", ""]
    assert vd.TABLE_COLUMNS.index("sees") == vd.TABLE_COLUMNS.index("delta") + 1
    text = vd.format_table(checks)
    lines = text.splitlines()
    row = next(x for x in lines if x.startswith("a "))
    assert row.split()[-2:] == ["-22%", "PASS"]
    equal = next(x for x in lines if x.startswith("b "))
    assert equal.split()[-2:] == ["±2.0%", "PASS"]  # "equal": a size either way
    plain = next(x for x in lines if x.startswith("c "))
    assert plain.split()[-2:] == ["+0.0%", "PASS"]  # no test: the cell stays empty
    assert plain[lines[0].index("sees") :].split() == ["PASS"]
    # the legend sits under the table, before the reasons, and fits 100 columns
    legend = text.split("\n\n")[1]
    assert legend.startswith("sees: the change in the bad direction")
    assert " ".join(legend.splitlines()) == vd.SEES_LEGEND
    assert all(len(x) <= 100 for x in legend.splitlines())
    assert text.index("sees:") < text.index("why:")
    assert "sees:" not in vd.format_table(checks[2:])


def test_table_says_why_a_row_was_not_judged():
    checks = [
        vd.Check("a", "tok/s", "not_evaluated", reason="baseline starts from 2 pass(es) (runs)"),
        vd.Check("b", "mal", "pass", measured=1.0, baseline=1.0, delta=0.0),
        vd.Check("c", "tok/s", "stale", reason="fingerprint differs: model"),
    ]
    why = vd.format_table(iter(checks)).split("why:\n", 1)[1].splitlines()
    assert why == [
        "  STALE c tok/s: fingerprint differs: model",
        "  NOT EVALUATED a tok/s: baseline starts from 2 pass(es) (runs)",
    ]


def test_speed_of_a_too_short_item_is_not_judged():
    checks = vd.evaluate_item(
        vd.ItemResult(summary(tok_s=50.0, duration_s=0.4)), base_entry(), POL, hardware_profile="hw"
    )
    c = by_metric(checks)["output_throughput_tok_s"]
    assert c.status == "not_evaluated" and c.gated and "lasted 0.40 s < 5 s" in c.reason
    assert by_metric(checks)["mean_acceptance_length"].status == "pass"  # counters still count
    assert vd.outcome(checks).status == "skip"
    # a baseline from one day does not gate speed yet: the short item's speed stays report-only
    # (seen on the main job: ngram MT-Bench c=1 lasted 4.1 s on a quiet machine, and the item
    # was skipped with "1 not evaluated (gated)" though no speed gate was on)
    one_day = base_entry()
    for start in one_day.metrics["output_throughput_tok_s"].starts:
        start["date"] = "2026-12-01T16:00:00Z"
    young = vd.evaluate_item(
        vd.ItemResult(summary(tok_s=50.0, duration_s=0.4)), one_day, POL, hardware_profile="hw"
    )
    c = by_metric(young)["output_throughput_tok_s"]
    assert (c.status, c.gated) == ("not_evaluated", False)
    assert "baseline starts from 1 window(s)" in c.reason and "lasted 0.40 s < 5 s" in c.reason
    assert vd.outcome(young, strict=True).status == "pass"
    long_enough = vd.evaluate_item(
        vd.ItemResult(summary(tok_s=50.0, duration_s=6.0)), base_entry(), POL, hardware_profile="hw"
    )
    assert by_metric(long_enough)["output_throughput_tok_s"].status == "fail"


def test_a_cut_runs_start_summary_is_judged_not_a_traceback():
    """A run cut after its first start (a device's time limit, Ctrl-C before the item ended)
    leaves that start's own summary.json, whose ``repeats`` is the planned count, not the
    item's list of starts: `specperf verdict` judges it instead of raising."""
    cut = summary(tok_s=50.0, duration_s=6.0)
    cut["repeats"] = 3
    checks = vd.evaluate_item(vd.ItemResult(cut), base_entry(), POL, hardware_profile="hw")
    assert by_metric(checks)["output_throughput_tok_s"].status == "fail"
    cut["duration_s"] = 0.4
    checks = vd.evaluate_item(vd.ItemResult(cut), base_entry(), POL, hardware_profile="hw")
    assert "lasted 0.40 s < 5 s" in by_metric(checks)["output_throughput_tok_s"].reason


def test_delivery_bound_latencies_are_not_judged_and_never_fail_strict():
    pol = dict(POL)
    pol["tpot_ms.p50"] = MetricPolicy("tpot_ms.p50", "lower", 0.10, "always", True)
    s = summary(
        duration_s=6.0,
        tpot_ms={"p50": 0.005},
        delivery={"bound": True, "reason": "64 chunks within 0.3 ms in 9 of 16 requests"},
    )
    entry = base_entry()
    entry.metrics["tpot_ms.p50"] = bl.BaselineMetric(
        30.0,
        "lower",
        0.10,
        starts=[{"value": 30.0, "date": f"2026-11-{16 + i}T20:00:00Z"} for i in range(3)],
    )
    checks = vd.evaluate_item(vd.ItemResult(s), entry, pol, hardware_profile="hw")
    c = by_metric(checks)["tpot_ms.p50"]
    assert c.status == "not_evaluated" and not c.gated
    assert c.reason.startswith("delivery-bound: 64 chunks")
    assert c.switched_off == "delivery-bound latency"  # counted in the summary line
    assert "gates switched off: 1 (delivery-bound latency 1)" in vd.summary_line(checks)
    assert vd.outcome(checks, strict=True).status == "pass"
    # the same figure from a normally delivered stream is judged (here it passes: 0.005 ms)
    s["delivery"] = {"bound": False}
    checks = vd.evaluate_item(vd.ItemResult(s), entry, pol, hardware_profile="hw")
    assert (
        by_metric(checks)["tpot_ms.p50"].status == "pass"
    )  # 0.005 ms is faster, "lower" is better


def test_summary_line_counts_not_evaluated_apart_from_pass():
    checks = [
        vd.Check("a", "m", "pass"),
        vd.Check("a", "n", "not_evaluated", reason="x"),
        vd.Check("a", "o", "not_evaluated", reason="y", gated=False),
        vd.Check("a", "p", "info", reason="report only"),
        vd.Check("a", "q", "fail"),
    ]
    assert vd.summary_line(checks) == (
        "1 fail, 1 pass, 1 not evaluated (gated), 1 not evaluated (report-only), 1 report only"
        "; baseline gates armed: 0 of 0 (profile unknown)"
    )


def test_another_cpu_profile_is_green_with_no_baseline_lines_and_red_when_strict(tmp_path):
    """An AVX2 machine (a profile with no committed file) whose MAL is 3 % below the committed
    AVX-512 figures: acceptance moves with the ISA, so they are never compared with the AVX-512
    file — the run ends green with "no baseline for profile …" (strict: red). Judged as if
    measured on the AVX-512 profile, the same figures fail on MAL: the difference is real, just
    not a regression."""
    from specperf.config import load_suite

    root = Path(__file__).resolve().parents[3]
    avx512 = bl.load_baselines(root / "baselines" / "cpu-amd-epyc-avx512-2c.json")
    key = "tiny-qwen3/vllm/ngram/mt-bench/c4/greedy"
    entry = avx512.entries[key]
    mal = entry.metrics["mean_acceptance_length"].value * 0.97
    s = {
        "key": key,
        "item_id": "vllm-ngram-mt-bench-c4",
        "engine_version": entry.engine_version,
        "hardware_profile": "cpu-amd-epyc-avx2-2c",
        "fingerprint": entry.fingerprint,
        "completed": 16,
        "failed": 0,
        "duration_s": 6.0,
        "mean_acceptance_length": mal,
        "figures": {"mean_acceptance_length": {"value": mal, "starts": [mal]}},
    }
    suite = load_suite("cpu-tiny")
    snap = {"metrics": {k: v.to_json() for k, v in suite.metrics.items()}, "rules": []}
    res = tmp_path / "res"
    _write_results(res, [s], snap)
    args = ["verdict", str(res), "--baselines-dir", str(root / "baselines")]
    assert cli_main(args) == 0
    v = vd.evaluate_results([res], baselines_dir=root / "baselines")
    (missing,) = [c for c in v.checks if c.status == "missing"]
    assert "no baseline for profile cpu-amd-epyc-avx2-2c" in missing.reason
    assert "adopt with --update-baselines" in missing.reason
    assert cli_main([*args, "--strict-baselines"]) == 1
    # asking for the AVX-512 file does not make the AVX2 figures comparable with it
    forced = vd.evaluate_results(
        [res], baselines_dir=root / "baselines", hardware_profile="cpu-amd-epyc-avx512-2c"
    )
    (mal_check,) = [c for c in forced.checks if c.metric == "mean_acceptance_length"]
    assert mal_check.status == "not_evaluated"
    assert "baseline measured on cpu-amd-epyc-avx512-2c" in mal_check.reason
    assert not forced.failed
    # the same figures measured on the AVX-512 profile: MAL -3 % against a 2 % tolerance fails
    on_avx512 = vd.evaluate_item(
        vd.ItemResult({**s, "hardware_profile": "cpu-amd-epyc-avx512-2c"}), entry, suite.metrics
    )
    assert by_metric(on_avx512)["mean_acceptance_length"].status == "fail"


def test_each_item_of_a_folder_is_judged_against_its_own_profile(tmp_path):
    """A folder holding items of two profiles (merged shards of two GPU kinds): each item is
    judged against its own profile's file, never the first item's, item by item and
    engine-wide. Here profile b's item would fail on profile a's figures (MAL 5.0 vs 2.5)."""
    ngram = dataclasses.replace(KEY, method="ngram")
    bdir = tmp_path / "baselines"
    a_ngram = dataclasses.replace(base_entry(mal=5.0, profile="gpu-a"), key=ngram)
    bl.update_baselines(bl.baseline_path(bdir, "gpu-a"), [base_entry(profile="gpu-a"), a_ngram])
    b_ngram = dataclasses.replace(base_entry(profile="gpu-b"), key=ngram)
    bl.update_baselines(bl.baseline_path(bdir, "gpu-b"), [b_ngram])
    res = tmp_path / "res"
    _write_results(res, [summary(profile="gpu-a"), summary(ngram, profile="gpu-b")])
    v = vd.evaluate_results([res], baselines_dir=bdir)
    assert not v.failed, [(c.key, c.metric, c.reason) for c in v.failed]
    wide = [(c.key, c.metric) for c in v.checks if c.rule == "engine-wide"]
    assert len(wide) == len(set(wide)) and any("(gpu-b)" in k for k, _ in wide)  # one row each
    mal = {c.key: c for c in v.checks if c.metric == "mean_acceptance_length"}
    assert mal[ngram.as_str()].status == "pass" and mal[ngram.as_str()].baseline == 2.5
    # a folder of profile b judged against profile a's file: nothing machine-moved is compared
    only_b = tmp_path / "only-b"
    _write_results(only_b, [summary(ngram, profile="gpu-b")])
    forced = vd.evaluate_results([only_b], baselines_dir=bdir, hardware_profile="gpu-a")
    assert not forced.failed
    statuses = {c.metric: c.status for c in forced.checks if c.key == ngram.as_str()}
    assert statuses["mean_acceptance_length"] == "not_evaluated"
    assert statuses["output_throughput_tok_s"] == "not_evaluated"
    assert not [
        c
        for c in forced.checks
        if c.key.startswith("engine") and c.status != "info" and c.status != "not_evaluated"
    ]


def test_item_spread_is_pooled_over_its_engine_configs_siblings_only():
    """Items of one engine config (same model/engine/method/sampling and engine fingerprint)
    share each engine start, so their log spreads pool; another dataset's entry of the same
    config is a sibling, another method's is not, nor one whose engine fingerprint differs."""
    pol = dict(POL)
    pol["output_throughput_tok_s"] = MetricPolicy(
        "output_throughput_tok_s", "higher", 0.05, "measured", True, True
    )
    starts = [100.0, 103.0, 97.5, 101.0, 98.0, 102.5]
    me = base_entry(tok_starts=starts)
    sib = base_entry(tok_starts=[x * 2 for x in starts[::-1]])
    sib.key = dataclasses.replace(KEY, dataset="humaneval")
    other = base_entry(tok_starts=[x * 3 for x in starts])
    other.key = dataclasses.replace(KEY, method="native")
    moved = base_entry(tok_starts=[x * 4 for x in starts], fp={**FP, "model": "other@1"})
    moved.key = dataclasses.replace(KEY, concurrency=16)
    bf = bl.BaselineFile(Path("<mem>"))
    for e in (me, sib, other, moved):
        bf.entries[e.key.as_str()] = e
    assert vd.config_siblings(bf, KEY) == [me, sib, moved]
    # the items share each start: the df are one item's (6 starts - 1), not the sum over items
    assert vd.config_spread(me, vd.config_siblings(bf, KEY), "output_throughput_tok_s")[1] == 5
    res = vd.ItemResult(summary(tok_s=86.0))
    alone = by_metric(vd.evaluate_item(res, me, pol, hardware_profile="hw", alpha=0.005 / 60))
    pooled = by_metric(
        vd.evaluate_item(
            res,
            me,
            pol,
            hardware_profile="hw",
            alpha=0.005 / 60,
            siblings=vd.config_siblings(bf, KEY),
        )
    )
    # a sibling that moves with the item's starts adds no degrees of freedom: same decision
    assert alone["output_throughput_tok_s"].status == "pass"
    assert pooled["output_throughput_tok_s"].status == "pass"
    assert "spread pooled over 5 df" in pooled["output_throughput_tok_s"].reason


def test_alpha_counts_only_checks_the_matrix_can_have():
    """A native item has no acceptance checks and an engine with native items only no
    engine-wide MAL check; budget counted for them would be spent on nothing (a native-only
    engine would halve the other engine's engine-wide level)."""
    native = dataclasses.replace(KEY, method="native")
    loop_native = dataclasses.replace(native, engine="loop")
    a = vd.check_alpha(POL, [native, KEY, loop_native])
    # gated by default: tok/s, MAL, rate, completed; native items 2 each, eagle3 4
    assert a.item == pytest.approx(0.005 / (2 + 4 + 2))
    # engine-wide: tok/s + MAL for the engine with eagle3, tok/s only for the native-only one
    assert a.engine_wide == pytest.approx(0.005 / 3)


def test_an_engine_with_one_item_is_judged_engine_wide():
    """The decode-loop engine of the H200 suite has one item: its engine-wide check judges that
    item's ratio (gated), instead of being "not evaluated" for want of a second item."""
    entry = base_entry()
    bf = bl.BaselineFile(Path("x.json"))
    bf.entries[KEY.as_str()] = entry
    base = vd.ItemResult(summary(tok_s=100.0, mal=None, rate=None))
    slow = vd.ItemResult(summary(tok_s=85.0, mal=None, rate=None))
    for res, status in ((base, "pass"), (slow, "fail")):
        checks = vd.engine_wide_checks({KEY.as_str(): res}, bf, POL, alpha=0.0025)
        (c,) = [c for c in checks if c.metric == "engine-wide output_throughput_tok_s"]
        assert (c.status, c.gated) == (status, True), c
        assert "over 1 item" in c.reason


def test_a_statistical_check_carries_its_p_value():
    """Scripts that tabulate verdicts (benchmarks/verdict_proofs.py) read the test's p from the
    check, not by parsing its reason text; the field
    survives verdict.json. An item check and the engine-wide one, passing and failing."""
    entry = base_entry()
    bf = bl.BaselineFile(Path("x.json"))
    bf.entries[KEY.as_str()] = entry
    for tok_s in (100.0, 85.0):
        res = vd.ItemResult(summary(tok_s=tok_s, mal=None, rate=None))
        item = by_metric(vd.evaluate_item(res, entry, POL, hardware_profile="hw"))
        wide = vd.engine_wide_checks({KEY.as_str(): res}, bf, POL, alpha=0.0025)
        for c in [item["output_throughput_tok_s"], *wide]:
            assert c.p_value is not None, c
            assert f"p={c.p_value:.2g}" in c.reason, c
            assert vd.Check.from_json(json.loads(json.dumps(c.to_json()))).p_value == c.p_value


def test_a_later_verdict_decides_at_the_runs_own_levels(tmp_path, monkeypatch):
    """The levels come from the whole matrix (a filtered run decides as the full one would);
    the run writes them into suite.json, so `specperf verdict` on its folder — or on one item
    of it — uses them instead of recounting the items it happens to hold (before: a one-item
    folder got the whole budget, 0.005 per check, and could turn red where the run was green)."""
    monkeypatch.setenv("SPECPERF_RUNTIME_DIR", str(tmp_path / "run"))
    snap = {"metrics": {k: v.to_json() for k, v in POL.items()}, "hardware_profile": "hw"}
    bdir = tmp_path / "baselines"
    bl.update_baselines(bl.baseline_path(bdir, "hw"), [base_entry()])
    slow = summary(tok_s=94.0)  # -6 %: p ~0.001 against starts ~0.8 % apart
    verdicts = {}
    for name, levels in (("recounted", None), ("strict", {"item": 1e-6, "engine_wide": 1e-6})):
        res = tmp_path / name
        _write_results(res, [slow], dict(snap, alpha=levels) if levels else snap)
        v = vd.evaluate_results([res], baselines_dir=bdir)
        (tok,) = [c for c in v.checks if c.metric == "output_throughput_tok_s"]
        verdicts[name] = tok.status
    assert verdicts == {"recounted": "fail", "strict": "pass"}
    assert vd.alpha_from_snapshot({"alpha": {"item": 0.001, "engine_wide": 0.002}}) == (
        stats.AlphaSplit(0.001, 0.002)
    )
    assert vd.alpha_from_snapshot(snap) is None
    with pytest.raises(ConfigError, match="alpha"):
        vd.alpha_from_snapshot({"alpha": {"item": 0, "engine_wide": 0.1}})


def test_strict_fails_a_session_level_gated_check_that_was_not_evaluated():
    """Rules and engine-wide checks are judged at the end of the pytest session. Under
    --strict-baselines a gated one that could not be judged fails the session, as `specperf
    verdict --strict-baselines` counts it; a report-only one (a rule whose reference a filter
    left out) never does, and without strict neither fails."""
    from specperf.session import merge_rule_checks

    item = vd.Check(KEY.as_str(), "output_throughput_tok_s", "pass")
    unjudged = vd.Check(
        "engine vllm",
        "engine-wide output_throughput_tok_s",
        "not_evaluated",
        rule="engine-wide",
        gated=True,
        reason="too few starts",
    )
    scoped_out = vd.Check(
        "rule s",
        "speedup",
        "not_evaluated",
        rule="s",
        gated=False,
        reason="not selected in this run",
    )
    session = [unjudged, scoped_out]
    _, lenient = merge_rule_checks([item], session)
    assert lenient == []
    merged, strict = merge_rule_checks([item], session, strict=True)
    assert strict == [unjudged]
    assert len(merged) == 3
    # and the folder judged afterwards agrees
    assert vd.gated_not_evaluated(merged) == [unjudged]


def test_the_suite_tolerance_wins_and_both_are_shown_on_a_passing_row():
    """A suite whose MAL tolerance (2 %) differs from the baseline file's (5 %): the suite's
    decides — a -3 % MAL fails at 2 % where the file's 5 % would pass it — and every row, a
    passing one too, says both, in `specperf verdict`'s table and in the pytest table."""
    from specperf.report.terminal import verdict_table

    pol = {**POL, "mean_acceptance_length": MetricPolicy("mean_acceptance_length", "higher", 0.02)}
    pol["acceptance_rate"] = MetricPolicy("acceptance_rate", "higher", 0.02)
    entry = base_entry()  # made under POL: 5 % stored for MAL and acceptance rate
    assert entry.metrics["mean_acceptance_length"].tolerance == 0.05
    ok = by_metric(vd.evaluate_item(vd.ItemResult(summary(mal=2.5)), entry, pol))
    note = "suite tolerance 2.0% used (the baseline file says 5.0%)"
    assert ok["mean_acceptance_length"].status == "pass"
    assert note in ok["mean_acceptance_length"].reason
    assert note in vd.format_table(list(ok.values()), include_pass=True)
    assert note in verdict_table(list(ok.values()), include_pass=True, width=200)
    low = by_metric(vd.evaluate_item(vd.ItemResult(summary(mal=2.5 * 0.97)), entry, pol))
    assert low["mean_acceptance_length"].status == "fail"
    assert (
        by_metric(vd.evaluate_item(vd.ItemResult(summary(mal=2.5 * 0.97)), entry, POL))[
            "mean_acceptance_length"
        ].status
        == "pass"
    )


def test_engine_wide_mal_over_one_start_baselines_is_report_only_like_its_items():
    """One rule for evidence: with one-start baselines neither the items nor the engine-wide
    check gate MAL (a -12 % drop is reported, with how to arm the gate); with 3 starts both
    are gated, judged checks again."""
    one = base_entry(tok_starts=[100.0])
    one.metrics["mean_acceptance_length"].starts = [{"value": 2.5, "date": "2026-11-20"}]
    bf = bl.BaselineFile(Path("x.json"))
    bf.entries[KEY.as_str()] = one
    res = {KEY.as_str(): vd.ItemResult(summary(mal=2.2))}
    item = by_metric(vd.evaluate_item(res[KEY.as_str()], one, POL))
    assert (item["mean_acceptance_length"].status, item["mean_acceptance_length"].gated) == (
        "not_evaluated",
        False,
    )
    wide = {c.metric: c for c in vd.engine_wide_checks(res, bf, POL, alpha=0.0025)}
    mal = wide["engine-wide mean_acceptance_length"]
    assert (mal.status, mal.gated) == ("not_evaluated", False)
    assert "1 engine start(s)" in mal.reason and "--repeat 3" in mal.reason
    three = base_entry()
    three.metrics["mean_acceptance_length"].starts = [
        {"value": 2.5, "date": f"2026-11-2{i}T00:00:00Z"} for i in range(3)
    ]
    bf.entries[KEY.as_str()] = three
    wide = {c.metric: c for c in vd.engine_wide_checks(res, bf, POL, alpha=0.0025)}
    assert wide["engine-wide mean_acceptance_length"].gated
    assert wide["engine-wide mean_acceptance_length"].status == "fail"


def test_a_report_only_metric_missing_from_the_run_never_fails():
    """A metric stored report-only (here a MAL of 1.0: a gate that cannot fail) that this run did
    not measure is reported, not failed; a live gate missing from the run still fails."""
    dead = base_entry(mal=1.0)
    assert dead.metrics["mean_acceptance_length"].report_only
    gone = summary(mal=None)
    c = by_metric(vd.evaluate_item(vd.ItemResult(gone), dead, POL))["mean_acceptance_length"]
    assert (c.status, c.gated) == ("info", False)
    assert "not measured in this run" in c.reason and "report only" in c.reason
    live = by_metric(vd.evaluate_item(vd.ItemResult(gone), base_entry(), POL))
    assert live["mean_acceptance_length"].status == "fail"


# --------------------------------------------------------------------------- verdict holes
# Each test pins one way the verdict could say more than its evidence supports.


def test_acceptance_zero_against_its_baseline_fails():
    """Zero is a value: a release that stops accepting drafts (acceptance 0 vs 0.5906, MAL 1.0
    vs 2.5) fails, as does throughput 0 against a positive baseline; only a figure that was not
    measured is "not evaluated"."""
    entry = base_entry(rate=0.5906)
    by = by_metric(
        vd.evaluate_item(
            vd.ItemResult(summary(rate=0.0, mal=1.0)), entry, POL, hardware_profile="hw"
        )
    )
    rate = by["acceptance_rate"]
    assert rate.status == "fail" and rate.delta == pytest.approx(-1.0)
    assert "regression outright" in rate.reason
    assert by["mean_acceptance_length"].status == "fail"
    zero_speed = by_metric(
        vd.evaluate_item(vd.ItemResult(summary(tok_s=0.0)), entry, POL, hardware_profile="hw")
    )
    assert zero_speed["output_throughput_tok_s"].status == "fail"
    assert vd.outcome(list(by.values())).status == "fail"
    unmeasured = by_metric(
        vd.evaluate_item(vd.ItemResult(summary(rate=None)), entry, POL, hardware_profile="hw")
    )["acceptance_rate"]
    assert unmeasured.status == "fail" and "not measured in this run" in unmeasured.reason


def test_a_one_start_baseline_at_minus_six_percent_is_report_only():
    """Less evidence never gates harder: a one-start baseline (a suite that gates throughput
    "always") does not fail a run 6 % slower: it is reported with the way to arm it, as four
    starts of one afternoon are."""
    pol = dict(POL)
    pol["output_throughput_tok_s"] = dataclasses.replace(
        POL["output_throughput_tok_s"], gate="always"
    )
    one = base_entry(tok_starts=[100.0])
    slow = vd.ItemResult(summary(tok_s=94.0))
    c = by_metric(vd.evaluate_item(slow, one, pol, hardware_profile="hw"))[
        "output_throughput_tok_s"
    ]
    assert (c.status, c.gated) == ("not_evaluated", False)
    assert "the baseline has 1 engine start(s)" in c.reason and "--repeat 3" in c.reason
    afternoon = base_entry(tok_starts=[100.0, 100.5, 99.5, 100.2])
    for start in afternoon.metrics["output_throughput_tok_s"].starts:
        start["date"] = "2026-12-01T16:00:00Z"
    c4 = by_metric(vd.evaluate_item(slow, afternoon, pol, hardware_profile="hw"))[
        "output_throughput_tok_s"
    ]
    assert (c4.status, c4.gated) == (c.status, c.gated)


def test_seed_note_figures_are_reference_rows_never_judged():
    """The L40 file holds figures copied from the seed notes (other clients, other
    definitions): an item of that key shows them beside its own figures and is never judged
    by them — MAL 3.0, outside the notes' 3.1-4.7, does not fail — until this profile's own
    measured starts replace them (``--update-baselines=missing`` adopts over a reference)."""
    root = Path(__file__).resolve().parents[3]
    l40 = bl.load_baselines(root / "baselines" / "nvidia-l40x1.json")
    key = ItemKey.parse("qwen3-8b/sglang/eagle3/zh-long/c1/qwen3-default")
    entry = l40.get(key)
    assert entry is not None and entry.provenance["source"] == "seed-note"
    s = summary(key, mal=3.0, profile="nvidia-l40x1", decode_tok_s={"p50": 60.0})
    s["fingerprint"] = entry.fingerprint
    checks = vd.evaluate_item(vd.ItemResult(s), entry, POL, hardware_profile="nvidia-l40x1")
    by = by_metric(checks)
    assert by["baseline"].status == "missing" and "source seed-note" in by["baseline"].reason
    mal = by["mean_acceptance_length"]
    assert (mal.status, mal.gated) == ("not_evaluated", False) and mal.measured == 3.0
    assert mal.baseline == entry.metrics["mean_acceptance_length"].value
    assert mal.reason.startswith("reference row")
    assert by["decode_tok_s.p50"].baseline == entry.metrics["decode_tok_s.p50"].value
    assert not [c for c in checks if c.status == "fail"]
    assert vd.outcome(checks).status == "skip"  # as a new profile: no measured baseline yet


def test_an_item_judged_by_nothing_fails_and_a_new_profile_stays_green(tmp_path):
    """Green must mean something was judged: an item whose entry exists but whose every
    metric is report-only (one-start baselines), with no same-run rule, fails and says why; a
    same-run rule that judged it keeps it green; an item with no baseline at all (a new
    profile) stays green with its "missing" line."""
    entry = base_entry(tok_starts=[100.0])
    for m in entry.metrics.values():
        m.starts = m.starts[:1]
    checks = vd.evaluate_item(vd.ItemResult(summary()), entry, POL, hardware_profile="hw")
    out = vd.outcome(checks)
    assert out.status == "fail" and out.lines[0].startswith("judged by nothing")
    assert "1 engine start(s)" in out.lines[0]
    rule_pass = vd.Check(KEY.as_str(), "rule:s speedup vs native", "pass", rule="s")
    assert vd.outcome([*checks, rule_pass]).status == "pass"
    assert vd.outcome(checks, updated=True).status == "pass"  # the run just wrote it
    new_profile = vd.evaluate_item(vd.ItemResult(summary()), None, POL)
    assert vd.outcome(new_profile).status == "skip"
    # the whole-run verdict says the same: a "judged" FAIL row, exit 1
    bdir = tmp_path / "baselines"
    bl.update_baselines(bl.baseline_path(bdir, "hw"), [entry])
    res = tmp_path / "res"
    _write_results(res, [summary()])
    v = vd.evaluate_results([res], baselines_dir=bdir)
    assert [(c.key, c.metric) for c in v.failed] == [(KEY.as_str(), "judged")]
    assert cli_main(["verdict", str(res), "--baselines-dir", str(bdir)]) == 1


def test_summary_line_states_the_armed_baseline_gates_and_the_profile():
    """ "baseline gates armed: N of M (profile P)": M the metrics the suite gates against a
    baseline, N those the baseline's evidence arms (here throughput from one afternoon is
    report-only: 3 of 4 armed)."""
    entry = base_entry()
    for start in entry.metrics["output_throughput_tok_s"].starts:
        start["date"] = "2026-12-01T16:00:00Z"
    checks = vd.evaluate_item(vd.ItemResult(summary()), entry, POL, hardware_profile="hw")
    gated = [m for m, p in POL.items() if p.gate != "never"]
    line = vd.summary_line(checks, "hw")
    assert f"baseline gates armed: {len(gated) - 1} of {len(gated)} (profile hw)" in line
    g = vd.gate_summary(checks, "hw")
    assert (g["armed"], g["baseline_gates"], g["profile"]) == (len(gated) - 1, len(gated), "hw")


def test_gates_that_switch_themselves_off_are_counted():
    """The MAL-collapse guard whose peers accept nothing (MAL <= 1.0) cannot fail, and a rule
    whose scope matches no item of the run (a typo) judges nothing: both are report-only rows
    counted in the summary line and verdict.json, with the reason."""
    c1 = dataclasses.replace(KEY, concurrency=1)
    guard = rules({"kind": "guard", "guard": "mal_collapse", "method": "eagle3", "id": "mc"})
    checks = vd.evaluate_rules(guard, results(summary(mal=1.0), summary(c1, mal=1.0)))
    assert checks and all(c.switched_off for c in checks), [c.line() for c in checks]
    assert all(not c.gated and c.status == "not_evaluated" for c in checks)
    assert "nothing to collapse from" in checks[0].reason
    live = vd.evaluate_rules(guard, results(summary(mal=1.1), summary(c1, mal=2.5)))
    assert [c.status for c in live if c.key == KEY.as_str()] == ["fail"]
    typo = rules({"kind": "floor", "metric": "mean_acceptance_length", "min": 1.5,
                  "method": "eagel3", "id": "typo"})  # fmt: skip
    (row,) = vd.evaluate_rules(typo, results(summary()), selected=[KEY.as_str()])
    assert row.switched_off == "rule scope matches no item" and "a typo" in row.reason
    line = vd.summary_line([*checks, row], "hw")
    assert "gates switched off: 3" in line and "rule scope matches no item 1" in line
    off = vd.gate_summary([*checks, row])["switched_off"]
    assert {r["kind"] for r in off} == {
        "mal-collapse guard: peers accept nothing",
        "rule scope matches no item",
    }
