"""Prompt sets → ``Dataset`` of ``PromptItem`` (user turns + category; chat formatting is the
runner's job).

Why this shape: speculative-decoding gains depend on the text, so every run names its set, tier
and a content hash (``Dataset.version``, part of baseline fingerprints). The hash is sha256 over a
canonical JSON of the selected items, so it is the same on every machine and Python version.

Sets (``list_datasets()``): the committed fixtures (MT-Bench, HumanEval, a GSM8K subset, the
project's Chinese set and its English twins, the seed-2-shaped long Chinese prompts) and the
Spec-Bench file, which is read from a local copy and never committed (CNN/DM text). Any other
JSONL file can be given by path: one object per line with ``prompt`` (the ``vllm bench serve``
custom format), ``turns`` (the fixture schema) or Spec-Bench's ``question_id``/``turns``.

Fixture schema, one JSON object per line: ``id``, ``category``, ``turns`` (list of user turns) or
``prompt``, optional ``reference`` (string, or one per turn: turn 1's is kept), ``lang``,
``twin`` (id of the matched item in the other language), ``system``, ``documents`` (ids in
``passages.jsonl`` appended to the first turn; lets long prompts share source text without
copying it). Unknown keys are ignored.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from specperf.errors import ConfigError
from specperf.fileio import read_jsonl_numbered
from specperf.schemas import Dataset, PromptItem

REPO_ROOT = Path(__file__).resolve().parent.parent
FIXTURES_DIR = Path(os.environ.get("SPECPERF_FIXTURES", REPO_ROOT / "fixtures"))
PASSAGES_FILE = "passages.jsonl"

SPEC_BENCH_ENV = "SPECPERF_SPEC_BENCH"
SPEC_BENCH_DEFAULT = REPO_ROOT.parent / "shared" / "datasets" / "spec_bench_question.jsonl"
SPEC_BENCH_SHA256 = "4b6d33e79484f9841c487ee87d1cf6aa8c6066f61d5d482ff09e5a007fafdf04"

TIERS = ("smoke", "full")
TIER_ALIASES = {"nightly": "full"}
SMOKE_SEED = "smoke"
VERSION_HEX = 16


class DatasetMissingError(ConfigError):
    """A set whose text is not shipped (Spec-Bench/CNN-DM) was not found; tests skip on it."""


@dataclass(frozen=True)
class SetSpec:
    """Where a named set comes from and how big its smoke tier is."""

    source: str  # fixture file name, or "spec-bench"
    smoke: int
    description: str
    lang: str | None = None  # keep only items of this language
    category: str | None = None  # keep only this category (Spec-Bench)
    smoke_key: str = "id"  # "twin": rank by the twin's id so zh and en smoke tiers match


SETS: dict[str, SetSpec] = {
    "mt-bench": SetSpec("mt_bench.jsonl", 16, "MT-Bench, 80 questions x 2 turns, 8 categories"),
    "humaneval": SetSpec("humaneval.jsonl", 20, "HumanEval, 164 code-completion prompts"),
    "gsm8k": SetSpec("gsm8k.jsonl", 20, "GSM8K test, 250 hash-ranked questions + final answers"),
    "cnn-dm": SetSpec(
        "spec-bench", 10, "CNN/DM: Spec-Bench summarization (80, local copy)", None, "summarization"
    ),
    "spec-bench": SetSpec("spec-bench", 48, "Spec-Bench question.jsonl, all 480 (local copy)"),
    "zh": SetSpec("zh.jsonl", 16, "project-written Chinese prompts (chat, math, code, sum)", "zh"),
    "zh-en": SetSpec(
        "zh.jsonl", 16, "English twins of the zh set (same id suffix)", "en", None, "twin"
    ),
    "zh-long": SetSpec(
        "zh_long.jsonl",
        4,
        "seed-2 shape: 12 long Chinese prompts, ~2.9-3.7k tokens; max_tokens >= 2048, c=1/2",
    ),
}

# Input-length buckets on the estimated token count of the first turn (+ system prompt):
# (upper bound exclusive, label). Estimate: see ``estimate_tokens``.
LENGTH_BUCKETS: tuple[tuple[float, str], ...] = (
    (128, "0-128"),
    (512, "128-512"),
    (1024, "512-1k"),
    (2048, "1k-2k"),
    (4096, "2k-4k"),
    (math.inf, "4k+"),
)
CJK_CHARS_PER_TOKEN = 1.45  # Qwen3-style BPE: about 1.3-1.6 Chinese chars per token
OTHER_CHARS_PER_TOKEN = 3.8  # English prose and code: about 3.5-4 chars per token


def list_datasets() -> list[str]:
    """Names accepted by ``load_dataset`` (besides a path to a JSONL file)."""
    return list(SETS)


def describe_datasets() -> dict[str, str]:
    return {name: spec.description for name, spec in SETS.items()}


def load_dataset(
    name_or_path: str, tier: str = "full", *, path: str | Path | None = None
) -> Dataset:
    """A named set or a JSONL file, cut to ``tier`` ("smoke" or "full"; "nightly" = full).

    ``path`` overrides where the named set's file is read from (Spec-Bench: also env
    ``SPECPERF_SPEC_BENCH``, then ``../shared/datasets/spec_bench_question.jsonl``)."""
    tier = _check_tier(tier)
    spec = SETS.get(name_or_path)
    if spec is None:
        file = Path(name_or_path)
        if not (file.suffix == ".jsonl" or file.exists()):
            raise ConfigError(
                f"dataset '{name_or_path}': unknown name (choose from {', '.join(SETS)}) "
                "and not a path to a .jsonl file"
            )
        items = load_jsonl_items(file)
        chosen = items if tier == "full" else stratified_subset(items, 16, SMOKE_SEED)
        return make_dataset(file.stem, chosen, tier)

    if spec.source == "spec-bench":
        file = spec_bench_path(path)
        items = load_jsonl_items(file, id_prefix="spec-bench-")
    else:
        file = Path(path) if path is not None else FIXTURES_DIR / spec.source
        if not file.exists():
            raise ConfigError(f"dataset '{name_or_path}': fixture {file} not found")
        items = load_jsonl_items(file)
    if spec.lang is not None:
        items = [it for it in items if it.lang == spec.lang]
    if spec.category is not None:
        items = [it for it in items if it.category == spec.category]
    if not items:
        raise ConfigError(f"dataset '{name_or_path}': {file} holds no matching items")
    if tier == "smoke":
        key = (lambda it: it.twin or it.id) if spec.smoke_key == "twin" else (lambda it: it.id)
        items = stratified_subset(items, spec.smoke, SMOKE_SEED, key=key)
    return make_dataset(name_or_path, items, tier)


def _check_tier(tier: str) -> str:
    tier = TIER_ALIASES.get(tier, tier)
    if tier not in TIERS:
        raise ConfigError(f"dataset tier '{tier}': choose from {', '.join(TIERS)} (or nightly)")
    return tier


def make_dataset(name: str, items: Iterable[PromptItem], tier: str) -> Dataset:
    items = tuple(items)
    return Dataset(name=name, version=content_version(items), items=items, tier=tier)


def content_version(items: Iterable[PromptItem]) -> str:
    """sha256 prefix over canonical JSON (sorted keys, ASCII escapes, no spaces)."""
    canon = json.dumps(
        [asdict(it) for it in items], sort_keys=True, ensure_ascii=True, separators=(",", ":")
    )
    return hashlib.sha256(canon.encode("ascii")).hexdigest()[:VERSION_HEX]


def spec_bench_path(path: str | Path | None = None) -> Path:
    """The local Spec-Bench question.jsonl, sha256-checked; ``DatasetMissingError`` if absent."""
    where = path if path is not None else os.environ.get(SPEC_BENCH_ENV) or SPEC_BENCH_DEFAULT
    file = Path(where)
    if not file.is_file():
        raise DatasetMissingError(
            f"Spec-Bench question.jsonl not found at {file} (CNN/DM text is not shipped: pass "
            f"path=..., set {SPEC_BENCH_ENV}, or place it at {SPEC_BENCH_DEFAULT})"
        )
    digest = hashlib.sha256(file.read_bytes()).hexdigest()
    if digest != SPEC_BENCH_SHA256:
        raise ConfigError(
            f"{file}: sha256 {digest[:16]}… is not Spec-Bench's pinned {SPEC_BENCH_SHA256[:16]}… "
            "(load another file by giving its path as the dataset name)"
        )
    return file


def spec_bench_available(path: str | Path | None = None) -> bool:
    try:
        spec_bench_path(path)
    except DatasetMissingError:
        return False
    return True


# ---- reading files -----------------------------------------------------------------------


def read_jsonl_lines(file: Path) -> list[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-blank line; a bad line → ConfigError naming it."""
    rows = []
    for n, obj in read_jsonl_numbered(file, torn_tail=False):
        if not isinstance(obj, dict):
            raise ConfigError(f"{file}:{n}: expected a JSON object, got {type(obj).__name__}")
        rows.append((n, obj))
    return rows


def write_jsonl(rows: Iterable[Mapping[str, Any]]) -> bytes:
    """Fixture bytes: UTF-8, one object per line, keys in the given order (deterministic)."""
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode("utf-8")


def load_jsonl_items(file: Path, *, id_prefix: str = "") -> list[PromptItem]:
    file = Path(file)
    passages: dict[str, dict[str, Any]] | None = None
    items: list[PromptItem] = []
    seen: dict[str, int] = {}
    for n, row in read_jsonl_lines(file):
        if "documents" in row and passages is None:
            passages = load_passages(file.parent / PASSAGES_FILE)
        item = _item_from_row(row, file, n, id_prefix, passages or {})
        if item.id in seen:
            raise ConfigError(f"{file}:{n}: field 'id': '{item.id}' repeats line {seen[item.id]}")
        seen[item.id] = n
        items.append(item)
    if not items:
        raise ConfigError(f"{file}: no prompts")
    return items


def load_passages(file: Path) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for n, row in read_jsonl_lines(file):
        for key in ("id", "text"):
            if not isinstance(row.get(key), str) or not row[key]:
                raise ConfigError(f"{file}:{n}: field '{key}' missing or not a string")
        out[row["id"]] = row
    return out


def _item_from_row(
    row: dict[str, Any], file: Path, n: int, id_prefix: str, passages: Mapping[str, Any]
) -> PromptItem:
    where = f"{file}:{n}"
    raw_id = next((row[k] for k in ("id", "question_id", "task_id") if k in row), None)
    if raw_id is None:
        item_id = f"{file.stem}-{n}"
    elif isinstance(raw_id, (str, int)) and not isinstance(raw_id, bool) and str(raw_id):
        item_id = f"{id_prefix}{raw_id}"
    else:
        raise ConfigError(f"{where}: field 'id' must be a non-empty string or integer")

    if "turns" in row:
        turns = row["turns"]
        if (
            not isinstance(turns, list)
            or not turns
            or not all(isinstance(t, str) and t for t in turns)
        ):
            raise ConfigError(f"{where}: field 'turns' must be a non-empty list of strings")
    elif "prompt" in row:
        if not isinstance(row["prompt"], str) or not row["prompt"]:
            raise ConfigError(f"{where}: field 'prompt' must be a non-empty string")
        turns = [row["prompt"]]
    else:
        raise ConfigError(f"{where}: field 'prompt' (or 'turns') missing")

    docs = row.get("documents")
    if docs is not None:
        if not isinstance(docs, list) or not all(isinstance(d, str) for d in docs):
            raise ConfigError(f"{where}: field 'documents' must be a list of passage ids")
        missing = [d for d in docs if d not in passages]
        if missing:
            raise ConfigError(f"{where}: field 'documents': {missing} not in {PASSAGES_FILE}")
        parts = [_render_passage(passages[d]) for d in docs]
        turns = ["\n\n".join([turns[0], *parts]), *turns[1:]]

    category = row.get("category", "default")
    if not isinstance(category, str) or not category:
        raise ConfigError(f"{where}: field 'category' must be a non-empty string")
    return PromptItem(
        id=item_id,
        category=category,
        turns=tuple(turns),
        reference=_reference(row.get("reference"), where),
        lang=_opt_str(row, "lang", where) or "en",
        twin=_opt_str(row, "twin", where),
        system=_opt_str(row, "system", where),
    )


def _render_passage(p: Mapping[str, Any]) -> str:
    title = p.get("title")
    return f"{title}\n{p['text']}" if title else str(p["text"])


def _reference(ref: Any, where: str) -> str | None:
    if ref is None:
        return None
    if isinstance(ref, list):  # one per turn (MT-Bench): turn 1's
        ref = ref[0] if ref else None
        return None if ref is None else str(ref)
    if isinstance(ref, (str, int, float)) and not isinstance(ref, bool):
        return str(ref)
    raise ConfigError(f"{where}: field 'reference' must be a string, number or list")


def _opt_str(row: Mapping[str, Any], key: str, where: str) -> str | None:
    val = row.get(key)
    if val is None:
        return None
    if not isinstance(val, str):
        raise ConfigError(f"{where}: field '{key}' must be a string")
    return val


# ---- deterministic subsets ---------------------------------------------------------------


def hash_rank(ids: Iterable[Any], seed: str | int) -> list[Any]:
    """``ids`` ordered by sha256(f"{seed}:{id}") — stable everywhere, unlike random.sample."""
    return sorted(ids, key=lambda i: hashlib.sha256(f"{seed}:{i}".encode()).hexdigest())


def stratified_subset(
    items: list[PromptItem],
    n: int,
    seed: str | int,
    *,
    key: Callable[[PromptItem], str] = lambda it: it.id,
) -> list[PromptItem]:
    """``n`` items taken round-robin over categories (first-seen order), each category in
    hash-rank order; returned in file order. MT-Bench 16 → 2 per category."""
    if n >= len(items):
        return list(items)
    by_cat: dict[str, list[PromptItem]] = {}
    for it in items:
        by_cat.setdefault(it.category, []).append(it)
    queues = []
    for group in by_cat.values():
        order = {k: i for i, k in enumerate(hash_rank([key(it) for it in group], seed))}
        queues.append(sorted(group, key=lambda it: order[key(it)]))
    picked: set[str] = set()
    depth = 0
    while len(picked) < n:
        for q in queues:
            if depth < len(q) and len(picked) < n:
                picked.add(q[depth].id)
        depth += 1
    return [it for it in items if it.id in picked]


# ---- lengths ----------------------------------------------------------------------------


def _is_cjk(ch: str) -> bool:
    o = ord(ch)
    return (
        0x4E00 <= o <= 0x9FFF
        or 0x3400 <= o <= 0x4DBF
        or 0x3000 <= o <= 0x303F  # CJK punctuation
        or 0xFF00 <= o <= 0xFFEF  # full-width forms
        or 0x20000 <= o <= 0x2A6DF
    )


def estimate_tokens(text: str) -> tuple[int, int]:
    """(CJK chars, estimated tokens): cjk/1.45 + other/3.8, rounded up. An estimate for
    bucketing and the manifest; the real count comes from the server's usage."""
    cjk = sum(1 for ch in text if _is_cjk(ch))
    est = math.ceil(cjk / CJK_CHARS_PER_TOKEN + (len(text) - cjk) / OTHER_CHARS_PER_TOKEN)
    return cjk, est


def length_bucket(item: PromptItem) -> str:
    """Input-length bucket label of ``item`` (first turn + system prompt, estimated tokens).
    Labels in order: ``[label for _, label in LENGTH_BUCKETS]``."""
    text = (item.system or "") + item.turns[0]
    _, est = estimate_tokens(text)
    return next(label for bound, label in LENGTH_BUCKETS if est < bound)
