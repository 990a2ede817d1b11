"""vLLM engine module without vLLM: command building for every method, environment, /metrics
parsing, log parsing, and the client/detect against a small fake HTTP server."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from specperf.engines.base import Devices, EngineSpec
from specperf.engines.vllm import (
    VllmClient,
    VllmEngine,
    build_command,
    detect,
    parse_metrics,
    parse_non_default_args,
    parse_startup_facts,
    server_env,
    speculative_config,
    summarize_server_info,
)
from specperf.errors import ConfigError

PY = "/envs/vllm/bin/python"


def spec(**kw: Any) -> EngineSpec:
    base: dict[str, Any] = {"kind": "vllm", "label": "v", "model": "/m/target", "python": PY}
    return EngineSpec(**{**base, **kw})


def sc_of(cmd: list[str]) -> dict[str, Any] | None:
    if "--speculative-config" not in cmd:
        return None
    return json.loads(cmd[cmd.index("--speculative-config") + 1])


# ---------------------------------------------------------------- command building

# method -> (extra spec fields, expected --speculative-config); reference/vllm.md §3
METHOD_CASES: dict[str, tuple[dict[str, Any], dict[str, Any] | None]] = {
    "native": ({}, None),
    "eagle3": (
        {"method": "eagle3", "draft_model": "/m/head", "num_speculative_tokens": 3},
        {"method": "eagle3", "model": "/m/head", "num_speculative_tokens": 3},
    ),
    "eagle": (
        {"method": "eagle", "draft_model": "/m/eagle", "num_speculative_tokens": 5},
        {"method": "eagle", "model": "/m/eagle", "num_speculative_tokens": 5},
    ),
    "mtp": (
        {"method": "mtp", "num_speculative_tokens": 5},
        {"method": "mtp", "num_speculative_tokens": 5},
    ),
    "mtp-own-model": (
        {"method": "mtp", "num_speculative_tokens": 2, "draft_model": "/m/mtp"},
        {"method": "mtp", "model": "/m/mtp", "num_speculative_tokens": 2},
    ),
    "ngram": (
        {"method": "ngram", "num_speculative_tokens": 3, "ngram_min": 2, "ngram_max": 4},
        {
            "method": "ngram",
            "num_speculative_tokens": 3,
            "prompt_lookup_min": 2,
            "prompt_lookup_max": 4,
        },
    ),
    "ngram-defaults": (
        {"method": "ngram", "num_speculative_tokens": 3},
        {"method": "ngram", "num_speculative_tokens": 3},
    ),
    "draft_model": (
        {"method": "draft_model", "draft_model": "/m/target", "num_speculative_tokens": 3},
        {"method": "draft_model", "model": "/m/target", "num_speculative_tokens": 3},
    ),
    "dflash": (
        {"method": "dflash", "draft_model": "/m/dflash", "num_speculative_tokens": 15},
        {"method": "dflash", "model": "/m/dflash", "num_speculative_tokens": 15},
    ),
    "suffix": ({"method": "suffix"}, {"method": "suffix"}),
    "suffix-k": (
        {"method": "suffix", "num_speculative_tokens": 8},
        {"method": "suffix", "num_speculative_tokens": 8},
    ),
}


@pytest.mark.parametrize("case", sorted(METHOD_CASES))
def test_speculative_config_per_method(case: str) -> None:
    fields, expected = METHOD_CASES[case]
    cmd = build_command(spec(**fields), port=8123)
    assert cmd[:3] == [PY, "-m", "vllm.entrypoints.openai.api_server"]
    assert sc_of(cmd) == expected
    assert "--disable-log-stats" not in cmd
    assert cmd[cmd.index("--host") + 1] == "127.0.0.1" and cmd[cmd.index("--port") + 1] == "8123"


def test_server_shape_flags() -> None:
    s = spec(
        served_model_name="tiny",
        tokenizer="/m/tok",
        dtype="bfloat16",
        max_model_len=32768,
        max_num_seqs=64,
        max_num_batched_tokens=16384,
        gpu_memory_utilization=0.85,
        tensor_parallel_size=2,
        enable_prefix_caching=False,
        enforce_eager=True,
        reasoning_parser="qwen3",
        extra_args=("--block-size", "128"),
    )
    cmd = build_command(s, port=1)
    expected_pairs = {
        "--model": "/m/target",
        "--served-model-name": "tiny",
        "--tokenizer": "/m/tok",
        "--dtype": "bfloat16",
        "--max-model-len": "32768",
        "--max-num-seqs": "64",
        "--max-num-batched-tokens": "16384",
        "--gpu-memory-utilization": "0.85",
        "--tensor-parallel-size": "2",
        "--reasoning-parser": "qwen3",
        "--block-size": "128",
    }
    for flag, value in expected_pairs.items():
        assert cmd[cmd.index(flag) + 1] == value, flag
    assert "--no-enable-prefix-caching" in cmd and "--enforce-eager" in cmd
    assert "--enable-prefix-caching" in build_command(spec(enable_prefix_caching=True), 1)
    plain = build_command(spec(), 1)
    assert not any("prefix-caching" in a for a in plain) and "--enforce-eager" not in plain
    assert plain[plain.index("--served-model-name") + 1] == "/m/target"
    assert build_command(spec(python=None), 1)[0] == sys.executable


def test_extra_speculative_keys_are_merged() -> None:
    for raw in (
        '{"draft_tensor_parallel_size": 1, "max_model_len": 2048}',
        (("draft_tensor_parallel_size", 1), ("max_model_len", 2048)),
    ):
        s = spec(
            method="eagle3",
            draft_model="/h",
            num_speculative_tokens=3,
            options=(("speculative_config", raw),),
        )
        assert speculative_config(s) == {
            "method": "eagle3",
            "model": "/h",
            "num_speculative_tokens": 3,
            "draft_tensor_parallel_size": 1,
            "max_model_len": 2048,
        }


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"method": "eagle3", "draft_model": "/h"}, "needs num_speculative_tokens"),
        ({"method": "eagle3", "num_speculative_tokens": 3}, "needs draft_model"),
        ({"method": "draft_model", "num_speculative_tokens": 3}, "needs draft_model"),
        ({"method": "ngram", "num_speculative_tokens": 0}, "must be ≥ 1"),
        (
            {"method": "ngram", "num_speculative_tokens": 3, "ngram_min": 5, "ngram_max": 2},
            "ngram_min",
        ),
        (
            {"method": "eagle3", "draft_model": "/h", "num_speculative_tokens": 3, "topk": 8},
            "topk=8",
        ),
        (
            {"method": "ngram", "num_speculative_tokens": 3, "num_draft_tokens": 5},
            "num_draft_tokens",
        ),
        ({"method": "medusa", "num_speculative_tokens": 3}, "method 'medusa'"),
        ({"extra_args": ("--disable-log-stats",)}, "--disable-log-stats"),
        ({"extra_args": ("--disable-log-stats=true",)}, "--disable-log-stats"),
        ({"extra_args": ("--port", "9")}, "--port"),
        ({"extra_args": ("--speculative-config", "{}")}, "--speculative-config"),
        (
            {
                "method": "ngram",
                "num_speculative_tokens": 3,
                "options": (("speculative_config", '{"method": "eagle"}'),),
            },
            "repeats method",
        ),
        (
            {
                "method": "ngram",
                "num_speculative_tokens": 3,
                "options": (("speculative_config", "{x"),),
            },
            "not JSON",
        ),
    ],
)
def test_bad_specs_give_one_line_errors(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message) as err:
        build_command(spec(**fields), port=1)
    assert "\n" not in str(err.value) and "'v'" in str(err.value)


# ---------------------------------------------------------------- environment


def test_cpu_env_binds_threads_and_preloads_venv_libs(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "lib").mkdir()
    (venv / "lib" / "libiomp5.so").write_bytes(b"")
    (venv / "lib" / "libtcmalloc_minimal.so.4").write_bytes(b"")
    env = server_env(spec(python=str(venv / "bin" / "python")), Devices(cpus=(0, 1)))
    assert env["VLLM_SERVER_DEV_MODE"] == "1"
    # placement (specperf.placement): OpenMP on the engine's core, the first one for the API
    # server and the client; off (the old default: every core) by option
    assert env["VLLM_CPU_OMP_THREADS_BIND"] == "1"
    assert server_env(spec(), Devices(cpus=(0, 1, 2, 3)))["VLLM_CPU_OMP_THREADS_BIND"] == "2,3"
    off = spec(options=(("cpu_placement", "none"),))
    assert server_env(off, Devices(cpus=(0, 1)))["VLLM_CPU_OMP_THREADS_BIND"] == "0,1"
    assert env["VLLM_CPU_KVCACHE_SPACE"] == "1"
    assert env["LD_PRELOAD"] == (f"{venv}/lib/libtcmalloc_minimal.so.4:{venv}/lib/libiomp5.so")
    assert "CUDA_VISIBLE_DEVICES" not in env
    # nothing to preload in a bare venv; spec.env and options win
    bare = tmp_path / "bare"
    (bare / "bin").mkdir(parents=True)
    env2 = server_env(
        spec(
            python=str(bare / "bin" / "python"),
            env=(("VLLM_CPU_OMP_THREADS_BIND", "nobind"),),
            options=(("cpu_kvcache_space_gib", 8),),
        ),
        Devices(),
    )
    assert "LD_PRELOAD" not in env2
    assert env2["VLLM_CPU_OMP_THREADS_BIND"] == "nobind" and env2["VLLM_CPU_KVCACHE_SPACE"] == "8"


def test_gpu_env_sets_visible_devices_only() -> None:
    env = server_env(spec(), Devices(gpus=("2", "3")))
    assert env["CUDA_VISIBLE_DEVICES"] == "2,3"
    assert not any(k.startswith("VLLM_CPU") for k in env) and "LD_PRELOAD" not in env


# ---------------------------------------------------------------- /metrics and logs

METRICS = """\
# HELP vllm:spec_decode_num_drafts Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="tiny"} 10.0
vllm:spec_decode_num_drafts_total{engine="1",model_name="tiny"} 5.0
vllm:spec_decode_num_drafts_created{engine="0",model_name="tiny"} 1.7e9
# TYPE vllm:spec_decode_num_draft_tokens counter
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="tiny"} 30.0
vllm:spec_decode_num_draft_tokens_total{engine="1",model_name="tiny"} 15.0
# TYPE vllm:spec_decode_num_accepted_tokens counter
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="tiny"} 20.0
vllm:spec_decode_num_accepted_tokens_total{engine="1",model_name="tiny"} 4.0
# TYPE vllm:spec_decode_num_accepted_tokens_per_pos counter
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="tiny",position="0"} 9.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="tiny",position="2"} 4.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="tiny",position="1"} 7.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="tiny",position="0"} 3.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="tiny",position="1"} 1.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="tiny",position="2"} 0.0
# TYPE vllm:generation_tokens counter
vllm:generation_tokens_total{engine="0",model_name="tiny"} 99.0
vllm:generation_tokens_created{engine="0",model_name="tiny"} 1.7e9
# TYPE vllm:prompt_tokens counter
vllm:prompt_tokens_total{engine="0",model_name="tiny"} 260.0
# TYPE vllm:prefix_cache_queries counter
vllm:prefix_cache_queries_total{engine="0",model_name="tiny"} 260.0
# TYPE vllm:prefix_cache_hits counter
vllm:prefix_cache_hits_total{engine="0",model_name="tiny"} 64.0
# TYPE vllm:request_success counter
vllm:request_success_total{engine="0",finished_reason="stop",model_name="tiny"} 2.0
vllm:request_success_total{engine="0",finished_reason="length",model_name="tiny"} 3.0
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.001",model_name="tiny"} 0.0
vllm:time_to_first_token_seconds_count{engine="0",model_name="tiny"} 5.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="tiny"} 0.5
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="tiny"} 0.25
"""


def test_parse_metrics_sums_engines_and_skips_created() -> None:
    c = parse_metrics(METRICS)
    assert (c.drafts, c.draft_tokens, c.accepted_tokens) == (15.0, 45.0, 24.0)
    assert c.accepted_per_position == (12.0, 8.0, 4.0)
    assert c.generation_tokens == 99.0 and c.prompt_tokens == 260.0
    assert (c.prefix_cache_queries, c.prefix_cache_hits) == (260.0, 64.0)
    assert dict(c.extra)["request_success"] == 5.0


def test_parse_metrics_native_has_no_acceptance_counters() -> None:
    text = "\n".join(line for line in METRICS.splitlines() if "spec_decode" not in line)
    c = parse_metrics(text + "\n")
    assert c.drafts is None and c.draft_tokens is None and c.accepted_per_position is None
    assert c.generation_tokens == 99.0


def test_delta_gives_design_acceptance() -> None:
    before = parse_metrics(METRICS)
    after_text = METRICS.replace(
        'vllm:spec_decode_num_drafts_total{engine="0",model_name="tiny"} 10.0',
        'vllm:spec_decode_num_drafts_total{engine="0",model_name="tiny"} 20.0',
    ).replace(
        'vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="tiny"} 20.0',
        'vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="tiny"} 40.0',
    )
    d = parse_metrics(after_text).minus(before)
    assert d.drafts == 10.0 and d.accepted_tokens == 20.0
    assert 1 + d.accepted_tokens / d.drafts == 3.0  # MAL


LOG = (
    "(APIServer pid=1) INFO 11-29 09:36:17 [api_utils.py:286] non-default args: "
    "{'host': '127.0.0.1', 'port': 41573, 'model': '/m', 'max_model_len': 2048, "
    "'enforce_eager': True, 'served_model_name': ['tiny'], 'speculative_config': "
    "{'method': 'eagle3', 'model': '/m/eagle3', 'num_speculative_tokens': 3}}\n"
    "(EngineCore pid=2) INFO 11-29 09:38:44 [kv_cache_utils.py:2327] CPU KV cache size: "
    "524,288 tokens, Maximum concurrency for 2,048 tokens per request: 256.00x\n"
    "(EngineCore pid=2) INFO 11-29 09:38:54 [core.py:402] init engine (profile, create kv "
    "cache, warmup model) took 10.23 s\n"
    "(Worker pid=3) INFO 11-29 09:38:40 [gpu_model_runner.py:5150] Model loading took 15.27 GiB "
    "memory and 5.100000 seconds\n"
    "(Worker pid=3) INFO 11-29 09:38:41 [gpu_worker.py:760] Available KV cache memory: 10.5 GiB\n"
)


def test_parse_log_lines() -> None:
    args = parse_non_default_args(LOG)
    assert args is not None and args["max_model_len"] == 2048 and args["enforce_eager"] is True
    assert args["speculative_config"]["num_speculative_tokens"] == 3
    assert parse_non_default_args("nothing here") is None
    assert parse_non_default_args("non-default args: {'x': <object at 0x1>}") == {
        "_raw": "{'x': <object at 0x1>}"
    }
    assert parse_startup_facts(LOG) == {
        "kv_cache_device": "CPU",
        "kv_cache_tokens": 524288,
        "max_concurrency_tokens_per_request": 2048,
        "max_concurrency": 256.0,
        "init_engine_s": 10.23,
        "model_memory_gib": 15.27,
        "kv_cache_memory_gib": 10.5,
    }


def test_summarize_server_info_keeps_what_decides_performance() -> None:
    info = {
        "vllm_config": {
            "model_config": {"model": "/m", "dtype": "bfloat16", "max_model_len": 2048, "seed": 0},
            "cache_config": {"block_size": 128, "enable_prefix_caching": True},
            "scheduler_config": {"max_num_seqs": 4, "max_num_batched_tokens": 2048},
            "parallel_config": {"tensor_parallel_size": 1},
            "speculative_config": None,
        },
        "vllm_env": {"VLLM_CPU_KVCACHE_SPACE": 1, "VLLM_LOGGING_LEVEL": "INFO"},
        "system_env": {"huge": "x"},
    }
    out = summarize_server_info(info)
    assert out["model_config"] == {"model": "/m", "dtype": "bfloat16", "max_model_len": 2048}
    assert out["speculative_config"] is None
    assert out["vllm_env"] == {"VLLM_CPU_KVCACHE_SPACE": 1}
    assert "system_env" not in out


# ---------------------------------------------------------------- client and detect


class FakeServer:
    """Routes: path -> (status, body, content type); records requests."""

    def __init__(self, routes: dict[tuple[str, str], tuple[int, str]]) -> None:
        self.routes = routes
        self.seen: list[tuple[str, str, dict[str, str]]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self, method: str) -> None:
                path = self.path.split("?")[0]
                outer.seen.append((method, self.path, dict(self.headers)))
                status, body = outer.routes.get((method, path), (404, "not found"))
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._answer("GET")

            def do_POST(self) -> None:
                self._answer("POST")

            def log_message(self, *a: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


VLLM_ROUTES = {
    ("GET", "/version"): (200, '{"version": "0.32.0"}'),
    ("GET", "/metrics"): (200, METRICS),
    ("GET", "/v1/models"): (200, '{"data": [{"id": "tiny"}]}'),
    ("GET", "/health"): (200, ""),
    ("POST", "/reset_prefix_cache"): (200, '{"success": true}'),
}


@pytest.fixture
def fake_vllm() -> Iterator[FakeServer]:
    srv = FakeServer(dict(VLLM_ROUTES))
    yield srv
    srv.close()


def test_detect_recognises_vllm(fake_vllm: FakeServer) -> None:
    client = detect(fake_vllm.url + "/v1/", None, "sekret")
    assert isinstance(client, VllmClient)
    assert client.base_url == fake_vllm.url and client.model == "tiny"
    assert all(h.get("Authorization") == "Bearer sekret" for _, _, h in fake_vllm.seen)
    assert client.counters().drafts == 15.0
    assert client.version() == "0.32.0" and client.is_alive()


def test_detect_declines_other_servers(fake_vllm: FakeServer) -> None:
    fake_vllm.routes[("GET", "/metrics")] = (200, "sglang:spec_accept_length 2.0\n")
    assert detect(fake_vllm.url, "m", None) is None
    del fake_vllm.routes[("GET", "/version")]
    assert detect(fake_vllm.url, "m", None) is None
    assert detect("http://127.0.0.1:9", "m", None) is None  # nothing listening


def test_reset_prefix_cache_answers(fake_vllm: FakeServer) -> None:
    client = VllmClient(fake_vllm.url, "tiny")
    assert client.reset_prefix_cache() is True
    assert ("POST", "/reset_prefix_cache", fake_vllm.seen[-1][2]) == fake_vllm.seen[-1]
    fake_vllm.routes[("POST", "/reset_prefix_cache")] = (200, '{"success": false}')
    assert client.reset_prefix_cache() is False  # blocks still held
    del fake_vllm.routes[("POST", "/reset_prefix_cache")]
    assert client.reset_prefix_cache() is False  # dev mode off on a foreign server


def test_request_adaptation_and_token_ids() -> None:
    client = VllmClient("http://x", "tiny")
    body = {"model": "tiny", "messages": []}
    assert client.adapt_request(body) == {**body, "return_token_ids": True}
    assert "return_token_ids" not in body
    assert VllmClient("http://x", "t", return_token_ids=False).adapt_request(body) == body
    chunk = {"choices": [{"index": 0, "delta": {"content": "ab"}, "token_ids": [5, 6]}]}
    assert client.extract_token_ids(chunk) == [5, 6]
    assert client.extract_token_ids({"choices": [], "usage": {}}) is None
    assert client.extract_token_ids({"choices": [{"delta": {"content": "a"}}]}) is None


def test_engine_refuses_other_kinds(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="kind 'sglang'"):
        VllmEngine(spec(kind="sglang"), Devices(), tmp_path)


def test_module_never_imports_vllm() -> None:
    assert "vllm" not in sys.modules
