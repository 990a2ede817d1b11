"""The whole report from the committed fixtures: every section, the comparison order, the
self-contained HTML, the CLI."""

from __future__ import annotations

import base64
import re
import shutil
from pathlib import Path

import pytest

from specperf.cli import main
from specperf.report.build import build_report

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures_results"
MAIN, PREV = FIXTURES / "run-main", FIXTURES / "run-prev"
BASELINE = FIXTURES / "baseline-nvidia-l40sx1.json"
PLANTED = "qwen3-8b/vllm/eagle3/humaneval/c4/greedy"
SECTIONS = [
    "overview",
    "comparison-baseline",
    "comparison-run-run-prev",
    "speedup",
    "acceptance",
    "concurrency",
    "positions",
    "sensitivity",
    "engines",
    "quality",
    "environment",
    "details",
]
PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    paths = build_report([MAIN], baseline=BASELINE, compare_with=[[PREV]], out=out)
    return paths, paths.markdown.read_text(), paths.html.read_text()


def test_every_section_is_there_in_order(report):
    paths, md, html = report
    assert paths.sections == SECTIONS
    ids = re.findall(r'<section id="([^"]+)"', html)
    assert ids == SECTIONS
    for sid in SECTIONS:
        assert f'<a id="{sid}"></a>' in md


def test_every_section_has_data_for_the_fixtures(report):
    _, _, html = report
    flags = dict(
        re.findall(r'<section id="([^"]+)" data-section="[^"]+"\s+data-has-data="(\w+)"', html)
    )
    assert flags == {sid: "yes" for sid in SECTIONS}


def _first_row_of(html: str, section: str) -> str:
    body = html.split(f'<section id="{section}"', 1)[1].split("</section>", 1)[0]
    tbody = body.split("<tbody>", 1)[1]
    return tbody.split("</tr>", 1)[0]


def test_planted_regression_comes_first_in_both_comparisons(report):
    """Against the baseline file (three starts per item) the planted change fails; against
    run-prev (one start per item: too little evidence to gate) it is the first row, reported."""
    _, _, html = report
    for section, verdict in (
        ("comparison-baseline", "FAIL"),
        ("comparison-run-run-prev", "NOT EVALUATED"),
    ):
        row = _first_row_of(html, section)
        assert verdict in row and PLANTED in row, section


def test_regressions_are_counted_and_named(report):
    paths, md, _ = report
    assert paths.regressions == 3  # tok/s, MAL and acceptance rate against the baseline file
    assert f"Regressions: {PLANTED}" in md


def test_markdown_links_charts_that_exist_and_are_png(report):
    paths, md, _ = report
    links = re.findall(r"!\[[^\]]*\]\((charts/[^)]+\.png)\)", md)
    assert len(links) >= 9
    for link in links:
        assert (paths.markdown.parent / link).read_bytes().startswith(PNG)


def test_html_is_self_contained(report):
    _, _, html = report
    refs = re.findall(r'(?:src|href)="([^"]*)"', html)
    assert refs, "no references at all?"
    for ref in refs:
        assert ref.startswith(("#", "data:image/png;base64,")), ref[:80]
    assert "<script" not in html and "<link" not in html and "@import" not in html
    images = re.findall(r'src="data:image/png;base64,([^"]+)"', html)
    assert len(images) >= 9
    for b64 in images:
        assert base64.b64decode(b64).startswith(PNG)


def test_quality_section_flags_the_dflash_collapse(report):
    _, md, _ = report
    quality = md.split("## Quality guards", 1)[1].split("\n## ", 1)[0]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in quality.splitlines()]
    fails = [r for r in rows if r[0] == "FAIL"]
    assert fails and all(r[3] == "dflash (k=8)" and r[5] == "4" for r in fails)
    assert {r[1] for r in fails} >= {"mal_collapse", "degenerate_outputs", "greedy_equivalence"}


def test_environment_section_shows_gpu_telemetry(report):
    _, md, _ = report
    env = md.split("## Environment", 1)[1].split("\n## ", 1)[0]
    assert "gpu0 sm_clock_mhz (min/mean/max)" in env and "41.0 / 71.5 / 84.0" in env
    assert "NVIDIA L40S" in env and "570.124.06" in env
    assert "sw_thermal_slowdown" in env  # SGLang's warm GPU


def test_sections_without_data_say_so(tmp_path: Path):
    """Native items only: no speedup, acceptance, positions, engines or guards to show."""
    src = tmp_path / "native-only"
    for item in ("vllm-native-mt-bench-c1", "vllm-native-mt-bench-c4"):
        shutil.copytree(MAIN / item, src / item)
    paths = build_report([src], out=tmp_path / "out")
    html = paths.html.read_text()
    flags = dict(
        re.findall(r'<section id="([^"]+)" data-section="[^"]+"\s+data-has-data="(\w+)"', html)
    )
    for sid in ("speedup", "positions", "engines"):
        assert flags[sid] == "no", sid
        body = html.split(f'<section id="{sid}"', 1)[1].split("</section>", 1)[0]
        assert "No data:" in body
    assert flags["concurrency"] == "yes"
    md = paths.markdown.read_text()
    assert "_No data:_" in md
    assert "no speculative-method item" in md or "no method item has a native item" in md


def test_report_command(tmp_path: Path, capsys):
    rc = main(["report", str(PREV), "--out", str(tmp_path / "r")])
    out = capsys.readouterr().out
    assert rc == 0
    assert f"report: {tmp_path / 'r' / 'report.md'}" in out
    assert (tmp_path / "r" / "report.html").is_file()


def test_report_command_bad_baseline_is_one_line(tmp_path: Path, capsys):
    rc = main(["report", str(PREV), "--baseline", str(tmp_path / "none.json")])
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert err.count("\n") == 0 and "--baseline" in err and "no such file" in err


def test_report_command_missing_results(tmp_path: Path, capsys):
    rc = main(["report", str(tmp_path / "missing")])
    assert rc == 2
    assert "results directory does not exist" in capsys.readouterr().err


def test_report_command_appends_the_job_summary(tmp_path: Path, capsys, monkeypatch):
    target = tmp_path / "step.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(target))
    out = tmp_path / "r"
    rc = main(
        ["report", str(PREV), "--baseline", str(BASELINE), "--out", str(out), "--step-summary"]
    )
    assert rc == 0
    text = target.read_text()
    # the baseline was made from run-prev: nothing moved, every check passed
    assert text.startswith("## specperf — run-prev") and "**Verdict:** " in text
    assert "fail" not in text.split("**Verdict:** ")[1].splitlines()[0]
    assert f"Report: `{out / 'report.html'}`" in text
    assert f"job summary: {target}" in capsys.readouterr().out
