"""How the validation resamples a baseline's recorded starts: which starts play "tonight's run"
and which the baseline in each split (leave-k-out, leave-one-pass-out, leave-one-machine-out),
how runs are matched across items, and the weights that count every machine once."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from specperf.baselines import BaselineEntry

# A split: tonight's start indices, the baseline's, and per peer the indices of its starts
# that stay in the pooled spread (those of tonight's run left out).
Split = tuple[list[int], list[int], list[list[int]]]


def moved(values: list[float], direction: str, effect: float) -> list[float]:
    f = (1 - effect) if direction != "lower" else (1 + effect)
    return [v * f for v in values]


def index_splits(n: int, k: int) -> list[tuple[list[int], list[int]]]:
    out = []
    for cur in itertools.combinations(range(n), k):
        out.append((list(cur), [i for i in range(n) if i not in cur]))
    return out


def match_runs(labels: Sequence[Sequence[Hashable]]) -> list[list[Hashable]]:
    """The run each start of several series (an item and its peers, an engine's items) was
    measured in: its pass label. Where no label is shared between series and each has as many
    passes, the i-th pass of every series is taken as one run (the items of one run were
    stamped with their own times, as in files written before a run stamped one date)."""
    passes = [list(dict.fromkeys(lab)) for lab in labels]
    shared = any(c > 1 for c in Counter(p for ps in passes for p in ps).values())
    if len(labels) > 1 and not shared and len({len(ps) for ps in passes}) == 1:
        return [[ps.index(lab) for lab in labs] for ps, labs in zip(passes, labels, strict=True)]
    return [list(lab) for lab in labels]


def leave_run_out(runs: Sequence[Hashable], run: Hashable) -> tuple[list[int], list[int]]:
    """(tonight's indices, the baseline's): the starts of ``run``, and all the others."""
    return [i for i, x in enumerate(runs) if x == run], [i for i, x in enumerate(runs) if x != run]


def machine_label(start: Mapping[str, Any]) -> Hashable:
    """The machine a stored start ran on: its GPU's UUID, else its boot id, else its host name
    (CPU files of one VM store only the host, so all their starts are one machine)."""
    for field in ("gpu_uuid", "boot_id"):
        if start.get(field):
            return (field, start[field])
    return ("host", start.get("host"))


def start_machines(entry: BaselineEntry, metric: str) -> list[Hashable]:
    """The machine of each of ``entry.start_values(metric)``'s values (one unknown machine for
    values without per-start records)."""
    m = entry.metrics.get(metric)
    if m is None:
        return []
    if m.starts:
        return [machine_label(s) for s in m.starts if s.get("value") is not None]
    return [("unrecorded",)] * len(entry.start_values(metric))


def off_machine(machines: Sequence[Hashable], machine: Hashable) -> list[int]:
    """The indices of the starts measured on any machine but ``machine``."""
    return [i for i, m in enumerate(machines) if m != machine]


def machine_weights(split_machines: Sequence[Hashable]) -> list[float]:
    """Per split (in leave-one-machine-out), the weight that makes every machine count once:
    1 / the number of that machine's passes. A machine with four passes would otherwise hold
    four of the splits."""
    n = Counter(split_machines)
    return [1 / n[m] for m in split_machines]


def rate(red: Sequence[bool], weights: Sequence[float]) -> float:
    return sum(w for r, w in zip(red, weights, strict=True) if r) / sum(weights)


def pass_splits(runs: Sequence[Hashable]) -> list[tuple[Hashable, list[int], list[int]]]:
    """Leave-one-pass-out: (run, tonight's indices, the baseline's) per run, in order."""
    return [(r, *leave_run_out(runs, r)) for r in dict.fromkeys(runs)]
