"""The CI workflows: actionlint (with shellcheck on the run: scripts) finds nothing, the
workflows do what docs/nightly.md says, and every specperf/pytest flag they pass exists."""

from __future__ import annotations

import argparse
import importlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from specperf.cli import commands

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = ROOT / ".github" / "workflows"
FILES = ("nightly-gpu.yml", "release-watch.yml", "pr-cpu.yml")
BIN = Path(sys.executable).parent


def tool(name: str) -> str | None:
    """A linter from this environment (dev extra) or, failing that, from PATH."""
    here = BIN / name
    return str(here) if here.exists() else shutil.which(name)


def actionlint(*files: Path) -> subprocess.CompletedProcess[str]:
    exe = tool("actionlint")
    if exe is None:
        pytest.fail("actionlint is not installed: pip install -e '.[dev]' (dev extra)")
    shellcheck = tool("shellcheck")
    if shellcheck is None:
        pytest.fail("shellcheck is not installed: pip install -e '.[dev]' (dev extra)")
    cmd = [exe, "-no-color", "-oneline", "-shellcheck", shellcheck, "-pyflakes", ""]
    return subprocess.run(
        [*cmd, *map(str, files)], capture_output=True, text=True, cwd=ROOT, check=False
    )


def load(name: str) -> dict[str, Any]:
    data = yaml.safe_load((WORKFLOWS / name).read_text())
    data["on"] = data.pop(True, data.get("on"))  # YAML 1.1 reads the key `on` as true
    return data


def scripts(wf: dict[str, Any]) -> list[str]:
    return [s["run"] for job in wf["jobs"].values() for s in job["steps"] if "run" in s]


def test_all_workflows_present() -> None:
    assert sorted(p.name for p in WORKFLOWS.glob("*.yml")) == sorted(FILES)


def test_actionlint_clean() -> None:
    out = actionlint(*(WORKFLOWS / f for f in FILES))
    assert out.returncode == 0 and not out.stdout.strip(), out.stdout + out.stderr


def test_actionlint_catches_mistakes(tmp_path: Path) -> None:
    """The lint can fail: an unknown context, a bad needs and an unquoted variable."""
    bad = tmp_path / ".github" / "workflows" / "bad.yml"
    bad.parent.mkdir(parents=True)
    text = (WORKFLOWS / "nightly-gpu.yml").read_text()
    text = text.replace("needs: [plan, perf]", "needs: [plan, perff]")
    text = text.replace("${{ matrix.shard }}", "${{ matrixx.shard }}", 1)
    text = text.replace('echo "count=$n" >> "$GITHUB_OUTPUT"', "echo count=$n >> $GITHUB_OUTPUT")
    bad.write_text(text)
    out = actionlint(bad).stdout
    assert "perff" in out and "matrixx" in out and "SC2086" in out


def test_nightly_shape() -> None:
    wf = load("nightly-gpu.yml")
    assert wf["on"]["schedule"] and "workflow_dispatch" in wf["on"]
    inputs = wf["on"]["workflow_dispatch"]["inputs"]
    assert {"suites", "settings", "filters", "shards", "runner_labels"} <= set(inputs)
    jobs = wf["jobs"]
    assert jobs["perf"]["needs"] == "plan" and jobs["perf"]["strategy"]["fail-fast"] is False
    assert "matrix.labels" in jobs["perf"]["runs-on"]  # labels come from the plan
    perf = "\n".join(s["run"] for s in jobs["perf"]["steps"] if "run" in s)
    assert "specperf watch envs" in perf and "--create" in perf  # specperf env create
    # the perf path only: collecting tests/unit would need the dev extra on GPU hosts
    assert re.search(r'pytest -m perf tests/perf -n "\$GPUS"', perf)
    assert "--strict-baselines" in perf and '--shard "$SHARD"' in perf
    assert "GITHUB_STEP_SUMMARY" in perf
    uploads = [s for s in jobs["perf"]["steps"] if "upload-artifact" in s.get("uses", "")]
    assert uploads and all(s["if"].startswith("always()") for s in uploads)
    merge = jobs["merge"]
    assert set(merge["needs"]) == {"plan", "perf"} and merge["if"].startswith("always()")
    m = "\n".join(s["run"] for s in merge["steps"] if "run" in s)
    for needed in (
        "specperf merge",
        "specperf verdict",
        "--strict-baselines",
        "specperf report",
        "specperf history check",
        "specperf history add",
        "GITHUB_STEP_SUMMARY",
        "merge-baselines",
        "gh pr create",
    ):
        assert needed in m, needed
    assert merge["steps"][-1]["if"] == "always()"  # the final gate always runs
    assert wf["permissions"] == {"contents": "read"}  # write only where history/PR need it


def test_release_watch_and_pr_shape() -> None:
    rw = load("release-watch.yml")
    assert rw["on"]["schedule"] and "workflow_dispatch" in rw["on"]
    run = "\n".join(scripts(rw))
    assert "specperf watch run" in run and "specperf watch latest" in run
    assert '--pinned-runs "$PINNED_RUNS"' in run  # speed judged against passes (judging.py)
    assert "'3'" in rw["env"]["PINNED_RUNS"]
    assert "-- tests/perf -n" in run
    pr = load("pr-cpu.yml")
    assert "pull_request" in pr["on"]
    assert "bash .ci/run" in scripts(pr)
    assert (ROOT / ".ci" / "run").exists()


# --------------------------------------------------------------------------- flags exist
def _logical_lines(script: str) -> list[str]:
    return script.replace("\\\n", " ").splitlines()


def _arrays(script: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in _logical_lines(script):
        for name, body in re.findall(r"\b(\w+)\+?=\(([^)]*)\)", line):
            out.setdefault(name, []).extend(body.split())
    return out


def _flags(tokens: list[str]) -> set[str]:
    return {t.split("=")[0].strip("\"'") for t in tokens if t.startswith("--")}


def invocations() -> list[tuple[str, list[str], set[str]]]:
    """(program, leading words, flags) for every specperf / pytest / shard call."""
    found = []
    for name in FILES:
        for script in scripts(load(name)):
            arrays = _arrays(script)
            for line in _logical_lines(script):
                for arr, vals in arrays.items():
                    line = line.replace(f'"${{{arr}[@]}}"', " ".join(vals))
                pytest_part = ""
                if " -- " in line:
                    line, pytest_part = line.split(" -- ", 1)
                m = re.search(r"\bspecperf ([a-z-]+)(?: ([a-z-]+))?", line)
                if m:
                    found.append(("specperf", [m.group(1), m.group(2) or ""], _flags(line.split())))
                if "-m specperf.shard" in line:
                    sub = line.split("-m specperf.shard", 1)[1].split()[0]
                    found.append(("shard", [sub], _flags(line.split())))
                if re.search(r"(^|\s)pytest\s", line):
                    found.append(("pytest", [], _flags(line.split())))
                if pytest_part:
                    found.append(("pytest", [], _flags(pytest_part.split())))
    return found


def _parser_flags(module: str, words: list[str]) -> set[str]:
    p = argparse.ArgumentParser()
    importlib.import_module(module).add_arguments(p)
    for w in words:
        subs = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs or w not in subs[0].choices:
            break
        p = subs[0].choices[w]
    return {s for a in p._actions for s in a.option_strings}


def test_specperf_commands_and_flags_exist() -> None:
    calls = [c for c in invocations() if c[0] == "specperf"]
    assert {c[1][0] for c in calls} >= {"watch", "merge", "verdict", "report", "history"}
    known_commands = commands()
    for _, words, flags in calls:
        assert words[0] in known_commands, f"specperf {words[0]}: not a subcommand"
        known = _parser_flags(known_commands[words[0]].module, words[1:])
        assert flags <= known, f"specperf {' '.join(words)}: unknown {sorted(flags - known)}"


def test_shard_module_flags_exist() -> None:
    for _, (sub,), flags in [c for c in invocations() if c[0] == "shard"]:
        out = subprocess.run(
            [sys.executable, "-m", "specperf.shard", sub, "--help"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert all(f in out for f in flags), (sub, flags)


def test_pytest_flags_exist() -> None:
    """Every flag the workflows give pytest is registered (by the specperf plugin or xdist)."""
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--help"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTEST_ADDOPTS": ""},
        check=False,
    ).stdout
    known = set(re.findall(r"(--[a-z][a-z0-9-]*)", out))
    used = set().union(*(f for p, _, f in invocations() if p == "pytest"))
    assert {"--strict-baselines", "--shard", "--suite", "--results-dir"} <= used
    assert used <= known, f"pytest does not know {sorted(used - known)}"
