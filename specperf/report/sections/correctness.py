"""The quality-guards section: each speculative item against native of the same engine."""

from __future__ import annotations

from typing import Any

import pandas as pd

from specperf.report import tables
from specperf.report.load import NATIVE, ResultsSet
from specperf.report.sections.parts import NO_PAIR, Section


def quality(rs: ResultsSet) -> Section:
    s = Section(
        "quality",
        "Quality guards",
        "Speed without correctness is not a pass. Each speculative item against native of "
        "the same engine on the same prompts: greedy equivalence (exact match, temperature 0 "
        "only), degenerate outputs where native's are not, MAL collapse against the same "
        "config at other concurrencies, GSM8K final answers where references exist. Results "
        "the suite stored in the summary (`guards`) are shown as stored; otherwise they are "
        "evaluated here by specperf.guards. Failures first.",
    )
    rows = guard_rows(rs)
    if rows.empty:
        s.note("No speculative item: guards compare a method with native.", "missing")
    else:
        bad = rows[rows["verdict"] != "pass"]
        s.table(
            "Guard failures and guards not evaluated",
            bad,
            missing="none — every guard that could be evaluated passed",
            drop_constant=(),
        )
        matrix = rows.pivot_table(
            index=["engine", "method", "dataset", "c"],
            columns="guard",
            values="verdict",
            aggfunc="first",
        ).reset_index()
        matrix.columns.name = None
        s.table("All guards per item", matrix, missing="", drop_constant=())
    lengths = tables.output_lengths(rs.runs)
    s.table(
        "Output length against native (Σ output tokens; a lossless method at temperature 0 "
        "should match)",
        lengths,
        missing=NO_PAIR,
    )
    return s


GUARD_ORDER = {"FAIL": 0, "not evaluated": 1, "pass": 2}


def guard_rows(rs: ResultsSet) -> pd.DataFrame:
    """One row per (speculative item, guard), failures first."""
    from specperf import guards

    r = tables.with_speedup(rs.runs)
    if r.empty:
        return pd.DataFrame()
    by_id = {it.id: it for it in rs.items}
    references = _gsm8k_references(r["dataset"].unique())
    rows = []
    for row in r[r["method"] != NATIVE].to_dict("records"):
        it = by_id[row["item"]]
        stored = it.summary.get("guards")
        source = "suite"
        if not isinstance(stored, dict) or not stored:
            source = "report"
            native = r[(r["method"] == NATIVE) & _same(r, row, tables.PAIR)]
            native_recs = by_id[native["item"].iloc[0]].requests if not native.empty else None
            family = [*tables.CONFIG, "method_name", "dataset", "k"]
            others = r[_same(r, row, family) & (r["concurrency"] != row["concurrency"])]
            peers = [by_id[x].summary for x in others["item"]]
            temp = (it.summary.get("sampling") or {}).get("temperature")
            stored = guards.run_guards(
                it.requests,
                native=native_recs,
                summary=it.summary,
                peers=peers,
                references=references.get(row["dataset"]),
                temperature=temp,
            )
        for name, g in stored.items():
            passed = g.get("passed") if isinstance(g, dict) else None
            verdict = "not evaluated" if passed is None else ("pass" if passed else "FAIL")
            rows.append(
                {
                    "verdict": verdict,
                    "guard": name,
                    "engine": row["engine_name"],
                    "method": row["method_label"],
                    "dataset": row["dataset"],
                    "c": row["concurrency"],
                    "message": str(g.get("message", "")) if isinstance(g, dict) else str(g),
                    "source": source,
                }
            )
    df = pd.DataFrame(rows)
    if df.empty:
        return df
    df["_o"] = df["verdict"].map(GUARD_ORDER)
    return (
        df.sort_values(["_o", "guard", "engine", "method", "dataset", "c"], kind="stable")
        .drop(columns="_o")
        .reset_index(drop=True)
    )


def _same(df: pd.DataFrame, row: dict[str, Any], cols: list[str]) -> pd.Series:
    """Rows of ``df`` equal to ``row`` on ``cols`` (missing values equal each other)."""
    mask = pd.Series(True, index=df.index)
    for c in cols:
        v = row[c]
        mask &= df[c].isna() if pd.isna(v) else (df[c] == v)
    return mask


def _gsm8k_references(datasets: Any) -> dict[str, dict[str, str]]:
    """GSM8K reference answers for the GSM8K-like datasets of the results."""
    out: dict[str, dict[str, str]] = {}
    try:
        from specperf.datasets import load_dataset
    except ImportError:
        return out
    for name in datasets:
        if "gsm8k" not in str(name).lower():
            continue
        try:
            data = load_dataset(str(name), "full")
        except Exception:  # a set that cannot be loaded here is not judged here
            continue
        out[str(name)] = {it.id: it.reference for it in data.items if it.reference}
    return out
