"""The GPU night's lines for a review: one ``VERDICT`` line per item and per session-level check
group of a pass, one ``FIT-MAL`` line per EAGLE3 item."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

# the figures a reviewer reads first in a verdict line, in this order
VERDICT_METRICS = ("output_throughput_tok_s", "ttft_ms.p50", "mean_acceptance_length")


def _read_checks(results_dir: Path) -> tuple[dict[str, list[dict[str, Any]]], dict[str, list]]:
    """The pass's checks grouped by item, and its session-level checks (no item: the engine-wide
    check, cross-engine rules) grouped by key. From the controller's ``verdict.json``, which
    holds every check of the pass once it has ended; a pass cut before that has only
    ``verdicts.jsonl``, appended as items end (read with its torn last line tolerated)."""
    from specperf.fileio import read_jsonl

    whole, partial = results_dir / "verdict.json", results_dir / "verdicts.jsonl"
    if whole.exists():
        checks = json.loads(whole.read_text()).get("checks") or []
    else:
        checks = read_jsonl(partial) if partial.exists() else []
    items: dict[str, list[dict[str, Any]]] = {}
    session: dict[str, list[dict[str, Any]]] = {}
    for c in checks:
        if c.get("item") is not None:
            items.setdefault(str(c["item"]), []).append(c)
        else:
            session.setdefault(str(c.get("key")), []).append(c)
    return items, session


def _verdict_word(cs: list[dict[str, Any]], stopped: bool) -> tuple[str, list[dict[str, Any]]]:
    """PASS / FAIL / INCOMPLETE / NOT EVALUATED for a group of checks, and the checks to name."""
    failed = [c for c in cs if c.get("status") == "fail"]
    unevaluated = [c for c in cs if c.get("status") in ("missing", "stale", "not_evaluated")]
    if not cs and stopped:
        return "NOT EVALUATED (the pass was stopped at its time limit before the item ended)", []
    if not cs:
        return "NOT EVALUATED (no checks recorded)", []
    if failed:
        return f"FAIL ({len(failed)} of {len(cs)} checks failed)", failed + unevaluated
    if unevaluated:
        return f"INCOMPLETE ({len(unevaluated)} of {len(cs)} checks not evaluated)", unevaluated
    return f"PASS ({len(cs)} checks)", []


def _figure(c: dict[str, Any]) -> str:
    f = f"{c['metric']} {c['measured']:.4g}"
    if c.get("baseline") is not None:
        f += f" vs {c['baseline']:.4g}"
    if c.get("delta") is not None:
        f += f" ({c['delta']:+.1%})"
    return f


def verdict_lines(results_dir: Path, pass_name: str, *, stopped: bool = False) -> list[str]:
    """One line per item of a pass, to paste in a review (docs/transformers.md: a change to the
    transformers engine or its EAGLE3 is checked on the GPU before it lands):

        VERDICT check qwen3-8b-shape/transformers/eagle3/…: PASS (14 checks) tok/s 61.2 vs
        baseline 60.5 (+1.2%); …

    then one line per session-level check group (``VERDICT check engine transformers-loop:
    FAIL …`` for the engine-wide check, one per cross-engine rule): those are judged once the
    whole pass has ended and can turn a pass red whose every item passed. FAIL names every
    failed check; an item without checks
    (it did not run) says so — "not evaluated" is never a pass — and says when the pass was
    stopped at its time limit (``stopped``: --pass-timeout / --budget-s), so a cut pass is not read
    as an empty one."""
    checks, session = _read_checks(results_dir)
    items = sorted({p.parent.name for p in results_dir.glob("*/summary.json")} | set(checks))
    out = []
    for item in items:
        cs = checks.get(item, [])
        word, named = _verdict_word(cs, stopped)
        figs = []
        for metric in VERDICT_METRICS:
            c = next((c for c in cs if c.get("metric") == metric), None)
            if c and c.get("measured") is not None:
                figs.append(_figure(c))
        out.append(_line(f"VERDICT {pass_name} {item}: {word}", figs, named))
    for key, cs in sorted(session.items()):
        word, named = _verdict_word(cs, stopped)
        figs = [_figure(c) for c in cs if c.get("measured") is not None and c.get("metric")]
        out.append(_line(f"VERDICT {pass_name} {key}: {word}", figs, named))
    if not items:  # nothing to judge is still a line: a review must not read silence as green
        why = "the pass was stopped at its time limit" if stopped else "no item wrote results"
        out.append(f"VERDICT {pass_name}: NOT EVALUATED ({why} before any item ended)")
    return out


def _line(head: str, figs: list[str], named: list[dict[str, Any]]) -> str:
    line = head
    if figs:
        line += "; " + "; ".join(figs)
    why = [c.get("message", c.get("metric", "?")) for c in named]
    if why:
        line += " | " + " | ".join(why)
    return line


def fit_mal_lines(pass_name: str, items: dict[str, Any], fit_mal: float | None) -> list[str]:
    """One ``FIT-MAL`` line per EAGLE3 item of a pass: its MAL per engine start, the request
    count it sent and what chose it, against the fit-time MAL on the same prompts. The head is
    fitted to the suite's measured prompts, so a start that differs from the fit-time MAL means
    the served path or the prompts moved (e.g. a count the head was not fitted to)."""
    out = []
    for item, f in items.items():
        if f.get("method") != "eagle3":
            continue
        mals = [m for m in f.get("mal_per_start") or [] if m is not None]
        size = f.get("sizing") or {}
        if fit_mal is None or not mals:
            word = "NOT EVALUATED (no fit-time MAL)" if fit_mal is None else "NOT EVALUATED"
        elif all(abs(m - fit_mal) <= 1e-9 for m in mals):
            word = "EQUAL"
        else:
            word = "DIFFERS"
        out.append(
            f"FIT-MAL {pass_name} {item}: {word}; per start "
            f"{[round(m, 4) for m in mals]} vs fit-time {fit_mal} on "
            f"{f.get('num_requests')} requests ({size.get('source', '?')}: "
            f"suite {size.get('configured_requests', '?')})"
        )
    return out
