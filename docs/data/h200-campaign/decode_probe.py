"""Would a decode loop without generate()'s per-token host work make H200 starts alike? (issue 13)

The transformers engine's native token takes ~9.4 ms on the H200 where reading the Qwen3-8B
shape's weights takes ~3.4 ms: most of a token is host work (generate's Python loop and its
per-token sync), and the host's speed wanders from minute to minute and host to host
(docs/baselines.md, "H200 session 12"). That wander is what keeps a 10 % slowdown inside the
noise. This probe measures, in fresh processes (one per start), the same greedy requests three
ways, interleaved request by request:

    generate  the engine's own path: GenerateBackend, static cache, compiled decode step
              (check_fast_path as at engine start-up), one sync per token (the streamer)
    loop1     the same compiled decode call driven by a bare loop: argmax on the device,
              the token copied to pinned memory and waited for, every token (depth 1)
    loop2     as loop1, but the next step is queued before the previous token is waited for
              (depth 2): the GPU always has a step to run, so the host's speed only matters
              when its per-step work exceeds the GPU's

Per start and variant: decode tok/s (median over requests, tokens after the first over their
time), whether the loop's tokens equal generate's, and the engine's own start-up check of the
loop (``fast_path.decode_loop``). loop1 and loop2 are the engine's DecodeLoop at depth 1 and 2;
graph (an experiment, GraphLoop below) captures the whole step in one CUDA graph. The host
probe (a fixed Python loop) runs before and after each start. If loop2's starts differ by ~1 %
where generate's differ by 4 %, the engine's native path is worth rebuilding on it; if not,
the host is not the noise.

    python3 docs/data/h200-campaign/decode_probe.py --out $OUT --starts 4
    python3 docs/data/h200-campaign/decode_probe.py --out /tmp/dp --shapes tiny --device cpu \
        --starts 2 --requests 2 --tokens 16         # dry run of the probe itself (no compile)

``--hog N`` adds one more start with N busy pure-Python processes beside it (a slow host).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics as st
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

VARIANTS = ("generate", "loop1", "loop2", "graph")


def _hog(stop_at: float) -> None:
    x = 0
    while time.monotonic() < stop_at:
        x = (x * 1103515245 + 12345) & 0xFFFFFFFF


def one_start(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    from specperf.eagle3.sampling import Sampling
    from specperf.engines.hf_decode_loop import DecodeLoop
    from specperf.engines.hf_generation import GenerateBackend, Request
    from specperf.engines.hf_server import load_model

    dev = torch.device(args.device)
    t0 = time.monotonic()
    model = load_model(args.model, torch.bfloat16, dev, True, 0)
    loaded_s = time.monotonic() - t0
    vocab = int(model.config.vocab_size)
    gen = torch.Generator().manual_seed(7)
    prompts = [
        torch.randint(3, min(vocab, 2048), (args.prompt_len,), generator=gen).tolist()
        for _ in range(args.requests)
    ]
    backend = GenerateBackend(
        model,
        {1},
        0,
        args.max_len,
        method="native",
        max_batch=1,
        static_cache=True,
        decode_loop="auto",  # the engine's own check of the loop, recorded in fast_path
    )
    t0 = time.monotonic()
    backend.check_fast_path(prompts[0], 16)
    check_s = time.monotonic() - t0
    use_compiled = bool(backend.fast_path.get("compiled"))
    greedy = Sampling(temperature=0.0)

    def run_generate(prompt: list[int]) -> tuple[list[int], list[float]]:
        toks: list[int] = []
        times: list[float] = []

        def on_step(row: int, info: Any, reason: Any) -> None:
            times.append(time.perf_counter())
            toks.extend(info.tokens)

        backend.generate([Request(prompt, args.tokens, greedy, ignore_eos=True)], on_step)
        return toks, times

    step = model.get_compiled_call(None) if use_compiled else None
    loops = {d: DecodeLoop(model, lambda: backend._cache(1), step, depth=d) for d in (1, 2)}

    def run_loop(prompt: list[int], depth: int) -> tuple[list[int], list[float]]:
        toks: list[int] = []
        times: list[float] = []

        def on_token(t: int) -> bool:
            times.append(time.perf_counter())
            toks.append(t)
            return True

        loops[depth].run(prompt, args.tokens, on_token)
        return toks, times

    graph = GraphLoop(model, lambda: backend._cache(1)) if dev.type == "cuda" else None
    graph_error: str | None = None

    def run_graph(prompt: list[int]) -> tuple[list[int], list[float]]:
        toks: list[int] = []
        times: list[float] = []

        def on_token(t: int) -> None:
            times.append(time.perf_counter())
            toks.append(t)

        graph.run(prompt, args.tokens, on_token)
        return toks, times

    def rate(times: list[float]) -> float:
        return (len(times) - 1) / (times[-1] - times[0]) if len(times) > 1 else float("nan")

    # warm every variant once (loop graphs are recorded on first calls)
    ref, _ = run_generate(prompts[0])
    for d in (1, 2):
        run_loop(prompts[0], d)
    if graph is not None:
        try:
            run_graph(prompts[0])
        except Exception as exc:  # an experiment: record why it cannot capture
            graph_error, graph = repr(exc)[:800], None
    per: dict[str, list[dict[str, float]]] = {v: [] for v in VARIANTS}
    agree: dict[str, list[int | None]] = {"loop1": [], "loop2": [], "graph": []}
    for prompt in prompts:
        g_toks, g_times = run_generate(prompt)
        per["generate"].append({"tok_s": rate(g_times)})
        for d, name in ((1, "loop1"), (2, "loop2")):
            l_toks, l_times = run_loop(prompt, d)
            per[name].append({"tok_s": rate(l_times)})
            pairs = enumerate(zip(g_toks, l_toks, strict=False))
            diff = next((i for i, (a, b) in pairs if a != b), None)
            agree[name].append(diff)
        if graph is not None:
            l_toks, l_times = run_graph(prompt)
            per["graph"].append({"tok_s": rate(l_times)})
            pairs = enumerate(zip(g_toks, l_toks, strict=False))
            agree["graph"].append(next((i for i, (a, b) in pairs if a != b), None))
    summary = {}
    for v, rows in per.items():
        if not rows:
            continue
        rates = [r["tok_s"] for r in rows]
        summary[v] = {
            "tok_s_median": st.median(rates),
            "tok_s": [round(x, 2) for x in rates],
        }
    return {
        "loaded_s": round(loaded_s, 1),
        "check_fast_path_s": round(check_s, 1),
        "fast_path": backend.fast_path,
        "loop_compiled": use_compiled,
        "first_difference_vs_generate": agree,
        "variants": summary,
        "graph_error": graph_error,
        "ref_len": len(ref),
    }


class GraphLoop:
    """EXPERIMENT: the whole eager decode step (forward, argmax, next position) captured in one
    CUDA graph and replayed, the next replay queued before the host waits for a token: host work
    per token is a replay launch and a copy, so the GPU should set the pace (~3.4 ms a token)."""

    def __init__(self, model: Any, cache: Any) -> None:
        import inspect

        import torch

        from specperf.eagle3.target import cache_kwarg

        self.model, self.cache_fn, self.torch = model, cache, torch
        dev = next(model.parameters()).device
        self.tok = torch.zeros((1, 1), dtype=torch.long, device=dev)
        self.pos = torch.zeros((1, 1), dtype=torch.long, device=dev)
        self.kw = cache_kwarg(model)
        self.cp = "cache_position" in inspect.signature(model.forward).parameters
        self.graph = None
        self.cache = None

    def _body(self) -> None:
        extra = {"cache_position": self.pos[0]} if self.cp else {}
        o = self.model(
            input_ids=self.tok,
            position_ids=self.pos,
            use_cache=True,
            **{self.kw: self.cache},
            **extra,
        )
        self.tok.copy_(o.logits[:, -1:].argmax(-1))
        self.pos.add_(1)

    def run(self, prompt: list[int], n: int, on_token: Any) -> None:
        torch = self.torch
        with torch.inference_mode():
            cache = self.cache_fn()
            if self.cache is not None and cache is not self.cache:
                raise RuntimeError("the static cache object changed: the graph holds the old one")
            self.cache = cache
            dev = self.tok.device
            n0 = len(prompt)
            pos = torch.arange(n0, device=dev)[None]
            extra = {"cache_position": pos[0]} if self.cp else {}
            out = self.model(
                input_ids=torch.tensor([prompt], device=dev),
                position_ids=pos,
                use_cache=True,
                **{self.kw: cache},
                **extra,
            )
            self.tok.copy_(out.logits[:, -1:].argmax(-1))
            self.pos.fill_(n0)
            on_token(int(self.tok.item()))
            left = n - 1
            if self.graph is None:  # warm on a side stream (real steps), then capture
                side = torch.cuda.Stream()
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side):
                    for _ in range(3):
                        self._body()
                        on_token(int(self.tok.item()))
                        left -= 1
                torch.cuda.current_stream().wait_stream(side)
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g):
                    self._body()
                self.graph = g
            slots = [torch.empty((1, 1), dtype=torch.long, pin_memory=True) for _ in range(2)]
            events = [torch.cuda.Event() for _ in range(2)]
            pending: list[int] = []
            for i in range(left):
                self.graph.replay()
                slot = i % 2
                slots[slot].copy_(self.tok, non_blocking=True)
                events[slot].record()
                pending.append(slot)
                while pending and (len(pending) >= 2 or i == left - 1):
                    sl = pending.pop(0)
                    events[sl].synchronize()
                    on_token(int(slots[sl][0, 0]))


def host_loop_ms() -> float:
    from host_probe import python_loop_times_ms

    return round(st.median(python_loop_times_ms(5)), 1)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--starts", type=int, default=4)
    ap.add_argument("--requests", type=int, default=6)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--prompt-len", type=int, default=64)
    ap.add_argument("--max-len", type=int, default=1024)
    ap.add_argument("--shapes", choices=("qwen3-8b", "tiny"), default="qwen3-8b")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--hog", type=int, default=0, help="one more start beside N busy processes")
    ap.add_argument("--budget-s", type=float, default=520.0)
    ap.add_argument("--one-start", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--model", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one_start:
        print("RESULT " + json.dumps(one_start(args)), flush=True)
        return 0
    t_end = time.monotonic() + args.budget_s
    args.out.mkdir(parents=True, exist_ok=True)
    from gpu_run import build_models

    models = build_models(args.out / "models", args.shapes)
    model = models["qwen3-8b-shape"]
    plan = [0] * args.starts + ([args.hog] if args.hog else [])
    rows = []
    for i, hog in enumerate(plan):
        if time.monotonic() > t_end - 60:
            print(f"start {i}: skipped, budget", flush=True)
            break
        before = host_loop_ms()
        hogs = []
        if hog:
            stop_at = time.monotonic() + max(30.0, t_end - time.monotonic() - 20)
            hogs = [multiprocessing.Process(target=_hog, args=(stop_at,)) for _ in range(hog)]
            for h in hogs:
                h.start()
        cmd = [sys.executable, __file__, "--one-start", "--model", model, "--out", str(args.out)]
        for flag in ("requests", "tokens", "prompt_len", "max_len", "device"):
            cmd += [f"--{flag.replace('_', '-')}", str(getattr(args, flag))]
        t0 = time.monotonic()
        try:
            proc = subprocess.run(
                cmd,
                capture_output=True,
                text=True,
                timeout=max(10.0, t_end - time.monotonic() - 10),
                env={**os.environ, "CUBLAS_WORKSPACE_CONFIG": ":4096:8"},
            )
            text = proc.stdout + proc.stderr
        except subprocess.TimeoutExpired as exc:
            text = f"timeout: {exc}"
        finally:
            for h in hogs:
                h.terminate()
        (args.out / f"start{i}.log").write_text(text)
        line = next((ln for ln in text.splitlines() if ln.startswith("RESULT ")), None)
        row: dict[str, Any] = {"start": i, "hog": hog, "wall_s": round(time.monotonic() - t0, 1)}
        row["host_loop_ms"] = [before, host_loop_ms()]
        if line is None:
            row["error"] = text[-600:]
        else:
            row.update(json.loads(line[len("RESULT ") :]))
        rows.append(row)
        (args.out / "decode_probe.json").write_text(json.dumps(rows, indent=1) + "\n")
        vs = row.get("variants", {})
        print(
            f"start {i} hog {hog} wall {row['wall_s']}s host loop {row['host_loop_ms']} ms: "
            + "  ".join(f"{v} {vs[v]['tok_s_median']:.1f}" for v in vs)
            + (f"  ERROR {row['error'][-300:]}" if "error" in row else ""),
            flush=True,
        )
    print_table(rows)
    return 0


def print_table(rows: list[dict[str, Any]]) -> None:
    import math

    print("\nvariant   starts  tok/s per start                      sd of log")
    for v in VARIANTS:
        vals = [
            r["variants"][v]["tok_s_median"]
            for r in rows
            if v in r.get("variants", {}) and not r["hog"]
        ]
        if not vals:
            continue
        logs = [math.log(x) for x in vals]
        sd = st.stdev(logs) * 100 if len(logs) > 1 else float("nan")
        per_start = ", ".join(f"{x:.1f}" for x in vals)
        print(f"{v:9} {len(vals):6}  {per_start:36} {sd:8.2f}%")
    for r in rows:
        if r.get("hog") and "variants" in r:
            vs = r["variants"]
            print(
                f"with {r['hog']} busy processes: "
                + ", ".join(f"{v} {vs[v]['tok_s_median']:.1f}" for v in VARIANTS if v in vs)
            )


if __name__ == "__main__":
    raise SystemExit(main())
