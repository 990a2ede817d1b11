"""Input files are checked before any engine starts (specperf.preflight): one line per problem,
each once, then the results path; a corrupt baseline stops the run in seconds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specperf.config import load_suite
from specperf.preflight import PREFLIGHT_FILE, check_inputs, failure_text
from tests.unit.plugin.test_plugin import SUITE, perf  # noqa: F401  (the pytester project fixture)

pytest_plugins = ["pytester"]

CORRUPT = '{"schema": 1, "entries": {"m/cal/native/mt-bench/c1/greedy": 3}}'


def items_of(tmp_path: Path, text: str) -> list:
    f = tmp_path / "suite.toml"
    f.write_text(text)
    return load_suite(str(f), {}).items()


def test_each_bad_file_is_one_line_once(tmp_path: Path) -> None:
    bad = tmp_path / "bl" / "cal.json"
    bad.parent.mkdir()
    bad.write_text("{ not json")
    suite = SUITE + '\n[datasets.own]\npath = "missing.jsonl"\n'
    items = items_of(tmp_path, suite)
    errors = check_inputs(items, [bad, bad, tmp_path / "bl" / "absent.json"])
    assert len(errors) == 2, errors  # the same file twice is one error; an absent file is none
    assert errors[0].startswith(f"{bad}: not valid JSON")
    assert "missing.jsonl" in errors[1] and "\n" not in errors[1]


def test_good_inputs_give_no_errors(tmp_path: Path) -> None:
    assert check_inputs(items_of(tmp_path, SUITE), []) == []


def test_failure_text_ends_with_the_results_path_and_keeps_the_errors(tmp_path: Path) -> None:
    text = failure_text(["a.json: entries.x: expected an object"], tmp_path / "r")
    lines = text.splitlines()
    assert lines[0] == "specperf: 1 input error, no engine started:"
    assert lines[1].strip() == "a.json: entries.x: expected an object"
    assert lines[-1] == f"results: {tmp_path / 'r'}"
    saved = json.loads((tmp_path / "r" / PREFLIGHT_FILE).read_text())
    assert saved == {"errors": ["a.json: entries.x: expected an object"], "engines_started": 0}


def test_corrupt_baseline_fails_before_any_engine_starts(perf: pytest.Pytester) -> None:  # noqa: F811
    from specperf.plugin import detect_hardware_profile
    from specperf.pool import assign_devices

    # the file this run reads: baselines/<suite's folder>/<this machine's profile>.json
    profile = detect_hardware_profile(assign_devices("master", 1, gpus=[]))
    bad = perf.path / "baselines" / "cal" / f"{profile}.json"
    bad.parent.mkdir(parents=True)
    bad.write_text(CORRUPT)
    results = perf.path / "results-run"
    r = perf.runpytest_subprocess(
        "-m", "perf", "--suite", "suite.toml", "--results-dir", str(results), timeout=120
    )
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    out = r.outlines + r.errlines
    problem = [line for line in out if bad.name in line]
    assert len(problem) == 1, out  # one line, printed once (no chained traceback)
    assert "entries.m/cal/native/mt-bench/c1/greedy" in problem[0]
    assert out[-1] == f"results: {results}" or f"results: {results}" in out
    assert not (results / "engine-starts.jsonl").exists()  # no engine was started
    assert not (results / "engines").exists()


def test_suite_errors_also_end_with_the_results_path(perf: pytest.Pytester) -> None:  # noqa: F811
    perf.makefile(".toml", broken="[suite]\nname = 3\n")
    r = perf.runpytest_subprocess("-m", "perf", "--suite", "broken.toml", "--results-dir", "r")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    r.stderr.fnmatch_lines(
        ["*broken.toml: suite.name: expected a string, got int 3*", "results: *"]
    )
    assert sum("broken.toml" in line for line in r.errlines) == 1
