"""scripts/setup.sh is the one setup: the README's two quick-start commands and .ci/run call it,
the CI test command line is written once (in it), and "no tests ran" fails."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "setup.sh"


def test_ci_runs_the_readmes_second_command() -> None:
    ci = (REPO / ".ci" / "run").read_text()
    assert re.search(r'^exec "\$\(dirname "\$0"\)/\.\./scripts/setup\.sh" test "\$@"$', ci, re.M)
    readme = (REPO / "README.md").read_text()
    quick = readme.split("## Quick start on a fresh machine", 1)[1].split("```bash", 1)[1]
    commands = [line.split("#")[0].strip() for line in quick.split("```", 1)[0].splitlines()]
    assert [c for c in commands if c] == ["scripts/setup.sh perf", "scripts/setup.sh test"]


def test_the_ci_test_command_is_written_once() -> None:
    files = [SCRIPT, REPO / ".ci" / "run", REPO / "README.md", REPO / "tox.ini"]
    files += list((REPO / ".github" / "workflows").glob("*.yml"))
    for paths in ("tests/unit tests/browser tests/integration", "tests/integration tests/perf"):
        assert [f for f in files if paths in f.read_text()] == [SCRIPT], paths
    for name in ("CI_PYTEST_PARALLEL", "CI_PYTEST_SERIAL"):
        assert len(re.findall(rf"^{name}=\(", SCRIPT.read_text(), re.M)) == 1, name


# An engine test that measures an item (specperf.measure, a suite run, the perf fixture) or runs
# the release watch or matrix, whose verdicts compare speeds, judges speed unless it names no
# speed figure and is listed here with what it checks instead.
MEASURES = re.compile(r"\bmeasure\(|\bSuiteRun\b|\bspecperf_item\b|\"watch\"|\"matrix\"")
SPEED = re.compile(r"throughput|tok_s|ttft|tpot|delivery", re.I)
MEASURES_NO_SPEED = {
    "test_transformers_engine.py": "measure() end to end: MAL in the summary = the counters'",
}


def test_every_engine_test_that_judges_speed_runs_alone() -> None:
    """CI's first run puts the engine tests beside the unit tests in 4 workers; a test whose
    verdict rests on measured speed is marked ``timing`` and runs in the second, one-at-a-time
    run instead."""
    modules = sorted((REPO / "tests" / "integration").glob("test_*.py"))
    modules += sorted((REPO / "tests" / "perf").glob("test_*.py"))
    measuring = {m.name: m.read_text() for m in modules if MEASURES.search(m.read_text())}
    assert len(measuring) >= 5, sorted(measuring)  # the perf matrix, the watch, placement...
    unmarked = [n for n, text in measuring.items() if "pytest.mark.timing" not in text]
    assert sorted(unmarked) == sorted(MEASURES_NO_SPEED)
    for name in MEASURES_NO_SPEED:
        assert not SPEED.search(measuring[name]), f"{name} names a speed figure: mark it timing"
    text = SCRIPT.read_text()
    assert re.search(r'^CI_PYTEST_PARALLEL=\(.* -m "not timing" ', text, re.M)
    assert re.search(r"^CI_PYTEST_SERIAL=\(.* -m timing ", text, re.M)


@pytest.mark.parametrize(
    ("first", "second", "want"), [(1, 0, 1), (0, 3, 3), (4, 3, 4), (0, 0, 0)]
)
def test_both_ci_runs_run_and_the_first_failure_is_the_status(
    tmp_path: Path, first: int, second: int, want: int
) -> None:
    """The ``test`` command runs both CI pytest runs, whatever the first one's outcome."""
    text = SCRIPT.read_text()
    body = re.search(r"^run_pytest\(\) \{.*?^\}", text, re.M | re.S)
    runs = re.search(r"^    rc=0 rc2=0\n.*?^    exit .*?$", text, re.M | re.S)
    assert body is not None and runs is not None
    stub = "START=0\nstep() { :; }\nshown() { :; }\nreport_disk() { :; }\n" + body.group(0)
    stub += f"\nCI_PYTEST_PARALLEL=(bash -c 'exit {first}')"
    stub += f"\nCI_PYTEST_SERIAL=(bash -c 'echo second; exit {second}')\n"
    script = tmp_path / "t.sh"
    script.write_text(f"set -euo pipefail\n{stub}\n{runs.group(0)}\n")
    r = subprocess.run(["bash", str(script)], capture_output=True, text=True, check=False)
    assert r.returncode == want and "second" in r.stdout


def test_no_tests_ran_fails(tmp_path: Path) -> None:
    """run_pytest (the function both commands end with) passes pytest's exit 5 on."""
    body = re.search(r"^run_pytest\(\) \{.*?^\}", SCRIPT.read_text(), re.M | re.S)
    assert body is not None
    stub = "START=0\nstep() { :; }\nshown() { :; }\nreport_disk() { :; }\n" + body.group(0)
    script = tmp_path / "t.sh"
    script.write_text(f"set -euo pipefail\n{stub}\nrun_pytest bash -c 'exit 5'\necho not-reached\n")
    r = subprocess.run(["bash", str(script)], capture_output=True, text=True, check=False)
    assert r.returncode == 5 and "not-reached" not in r.stdout
    assert "no tests ran (pytest exit 5): failing" in r.stdout


def _background_steps() -> str:
    """setup.sh's background-step functions (bg_start, bg_wait, stop_background, die, step)."""
    text = SCRIPT.read_text()
    start = text.index("declare -A BG_PID")
    end = text.index("trap stop_background EXIT")
    die = re.search(r"^die\(\) \{.*?\}$", text, re.M)
    assert die is not None
    return f"START=0\nstep() {{ echo \"== $*\"; }}\n{die.group(0)}\n{text[start:end]}"


@pytest.mark.parametrize("fails", [False, True])
def test_a_background_step_shows_its_output_and_a_failure_stops_setup(
    tmp_path: Path, fails: bool
) -> None:
    """Setup steps run beside each other; the one that failed stops setup with its name, its
    own output shown, and the step waited for after it never runs."""
    body = "echo building; sleep 0.2; " + ("echo broken; exit 3" if fails else "echo built")
    script = tmp_path / "t.sh"
    script.write_text(
        f"set -euo pipefail\n{_background_steps()}\n"
        f"bg_start 'the build' bash -c '{body}'\n"
        "bg_start 'the other' bash -c 'echo other done'\n"
        "echo foreground\n"
        "bg_wait 'the build'\n"
        "bg_wait 'the other'\n"
        "echo all done\n"
    )
    r = subprocess.run(["bash", str(script)], capture_output=True, text=True, check=False)
    assert "   building" in r.stdout and "foreground" in r.stdout
    if fails:
        assert r.returncode == 2 and "   broken" in r.stdout
        assert "the build failed (exit 3; its output is above)" in r.stderr
        assert "all done" not in r.stdout and "other done" not in r.stdout
    else:
        assert r.returncode == 0, r.stderr
        assert "   built" in r.stdout and "   other done" in r.stdout and "all done" in r.stdout


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck not installed")
def test_scripts_pass_shellcheck() -> None:
    r = subprocess.run(
        ["shellcheck", str(SCRIPT), str(REPO / ".ci" / "run")], capture_output=True, text=True
    )
    assert r.returncode == 0, r.stdout


def test_no_function_shadows_a_command_it_looks_for() -> None:
    """``command -v chromium`` inside a function named chromium finds the function itself."""
    text = SCRIPT.read_text()
    functions = set(re.findall(r"^([a-z_]+)\(\) \{", text, re.M))
    looked_up = set(re.findall(r"command -v ([a-z0-9_-]+)", text))
    assert functions and looked_up and not functions & looked_up
