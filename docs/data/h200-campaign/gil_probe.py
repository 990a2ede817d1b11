"""Why does the H200 engine decode at two speeds? (issue 13, session 11 diagnostic)

Per-request step times of the transformers engine on the H200 are bimodal: native 9.15 vs
9.98 ms a token, EAGLE3 14.9 vs 18.0 ms a verify step, and the share of a start's requests at the
slow level explains its tok/s (correlation -0.95; docs/data/h200-campaign/step_regimes.txt).
hf_server runs the model on one thread and streams from an aiohttp event loop on another; every
step hands an event across (call_soon_threadsafe), so the two threads meet at the GIL once a
step, and a thread that wants the GIL waits up to the switch interval (5 ms by default) when the
other does not let go. This probe starts the engine (random Qwen3-8B shape, as the suite does)
per variant, measures 12 gsm8k requests x 128 tokens with ``specperf bench``, samples which CPU
each engine thread is on every 10 ms, and writes per request the median and the spread of its
step times:

    default   the engine as the suite runs it
    sw05      the same with sys.setswitchinterval(0.0005) (a sitecustomize on PYTHONPATH)
    pinned    the model thread pinned to one CPU, the main thread (event loop, and the threads
              it starts) to another that is not its SMT sibling (a sitecustomize)

A level holds for seconds; it changes between requests more often than inside one for native
(17 vs 7 in session 11's starts), about as often for EAGLE3 (23 vs 26; step_regimes.txt). Where
the model thread runs (it sleeps between requests and may wake up elsewhere) and the GIL's phase
are both candidates: the per-request CPU of both threads is recorded to tell them apart.

    python3 docs/data/h200-campaign/gil_probe.py --out $OUT [--variants native:default,native:sw05]
    python3 docs/data/h200-campaign/gil_probe.py --out $OUT --head <fitted head dir> --rounds 2 \
        --variants eagle3:default,eagle3:sw05,native:default,native:sw05   # session 14
    python3 docs/data/h200-campaign/gil_probe.py --out /tmp/g --shapes tiny --device cpu  # dry run

``--head`` takes a head fitted by ``scripts/gpu_run.py --passes ""`` (its fit.json ``path``);
the bench sends the suite's ``smoke`` tier, the prompts the head is fitted on. ``--rounds``
repeats the variant list, so variants alternate on one host.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import signal
import socket
import statistics as st
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT))


DEVICE = ["cuda"]  # --device (cpu: a dry run of the probe itself with --shapes tiny)


SITE = {
    "sw05": "import sys\nsys.setswitchinterval(0.0005)\n",
    "pinned": (
        "import os, threading\n"
        "os.sched_setaffinity(0, {int(os.environ['GILPROBE_MAIN_CPU'])})\n"
        "_run = threading.Thread.run\n"
        "def _pinned_run(self):\n"
        "    if self.name == 'hf-worker':\n"
        "        os.sched_setaffinity(0, {int(os.environ['GILPROBE_WORKER_CPU'])})\n"
        "    return _run(self)\n"
        "threading.Thread.run = _pinned_run\n"
    ),
}


def _pin_pair() -> tuple[int, int]:
    """CPU 2 for the model thread, and the next CPU that is not its SMT sibling for the rest."""
    sib = _siblings()
    cpus = sorted(os.sched_getaffinity(0))
    worker = cpus[2 % len(cpus)]
    for c in cpus:
        if c != worker and not _in_list(c, sib.get(worker, "")):
            return worker, c
    return worker, cpus[0]


def _in_list(cpu: int, text: str) -> bool:
    """Is ``cpu`` in a kernel CPU list like "2,10" or "2-3"?"""
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        if lo.strip().isdigit() and int(lo) <= cpu <= int(hi or lo):
            return True
    return False


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _threads(pid: int) -> list[tuple[int, int, int]]:
    """(tid, CPU last run on, user+system ticks) of every thread of the engine process."""
    out = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
            # after the name: field 3 is index 0, so utime/stime (14/15) are 11/12, CPU (39) 36
            out.append((int(task.name), int(fields[36]), int(fields[11]) + int(fields[12])))
        except (OSError, ValueError, IndexError):
            continue
    return out


def _sample(pid: int, stop: threading.Event, rows: list) -> None:
    while not stop.is_set():
        try:
            rows.append((time.monotonic(), _threads(pid)))
        except OSError:
            return
        time.sleep(0.01)


def _placement(rows: list, main_tid: int) -> dict:
    """How often the model thread (the other thread that used the most CPU while measuring;
    Python 3.12 does not name OS threads) and the main (event loop) thread were last on one
    CPU, how often each changed CPU, and the CPU ticks each used."""
    if not rows:
        return {"samples": 0}
    first = {tid: ticks for tid, _, ticks in rows[0][1]}
    last_ticks = {tid: ticks for tid, _, ticks in rows[-1][1]}
    used = {tid: t - first.get(tid, 0) for tid, t in last_ticks.items()}
    worker = max((t for t in used if t != main_tid), key=lambda t: used[t], default=None)
    names = {main_tid: "main", worker: "worker"}
    same = total = 0
    moves: dict[str, int] = {}
    last: dict[str, int] = {}
    for _, threads in rows:
        by = {names[tid]: cpu for tid, cpu, _ in threads if tid in names}
        if len(by) == 2:
            total += 1
            same += by["worker"] == by["main"]
        for name, cpu in by.items():
            if name in last and last[name] != cpu:
                moves[name] = moves.get(name, 0) + 1
            last[name] = cpu
    return {
        "samples": total,
        "same_cpu_share": same / total if total else None,
        "moves": moves,
        "ticks": {"main": used.get(main_tid), "worker": used.get(worker)},
        "worker_tid": worker,
        "threads": len(last_ticks),
    }


def _siblings() -> dict[int, str]:
    out = {}
    for d in Path("/sys/devices/system/cpu").glob("cpu[0-9]*"):
        try:
            out[int(d.name[3:])] = (d / "topology/thread_siblings_list").read_text().strip()
        except (OSError, ValueError):
            continue
    return out


def _steps(results_dir: Path, rows: list, bench_end: float, main_tid: int) -> list[dict]:
    """Per request: step-time median and spread, and where the engine's two threads were in
    the middle 60 % of it. The client's clock is aligned by the end of its last request (the
    bench process exits a few 100 ms later: the alignment is that rough)."""
    reqs = [json.loads(line) for line in (results_dir / "requests.jsonl").read_text().splitlines()]
    t0 = bench_end - 0.2 - max(r["sent_s"] + r["e2e_s"] for r in reqs)
    place = _placement(rows, main_tid)
    worker = place.get("worker_tid")
    sib = _siblings()
    out = []
    for r in reqs:
        ct = r["chunk_times_s"]
        gaps = [1e3 * (b - a) for a, b in itertools.pairwise(ct)]
        q = st.quantiles(gaps, n=10)
        a = t0 + r["sent_s"] + 0.2 * r["e2e_s"]
        b = t0 + r["sent_s"] + 0.8 * r["e2e_s"]
        cpus: dict[str, list[int]] = {"main": [], "worker": []}
        for t, threads in rows:
            if a <= t <= b:
                for tid, cpu, _ in threads:
                    if tid == main_tid:
                        cpus["main"].append(cpu)
                    elif tid == worker:
                        cpus["worker"].append(cpu)
        mode = {k: (st.mode(v) if v else None) for k, v in cpus.items()}
        out.append(
            {
                "median_ms": st.median(gaps),
                "p10_ms": q[0],
                "p90_ms": q[-1],
                "worker_cpu": mode["worker"],
                "main_cpu": mode["main"],
                "worker_siblings": sib.get(mode["worker"]) if mode["worker"] is not None else None,
                "worker_cpus_seen": sorted(set(cpus["worker"])),
            }
        )
    return out


def run_variant(
    name: str, method: str, variant: str, models: dict, out: Path, deadline: float
) -> dict:
    env = dict(os.environ, CUBLAS_WORKSPACE_CONFIG=":4096:8")
    if variant in SITE:
        site = out / f"{variant}-site"
        site.mkdir(exist_ok=True)
        (site / "sitecustomize.py").write_text(SITE[variant])
        env["PYTHONPATH"] = f"{site}:{env.get('PYTHONPATH', '')}"
        worker, main = _pin_pair()
        env["GILPROBE_WORKER_CPU"], env["GILPROBE_MAIN_CPU"] = str(worker), str(main)
        res_pin = {"worker_cpu": worker, "main_cpu": main}
    else:
        res_pin = {}
    port = _port()
    cmd = [sys.executable, "-m", "specperf.engines.hf_server", "--model", models["target"]]
    cmd += ["--port", str(port), "--method", method, "--random-weights", "--device", DEVICE[0]]
    cmd += ["--dtype", "bfloat16", "--max-model-len", "1024", "--probe-tokens", "16"]
    if method == "eagle3":
        cmd += ["--num-speculative-tokens", "3", "--draft-model", models["head"]]
        if not models.get("head_fitted"):
            cmd += ["--draft-random-weights"]
    log = open(out / f"{name}-server.log", "w")  # noqa: SIM115 (closed below)
    started = time.monotonic()
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    res: dict = {"variant": name, "method": method, "switch": variant, **res_pin}
    try:
        import httpx

        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"engine exited {proc.returncode}")
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        else:
            raise TimeoutError("engine not ready before the deadline")
        res["start_s"] = round(time.monotonic() - started, 1)
        rows: list = []
        stop = threading.Event()
        sampler = threading.Thread(target=_sample, args=(proc.pid, stop, rows), daemon=True)
        sampler.start()
        bench = [sys.executable, "-m", "specperf.cli", "bench", "--url"]
        bench += [f"http://127.0.0.1:{port}", "--dataset", "gsm8k", "--num-requests", "12"]
        bench += ["--tier", "smoke", "--max-tokens", "128", "--ignore-eos", "--quiet", "--output"]
        bench += [str(out / f"{name}.json"), "--results-dir", str(out / f"{name}-run")]
        left = max(5.0, deadline - time.monotonic())
        subprocess.run(bench, cwd=ROOT, check=True, timeout=left)
        bench_end = time.monotonic()
        stop.set()
        sampler.join()
        summary = json.loads((out / f"{name}.json").read_text())
        res["tok_s"] = summary["output_throughput_tok_s"]
        res["requests"] = _steps(out / f"{name}-run", rows, bench_end, proc.pid)
        res["placement"] = _placement(rows, proc.pid)
    except Exception as exc:  # a diagnostic: keep what was measured, say what failed
        res["error"] = repr(exc)[:300]
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        log.close()
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--variants", default="eagle3:default,eagle3:pinned,eagle3:sw05")
    ap.add_argument("--budget-s", type=float, default=190.0)
    ap.add_argument("--shapes", choices=("qwen3-8b", "tiny"), default="qwen3-8b")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--head", default=None, help="a fitted EAGLE3 head dir (default: random)")
    ap.add_argument("--rounds", type=int, default=1, help="run the variant list this many times")
    args = ap.parse_args()
    DEVICE[0] = args.device
    deadline = time.monotonic() + args.budget_s
    args.out.mkdir(parents=True, exist_ok=True)
    from gpu_run import build_models

    built = build_models(Path.home() / f".cache/specperf/models/shapes-{args.shapes}", args.shapes)
    models = {"target": built["qwen3-8b-shape"], "head": built["qwen3-8b-eagle3-shape"]}
    if args.head:
        models.update(head=args.head, head_fitted=True)
    print(f"GILPROBE cpus {sorted(os.sched_getaffinity(0))} siblings {_siblings()}", flush=True)
    results = []
    for rnd, spec in itertools.product(range(1, args.rounds + 1), args.variants.split(",")):
        method, variant = spec.split(":")
        if time.monotonic() > deadline - 40:
            print(f"GILPROBE skip {spec} round {rnd}: too little time left", flush=True)
            continue
        name = f"{method}-{variant}" + (f"-r{rnd}" if args.rounds > 1 else "")
        r = run_variant(name, method, variant, models, args.out, deadline)
        results.append(r)
        (args.out / "gil_probe.json").write_text(json.dumps(results, indent=1) + "\n")
        meds = [round(q["median_ms"], 2) for q in r.get("requests", [])]
        print(
            f"GILPROBE {name} tok/s {r.get('tok_s')} start {r.get('start_s')} s "
            f"step medians {meds} placement {r.get('placement')} {r.get('error', '')}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
