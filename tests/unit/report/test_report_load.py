"""Reading results directories: what the report sees, and one-line errors for bad input."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from specperf.errors import ConfigError
from specperf.report.load import flatten, load_results, read_jsonl, requests_frame

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures_results"
MAIN = FIXTURES / "run-main"


def test_fixture_results_load_as_one_set_with_every_item():
    rs = load_results([MAIN])
    assert len(rs.items) == len(list(MAIN.glob("*/summary.json")))
    runs = rs.runs
    assert set(runs["engine_label"]) == {"vllm", "sglang"}
    assert set(runs["method"]) == {"native", "eagle3", "ngram", "dflash"}
    assert set(runs["concurrency"]) == {1, 4}
    assert len(rs.engine_starts) > 0


def test_flatten_takes_figures_from_the_contract_keys():
    summary = json.loads((MAIN / "vllm-eagle3-humaneval-c4" / "summary.json").read_text())
    row = flatten(summary)
    assert row["tok_s"] == summary["output_throughput_tok_s"]
    assert row["mal"] == summary["mean_acceptance_length"]
    assert row["acceptance_rate"] == summary["acceptance_rate"]
    assert row["evalscope_L"] == summary["evalscope_estimate"]["decoded_tokens_per_iter"]
    assert row["tpot_p50"] == summary["tpot_ms"]["p50"]
    assert row["method_label"] == "eagle3 (k=3)"
    assert row["per_position"] == summary["per_position_acceptance"]


def test_native_summary_has_no_acceptance():
    summary = json.loads((MAIN / "vllm-native-humaneval-c1" / "summary.json").read_text())
    row = flatten(summary)
    assert row["mal"] is None and row["acceptance_rate"] is None
    assert row["method_label"] == "native"


def test_requests_are_tagged_with_their_item():
    rs = load_results([MAIN])
    reqs = requests_frame(rs.items)
    assert len(reqs) == sum(len(it.requests) for it in rs.items)
    one = reqs[reqs["item"] == "sglang-eagle3-mt-bench-c4"]
    assert set(one["engine_name"]) == {"sglang 0.5.23"}
    assert set(one["concurrency"]) == {4}


def test_missing_directory_is_a_one_line_error(tmp_path: Path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_results([tmp_path / "nope"])


def test_directory_without_items_is_an_error(tmp_path: Path):
    with pytest.raises(ConfigError, match=r"no item results"):
        load_results([tmp_path])


def test_malformed_summary_names_the_file(tmp_path: Path):
    item = tmp_path / "x"
    item.mkdir()
    (item / "summary.json").write_text('{"engine": "vllm",')
    with pytest.raises(ConfigError, match=r"x/summary.json: invalid JSON at line 1"):
        load_results([tmp_path])


def test_torn_last_request_line_is_skipped_but_a_bad_middle_line_is_an_error(tmp_path: Path):
    f = tmp_path / "requests.jsonl"
    f.write_text('{"index": 0}\n{"index": 1}\n{"index": 2, "tex')
    assert [r["index"] for r in read_jsonl(f)] == [0, 1]
    f.write_text('{"index": 0}\n{"ind\n{"index": 2}\n')
    with pytest.raises(ConfigError, match=r"requests.jsonl:2: invalid JSON"):
        read_jsonl(f)


def test_same_item_in_two_directories_asks_for_a_merge(tmp_path: Path):
    for name in ("a", "b"):
        shutil.copytree(
            MAIN / "vllm-native-mt-bench-c1", tmp_path / name / "vllm-native-mt-bench-c1"
        )
    with pytest.raises(ConfigError, match="specperf merge"):
        load_results([tmp_path / "a", tmp_path / "b"])
