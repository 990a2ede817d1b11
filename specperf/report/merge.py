"""``specperf merge DIR... --out DIR``: results of several shards, GPUs or hosts → one results
set with one verdict.

Item directories are copied as they are (a key measured twice is an error: nothing is
silently dropped or averaged); ``engine-starts.jsonl`` files are concatenated with their
source; the suite snapshots must agree on everything a verdict reads; other top-level files
are kept under ``shards/<name>/``. The shards' own verdicts are NOT merged: each shard could
only judge what it measured (a speedup rule whose native ran on another shard was "not
evaluated" there), so the verdict is evaluated again over the merged set by
``specperf.verdict`` and written to ``verdicts.jsonl`` and ``verdict.json``.
"""

from __future__ import annotations

import argparse
import filecmp
import json
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specperf import verdict
from specperf.baselines import load_baselines
from specperf.errors import ConfigError
from specperf.report.load import ENGINE_STARTS, SUMMARY, find_items, read_json, read_jsonl
from specperf.results import write_json_atomic
from specperf.summary_schema import check_summary

# Parts of suite.json a verdict reads: shards must agree on them.
SNAPSHOT_VERDICT_KEYS = ("metrics", "rules", "known_issues", "workload", "baseline_file")
OWN_FILES = {ENGINE_STARTS, verdict.SUITE_SNAPSHOT, verdict.VERDICTS, "verdict.json"}


@dataclass
class MergeResult:
    out: Path
    items: int
    sources: dict[str, int]
    verdict: verdict.Verdict


def _source_names(dirs: Sequence[Path]) -> list[str]:
    """Distinct names for the sources (directory names, made unique by their parents)."""
    names = [d.name or str(d) for d in dirs]
    if len(set(names)) == len(names):
        return names
    return [f"{i}-{n}" for i, n in enumerate(names)]


def _snapshot(dirs: Sequence[Path]) -> dict[str, Any] | None:
    chosen: dict[str, Any] | None = None
    chosen_from: Path | None = None
    for d in dirs:
        f = d / verdict.SUITE_SNAPSHOT
        if not f.is_file():
            continue
        snap = read_json(f)
        if chosen is None:
            chosen, chosen_from = snap, f
            continue
        for k in SNAPSHOT_VERDICT_KEYS:
            if chosen.get(k) != snap.get(k):
                raise ConfigError(
                    f"{f}: '{k}' differs from {chosen_from}; these results come from "
                    "different suite settings and cannot share one verdict"
                )
    return chosen


def merge(
    dirs: Sequence[Path | str],
    out: Path | str,
    *,
    baseline: Path | str | None = None,
    baselines_dir: Path | str | None = None,
    hardware_profile: str | None = None,
) -> MergeResult:
    """Merge ``dirs`` into ``out`` (new or empty) and evaluate one verdict over it."""
    srcs = [Path(d) for d in dirs]
    out = Path(out)
    if not srcs:
        raise ConfigError("merge: no results directory given")
    for d in srcs:
        if not d.is_dir():
            raise ConfigError(f"{d}: results directory does not exist")
        if not find_items(d):
            raise ConfigError(f"{d}: no item results (no */{SUMMARY}) found")
        if out.resolve() == d.resolve() or out.resolve() in d.resolve().parents:
            raise ConfigError(f"--out {out}: must not be one of the inputs or inside one")
    if out.exists() and any(out.iterdir()):
        raise ConfigError(f"--out {out}: exists and is not empty")
    if baseline is not None and not Path(baseline).is_file():
        raise ConfigError(f"--baseline {baseline}: no such file")
    snap = _snapshot(srcs)
    names = _source_names(srcs)
    out.mkdir(parents=True, exist_ok=True)

    placed: dict[Path, Path] = {}  # destination item dir -> source item dir
    keys: dict[str, Path] = {}
    counts: dict[str, int] = {}
    starts: list[dict[str, Any]] = []
    for src, name in zip(srcs, names, strict=True):
        items = find_items(src)
        counts[name] = len(items)
        for item in items:
            rel = item.relative_to(src) if item != src else Path(name)
            dest = out / rel
            key = check_summary(read_json(item / SUMMARY), str(item / SUMMARY)).get("key")
            key_s = json.dumps(key, sort_keys=True) if key is not None else None
            if key_s is not None and key_s in keys and not _same_item(keys[key_s], item):
                raise ConfigError(
                    f"{item}: key {key} was also measured in {keys[key_s]}; a merge keeps "
                    "every measurement, so remove one of them first"
                )
            if dest in placed:
                if _same_item(placed[dest], item):
                    continue  # the same files reached us twice (overlapping copies)
                raise ConfigError(f"{item}: item directory {rel} also comes from {placed[dest]}")
            if key_s is not None:
                keys[key_s] = item
            placed[dest] = item
            shutil.copytree(item, dest)
        for f in sorted(src.rglob(ENGINE_STARTS)):
            starts += [{**row, "source": name} for row in read_jsonl(f)]
        tops = {p.relative_to(src).parts[0] for p in items if p != src}
        if src not in items:
            _keep_extras(src, out / "shards" / name, tops)

    if starts:
        with (out / ENGINE_STARTS).open("w", encoding="utf-8") as fh:
            for row in starts:
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    if snap is not None:
        merged = {**snap, "merged_from": [str(d) for d in srcs]}
        selected = verdict.selected_from_snapshots(srcs)  # shards: what any of them selected
        merged.pop("selected", None)
        if selected is not None:
            merged["selected"] = sorted(selected)
        write_json_atomic(out / verdict.SUITE_SNAPSHOT, merged)

    v = verdict.evaluate_results(
        [out],
        baselines=load_baselines(baseline) if baseline else None,
        baselines_dir=baselines_dir,
        hardware_profile=hardware_profile,
    )
    verdict.write_verdicts(out / verdict.VERDICTS, v.checks)
    write_json_atomic(out / "verdict.json", v.to_json())
    write_json_atomic(
        out / "merge.json",
        {"sources": {n: str(d) for n, d in zip(names, srcs, strict=True)}, "items": counts},
    )
    return MergeResult(out, len(placed), counts, v)


def _same_item(a: Path, b: Path) -> bool:
    cmp = filecmp.dircmp(a, b)
    return not (cmp.left_only or cmp.right_only or cmp.diff_files)


def _keep_extras(src: Path, dest: Path, item_tops: set[str]) -> None:
    """Top-level files and folders of a source that are not items or merged here (logs,
    pytest-benchmark JSON, the shard's own verdicts) are kept under ``shards/<name>``."""
    for p in sorted(src.iterdir()):
        if p.name in item_tops and p.is_dir():
            continue
        target = dest / p.name
        target.parent.mkdir(parents=True, exist_ok=True)
        if p.is_dir():
            shutil.copytree(p, target, ignore=shutil.ignore_patterns("*.lock"))
        elif not p.name.endswith(".lock"):
            shutil.copy2(p, target)


# --------------------------------------------------------------------------- CLI
def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("results", nargs="+", type=Path, help="results directories to merge")
    parser.add_argument("--out", type=Path, required=True, help="new (or empty) directory")
    parser.add_argument("--baseline", type=Path, default=None, help="baseline file to judge with")
    parser.add_argument(
        "--baselines-dir",
        type=Path,
        default=Path("baselines"),
        help="per-hardware baseline files (default ./baselines)",
    )
    parser.add_argument("--hardware-profile", default=None, help="whose baseline file to use")
    parser.add_argument("--report", action="store_true", help="also write the report into --out")
    parser.add_argument(
        "--check",
        action="store_true",
        help="exit 1 when the merged verdict has failures (default: 0 once merged; gating is "
        "`specperf verdict`'s job)",
    )


def run(args: argparse.Namespace) -> int:
    res = merge(
        args.results,
        args.out,
        baseline=args.baseline,
        baselines_dir=args.baselines_dir,
        hardware_profile=args.hardware_profile,
    )
    print(
        f"merged {res.items} items from "
        + ", ".join(f"{n} ({c})" for n, c in res.sources.items())
        + f" into {res.out}"
    )
    print(verdict.format_table(res.verdict.checks, include_pass=False))
    counts = res.verdict.to_json()["counts"]
    print(", ".join(f"{n} {s.replace('_', ' ')}" for s, n in sorted(counts.items())))
    if args.report:
        from specperf.report.command import load_builder

        paths = load_builder()([res.out], baseline=args.baseline, out=res.out / "report")
        print(f"report: {paths.markdown}\nreport: {paths.html}")
    for c in res.verdict.failed:
        print(f"FAIL {c.line()}", file=sys.stderr)
    return 1 if args.check and res.verdict.failed else 0
