"""The prompts of ``specperf bench``: a dataset name or a prompt JSONL file."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from specperf.errors import ConfigError
from specperf.schemas import Dataset, PromptItem


def load_prompt_jsonl(path: Path) -> Dataset:
    """``vllm bench serve --dataset-name custom`` format: one JSON object with a ``prompt``
    string per line (``id`` and ``category`` optional). Ids default to the line number."""
    items: list[PromptItem] = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ConfigError(f"--dataset {path}: cannot read ({exc.strerror})") from None
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{path}:{n}: not valid JSON ({exc.msg})") from None
        if not isinstance(row, dict) or not isinstance(row.get("prompt"), str):
            raise ConfigError(f"{path}:{n}: field 'prompt' (a string) is missing")
        if not row["prompt"].strip():
            raise ConfigError(f"{path}:{n}: field 'prompt' is empty")
        item_id = str(row.get("id", f"line-{n:05d}"))
        items.append(
            PromptItem(
                id=item_id, category=str(row.get("category", "custom")), turns=(row["prompt"],)
            )
        )
    if not items:
        raise ConfigError(f"--dataset {path}: no prompts")
    ids = [it.id for it in items]
    if len(set(ids)) != len(ids):
        raise ConfigError(f"--dataset {path}: duplicate 'id' values")
    canon = json.dumps([[it.id, it.category, it.turns[0]] for it in items], ensure_ascii=False)
    version = hashlib.sha256(canon.encode()).hexdigest()[:12]
    return Dataset(name=path.stem, version=version, items=tuple(items), tier="full")


def _is_prompt_jsonl(path: Path) -> bool:
    try:
        with path.open(encoding="utf-8") as fh:
            for line in fh:
                if line.strip():
                    row = json.loads(line)
                    return isinstance(row, dict) and "prompt" in row
    except (OSError, ValueError):
        return False
    return False


def load_bench_dataset(name_or_path: str, tier: str = "full") -> Dataset:
    """A JSONL file of prompts (read here, so bench works standalone) or a named set."""
    path = Path(name_or_path)
    if path.is_file() and _is_prompt_jsonl(path):
        return load_prompt_jsonl(path)
    try:
        from specperf.datasets import load_dataset
    except ImportError:
        if path.exists():
            raise ConfigError(f"--dataset {path}: not a JSONL file with a 'prompt' field") from None
        raise ConfigError(
            f"--dataset {name_or_path!r}: no such file, and named sets are not available"
        ) from None
    return load_dataset(name_or_path, tier=tier)
