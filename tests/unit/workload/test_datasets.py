"""Every set loads with stable ids and the promised sizes; bad files give one-line errors."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import pytest

from specperf.datasets import (
    LENGTH_BUCKETS,
    SPEC_BENCH_DEFAULT,
    DatasetMissingError,
    estimate_tokens,
    hash_rank,
    length_bucket,
    list_datasets,
    load_dataset,
    spec_bench_available,
)
from specperf.errors import ConfigError
from specperf.schemas import PromptItem

# name -> (full size, smoke size)
SIZES = {
    "mt-bench": (80, 16),
    "humaneval": (164, 20),
    "gsm8k": (250, 20),
    "cnn-dm": (80, 10),
    "spec-bench": (480, 48),
}
OFFLINE = [n for n in SIZES if n not in ("cnn-dm", "spec-bench")]
SPEC_BENCH_AT = os.environ.get("SPECPERF_SPEC_BENCH") or SPEC_BENCH_DEFAULT
needs_spec_bench = pytest.mark.skipif(
    not spec_bench_available(), reason=f"Spec-Bench copy absent ({SPEC_BENCH_AT})"
)


def test_list_datasets_names_every_set() -> None:
    assert set(SIZES) | {"zh", "zh-en", "zh-long"} == set(list_datasets())


@pytest.mark.parametrize("name", OFFLINE)
@pytest.mark.parametrize("tier", ["full", "smoke"])
def test_offline_sets_have_promised_sizes_and_unique_ids(name: str, tier: str) -> None:
    ds = load_dataset(name, tier)
    full, smoke = SIZES[name]
    assert len(ds.items) == (full if tier == "full" else smoke)
    assert len({it.id for it in ds.items}) == len(ds.items)
    assert ds.tier == tier and ds.name == name
    assert all(it.turns and all(t.strip() for t in it.turns) for it in ds.items)


@pytest.mark.parametrize("name", OFFLINE)
def test_ids_and_version_are_stable(name: str) -> None:
    a, b = load_dataset(name), load_dataset(name)
    assert [it.id for it in a.items] == [it.id for it in b.items]
    assert a.version == b.version and len(a.version) == 16
    assert load_dataset(name, "smoke").version != a.version


def test_known_versions_do_not_drift() -> None:
    """The content hash goes into baseline fingerprints: a change must be deliberate."""
    assert load_dataset("mt-bench").items[0].id == "mt-bench-81"
    assert load_dataset("humaneval").items[0].id == "HumanEval/0"
    assert load_dataset("gsm8k").items[0].id == "gsm8k-test-0007"


def test_mt_bench_shape() -> None:
    ds = load_dataset("mt-bench")
    assert all(len(it.turns) == 2 for it in ds.items)
    cats = Counter(it.category for it in ds.items)
    assert len(cats) == 8 and set(cats.values()) == {10}
    smoke = Counter(it.category for it in load_dataset("mt-bench", "smoke").items)
    assert set(smoke.values()) == {2}
    with_ref = Counter(it.category for it in ds.items if it.reference)
    assert with_ref["math"] == with_ref["reasoning"] == 10


def test_gsm8k_has_numeric_final_answers() -> None:
    for it in load_dataset("gsm8k").items:
        assert it.reference is not None
        float(it.reference.replace(",", ""))


def test_nightly_is_an_alias_of_full() -> None:
    assert load_dataset("gsm8k", "nightly").version == load_dataset("gsm8k").version


@needs_spec_bench
def test_cnn_dm_from_spec_bench() -> None:
    ds = load_dataset("cnn-dm")
    assert len(ds.items) == 80
    assert {it.category for it in ds.items} == {"summarization"}
    ids = [it.id for it in ds.items]
    assert ids[0] == "spec-bench-241" and ids[-1] == "spec-bench-320"
    assert all(it.turns[0].startswith("Summarize: ") for it in ds.items)
    smoke = load_dataset("cnn-dm", "smoke")
    assert len(smoke.items) == 10 and set(smoke.items) <= set(ds.items)


@needs_spec_bench
def test_spec_bench_all_categories() -> None:
    ds = load_dataset("spec-bench")
    assert len(ds.items) == SIZES["spec-bench"][0]
    assert len(load_dataset("spec-bench", "smoke").items) == SIZES["spec-bench"][1]


def test_cnn_dm_absent_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(DatasetMissingError, match="not found"):
        load_dataset("cnn-dm", path=tmp_path / "nope.jsonl")


def test_cnn_dm_wrong_hash_is_refused(tmp_path: Path) -> None:
    f = tmp_path / "question.jsonl"
    f.write_text('{"question_id": 1, "category": "summarization", "turns": ["x"]}\n')
    with pytest.raises(ConfigError, match="sha256"):
        load_dataset("cnn-dm", path=f)


def test_env_var_points_at_spec_bench(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECPERF_SPEC_BENCH", str(tmp_path / "absent.jsonl"))
    with pytest.raises(DatasetMissingError, match=r"absent\.jsonl"):
        load_dataset("cnn-dm")


def test_custom_prompt_file(tmp_path: Path) -> None:
    f = tmp_path / "mine.jsonl"
    f.write_text(
        json.dumps({"prompt": "hello there"})
        + "\n\n"
        + json.dumps({"id": "b", "category": "x", "turns": ["one", "two"], "reference": 4})
        + "\n"
    )
    ds = load_dataset(str(f))
    assert ds.name == "mine"
    assert ds.items[0] == PromptItem(id="mine-1", category="default", turns=("hello there",))
    assert ds.items[1].turns == ("one", "two") and ds.items[1].reference == "4"


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", r"bad\.jsonl:2: invalid JSON"),
        ('{"id": "q"}', r"bad\.jsonl:2: field 'prompt' \(or 'turns'\) missing"),
        ('{"turns": []}', r"bad\.jsonl:2: field 'turns'"),
        ('{"prompt": 3}', r"bad\.jsonl:2: field 'prompt'"),
        ('{"id": "a", "prompt": "again"}', r"bad\.jsonl:2: field 'id': 'a' repeats line 1"),
        ('{"prompt": "x", "category": ""}', r"bad\.jsonl:2: field 'category'"),
        ('{"prompt": "x", "documents": ["nope"]}', r"bad\.jsonl:2: field 'documents'"),
        ("[1, 2]", r"bad\.jsonl:2: expected a JSON object"),
    ],
)
def test_bad_file_errors_name_file_line_and_field(tmp_path: Path, line: str, message: str) -> None:
    f = tmp_path / "bad.jsonl"
    (tmp_path / "passages.jsonl").write_text('{"id": "p", "text": "t"}\n')
    f.write_text('{"id": "a", "prompt": "first"}\n' + line + "\n")
    with pytest.raises(ConfigError, match=message) as info:
        load_dataset(str(f))
    assert "\n" not in str(info.value)


def test_unknown_name_and_tier() -> None:
    with pytest.raises(ConfigError, match="unknown name"):
        load_dataset("mt_bench_typo")
    with pytest.raises(ConfigError, match="tier"):
        load_dataset("gsm8k", "weekly")


def test_documents_are_appended_to_the_first_turn(tmp_path: Path) -> None:
    (tmp_path / "passages.jsonl").write_text(
        json.dumps({"id": "p1", "title": "T1", "text": "body one"})
        + "\n"
        + json.dumps({"id": "p2", "text": "body two"})
        + "\n"
    )
    f = tmp_path / "docs.jsonl"
    f.write_text(json.dumps({"id": "d", "turns": ["Read:", "Then?"], "documents": ["p1", "p2"]}))
    item = load_dataset(str(f)).items[0]
    assert item.turns == ("Read:\n\nT1\nbody one\n\nbody two", "Then?")


def test_hash_rank_is_the_documented_rule() -> None:
    import hashlib

    ids = list(range(50))
    expect = sorted(ids, key=lambda i: hashlib.sha256(f"7:{i}".encode()).hexdigest())
    assert hash_rank(ids, 7) == expect


def test_estimate_tokens_and_buckets() -> None:
    assert estimate_tokens("abcd" * 38) == (0, 40)
    assert estimate_tokens("中文" * 29) == (58, 40)
    labels = [label for _, label in LENGTH_BUCKETS]
    short = PromptItem(id="s", category="c", turns=("hi",))
    long_zh = PromptItem(id="l", category="c", turns=("字" * 4500,))
    assert length_bucket(short) == labels[0]
    assert length_bucket(long_zh) == "2k-4k"
    assert length_bucket(PromptItem(id="x", category="c", turns=("x" * 40000,))) == "4k+"


def test_every_fixture_item_has_a_bucket() -> None:
    labels = {label for _, label in LENGTH_BUCKETS}
    for name in OFFLINE:
        assert {length_bucket(it) for it in load_dataset(name).items} <= labels


# ---- the project's Chinese sets ----------------------------------------------------------

ZH_SIZES = {"zh": (64, 16), "zh-en": (64, 16), "zh-long": (12, 4)}


def cjk_share(text: str) -> float:
    return estimate_tokens(text)[0] / len(text)


@pytest.mark.parametrize("name", list(ZH_SIZES))
@pytest.mark.parametrize("tier", ["full", "smoke"])
def test_zh_sets_sizes(name: str, tier: str) -> None:
    full, smoke = ZH_SIZES[name]
    ds = load_dataset(name, tier)
    assert len(ds.items) == (full if tier == "full" else smoke)
    assert len({it.id for it in ds.items}) == len(ds.items)


def test_zh_and_en_twins_match_one_to_one() -> None:
    zh, en = load_dataset("zh").items, load_dataset("zh-en").items
    by_id = {it.id: it for it in en}
    for it in zh:
        twin = by_id[it.twin]
        assert twin.twin == it.id and twin.category == it.category
        assert it.id.split("-", 1)[1] == twin.id.split("-", 1)[1]  # same suffix
        assert (it.reference is None) == (twin.reference is None)
        assert it.lang == "zh" and twin.lang == "en"
        assert cjk_share(it.turns[0]) > (0.1 if it.category == "code" else 0.5), it.id
        assert cjk_share(twin.turns[0]) < 0.02, twin.id
    smoke_zh = [it.twin for it in load_dataset("zh", "smoke").items]
    assert smoke_zh == [it.id for it in load_dataset("zh-en", "smoke").items]


def test_zh_categories_cover_chat_math_code_and_summarization() -> None:
    cats = Counter(it.category for it in load_dataset("zh").items)
    assert cats["math"] >= 10 and cats["code"] >= 10 and cats["summarization"] >= 10
    chat = sum(v for k, v in cats.items() if k not in ("math", "code", "summarization"))
    assert chat >= 30
    assert len(Counter(it.category for it in load_dataset("zh", "smoke").items)) == len(cats)


def test_zh_summarization_inputs_are_long() -> None:
    for it in load_dataset("zh").items:
        if it.category == "summarization":
            assert len(it.turns[0]) > 500


def test_zh_long_has_the_seed2_shape() -> None:
    items = load_dataset("zh-long").items
    assert 11 <= len(items) <= 16
    for it in items:
        text = it.turns[0]
        _, est = estimate_tokens(text)
        assert 4000 <= len(text) <= 5500, (it.id, len(text))
        assert 2500 <= est <= 3800, (it.id, est)
        assert cjk_share(text) > 0.9
    # distinct task text first: no two prompts share a cacheable prefix
    assert len({it.turns[0][:32] for it in items}) == len(items)
