"""Split the perf matrix across hosts: ``--shard i/n`` (1-based, like a CI matrix index).

Every (model, engine) group lands whole on one shard, so native and method items of one model
and engine still run back to back on the same GPU kind and their speedup stays fair.

The split is a pure function of the collected items: every shard host collects the same suite
with the same filters and computes the same assignment, so the shards are disjoint and together
complete without any coordination. Groups are placed heaviest first on the least-loaded shard
(longest-processing-time greedy), ties broken by the group's text, never by ``hash()`` (which
is salted per process).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from specperf.errors import ConfigError

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)

_SHARD_RE = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


def parse_shard(text: str, flag: str = "--shard") -> tuple[int, int]:
    """``"2/4"`` → ``(2, 4)``; anything else is a one-line error naming ``flag``."""
    m = _SHARD_RE.match(text or "")
    if not m:
        raise ConfigError(f"{flag} {text!r}: expected INDEX/TOTAL, e.g. 1/4")
    index, total = int(m.group(1)), int(m.group(2))
    check_shard(index, total, flag)
    return index, total


def check_shard(index: int, total: int, flag: str = "--shard") -> None:
    if total < 1:
        raise ConfigError(f"{flag} {index}/{total}: TOTAL must be at least 1")
    if not 1 <= index <= total:
        raise ConfigError(f"{flag} {index}/{total}: INDEX must be between 1 and {total}")


def key_text(key: Hashable) -> str:
    """Canonical text of a group key: the same on every host and Python process."""
    if isinstance(key, str):
        return key
    if isinstance(key, tuple):
        return json.dumps([key_text(k) for k in key], ensure_ascii=False)
    return json.dumps(key, ensure_ascii=False, sort_keys=True, default=str)


def assign_groups(weights: Mapping[K, float], total: int) -> dict[K, int]:
    """Group → shard index (1-based). Heaviest group first onto the least-loaded shard."""
    check_shard(1, total)
    for key, w in weights.items():
        if not w >= 0:
            raise ConfigError(f"shard weight of group {key_text(key)!r} must be >= 0, got {w}")
    order = sorted(weights, key=lambda k: (-float(weights[k]), key_text(k)))
    loads = [0.0] * total
    out: dict[K, int] = {}
    for key in order:
        target = min(range(total), key=lambda s: (loads[s], s))
        loads[target] += float(weights[key])
        out[key] = target + 1
    return out


def _identity(x: T) -> T:
    return x


def group_weights(
    items: Iterable[T],
    key: Callable[[T], Hashable] = _identity,
    weight: Callable[[T], float] | None = None,
) -> dict[Hashable, float]:
    """Sum of item weights (1 each by default) per group key."""
    out: dict[Hashable, float] = {}
    for it in items:
        k = key(it)
        out[k] = out.get(k, 0.0) + (1.0 if weight is None else float(weight(it)))
    return out


def split(
    items: Sequence[T],
    total: int,
    key: Callable[[T], Hashable] = _identity,
    weight: Callable[[T], float] | None = None,
) -> list[list[T]]:
    """All shards at once (shard 1 first); each keeps the items' original order."""
    assignment = assign_groups(group_weights(items, key, weight), total)
    shards: list[list[T]] = [[] for _ in range(total)]
    for it in items:
        shards[assignment[key(it)] - 1].append(it)
    return shards


def select_shard(
    items_or_group_keys: Sequence[T],
    index: int,
    total: int,
    key: Callable[[T], Hashable] = _identity,
    weight: Callable[[T], float] | None = None,
) -> list[T]:
    """The items of shard ``index`` of ``total`` (1-based), in their original order.

    Pass the collected items with ``key`` returning their (model, engine) group, or pass the
    group keys themselves (one per item, duplicates allowed; ``key`` defaults to identity).
    """
    check_shard(index, total)
    return split(items_or_group_keys, total, key, weight)[index - 1]


# --------------------------------------------------------------------------- CI matrix
DEFAULT_RUNNER_LABELS = ("self-hosted", "linux", "gpu")


def ci_matrix(total: int, labels: str | Sequence[Any] | None = None) -> list[dict[str, Any]]:
    """The CI matrix ``include`` list: one entry (one job, one GPU host) per shard.

    ``labels`` is JSON text or a list: a list of strings (every shard asks for the same runner
    labels; as many hosts as carry them run in parallel) or a list of label lists, one per shard
    (pin a shard to a host). ``total`` 0 means "one shard per label list".
    """
    if isinstance(labels, str):
        text = labels.strip()
        try:
            labels = json.loads(text) if text else None
        except json.JSONDecodeError:
            labels = [p for p in re.split(r"[,\s]+", text) if p]
    if labels is None or labels == []:
        labels = list(DEFAULT_RUNNER_LABELS)
    if not isinstance(labels, list):
        raise ConfigError(f"runner labels {labels!r}: expected a JSON list")
    per_shard = bool(labels) and all(isinstance(x, list) for x in labels)
    if not per_shard and not all(isinstance(x, str) and x for x in labels):
        raise ConfigError(
            f"runner labels {json.dumps(labels)}: expected a list of strings or of label lists"
        )
    if total == 0:
        total = len(labels) if per_shard else 1
    check_shard(1, total, "--shards")
    if per_shard and len(labels) != total:
        raise ConfigError(
            f"runner labels: {len(labels)} label lists for {total} shards (give one per shard)"
        )
    return [
        {
            "shard": f"{i}/{total}",
            "index": i,
            "total": total,
            "labels": list(labels[i - 1]) if per_shard else list(labels),
        }
        for i in range(1, total + 1)
    ]


# --------------------------------------------------------------------------- baseline updates
def merge_baseline_updates(into: Path | str, shard_dirs: Sequence[Path | str]) -> list[str]:
    """Fold the baseline entries each shard rewrote (``--update-baselines``) into ``into``.

    Every shard starts from the same checked-out ``into`` directory and rewrites only its own
    groups' entries; an entry is taken from a shard when it differs from the checked-out one.
    Two shards rewriting one entry differently cannot happen with disjoint shards and is an
    error. Writes go through ``baselines.update_baselines`` (lock, merge, atomic replace).
    Returns ``file: key`` for every applied entry.
    """
    from specperf.baselines import BaselineEntry, BaselineFile, load_baselines, update_baselines

    into = Path(into)
    originals = {p.name: load_baselines(p) for p in sorted(into.glob("*.json"))}
    picked: dict[str, dict[str, tuple[BaselineEntry, Path]]] = {}
    profiles: dict[str, str | None] = {}
    for shard in map(Path, shard_dirs):
        if not shard.is_dir():
            raise ConfigError(f"{shard}: shard baselines directory does not exist")
        for f in sorted(shard.glob("*.json")):
            new = load_baselines(f)
            old = originals.get(f.name) or BaselineFile(into / f.name)
            profiles.setdefault(f.name, new.hardware_profile)
            for key, entry in new.entries.items():
                before = old.entries.get(key)
                if before is not None and before.to_json() == entry.to_json():
                    continue
                seen = picked.setdefault(f.name, {}).get(key)
                if seen is not None and seen[0].to_json() != entry.to_json():
                    raise ConfigError(
                        f"{f.name}: entry {key} rewritten differently by {seen[1]} and {shard}"
                    )
                picked[f.name][key] = (entry, shard)
    applied = []
    for name, entries in sorted(picked.items()):
        update_baselines(
            into / name, [e for e, _ in entries.values()], hardware_profile=profiles.get(name)
        )
        applied += [f"{name}: {k}" for k in sorted(entries)]
    return applied


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m specperf.shard matrix --shards N --labels JSON`` → the CI matrix as JSON;
    ``python -m specperf.shard merge-baselines --into baselines SHARD_DIR...`` → one baselines
    directory from the shards' ``--update-baselines`` output."""
    import argparse
    import sys

    p = argparse.ArgumentParser(prog="python -m specperf.shard", description=main.__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("matrix", help="print the CI matrix (one entry per shard) as JSON")
    m.add_argument("--shards", default="0", help="number of shards/hosts (0: one per label list)")
    m.add_argument("--labels", default="", help="runner labels: JSON list, or list of lists")
    b = sub.add_parser("merge-baselines", help="fold shards' refreshed baselines into one dir")
    b.add_argument("--into", type=Path, required=True, help="the checked-out baselines dir")
    b.add_argument("shards", nargs="+", type=Path, help="each shard's baselines directory")
    args = p.parse_args(argv)
    if args.cmd == "merge-baselines":
        try:
            for line in merge_baseline_updates(args.into, args.shards):
                print(f"updated {line}")
        except ConfigError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        return 0
    try:
        total = int(args.shards or 0)
    except ValueError:
        print(f"--shards {args.shards!r}: expected a whole number", file=sys.stderr)
        return 2
    try:
        print(json.dumps({"include": ci_matrix(total, args.labels)}))
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
