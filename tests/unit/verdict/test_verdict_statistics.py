"""The verdict's statistics: medians of repeats and their intervals, the spread pooled over an
engine config's siblings, the per-check levels (alpha) and the run's own levels read back,
the engine-wide check and the p value a statistical check carries."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from specperf import baselines as bl
from specperf import verdict as vd
from specperf.config import MetricPolicy
from specperf.errors import ConfigError
from tests.unit.verdict.verdict_kit import (
    FP,
    KEY,
    POL,
    _write_results,
    base_entry,
    by_metric,
    summary,
)


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
        vd.AlphaSplit(0.001, 0.002)
    )
    assert vd.alpha_from_snapshot(snap) is None
    with pytest.raises(ConfigError, match="alpha"):
        vd.alpha_from_snapshot({"alpha": {"item": 0, "engine_wide": 0.1}})


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
