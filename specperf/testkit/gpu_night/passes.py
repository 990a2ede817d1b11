"""One pytest pass of the GPU night (with NVML sampled beside it), and the baseline files it
wrote: which changed, and their starts marked with this host's GPU UUIDs."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from specperf.testkit.gpu_night.hardware import gpu_indices
from specperf.testkit.gpu_night.suite import SUITE, repo_env, run_logged, suite_settings


def baseline_contents(folder: Path) -> dict[str, bytes]:
    """Each baseline file's bytes, to tell afterwards which files this run changed (an mtime
    does not: a folder seeded by ``cp`` just before the run looks freshly written)."""
    return {f.name: f.read_bytes() for f in folder.glob("*.json")}


def annotate_starts(path: Path, since: str, host: dict[str, Any]) -> int:
    """Add ``gpu_uuid`` to the baseline starts this run wrote (date >= ``since`` and this
    hostname): the device machines may share a hostname, the GPU UUID tells hosts apart. The
    product writes ``boot_id`` itself; it is filled in here only where a start lacks it.
    Returns how many starts were annotated."""
    from specperf.baselines import write_atomic

    data = json.loads(path.read_text())
    gpus = host.get("gpus") if isinstance(host.get("gpus"), list) else []
    uuid = ",".join(g.get("uuid", "?") for g in gpus) or None
    n = 0
    for entry in (data.get("entries") or {}).values():
        for metric in (entry.get("metrics") or {}).values():
            for st in metric.get("starts") or []:
                if (
                    str(st.get("date") or "") >= since
                    and st.get("host") == host["hostname"]
                    and "gpu_uuid" not in st
                ):
                    st["gpu_uuid"] = uuid
                    st.setdefault("boot_id", host.get("boot_id"))
                    n += 1
    if n:
        write_atomic(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    return n


def perf_pytest(tests: str = "tests/perf") -> list[str]:
    """``python -m pytest TESTS -m perf`` with the plugin loaded by -p where it is not installed
    (the bare CUDA image has no entry point)."""
    from importlib.metadata import entry_points

    cmd = [sys.executable, "-m", "pytest", tests, "-m", "perf"]
    if not any(ep.value.startswith("specperf") for ep in entry_points(group="pytest11")):
        cmd += ["-p", "specperf.plugin"]
    return [*cmd, "-p", "no:cacheprovider", "-rA", "--benchmark-disable"]


def run_pass(
    name: str, args: argparse.Namespace, models_dir: Path, results: Path, log: Path
) -> dict[str, Any]:
    """One ``pytest -m perf -n 1`` pass with NVML sampled in this process meanwhile."""
    from specperf.environment import GpuSampler

    cmd = [*perf_pytest(), "-n", "1", "--suite", str(getattr(args, "suite", SUITE))]
    for k, v in suite_settings(args, models_dir).items():
        cmd += ["--setting", f"{k}={v}"]
    cmd += ["--results-dir", str(results), "--baselines-dir", str(args.baselines_dir)]
    if name == "update":
        cmd += ["--update-baselines"]
    cmd += args.pytest_args
    env = repo_env()
    print(f"== pass {name}: {' '.join(cmd)}", flush=True)
    sampler = GpuSampler(gpu_indices(), interval_s=0.25)
    wall0 = time.time()  # sample t=0 (the sampler counts from its start)
    sampler.start()
    started = time.time()
    code = run_logged(cmd, env, log, args.pass_timeout, cwd=args.root)
    sampler.stop()
    tail = log.read_text(errors="replace").splitlines()[-25:]
    print("\n".join(tail), flush=True)
    return {
        "pass": name,
        "command": cmd,
        "exit_code": code,
        "seconds": round(time.time() - started, 1),
        "results_dir": str(results),
        "samples": sampler.samples,
        "sampler_error": sampler.error,
        "samples_wall0": wall0,
        "log_tail": tail,
    }
