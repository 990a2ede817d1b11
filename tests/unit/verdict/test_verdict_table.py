"""The verdict table and summary line: failures first, what each statistical check could see,
why a row was not judged, the counts, and both tolerances on a row where the suite's wins."""

from __future__ import annotations

from specperf import verdict as vd
from specperf.config import MetricPolicy
from tests.unit.verdict.verdict_kit import (
    POL,
    base_entry,
    by_metric,
    summary,
)


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
