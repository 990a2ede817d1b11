#!/usr/bin/env python3
"""The suite on a 2-GPU host (issue 9): one xdist worker per GPU, engines per GPU, cross-talk.

Runs the transformers engine on random weights of real shapes (the Qwen3-8B target of
scripts/gpu_run.py; vLLM and SGLang cannot be installed on the lent GPU machines) through
``pytest -m perf`` with NVML sampled beside every pass:

  n1        -n 1 --gpus 0           the whole suite on one worker (wall-time reference)
  n2        -n 2 --gpus 0,1         one worker per GPU; methods spread over workers
  alone     -n 1 --gpus 0           native only, nothing else on the host's GPUs
  busy      -n 1 --gpus 0           native only while a bf16 matmul loop keeps GPU 1 busy
  one_at_a_time  -n 2 --gpus 0,1 --one-at-a-time   the whole suite, one item per host at a time
  tp2       -n 1 --gpus 0,1         an engine config with gpus = 2: one worker owns both GPUs

    python scripts/multi_gpu_run.py --out OUT [--phases n1,n2,...] [--shapes tiny --device cpu]

Writes OUT/multi_gpu_run.json (figures, engine starts, NVML samples per pass), the n2 report and
prints the tables. Suites are written from SUITE_TEMPLATE (group_by = "method", so the three
methods are three groups that xdist can put on different workers).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from gpu_run import (  # noqa: E402
    build_models,
    item_figures,
    perf_pytest,
    repo_env,
    run_logged,
)

PHASES = ("n1", "n2", "alone", "busy", "one_at_a_time", "tp2")

SUITE_TEMPLATE = """
[suite]
name = "multi-gpu-{name}"
description = "transformers on random weights of the Qwen3-8B shape, one group per method"
tier = "smoke"
group_by = "method"

[settings]
models_dir = "{models_dir}"
device = "{device}"

[engines.transformers]
kind = "transformers"
label = "transformers"
dtype = "bfloat16"
max_model_len = 1024
startup_timeout_s = 600
gpus = {gpus}
options = {{ random_weights = true, device = "${{device}}", probe_tokens = 16, compile = "off" }}

[models.qwen3-8b-shape]
path = "${{models_dir}}/qwen3-8b-shape"

[models.qwen3-8b-shape.methods.ngram]
num_speculative_tokens = 3
ngram_max = 3

[models.qwen3-8b-shape.methods.eagle3]
draft = "${{models_dir}}/qwen3-8b-eagle3-shape"
num_speculative_tokens = 3
topk = 1
num_draft_tokens = 3
options = {{ draft_random_weights = true }}

[datasets.mt-bench]
concurrency = [1]
requests = [{requests}]

[output]
max_tokens = 64
ignore_eos = true

[sampling.greedy]
temperature = 0

[workload]
warmup_requests = 1
prefix_cache = "reset"
stall_timeout_s = 120
request_timeout_s = 300
item_deadline_s = 900

[metrics.output_throughput_tok_s]
gate = "never"
"""

BURNER = """
import sys, time, torch
deadline = time.monotonic() + float(sys.argv[1])
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
n = 0
while time.monotonic() < deadline:
    for _ in range(20):
        c = a @ b
    torch.cuda.synchronize()
    n += 20
print(f"burner: {n} matmuls of 8192^3 bf16", flush=True)
"""


def write_suite(out: Path, name: str, models_dir: Path, device: str, gpus: int, requests: int):
    path = out / f"suite-{name}.toml"
    path.write_text(
        SUITE_TEMPLATE.format(
            name=name, models_dir=models_dir, device=device, gpus=gpus, requests=requests
        )
    )
    return path


def nvml_uuids() -> dict[int, str]:
    try:
        import pynvml as nv

        nv.nvmlInit()
        return {
            i: str(nv.nvmlDeviceGetUUID(nv.nvmlDeviceGetHandleByIndex(i)))
            for i in range(nv.nvmlDeviceGetCount())
        }
    except Exception as exc:  # no NVML: a CPU dry run
        print(f"NVML unavailable: {exc}", flush=True)
        return {}


def run_phase(
    name: str, suite: Path, xdist: list[str], extra: list[str], args: argparse.Namespace
) -> dict[str, Any]:
    from specperf.environment import GpuSampler

    results = args.out / f"results-{name}"
    cmd = [*perf_pytest("tests/perf/test_matrix.py"), "--suite", str(suite), *xdist, *extra]
    cmd += ["--results-dir", str(results), "--baselines-dir", str(args.out / "baselines")]
    env = repo_env()
    env.pop("CUDA_VISIBLE_DEVICES", None)
    burner = None
    if name == "busy":
        burner = subprocess.Popen(
            [sys.executable, "-c", BURNER, str(args.phase_timeout)],
            env={**env, "CUDA_VISIBLE_DEVICES": "1"},
            start_new_session=True,
        )
        time.sleep(8)  # the burner owns GPU 1 before the measured engine starts
    print(f"== {name}: {' '.join(cmd)}", flush=True)
    sampler = GpuSampler(list(range(args.gpu_count)), interval_s=0.25)
    t0 = time.time()
    sampler.start()
    log = args.out / f"pytest-{name}.log"
    code = run_logged(cmd, env, log, args.phase_timeout)
    seconds = time.time() - t0
    sampler.stop()
    if burner is not None:
        os.killpg(burner.pid, signal.SIGTERM)
        burner.wait(timeout=30)
    tail = log.read_text(errors="replace").splitlines()[-12:]
    print("\n".join(tail), flush=True)
    return {
        "phase": name,
        "command": cmd,
        "exit_code": code,
        "seconds": round(seconds, 1),
        "t0": t0,
        "results_dir": str(results),
        "starts": engine_starts(results),
        "items": items(results),
        "samples": sampler.samples,
        "sampler_error": sampler.error,
    }


def engine_starts(results: Path) -> list[dict[str, Any]]:
    path = results / "engine-starts.jsonl"
    if not path.exists():
        return []
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def items(results: Path) -> dict[str, Any]:
    out = {}
    for s in sorted(results.glob("*/summary.json")):
        summary = json.loads(s.read_text())
        eng = ((summary.get("environment") or {}).get("engine")) or {}
        loaded = (eng.get("server_config") or {}).get("loaded") or eng.get("server_config") or {}
        fig = item_figures(summary)
        fig["wall_clock"] = summary.get("wall_clock")
        fig["worker"] = summary.get("worker")
        fig["worker_devices"] = summary.get("devices")
        fig["engine_pid"] = eng.get("pid")
        fig["engine_device"] = {
            k: _find(loaded, k)
            for k in (
                "device",
                "device_name",
                "device_uuid",
                "cuda_visible_devices",
                "cuda_device_count",
            )
        }
        out[s.parent.name] = fig
    return out


def _find(obj: Any, key: str) -> Any:
    """First value of ``key`` anywhere in a nested dict (server configs nest differently)."""
    if isinstance(obj, dict):
        if key in obj:
            return obj[key]
        for v in obj.values():
            found = _find(v, key)
            if found is not None:
                return found
    return None


def busy_overlap(samples: list[dict[str, Any]], gpus: int, threshold: int = 10) -> dict[str, Any]:
    """Seconds during which every GPU showed utilisation above ``threshold`` % at once."""
    by_t: dict[float, dict[int, int]] = {}
    for s in samples:
        if s.get("gpu_util_pct") is None:
            continue
        by_t.setdefault(round(s["t"] * 4) / 4, {})[s["index"]] = s["gpu_util_pct"]
    ticks = sorted(by_t)
    both = [
        t for t in ticks if len(by_t[t]) == gpus and all(v > threshold for v in by_t[t].values())
    ]
    per_gpu = {
        i: round(sum(v.get(i, 0) for v in by_t.values()) / max(1, len(by_t)), 1)
        for i in range(gpus)
    }
    busy_s = {i: sum(0.25 for v in by_t.values() if v.get(i, 0) > threshold) for i in range(gpus)}
    return {"all_busy_s": len(both) * 0.25, "mean_util_pct": per_gpu, "busy_s": busy_s}


def gpu_processes(samples: list[dict[str, Any]]) -> dict[int, list[int]]:
    seen: dict[int, set[int]] = {}
    for s in samples:
        for p in s.get("processes") or []:
            seen.setdefault(s["index"], set()).add(p["pid"])
    return {i: sorted(p) for i, p in sorted(seen.items())}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--phases", default=",".join(PHASES))
    ap.add_argument("--shapes", choices=("qwen3-8b", "tiny"), default="qwen3-8b")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--requests", type=int, default=4)
    ap.add_argument("--phase-timeout", type=float, default=240)
    ap.add_argument("--gpu-count", type=int, default=2)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    models_dir = args.out / "models"
    build_models(models_dir, args.shapes)
    one = write_suite(args.out, "per-gpu", models_dir, args.device, 1, args.requests)
    tp2 = write_suite(args.out, "tp2", models_dir, args.device, 2, args.requests)
    plan = {
        "n1": (one, ["-n", "1", "--gpus", "0"], []),
        "n2": (one, ["-n", "2", "--gpus", "0,1"], []),
        "alone": (one, ["-n", "1", "--gpus", "0"], ["--method", "native"]),
        "busy": (one, ["-n", "1", "--gpus", "0"], ["--method", "native"]),
        "one_at_a_time": (one, ["-n", "2", "--gpus", "0,1", "--one-at-a-time"], []),
        "tp2": (tp2, ["-n", "1", "--gpus", "0,1"], ["--method", "native"]),
    }
    report: dict[str, Any] = {"nvml_uuids": nvml_uuids(), "phases": {}}
    for name in [p for p in args.phases.split(",") if p]:
        suite, xdist, extra = plan[name]
        if args.device == "cpu":  # dry run: no GPUs to pin
            xdist = [x for x in xdist if x not in ("--gpus",) and "," not in x and x != "0"]
        ph = run_phase(name, suite, xdist, extra, args)
        ph["overlap"] = busy_overlap(ph["samples"], args.gpu_count)
        ph["gpu_processes"] = gpu_processes(ph["samples"])
        report["phases"][name] = ph
        (args.out / "multi_gpu_run.json").write_text(json.dumps(report, indent=1, default=str))
    if "n2" in report["phases"]:
        res = report["phases"]["n2"]["results_dir"]
        subprocess.run(
            [
                sys.executable,
                "-m",
                "specperf.cli",
                "report",
                res,
                "--out",
                str(args.out / "report-n2"),
            ],
            cwd=ROOT,
            env=repo_env(),
            check=False,
        )
    with tarfile.open(args.out / "results.tar.gz", "w:gz") as tar:
        for name in report["phases"]:
            d = args.out / f"results-{name}"
            if d.exists():
                tar.add(d, arcname=d.name)
        if (args.out / "report-n2").exists():
            tar.add(args.out / "report-n2", arcname="report-n2")
    print_tables(report)
    return 0


def print_tables(report: dict[str, Any]) -> None:
    print("\nGPU UUIDs (NVML):", report.get("nvml_uuids"))
    for name, ph in report["phases"].items():
        ov = ph["overlap"]
        print(
            f"\n## {name}: exit {ph['exit_code']}, {ph['seconds']} s; all GPUs busy at once "
            f"{ov['all_busy_s']} s; mean util {ov['mean_util_pct']}; busy s {ov['busy_s']}; "
            f"GPU pids {ph['gpu_processes']}"
        )
        for s in ph["starts"]:
            if s.get("event") == "start":
                print(
                    f"  start worker={s.get('worker')} devices={s.get('devices')} "
                    f"method={s.get('method')} pid={s.get('pid')} "
                    f"startup_s={s.get('startup_s')}"
                )
        for item, f in ph["items"].items():
            wc = f.get("wall_clock") or {}
            print(
                f"  {item}: {f.get('output_tok_s') or 0:.1f} tok/s, TPOT p50 "
                f"{f.get('tpot_ms_p50') or 0:.2f} ms, TTFT p50 {f.get('ttft_ms_p50') or 0:.1f} ms; "
                f"worker {f.get('worker')} {f.get('worker_devices')}; "
                f"engine pid {f.get('engine_pid')} sees {f.get('engine_device')}; "
                f"window {wc.get('started', 0) - ph['t0']:.1f}-"
                f"{wc.get('finished', 0) - ph['t0']:.1f} s"
            )


if __name__ == "__main__":
    raise SystemExit(main())
