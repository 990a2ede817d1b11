"""THE entry point for measuring one run: used by the pytest plugin and by ``specperf bench``.

run the workload → summarize → write ``summary.json`` + ``requests.jsonl``. Records are
appended to ``requests.jsonl`` as they finish, so an interrupted run keeps what it measured.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

from specperf.engines.base import EngineClient, EngineRecord
from specperf.metrics import summarize
from specperf.results import RequestLog, write_run
from specperf.schemas import Dataset, SamplingParams, WorkloadSpec
from specperf.workload import run_workload

T = TypeVar("T")


def _run_coro(coro: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run``, or in a worker thread when this thread already runs a loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()


def _safe(fn: Callable[[], T], default: T) -> T:
    try:
        return fn()
    except Exception:
        return default


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
    with RequestLog(out_dir / "requests.jsonl") as log:
        result = _run_coro(
            run_workload(
                client,
                dataset.items,
                sampling,
                workload,
                progress=progress,
                on_record=log.append,
            )
        )
    env = dict(environment or {})
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
