"""The transformers engine server's worker: the one thread that owns the model. Native requests
that arrive together with equal sampling are batched; speculative methods run one at a time."""

from __future__ import annotations

import asyncio
import collections
import threading
import traceback
from dataclasses import dataclass, field
from typing import Any

from specperf.engines.transformers.backend import Backend, Request
from specperf.engines.transformers.counters import Counters
from specperf.engines.transformers.eagle3.speculate import StepInfo


@dataclass
class Job:
    req: Request
    loop: asyncio.AbstractEventLoop
    events: asyncio.Queue[tuple[str, Any, Any]]
    finished: bool = False
    produced: int = 0

    def emit(self, kind: str, a: Any = None, b: Any = None) -> None:
        self.loop.call_soon_threadsafe(self.events.put_nowait, (kind, a, b))


@dataclass
class Worker:
    """The one thread that touches the model."""

    backend: Backend
    counters: Counters
    pending: collections.deque[Job] = field(default_factory=collections.deque)
    cond: threading.Condition = field(default_factory=threading.Condition)
    stopping: bool = False

    def submit(self, job: Job) -> None:
        with self.cond:
            self.pending.append(job)
            self.cond.notify()

    def _take(self) -> list[Job] | None:
        with self.cond:
            while not self.pending and not self.stopping:
                self.cond.wait()
            if self.stopping:
                return None
            first = self.pending.popleft()
            batch = [first]
            if self.backend.max_batch > 1:
                keep: collections.deque[Job] = collections.deque()
                while self.pending and len(batch) < self.backend.max_batch:
                    job = self.pending.popleft()
                    same = job.req.batch_key() == first.req.batch_key()
                    (batch if same else keep).append(job)
                keep.extend(self.pending)
                self.pending = keep
            return [j for j in batch if not j.req.cancelled.is_set()] or []

    def run(self) -> None:
        while True:
            batch = self._take()
            if batch is None:
                return
            if not batch:
                continue

            def on_step(row: int, info: StepInfo, reason: str | None, batch: list = batch) -> None:
                job = batch[row]
                self.counters.add_step(info)
                job.produced += len(info.tokens)
                if reason is not None:
                    job.finished = True
                job.emit("tokens", info.tokens, reason)

            self.counters.add_batch(len(batch))
            try:
                self.backend.run([j.req for j in batch], on_step)
            except Exception as exc:
                traceback.print_exc()
                for j in batch:
                    if not j.finished:
                        j.finished = True
                        j.emit("error", f"{type(exc).__name__}: {exc}")
                continue
            for j in batch:
                if not j.finished and not j.req.cancelled.is_set():
                    j.finished = True
                    j.emit("error", "generation ended without a finish reason")

    def stop(self) -> None:
        with self.cond:
            self.stopping = True
            self.cond.notify_all()
