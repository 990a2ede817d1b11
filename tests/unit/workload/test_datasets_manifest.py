"""The committed fixtures match fixtures/MANIFEST.json (offline; no wheel needed)."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from specperf.datasets import FIXTURES_DIR, estimate_tokens, load_dataset, read_jsonl_lines
from tests.tools import build_fixtures

MANIFEST = json.loads((FIXTURES_DIR / "MANIFEST.json").read_text("utf-8"))
ENTRIES = sorted(MANIFEST["files"].items())


def test_every_fixture_file_is_in_the_manifest() -> None:
    on_disk = {p.name for p in FIXTURES_DIR.glob("*.jsonl")}
    assert on_disk == set(MANIFEST["files"])


@pytest.mark.parametrize(("name", "entry"), ENTRIES, ids=[n for n, _ in ENTRIES])
def test_file_hash_size_and_record_count(name: str, entry: dict) -> None:
    data = (FIXTURES_DIR / name).read_bytes()
    assert hashlib.sha256(data).hexdigest() == entry["sha256"], f"{name} changed: rebuild"
    assert len(data) == entry["bytes"]
    assert len(read_jsonl_lines(FIXTURES_DIR / name)) == entry["records"]


@pytest.mark.parametrize("name", ["mt_bench.jsonl", "humaneval.jsonl", "gsm8k.jsonl"])
def test_public_sets_name_their_pinned_wheel_and_member(name: str) -> None:
    src = MANIFEST["files"][name]["source"]
    assert "==" in src["requirement"]
    for key in ("wheel_sha256", "member_sha256"):
        assert len(src[key]) == 64 and int(src[key], 16) >= 0


def test_manifest_sources_agree_with_build_script() -> None:
    for name, src in build_fixtures.SOURCES.items():
        assert MANIFEST["files"][f"{name}.jsonl"]["source"] == src.describe()


def test_the_build_tool_rewrites_the_committed_manifest_unchanged(tmp_path: Path) -> None:
    """``python -m tests.tools.build_fixtures --manifest-only`` on a copy of the committed files
    writes the committed MANIFEST.json byte for byte (offline: it only hashes and counts)."""
    copy = tmp_path / "fixtures"
    shutil.copytree(FIXTURES_DIR, copy)
    assert build_fixtures.main(["--manifest-only", "--fixtures", str(copy)]) == 0
    committed = (FIXTURES_DIR / "MANIFEST.json").read_bytes()
    assert (copy / "MANIFEST.json").read_bytes() == committed


def test_fixtures_stay_small_and_hold_no_spec_bench_text() -> None:
    total = sum(p.stat().st_size for p in FIXTURES_DIR.iterdir() if p.is_file())
    assert total < 600_000
    for p in FIXTURES_DIR.glob("*.jsonl"):
        assert "Summarize: " not in p.read_text("utf-8"), p.name


def test_zh_long_manifest_records_char_counts_and_estimates() -> None:
    recorded = {r["id"]: r for r in MANIFEST["zh_long_prompts"]}
    items = load_dataset("zh-long").items
    assert set(recorded) == {it.id for it in items}
    for it in items:
        text = "\n".join(it.turns)
        cjk, est = estimate_tokens(text)
        assert recorded[it.id] == {
            "id": it.id,
            "chars": len(text),
            "cjk_chars": cjk,
            "est_tokens": est,
        }
