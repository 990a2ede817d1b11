"""`specperf watch matrix` end to end, no network: the suite's real pytest runs of the
calibration engine as a series of releases (tests.calibration.releases; ngram accepts fewer
tokens from release 1.3 on), with ``specperf env create`` faked so one release can be
uninstallable. Plus the pieces: schedule, release ranges, the matrix file, the exact
comparison and the reference's repeatability."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specperf.cli import build_parser, main
from specperf.config import DEFAULT_METRICS
from specperf.errors import ConfigError
from specperf.release_watch import StaticVersions
from specperf.release_watch.commands import run_matrix_command
from specperf.release_watch.matrix_judge import exact_verdict, judge_matrix
from specperf.release_watch.matrix_model import MATRIX_FILE, load_matrix
from specperf.release_watch.matrix_run import (
    Executor,
    MatrixPlan,
    parse_versions,
    releases_between,
    run_schedule,
    schedule,
)
from specperf.report.matrix import dependency_steps, family_frame
from tests.unit.release_watch.release_matrix_kit import (
    FIXTURE_ITEM_KEY as KEY,
)
from tests.unit.release_watch.release_matrix_kit import (
    PYTEST_ARGS,
    TARGET,
    EnvFaker,
    FixtureRunner,
    in_repo_root,  # noqa: F401 - fixture
    write_suite,
)

MAL = "mean_acceptance_length"
NGRAM = "calib-model/calib/ngram/mt-bench/c1/greedy"
SOURCE = StaticVersions({"calibration": ["0.9", "1.0", "1.1", "1.2", "1.3", "1.4", "1.5rc1"]})


def matrix(tmp_path: Path, runner: EnvFaker, *args: str, out: str = "m") -> tuple[int, Path]:
    suite = write_suite(tmp_path)
    argv = ["watch", "matrix", "--suite", str(suite), "--results-dir", str(tmp_path / out)]
    ns = build_parser().parse_args([*argv, *args])
    # the ngram item alone (one engine start per run): the planted step is its acceptance
    rc = run_matrix_command(ns, TARGET, SOURCE, {}, [*PYTEST_ARGS, "-k", "ngram"], runner=runner)
    return rc, tmp_path / out / MATRIX_FILE


def cell(m, release: str, item: str, metric: str):
    (c,) = [c for c in m.cells if (c.release, c.item, c.metric) == (release, item, metric)]
    return c


@pytest.mark.usefixtures("in_repo_root")
def test_matrix_flags_the_planted_step_and_names_an_uninstallable_release(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runner = EnvFaker({"1.2": "no wheel for this Python (cp312)"})
    rc, path = matrix(tmp_path, runner, "--versions", "1.1,1.2,1.3,1.4")
    out = capsys.readouterr()
    assert rc == 1, out.err
    m = load_matrix(path)
    assert m.releases == ["1.0", "1.1", "1.2", "1.3", "1.4"] and m.reference == "1.0"
    # R C R C R C R C R, the uninstallable candidate's slot without a suite run
    plan = [(r.release, r.role, r.status) for r in m.runs]
    assert [p[:2] for p in plan] == [
        ("1.0", "reference"),
        ("1.1", "candidate"),
        ("1.0", "reference"),
        ("1.2", "candidate"),
        ("1.0", "reference"),
        ("1.3", "candidate"),
        ("1.0", "reference"),
        ("1.4", "candidate"),
        ("1.0", "reference"),
    ]
    assert [p[2] for p in plan].count("done") == 8
    assert len(runner.pytest_runs) == 8
    rows = {r.release: r for r in m.rows}
    assert rows["1.2"].status == "not installable"
    assert "no wheel for this Python (cp312)" in rows["1.2"].reason
    assert (rows["1.0"].status, rows["1.1"].status) == ("reference", "pass")
    assert rows["1.3"].status == rows["1.4"].status == "regression"
    assert rows["1.3"].stack and rows["1.3"].stack.engine == "1.3"
    # the step: flagged at 1.3 against the reference and against the previous release
    # (1.1: the uninstallable 1.2 has no cells); 1.4 is the same as 1.3
    c13 = cell(m, "1.3", NGRAM, MAL)
    assert (c13.vs_reference.status, c13.vs_previous.status) == ("fail", "fail")
    assert c13.vs_previous.against == "previous 1.1"
    assert c13.value == pytest.approx(11 / 6) and c13.vs_reference.delta == pytest.approx(-1 / 3)
    c14 = cell(m, "1.4", NGRAM, MAL)
    assert (c14.vs_reference.status, c14.vs_previous.status) == ("fail", "same")
    for metric in ("acceptance_rate", "per_position_acceptance[2]"):
        assert cell(m, "1.3", NGRAM, metric).vs_previous.status in ("fail", "changed")
    # unchanged releases and metrics: exactly the same (the reference's runs agree)
    for rel in ("1.1",):
        for metric in (MAL, "acceptance_rate", "per_position_acceptance[1]", "output_tokens"):
            c = cell(m, rel, NGRAM, metric)
            assert (c.vs_reference.status, c.vs_reference.method) == ("same", "exact"), c
    assert cell(m, "1.3", NGRAM, "output_tokens").vs_reference.status == "same"
    assert not m.not_repeatable
    # speed: against the reference runs only, never against the previous release
    tok = cell(m, "1.1", NGRAM, "output_throughput_tok_s")
    assert tok.vs_reference.method == "verdict" and tok.vs_previous.status == "info"
    assert cell(m, "1.0", "engine calib", "engine-wide output_throughput_tok_s").value == 1.0
    # progress, ETA, summary, report
    assert "[2/9] calibration 1.1 (candidate) …" in out.out
    assert "[4/9] calibration 1.2 (candidate) not installable" in out.out
    assert "ETA" in out.out
    assert "REGRESSION in calibration 1.3" in out.err
    report = (path.parent / "report" / "report.html").read_text()
    assert 'id="matrix-mal"' in report and "FAIL -33.3%" in report
    md = (path.parent / "report" / "report.md").read_text()
    assert "not installable" in md and "| torch" in md


def test_resume_after_an_interrupted_matrix_repeats_no_finished_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ctrl-C during the third run: matrix.json keeps the two finished runs and marks the
    third interrupted; --resume runs the interrupted and the pending runs only."""
    step = {"1.3": 0.8}  # the fixture item's MAL x 0.8 from 1.3 on
    first = FixtureRunner(step, stop_after=3)
    rc, path = matrix(tmp_path, first, "--from", "1.1", "--to", "1.3", "--reference", "1.1")
    assert rc == 130 and "--resume" in capsys.readouterr().err
    m = load_matrix(path)
    assert [r.status for r in m.runs] == ["done", "done", "interrupted", "pending", "pending"]
    kept = {r.results_dir: Path(r.results_dir).stat().st_mtime for r in m.runs[:2]}
    with pytest.raises(ConfigError, match="exists: pass --resume"):
        matrix(tmp_path, first, "--from", "1.1", "--to", "1.3", "--reference", "1.1")
    with pytest.raises(ConfigError, match=r"planned with reference '1\.1'"):
        matrix(tmp_path, first, "--from", "1.1", "--to", "1.3", "--resume")
    again = FixtureRunner(step)
    rc, path = matrix(
        tmp_path, again, "--from", "1.1", "--to", "1.3", "--reference", "1.1", "--resume"
    )
    assert rc == 1  # 1.3 has the step; 1.2 is the same as the reference 1.1
    m = load_matrix(path)
    assert [r.status for r in m.runs] == ["done"] * 5
    assert len(again.pytest_runs) == 3  # only the interrupted and the pending runs
    assert {d: Path(d).stat().st_mtime for d in kept} == kept
    assert {r.release: r.status for r in m.rows} == {
        "1.1": "reference",
        "1.2": "pass",
        "1.3": "regression",
    }
    assert cell(m, "1.3", KEY, MAL).vs_previous.status == "fail"
    with pytest.raises(ConfigError, match="does not exist"):
        matrix(tmp_path, again, "--versions", "1.2", "--resume", out="elsewhere")


def test_schedule_interleaves_the_reference() -> None:
    assert schedule("1.0", ["1.1", "1.2"]) == [
        ("1.0", "reference"),
        ("1.1", "candidate"),
        ("1.0", "reference"),
        ("1.2", "candidate"),
        ("1.0", "reference"),
    ]
    every2 = schedule("1.0", ["0.9", "1.0", "1.1", "1.2"], every=2)
    assert [r for r, _ in every2] == ["1.0", "0.9", "1.1", "1.0", "1.2", "1.0"]
    with pytest.raises(ConfigError, match="--reference-every 0"):
        schedule("1.0", ["1.1"], every=0)


def test_release_ranges_and_lists() -> None:
    versions = ["1.1", "1.0", "1.2rc1", "1.2", "1.10", "1.3.post1", "junk"]
    assert releases_between(versions, "1.0", "1.3.post1") == ["1.0", "1.1", "1.2", "1.3.post1"]
    assert releases_between(versions, "1.0", "1.2", pre=True) == ["1.0", "1.1", "1.2rc1", "1.2"]
    assert releases_between(versions, "1.0", "1.2", inclusive=False) == ["1.1"]
    with pytest.raises(ConfigError, match=r"--from 1\.3 is newer than --to 1\.0"):
        releases_between(versions, "1.3", "1.0")
    with pytest.raises(ConfigError, match="--to 'latest': not a release version"):
        releases_between(versions, "1.0", "latest")
    assert parse_versions("1.1, 1.2,") == ["1.1", "1.2"]
    with pytest.raises(ConfigError, match="--versions 'x'"):
        parse_versions("1.1,x")


def test_a_bad_matrix_file_is_one_line(tmp_path: Path) -> None:
    p = tmp_path / MATRIX_FILE
    p.write_text("{")
    with pytest.raises(ConfigError, match=r"matrix.json: not valid JSON"):
        load_matrix(p)
    good = MatrixPlan(TARGET, "s", ["1.1"], "1.0", tmp_path).new_matrix()
    data = good.model_dump(mode="json")
    data["runs"][0]["status"] = "finished"
    p.write_text(json.dumps(data))
    with pytest.raises(ConfigError, match=r"matrix.json: runs\[0\]\.status: Input should"):
        load_matrix(p)


def test_exact_comparison_says_same_changed_or_fail() -> None:
    pol = DEFAULT_METRICS[MAL]  # higher is better, tolerance 5 %
    assert exact_verdict(2.75, 2.75, pol, "r").status == "same"
    assert exact_verdict(2.74, 2.75, pol, "r").status == "changed"  # -0.4 %: below tolerance
    assert exact_verdict(2.9, 2.75, pol, "r").status == "changed"  # better
    assert exact_verdict(2.5, 2.75, pol, "r").status == "fail"
    assert exact_verdict(0.5, 0.25, None, "r").status == "changed"  # per-position: no policy


@pytest.mark.parametrize(("candidates", "fallback"), [(["1.1", "1.2"], "pass"), (["1.1"], None)])
def test_a_reference_that_disagrees_with_itself_is_not_compared_exactly(
    tmp_path: Path, candidates: list[str], fallback: str | None
) -> None:
    """The reference's second run measures another MAL for one item: that row is "reference
    not repeatable" and its cells keep the verdict module's tolerance verdict (which, like every
    gate, needs three reference starts: with two it is not evaluated, never a point
    comparison); the other exact rows are still compared exactly."""
    table = {("1.0", 3): 3.0, ("1.0", 0): 3.05, ("1.1", 0): 3.04, ("1.2", 0): 3.04}
    runner = FixtureRunner(lambda v, n: table.get((v, n), table.get((v, 0))))
    plan = MatrixPlan(TARGET, "s", candidates, "1.0", tmp_path / "m")
    m = plan.new_matrix()
    ex = Executor(m, tmp_path / "m" / MATRIX_FILE, TARGET, runner=runner, say=lambda _: None)
    run_schedule(ex)
    judge_matrix(m)
    assert any(
        r.startswith(f"{KEY} | {MAL}: reference not repeatable: 3 … 3.05") for r in m.not_repeatable
    ), m.not_repeatable
    c = cell(m, "1.1", KEY, MAL)
    assert c.vs_reference.method == "verdict"
    assert c.vs_reference.status == (fallback or "not_evaluated")
    if fallback is None:
        assert "engine start(s); a gate needs >= 3" in c.vs_reference.reason
    else:
        assert "reference not repeatable" in c.vs_reference.reason
    assert c.vs_previous.status == "not_evaluated"
    other = cell(m, "1.1", "qwen3-8b/vllm/eagle3/mt-bench/c4/greedy", MAL)
    assert (other.vs_reference.status, other.vs_reference.method) == ("same", "exact")


def test_report_of_a_matrix_shows_each_family_and_the_dependency_change(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`specperf report --matrix`: one table and one chart per metric family, the stack row,
    and the torch change between 1.1 and 1.2 marked (a step that coincides with it)."""

    def packages(release: str) -> dict[str, str]:
        torch = "2.11.0+cpu" if release < "1.2" else "2.13.0+cpu"
        return {"torch": torch, "transformers": "4.57.1", "torch_build": "pinned"}

    runner = FixtureRunner({"1.2": 0.8}, packages=packages)
    rc, path = matrix(tmp_path, runner, "--versions", "1.1,1.2", "--no-report")
    assert rc == 1
    m = load_matrix(path)
    assert [(r.release, r.stack.torch) for r in m.rows] == [
        ("1.0", "2.11.0+cpu"),
        ("1.1", "2.11.0+cpu"),
        ("1.2", "2.13.0+cpu"),
    ]
    assert all(r.stack.torch_build == "pinned" for r in m.runs)
    assert not (path.parent / "report").exists()
    capsys.readouterr()
    assert main(["report", "--matrix", str(path), "--out", str(tmp_path / "r")]) == 0
    printed = capsys.readouterr().out
    assert "1.2" in printed and "regression" in printed and "torch 2.13.0+cpu" in printed
    html = (tmp_path / "r" / "report.html").read_text()
    for fam in ("mal", "acceptance", "positions", "tokens", "greedy", "speed", "latency"):
        assert f'id="matrix-{fam}"' in html, fam
    assert 'id="matrix-mal-chart-1"' in html and 'id="matrix-speed-chart-1"' in html
    md = (tmp_path / "r" / "report.md").read_text()
    assert "2.11.0+cpu (pinned)" in md and "2.13.0+cpu (pinned)" in md
    assert "FAIL -20.0%" in md  # the step, against the reference and the previous release
    mal = family_frame(m, "mal")
    torch = mal[mal["metric"] == "torch"].iloc[0]
    assert [torch[r] for r in ("1.0", "1.1", "1.2")] == [
        "2.11.0+cpu (pinned)",
        "2.11.0+cpu (pinned)",
        "2.13.0+cpu (pinned)",
    ]
    assert dependency_steps(m) == [(2, "torch 2.11.0+cpu→2.13.0+cpu")]
    assert main(["report"]) == 2
    assert "give RESULTS_DIR... or --matrix" in capsys.readouterr().err


def test_an_uninstallable_reference_ends_the_matrix_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runner = FixtureRunner({}, broken={"1.0": "yanked: broken build"})
    rc, path = matrix(tmp_path, runner, "--versions", "1.1,1.2")
    assert rc == 2 and runner.pytest_runs == []
    assert "the reference calibration 1.0 is not installable" in capsys.readouterr().err
    m = load_matrix(path)
    assert {r.release: r.status for r in m.rows} == {
        "1.0": "not installable",
        "1.1": "not run",
        "1.2": "not run",
    }
    assert "yanked: broken build" in m.rows[0].reason


@pytest.mark.usefixtures("in_repo_root")
def test_the_specperf_command_runs_a_matrix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Through `specperf watch matrix` itself (the engine needs no environment here, so the
    package and setting are named): R C R, exit 1 for the planted step, the summary printed."""
    suite = write_suite(tmp_path)
    vfile = tmp_path / "versions.json"
    vfile.write_text(json.dumps({"calibration": ["1.0", "1.2", "1.3"]}))
    out = tmp_path / "m"
    common = ["--suite", str(suite), "--package", "calibration"]
    common += ["--version-setting", "calib_version", "--versions-file", str(vfile)]
    common += ["--results-dir", str(out)]
    assert main(["watch", "matrix", *common, "--from", "1.3", "--to", "1.3"]) == 2
    assert "name one with --engine" in capsys.readouterr().err  # no env: engine to default to
    assert main(["watch", "matrix", *common, "--engine", "calib", "--from", "1.4"]) == 2
    assert "give the releases: --from A --to B" in capsys.readouterr().err
    argv = ["watch", "matrix", *common, "--engine", "calib", "--from", "1.3", "--to", "1.3"]
    rc = main([*argv, "--", *PYTEST_ARGS, "-k", "ngram"])
    printed = capsys.readouterr()
    assert rc == 1, printed.err
    assert "REGRESSION in calibration 1.3" in printed.err
    assert "release matrix calibration" in printed.out and "regression" in printed.out
    m = load_matrix(out / MATRIX_FILE)
    assert [(r.release, r.role) for r in m.runs] == [
        ("1.0", "reference"),
        ("1.3", "candidate"),
        ("1.0", "reference"),
    ]
    assert (out / "report" / "report.html").is_file()


def test_a_slower_release_is_judged_against_the_interleaved_reference_runs(
    tmp_path: Path,
) -> None:
    """Speed: the fixture item 10 % slower from 1.2 on. Three reference runs (R C R C R) give
    the three starts a gate needs: 1.2 fails against them; against the previous release the
    change is shown, not judged; MAL is the same as the reference's."""
    runner = FixtureRunner({}, speed={"1.2": 0.9})
    rc, path = matrix(tmp_path, runner, "--versions", "1.1,1.2", "--no-report")
    assert rc == 1
    m = load_matrix(path)
    tok = cell(m, "1.2", KEY, "output_throughput_tok_s")
    assert tok.vs_reference.status == "fail" and tok.vs_reference.delta == pytest.approx(-0.1)
    assert "vs 3 baseline starts" in tok.vs_reference.reason, tok.vs_reference.reason
    assert tok.vs_previous.status == "info" and tok.vs_previous.delta == pytest.approx(-0.1)
    assert cell(m, "1.1", KEY, "output_throughput_tok_s").vs_reference.status == "pass"
    assert cell(m, "1.2", KEY, MAL).vs_reference.status == "same"
    assert {r.release: r.status for r in m.rows}["1.1"] == "pass"


def test_resume_can_ask_again_for_releases_that_did_not_install(tmp_path: Path) -> None:
    args = ("--versions", "1.1,1.2", "--no-report")
    rc, path = matrix(tmp_path, FixtureRunner({}, broken={"1.2": "resolver conflict"}), *args)
    reason = "calibration==1.2: resolver conflict"  # specperf env create's line
    assert rc == 0 and load_matrix(path).not_installable == {"1.2": reason}
    with pytest.raises(ConfigError, match="--retry-uninstallable goes with --resume"):
        matrix(tmp_path, FixtureRunner({}), *args, "--retry-uninstallable")
    again = FixtureRunner({})
    rc, path = matrix(tmp_path, again, *args, "--resume")
    assert again.pytest_runs == [] and load_matrix(path).row("1.2").status == "not installable"
    rc, path = matrix(tmp_path, again, *args, "--resume", "--retry-uninstallable")
    m = load_matrix(path)
    assert rc == 0 and m.not_installable == {} and m.row("1.2").status == "pass"
    assert len(again.pytest_runs) == 1  # the 1.2 slot only


ALL_METHODS = ("native", "eagle3", "dflash", "ngram")


def test_a_method_a_release_lacks_is_shown_not_evaluated(tmp_path: Path) -> None:
    """1.1's engine refuses dflash (its items are skipped, the refusal logged); 1.2 refuses
    every method. 1.1's dflash cells say NOT EVALUATED with the engine's reason and the rest
    is judged, so its row is "incomplete" (not a plain pass) naming the unmeasured items; 1.2
    is a row "not evaluated", not a failure."""
    refuse = {
        "1.1": {"dflash": "vLLM 1.1 has no DFlash"},
        "1.2": dict.fromkeys(ALL_METHODS, "vLLM 1.2 speculative decoding off on CPU"),
    }
    rc, path = matrix(tmp_path, FixtureRunner({}, refuse=refuse), "--versions", "1.1,1.2")
    m = load_matrix(path)
    rows = {r.release: r for r in m.rows}
    assert rc == 0, [(r.release, r.status, r.reason) for r in m.rows]
    assert rows["1.1"].status == "incomplete"
    assert rows["1.1"].reason.startswith("not evaluated: ") and "/dflash/" in rows["1.1"].reason
    assert rows["1.2"].status == "not evaluated"
    assert rows["1.2"].reason.startswith("NOT EVALUATED: native: vLLM 1.2 speculative")
    dflash = cell(m, "1.1", "qwen3-8b/vllm/dflash/mt-bench/c1/greedy", MAL)
    assert dflash.vs_reference.status == "not_evaluated"
    assert dflash.vs_reference.reason == "NOT EVALUATED: vLLM 1.1 has no DFlash"
    assert cell(m, "1.1", KEY, MAL).vs_reference.status == "same"
    md = (path.parent / "report" / "report.md").read_text()
    assert "not evaluated" in md and "n/e" in md
