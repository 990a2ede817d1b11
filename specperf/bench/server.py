"""The server behind ``--url``: what it answers (``Probe``), the client for its engine, and its
pid when it runs on this host."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx

from specperf.engines.base import EngineClient, normalize_url
from specperf.errors import SpecperfError
from specperf.workload import is_refused

PROBE_TIMEOUT_S = 10.0
_METRIC_NAME = re.compile(r"^(?:# (?:TYPE|HELP) )?([A-Za-z_:][A-Za-z0-9_:]*)")


@dataclass
class Probe:
    """What the server at ``--url`` says about itself before anything is measured."""

    base: str
    metric_names: set[str] = field(default_factory=set)
    version_hint: str | None = None

    @property
    def family(self) -> str | None:
        """``vllm`` / ``sglang`` from the counter names on /metrics (the evidence that matters:
        it is where acceptance is read), else None."""
        for prefix in ("vllm", "sglang"):
            if any(n.startswith(f"{prefix}:") for n in self.metric_names):
                return prefix
        return None

    def record(self) -> dict[str, Any]:
        spec = sorted(
            n
            for n in self.metric_names
            if ("spec" in n or "verify" in n) and n.endswith("_total")  # the counter samples
        )
        return {
            "detected_by": "/metrics counter names" if self.family else "no known counters",
            "family": self.family,
            "spec_counter_names": spec[:20],
            "version_hint": self.version_hint,
        }


def probe(url: str, api_key: str | None) -> Probe:
    """GET /metrics (names only) and /version (a hint); one clear error when nothing answers."""
    base = normalize_url(url)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    found = Probe(base)
    hostport = urlsplit(base).netloc or base
    try:
        with httpx.Client(timeout=PROBE_TIMEOUT_S, headers=headers, trust_env=False) as http:
            met = http.get(f"{base}/metrics")
            if met.status_code == 200:
                found.metric_names = {
                    m.group(1) for line in met.text.splitlines() if (m := _METRIC_NAME.match(line))
                }
            try:
                ver = http.get(f"{base}/version")
                if ver.status_code == 200:
                    body = ver.json()
                    found.version_hint = (
                        str(body.get("version")) if isinstance(body, dict) else None
                    )
            except (httpx.HTTPError, ValueError):
                pass
    except httpx.ConnectError as exc:
        if is_refused(exc):
            msg = f"--url {url}: refused (nothing accepts connections at {hostport})"
            raise SpecperfError(msg) from None
        raise SpecperfError(f"--url {url}: cannot connect ({exc})") from None
    except httpx.TimeoutException:
        raise SpecperfError(f"--url {url}: no answer within {PROBE_TIMEOUT_S:g} s") from None
    except httpx.HTTPError as exc:
        raise SpecperfError(f"--url {url}: cannot reach the server ({exc})") from None
    return found


def connect(url: str, model: str | None, api_key: str | None) -> tuple[EngineClient, Probe]:
    """The client for ``url``: chosen by the counter names on /metrics (vLLM or SGLang), so
    acceptance is read wherever the counters are, whatever /version says; otherwise each engine
    module's detector, then a generic client without counters."""
    from specperf.engines import detect_client
    from specperf.engines.generic import GenericClient

    found = probe(url, api_key)
    client: EngineClient | None = None
    try:
        if found.family == "vllm":
            from specperf.engines.vllm import VllmClient

            client = VllmClient(found.base, model or "", api_key)
        elif found.family == "sglang":
            from specperf.engines.sglang import SglangClient

            client = SglangClient(found.base, model or "", api_key)
        if client is not None and not client.model:
            client.model = GenericClient.connect(found.base, None, api_key).model
        if client is None:
            client = detect_client(found.base, model, api_key)
    except ModuleNotFoundError as exc:
        if not (exc.name or "").startswith("specperf.engines"):
            raise
        client = GenericClient.connect(found.base, model, api_key)
    except SpecperfError:
        raise
    except Exception as exc:
        raise SpecperfError(f"--url {url}: cannot reach the server ({exc})") from None
    if not client.model:
        raise SpecperfError(f"--url {url}: no model name; pass --model")
    return client, found


def _local_server_pid(base: str) -> int | None:
    """The pid listening on the URL's port when the server runs on this host (loopback)."""
    parts = urlsplit(base)
    if parts.hostname not in ("127.0.0.1", "localhost", "::1") or not parts.port:
        return None
    from specperf.placement import listening_pid

    return listening_pid(parts.port)
