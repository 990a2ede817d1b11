"""The report's figures as pandas frames (numbers only; formatting lives in ``sections``).

Every function takes the per-item frame of :class:`specperf.report.load.ResultsSet.runs` (or
per-request rows) and returns a new frame; none of them reads files. Speedup follows design.md:
output tok/s of a method over native's, same model, engine (label and version), sampling,
hardware profile, dataset and concurrency, measured in the same results set.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

from specperf.report.load import NATIVE
from specperf.report.prompts import PromptMeta, bucket_labels, tokens_bucket

# What makes two items' throughputs comparable (design.md, speedup).
CONFIG = ["model", "engine_label", "engine_version", "sampling", "hardware_profile"]
PAIR = [*CONFIG, "dataset", "concurrency"]


def engine_name(row: pd.Series | dict[str, Any]) -> str:
    """``vllm 0.33.0`` — label plus version, unless the label already carries the version."""
    label, version = str(row["engine_label"]), str(row["engine_version"])
    return label if version in ("?", "") or version in label else f"{label} {version}"


# Display names of the grouping columns.
LABELS = {"engine_name": "engine", "method_label": "method", "concurrency": "c"}


def with_speedup(runs: pd.DataFrame) -> pd.DataFrame:
    """``runs`` plus ``native_tok_s`` and ``speedup`` (NaN where native was not measured)."""
    df = runs.drop(columns=["native_tok_s", "speedup", "engine_name"], errors="ignore")
    if df.empty:
        df["native_tok_s"] = pd.Series(dtype=float)
        df["speedup"] = pd.Series(dtype=float)
        return df
    native = (
        df[df["method"] == NATIVE]
        .groupby(PAIR, dropna=False)["tok_s"]
        .mean()
        .rename("native_tok_s")
        .reset_index()
    )
    df = df.merge(native, on=PAIR, how="left")
    df["speedup"] = df["tok_s"] / df["native_tok_s"]
    df.loc[df["native_tok_s"].isna() | (df["native_tok_s"] <= 0), "speedup"] = np.nan
    df["engine_name"] = [engine_name(r) for r in df.to_dict("records")]
    return df


def _spec(df: pd.DataFrame) -> pd.DataFrame:
    return df[df["method"] != NATIVE]


def speedup_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Method × dataset rows, one speedup column per concurrency, then mean and peak."""
    df = _spec(with_speedup(runs)).dropna(subset=["speedup"])
    if df.empty:
        return pd.DataFrame()
    idx = ["model", "engine_name", "sampling", "method_label", "dataset"]
    wide = df.pivot_table(index=idx, columns="concurrency", values="speedup", aggfunc="mean")
    wide.columns = [f"c={c}" for c in wide.columns]
    cs = list(wide.columns)
    wide["mean"] = wide[cs].mean(axis=1)
    wide["peak"] = wide[cs].max(axis=1)
    return wide.reset_index().rename(columns=LABELS)


def method_ranking(runs: pd.DataFrame) -> pd.DataFrame:
    """Methods ranked by mean speedup over every dataset × concurrency; the peak and where."""
    df = _spec(with_speedup(runs)).dropna(subset=["speedup"])
    if df.empty:
        return pd.DataFrame()
    rows = []
    for (model, eng, samp, meth), g in df.groupby(
        ["model", "engine_name", "sampling", "method_label"], sort=False
    ):
        best = g.loc[g["speedup"].idxmax()]
        rows.append(
            {
                "model": model,
                "engine": eng,
                "sampling": samp,
                "method": meth,
                "mean speedup": g["speedup"].mean(),
                "peak speedup": best["speedup"],
                "peak at": f"{best['dataset']} c={best['concurrency']}",
                "mean MAL": g["mal"].mean(),
                "items": len(g),
            }
        )
    out = pd.DataFrame(rows).sort_values("mean speedup", ascending=False, kind="stable")
    out.insert(0, "rank", range(1, len(out) + 1))
    return out.reset_index(drop=True)


def acceptance_table(runs: pd.DataFrame) -> pd.DataFrame:
    """MAL and the real acceptance rate per method × dataset × concurrency, with the
    evalscope client-side estimate beside each."""
    df = _spec(with_speedup(runs))
    if df.empty:
        return pd.DataFrame()
    cols = {
        "engine_name": "engine",
        "method_label": "method",
        "dataset": "dataset",
        "concurrency": "c",
        "mal": "MAL",
        "evalscope_L": "evalscope L",
        "acceptance_rate": "accept rate",
        "evalscope_rate": "evalscope rate",
        "tokens_per_chunk": "tokens/chunk",
    }
    out = df[["model", "sampling", *cols]].rename(columns=cols)
    return out.reset_index(drop=True)


def dataset_ranking(runs: pd.DataFrame) -> pd.DataFrame:
    """Datasets ranked by mean real acceptance rate over every speculative item; MAL per
    method beside it."""
    df = _spec(runs).dropna(subset=["mal"])
    if df.empty:
        return pd.DataFrame()
    per = df.pivot_table(index="dataset", columns="method_label", values="mal", aggfunc="mean")
    per.columns = [f"MAL {c}" for c in per.columns]
    agg = df.groupby("dataset").agg(
        **{
            "mean accept rate": ("acceptance_rate", "mean"),
            "mean MAL": ("mal", "mean"),
            "items": ("item", "count"),
        }
    )
    out = agg.join(per).sort_values("mean accept rate", ascending=False, kind="stable")
    out = out.reset_index()
    out.insert(0, "rank", range(1, len(out) + 1))
    return out


def vs_concurrency(runs: pd.DataFrame, value: str) -> pd.DataFrame:
    """One row per dataset × engine × method, one column per concurrency."""
    if runs.empty or runs[value].isna().all():
        return pd.DataFrame()
    df = with_speedup(runs)
    wide = df.pivot_table(
        index=["dataset", "model", "engine_name", "sampling", "method_label"],
        columns="concurrency",
        values=value,
        aggfunc="mean",
    )
    wide.columns = [f"c={c}" for c in wide.columns]
    return wide.reset_index().rename(columns=LABELS)


def position_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Per-position acceptance (Δaccepted at position i / Δdrafts) per method × dataset,
    averaged over concurrencies; columns pos 1..K."""
    df = _spec(with_speedup(runs))
    df = df[df["per_position"].map(lambda v: isinstance(v, list) and len(v) > 0)]
    if df.empty:
        return pd.DataFrame()
    rows = []
    for (model, eng, meth, ds), g in df.groupby(
        ["model", "engine_name", "method_label", "dataset"], sort=False
    ):
        width = max(len(v) for v in g["per_position"])
        mat = np.full((len(g), width), np.nan)
        for i, v in enumerate(g["per_position"]):
            mat[i, : len(v)] = v
        row: dict[str, Any] = {"model": model, "engine": eng, "method": meth, "dataset": ds}
        means = np.nanmean(mat, axis=0)
        row.update({f"pos {i + 1}": float(m) for i, m in enumerate(means)})
        rows.append(row)
    return pd.DataFrame(rows)


def engine_comparison(runs: pd.DataFrame) -> pd.DataFrame:
    """Same model, method, dataset, concurrency and sampling on different engines, side by
    side: native tok/s, method tok/s, speedup, MAL, acceptance rate and topology."""
    df = with_speedup(runs)
    spec = _spec(df)
    if spec.empty:
        return pd.DataFrame()
    same = ["model", "method_name", "k", "dataset", "concurrency", "sampling", "hardware_profile"]
    n_engines = spec.groupby(same, dropna=False)["engine_name"].transform("nunique")
    spec = spec[n_engines > 1]
    if spec.empty:
        return pd.DataFrame()
    out = spec[
        [
            "model",
            "method_label",
            "dataset",
            "concurrency",
            "engine_name",
            "native_tok_s",
            "tok_s",
            "speedup",
            "mal",
            "acceptance_rate",
            "k",
            "topk",
            "draft_tokens",
        ]
    ].rename(
        columns={
            "method_label": "method",
            "concurrency": "c",
            "engine_name": "engine",
            "native_tok_s": "native tok/s",
            "tok_s": "tok/s",
            "mal": "MAL",
            "acceptance_rate": "accept rate",
            "draft_tokens": "draft tokens",
        }
    )
    return out.sort_values(["model", "method", "dataset", "c", "engine"]).reset_index(drop=True)


def engine_gap(runs: pd.DataFrame) -> pd.DataFrame:
    """Seed 2's question in one table: per method, each engine's mean speedup and MAL and
    native tok/s, and the ratio of its speedup to the best engine's."""
    cmp_ = engine_comparison(runs)
    if cmp_.empty:
        return pd.DataFrame()
    g = (
        cmp_.groupby(["model", "method", "engine"])
        .agg(
            **{
                "mean native tok/s": ("native tok/s", "mean"),
                "mean tok/s": ("tok/s", "mean"),
                "mean speedup": ("speedup", "mean"),
                "mean MAL": ("MAL", "mean"),
                "items": ("tok/s", "count"),
            }
        )
        .reset_index()
    )
    best = g.groupby(["model", "method"])["mean speedup"].transform("max")
    g["speedup / best"] = g["mean speedup"] / best
    return g


_LANG_RE = re.compile(r"(?:^|[-_/.:])(zh|en)(?:$|[-_/.:])")


def lang_of(prompt_id: str) -> str | None:
    """``zh``/``en`` from an id such as ``zh-chat-01`` (the twins share the rest of the id)."""
    m = _LANG_RE.search(str(prompt_id))
    return m.group(1) if m else None


def twin_key(prompt_id: str) -> str:
    return _LANG_RE.sub(lambda m: m.group(0).replace(m.group(1), "*"), str(prompt_id), count=1)


def request_rows(
    reqs: pd.DataFrame, meta: dict[tuple[str, str], PromptMeta] | None = None
) -> pd.DataFrame:
    """Per-request frame of the successful requests with the client-side tokens-per-chunk
    estimate ``L_est`` = (tokens − 1)/(chunks − 1) (evalscope's per-request figure), the
    input-length bucket (server prompt tokens; the set's estimate where the server gave none),
    language and twin pair."""
    if reqs.empty:
        return reqs
    meta = meta or {}
    df = reqs[reqs["error"].isna()].copy() if "error" in reqs.columns else reqs.copy()
    chunks = df["chunks"]
    toks = pd.to_numeric(df["output_tokens"], errors="coerce")
    df["L_est"] = (toks - 1) / (chunks - 1).where(chunks > 1)
    e2e = pd.to_numeric(df["e2e_s"], errors="coerce") if "e2e_s" in df else np.nan
    df["req_tok_s"] = toks / e2e.where(e2e > 0)
    info = [meta.get((d, str(p))) for d, p in zip(df["dataset"], df["prompt_id"], strict=True)]
    ptoks = df["prompt_tokens"] if "prompt_tokens" in df else pd.Series(None, index=df.index)
    df["length_bucket"] = [
        tokens_bucket(t) or (m.length_bucket if m else "unknown")
        for t, m in zip(pd.to_numeric(ptoks, errors="coerce"), info, strict=True)
    ]
    df["lang"] = [
        m.lang if m else lang_of(str(p)) for m, p in zip(info, df["prompt_id"], strict=True)
    ]
    df["pair"] = [
        "|".join(sorted((str(p), m.twin))) if m and m.twin else twin_key(str(p))
        for m, p in zip(info, df["prompt_id"], strict=True)
    ]
    return df


def sensitivity(reqs: pd.DataFrame, by: str) -> pd.DataFrame:
    """Mean per-request acceptance estimate per method × ``by`` (category, length bucket...)."""
    if reqs.empty or by not in reqs.columns:
        return pd.DataFrame()
    df = reqs[reqs["method"] != NATIVE].dropna(subset=["L_est"])
    if df.empty:
        return pd.DataFrame()
    keys = ["engine_name", "method_label", "dataset", by]
    out = (
        df.groupby(keys, dropna=False)
        .agg(requests=("L_est", "count"), mean_L=("L_est", "mean"), tok_s=("req_tok_s", "mean"))
        .reset_index()
    )
    out["est. accept rate"] = 1 - 1 / out["mean_L"]
    if by == "length_bucket":
        order = {name: i for i, name in enumerate(bucket_labels())}
        out = out.sort_values(
            keys,
            key=lambda col: col.map(lambda v: order.get(v, len(order))) if col.name == by else col,
            kind="stable",
        )
    return out.reset_index(drop=True).rename(
        columns={
            "engine_name": "engine",
            "method_label": "method",
            "mean_L": "L est. (tok/chunk)",
            "tok_s": "req tok/s",
        }
    )


def twins(reqs: pd.DataFrame, runs: pd.DataFrame | None = None) -> pd.DataFrame:
    """zh vs en on matched content: only prompt pairs measured in both languages by the same
    engine × method × concurrency. Per language: the per-request estimate L and, where a whole
    item is one language (the zh set and its English twins are separate sets), the item's real
    MAL from the engine counters."""
    if reqs.empty or "lang" not in reqs.columns:
        return pd.DataFrame()
    fam = ["engine_name", "method_label", "concurrency"]
    df = reqs[(reqs["method"] != NATIVE) & reqs["lang"].isin(["zh", "en"])].dropna(subset=["L_est"])
    if df.empty:
        return pd.DataFrame()
    df = df[df.groupby([*fam, "pair"])["lang"].transform("nunique") == 2]
    if df.empty:
        return pd.DataFrame()
    wide = df.pivot_table(index=fam, columns="lang", values="L_est", aggfunc="mean")
    wide = wide.join(df.groupby(fam)["pair"].nunique().rename("pairs"))
    wide["zh / en"] = wide["zh"] / wide["en"]
    wide = wide.rename(columns={"zh": "L est. zh", "en": "L est. en"})
    if runs is not None and not runs.empty:
        item_lang = df.groupby("item")["lang"].agg(
            lambda s: s.iloc[0] if s.nunique() == 1 else None
        )
        full_lang = reqs.groupby("item")["lang"].nunique() == 1
        mal = runs.set_index("item")["mal"]
        items = item_lang[item_lang.notna() & full_lang.reindex(item_lang.index, fill_value=False)]
        rows = df[df["item"].isin(items.index)].drop_duplicates("item")[[*fam, "item"]]
        rows = rows.assign(lang=rows["item"].map(items), MAL=rows["item"].map(mal))
        real = rows.pivot_table(index=fam, columns="lang", values="MAL", aggfunc="mean")
        for lang in ("zh", "en"):
            wide[f"MAL {lang}"] = real.get(lang, np.nan)
    return wide.reset_index().rename(
        columns={"engine_name": "engine", "method_label": "method", "concurrency": "c"}
    )


def output_lengths(runs: pd.DataFrame) -> pd.DataFrame:
    """Σ output tokens of each method item against its native item (same pair)."""
    df = with_speedup(runs)
    native = df[df["method"] == NATIVE][[*PAIR, "output_tokens"]].rename(
        columns={"output_tokens": "native output tokens"}
    )
    spec = _spec(df).merge(native, on=PAIR, how="inner")
    if spec.empty:
        return pd.DataFrame()
    spec["length ratio"] = spec["output_tokens"] / spec["native output tokens"]
    return spec[
        [
            "model",
            "sampling",
            "engine_name",
            "method_label",
            "dataset",
            "concurrency",
            "output_tokens",
            "native output tokens",
            "length ratio",
        ]
    ].rename(
        columns={
            "engine_name": "engine",
            "method_label": "method",
            "concurrency": "c",
            "output_tokens": "output tokens",
        }
    )


def details(runs: pd.DataFrame) -> pd.DataFrame:
    """Every item's main figures (the per-dataset detail tables)."""
    df = with_speedup(runs)
    if df.empty:
        return pd.DataFrame()
    cols = {
        "dataset": "dataset",
        "engine_name": "engine",
        "method_label": "method",
        "concurrency": "c",
        "completed": "completed",
        "failed": "failed",
        "output_tokens": "output tokens",
        "tok_s": "tok/s",
        "speedup": "speedup",
        "mal": "MAL",
        "acceptance_rate": "accept rate",
        "ttft_p50": "TTFT p50",
        "ttft_p99": "TTFT p99",
        "tpot_p50": "TPOT p50",
        "tpot_p99": "TPOT p99",
        "itl_p50": "ITL p50",
        "e2e_p50": "E2E p50",
        "tokens_per_chunk": "tokens/chunk",
    }
    return df[["model", "sampling", *cols]].rename(columns=cols).reset_index(drop=True)
