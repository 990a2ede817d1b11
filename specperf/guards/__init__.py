"""Quality guards: speed without correctness is not a pass.

Pure functions over run records (dicts as written to requests.jsonl, the fields of
``specperf.schemas.RequestRecord``) and run summaries. Each returns a ``GuardResult`` that the
suite records in the run summary and can turn into a rule. ``passed`` is ``None`` when the guard
could not be evaluated (no native run, no acceptance counters, no threshold): never a silent pass.

Why relative: random-weight test models loop by nature, so a degenerate output only counts
against a method when native's output for the same prompt is not degenerate; and a MAL only
"collapses" against the same config measured at other concurrencies (seed 1: DFlash at c=4
fell to MAL ~1 with outputs of repeated characters).

One module per guard: ``greedy``, ``degenerate``, ``collapse`` (MAL), ``gsm8k``; ``common``
holds the record type, thresholds and ``GuardResult``; ``run_guards`` is here. Every name stays
importable from ``specperf.guards``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from specperf.guards.collapse import (
    SAME_CONFIG_KEYS,
    mal_collapse,
)
from specperf.guards.common import (
    QUOTE_CHARS,
    THRESHOLDS,
    GuardResult,
    Record,
    _output_text,
    _usable,
    pair_records,
    quote,
)
from specperf.guards.degenerate import (
    degeneracy,
    degenerate_outputs,
    record_degeneracy,
)
from specperf.guards.greedy import (
    _first_difference,
    greedy_equivalence,
    outputs_equal,
)
from specperf.guards.gsm8k import (
    _ANSWER_PATTERNS,
    _ANY_NUM,
    _NUM,
    _accuracy,
    extract_final_answer,
    gsm8k_accuracy,
    gsm8k_correct,
    normalize_number,
)

# ---- all at once -------------------------------------------------------------------------


def run_guards(
    records: Sequence[Record],
    *,
    native: Sequence[Record] | None = None,
    summary: Mapping[str, Any] | None = None,
    peers: Iterable[Mapping[str, Any]] = (),
    references: Mapping[str, str] | None = None,
    temperature: float | None = None,
) -> dict[str, dict[str, Any]]:
    """The guards that apply to one run, as JSON for the run summary (``"guards"`` key).
    Greedy equivalence only at temperature 0; GSM8K only when references are given."""
    out: dict[str, dict[str, Any]] = {}
    if native is not None:
        if temperature == 0:
            out["greedy_equivalence"] = greedy_equivalence(records, native).to_json()
        out["degenerate_outputs"] = degenerate_outputs(records, native).to_json()
    if summary is not None:
        out["mal_collapse"] = mal_collapse(summary, peers, records).to_json()
    if references:
        out["gsm8k_accuracy"] = gsm8k_accuracy(records, references, native=native).to_json()
    return out


__all__ = [
    "QUOTE_CHARS",
    "SAME_CONFIG_KEYS",
    "THRESHOLDS",
    "_ANSWER_PATTERNS",
    "_ANY_NUM",
    "_NUM",
    "GuardResult",
    "Record",
    "_accuracy",
    "_first_difference",
    "_output_text",
    "_usable",
    "degeneracy",
    "degenerate_outputs",
    "extract_final_answer",
    "greedy_equivalence",
    "gsm8k_accuracy",
    "gsm8k_correct",
    "mal_collapse",
    "normalize_number",
    "outputs_equal",
    "pair_records",
    "quote",
    "record_degeneracy",
    "run_guards",
]
