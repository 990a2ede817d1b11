"""Input files checked before any engine starts.

Why: an engine start costs 20 s on a CPU and minutes on a GPU box. A run whose baseline file is
corrupt, or whose dataset file is missing, used to find out only after a start and a full
measurement, and then failed item by item with the same message. Here every input file the
selected items read (the suite, the baseline files of this run's hardware profiles, the prompt
sets) is read once, up front, by the same loaders the run uses; each problem becomes one line
naming file, key and problem, and the run stops with the results path before anything starts.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from specperf.config import Item
from specperf.errors import SpecperfError

PREFLIGHT_FILE = "preflight.json"


def load_item_dataset(item: Item) -> object:
    """The item's prompt set, loaded as the session loads it (a named set, optionally read from
    another path, or a custom JSONL file named by its path)."""
    from specperf import datasets

    name, path = item.key.dataset, item.dataset.path
    if path and name not in datasets.list_datasets():
        return datasets.load_dataset(path, tier=item.tier)
    return datasets.load_dataset(name, tier=item.tier, path=path)


def check_inputs(
    items: Iterable[Item],
    baseline_files: Iterable[Path],
    *,
    load_dataset: Callable[[Item], object] = load_item_dataset,
) -> list[str]:
    """One line per problem, each problem once (items that share a dataset share its error)."""
    from specperf.baselines import load_baselines

    errors: list[str] = []

    def add(exc: SpecperfError) -> None:
        line = " ".join(str(exc).split())  # one line, whatever the loader wrote
        if line not in errors:
            errors.append(line)

    for path in dict.fromkeys(Path(p) for p in baseline_files):
        try:
            load_baselines(path)  # a missing file is an empty one: items report "missing"
        except SpecperfError as exc:
            add(exc)
    seen: set[tuple[str, str | None, str]] = set()
    for item in items:
        key = (item.key.dataset, str(item.dataset.path) if item.dataset.path else None, item.tier)
        if key in seen:
            continue
        seen.add(key)
        try:
            load_dataset(item)
        except SpecperfError as exc:
            add(exc)
    return errors


def failure_text(errors: Sequence[str], results_dir: Path) -> str:
    """What the run prints when its inputs are bad: the errors, then where the run's record is.
    ``preflight.json`` in the results directory keeps the same lines for CI artifacts."""
    results_dir.mkdir(parents=True, exist_ok=True)
    (results_dir / PREFLIGHT_FILE).write_text(
        json.dumps({"errors": list(errors), "engines_started": 0}, indent=1) + "\n",
        encoding="utf-8",
    )
    n = len(errors)
    head = f"specperf: {n} input error{'s' if n != 1 else ''}, no engine started:"
    return "\n".join([head, *(f"  {e}" for e in errors), f"results: {results_dir}"])


__all__ = ["PREFLIGHT_FILE", "check_inputs", "failure_text", "load_item_dataset"]
