"""The GPU night's figures per item (from each summary.json, NVML samples in the item's window,
the EAGLE3 step cost against native's, the roofline) and its markdown tables."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from specperf.testkit.gpu_night.suite import TIMED_OUT
from specperf.testkit.gpu_night.verdicts import verdict_lines


def _pct(stats: Any, key: str = "p50") -> float | None:
    return stats.get(key) if isinstance(stats, dict) else None


def item_figures(summary: dict[str, Any]) -> dict[str, Any]:
    """One item's figures. An item cut short (a pass stopped by its budget) still holds its
    first start's own summary, whose ``repeats`` is the planned count, not the per-start list:
    its figures are that start's, marked ``interrupted``."""
    starts = summary.get("repeats")
    interrupted = isinstance(starts, int)
    eng = (summary.get("environment") or {}).get("engine") or {}
    cfg = eng.get("server_config") or {}
    backend = cfg.get("backend") or {}
    before = (summary.get("counters") or {}).get("before") or {}
    after = (summary.get("counters") or {}).get("after") or {}
    bx, ax = before.get("extra") or {}, after.get("extra") or {}
    drafts = (after.get("drafts") or 0) - (before.get("drafts") or 0)
    fig: dict[str, Any] = {
        "method": summary.get("method"),
        "completed": summary.get("completed"),
        "failed": summary.get("failed"),
        "output_tokens": summary.get("output_tokens"),
        "output_tok_s": summary.get("output_throughput_tok_s"),
        "tpot_ms_p50": _pct(summary.get("tpot_ms")),
        "ttft_ms_p50": _pct(summary.get("ttft_ms")),
        "decode_tok_s_p50": _pct(summary.get("decode_tok_s")),
        "tokens_per_chunk": summary.get("tokens_per_chunk"),
        "mal": summary.get("mean_acceptance_length"),
        "acceptance_rate": summary.get("acceptance_rate"),
        "per_position": summary.get("per_position_acceptance"),
        "fast_path": backend.get("fast_path"),
        "startup_s": eng.get("startup_s"),
        "weight_bytes": cfg.get("weight_bytes"),
        "device_name": cfg.get("device_name"),
        "versions": cfg.get("versions"),
        "cuda_max_memory_allocated_gib": round(ax["cuda_max_memory_allocated_bytes"] / 2**30, 2)
        if "cuda_max_memory_allocated_bytes" in ax
        else None,
        "cuda_memory_reserved_gib": round(ax["cuda_memory_reserved_bytes"] / 2**30, 2)
        if "cuda_memory_reserved_bytes" in ax
        else None,
        "engine_pid": eng.get("pid"),
        "notes": summary.get("notes"),
        "num_requests": summary.get("num_requests"),
        "sizing": summary.get("sizing"),
        "mal_per_start": [
            r.get("mean_acceptance_length") for r in (starts if isinstance(starts, list) else [])
        ],
        "interrupted": interrupted,
    }
    if drafts and "draft_time_s" in ax:
        fig["draft_ms_per_step"] = 1000 * (ax["draft_time_s"] - bx.get("draft_time_s", 0)) / drafts
        fig["verify_ms_per_step"] = (
            1000 * (ax["verify_time_s"] - bx.get("verify_time_s", 0)) / drafts
        )
    return fig


def collect(passes: list[dict[str, Any]], hbm: float | None) -> dict[str, Any]:
    from specperf.environment import summarize_samples

    out: dict[str, Any] = {}
    for p in passes:
        rows: dict[str, Any] = {}
        for s_path in sorted(Path(p["results_dir"]).glob("*/summary.json")):
            s = json.loads(s_path.read_text())
            fig = item_figures(s)
            wc = s.get("wall_clock") or {}
            if p["samples"] and wc:
                lo, hi = wc["started"] - p["samples_wall0"], wc["finished"] - p["samples_wall0"]
                window = [r for r in p["samples"] if lo <= r["t"] <= hi]
                allowed = {fig["engine_pid"]} if fig["engine_pid"] else set()
                fig["nvml"] = summarize_samples(window, allowed)
            rows[s_path.parent.name] = fig
        native = next((f for f in rows.values() if f["method"] == "native"), None)
        for f in rows.values():
            if native and native.get("output_tok_s") and f.get("output_tok_s"):
                f["speedup_vs_native"] = f["output_tok_s"] / native["output_tok_s"]
            if native and f.get("draft_ms_per_step") is not None and native.get("tpot_ms_p50"):
                step = f["draft_ms_per_step"] + f["verify_ms_per_step"]
                f["eagle3_step_ms"] = step
                f["native_step_ms"] = native["tpot_ms_p50"]
                f["overhead_ms_per_step"] = step - native["tpot_ms_p50"]
                f["overhead_ratio"] = step / native["tpot_ms_p50"]
        roof = None
        if hbm and native and native.get("weight_bytes"):
            roof_tok_s = hbm / native["weight_bytes"]
            dec = native.get("decode_tok_s_p50")
            roof = {
                "weight_gb": native["weight_bytes"] / 1e9,
                "hbm_tb_s": hbm / 1e12,
                "roofline_tok_s": roof_tok_s,
                "native_decode_tok_s_p50": dec,
                "native_share": dec / roof_tok_s if dec else None,
                "native_output_tok_s_share": (native.get("output_tok_s") or 0) / roof_tok_s,
            }
        out[p["pass"]] = {
            "verdicts": verdict_lines(
                Path(p["results_dir"]), p["pass"], stopped=p["exit_code"] == TIMED_OUT
            ),
            "exit_code": p["exit_code"],
            "seconds": p["seconds"],
            "items": rows,
            "roofline": roof,
            "nvml_all": summarize_samples(p["samples"]) if p["samples"] else None,
            "sampler_error": p["sampler_error"],
        }
    return out


def markdown(report: dict[str, Any]) -> str:
    lines = [f"# gpu_run {report['started']}", "", f"device: {report['device']}", ""]
    for name, p in report["passes"].items():
        lines += [f"## pass {name} (exit {p['exit_code']}, {p['seconds']} s)", ""]
        lines.append(
            "| item | tok/s | TPOT p50 ms | TTFT p50 ms | MAL | draft ms/step | verify ms/step "
            "| x native | fast path | max alloc GiB | SM MHz mean | W mean |"
        )
        lines.append("|" + "---|" * 12)
        for item, f in p["items"].items():
            nv = ((f.get("nvml") or {}).get("gpus") or {}).get("0") or {}

            def n(v: Any, fmt: str = ".1f") -> str:
                return "-" if v is None else format(v, fmt)

            fast = f.get("fast_path") or {}
            fp = "compiled" if fast.get("compiled") else "eager"
            if (fast.get("decode_loop") or {}).get("used"):
                fp += " + loop"
            draft, verify = f.get("draft_ms_per_step"), f.get("verify_ms_per_step")
            lines.append(
                f"| {item} | {n(f['output_tok_s'])} | {n(f['tpot_ms_p50'], '.2f')} "
                f"| {n(f['ttft_ms_p50'])} | {n(f['mal'], '.3f')} "
                f"| {n(draft, '.2f')} | {n(verify, '.2f')} "
                f"| {n(f.get('speedup_vs_native'), '.2f')} | {fp} "
                f"| {n(f.get('cuda_max_memory_allocated_gib'), '.2f')} "
                f"| {n((nv.get('sm_clock_mhz') or {}).get('mean'), '.0f')} "
                f"| {n((nv.get('power_w') or {}).get('mean'), '.0f')} |"
            )
        if p.get("roofline"):
            r = p["roofline"]
            lines += [
                "",
                f"roofline: {r['weight_gb']:.2f} GB of weights at {r['hbm_tb_s']} TB/s = "
                f"{r['roofline_tok_s']:.0f} tok/s; native decode p50 "
                f"{n(r['native_decode_tok_s_p50'])} tok/s = "
                f"{n((r['native_share'] or 0) * 100)}% of it",
            ]
        lines.append("")
        if p.get("verdicts"):
            lines += ["verdicts (one line per item, for the review):", ""]
            lines += [f"    {v}" for v in p["verdicts"]]
            lines.append("")
    return "\n".join(lines) + "\n"
