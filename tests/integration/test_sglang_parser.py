"""specperf's SGLang command lines and facts, checked against SGLang itself.

Needs the parser envs (``specperf env create sglang==0.5.23`` / ``sglang==0.5.2``: the real
wheels, CPU torch; see specperf.engines.sglang.env_recipe); each version's tests skip with the
command to run when its env is missing. No SGLang server runs here (it cannot on these CPUs):

* every command line the engine builds, for every method the version supports, is parsed by
  SGLang's own ``prepare_server_args`` (0.5.2 also resolves at parse time) and the parsed values
  are compared with what was asked;
* the per-version method table agrees with SGLang's own parser / SpeculativeAlgorithm enum;
* metric names, endpoints and response fields used by the client — and emitted by the stand-in
  (tests/sglang_standin) — are found in the installed package's source.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
from pathlib import Path

import pytest
from packaging.version import Version

from specperf.engines import sglang as sg
from specperf.engines.base import EngineSpec
from specperf.errors import ConfigError
from tests.sglang_standin.server import PROFILES

pytestmark = pytest.mark.integration
VERSIONS = ("0.5.23", "0.5.2")


@pytest.fixture(scope="module", params=VERSIONS)
def env(request: pytest.FixtureRequest) -> tuple[str, Version]:
    from specperf import engine_envs

    version = request.param
    try:
        python = str(engine_envs.python_path(f"sglang=={version}"))
    except ConfigError as exc:
        pytest.skip(f"SGLang {version} parser env missing: {exc}")
    return python, Version(version)


@pytest.fixture(scope="module")
def tiny() -> dict[str, str]:
    """Real local model dirs: 0.5.2 reads the model config while parsing."""
    from specperf.testkit import models as testmodels

    model = testmodels.ensure_tiny_model()
    return {
        "model": str(model),
        "eagle3": str(testmodels.tiny_eagle3_path(model)),
        "dflash": str(testmodels.ensure_tiny_dflash()),
    }


def method_specs(tiny: dict[str, str]) -> dict[str, EngineSpec]:
    base = {
        "kind": "sglang",
        "label": "sglang-parse",
        "model": tiny["model"],
        "served_model_name": "tiny",
        "max_model_len": 2048,
        "max_num_seqs": 4,
        "gpu_memory_utilization": 0.8,  # 0.5.2 sizes memory from the GPU otherwise
        "options": (("device", "cpu"),),  # 0.5.2 picks the device while parsing
    }
    return {
        "native": EngineSpec(**base),
        "eagle3": EngineSpec(
            **base, method="eagle3", num_speculative_tokens=3, draft_model=tiny["eagle3"]
        ),
        "eagle": EngineSpec(
            **base,
            method="eagle",
            num_speculative_tokens=3,
            topk=2,
            num_draft_tokens=5,
            draft_model=tiny["eagle3"],
        ),
        "mtp": EngineSpec(**base, method="mtp", num_speculative_tokens=1),
        "draft_model": EngineSpec(
            **base, method="draft_model", num_speculative_tokens=4, draft_model=tiny["model"]
        ),
        "ngram": EngineSpec(**base, method="ngram", num_speculative_tokens=3),
        "dflash": EngineSpec(
            **base, method="dflash", num_speculative_tokens=7, draft_model=tiny["dflash"]
        ),
    }


def test_every_command_line_is_accepted_by_sglangs_parser_with_the_intended_values(
    env: tuple[str, Version], tiny: dict[str, str]
) -> None:
    python, version = env
    specs = method_specs(tiny)
    runnable = {}
    for name, spec in specs.items():
        try:
            sg.check_supported(spec, version)
        except ConfigError:
            continue
        runnable[name] = spec
    assert "native" in runnable and "eagle3" in runnable
    port = 31000
    argvs = [sg.server_args(spec, "127.0.0.1", port) for spec in runnable.values()]
    out = sg.parse_with_sglang(python, argvs)
    assert out["version"] == str(version)
    for (name, spec), res in zip(runnable.items(), out["results"], strict=True):
        assert "error" not in res, f"{name}: SGLang {version} refused {res['argv']}: {res['error']}"
        got = res["parsed"]
        assert got["model_path"] == spec.model
        assert (got["host"], got["port"]) == ("127.0.0.1", port)
        assert got["served_model_name"] == "tiny"
        assert got["enable_metrics"] is True
        assert got["context_length"] == 2048
        assert got["max_running_requests"] == 4
        assert got["mem_fraction_static"] == pytest.approx(0.8)
        topo = sg.topology(spec)
        if topo is None:
            assert not got["speculative_algorithm"], name
            continue
        expected_algo = (
            "EAGLE" if topo.algorithm == "NEXTN" and version < Version("0.5.3") else None
        )
        assert got["speculative_algorithm"] in (topo.algorithm, expected_algo), name
        assert got["speculative_num_steps"] == topo.num_steps, name
        assert got["speculative_eagle_topk"] == topo.topk, name
        assert got["speculative_num_draft_tokens"] == topo.num_draft_tokens, name
        assert got.get("speculative_draft_model_path") == spec.draft_model, name
        if "known_algorithm" in res:  # the enum behind the parser knows it
            assert res["known_algorithm"] in (topo.algorithm, "EAGLE"), name
        if topo.algorithm == "NGRAM":
            assert got["speculative_ngram_max_bfs_breadth"] == topo.topk


def test_the_method_table_agrees_with_sglang(env: tuple[str, Version]) -> None:
    """specperf says supported ⇔ SGLang's parser / enum knows the algorithm."""
    python, version = env
    argvs = [
        ["--model-path", "/nonexistent", "--speculative-algorithm", algo, "--device", "cpu"]
        for algo in sg.ALGORITHM_SINCE
    ]
    if version >= Version("0.5.3"):
        out = sg.parse_with_sglang(python, argvs)
        known = {
            algo: res.get("known_algorithm") is not None
            for algo, res in zip(sg.ALGORITHM_SINCE, out["results"], strict=True)
        }
    else:  # resolving parsers: ask the argparse choices directly
        code = (
            "import argparse, json\n"
            "from sglang.srt.server_args import ServerArgs\n"
            "p = argparse.ArgumentParser(); ServerArgs.add_cli_args(p)\n"
            "a = [x for x in p._actions if '--speculative-algorithm' in x.option_strings][0]\n"
            "print(json.dumps(list(a.choices)))\n"
        )
        choices = json.loads(
            subprocess.run(
                [python, "-c", code], capture_output=True, text=True, timeout=300, check=True
            )
            .stdout.strip()
            .splitlines()[-1]
        )
        known = {algo: algo in choices for algo in sg.ALGORITHM_SINCE}
    ours = {algo: version >= Version(since) for algo, since in sg.ALGORITHM_SINCE.items()}
    assert ours == known


def _package_dir(python: str) -> Path:
    code = (
        "import importlib.util\n"
        "print(importlib.util.find_spec('sglang').submodule_search_locations[0])\n"
    )
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True)
    return Path(out.stdout.strip())


def _read(root: Path, *candidates: str) -> str:
    for rel in candidates:
        if (root / rel).exists():
            return (root / rel).read_text()
    raise AssertionError(f"none of {candidates} under {root}")


def test_metric_names_endpoints_and_fields_are_in_the_installed_source(
    env: tuple[str, Version],
) -> None:
    python, version = env
    root = _package_dir(python)
    profile = PROFILES[str(version)]
    metrics = _read(root, "srt/observability/metrics_collector.py", "srt/metrics/collector.py")
    for name in (sg._GEN, sg._PROMPT, sg._REQUESTS, sg._CACHED):
        assert f'name="{name}"' in metrics, name
    assert (f'name="{sg._VERIFY}"' in metrics) is profile.verify_counter
    assert profile.verify_counter is (version >= sg.VERIFY_COUNTER_SINCE)

    http = _read(root, "srt/entrypoints/http_server.py")
    for path in (sg.HEALTH_PATH, "/get_server_info", "/flush_cache", "/v1/models", "/metrics"):
        if path == "/metrics":
            continue  # mounted by the metrics middleware, not a route decorator
        assert f'"{path}"' in http, path
    assert ('"/server_info"' in http) is profile.server_info
    assert "ServerStatus.Starting" in http  # 503 while starting: readiness waits
    assert "HTTPStatus.BAD_REQUEST" in http  # flush refused while requests run

    protocol = _read(root, "srt/entrypoints/openai/protocol.py")
    assert ("return_spec_tokens_details" in protocol) is profile.spec_details
    assert profile.spec_details is (version >= sg.SPEC_DETAILS_SINCE)
    if profile.spec_details:
        for field in (
            "spec_verify_ct",
            "spec_num_correct_drafts",
            "spec_num_proposed_drafts",
            "spec_correct_drafts_histogram",
        ):
            assert f"{field}:" in protocol, field
        chat = _read(root, "srt/entrypoints/openai/serving_chat.py")
        assert "choices=[],  # sglext is at response level" in chat

    tm = _read(root, "srt/managers/tokenizer_manager.py")
    assert 'meta_info["spec_verify_ct"]' in tm
    if profile.verify_counter:
        # proposed drafts = verify × (num_draft_tokens − 1): SGLang's rate denominator
        assert "speculative_num_draft_tokens - 1" in tm
        assert "spec_verify_ct=spec_verify_ct" in tm  # fed to the Prometheus counter
    # one verify count per verify step, none for the prefill token
    sources = "".join(
        p.read_text(errors="replace")
        for p in root.glob("srt/**/*.py")
        if "spec_verify_ct += 1" in p.read_text(errors="replace")
    )
    assert "spec_verify_ct += 1" in sources


def test_launcher_matches_the_installed_entry_points(env: tuple[str, Version]) -> None:
    python, version = env
    dist_info = next(_package_dir(python).parent.glob(f"sglang-{version}.dist-info"))
    eps = (
        (dist_info / "entry_points.txt").read_text()
        if (dist_info / "entry_points.txt").exists()
        else ""
    )
    has_cli = "sglang = sglang.cli.main:main" in eps
    assert has_cli is (version >= sg.SERVE_CLI_SINCE)
    spec = EngineSpec(kind="sglang", label="x", model="/m", python=python)
    cmd = sg.launcher(spec, version)
    assert cmd[-1] == ("serve" if has_cli else "sglang.launch_server")
    assert importlib.util.find_spec("sglang") is None  # the suite never imports sglang


def test_the_parser_check_can_fail(env: tuple[str, Version]) -> None:
    """A misspelt flag and a bad value are refused by SGLang's parser: the check is not vacuous."""
    python, _ = env
    out = sg.parse_with_sglang(
        python,
        [
            ["--model-path", "/m", "--device", "cpu", "--speculative-num-stepz", "3"],
            ["--model-path", "/m", "--device", "cpu", "--speculative-num-steps", "three"],
        ],
    )
    assert [("argparse exit 2" in r.get("error", "")) for r in out["results"]] == [True, True]
