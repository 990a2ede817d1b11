"""Quality guards: speed without correctness is not a pass.

Pure functions over run records (dicts as written to requests.jsonl, the fields of
``specperf.schemas.RequestRecord``) and run summaries. Each returns a ``GuardResult`` that the
suite records in the run summary and can turn into a rule. ``passed`` is ``None`` when the guard
could not be evaluated (no native run, no acceptance counters, no threshold): never a silent pass.

Why relative: random-weight test models loop by nature, so a degenerate output only counts
against a method when native's output for the same prompt is not degenerate; and a MAL only
"collapses" against the same config measured at other concurrencies (seed 1: DFlash at c=4
fell to MAL ~1 with outputs of repeated characters).
"""

from __future__ import annotations

import math
import re
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
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


# ---- greedy equivalence ------------------------------------------------------------------


def outputs_equal(a: Record, b: Record) -> tuple[bool, str]:
    """Exact match on token ids where both records carry them, else on text (reasoning +
    content). Returns (equal, basis)."""
    ta, tb = a.get("token_ids"), b.get("token_ids")
    if ta is not None and tb is not None:
        return list(ta) == list(tb), "token_ids"
    return _output_text(a) == _output_text(b), "text"


def _first_difference(a: str, b: str) -> int:
    n = min(len(a), len(b))
    return next((i for i in range(n) if a[i] != b[i]), n)


def greedy_equivalence(
    method: Iterable[Record],
    native: Iterable[Record],
    *,
    min_rate: float = THRESHOLDS["min_exact_match_rate"],
) -> GuardResult:
    """Exact-match rate of a method's outputs vs native's (same engine, prompts, temperature 0).
    Only meaningful at temperature 0; the caller decides when to apply it."""
    name = "greedy_equivalence"
    pairs = pair_records(method, native)
    if not pairs:
        return GuardResult(name, None, None, min_rate, "not evaluated: no paired native output")
    matches = 0
    bases: set[str] = set()
    first_bad: tuple[Record, Record] | None = None
    for m, n in pairs:
        eq, basis = outputs_equal(m, n)
        bases.add(basis)
        matches += eq
        if not eq and first_bad is None:
            first_bad = (m, n)
    rate = matches / len(pairs)
    details = {"pairs": len(pairs), "matches": matches, "basis": sorted(bases)}
    summary = f"exact-match {matches}/{len(pairs)} = {rate:.0%} (min {min_rate:.0%})"
    if first_bad is None:
        return GuardResult(name, True, rate, min_rate, summary, details)
    m, n = first_bad
    mt, nt = _output_text(m), _output_text(n)
    at = _first_difference(mt, nt)
    details["first_mismatch"] = {"prompt_id": m["prompt_id"], "turn": m.get("turn", 1), "at": at}
    where = f"first mismatch {m['prompt_id']} turn {m.get('turn', 1)} at char {at}"
    lo = max(0, at - 20)
    msg = (
        f"{summary}; {where}: method {quote(mt[lo:])} vs native {quote(nt[lo:])}"
        if rate < min_rate
        else summary
    )
    return GuardResult(name, rate >= min_rate, rate, min_rate, msg, details)


# ---- degenerate outputs ------------------------------------------------------------------


def degeneracy(seq: str | Sequence[int], t: Mapping[str, float] = THRESHOLDS) -> str | None:
    """Why ``seq`` (text or token ids) looks degenerate, or None. Two signs: a long run of one
    non-space character, or a tail that repeats a short unit many times (a loop)."""
    if isinstance(seq, str):
        if not seq.strip():
            return "empty output"
        run = max((len(m.group(0)) for m in re.finditer(r"(\S)\1*", seq)), default=0)
        if run >= t["degenerate_max_char_run"]:
            return f"one character repeated {run} times"
    if not seq:
        return "empty output"
    window = seq[-int(t["degenerate_window"]) :]
    n = len(window)
    best_span, best_p = 0, 0
    for p in range(1, min(int(t["degenerate_max_period"]), n // 2) + 1):
        k = 0
        while k < n - p and window[n - 1 - k] == window[n - 1 - k - p]:
            k += 1
        span = k + p
        if span > best_span and span / p >= t["degenerate_min_repeats"]:
            best_span, best_p = span, p
    need = max(t["degenerate_min_span"], t["degenerate_min_tail_share"] * n)
    if best_p and best_span >= need:
        unit = window[n - best_p :]
        shown = quote(unit, 40) if isinstance(unit, str) else str(list(unit)[:16])
        return f"tail loops a {best_p}-element unit {shown} over {best_span} elements"
    return None


def record_degeneracy(rec: Record, t: Mapping[str, float] = THRESHOLDS) -> str | None:
    """Degeneracy of a record: on its text, and on token ids when the text is fine (a loop of
    tokens that decode to varied whitespace still counts)."""
    why = degeneracy(_output_text(rec), t)
    if why is None and rec.get("token_ids"):
        why = degeneracy(list(rec["token_ids"]), t)
        if why == "empty output":
            why = None
    return why


def degenerate_outputs(
    method: Iterable[Record],
    native: Iterable[Record],
    *,
    max_excess: float = THRESHOLDS["max_degenerate_excess"],
    thresholds: Mapping[str, float] = THRESHOLDS,
) -> GuardResult:
    """Relative guard: fails when the method's outputs degenerate on more prompts than native's
    on the same prompts, by more than ``max_excess`` of the pairs. Identical loops in both are
    not counted; neither are prompts where only native degenerates (they offset)."""
    name = "degenerate_outputs"
    pairs = pair_records(method, native)
    if not pairs:
        return GuardResult(name, None, None, max_excess, "not evaluated: no paired native output")
    method_only: list[tuple[Record, str]] = []
    native_only = both = 0
    for m, n in pairs:
        wm, wn = record_degeneracy(m, thresholds), record_degeneracy(n, thresholds)
        if wm and not wn:
            method_only.append((m, wm))
        elif wn and not wm:
            native_only += 1
        elif wm and wn:
            both += 1
    excess = (len(method_only) - native_only) / len(pairs)
    details = {
        "pairs": len(pairs),
        "method_only": len(method_only),
        "native_only": native_only,
        "both": both,
        "method_only_prompts": [str(m["prompt_id"]) for m, _ in method_only][:20],
    }
    summary = (
        f"degenerate where native is not: {len(method_only)}/{len(pairs)} "
        f"(native-only {native_only}, both {both}); excess {excess:.0%} (max {max_excess:.0%})"
    )
    passed = excess <= max_excess
    if passed or not method_only:
        return GuardResult(name, passed, excess, max_excess, summary, details)
    m, why = method_only[0]
    msg = f"{summary}; e.g. {m['prompt_id']} turn {m.get('turn', 1)}: {why}: " + quote(
        _output_text(m)
    )
    return GuardResult(name, False, excess, max_excess, msg, details)


# ---- MAL collapse ------------------------------------------------------------------------

SAME_CONFIG_KEYS = (
    "engine",
    "engine_version",
    "model",
    "method",
    "num_speculative_tokens",
    "dataset",
)


def mal_collapse(
    summary: Mapping[str, Any],
    peers: Iterable[Mapping[str, Any]],
    records: Iterable[Record] = (),
    *,
    min_share: float = THRESHOLDS["min_mal_share_of_peers"],
) -> GuardResult:
    """Flags a MAL that collapses against the same config at other concurrencies: fails when
    (MAL − 1) < ``min_share`` × median(peer MAL − 1). Peers that differ in any of
    ``SAME_CONFIG_KEYS`` present in both, or share this concurrency, are ignored. Quotes a
    degenerate output from ``records`` when there is one."""
    name = "mal_collapse"
    mal = summary.get("mean_acceptance_length")
    conc = summary.get("concurrency")
    usable = [
        p
        for p in peers
        if p.get("mean_acceptance_length") is not None
        and p.get("concurrency") != conc
        and all(p.get(k) == summary.get(k) for k in SAME_CONFIG_KEYS if k in p and k in summary)
    ]
    if mal is None or not usable:
        why = "no MAL for this run" if mal is None else "no peer at another concurrency"
        return GuardResult(name, None, mal, None, f"not evaluated: {why}")
    ref = statistics.median(float(p["mean_acceptance_length"]) for p in usable) - 1.0
    share = (float(mal) - 1.0) / ref if ref > 0 else math.inf
    details = {
        "mal": mal,
        "concurrency": conc,
        "peers": {str(p.get("concurrency")): p["mean_acceptance_length"] for p in usable},
    }
    summary_line = (
        f"MAL {float(mal):.2f} at c={conc} vs peers' median {ref + 1:.2f} "
        f"(accepted/step {share:.0%} of peers', min {min_share:.0%})"
    )
    if ref <= 0 or share >= min_share:
        return GuardResult(name, True, share if ref > 0 else None, min_share, summary_line, details)
    example = next(
        ((r, w) for r in _usable(records) if (w := record_degeneracy(r)) is not None), None
    )
    if example:
        r, why = example
        summary_line += f"; e.g. {r['prompt_id']}: {why}: {quote(_output_text(r))}"
    return GuardResult(name, False, share, min_share, summary_line, details)


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
