"""End-of-session output: the compact table and the GitHub job summary."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from specperf import verdict
from specperf.baselines import load_baselines
from specperf.report import terminal

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures_results"
MAIN = FIXTURES / "run-main"
BASELINE = FIXTURES / "baseline-nvidia-l40sx1.json"
PLANTED = "qwen3-8b/vllm/eagle3/humaneval/c4/greedy"


@pytest.fixture(scope="module")
def checks():
    return verdict.evaluate_results([MAIN], baselines=load_baselines(BASELINE)).checks


def test_summary_table_lists_regressions_first_with_the_contract_columns(checks):
    text = terminal.summary_table(MAIN, checks, report_paths=["/r/report.md", "/r/report.html"])
    lines = text.splitlines()
    assert lines[0].startswith("specperf verdict: 3 fail, 6 xfail")
    assert lines[1].split() == list(verdict.TABLE_COLUMNS)
    assert "sees" in verdict.TABLE_COLUMNS
    first = lines[3]
    assert first.startswith(PLANTED) and first.rstrip().endswith("FAIL")
    assert "acceptance_rate" in first  # the worst drop (-17.7 %) comes first
    assert lines[-2:] == ["report: /r/report.md", "report: /r/report.html"]
    assert not any(line.rstrip().endswith("PASS") for line in lines)


def test_summary_table_reads_recorded_verdicts(tmp_path, checks):
    verdict.write_verdicts(tmp_path / verdict.VERDICTS, checks)
    text = terminal.summary_table(tmp_path)
    assert PLANTED in text.splitlines()[3]
    assert terminal.summary_table(tmp_path / "empty").startswith("specperf verdict: no checks")


def test_step_summary_is_appended_only_when_github_asks(tmp_path, checks):
    target = tmp_path / "summary.md"
    target.write_text("earlier step\n")
    env = {terminal.STEP_SUMMARY_ENV: str(target)}
    assert terminal.write_step_summary(MAIN, checks, report_paths=["r.html"], environ=env) == target
    text = target.read_text()
    assert text.startswith("earlier step\n## specperf")
    assert "| key" in text and PLANTED in text and "Methods by mean speedup" in text
    assert text.index(PLANTED) < text.index("Methods by mean speedup")
    assert "Report: `r.html`" in text
    assert terminal.write_step_summary(MAIN, checks, environ={}) is None


def test_step_summary_table_says_what_each_check_could_see(tmp_path):
    cs = [
        verdict.Check(
            "k/a", "tok/s", "fail", measured=80.0, baseline=100.0, delta=-0.2, detectable=-0.218
        ),
        verdict.Check(
            "k/b",
            "len",
            "fail",
            measured=12.0,
            baseline=9.0,
            delta=0.33,
            direction="equal",
            detectable=0.02,
        ),
        verdict.Check("k/c", "mal", "fail", measured=1.0, baseline=2.0, delta=-0.5),
    ]
    text = terminal.step_summary_markdown(tmp_path, cs)  # no runs: the verdict table alone
    table = [x for x in text.splitlines() if x.startswith("|")]
    header = [h.strip() for h in table[0].strip("|").split("|")]
    assert header == ["key", "metric", "measured", "baseline", "delta", "sees", "verdict"]
    sees = {
        cells[0]: cells[header.index("sees")]
        for cells in ([c.strip() for c in x.strip("|").split("|")] for x in table[2:])
    }
    assert sees == {"k/a": "-22%", "k/b": "±2.0%", "k/c": ""}
    assert verdict.SEES_LEGEND in text.splitlines()
    assert text.index(verdict.SEES_LEGEND) > text.index(table[-1])  # under the table
    assert verdict.SEES_LEGEND not in terminal.step_summary_markdown(tmp_path, cs[2:])


def test_session_summary_writes_the_report_and_the_step_summary(tmp_path, checks):
    results = tmp_path / "results"
    shutil.copytree(FIXTURES / "run-prev", results)
    target = tmp_path / "step.md"
    text = terminal.session_summary(
        results, checks, environ={terminal.STEP_SUMMARY_ENV: str(target)}
    )
    assert (results / "report" / "report.html").is_file()
    assert f"report: {results / 'report' / 'report.html'}" in text
    assert str(results / "report" / "report.md") in target.read_text()


def test_order_is_regressions_worst_first_then_the_verdict_status_order():
    from specperf.report.compare import ordered

    def check(key, status, **kw):
        return verdict.Check(key, "m", status, **kw)

    cs = [
        check("pass", "pass", measured=1.0, baseline=1.0, delta=0.0, direction="higher"),
        check("stale", "stale"),
        check("rule", "fail", measured=1.1, baseline=1.3, delta=-0.5, direction="higher", rule="r"),
        check("small", "fail", measured=0.9, baseline=1.0, delta=-0.1, direction="higher"),
        check("xfail", "xfail", measured=0.5, baseline=1.0, delta=-0.5, direction="higher"),
        check("big-lower", "fail", measured=1.3, baseline=1.0, delta=0.3, direction="lower"),
    ]
    assert [c.key for c in ordered(cs)] == ["big-lower", "small", "rule", "xfail", "stale", "pass"]


# --------------------------------------------------------------------------- the verdict table
def row_check(item, metric, status, **kw):
    return verdict.Check(f"m/{item}", metric, status, item=item, **kw)


def test_verdict_table_groups_by_item_failures_and_not_evaluated_first_with_reasons():
    long_reason = "dropped between engine 0.32.0 and 0.33.0 " * 8
    cs = [
        row_check("a-native", "output_tokens", "pass", measured=10.0, baseline=10.0, delta=0.0),
        row_check("b-eagle3", "ttft_ms.p50", "pass", measured=5.0, baseline=5.0, delta=0.0),
        row_check(
            "b-eagle3",
            "acceptance_rate",
            "fail",
            measured=0.4,
            baseline=0.5,
            delta=-0.2,
            reason=long_reason,
        ),
        row_check(
            "c-ngram",
            "speedup",
            "not_evaluated",
            rule="ngram-faster",
            reason="native was not measured in this run",
        ),
        row_check("c-ngram", "output_tokens", "pass", measured=3.0, baseline=3.0, delta=0.0),
        row_check(
            "d-" + "x" * 120, "output_tokens", "fail", measured=1.0, baseline=2.0, delta=-0.5
        ),
    ]
    text = terminal.verdict_table(cs)
    lines = text.splitlines()
    assert all(len(line) <= 100 for line in lines), max(map(len, lines))
    heads = [line for line in lines if line and not line.startswith(" ")]
    assert heads[0] == "b-eagle3" and heads[1].startswith("…") and heads[2] == "c-ngram"
    assert heads[3] == "a-native"  # an item of passes only comes last
    b = lines.index("b-eagle3")
    assert lines[b + 1].split()[:2] == ["acceptance_rate", "0.4"]
    assert lines[b + 1].rstrip().endswith("FAIL")
    assert lines[b + 2].startswith("      dropped between")  # its reason, wrapped, then cut
    assert lines[b + 4].endswith("…") and lines[b + 5].split()[0] == "ttft_ms.p50"
    c = lines.index("c-ngram")
    assert lines[c + 1].split()[:2] == ["speedup", "(ngram-faster)"]
    assert lines[c + 1].rstrip().endswith("NOT EVALUATED")
    assert lines[c + 2].strip() == "native was not measured in this run"
    assert "PASS" in lines[c + 3]


def test_verdict_table_without_passes_and_narrow_terminals():
    cs = [row_check("a", "m", "pass"), row_check("b", "m", "info", reason="report only")]
    text = terminal.verdict_table(cs, include_pass=False, width=80)
    assert "PASS" not in text and "report only" in text
    assert all(len(line) <= 80 for line in text.splitlines())
    assert terminal.verdict_table(cs[:1], include_pass=False) == "(all 1 checks passed)"
    assert terminal.verdict_table([]) == "(no checks)"


def test_an_unknown_status_sorts_before_passes():
    cs = [row_check("a", "m", "pass"), row_check("b", "m", "warn", reason="new status")]
    heads = [x for x in terminal.verdict_table(cs).splitlines() if x and not x.startswith(" ")]
    assert heads == ["b", "a"]


def test_a_statistical_row_says_what_it_could_see_and_the_legend_explains_it():
    cs = [
        row_check(
            "a-native",
            "output_throughput_tok_s",
            "pass",
            measured=95.0,
            baseline=100.0,
            delta=-0.05,
            detectable=-0.214,
        ),
        row_check("a-native", "output_tokens", "pass", measured=10.0, baseline=10.0, delta=0.0),
        row_check(
            "a-native", "completed", "pass", measured=12.0, direction="higher", detectable=-0.005
        ),
        row_check(
            "a-native", "output_len", "pass", measured=9.0, direction="equal", detectable=0.02
        ),
    ]
    lines = terminal.verdict_table(cs, width=80).splitlines()
    assert lines[0].split() == ["metric", "measured", "baseline", "delta", "sees", "verdict"]
    row = next(x for x in lines if x.split()[:1] == ["output_throughput_tok_s"])
    assert row.split()[-2:] == ["-21%", "PASS"]
    tokens = next(x for x in lines if x.split()[:1] == ["output_tokens"])
    assert tokens.split()[-2:] == ["+0.0%", "PASS"]  # no test, no "sees"
    completed = next(x for x in lines if x.split()[:1] == ["completed"])
    assert completed.split()[-2:] == ["-0.5%", "PASS"]  # small changes keep a decimal
    equal = next(x for x in lines if x.split()[:1] == ["output_len"])
    assert equal.split()[-2:] == ["±2.0%", "PASS"]  # "equal": a size either way
    assert any(x.startswith("sees: the change in the bad direction") for x in lines)
    assert all(len(x) <= 80 for x in lines)
    assert "sees:" not in terminal.verdict_table(cs[1:2])
