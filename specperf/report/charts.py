"""Charts as PNG bytes (matplotlib's object API with the Agg canvas: no display, no pyplot
global state, safe in pytest workers).

Each function takes a frame from :mod:`specperf.report.tables` and returns PNG bytes, or
``None`` when there is nothing to draw (the section then says so).
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

DPI = 80
PANEL_W, PANEL_H = 4.6, 3.2
MAX_COLS = 3
# Fixed margins in inches (a layout engine would draw every figure twice: too slow on 2 cores).
LEFT, RIGHT, TOP, BOTTOM, LEGEND_ROW = 0.75, 0.2, 0.35, 0.6, 0.26


def _series_colors(labels: Sequence[str]) -> dict[str, tuple[float, ...]]:
    """One stable color per series across every panel of a figure."""
    from matplotlib import colormaps

    cmap = colormaps["tab10"] if len(labels) <= 10 else colormaps["tab20"]
    return {lab: cmap(i % cmap.N) for i, lab in enumerate(sorted(set(labels)))}


def _figure(
    n_panels: int, n_series: int = 0, min_width: float = 0.0, extra_bottom: float = 0.0
) -> tuple[Figure, list]:
    cols = min(MAX_COLS, max(1, n_panels))
    rows = math.ceil(n_panels / cols)
    width = max(PANEL_W * cols, min_width)
    legend_rows = math.ceil(n_series / _legend_cols(width, n_series)) if n_series else 0
    bottom = BOTTOM + LEGEND_ROW * legend_rows + extra_bottom
    height = PANEL_H * rows + bottom
    fig = Figure(figsize=(width, height), dpi=DPI)
    FigureCanvasAgg(fig)
    axes = fig.subplots(rows, cols, squeeze=False).ravel().tolist()
    fig.subplots_adjust(
        left=LEFT / width,
        right=1 - RIGHT / width,
        top=1 - TOP / height,
        bottom=(bottom + 0.15) / height,
        wspace=0.32,
        hspace=0.55,
    )
    for ax in axes[n_panels:]:
        ax.set_visible(False)
    return fig, axes[:n_panels]


def _legend_cols(width_in: float, n: int) -> int:
    """Legend columns that fit the figure width (about 2.6 inches per entry)."""
    return max(1, min(n, int(width_in // 2.6)))


def _png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)
    return buf.getvalue()


def _legend(fig: Figure, colors: dict[str, tuple[float, ...]], kind: str = "line") -> None:
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles = [
        Line2D([0], [0], color=c, marker="o") if kind == "line" else Patch(color=c)
        for c in colors.values()
    ]
    ncol = _legend_cols(fig.get_figwidth(), len(colors))
    fig.legend(
        handles,
        list(colors),
        loc="lower center",
        bbox_to_anchor=(0.5, 0.0),
        ncol=ncol,
        frameon=False,
    )


def _series(
    df: pd.DataFrame, engine: str = "engine_name", method: str = "method_label"
) -> pd.Series:
    multi = df[engine].nunique() > 1
    return df[method].astype(str) + (" · " + df[engine].astype(str) if multi else "")


def by_concurrency(
    runs: pd.DataFrame,
    value: str,
    ylabel: str,
    *,
    spec_only: bool = False,
    hline: float | None = None,
) -> bytes | None:
    """One panel per dataset: ``value`` against concurrency, one line per engine × method."""
    df = runs.dropna(subset=[value])
    if spec_only:
        df = df[df["method"] != "native"]
    if df.empty:
        return None
    df = df.assign(series=_series(df))
    datasets = sorted(df["dataset"].unique())
    colors = _series_colors(df["series"].tolist())
    fig, axes = _figure(len(datasets), len(colors))
    for ax, ds in zip(axes, datasets, strict=True):
        part = df[df["dataset"] == ds]
        for name, g in part.groupby("series"):
            g = g.groupby("concurrency")[value].mean().sort_index()
            ax.plot(g.index, g.values, marker="o", color=colors[name], label=name)
        cs = sorted(part["concurrency"].unique())
        ax.set_xscale("log", base=2)
        ax.set_xticks(cs, [str(c) for c in cs])
        ax.minorticks_off()
        if hline is not None:
            ax.axhline(hline, color="grey", lw=0.8, ls="--")
        ax.set_title(ds)
        ax.set_xlabel("concurrency")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
    _legend(fig, colors)
    return _png(fig)


def grouped_bars(
    df: pd.DataFrame,
    *,
    panel: str | None,
    x: str,
    series: str,
    value: str,
    ylabel: str,
    marker: str | None = None,
    hline: float | None = None,
) -> bytes | None:
    """Bars of ``value`` grouped by ``x``, one color per ``series``, one panel per ``panel``
    value; ``marker`` (optional column) is drawn as a black dot on each bar."""
    df = df.dropna(subset=[value])
    if df.empty:
        return None
    panels = sorted(df[panel].unique()) if panel else [None]
    colors = _series_colors(df[series].astype(str).tolist())
    n_x = max(df.groupby(panel)[x].nunique()) if panel else df[x].nunique()
    # one panel of many bars gets the width of a row of panels
    min_width = min(PANEL_W * MAX_COLS, 1.5 + 0.35 * n_x * len(colors)) if len(panels) == 1 else 0
    longest = max(len(str(v)) for v in df[x].unique())
    crowded = n_x * longest * 0.085 > max(PANEL_W, min_width) - 0.9
    fig, axes = _figure(len(panels), len(colors), min_width, 0.07 * longest if crowded else 0.0)
    for ax, p in zip(axes, panels, strict=True):
        part = df if p is None else df[df[panel] == p]
        xs = list(dict.fromkeys(part[x].astype(str)))
        names = [s for s in colors if s in set(part[series].astype(str))]
        width = 0.8 / max(1, len(names))
        for i, name in enumerate(names):
            g = part[part[series].astype(str) == name]
            g = g.groupby(g[x].astype(str)).agg(
                v=(value, "mean"), **({"m": (marker, "mean")} if marker else {})
            )
            pos = np.array([xs.index(v) for v in g.index]) + (i - (len(names) - 1) / 2) * width
            ax.bar(pos, g["v"], width=width, color=colors[name])
            if marker:
                ax.plot(pos, g["m"], "k.", ms=6)
        ax.set_xticks(
            range(len(xs)), xs, rotation=25 if crowded else 0, ha="right" if crowded else "center"
        )
        if hline is not None:
            ax.axhline(hline, color="grey", lw=0.8, ls="--")
        if p is not None:
            ax.set_title(str(p))
        ax.set_ylabel(ylabel)
        ax.grid(axis="y", alpha=0.3)
    _legend(fig, colors, kind="bar")
    return _png(fig)


def position_decay(positions: pd.DataFrame) -> bytes | None:
    """One panel per dataset: acceptance at draft position i, one line per engine × method."""
    if positions.empty:
        return None
    pos_cols = [c for c in positions.columns if c.startswith("pos ")]
    df = positions.assign(series=_series(positions, engine="engine", method="method"))
    datasets = sorted(df["dataset"].unique())
    colors = _series_colors(df["series"].tolist())
    fig, axes = _figure(len(datasets), len(colors))
    for ax, ds in zip(axes, datasets, strict=True):
        for _, row in df[df["dataset"] == ds].iterrows():
            ys = [row[c] for c in pos_cols]
            xs = [i + 1 for i, v in enumerate(ys) if not pd.isna(v)]
            ax.plot(xs, [ys[i - 1] for i in xs], marker="o", color=colors[row["series"]])
        ax.set_title(ds)
        ax.set_xlabel("draft position")
        ax.set_ylabel("acceptance")
        ax.set_ylim(0, 1)
        ax.grid(alpha=0.3)
    _legend(fig, colors)
    return _png(fig)
