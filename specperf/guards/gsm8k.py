"""GSM8K final answers against the references, for the method and for native."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

from specperf.guards.common import (
    QUOTE_CHARS,
    THRESHOLDS,
    GuardResult,
    Record,
    _usable,
    quote,
)

# ---- GSM8K -------------------------------------------------------------------------------

_NUM = r"-?\$?\s*-?\d[\d,]*(?:\.\d+)?"
_ANSWER_PATTERNS = (
    re.compile(r"####\s*(" + _NUM + ")"),
    re.compile(r"\\boxed\{\s*(?:\\text\{)?\s*(" + _NUM + ")"),
    re.compile(r"answer\s*(?:is|:)\s*[:=]?\s*\**\s*(" + _NUM + ")", re.IGNORECASE),
    re.compile(r"答案\s*(?:是|为|：|:)\s*\**\s*(" + _NUM + ")"),
)
_ANY_NUM = re.compile(_NUM)


def normalize_number(s: str) -> str | None:
    """'$1,234.50' → '1234.5'; '18.00' → '18'; None when not a number."""
    s = s.replace(",", "").replace("$", "").replace(" ", "").rstrip(".")
    try:
        value = float(s)
    except ValueError:
        return None
    if not math.isfinite(value):
        return None
    return str(int(value)) if value == int(value) else repr(value)


def extract_final_answer(text: str) -> str | None:
    """The final numeric answer of a GSM8K-style solution: the last '#### N', '\\boxed{N}',
    'answer is N' or '答案是 N'; else the last number in the text."""
    for pat in _ANSWER_PATTERNS:
        found = pat.findall(text)
        if found:
            return normalize_number(found[-1])
    nums = _ANY_NUM.findall(text)
    return normalize_number(nums[-1]) if nums else None


def gsm8k_correct(text: str, reference: str) -> bool:
    got = extract_final_answer(text)
    want = normalize_number(reference.rsplit("####", 1)[-1].strip())
    return got is not None and got == want


def _accuracy(
    records: Iterable[Record], references: Mapping[str, str]
) -> tuple[int, int, Record | None]:
    total = correct = 0
    first_wrong = None
    for rec in _usable(records):
        if int(rec.get("turn", 1)) != 1 or str(rec["prompt_id"]) not in references:
            continue
        total += 1
        if gsm8k_correct(rec.get("text") or "", references[str(rec["prompt_id"])]):
            correct += 1
        elif first_wrong is None:
            first_wrong = rec
    return correct, total, first_wrong


def gsm8k_accuracy(
    records: Iterable[Record],
    references: Mapping[str, str],
    *,
    native: Iterable[Record] | None = None,
    min_accuracy: float | None = None,
    max_drop: float = THRESHOLDS["max_accuracy_drop"],
) -> GuardResult:
    """Final-answer accuracy over the records whose prompt id has a reference. Passes/fails
    on ``min_accuracy`` and, when ``native`` records are given, on a drop of more than
    ``max_drop`` against native's accuracy on the same prompts; with neither, it only reports
    (``passed`` None). Needs a real model: a random-weight model scores ~0."""
    name = "gsm8k_accuracy"
    records = list(records)
    correct, total, wrong = _accuracy(records, references)
    if total == 0:
        return GuardResult(name, None, None, min_accuracy, "not evaluated: no GSM8K outputs")
    acc = correct / total
    details: dict[str, Any] = {"correct": correct, "total": total}
    parts = [f"GSM8K accuracy {correct}/{total} = {acc:.1%}"]
    checks: list[bool] = []
    if min_accuracy is not None:
        checks.append(acc >= min_accuracy)
        parts.append(f"min {min_accuracy:.1%}")
    if native is not None:
        ids = {str(r["prompt_id"]) for r in _usable(records)}
        n_correct, n_total, _ = _accuracy(
            (r for r in native if str(r["prompt_id"]) in ids), references
        )
        if n_total:
            n_acc = n_correct / n_total
            details["native_accuracy"] = n_acc
            checks.append(acc >= n_acc - max_drop)
            parts.append(f"native {n_acc:.1%}, max drop {max_drop:.0%}")
    passed = all(checks) if checks else None
    msg = "; ".join(parts)
    if passed is False and wrong is not None:
        ref = references[str(wrong["prompt_id"])]
        text = wrong.get("text") or ""
        msg += (
            f"; e.g. {wrong['prompt_id']} expected {ref}, extracted "
            f"{extract_final_answer(text)}: {quote(text[-QUOTE_CHARS:])}"
        )
    return GuardResult(name, passed, acc, min_accuracy, msg, details)
