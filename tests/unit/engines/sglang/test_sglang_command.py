"""SGLang command building, topology mapping, version gates and the env recipe (no server).

The flags and the version gates are checked against SGLang's own parser in
tests/integration/test_sglang_parser.py; here: what specperf asks for, and the fail-fast errors.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from packaging.version import Version

from specperf.engines import get_engine_class
from specperf.engines import sglang as sg
from specperf.engines.base import Devices, EngineSpec
from specperf.errors import ConfigError

DRAFT = "/models/draft"


def spec(method: str = "native", **kw: object) -> EngineSpec:
    base: dict[str, object] = {"kind": "sglang", "label": "sglang-test", "model": "/models/target"}
    base.update(kw)
    return EngineSpec(method=method, **base)  # type: ignore[arg-type]


def flag(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


def test_registry_knows_sglang() -> None:
    assert get_engine_class("sglang") is sg.SglangEngine


def test_native_command_pins_host_port_metrics_and_no_speculation() -> None:
    s = spec(dtype="bfloat16", max_model_len=8192, max_num_seqs=8, gpu_memory_utilization=0.85)
    cmd = sg.build_command(s, 31234, version=Version("0.5.2"))
    assert cmd[:3] == [sys.executable, "-m", "sglang.launch_server"]
    args = cmd[3:]
    assert flag(args, "--model-path") == "/models/target"
    assert flag(args, "--host") == "127.0.0.1"
    assert flag(args, "--port") == "31234"
    assert flag(args, "--served-model-name") == "/models/target"
    assert flag(args, "--context-length") == "8192"
    assert flag(args, "--max-running-requests") == "8"
    assert flag(args, "--mem-fraction-static") == "0.85"
    assert flag(args, "--tp-size") == "1"
    assert "--enable-metrics" in args
    assert not [a for a in args if a.startswith("--speculative")]


@pytest.mark.parametrize(
    ("method", "kw", "expected"),
    [
        # chain EAGLE3, K=3: SGLang's draft-token count includes the root → 4
        ("eagle3", {"num_speculative_tokens": 3, "draft_model": DRAFT}, ("EAGLE3", 3, 1, 4)),
        # tree EAGLE: 5 steps, topk 4, 15 draft tokens (+ root = 16), SGLang's CI shape
        (
            "eagle",
            {"num_speculative_tokens": 5, "topk": 4, "num_draft_tokens": 15, "draft_model": DRAFT},
            ("EAGLE", 5, 4, 16),
        ),
        ("mtp", {"num_speculative_tokens": 1}, ("NEXTN", 1, 1, 2)),
        (
            "draft_model",
            {"num_speculative_tokens": 4, "draft_model": DRAFT},
            ("STANDALONE", 4, 1, 5),
        ),
        ("ngram", {"num_speculative_tokens": 3}, ("NGRAM", 3, 1, 4)),
        ("dflash", {"num_speculative_tokens": 15, "draft_model": DRAFT}, ("DFLASH", 1, 1, 16)),
    ],
)
def test_every_method_pins_steps_topk_and_draft_tokens(
    method: str, kw: dict[str, object], expected: tuple[str, int, int, int]
) -> None:
    args = sg.server_args(spec(method, **kw), "127.0.0.1", 30000)
    algo, steps, topk, drafts = expected
    assert flag(args, "--speculative-algorithm") == algo
    assert flag(args, "--speculative-num-steps") == str(steps)
    assert flag(args, "--speculative-eagle-topk") == str(topk)
    assert flag(args, "--speculative-num-draft-tokens") == str(drafts)
    if kw.get("draft_model"):
        assert flag(args, "--speculative-draft-model-path") == DRAFT
    else:
        assert "--speculative-draft-model-path" not in args
    if algo == "NGRAM":  # SGLang forces topk to the BFS breadth: pinned to the same value
        assert flag(args, "--speculative-ngram-max-bfs-breadth") == str(topk)


def test_topology_depth_and_tree_size() -> None:
    chain = sg.topology(spec("eagle3", num_speculative_tokens=3, draft_model=DRAFT))
    tree = sg.topology(
        spec("eagle", num_speculative_tokens=5, topk=4, num_draft_tokens=15, draft_model=DRAFT)
    )
    dflash = sg.topology(spec("dflash", num_speculative_tokens=15, draft_model=DRAFT))
    assert chain is not None and (chain.depth, chain.tree_size) == (3, 3)
    assert tree is not None and (tree.depth, tree.tree_size) == (5, 15)
    assert dflash is not None and (dflash.depth, dflash.tree_size) == (15, 15)


@pytest.mark.parametrize(
    ("method", "kw", "needle"),
    [
        ("eagle3", {"num_speculative_tokens": 3}, "needs draft_model"),
        ("eagle3", {"draft_model": DRAFT}, "needs num_speculative_tokens"),
        (
            "eagle3",
            {"num_speculative_tokens": 3, "num_draft_tokens": 4, "draft_model": DRAFT},
            "must equal",
        ),
        (
            "eagle",
            {"num_speculative_tokens": 5, "topk": 4, "draft_model": DRAFT},
            "needs num_draft_tokens",
        ),
        (
            "eagle",
            {"num_speculative_tokens": 2, "topk": 2, "num_draft_tokens": 9, "draft_model": DRAFT},
            "exceeds steps × topk",
        ),
        (
            "dflash",
            {"num_speculative_tokens": 15, "topk": 2, "draft_model": DRAFT},
            "topk must be 1",
        ),
        ("ngram", {"num_speculative_tokens": 3, "ngram_min": 1, "ngram_max": 3}, "match-window"),
        ("suffix", {"num_speculative_tokens": 3}, "not one SGLang runs"),
    ],
)
def test_bad_method_settings_fail_with_a_clear_error(
    method: str, kw: dict[str, object], needle: str
) -> None:
    with pytest.raises(ConfigError, match=needle) as err:
        sg.server_args(spec(method, **kw), "127.0.0.1", 30000)
    assert "sglang-test" in str(err.value)


@pytest.mark.parametrize("extra", ["--port=1", "--speculative-num-steps", "--model-path"])
def test_owned_flags_in_extra_args_are_refused(extra: str) -> None:
    with pytest.raises(ConfigError, match="sets itself"):
        sg.server_args(spec(extra_args=(extra, "5")), "127.0.0.1", 30000)


def test_adaptive_speculation_is_refused() -> None:
    with pytest.raises(ConfigError, match="--speculative-adaptive"):
        sg.server_args(spec(extra_args=("--speculative-adaptive",)), "127.0.0.1", 30000)


def test_server_shape_flags() -> None:
    s = spec(
        enable_prefix_caching=False,
        enforce_eager=True,
        reasoning_parser="qwen3",
        tokenizer="/tok",
        max_num_batched_tokens=4096,
        tensor_parallel_size=2,
        extra_args=("--attention-backend", "fa3"),
    )
    args = sg.server_args(s, "127.0.0.1", 1)
    assert "--disable-radix-cache" in args and "--disable-cuda-graph" in args
    assert flag(args, "--reasoning-parser") == "qwen3"
    assert flag(args, "--tokenizer-path") == "/tok"
    assert flag(args, "--chunked-prefill-size") == "4096"
    assert flag(args, "--tp-size") == "2"
    assert args[-2:] == ["--attention-backend", "fa3"]


@pytest.mark.parametrize(
    ("method", "kw", "version", "ok"),
    [
        ("eagle3", {"num_speculative_tokens": 3, "draft_model": DRAFT}, "0.5.2", True),
        ("draft_model", {"num_speculative_tokens": 3, "draft_model": DRAFT}, "0.5.1", False),
        ("draft_model", {"num_speculative_tokens": 3, "draft_model": DRAFT}, "0.5.2", True),
        ("ngram", {"num_speculative_tokens": 3}, "0.5.2", False),
        ("ngram", {"num_speculative_tokens": 3}, "0.5.3", True),
        ("dflash", {"num_speculative_tokens": 15, "draft_model": DRAFT}, "0.5.10", False),
        ("dflash", {"num_speculative_tokens": 15, "draft_model": DRAFT}, "0.5.23", True),
        ("mtp", {"num_speculative_tokens": 1}, "0.4.9", False),
    ],
)
def test_unsupported_method_and_version_fail_fast_naming_both(
    method: str, kw: dict[str, object], version: str, ok: bool
) -> None:
    s = spec(method, **kw)
    if ok:
        sg.check_supported(s, Version(version))
        return
    with pytest.raises(ConfigError) as err:
        sg.check_supported(s, Version(version))
    assert f"SGLang {version}" in str(err.value) and method in str(err.value)


def test_unknown_version_is_an_error_not_a_guess() -> None:
    with pytest.raises(ConfigError, match="sglang_version"):
        sg.check_supported(spec("ngram", num_speculative_tokens=3), None)
    sg.check_supported(spec(), None)  # native needs no version


def test_engine_fails_fast_before_starting_anything(tmp_path: Path) -> None:
    s = spec("ngram", num_speculative_tokens=3, options=(("sglang_version", "0.5.2"),))
    engine = sg.SglangEngine(s, Devices(), tmp_path)
    with pytest.raises(ConfigError, match=r"SGLang 0\.5\.2 does not support method ngram"):
        engine.start(timeout_s=5)
    assert engine.server is None and not list(tmp_path.iterdir())


def test_version_from_options_image_and_env(tmp_path: Path) -> None:
    assert sg.spec_version(spec(options=(("sglang_version", "0.5.23"),))) == Version("0.5.23")
    assert sg.spec_version(spec(image="lmsysorg/sglang:v0.5.5.post3-cu129")) == Version(
        "0.5.5.post3"
    )
    with pytest.raises(ConfigError, match=r"is not X\.Y\.Z"):
        sg.spec_version(spec(options=(("sglang_version", "latest"),)))
    # the env's installed package (metadata only), via a python that has none
    assert sg.installed_version(sys.executable) is None


def test_launcher_uses_sglang_serve_from_the_env_when_the_version_has_it(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    python = bin_dir / "python"
    python.touch()
    (bin_dir / "sglang").touch()
    s = spec(python=str(python))
    assert sg.launcher(s, Version("0.5.23")) == [str(bin_dir / "sglang"), "serve"]
    assert sg.launcher(s, Version("0.5.3")) == [str(python), "-m", "sglang.launch_server"]
    (bin_dir / "sglang").unlink()
    assert sg.launcher(s, Version("0.5.23")) == [str(python), "-m", "sglang.launch_server"]


def test_server_env_sets_the_gpus_and_spec_env_wins() -> None:
    env = sg.server_env(spec(env=(("CUDA_VISIBLE_DEVICES", "3"),)), Devices(gpus=("0", "1")))
    assert env == {"CUDA_VISIBLE_DEVICES": "3"}
    assert sg.server_env(spec(), Devices(gpus=("2",))) == {"CUDA_VISIBLE_DEVICES": "2"}


def test_env_recipe_is_the_small_parser_env() -> None:
    recipe = sg.env_recipe("sglang==0.5.23")
    assert recipe.name == "sglang-0.5.23"
    assert recipe.install[:2] == ("--no-deps", "sglang==0.5.23")
    pins = recipe.install[2:]
    assert "torch==2.13.0" in pins  # the CPU build on disk, not the multi-GB CUDA one
    assert all("==" in p for p in pins), [p for p in pins if "==" not in p]
    assert "prepare_server_args" in recipe.verify
    old = sg.env_recipe("sglang==0.5.2")
    assert old.name == "sglang-0.5.2" and "transformers==4.56.1" in old.install
    with pytest.raises(ConfigError):
        sg.env_recipe("vllm==0.5.2")


def test_container_plan_runs_the_images_server_on_all_interfaces_of_a_local_port(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No container runs here: a fake docker on PATH only has to exist for the plan."""
    fake = tmp_path / "docker"
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    monkeypatch.setenv("SPECPERF_DOCKER", str(fake))
    s = spec(
        "eagle3",
        num_speculative_tokens=3,
        draft_model=DRAFT,
        image="lmsysorg/sglang:v0.5.23-cu129",
    )
    engine = sg.SglangEngine(s, Devices(gpus=("1",)), tmp_path)
    plan = engine.launch_plan(30123)
    cmd, env, cleanup = plan.argv, plan.env, plan.cleanup
    assert cmd[0] == str(fake) and cmd[1] == "run" and env == {}
    assert "127.0.0.1:30123:30123" in cmd
    image_at = cmd.index("lmsysorg/sglang:v0.5.23-cu129")
    assert cmd[image_at + 1 : image_at + 3] == ["sglang", "serve"]
    args = cmd[image_at + 3 :]
    assert flag(args, "--host") == "0.0.0.0" and flag(args, "--port") == "30123"
    assert flag(args, "--speculative-algorithm") == "EAGLE3"
    assert cleanup and cleanup[0][0] == str(fake)
    old = spec("mtp", num_speculative_tokens=1, image="lmsysorg/sglang:v0.5.2-cu126")
    cmd = sg.SglangEngine(old, Devices(), tmp_path).launch_plan(1).argv
    at = cmd.index("lmsysorg/sglang:v0.5.2-cu126")
    assert cmd[at + 1 : at + 4] == ["python3", "-m", "sglang.launch_server"]
