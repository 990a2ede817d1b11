"""HTTP helpers the engine clients share: a request to the server with the client's headers and
no proxy from the environment, and the liveness rule "dead only when nothing answers"."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import httpx

if TYPE_CHECKING:
    from specperf.engines.base import EngineClient


def get(client: EngineClient, path: str, timeout: float, **kw: Any) -> httpx.Response:
    """GET ``path`` on the client's server, with its headers, ignoring proxy variables."""
    return httpx.get(
        f"{client.base_url}{path}",
        headers=client.headers(),
        timeout=timeout,
        trust_env=False,
        **kw,
    )


def post_or_none(client: EngineClient, path: str, timeout: float) -> httpx.Response | None:
    """POST ``path`` (no body) on the client's server; None when the request itself failed."""
    try:
        return httpx.post(
            f"{client.base_url}{path}",
            headers=client.headers(),
            timeout=timeout,
            trust_env=False,
        )
    except httpx.HTTPError:
        return None


def answers(probe: Callable[[], object]) -> bool:
    """False only when nothing answers ``probe`` (a transport error such as a refused
    connection); a slow answer, or any answer at all, counts as alive."""
    try:
        probe()
    except httpx.TimeoutException:
        return True
    except httpx.TransportError:
        return False
    return True
