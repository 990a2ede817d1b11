"""Sections on what the figures were measured with and on: engines, environment (GPU
telemetry included) and the per-dataset details."""

from __future__ import annotations

import json
import re
from typing import Any

import pandas as pd

from specperf.dotted import flatten
from specperf.report import charts, tables
from specperf.report.load import ResultsSet
from specperf.report.sections.parts import Section


def engines(rs: ResultsSet) -> Section:
    s = Section(
        "engines",
        "Engine vs engine (same method)",
        "The same model, method, dataset, concurrency and sampling on different engines. A "
        "speedup gap comes from the native baseline (native tok/s), from acceptance (MAL) or "
        "from per-step overhead (tok/s at equal MAL); the columns separate the three. "
        "Acceptance rates are comparable only at equal topology (K, topk, draft tokens).",
    )
    r = rs.runs
    missing = "no method was measured on more than one engine in these results"
    s.table(
        "Per engine, mean over datasets and concurrencies", tables.engine_gap(r), missing=missing
    )
    cmp_ = tables.engine_comparison(r)
    s.table("Side by side", cmp_, missing=missing)
    if not cmp_.empty:
        s.chart(
            "Speedup by engine",
            charts.grouped_bars(
                cmp_.assign(where=cmp_["dataset"] + " c=" + cmp_["c"].astype(str)),
                panel="method",
                x="where",
                series="engine",
                value="speedup",
                ylabel="speedup (×)",
                hline=1.0,
            ),
            missing=missing,
        )
    return s


def environment(rs: ResultsSet) -> Section:
    s = Section(
        "environment",
        "Environment",
        "What the figures were measured on, as each item recorded it.",
    )
    r = tables.with_speedup(rs.runs)
    envs: dict[str, dict[str, Any]] = {}
    by_item = {it.id: it.summary for it in rs.items}
    rows = []
    for name, g in r.groupby("engine_name"):
        summ = by_item[g["item"].iloc[0]]
        env = summ.get("environment") or {}
        eng = env.get("engine") if isinstance(env.get("engine"), dict) else {}
        rows.append(
            {
                "engine": name,
                "kind": g["engine"].iloc[0],
                "version": g["engine_version"].iloc[0],
                "models": ", ".join(sorted(g["model"].unique())),
                "items": len(g),
                "hardware profile": ", ".join(sorted(g["hardware_profile"].unique())),
                "startup (s)": _first(eng, "startup_s"),
                "suite commit": _first(_first(env, "suite_git"), "commit")
                or _first(env, "suite_commit"),
            }
        )
        envs[name] = env
    s.table("Engines", pd.DataFrame(rows), missing="no items", drop_constant=())
    flat = {name: _flatten(env, skip=("engine",)) for name, env in envs.items()}
    keys = sorted({k for f in flat.values() for k in f} - set(_telemetry_keys(flat)))
    if keys:
        table = pd.DataFrame(
            {"field": keys, **{n: [f.get(k, "—") for k in keys] for n, f in flat.items()}}
        )
        s.table(
            "Recorded environment (first item of each engine)", table, missing="", drop_constant=()
        )
    else:
        s.note("Recorded environment: the items carry no environment record.", "missing")
    tele = []
    for it in rs.items:
        f = _flatten(_telemetry_sources(it.summary), skip=("engine",))
        vals = _compact_telemetry({_short(k): f[k] for k in _telemetry_keys({"x": f})})
        if vals:
            tele.append({"item": it.id, **vals})
    s.table(
        "GPU clocks, power and thermal during each run",
        pd.DataFrame(tele),
        missing="no GPU telemetry recorded (a CPU run, or NVML unavailable)",
        drop_constant=(),
    )
    starts = pd.DataFrame(rs.engine_starts)
    if not starts.empty:
        keep = [
            c
            for c in starts.columns
            if starts[c].map(lambda v: not isinstance(v, (dict, list))).all()
        ]
        starts = starts[keep]
    s.table(
        "Engine starts (engine-starts.jsonl)",
        starts,
        missing="no engine-starts.jsonl in these results",
        drop_constant=(),
    )
    return s


def _short(key: str) -> str:
    """``environment.gpu_telemetry.gpus.0.sm_clock_mhz.mean`` → ``gpu0 sm_clock_mhz.mean``."""
    for prefix in ("environment.", "gpu_telemetry.", "gpu_samples."):
        key = key.removeprefix(prefix)
    return re.sub(r"^gpus\.(\d+)\.", r"gpu\1 ", key)


_STAT = re.compile(r"^(?P<gpu>gpu\d+ )?(?P<name>[a-z_]+)\.(?P<stat>min|mean|max)$")
_FRACTION = re.compile(r"^(?P<gpu>gpu\d+ )?throttle_fraction\.(?P<reason>.+)$")


def _compact_telemetry(vals: dict[str, str]) -> dict[str, str]:
    """min/mean/max triples → one ``min / mean / max`` cell; throttle fractions → one cell."""
    out: dict[str, str] = {}
    triples: dict[str, dict[str, str]] = {}
    throttles: dict[str, list[str]] = {}
    for k, v in vals.items():
        if m := _STAT.match(k):
            triples.setdefault(f"{m['gpu'] or ''}{m['name']} (min/mean/max)", {})[m["stat"]] = v
        elif m := _FRACTION.match(k):
            pct = f"{100 * float(v):.0f}%" if v.replace(".", "", 1).isdigit() else v
            throttles.setdefault(f"{m['gpu'] or ''}throttle (share of samples)", []).append(
                f"{m['reason']} {pct}"
            )
        else:
            out[k] = v
    for k, t in triples.items():
        out[k] = " / ".join(t.get(s, "—") for s in ("min", "mean", "max"))
    for k, parts in throttles.items():
        out[k] = ", ".join(parts)
    return dict(sorted(out.items()))


def _telemetry_sources(summary: dict[str, Any]) -> dict[str, Any]:
    """Where GPU samples may be recorded: the environment, or a top-level gpu/nvml block."""
    env = {k: v for k, v in (summary.get("environment") or {}).items() if k != "engine"}
    out: dict[str, Any] = {"environment": env}
    for k, v in summary.items():
        if isinstance(v, dict) and any(w in k.lower() for w in ("gpu", "nvml", "telemetry")):
            out[k] = v
    return out


TELEMETRY_WORDS = ("clock", "temp", "power", "throttl", "thermal", "foreign", "fan", "util")


def _telemetry_keys(flat: dict[str, dict[str, Any]]) -> list[str]:
    keys = {k for f in flat.values() for k in f}
    return sorted(k for k in keys if any(w in k.lower() for w in TELEMETRY_WORDS))


def _first(d: Any, key: str) -> Any:
    return d.get(key) if isinstance(d, dict) else None


def _flatten(d: Any, skip: tuple[str, ...] = ()) -> dict[str, str]:
    """Nested environment → dotted keys with short string values (lists of dicts by index)."""
    return {k: _cell(v) for k, v in flatten(d, index_lists=True, skip=skip).items()}


def _cell(v: Any) -> str:
    text = json.dumps(v, ensure_ascii=False) if isinstance(v, (list, dict)) else str(v)
    return text if len(text) <= 120 else text[:117] + "…"


def details(rs: ResultsSet) -> Section:
    s = Section("details", "Details per dataset", "Every item's main figures; latencies in ms.")
    d = tables.details(rs.runs)
    if d.empty:
        s.empty = "no items"
        return s
    for ds, g in d.groupby("dataset", sort=True):
        s.table(f"{ds}", g.drop(columns="dataset"), missing="no items")
    bound = [
        f"{it.id} ({(it.summary.get('delivery') or {}).get('reason', '')})"
        for it in rs.items
        if (it.summary.get("delivery") or {}).get("bound") is True
    ]
    if bound:
        s.note(
            "Delivery-bound items (chunks reached the client in bursts; their TTFT/TPOT/ITL/E2E "
            "time the delivery and are not evaluated): " + "; ".join(bound),
            "warning",
        )
    notes = [
        (it.id, n)
        for it in rs.items
        for n in (it.summary.get("notes") or [])
        if not n.startswith("native run")
    ]
    if notes:
        s.table(
            "Item notes",
            pd.DataFrame(notes, columns=["item", "note"]),
            missing="",
            drop_constant=(),
        )
    return s
