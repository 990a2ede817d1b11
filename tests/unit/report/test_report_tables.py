"""The report's numbers, checked against the summaries they come from."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from specperf.datasets import LENGTH_BUCKETS
from specperf.report import tables
from specperf.report.fmt import display
from specperf.report.load import load_results, requests_frame
from specperf.report.prompts import prompt_meta

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures_results"
MAIN = FIXTURES / "run-main"


def summary(item: str) -> dict:
    return json.loads((MAIN / item / "summary.json").read_text())


@pytest.fixture(scope="module")
def rs():
    return load_results([MAIN])


@pytest.fixture(scope="module")
def reqs(rs):
    return tables.request_rows(requests_frame(rs.items), prompt_meta(rs.runs["dataset"].unique()))


def tok_s(item: str) -> float:
    return summary(item)["output_throughput_tok_s"]


def test_speedup_is_method_over_native_of_the_same_engine_dataset_and_concurrency(rs):
    df = tables.with_speedup(rs.runs).set_index("item")
    want = tok_s("vllm-eagle3-humaneval-c4") / tok_s("vllm-native-humaneval-c4")
    assert df.loc["vllm-eagle3-humaneval-c4", "speedup"] == pytest.approx(want)
    want = tok_s("sglang-eagle3-humaneval-c4") / tok_s("sglang-native-humaneval-c4")
    assert df.loc["sglang-eagle3-humaneval-c4", "speedup"] == pytest.approx(want)
    assert df.loc["vllm-native-mt-bench-c1", "speedup"] == pytest.approx(1.0)


def test_no_native_means_no_speedup(rs):
    runs = rs.runs[~((rs.runs["method"] == "native") & (rs.runs["dataset"] == "zh"))]
    df = tables.with_speedup(runs).set_index("item")
    assert np.isnan(df.loc["vllm-eagle3-zh-c1", "speedup"])
    assert not np.isnan(df.loc["vllm-eagle3-zh-en-c1", "speedup"])


def test_speedup_table_mean_and_peak_over_concurrencies(rs):
    t = tables.speedup_table(rs.runs)
    row = t[
        (t["engine"] == "vllm 0.33.0")
        & (t["method"] == "eagle3 (k=3)")
        & (t["dataset"] == "humaneval")
    ]
    s1 = tok_s("vllm-eagle3-humaneval-c1") / tok_s("vllm-native-humaneval-c1")
    s4 = tok_s("vllm-eagle3-humaneval-c4") / tok_s("vllm-native-humaneval-c4")
    assert row["c=1"].item() == pytest.approx(s1)
    assert row["c=4"].item() == pytest.approx(s4)
    assert row["mean"].item() == pytest.approx((s1 + s4) / 2)
    assert row["peak"].item() == pytest.approx(max(s1, s4))
    assert "native" not in set(t["method"])


def test_method_ranking_is_sorted_by_mean_speedup(rs):
    r = tables.method_ranking(rs.runs)
    assert list(r["mean speedup"]) == sorted(r["mean speedup"], reverse=True)
    assert list(r["rank"]) == list(range(1, len(r) + 1))
    dflash = r[(r["method"] == "dflash (k=8)")].iloc[0]
    assert dflash["peak at"].endswith("c=1")  # it collapses at c=4


def test_acceptance_table_puts_the_evalscope_estimate_beside_the_real_value(rs):
    t = tables.acceptance_table(rs.runs)
    s = summary("vllm-ngram-mt-bench-c4")
    row = t[(t["method"] == "ngram (k=4)") & (t["dataset"] == "mt-bench") & (t["c"] == 4)].iloc[0]
    assert row["MAL"] == s["mean_acceptance_length"]
    assert row["accept rate"] == s["acceptance_rate"]
    assert row["evalscope L"] == s["evalscope_estimate"]["decoded_tokens_per_iter"]
    assert row["evalscope rate"] == s["evalscope_estimate"]["acceptance_rate"]


def test_dataset_ranking_orders_by_mean_real_acceptance(rs):
    r = tables.dataset_ranking(rs.runs)
    spec = rs.runs[rs.runs["method"] != "native"]
    want = spec.groupby("dataset")["acceptance_rate"].mean().sort_values(ascending=False)
    assert list(r["dataset"]) == list(want.index)
    assert r["mean accept rate"].tolist() == pytest.approx(want.tolist())


def test_per_position_is_the_mean_over_concurrencies(rs):
    t = tables.position_table(rs.runs)
    row = t[
        (t["method"] == "eagle3 (k=3)")
        & (t["dataset"] == "mt-bench")
        & (t["engine"] == "sglang 0.5.23")
    ]
    a = summary("sglang-eagle3-mt-bench-c1")["per_position_acceptance"]
    b = summary("sglang-eagle3-mt-bench-c4")["per_position_acceptance"]
    for i in range(3):
        assert row[f"pos {i + 1}"].item() == pytest.approx((a[i] + b[i]) / 2)


def test_engine_comparison_only_lists_methods_measured_on_several_engines(rs):
    t = tables.engine_comparison(rs.runs)
    assert set(t["method"]) == {"eagle3 (k=3)"}
    assert set(t["engine"]) == {"vllm 0.33.0", "sglang 0.5.23"}
    gap = tables.engine_gap(rs.runs)
    assert gap["speedup / best"].max() == pytest.approx(1.0)


def test_request_estimate_is_tokens_minus_one_over_chunks_minus_one(reqs):
    r = reqs[(reqs["item"] == "vllm-eagle3-humaneval-c4")].iloc[0]
    rec = json.loads(
        (MAIN / "vllm-eagle3-humaneval-c4" / "requests.jsonl").read_text().splitlines()[0]
    )
    assert r["prompt_id"] == rec["prompt_id"]
    want = (rec["output_tokens"] - 1) / (len(rec["chunk_times_s"]) - 1)
    assert r["L_est"] == pytest.approx(want)


def test_length_buckets_use_the_datasets_table_on_server_prompt_tokens(reqs):
    labels = [label for _, label in LENGTH_BUCKETS]
    assert set(reqs["length_bucket"]) <= set(labels)
    long = reqs[reqs["prompt_id"] == "zh-summarization-02"]
    assert set(long["length_bucket"]) == {"2k-4k"}  # 2600 prompt tokens
    t = tables.sensitivity(reqs, "length_bucket")
    part = t[
        (t["engine"] == "vllm 0.33.0") & (t["method"] == "eagle3 (k=3)") & (t["dataset"] == "zh")
    ]
    order = [labels.index(b) for b in part["length_bucket"]]
    assert order == sorted(order)


def test_category_sensitivity_counts_requests(reqs):
    t = tables.sensitivity(reqs, "category")
    part = t[(t["engine"] == "sglang 0.5.23") & (t["dataset"] == "humaneval")]
    assert part["requests"].sum() == 12  # 6 requests at c=1 and 6 at c=4
    assert "native" not in set(t["method"])


def test_zh_en_twins_pair_prompts_through_the_datasets_twin_field(rs, reqs):
    t = tables.twins(reqs, rs.runs)
    row = t[t["method"] == "eagle3 (k=3)"].iloc[0]
    assert row["pairs"] == 6
    assert row["MAL zh"] == pytest.approx(summary("vllm-eagle3-zh-c1")["mean_acceptance_length"])
    assert row["MAL en"] == pytest.approx(summary("vllm-eagle3-zh-en-c1")["mean_acceptance_length"])
    assert row["zh / en"] < 1  # English-trained heads accept less on Chinese prompts


def test_twins_fall_back_to_the_id_prefix_without_dataset_metadata(rs):
    reqs = tables.request_rows(requests_frame(rs.items), {})
    assert tables.twins(reqs, rs.runs)["pairs"].tolist() == [6, 6, 6]


def test_output_length_against_native(rs):
    t = tables.output_lengths(rs.runs).set_index(["engine", "method", "dataset", "c"])
    assert t.loc[("vllm 0.33.0", "eagle3 (k=3)", "mt-bench", 1), "length ratio"] == 1.0
    # the collapsed DFlash runs to max_tokens
    assert t.loc[("vllm 0.33.0", "dflash (k=8)", "humaneval", 4), "length ratio"] > 1.5


def test_display_formats_by_column_name():
    df = pd.DataFrame(
        {
            "speedup": [1.4321],
            "accept rate": [0.637],
            "MAL": [2.9],
            "tok/s": [42.71],
            "Δ tok/s": [-0.08],
            "c": [4.0],
            "x": [None],
        }
    )
    out = display(df).iloc[0].tolist()
    assert out == ["1.43×", "63.7%", "2.90", "42.7", "-8.0%", "4", "—"]
