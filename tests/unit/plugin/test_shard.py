"""--shard i/n: complete, disjoint, deterministic, (model, engine) groups kept whole."""

from __future__ import annotations

import itertools
import os
import random
import subprocess
import sys
from collections import Counter

import pytest

from specperf.errors import ConfigError
from specperf.shard import assign_groups, parse_shard, select_shard, split

MODELS = ["Qwen/Qwen3-8B", "Qwen/Qwen3.6-35B-A3B", "tiny-qwen3"]
ENGINES = ["vllm", "sglang", "transformers", "vllm-0.33.0"]
METHODS = ["native", "eagle3", "mtp", "dflash"]
DATASETS = ["mt-bench", "humaneval", "gsm8k"]
CONCURRENCY = [1, 4, 16]


def matrix() -> list[tuple[str, str, str, str, int]]:
    return list(itertools.product(MODELS, ENGINES, METHODS, DATASETS, CONCURRENCY))


def group(item: tuple[str, str, str, str, int]) -> tuple[str, str]:
    return item[0], item[1]


@pytest.mark.parametrize("total", [1, 2, 3, 4, 5, 7, 12, 20])
def test_shards_are_complete_and_disjoint(total: int) -> None:
    items = matrix()
    shards = [select_shard(items, i, total, key=group) for i in range(1, total + 1)]
    seen = Counter(it for s in shards for it in s)
    assert set(seen) == set(items)
    assert all(n == 1 for n in seen.values())


@pytest.mark.parametrize("total", [2, 3, 5])
def test_groups_stay_together_and_order_is_kept(total: int) -> None:
    items = matrix()
    owner: dict[tuple[str, str], int] = {}
    for i in range(1, total + 1):
        shard = select_shard(items, i, total, key=group)
        assert shard == [it for it in items if it in set(shard)]  # original order
        for it in shard:
            assert owner.setdefault(group(it), i) == i


def test_balanced_by_weight() -> None:
    items = matrix()  # 12 groups of 36 items
    sizes = [len(s) for s in split(items, 4, key=group)]
    assert sizes == [108, 108, 108, 108]
    heavy = {("a", "x"): 10.0, ("b", "x"): 1.0, ("c", "x"): 1.0, ("d", "x"): 1.0}
    a = assign_groups(heavy, 2)
    assert a[("a", "x")] != a[("b", "x")] == a[("c", "x")] == a[("d", "x")]


def test_independent_of_input_order_and_process() -> None:
    items = matrix()
    shuffled = items[:]
    random.Random(3).shuffle(shuffled)
    for i in (1, 2, 3):
        assert set(select_shard(items, i, 3, key=group)) == set(
            select_shard(shuffled, i, 3, key=group)
        )
    # A different process with a different hash seed computes the same split.
    code = (
        "import itertools, json; from specperf.shard import select_shard;"
        f"items = list(itertools.product({MODELS!r}, {ENGINES!r}));"
        "print(json.dumps(select_shard(items, 2, 3)))"
    )
    outs = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
        ).stdout
        for seed in ("1", "2", "99")
    }
    assert len(outs) == 1


def test_group_keys_can_be_passed_directly() -> None:
    keys = [("m", "vllm"), ("m", "vllm"), ("m", "sglang"), ("n", "vllm")]
    got = [select_shard(keys, i, 2) for i in (1, 2)]
    assert sorted(got[0] + got[1]) == sorted(keys)
    assert got[0].count(("m", "vllm")) in (0, 2)


def test_more_shards_than_groups_leaves_some_empty() -> None:
    shards = split([("m", "e1"), ("m", "e2")], 4)
    assert sorted(len(s) for s in shards) == [0, 0, 1, 1]


@pytest.mark.parametrize(
    ("text", "expected"), [("1/4", (1, 4)), (" 4 / 4 ", (4, 4)), ("1/1", (1, 1))]
)
def test_parse_shard(text: str, expected: tuple[int, int]) -> None:
    assert parse_shard(text) == expected


@pytest.mark.parametrize("text", ["0/4", "5/4", "1/0", "a/b", "2", "", "-1/3", "1/2/3"])
def test_parse_shard_rejects_bad_input_naming_the_flag(text: str) -> None:
    with pytest.raises(ConfigError, match="--shard"):
        parse_shard(text)


def test_negative_weight_is_an_error() -> None:
    with pytest.raises(ConfigError, match="weight"):
        assign_groups({"a": -1.0}, 2)
