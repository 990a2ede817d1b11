"""What every guard shares: the record type, the thresholds, ``GuardResult``, and pairing a
method's records with native's of the same prompt."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

Record = Mapping[str, Any]

# Every default threshold in one table (suites override per rule).
THRESHOLDS: dict[str, float] = {
    # greedy equivalence: upstream vLLM spec-decode tests accept >= 60% exact matches
    "min_exact_match_rate": 0.60,
    # relative degenerate outputs: (method-only − native-only degenerate pairs) / pairs
    "max_degenerate_excess": 0.05,
    # MAL collapse: accepted tokens per step (MAL − 1) below this share of the peers' median
    "min_mal_share_of_peers": 0.5,
    # degenerate text: a periodic tail of period <= max_period that spans at least
    # max(min_span, min_tail_share × length) elements with >= min_repeats repeats
    "degenerate_max_period": 64,
    "degenerate_min_span": 32,
    "degenerate_min_repeats": 4,
    "degenerate_min_tail_share": 0.25,
    "degenerate_window": 4096,
    # any single non-space character repeated this many times in a row
    "degenerate_max_char_run": 64,
    # GSM8K: accuracy may drop by at most this much against native (absolute)
    "max_accuracy_drop": 0.05,
}
QUOTE_CHARS = 160


@dataclass(frozen=True)
class GuardResult:
    """Outcome of one guard; ``message`` is one line and quotes the offending output."""

    name: str
    passed: bool | None
    value: float | None
    threshold: float | None
    message: str
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def evaluated(self) -> bool:
        return self.passed is not None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def quote(text: str, limit: int = QUOTE_CHARS) -> str:
    """A short, one-line rendering of an output for messages (repr escapes newlines)."""
    body = text if len(text) <= limit else text[:limit] + "…"
    return repr(body) + (f" ({len(text)} chars)" if len(text) > limit else "")


def _output_text(rec: Record) -> str:
    return (rec.get("reasoning_text") or "") + (rec.get("text") or "")


def _usable(records: Iterable[Record]) -> list[Record]:
    return [r for r in records if not r.get("error")]


def pair_records(method: Iterable[Record], native: Iterable[Record]) -> list[tuple[Record, Record]]:
    """Pairs of (method, native) records for the same prompt id and turn; repeats of a prompt
    pair in order of occurrence. Failed requests are left out."""
    by_key: dict[tuple[str, int], list[Record]] = defaultdict(list)
    for rec in _usable(native):
        by_key[(str(rec["prompt_id"]), int(rec.get("turn", 1)))].append(rec)
    seen: dict[tuple[str, int], int] = defaultdict(int)
    pairs = []
    for rec in _usable(method):
        key = (str(rec["prompt_id"]), int(rec.get("turn", 1)))
        i = seen[key]
        seen[key] += 1
        if i < len(by_key.get(key, [])):
            pairs.append((rec, by_key[key][i]))
    return pairs
