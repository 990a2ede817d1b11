#!/usr/bin/env python3
"""A/B of the transformers engine across code trees on one GPU, interleaved (issue 14).

    python scripts/gpu_ab.py --out OUT --tree old=DIR --tree main=DIR --tree fixed=DIR \\
        --plan eagle3:3,draft:3,native:1,ngram:1 [--shapes tiny --device cpu]   # CPU dry run

Each tree is a checkout (at least ``specperf/``); its hf_server is started with that tree first
on PYTHONPATH (through ``scripts/gpu_ab_wrap.py``, which can trace one EAGLE3 step), with the
arguments the h200-transformers suite gives it (random-weight Qwen3-8B shape, 0.6B-shape draft,
EAGLE3 head of the published shape, bf16, max length 1024, K = 3). Per engine start: one warm-up
request, counters, N measured requests at concurrency 1 (the first turns of the mt-bench smoke
prompts, greedy, ``ignore_eos``), counters again, then for EAGLE3 (``--profile``) one more request
whose 4th step is traced. Rounds interleave the trees (rotated each round) so drift of the host
hits every tree alike; a method with S starts runs in rounds 1..S.

Per start: output tok/s (tokens over the measured wall time, as the suite's
output_throughput_tok_s), TTFT p50, TPOT p50, steps, EAGLE3's draft/verify ms per verify step
from the engine's counters, start-up seconds, fast path, load average and NVML SM clock.
Written: OUT/ab.jsonl (one row per start, appended as it goes), OUT/ab.md (tables),
OUT/logs/, OUT/profile/ (traces). ``--budget-s`` stops starting engines past that many seconds.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

TARGET, DRAFT, HEAD = "qwen3-8b-shape", "qwen3-0.6b-shape", "qwen3-8b-eagle3-shape"


def method_args(method: str, models: Path) -> list[str]:
    """hf_server arguments per method, as build_command makes them for the GPU suite."""
    if method == "eagle3":
        return [
            "--method",
            "eagle3",
            "--num-speculative-tokens",
            "3",
            "--draft-model",
            str(models / HEAD),
            "--draft-random-weights",
        ]
    if method == "draft":
        return [
            "--method",
            "draft_model",
            "--num-speculative-tokens",
            "3",
            "--draft-model",
            str(models / DRAFT),
            "--draft-random-weights",
        ]
    if method == "ngram":
        return ["--method", "ngram", "--num-speculative-tokens", "3", "--ngram-max", "3"]
    if method == "native":
        return ["--method", "native"]
    raise SystemExit(f"--plan: unknown method {method!r} (eagle3, draft, ngram, native)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def prompts(n: int) -> list[str]:
    from specperf.datasets import load_dataset

    items = load_dataset("mt-bench", tier="smoke").items
    firsts = [it.turns[0] for it in items]
    return [firsts[i % len(firsts)] for i in range(n)]


class Nvml:
    """SM clock samples (MHz) every 0.5 s while ``active``; nothing without NVML."""

    def __init__(self) -> None:
        self.samples: list[float] = []
        self.active = False
        try:
            import pynvml

            pynvml.nvmlInit()
            self.nv, self.h = pynvml, pynvml.nvmlDeviceGetHandleByIndex(0)
        except Exception:
            self.nv = None
            return
        threading.Thread(target=self._loop, daemon=True).start()

    def _loop(self) -> None:
        while True:
            if self.active:
                with contextlib.suppress(Exception):
                    self.samples.append(
                        float(self.nv.nvmlDeviceGetClockInfo(self.h, self.nv.NVML_CLOCK_SM))
                    )
            time.sleep(0.5)

    def window(self) -> tuple[float | None, float | None]:
        s, self.samples = self.samples, []
        return (min(s), max(s)) if s else (None, None)


def stream_one(client: httpx.Client, url: str, text: str, max_tokens: int) -> dict[str, Any]:
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": text}],
        "stream": True,
        "stream_options": {"include_usage": True},
        "temperature": 0.0,
        "top_p": 1.0,
        "top_k": -1,
        "min_p": 0.0,
        "max_tokens": max_tokens,
        "ignore_eos": True,
        "chat_template_kwargs": {"enable_thinking": False},
    }
    sent = time.perf_counter()
    first = last = None
    tokens = 0
    with client.stream("POST", url, json=body) as resp:
        resp.raise_for_status()
        for line in resp.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            if "error" in chunk:
                raise RuntimeError(f"server error: {chunk['error']}")
            for ch in chunk.get("choices") or []:
                ids = ch.get("token_ids") or []
                if ids:
                    now = time.perf_counter()
                    first = first if first is not None else now
                    last = now
                    tokens += len(ids)
    if first is None or last is None:
        raise RuntimeError("no tokens streamed")
    ttft, e2e = first - sent, last - sent
    return {
        "tokens": tokens,
        "ttft_s": ttft,
        "e2e_s": e2e,
        "sent": sent,
        "end": last,
        "tpot_s": (e2e - ttft) / (tokens - 1) if tokens > 1 else None,
    }


def one_start(
    args: argparse.Namespace, tree: str, tree_dir: Path, method: str, k: int, nvml: Nvml
) -> dict[str, Any]:
    label = f"{tree}-{method}-{k}"
    port = free_port()
    cmd = [
        sys.executable,
        str(HERE / "gpu_ab_wrap.py"),
        "--model",
        str(args.models / TARGET),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        *method_args(method, args.models),
        "--dtype",
        args.dtype,
        "--max-model-len",
        "1024",
        "--device",
        args.device,
        "--probe-tokens",
        "16",
        "--random-weights",
    ]
    prof_dir = args.out / "profile"
    prof_dir.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "TOKENIZERS_PARALLELISM": "false",
        "AB_LABEL": label,
        "PYTHONPATH": os.pathsep.join([str(tree_dir), os.environ.get("PYTHONPATH", "")]),
    }
    if args.profile and method == "eagle3":
        env["AB_PROFILE_DIR"] = str(prof_dir)
    log = args.out / "logs" / f"{label}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    row: dict[str, Any] = {"tree": tree, "method": method, "start": k, "label": label}
    t0 = time.monotonic()
    with log.open("w") as fh:
        proc = subprocess.Popen(
            cmd, cwd=tree_dir, env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True
        )
    base = f"http://127.0.0.1:{port}"
    try:
        with httpx.Client(timeout=httpx.Timeout(600.0), trust_env=False) as client:
            while True:
                if proc.poll() is not None:
                    raise RuntimeError(f"server exited {proc.returncode}; see {log}")
                try:
                    if client.get(f"{base}/health", timeout=2).is_success:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() - t0 > args.start_timeout:
                    raise RuntimeError("server not ready in time")
                time.sleep(0.5)
            row["startup_s"] = round(time.monotonic() - t0, 1)
            cfg = client.get(f"{base}/specperf/config").json()
            row["fast_path"] = (cfg.get("backend") or {}).get("fast_path")
            row["versions"] = cfg.get("versions")
            n_req = args.requests.get(method, args.requests.get("*", 4))
            max_tok = args.max_tokens.get(method, args.max_tokens.get("*", 64))
            texts = prompts(n_req)
            url = f"{base}/v1/chat/completions"
            stream_one(client, url, texts[0], args.warmup_tokens)
            before = client.get(f"{base}/specperf/counters").json()
            row["loadavg_before"] = Path("/proc/loadavg").read_text().split()[:3]
            nvml.active = True
            reqs = [stream_one(client, url, t, max_tok) for t in texts]
            nvml.active = False
            after = client.get(f"{base}/specperf/counters").json()
            row["sm_mhz_min"], row["sm_mhz_max"] = nvml.window()
            wall = reqs[-1]["end"] - reqs[0]["sent"]
            toks = sum(r["tokens"] for r in reqs)
            row.update(
                {
                    "requests": len(reqs),
                    "max_tokens": max_tok,
                    "output_tokens": toks,
                    "tok_s": toks / wall,
                    "ttft_ms_p50": 1000 * statistics.median(r["ttft_s"] for r in reqs),
                    "tpot_ms_p50": 1000
                    * statistics.median(r["tpot_s"] for r in reqs if r["tpot_s"] is not None),
                    "ttft_ms": [round(1000 * r["ttft_s"], 2) for r in reqs],
                }
            )
            steps = after["steps"] - before["steps"]
            row["steps"] = steps
            row["ms_per_step"] = 1000 * wall / steps if steps else None
            drafts = (after.get("drafts") or 0) - (before.get("drafts") or 0)
            if drafts:
                acc = after["accepted_tokens"] - before["accepted_tokens"]
                row["mal"] = 1 + acc / drafts
                if after.get("draft_time_s") is not None:
                    d = after["draft_time_s"] - before["draft_time_s"]
                    v = after["verify_time_s"] - before["verify_time_s"]
                    row["draft_ms_per_step"] = 1000 * d / drafts
                    row["verify_ms_per_step"] = 1000 * v / drafts
            if args.profile and method == "eagle3":
                (prof_dir / "profile_now").write_text("1")
                stream_one(client, url, texts[0], 16)
                (prof_dir / "profile_now").unlink(missing_ok=True)
                step = prof_dir / f"step-{label}.json"
                if step.exists():
                    s = json.loads(step.read_text())
                    row["profiled_step"] = {k2: v2 for k2, v2 in s.items() if k2 != "top_cpu_ops"}
    except Exception as exc:
        row["error"] = f"{type(exc).__name__}: {exc}"
    finally:
        stop(proc)
    row["seconds"] = round(time.monotonic() - t0, 1)
    return row


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    except ProcessLookupError:
        pass


def fmt(v: Any, f: str = ".1f") -> str:
    return "-" if v is None else format(v, f)


def tables(rows: list[dict[str, Any]]) -> str:
    out = [
        "| method | tree | start | tok/s | TTFT p50 ms | TPOT p50 ms | ms/step | draft ms/step "
        "| verify ms/step | MAL | start-up s | fast path | SM MHz | load |",
        "|" + "---|" * 14,
    ]
    for r in sorted(rows, key=lambda r: (r["method"], r["tree"], r["start"])):
        if "error" in r:
            out.append(f"| {r['method']} | {r['tree']} | {r['start']} | error: {r['error'][:80]} |")
            continue
        fp = r.get("fast_path") or {}
        fp_s = "compiled" if fp.get("compiled") else "eager"
        out.append(
            f"| {r['method']} | {r['tree']} | {r['start']} | {fmt(r['tok_s'], '.2f')} "
            f"| {fmt(r['ttft_ms_p50'])} | {fmt(r['tpot_ms_p50'], '.2f')} "
            f"| {fmt(r.get('ms_per_step'), '.2f')} | {fmt(r.get('draft_ms_per_step'), '.2f')} "
            f"| {fmt(r.get('verify_ms_per_step'), '.2f')} | {fmt(r.get('mal'), '.3f')} "
            f"| {fmt(r.get('startup_s'))} | {fp_s} "
            f"| {fmt(r.get('sm_mhz_min'), '.0f')}-{fmt(r.get('sm_mhz_max'), '.0f')} "
            f"| {(r.get('loadavg_before') or ['-'])[0]} |"
        )
    out += [
        "",
        "| method | tree | starts | tok/s median (min-max) | TTFT p50 median | "
        "draft ms/step median | verify ms/step median |",
        "|" + "---|" * 7,
    ]
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows:
        if "error" not in r:
            groups.setdefault((r["method"], r["tree"]), []).append(r)

    def med(rs: list[dict[str, Any]], key: str) -> float | None:
        vals = [r[key] for r in rs if r.get(key) is not None]
        return statistics.median(vals) if vals else None

    for (m, t), rs in sorted(groups.items()):
        tok = [r["tok_s"] for r in rs]
        out.append(
            f"| {m} | {t} | {len(rs)} | {fmt(statistics.median(tok), '.2f')} "
            f"({min(tok):.2f}-{max(tok):.2f}) | {fmt(med(rs, 'ttft_ms_p50'))} "
            f"| {fmt(med(rs, 'draft_ms_per_step'), '.2f')} "
            f"| {fmt(med(rs, 'verify_ms_per_step'), '.2f')} |"
        )
    return "\n".join(out) + "\n"


def schedule(
    names: list[str], plan: dict[str, int], skip: set[tuple[str, ...]]
) -> list[tuple[str, str, int]]:
    """(tree, method, start) in run order: rounds of the methods with several starts, the trees
    rotated each round; single-start methods (controls) after them, so a spent budget drops
    controls first. ``skip``: (tree, method) pairs left out."""
    runs: list[tuple[str, str, int]] = []
    multi = {m: n for m, n in plan.items() if n > 1}
    for rnd in range(max(multi.values(), default=0)):
        order = names[rnd % len(names) :] + names[: rnd % len(names)]
        for method, starts in multi.items():
            if rnd < starts:
                runs += [(t, method, rnd + 1) for t in order]
    for method, starts in plan.items():
        if starts == 1:
            runs += [(t, method, 1) for t in names]
    return [r for r in runs if (r[0], r[1]) not in skip]


def kv(spec: str, cast: type) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for part in filter(None, spec.split(",")):
        k, _, v = part.partition(":")
        out[k] = cast(v) if v else 1
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--tree", action="append", required=True, help="NAME=DIR (repeat)")
    ap.add_argument("--plan", default="eagle3:3,draft:3,native:1,ngram:1", help="method:starts")
    ap.add_argument("--requests", default="*:4", help="method:N measured requests per start")
    ap.add_argument("--max-tokens", default="*:64", help="method:max_tokens per request")
    ap.add_argument("--warmup-tokens", type=int, default=16)
    ap.add_argument("--shapes", choices=("qwen3-8b", "tiny"), default="qwen3-8b")
    ap.add_argument("--models", type=Path, default=None)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--profile", action="store_true", help="trace one EAGLE3 step per start")
    ap.add_argument("--start-timeout", type=float, default=900.0)
    ap.add_argument("--budget-s", type=float, default=1e9, help="start no engine after this")
    ap.add_argument("--skip", default="", help="tree:method pairs to leave out (comma list)")
    args = ap.parse_args()
    args.requests = kv(args.requests, int)
    args.max_tokens = kv(args.max_tokens, int)
    trees = {}
    for t in args.tree:
        name, _, d = t.partition("=")
        if not (Path(d) / "specperf").is_dir():
            raise SystemExit(f"--tree {t}: {d}/specperf is not there")
        trees[name] = Path(d).resolve()
    plan = kv(args.plan, int)
    for m in plan:
        method_args(m, Path("."))
    args.out.mkdir(parents=True, exist_ok=True)
    if args.models is None:
        from scripts.gpu_run import build_models

        args.models = Path("/tmp") / f"ab-models-{args.shapes}"
        build_models(args.models, args.shapes)
    started = time.monotonic()
    nvml = Nvml()
    rows: list[dict[str, Any]] = []
    skip = {tuple(x.split(":", 1)) for x in filter(None, args.skip.split(","))}
    for run in schedule(list(trees), plan, skip):
        tree, method, k = run
        if time.monotonic() - started > args.budget_s:
            print(f"budget spent: skipping {tree} {method} start {k}", flush=True)
            continue
        row = one_start(args, tree, trees[tree], method, k, nvml)
        rows.append(row)
        with (args.out / "ab.jsonl").open("a") as fh:
            fh.write(json.dumps(row, default=str) + "\n")
        brief = {
            k: row.get(k)
            for k in (
                "label",
                "tok_s",
                "ttft_ms_p50",
                "draft_ms_per_step",
                "verify_ms_per_step",
                "startup_s",
                "error",
            )
        }
        print(json.dumps(brief, default=str), flush=True)
    md = tables(rows)
    (args.out / "ab.md").write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
