"""The report as a list of sections (tables + charts + notes), independent of the output
format: :mod:`markdown` and :mod:`html` render the same list.

Every section of the issue is always present; a section without data says why instead of
vanishing, so a reader can tell "not measured" from "forgotten".
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from specperf.dotted import flatten
from specperf.report import charts, tables
from specperf.report.compare import Comparison, checks_frame, visible
from specperf.report.fmt import display, one, times
from specperf.report.load import NATIVE, ResultsSet
from specperf.verdict import STATUS_ORDER


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


def overview(rs: ResultsSet) -> Section:
    s = Section("overview", "Overview")
    r = rs.runs
    s.intro = (
        f"{len(r)} items from {', '.join(str(d) for d in rs.dirs)}. Definitions follow "
        "docs/reports.md: speedup = output tok/s of a method ÷ native's (same model, engine, "
        "sampling, dataset, concurrency, same run); MAL and acceptance rate come from the "
        "engine's counters; the evalscope figure is the client-side chunk estimate."
    )
    facts = pd.DataFrame(
        [
            ("models", ", ".join(sorted(r["model"].unique()))),
            ("engines", ", ".join(sorted(tables.with_speedup(r)["engine_name"].unique()))),
            ("methods", ", ".join(sorted(r["method_label"].unique()))),
            ("datasets", ", ".join(sorted(r["dataset"].unique()))),
            ("concurrency", ", ".join(str(c) for c in sorted(r["concurrency"].unique()))),
            ("sampling", ", ".join(sorted(r["sampling"].unique()))),
            ("hardware profiles", ", ".join(sorted(r["hardware_profile"].unique()))),
            ("requests completed", f"{r['completed'].sum():.0f}"),
            ("requests failed", f"{r['failed'].sum():.0f}"),
        ],
        columns=["what", "value"],
    )
    s.table("Results at a glance", facts, missing="no items", drop_constant=())
    failed = r[r["failed"].fillna(0) > 0]
    if not failed.empty:
        s.note(
            "Items with failed requests: " + ", ".join(failed["item"].tolist()),
            "warning",
        )
    return s


def speedup(rs: ResultsSet) -> Section:
    s = Section(
        "speedup",
        "Speedup over native",
        "Output tok/s of each method ÷ native's on the same engine, dataset and concurrency. "
        "Mean is over the concurrencies measured; peak is the best of them.",
    )
    r = rs.runs
    s.table(
        "Speedup by method × dataset × concurrency",
        tables.speedup_table(r),
        missing=NO_PAIR,
        default=times,
    )
    s.table("Methods ranked by mean speedup", tables.method_ranking(r), missing=NO_PAIR)
    long = tables.with_speedup(r)
    long = long[long["method"] != NATIVE]
    s.chart(
        "Speedup over native vs concurrency (dashed: 1×)",
        charts.by_concurrency(long, "speedup", "speedup (×)", hline=1.0),
        missing=NO_PAIR,
    )
    return s


def acceptance(rs: ResultsSet) -> Section:
    s = Section(
        "acceptance",
        "Acceptance: MAL and acceptance rate",
        "MAL (tokens per verify step, bonus token included) and acceptance rate (accepted ÷ "
        "drafted tokens) from the engine's counters over the run; beside them evalscope's "
        "client-side estimate from stream chunks (L = (tokens − 1)/(chunks − 1)), shown for "
        "comparison and never gated. MAL is comparable across engines; the rate is not when "
        "the draft topology differs (trees).",
    )
    r = rs.runs
    acc = tables.acceptance_table(r)
    s.table("MAL and acceptance rate per method × dataset × concurrency", acc, missing=NO_SPEC)
    if not acc.empty and acc["MAL"].isna().all():
        s.note("No item carries engine acceptance counters (see each item's notes).", "missing")
    s.table("Datasets ranked by mean acceptance rate", tables.dataset_ranking(r), missing=NO_SPEC)
    spec = tables.with_speedup(r)
    spec = spec[spec["method"] != NATIVE]
    spec = spec.assign(series=spec["method_label"] + " · " + spec["engine_name"])
    s.chart(
        "MAL per dataset (dots: evalscope estimate)",
        charts.grouped_bars(
            spec,
            panel=None,
            x="dataset",
            series="series",
            value="mal",
            ylabel="MAL",
            marker="evalscope_L",
        ),
        missing=NO_SPEC + " with engine counters",
    )
    return s


def concurrency(rs: ResultsSet) -> Section:
    s = Section(
        "concurrency",
        "Throughput and latency vs concurrency",
        "One panel per dataset, one line per engine × method. TPOT and TTFT are medians (p50) "
        "over the run's requests; p99 and ITL are in the per-dataset details.",
    )
    r = tables.with_speedup(rs.runs)
    for value, label, unit in (
        ("tok_s", "Output tok/s", "tok/s"),
        ("tpot_p50", "TPOT p50", "ms"),
        ("ttft_p50", "TTFT p50", "ms"),
    ):
        s.chart(
            f"{label} vs concurrency",
            charts.by_concurrency(r, value, f"{label} ({unit})"),
            missing="not measured",
        )
    for value, label in (
        ("tok_s", "Output tok/s"),
        ("tpot_p50", "TPOT p50 (ms)"),
        ("ttft_p50", "TTFT p50 (ms)"),
    ):
        s.table(
            f"{label} by concurrency",
            tables.vs_concurrency(r, value),
            missing="not measured",
            default=one,
        )
    return s


def positions(rs: ResultsSet) -> Section:
    s = Section(
        "positions",
        "Per-position acceptance decay",
        "Share of verify steps whose draft token at position i was accepted (Δaccepted at "
        "position i ÷ Δdrafts), averaged over the concurrencies measured.",
    )
    pos = tables.position_table(rs.runs)
    missing = (
        "no item reports per-position acceptance (native only, or an engine without "
        "per-position counters)"
    )
    s.table("Acceptance by draft position", pos, missing=missing)
    s.chart("Acceptance by draft position", charts.position_decay(pos), missing=missing)
    return s


def sensitivity(rs: ResultsSet, reqs: pd.DataFrame) -> Section:
    s = Section(
        "sensitivity",
        "Dataset sensitivity",
        "Acceptance by dataset uses the engine counters (whole items). Below the dataset "
        "level the counters cannot split a run, so category, input-length and language use "
        "the per-request client estimate L = (tokens − 1)/(chunks − 1) (tokens per stream "
        "chunk), pooled over concurrencies; read them as relative, not absolute.",
    )
    r = rs.runs
    s.table("Acceptance by dataset (engine counters)", tables.dataset_ranking(r), missing=NO_SPEC)
    no_req = "no per-request records (requests.jsonl) for speculative items"
    cat = tables.sensitivity(reqs, "category")
    s.table("By category (client estimate)", cat, missing=no_req)
    if not cat.empty:
        s.chart(
            "Estimated tokens per step by category",
            charts.grouped_bars(
                cat.assign(series=cat["method"] + " · " + cat["engine"]),
                panel="dataset",
                x="category",
                series="series",
                value="L est. (tok/chunk)",
                ylabel="tokens / chunk",
                hline=1.0,
            ),
            missing=no_req,
        )
    s.table(
        "By input length, prompt tokens (client estimate)",
        tables.sensitivity(reqs, "length_bucket").rename(columns={"length_bucket": "input tokens"}),
        missing=no_req,
    )
    tw = tables.twins(reqs, r)
    s.table(
        "Chinese vs English twins (same content; MAL from the counters where an item is one "
        "language)",
        tw,
        missing="no prompt was measured in both languages (run the zh set and its English "
        "twins, zh-en)",
    )
    if not tw.empty:
        melt = tw.melt(
            id_vars=["engine", "method", "c"],
            value_vars=["L est. zh", "L est. en"],
            var_name="lang",
            value_name="L",
        )
        s.chart(
            "zh vs en: estimated tokens per step",
            charts.grouped_bars(
                melt,
                panel=None,
                x="method",
                series="lang",
                value="L",
                ylabel="tokens / chunk",
                hline=1.0,
            ),
            missing="no twins",
        )
    return s


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


def comparison(cmp: Comparison, reference: str = "baseline") -> Section:
    """One comparison (baseline, recorded verdicts, rules, another run), regressions first."""
    s = Section(
        "comparison-" + _slug(cmp.id),
        cmp.title,
        f"Reference: {cmp.reference}. Statuses, deltas and tolerances are the verdict "
        "module's (specperf.verdict); regressions first, worst first.",
    )
    counts = cmp.counts()
    if counts:
        order = sorted(counts, key=lambda k: STATUS_ORDER.get(k, 9))
        s.note(" · ".join(f"{counts[k]} {k.replace('_', ' ')}" for k in order))
    regs = cmp.regressions
    if regs:
        s.note(
            "Regressions: "
            + "; ".join(c.line() for c in regs[:5])
            + (" …" if len(regs) > 5 else ""),
            "warning",
        )
    s.table(
        "Checks that need attention",
        checks_frame(visible(cmp.checks), reference),
        missing="every check passed"
        if cmp.checks
        else "nothing could be compared: " + ("; ".join(cmp.notes) or "no checks"),
        drop_constant=(),
    )
    for n in cmp.notes:
        s.note(n)
    if cmp.side_by_side is not None and not cmp.side_by_side.empty:
        s.table("Side by side", cmp.side_by_side, missing="", drop_constant=())
    return s


def no_comparison(reason: str) -> Section:
    s = Section("comparison", "Comparison with baseline")
    s.empty = reason
    return s


def _slug(text: str) -> str:
    out = "".join(ch if ch.isalnum() else "-" for ch in text.lower()).strip("-")
    return "-".join(filter(None, out.split("-")))[:60] or "run"
