"""Sections on speed: overview, speedup over native, acceptance, concurrency, draft positions,
sensitivity."""

from __future__ import annotations

import pandas as pd

from specperf.report import charts, tables
from specperf.report.fmt import one, times
from specperf.report.load import NATIVE, ResultsSet
from specperf.report.sections.parts import NO_PAIR, NO_SPEC, Section


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
