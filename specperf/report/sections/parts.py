"""A report section and its parts (tables, charts, notes), independent of the output format."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from specperf.report.fmt import display


@dataclass
class Table:
    caption: str
    frame: pd.DataFrame  # display strings
    id: str


@dataclass
class Chart:
    caption: str
    png: bytes
    id: str


@dataclass
class Text:
    text: str
    kind: str = "note"  # note | missing | warning


Part = Table | Chart | Text


@dataclass
class Section:
    id: str
    title: str
    intro: str = ""
    parts: list[Part] = field(default_factory=list)
    empty: str | None = None

    def table(
        self,
        caption: str,
        df: pd.DataFrame,
        *,
        missing: str,
        default: Callable[[Any], str] | None = None,
        drop_constant: tuple[str, ...] = ("model", "sampling"),
    ) -> None:
        """Add ``df`` formatted, or a "no data" line naming what is missing."""
        if df is None or df.empty:
            self.parts.append(Text(f"{caption}: {missing}", "missing"))
            return
        df = df.copy()
        for col in drop_constant:  # a column with one value is said once, in the caption
            if col in df.columns and df[col].nunique(dropna=False) == 1 and len(df.columns) > 2:
                caption += f" — {col}: {df[col].iloc[0]}"
                df = df.drop(columns=col)
        n = sum(isinstance(p, Table) for p in self.parts) + 1
        self.parts.append(Table(caption, display(df, default), f"{self.id}-table-{n}"))

    def chart(self, caption: str, png: bytes | None, *, missing: str) -> None:
        if png is None:
            self.parts.append(Text(f"{caption}: {missing}", "missing"))
            return
        n = sum(isinstance(p, Chart) for p in self.parts) + 1
        self.parts.append(Chart(caption, png, f"{self.id}-chart-{n}"))

    def note(self, text: str, kind: str = "note") -> None:
        self.parts.append(Text(text, kind))

    @property
    def has_data(self) -> bool:
        return any(isinstance(p, (Table, Chart)) for p in self.parts)


NO_SPEC = "no speculative-method item in these results"
NO_PAIR = (
    "no method item has a native item of the same model, engine, sampling, dataset and "
    "concurrency in these results"
)
