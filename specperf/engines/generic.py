"""Any OpenAI-compatible server: chat streaming only, no counters (acceptance stays null)."""

from __future__ import annotations

from typing import Any

import httpx

from specperf.engines import http_util
from specperf.engines.base import EngineClient
from specperf.errors import SpecperfError
from specperf.schemas import Counters

PROBE_TIMEOUT_S = 10.0


class GenericClient(EngineClient):
    kind = "openai"

    @classmethod
    def connect(cls, url: str, model: str | None, api_key: str | None) -> GenericClient:
        """A client for ``url``; ``model`` None → the first id listed by ``/v1/models``."""
        client = cls(url, model or "", api_key)
        if model is None:
            client.model = client._first_model()
        return client

    def _first_model(self) -> str:
        url = f"{self.base_url}/v1/models"
        try:
            resp = httpx.get(url, headers=self.headers(), timeout=PROBE_TIMEOUT_S, trust_env=False)
            resp.raise_for_status()
            data: Any = resp.json()
        except (httpx.HTTPError, ValueError) as exc:
            raise SpecperfError(f"--url: cannot list models at {url}: {exc}") from None
        models = data.get("data") if isinstance(data, dict) else None
        if not models or not isinstance(models[0], dict) or "id" not in models[0]:
            raise SpecperfError(f"--url: {url} lists no model; pass --model")
        return str(models[0]["id"])

    def counters(self) -> Counters:
        return Counters()

    def is_alive(self) -> bool:
        """False only when nothing answers (connection refused); slow answers count as alive."""
        return http_util.answers(lambda: http_util.get(self, "/v1/models", PROBE_TIMEOUT_S))

    def notes(self) -> list[str]:
        return [f"generic OpenAI client for {self.base_url}: the engine exposes no counters here"]
