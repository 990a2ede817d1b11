"""Verdict holes: each test pins one way the verdict could say more than its evidence
supports (zero as a value, one-start baselines, reference rows, an item judged by nothing,
armed and switched-off gates)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from specperf import baselines as bl
from specperf import verdict as vd
from specperf.cli import main as cli_main
from specperf.config import ItemKey
from tests.unit.verdict.verdict_kit import (
    KEY,
    POL,
    _write_results,
    base_entry,
    by_metric,
    results,
    rules,
    summary,
)


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
