"""THE entry point for measuring one run: used by the pytest plugin and by ``specperf bench``.

run the workload → summarize → write ``summary.json`` + ``requests.jsonl``. Records are
appended to ``requests.jsonl`` as they finish, so an interrupted run keeps what it measured.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import os
import threading
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

from specperf import placement as pl
from specperf.engines.base import EngineClient, EngineRecord
from specperf.metrics import summarize
from specperf.results import RequestLog, write_run
from specperf.schemas import Dataset, SamplingParams, WorkloadSpec
from specperf.workload import run_timed, run_workload, transport_name

T = TypeVar("T")


def _run_coro(coro: Coroutine[Any, Any, T]) -> T:
    """``run_timed`` (a loop whose reads are timed at the select, workload.ReadClock), or in a
    worker thread when this thread already runs a loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return run_timed(coro)  # type: ignore[no-any-return]
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(run_timed, coro).result()  # type: ignore[no-any-return]


def _safe(fn: Callable[[], T], default: T) -> T:
    try:
        return fn()
    except Exception:
        return default


async def _pinned(
    coro: Coroutine[Any, Any, T], cpus: tuple[int, ...] | None, seen: dict[str, Any]
) -> T:
    """Run ``coro`` with this thread (the event loop's, and the executor threads it starts)
    on ``cpus``; the previous affinity is restored after. ``seen`` gets what the loop ran on."""
    old = os.sched_getaffinity(0)
    if cpus:
        try:
            os.sched_setaffinity(0, cpus)
        except OSError as exc:  # measured unpinned, and said so
            seen["pin_error"] = f"{cpus}: {exc}"
            cpus = None
    seen.update(
        pid=os.getpid(),
        thread=threading.get_native_id(),
        cpus=sorted(os.sched_getaffinity(0)),
        pinned=bool(cpus),
    )
    try:
        return await coro
    finally:
        if cpus:
            with contextlib.suppress(OSError):
                os.sched_setaffinity(0, old)


def measure(
    client: EngineClient,
    dataset: Dataset,
    sampling: SamplingParams,
    workload: WorkloadSpec,
    out_dir: Path,
    *,
    run_info: dict[str, Any],
    engine_record: EngineRecord | None = None,
    environment: dict[str, Any] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Measure one run against a running engine and return its summary (design.md contract).

    ``run_info`` keys win over what is derived here (engine kind, version, model, dataset,
    concurrency); the API key is never part of anything written."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    engine_pid = engine_record.pid if engine_record is not None else None
    # our client off the engine's compute cores, where the engine is local and was placed
    client_cpus = pl.client_cpus(engine_pid)
    engine_aff = pl.engine_affinity(engine_pid)
    client_seen: dict[str, Any] = {}
    before = pl.LoadSnapshot.take()
    with RequestLog(out_dir / "requests.jsonl") as log:
        result = _run_coro(
            _pinned(
                run_workload(
                    client,
                    dataset.items,
                    sampling,
                    workload,
                    progress=progress,
                    on_record=log.append,
                ),
                client_cpus,
                client_seen,
            )
        )
    after = pl.LoadSnapshot.take()
    env = dict(environment or {})
    env["placement"] = {
        "engine": engine_aff,
        "engine_after": pl.engine_affinity(engine_pid),
        "client": client_seen,
    }
    env["load"] = pl.load_over(before, after)
    env["http_transport"] = transport_name()
    if engine_record is not None:
        env.setdefault("engine", engine_record.to_json())
    version = engine_record.version if engine_record and engine_record.version else None
    info: dict[str, Any] = {
        "engine": client.kind,
        "engine_version": version or _safe(client.version, None),
        "model": client.model,
        "dataset": dataset.name,
        "dataset_version": dataset.version,
        "tier": dataset.tier,
        "concurrency": workload.concurrency,
        "serial": workload.serial,
        "sampling": sampling.fingerprint(),
        "workload": dataclasses.asdict(workload),
        "prefix_cache_policy": workload.prefix_cache,
        "url": client.base_url,
    }
    info.update(run_info)
    info["environment"] = {**env, **(run_info.get("environment") or {})}
    info["notes"] = [*(run_info.get("notes") or []), *_safe(client.notes, [])]
    summary = summarize(result, run_info=info)
    write_run(out_dir, summary, result.records)
    return summary
