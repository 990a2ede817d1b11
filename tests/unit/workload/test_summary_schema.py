"""The run summary's schema (specperf.summary_schema): the contract's keys typed where present,
other keys kept, and a bad value a one-line error naming the file and the dotted key, from
every reader of a summary.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specperf.errors import ConfigError
from specperf.history import read_summaries
from specperf.report.load import load_results
from specperf.results import read_summary
from specperf.summary_schema import check_summary
from specperf.verdict.results import load_item

GOOD = {
    "engine": "vllm",
    "engine_version": "0.32.0",
    "method": "eagle3",
    "num_speculative_tokens": 3,
    "model": "m",
    "dataset": "mt-bench",
    "concurrency": 4,
    "completed": 80,
    "failed": 0,
    "duration_s": 12.5,
    "output_tokens": 4000,
    "output_throughput_tok_s": 320.0,
    "ttft_ms": {"mean": 10.0, "p50": 9, "p90": 12.0, "p99": None, "n": 80},
    "tpot_ms": {"mean": None, "p50": None, "p90": None, "p99": None},
    "tokens_per_chunk": 2.9,
    "acceptance_rate": 0.63,
    "mean_acceptance_length": 2.9,
    "per_position_acceptance": [0.8, 0.6, 0.4],
    "evalscope_estimate": {"decoded_tokens_per_iter": 2.9, "acceptance_rate": 0.65, "n": 1},
    "server_generation_tokens": 4000,
    "environment": {"gpu": "L40"},
    "notes": ["a note"],
    "ours": {"anything": [1, "x"]},
}


def test_a_contract_summary_passes_unchanged() -> None:
    assert check_summary(GOOD, "s.json") is GOOD
    assert check_summary({}, "s.json") == {}  # keys are not required (older results)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"concurrency": "4"}, r"^s\.json: concurrency: expected an integer, got '4'$"),
        ({"completed": 1.5}, r"^s\.json: completed: expected an integer, got 1\.5$"),
        ({"ttft_ms": {"p50": "9"}}, r"^s\.json: ttft_ms\.p50: expected a number, got '9'$"),
        ({"ttft_ms": 3}, r"^s\.json: ttft_ms: expected an object, got int 3$"),
        ({"acceptance_rate": True}, r"^s\.json: acceptance_rate: expected a number, got True$"),
        ({"per_position_acceptance": [0.5, "x"]}, r"^s\.json: per_position_acceptance\[1\]: "),
        ({"notes": "n"}, r"^s\.json: notes: "),
        ({"engine": 1}, r"^s\.json: engine: expected a string, got int 1$"),
    ],
)
def test_a_bad_value_is_one_line_naming_the_key(change: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as err:
        check_summary({**GOOD, **change}, "s.json")
    assert "\n" not in str(err.value)


def test_every_reader_checks_the_summary(tmp_path: Path) -> None:
    item = tmp_path / "run" / "item"
    item.mkdir(parents=True)
    path = item / "summary.json"
    path.write_text(json.dumps({**GOOD, "key": "k", "ttft_ms": {"p90": "slow"}}))
    expected = rf"^{path}: ttft_ms\.p90: expected a number, got 'slow'$"
    for read in (
        lambda: read_summary(item),
        lambda: load_item(item),
        lambda: load_results([tmp_path / "run"]),
        lambda: read_summaries([tmp_path / "run"]),
    ):
        with pytest.raises(ConfigError, match=expected):
            read()
