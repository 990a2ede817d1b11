"""The HTTP client and the event loop a workload runs on: httpx (on aiohttp's parser where
installed), reads timed at the loop's select, and how a refused connection is recognised."""

from __future__ import annotations

import asyncio
import os
import selectors
import time
import weakref
from typing import Any

import httpx

TRANSPORT = os.environ.get("SPECPERF_HTTP_TRANSPORT", "aiohttp")  # "aiohttp" | "httpx"


def _http_client(**kw: Any) -> httpx.AsyncClient:
    """httpx on aiohttp's transport where installed: the same httpx API and exceptions, with
    aiohttp's C HTTP parser, which costs the client less CPU per streamed chunk than h11 and so
    distorts high-rate measurements less (docs/measurement.md has the figures)."""
    if TRANSPORT == "aiohttp":
        try:
            from httpx_aiohttp import HttpxAiohttpClient
        except ImportError:
            pass
        else:
            return HttpxAiohttpClient(**kw)
    return httpx.AsyncClient(**kw)


class ReadClock(selectors.DefaultSelector):
    """The event loop's selector, remembering when each ``select`` returned.

    Why: a chunk's arrival is best timed when the loop first learns that its socket is
    readable. A task reading a stream resumes one loop iteration after its data was received,
    and behind every other task woken in that iteration (at the end of a closed-loop wave, 32
    requests' last chunks arrive together): timing it when it resumes adds the others' work.
    Data a task finds in its buffer was received by a read callback of an earlier iteration, so
    the select that began the previous iteration (``prev``) is never before its arrival and is
    the earliest time the client could have known it."""

    def __init__(self) -> None:
        super().__init__()
        self.prev = self.last = time.perf_counter()

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        ready = super().select(timeout)
        self.prev, self.last = self.last, time.perf_counter()
        return ready


_CLOCKS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, ReadClock] = (
    weakref.WeakKeyDictionary()
)


def new_event_loop() -> asyncio.AbstractEventLoop:
    """A selector event loop whose reads are timed by ``ReadClock``."""
    clock = ReadClock()
    loop = asyncio.SelectorEventLoop(clock)
    _CLOCKS[loop] = clock
    return loop


def run_timed(coro: Any) -> Any:
    """``asyncio.run`` on a loop from ``new_event_loop`` (use it to run ``run_workload``)."""
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        return runner.run(coro)


def is_refused(exc: BaseException) -> bool:
    """A refused connection, whichever layer reports it: httpx, aiohttp (through httpx-aiohttp,
    which maps it to ConnectTimeout) or the OS."""
    seen: BaseException | None = exc
    for _ in range(8):
        if seen is None:
            break
        if isinstance(seen, ConnectionRefusedError):
            return True
        text = str(seen)
        if "Connection refused" in text or "Connect call failed" in text:
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def transport_name() -> str:
    """The HTTP transport ``_http_client`` uses now (recorded with every item)."""
    if TRANSPORT == "aiohttp":
        try:
            import httpx_aiohttp  # noqa: F401
        except ImportError:
            name = "httpx (h11; httpx-aiohttp not installed)"
        else:
            name = "httpx on aiohttp (httpx-aiohttp)"
    else:
        name = "httpx (h11)"
    return f"{name}, specperf SSE reader, reads timed by the event loop's select"
