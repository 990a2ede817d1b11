"""`specperf bench --url`: dataset files, flags, output contract, API key hygiene."""

from __future__ import annotations

import argparse
import json

import pytest

from specperf import bench
from specperf.errors import ConfigError
from tests.calibration.server import CalibrationConfig, CalibrationServer

CONTRACT_KEYS = {
    "engine",
    "engine_version",
    "method",
    "num_speculative_tokens",
    "model",
    "dataset",
    "concurrency",
    "completed",
    "failed",
    "duration_s",
    "output_tokens",
    "output_throughput_tok_s",
    "ttft_ms",
    "tpot_ms",
    "itl_ms",
    "e2e_ms",
    "tokens_per_chunk",
    "acceptance_rate",
    "mean_acceptance_length",
    "per_position_acceptance",
    "evalscope_estimate",
    "server_generation_tokens",
    "environment",
    "notes",
}


@pytest.fixture(autouse=True)
def quick_counter_settle(monkeypatch):
    monkeypatch.setattr("specperf.workload.COUNTER_SETTLE_INTERVAL_S", 0.05)


def parse(argv):
    p = argparse.ArgumentParser()
    bench.add_arguments(p)
    return p.parse_args(argv)


def prompts_file(tmp_path, n=6):
    path = tmp_path / "prompts.jsonl"
    path.write_text("".join(json.dumps({"prompt": f"prompt number {i}"}) + "\n" for i in range(n)))
    return path


def test_prompt_jsonl_loader(tmp_path):
    ds = bench.load_prompt_jsonl(prompts_file(tmp_path, 3))
    assert [i.id for i in ds.items] == ["line-00001", "line-00002", "line-00003"]
    assert ds.items[0].turns == ("prompt number 0",) and ds.name == "prompts"
    assert ds.version == bench.load_prompt_jsonl(prompts_file(tmp_path, 3)).version


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"prompt": "a"}\n{"text": "b"}\n', r"prompts.jsonl:2: field 'prompt'"),
        ('{"prompt": "a"}\nnot json\n', r"prompts.jsonl:2: not valid JSON"),
        ('{"prompt": "  "}\n', r"prompts.jsonl:1: field 'prompt' is empty"),
        ("\n", "no prompts"),
    ],
)
def test_bad_prompt_files_name_file_and_line(tmp_path, content, message):
    path = tmp_path / "prompts.jsonl"
    path.write_text(content)
    with pytest.raises(ConfigError, match=message):
        bench.load_prompt_jsonl(path)


def test_unknown_dataset_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="no-such-set"):
        bench.load_bench_dataset(str(tmp_path / "no-such-set"))


def test_flag_errors(tmp_path):
    base = [
        "--url",
        "http://127.0.0.1:9",
        "--dataset",
        str(prompts_file(tmp_path)),
        "--output",
        str(tmp_path / "o.json"),
    ]
    with pytest.raises(ConfigError, match="--serial"):
        bench.run(parse([*base, "--serial", "--concurrency", "4"]))
    with pytest.raises(ConfigError, match="--num-requests"):
        bench.run(parse([*base, "--num-requests", "0"]))
    with pytest.raises(ConfigError, match="MY_MISSING_KEY"):
        bench.run(parse([*base, "--api-key-env", "MY_MISSING_KEY"]))


def test_bench_against_a_server_writes_the_contract(tmp_path, monkeypatch, capsys):
    secret = "sk-calibration-SECRET-123"
    monkeypatch.setenv("SPECPERF_TEST_KEY", secret)
    out = tmp_path / "out" / "run.json"
    cfg = CalibrationConfig(
        ttft_s=0.003,
        step_interval_s=0.002,
        output_tokens=12,
        num_speculative_tokens=3,
        accept_pattern=[2],
    )
    with CalibrationServer(cfg) as srv:
        rc = bench.run(
            parse(
                [
                    "--url",
                    srv.url,
                    "--dataset",
                    str(prompts_file(tmp_path)),
                    "--concurrency",
                    "2",
                    "--num-requests",
                    "6",
                    "--max-tokens",
                    "64",
                    "--temperature",
                    "0",
                    "--api-key-env",
                    "SPECPERF_TEST_KEY",
                    "--output",
                    str(out),
                    "--method",
                    "eagle3",
                    "--num-speculative-tokens",
                    "3",
                    "--quiet",
                ]
            )
        )
        bodies = srv.state.recent
        assert all(b["_authorized"] for b in bodies)  # the key was sent ...
        assert all(b["temperature"] == 0 and b["max_tokens"] == 64 for b in bodies)
    assert rc == 0
    summary = json.loads(out.read_text())
    assert summary.keys() >= CONTRACT_KEYS
    assert summary["completed"] == 6 and summary["failed"] == 0
    assert summary["model"] == "calibration-model"  # resolved from /v1/models
    assert summary["concurrency"] == 2 and summary["method"] == "eagle3"
    assert summary["output_tokens"] == 72
    run_dir = tmp_path / "out" / "run-run"
    assert len((run_dir / "requests.jsonl").read_text().splitlines()) == 6
    printed = capsys.readouterr()
    assert "output throughput tok/s" in printed.out
    # ... and appears in nothing written or printed
    for f in [out, *run_dir.iterdir()]:
        assert secret not in f.read_text()
    assert secret not in printed.out + printed.err


def test_bench_reports_failures_with_exit_code_one(tmp_path):
    cfg = CalibrationConfig(ttft_s=0.002, step_interval_s=0.001, output_tokens=4, fail_every=2)
    with CalibrationServer(cfg) as srv:
        rc = bench.run(
            parse(
                [
                    "--url",
                    srv.url,
                    "--model",
                    "calibration-model",
                    "--dataset",
                    str(prompts_file(tmp_path)),
                    "--serial",
                    "--num-requests",
                    "4",
                    "--warmup",
                    "0",
                    "--output",
                    str(tmp_path / "o.json"),
                    "--results-dir",
                    str(tmp_path / "r"),
                    "--quiet",
                ]
            )
        )
    s = json.loads((tmp_path / "o.json").read_text())
    assert rc == 1 and s["failed"] == 2 and s["concurrency"] == 1
    assert s["errors"][0].endswith('HTTP 500: {"error": {"message": "injected failure"}}')
    assert (tmp_path / "r" / "summary.json").exists()


def test_table_formats_missing_values():
    text = bench.format_table({"engine": "x", "notes": ["n1"], "errors": ["e1"]})
    assert "note: n1" in text and "error: e1" in text
