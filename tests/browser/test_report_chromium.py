"""The HTML report in a real headless Chromium (Debian's ``chromium``): it loads with the
network cut off, every chart image decodes, the tables have the rows the report computed.
One screenshot is kept as a CI artefact. Skips with the reason when Chromium is absent."""

from __future__ import annotations

import contextlib
import html as htmllib
import json
import os
import re
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from specperf.baselines import load_baselines
from specperf.report import tables
from specperf.report.build import build_report
from specperf.report.compare import visible
from specperf.report.load import load_results
from specperf.verdict import evaluate_results

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures_results"
MAIN, PREV = FIXTURES / "run-main", FIXTURES / "run-prev"
BASELINE = FIXTURES / "baseline-nvidia-l40sx1.json"
ARTIFACTS = Path(os.environ.get("SPECPERF_ARTIFACTS_DIR", REPO / "results" / "artifacts"))
NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
TIMEOUT_S = 90

PROBE = """<script>
window.addEventListener("load", () => {
  const imgs = [...document.querySelectorAll("img")].map(i => (
    {id: i.id, complete: i.complete, w: i.naturalWidth, h: i.naturalHeight}));
  const tables = {};
  document.querySelectorAll("table").forEach(t => {
    tables[t.id] = t.tBodies.length ? t.tBodies[0].rows.length : 0; });
  const sections = [...document.querySelectorAll("section")].map(s => s.id);
  const out = document.createElement("pre");
  out.id = "probe";
  out.textContent = JSON.stringify({imgs, tables, sections});
  document.body.appendChild(out);
});
</script>"""


def chromium() -> str | None:
    explicit = os.environ.get("SPECPERF_CHROMIUM")
    if explicit:
        return explicit
    return next((p for n in NAMES if (p := shutil.which(n))), None)


def run_chromium(binary: str, profile: Path, *args: str) -> str:
    """Run headless Chromium offline in its own process group; nothing outlives the call."""
    cmd = [
        binary,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--disable-dev-shm-usage",
        "--host-resolver-rules=MAP * ~NOTFOUND",  # no name resolves: offline for real
        f"--user-data-dir={profile}",
        *args,
    ]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True, text=True
    )
    try:
        out, err = proc.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        out, err = "", "timed out"
    finally:
        with contextlib.suppress(ProcessLookupError):  # renderer/zygote children left over
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    if proc.returncode not in (0, -signal.SIGKILL) or err == "timed out":
        raise AssertionError(f"chromium failed ({proc.returncode}): {err[-2000:]}")
    return out


@pytest.fixture(scope="module")
def browser() -> str:
    binary = chromium()
    if binary is None:
        pytest.skip(
            "headless Chromium not found (Debian: apt-get install -y chromium; "
            "or set SPECPERF_CHROMIUM)"
        )
    return binary


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    return build_report([MAIN], baseline=BASELINE, compare_with=[[PREV]], out=out)


@pytest.fixture(scope="module")
def probe(browser, report, tmp_path_factory) -> dict:
    page = report.html.with_name("probe.html")
    page.write_text(report.html.read_text().replace("</body>", PROBE + "</body>"))
    dom = run_chromium(
        browser,
        tmp_path_factory.mktemp("profile"),
        "--virtual-time-budget=15000",
        "--dump-dom",
        page.as_uri(),
    )
    found = re.search(r'<pre id="probe">(.*?)</pre>', dom, re.S)
    assert found, "the probe did not run: the page did not finish loading"
    return json.loads(htmllib.unescape(found.group(1)))


def test_every_section_loads(probe, report):
    assert probe["sections"] == report.sections


def test_every_chart_image_decodes(probe):
    assert len(probe["imgs"]) >= 9
    for img in probe["imgs"]:
        assert img["complete"] and img["w"] > 0 and img["h"] > 0, img


def test_tables_have_the_rows_the_report_computed(probe):
    rows = probe["tables"]
    runs = load_results([MAIN]).runs
    assert rows["speedup-table-1"] == len(tables.speedup_table(runs))
    assert rows["acceptance-table-1"] == len(tables.acceptance_table(runs))
    assert rows["engines-table-2"] == len(tables.engine_comparison(runs))
    checks = evaluate_results([MAIN], baselines=load_baselines(BASELINE)).checks
    assert rows["comparison-baseline-table-1"] == len(visible(checks))
    details = tables.details(runs)
    datasets = sorted(details["dataset"].unique())
    for n, ds in enumerate(datasets, 1):
        assert rows[f"details-table-{n}"] == int((details["dataset"] == ds).sum())
    assert all(n > 0 for n in rows.values()), rows


def test_screenshot_is_kept_as_an_artefact(browser, report, tmp_path_factory):
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "report-chromium.png"
    shot.unlink(missing_ok=True)
    run_chromium(
        browser,
        tmp_path_factory.mktemp("profile"),
        "--window-size=1400,4000",
        "--hide-scrollbars",
        f"--screenshot={shot}",
        report.html.as_uri(),
    )
    assert shot.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert shot.stat().st_size > 50_000  # a rendered page, not a blank one
