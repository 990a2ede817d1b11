"""Same-run rules of the verdict: speedup, cross-engine and floor rules, their quarantine, the
selection a rule's reference is read from, and the guards (greedy match, degenerate output,
MAL collapse)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specperf import verdict as vd
from specperf.config import ItemKey
from tests.unit.verdict.verdict_kit import (
    KEY,
    results,
    rules,
    summary,
)


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
