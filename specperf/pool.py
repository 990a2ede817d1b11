"""Engine pool and device assignment: which GPUs / CPUs a worker owns, and one running engine
per worker that is reused until the spec changes.

Why here and not in a fixture: starting an engine takes minutes on a GPU box (seconds to a
minute on CPU), so a worker keeps its engine across items and test modules and restarts it only
when the next item needs a different EngineSpec. Every start (and stop) is appended to
``<results>/engine-starts.jsonl`` so tests and people can count them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from filelock import FileLock

from specperf import model_sources
from specperf.engines import get_engine_class
from specperf.engines.base import Devices, Engine, EngineSpec
from specperf.errors import ConfigError, EngineStartError, UnsupportedError
from specperf.fileio import append_jsonl, read_jsonl, runtime_dir

START_LOG = "engine-starts.jsonl"
ENV_PREFIX = "env:"


# --------------------------------------------------------------------------- devices
def worker_index(worker_id: str) -> int:
    """``gw3`` → 3; ``master`` (no xdist) → 0."""
    m = re.fullmatch(r"gw(\d+)", worker_id or "")
    return int(m.group(1)) if m else 0


def parse_gpus(text: str, flag: str = "--gpus") -> list[str]:
    """``"0,1,2,3"`` → ["0", "1", "2", "3"] (ids or UUIDs, as CUDA_VISIBLE_DEVICES takes)."""
    items = [t.strip() for t in text.split(",")]
    if not text.strip() or any(not t for t in items):
        raise ConfigError(f"{flag} {text!r}: expected a comma-separated list such as 0,1,2,3")
    if len(set(items)) != len(items):
        raise ConfigError(f"{flag} {text!r}: a GPU is listed twice")
    return items


def detect_gpus() -> list[str]:
    """GPU indices from nvidia-smi, [] when there is none (never imports CUDA libraries)."""
    exe = shutil.which("nvidia-smi")
    if not exe:
        return []
    try:
        out = subprocess.run(
            [exe, "--query-gpu=index", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.strip() for line in out.stdout.splitlines() if line.strip().isdigit()]


def visible_gpus(
    option: str | None,
    environ: Mapping[str, str] | None = None,
    detect: Callable[[], list[str]] = detect_gpus,
) -> list[str]:
    """The GPUs this run may use: ``--gpus``, else the outer CUDA_VISIBLE_DEVICES (indexed into,
    never replaced), else what nvidia-smi lists; [] on a CPU machine."""
    environ = os.environ if environ is None else environ
    if option:
        gpus = parse_gpus(option)
        present = detect()  # [] without nvidia-smi: nothing to check against
        missing = [g for g in gpus if g.isdigit() and present and g not in present]
        if missing:
            raise ConfigError(
                f"--gpus {option}: no GPU {', '.join(missing)} on this machine "
                f"(nvidia-smi lists {', '.join(present)})"
            )
        return gpus
    outer = environ.get("CUDA_VISIBLE_DEVICES")
    if outer is not None:
        return [] if outer.strip() in ("", "-1") else parse_gpus(outer, "CUDA_VISIBLE_DEVICES")
    return detect()


def assign_devices(
    worker_id: str,
    worker_count: int,
    *,
    gpus: Sequence[str],
    gpus_per_worker: int = 1,
    cpus: Sequence[int] | None = None,
) -> Devices:
    """What one worker owns. GPUs: worker i gets the i-th group of ``gpus_per_worker`` (one GPU
    or one TP group). CPU only: the CPUs this process may run on split into disjoint, contiguous
    sets, one per worker."""
    idx = worker_index(worker_id)
    count = max(1, worker_count)
    if idx >= count:
        raise ConfigError(f"worker {worker_id} but only {count} workers")
    if gpus:
        need = count * gpus_per_worker
        if len(gpus) < need:
            raise ConfigError(
                f"--gpus: {count} worker(s) x {gpus_per_worker} GPU(s) per engine need {need} "
                f"GPUs, only {len(gpus)} visible ({','.join(gpus)}); lower -n or add GPUs"
            )
        mine = tuple(gpus[idx * gpus_per_worker : (idx + 1) * gpus_per_worker])
        return Devices(gpus=mine, cpus=(), worker=worker_id)
    all_cpus = sorted(cpus if cpus is not None else os.sched_getaffinity(0))
    if count > len(all_cpus):
        raise ConfigError(
            f"-n {count}: more workers than CPUs ({len(all_cpus)}); each worker needs its own CPU"
        )
    base, extra = divmod(len(all_cpus), count)
    start = idx * base + min(idx, extra)
    size = base + (1 if idx < extra else 0)
    return Devices(gpus=(), cpus=tuple(all_cpus[start : start + size]), worker=worker_id)


def pin_process(devices: Devices) -> None:
    """Make this worker process see only its GPUs before anything touches CUDA (in-process
    engines such as transformers inherit it; server engines get ``devices.env()`` too)."""
    if devices.gpus:
        os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(devices.gpus)


# --------------------------------------------------------------------------- spec references
def resolve_spec(spec: EngineSpec) -> EngineSpec:
    """Turn suite references into paths right before a start: ``python = "env:NAME"`` → the
    python of that engine environment; a model source reference (``tiny:qwen3``, see
    specperf.model_sources) → the directory its source builds on first use."""
    changes: dict[str, Any] = {}
    if spec.python and spec.python.startswith(ENV_PREFIX):
        changes["python"] = resolve_env_python(spec.python[len(ENV_PREFIX) :])
    for f in ("model", "draft_model", "tokenizer"):
        value = getattr(spec, f)
        if isinstance(value, str) and model_sources.scheme_of(value):
            changes[f] = str(model_sources.resolve(value))
    return dataclasses.replace(spec, **changes) if changes else spec


def resolve_env_python(name: str) -> str:
    from specperf import engine_envs

    return str(engine_envs.python_path(name))


# --------------------------------------------------------------------------- the pool
def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class EnginePool:
    """One running engine per worker, reused while items ask for the same EngineSpec."""

    def __init__(
        self,
        devices: Devices,
        log_dir: Path,
        *,
        start_log: Path,
        resolve: Callable[[EngineSpec], EngineSpec] = resolve_spec,
    ) -> None:
        self.devices = devices
        self.log_dir = Path(log_dir)
        self.start_log = Path(start_log)
        self.resolve = resolve
        self.spec: EngineSpec | None = None
        self.engine: Engine | None = None
        self.starts = 0

    def get(self, spec: EngineSpec, timeout_s: float) -> Engine:
        """The running engine for ``spec``: reused when it is the current one and alive,
        otherwise the current one is stopped and a fresh one started."""
        if self.engine is not None and self.spec == spec and self.engine.is_alive():
            return self.engine
        if self.engine is not None:
            reason = "spec changed" if self.spec != spec else "engine not alive"
            self.release(reason)
        resolved = self.resolve(spec)
        engine = get_engine_class(resolved.kind)(resolved, self.devices, self.log_dir)
        t0 = time.monotonic()
        try:
            engine.start(timeout_s)
        except BaseException as exc:
            with contextlib.suppress(Exception):
                engine.stop()
            self._log("start_failed", spec, None, time.monotonic() - t0, error=str(exc)[:500])
            # UnsupportedError: the engine refused the spec before starting (e.g. a method its
            # release lacks); it stays a skip (NOT EVALUATED), not a failed start
            if isinstance(
                exc, EngineStartError | UnsupportedError | KeyboardInterrupt | SystemExit
            ):
                raise
            raise EngineStartError(f"{spec.label} ({spec.method}): {exc}") from exc
        self.engine, self.spec = engine, spec
        self.starts += 1
        self._log("start", spec, engine, time.monotonic() - t0)
        return engine

    def release(self, reason: str = "released") -> None:
        """Stop the current engine (dead, failed item, spec change, end of session)."""
        engine, spec = self.engine, self.spec
        self.engine, self.spec = None, None
        if engine is None or spec is None:
            return
        pid = _pid(engine)
        try:
            engine.stop()
        finally:
            self._log("stop", spec, None, None, pid=pid, reason=reason)

    def close(self) -> None:
        self.release("end of session")

    def _log(
        self,
        event: str,
        spec: EngineSpec,
        engine: Engine | None,
        seconds: float | None,
        **extra: Any,
    ) -> None:
        row: dict[str, Any] = {
            "time": _now(),
            "event": event,
            "worker": self.devices.worker,
            "host_pid": os.getpid(),
            "spec_digest": spec.digest(),
            "kind": spec.kind,
            "label": spec.label,
            "method": spec.method,
            "devices": {"gpus": list(self.devices.gpus), "cpus": list(self.devices.cpus)},
        }
        if engine is not None:
            row["pid"] = _pid(engine)
            row["startup_s"] = round(seconds, 3) if seconds is not None else None
        row.update(extra)
        append_jsonl(self.start_log, row)


def _pid(engine: Engine) -> int | None:
    try:
        return engine.record().pid
    except Exception:
        return None


def read_start_log(path: Path) -> list[dict[str, Any]]:
    return read_jsonl(path) if path.exists() else []


# --------------------------------------------------------------------------- one at a time
@contextlib.contextmanager
def one_at_a_time(enabled: bool, lock_path: Path | None = None) -> Iterator[None]:
    """Host-wide lock around a measurement: every worker's engine stays up, but only one item
    is measured at a time on this host (how seed 1 measured four services without cross-talk)."""
    if not enabled:
        yield
        return
    path = lock_path or runtime_dir() / "measure.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path), timeout=-1):
        yield


__all__ = [
    "EnginePool",
    "append_jsonl",
    "assign_devices",
    "detect_gpus",
    "one_at_a_time",
    "parse_gpus",
    "pin_process",
    "read_start_log",
    "resolve_spec",
    "visible_gpus",
    "worker_index",
]
