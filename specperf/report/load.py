"""Results directories → pandas frames.

A results directory holds one sub-directory per measured item (``summary.json`` +
``requests.jsonl``), plus ``engine-starts.jsonl`` and the suite's verdict file. Several
directories given together (shards, GPUs, hosts) are read as ONE results set; the report never
touches the files, it only reads them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from specperf.dotted import get_path
from specperf.errors import ConfigError
from specperf.fileio import read_jsonl
from specperf.summary_schema import check_summary

NATIVE = "native"
SUMMARY = "summary.json"
REQUESTS = "requests.jsonl"
ENGINE_STARTS = "engine-starts.jsonl"

# Latency blocks of the run summary contract and the statistics kept from each.
LATENCY_BLOCKS = ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms")
LATENCY_STATS = ("mean", "p50", "p90", "p99")


def read_json(path: Path) -> Any:
    """JSON file → object; a malformed file is a one-line error naming it."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: invalid JSON at line {exc.lineno}: {exc.msg}") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None


def find_items(root: Path) -> list[Path]:
    """Item directories under ``root`` (any depth), i.e. those holding a summary.json."""
    return sorted(p.parent for p in root.rglob(SUMMARY))


def _num(x: Any) -> float | None:
    if isinstance(x, bool) or x is None:
        return None
    try:
        return float(x)
    except (TypeError, ValueError):
        return None


def key_text(summary: dict[str, Any]) -> str:
    """The item's key as one string (the suite writes ``key`` as a string or a mapping)."""
    key = summary.get("key")
    if isinstance(key, str) and key:
        return key
    if isinstance(key, dict) and key:
        return "/".join(str(v) for v in key.values() if v not in (None, ""))
    parts = [
        summary.get("model"),
        engine_label(summary),
        summary.get("method"),
        summary.get("dataset"),
        f"c{summary.get('concurrency')}",
    ]
    return "/".join(str(p) for p in parts if p not in (None, ""))


def engine_label(summary: dict[str, Any]) -> str:
    """The engine label the suite gave (falls back to kind-version)."""
    for k in ("engine_label", "label"):
        if summary.get(k):
            return str(summary[k])
    label = get_path(summary, "environment", "engine", "label")
    if label:
        return str(label)
    kind, version = summary.get("engine") or "?", summary.get("engine_version")
    return f"{kind}-{version}" if version else str(kind)


def sampling_label(summary: dict[str, Any]) -> str:
    s = summary.get("sampling")
    if isinstance(s, dict):
        if s.get("name"):
            return str(s["name"])
        if s.get("temperature") is not None:
            return f"T={s['temperature']}"
    if isinstance(s, str):
        return s
    return "default"


def hardware_profile(summary: dict[str, Any]) -> str:
    return str(
        summary.get("hardware_profile")
        or get_path(summary, "environment", "hardware_profile")
        or get_path(summary, "environment", "hardware", "profile")
        or "unknown"
    )


def topology(summary: dict[str, Any]) -> dict[str, Any]:
    t = summary.get("topology")
    t = dict(t) if isinstance(t, dict) else {}
    if t.get("num_speculative_tokens") is None:
        t["num_speculative_tokens"] = summary.get("num_speculative_tokens")
    return t


def method_label(method: str, k: Any) -> str:
    """``eagle3 (k=3)`` — K is part of what the figures mean."""
    if method == NATIVE or k in (None, ""):
        return method
    try:
        return f"{method} (k={int(k)})"
    except (TypeError, ValueError):
        return f"{method} (k={k})"


def flatten(summary: dict[str, Any]) -> dict[str, Any]:
    """One run summary → one flat row (the columns every table and chart reads)."""
    topo = topology(summary)
    method = str(summary.get("method") or NATIVE)  # the kind (native, eagle3, ...)
    name = str(summary.get("method_name") or method)  # the suite's name for this config
    k = topo.get("num_speculative_tokens")
    ev = summary.get("evalscope_estimate") or {}
    row: dict[str, Any] = {
        "key": key_text(summary),
        "model": str(summary.get("model") or "?"),
        "engine": str(summary.get("engine") or "?"),
        "engine_label": engine_label(summary),
        "engine_version": str(summary.get("engine_version") or "?"),
        "method": method,
        "method_name": name,
        "method_label": method_label(name, k),
        "k": _num(k),
        "topk": _num(topo.get("topk")),
        "draft_tokens": _num(topo.get("num_draft_tokens")),
        "dataset": str(summary.get("dataset") or "?"),
        "concurrency": int(summary.get("concurrency") or 0),
        "sampling": sampling_label(summary),
        "hardware_profile": hardware_profile(summary),
        "completed": _num(summary.get("completed")),
        "failed": _num(summary.get("failed")),
        "duration_s": _num(summary.get("duration_s")),
        "output_tokens": _num(summary.get("output_tokens")),
        "tok_s": _num(summary.get("output_throughput_tok_s")),
        "tokens_per_chunk": _num(summary.get("tokens_per_chunk")),
        "acceptance_rate": _num(summary.get("acceptance_rate")),
        "mal": _num(summary.get("mean_acceptance_length")),
        "per_position": list(summary.get("per_position_acceptance") or []),
        "evalscope_L": _num(ev.get("decoded_tokens_per_iter")) if isinstance(ev, dict) else None,
        "evalscope_rate": _num(ev.get("acceptance_rate")) if isinstance(ev, dict) else None,
        "server_generation_tokens": _num(summary.get("server_generation_tokens")),
        "notes": list(summary.get("notes") or []),
    }
    for block in LATENCY_BLOCKS:
        stats = summary.get(block) or {}
        for stat in LATENCY_STATS:
            row[f"{block[:-3]}_{stat}"] = _num(stats.get(stat)) if isinstance(stats, dict) else None
    for block in ("output_tok_s", "decode_tok_s"):
        stats = summary.get(block) or {}
        for stat in ("min", "p50", "max"):
            row[f"{block}_{stat}"] = _num(stats.get(stat)) if isinstance(stats, dict) else None
    return row


ROW_COLUMNS = list(flatten({}).keys())


@dataclass
class Item:
    """One measured item: its directory, its summary and (read on demand) its requests."""

    path: Path
    summary: dict[str, Any]
    run: str

    @property
    def id(self) -> str:
        return self.path.name

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Read on every access: a nightly set holds hundreds of MB of records, so nothing
        keeps them all in memory at once."""
        f = self.path / REQUESTS
        return read_jsonl(f) if f.exists() else []


@dataclass
class ResultsSet:
    """Everything read from one or more results directories, labelled ``label``."""

    label: str
    dirs: list[Path]
    items: list[Item]
    engine_starts: list[dict[str, Any]] = field(default_factory=list)
    verdict_files: list[Path] = field(default_factory=list)

    @cached_property
    def runs(self) -> pd.DataFrame:
        """One row per item (columns: :data:`ROW_COLUMNS` + item, path, run)."""
        rows = []
        for it in self.items:
            row = flatten(it.summary)
            row.update(item=it.id, path=str(it.path), run=self.label)
            rows.append(row)
        df = pd.DataFrame(rows, columns=[*ROW_COLUMNS, "item", "path", "run"])
        return df.sort_values(
            ["model", "engine_label", "dataset", "concurrency", "method"], kind="stable"
        ).reset_index(drop=True)

    def item(self, item_id: str) -> Item:
        for it in self.items:
            if it.id == item_id:
                return it
        raise KeyError(item_id)

    def summaries(self) -> list[dict[str, Any]]:
        return [it.summary for it in self.items]


def load_results(dirs: Sequence[Path | str], label: str | None = None) -> ResultsSet:
    """Read results directories as one set. Missing or empty directories are errors that name
    the directory (a report of nothing would hide a broken run)."""
    paths = [Path(d) for d in dirs]
    if not paths:
        raise ConfigError("no results directory given")
    items: list[Item] = []
    starts: list[dict[str, Any]] = []
    verdicts: list[Path] = []
    seen: dict[str, Path] = {}
    run_label = label or ",".join(p.name for p in paths)
    for root in paths:
        if not root.is_dir():
            raise ConfigError(f"{root}: results directory does not exist")
        found = find_items(root)
        if not found:
            raise ConfigError(f"{root}: no item results (no */{SUMMARY}) found")
        for item_dir in found:
            summary = read_json(item_dir / SUMMARY)
            if not isinstance(summary, dict):
                raise ConfigError(f"{item_dir / SUMMARY}: expected a JSON object")
            check_summary(summary, str(item_dir / SUMMARY))
            if item_dir.name in seen and seen[item_dir.name] != item_dir:
                raise ConfigError(
                    f"{item_dir}: item {item_dir.name!r} also in {seen[item_dir.name]}; "
                    "merge the directories with `specperf merge` first"
                )
            seen[item_dir.name] = item_dir
            items.append(Item(item_dir, summary, run_label))
        for f in sorted(root.rglob(ENGINE_STARTS)):
            starts.extend(read_jsonl(f))
        verdicts.extend(find_verdict_files(root))
    return ResultsSet(run_label, paths, items, starts, verdicts)


VERDICT_FILE_NAMES = ("verdict.json", "verdicts.json", "verdict.jsonl", "verdicts.jsonl")


def find_verdict_files(root: Path) -> list[Path]:
    """Verdict files the suite wrote at the top of a results directory."""
    return [root / n for n in VERDICT_FILE_NAMES if (root / n).is_file()]


# Per-request fields the report tables use (token ids, texts and chunk lists stay on disk).
REQUEST_FIELDS = (
    "index",
    "prompt_id",
    "category",
    "turn",
    "output_tokens",
    "prompt_tokens",
    "ttft_s",
    "e2e_s",
    "finish_reason",
    "error",
)


def requests_frame(items: Iterable[Item]) -> pd.DataFrame:
    """Per-request rows of several items (the fields of :data:`REQUEST_FIELDS` plus
    ``chunks``, the number of content chunks), tagged with the item's grouping columns."""
    tags = (
        "model",
        "engine_label",
        "engine_version",
        "method",
        "method_name",
        "method_label",
        "dataset",
        "concurrency",
        "sampling",
        "hardware_profile",
    )
    rows: list[dict[str, Any]] = []
    for it in items:
        reqs = it.requests
        if not reqs:
            continue
        row = flatten(it.summary)
        tag = {col: row[col] for col in tags}
        for r in reqs:
            rec = {f: r.get(f) for f in REQUEST_FIELDS}
            chunks = r.get("chunk_times_s")
            rec["chunks"] = len(chunks) if isinstance(chunks, list) else 0
            rows.append({**rec, **tag, "item": it.id})
    if not rows:
        return pd.DataFrame()
    out = pd.DataFrame(rows)
    label, version = out["engine_label"].astype(str), out["engine_version"].astype(str)
    same = [v in ("?", "") or v in lab for lab, v in zip(label, version, strict=True)]
    out["engine_name"] = np.where(same, label, label + " " + version)
    return out
