"""Numbers → display strings, chosen by column name so every table formats alike."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

import pandas as pd

Formatter = Callable[[Any], str]
MISSING = "—"


def _num(fmt: str, suffix: str = "") -> Formatter:
    def f(v: Any) -> str:
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return MISSING
        if isinstance(v, (int, float)):
            return format(v, fmt) + suffix
        return str(v)

    return f


def pct(v: Any) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return MISSING
    return f"{100 * float(v):.1f}%" if isinstance(v, (int, float)) else str(v)


def signed_pct(v: Any) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return MISSING
    return f"{100 * float(v):+.1f}%" if isinstance(v, (int, float)) else str(v)


times = _num(".2f", "×")
two = _num(".2f")
one = _num(".1f")
three = _num(".3f")
integer = _num(".0f")

# (column-name pattern, formatter), first match wins.
RULES: list[tuple[str, Formatter]] = [
    (r"^delta$|^Δ", signed_pct),
    (r"speedup / best|zh / en", two),
    (r"speedup", times),
    (r"accept rate|evalscope rate|^pos \d+|rate$", pct),
    (r"^tolerance$", pct),
    (r"^(measured|baseline|other|bound)$", _num(".4g")),
    (r"MAL|L est|evalscope L|tokens/chunk|tok/chunk", two),
    (r"tok/s|\(ms\)|\(s\)|TTFT|TPOT|ITL|E2E|duration", one),
    (r"^(c|rank|items|requests|pairs|completed|failed|k|topk|draft tokens)$", integer),
    (r"output tokens$", integer),
]


def formatter_for(column: str, default: Formatter | None = None) -> Formatter | None:
    for pattern, f in RULES:
        if re.search(pattern, column):
            return f
    return default


def display(df: pd.DataFrame, default: Formatter | None = None) -> pd.DataFrame:
    """A copy with every cell a string. ``default`` formats numeric columns no rule names
    (e.g. the ``c=4`` columns of a pivot)."""
    out = pd.DataFrame(index=df.index)
    for col in df.columns:
        f = formatter_for(str(col)) or (default if pd.api.types.is_numeric_dtype(df[col]) else None)
        if f is None and pd.api.types.is_float_dtype(df[col]):
            f = three
        if f is None:
            out[col] = df[col].map(lambda v: MISSING if v is None or v != v else str(v))
        else:
            out[col] = df[col].map(f)
    return out.reset_index(drop=True)
