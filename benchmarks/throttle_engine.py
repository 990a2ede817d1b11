#!/usr/bin/env python3
"""TEST-ONLY: slow running engines down by a known share, to prove the verdict sees it.

    python benchmarks/throttle_engine.py --share 0.10 [--period 0.1] [--match ngram]
        [--duration 1800] [--mark specperf.engines.hf_server] [--under PID]

Every ``period`` seconds it stops the process group of each matching engine server (SIGSTOP)
for ``share × period`` seconds, then lets it run (SIGCONT): the engine loses that share of its
wall time, whatever it is doing. Engines are found by their command line
(``--mark``: ``vllm.entrypoints.openai.api_server`` by default, ``specperf.engines.hf_server`` for
the transformers engine on a GPU; plus ``--match`` text such as a method name, so one method's
engine can be throttled alone; ``--under PID``: only engines started by that process, so a test
throttles its own engines and nobody else's); new engines are picked up as they start. On exit
(Ctrl-C, SIGTERM, ``--duration``) every group is continued. Used by benchmarks/verdict_proofs.py
for docs/baselines.md's "(b)" proofs; never point it at a production engine.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time

import psutil

ENGINE_MARK = "vllm.entrypoints.openai.api_server"


def _candidates(under: int | None) -> list[psutil.Process]:
    if under is None:
        return list(psutil.process_iter(["pid", "cmdline"]))
    try:
        return psutil.Process(under).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def engine_groups(match: str | None, mark: str = ENGINE_MARK, under: int | None = None) -> set[int]:
    """Process groups of the engine servers whose command line holds ``mark`` (and ``match``),
    among ``under``'s descendants when given, else among all processes."""
    groups = set()
    for p in _candidates(under):
        try:
            cmd = " ".join(p.cmdline() or [])
            if mark in cmd and (not match or match in cmd):
                groups.add(os.getpgid(p.pid))
        except (psutil.Error, ProcessLookupError):
            continue
    groups.discard(os.getpgid(0))  # never ourselves
    return groups


def _signal_all(groups: set[int], sig: int) -> None:
    for g in list(groups):
        try:
            os.killpg(g, sig)
        except ProcessLookupError:
            groups.discard(g)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--share", type=float, required=True, help="share of time stopped (0-0.9)")
    ap.add_argument("--period", type=float, default=0.1, help="seconds per cycle (default 0.1)")
    ap.add_argument("--match", default=None, help="only engines whose command line has this")
    ap.add_argument("--mark", default=ENGINE_MARK, help="engine command-line text to find")
    ap.add_argument("--duration", type=float, default=1800.0, help="stop after this (s)")
    ap.add_argument("--under", type=int, default=None, help="only engines this PID started")
    args = ap.parse_args(argv)
    if not 0 < args.share < 0.9:
        print("--share: between 0 and 0.9", file=sys.stderr)
        return 2
    stopped: set[int] = set()
    running = True

    def stop(*_: object) -> None:
        nonlocal running
        running = False

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    deadline = time.monotonic() + args.duration
    groups: set[int] = set()
    last_scan = 0.0
    try:
        while running and time.monotonic() < deadline:
            now = time.monotonic()
            if now - last_scan > 1.0:
                groups = engine_groups(args.match, args.mark, args.under)
                last_scan = now
            stopped = set(groups)
            _signal_all(stopped, signal.SIGSTOP)
            time.sleep(args.share * args.period)
            _signal_all(stopped, signal.SIGCONT)
            stopped = set()
            time.sleep((1 - args.share) * args.period)
    finally:
        _signal_all(stopped | groups, signal.SIGCONT)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
