"""A running vLLM server (started by VllmEngine or found by ``detect``)."""

from __future__ import annotations

from typing import Any

import httpx

from specperf.engines import http_util
from specperf.engines.base import EngineClient, chunk_token_ids, normalize_url
from specperf.engines.vllm.command import KIND
from specperf.engines.vllm.counters import parse_metrics, summarize_server_info
from specperf.schemas import Counters

HTTP_TIMEOUT_S = 10.0
# /server_info also collects vLLM's system env (pip list, ...): >10 s on 2 busy cores, once
SERVER_INFO_TIMEOUT_S = 120.0


# ---------------------------------------------------------------- client


class VllmClient(EngineClient):
    """A running vLLM server (started by VllmEngine or found by ``detect``)."""

    kind = KIND

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        return_token_ids: bool = True,
    ) -> None:
        super().__init__(base_url, model, api_key)
        self.return_token_ids = return_token_ids
        self._version: str | None = None
        self._server_config: dict[str, Any] | None = None

    def _get(self, path: str, **kw: Any) -> httpx.Response:
        return http_util.get(self, path, HTTP_TIMEOUT_S, **kw)

    def metrics_text(self) -> str:
        resp = self._get("/metrics")
        resp.raise_for_status()
        return resp.text

    def counters(self) -> Counters:
        return parse_metrics(self.metrics_text())

    def reset_prefix_cache(self) -> bool:
        """POST /reset_prefix_cache (needs VLLM_SERVER_DEV_MODE=1, which VllmEngine sets);
        False when the endpoint is absent or the reset failed (blocks still held)."""
        resp = http_util.post_or_none(self, "/reset_prefix_cache", HTTP_TIMEOUT_S)
        if resp is None or resp.status_code != 200:
            return False
        try:
            return bool(resp.json().get("success", True))
        except ValueError:
            return True  # older servers answer 200 with an empty body

    def version(self) -> str | None:
        if self._version is None:
            try:
                resp = self._get("/version")
                resp.raise_for_status()
                self._version = str(resp.json().get("version"))
            except (httpx.HTTPError, ValueError, AttributeError):
                return None
        return self._version

    def server_info(self) -> dict[str, Any] | None:
        """``/server_info?config_format=json`` (dev mode only), None when unavailable."""
        try:
            resp = http_util.get(
                self, "/server_info", SERVER_INFO_TIMEOUT_S, params={"config_format": "json"}
            )
            if resp.status_code != 200:
                return None
            data = resp.json()
        except (httpx.HTTPError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def server_config(self) -> dict[str, Any]:
        """Resolved settings from /server_info, fetched once (the config cannot change; the
        first call is slow, so VllmEngine makes it before anything is measured)."""
        if self._server_config is None:
            info = self.server_info()
            if info is None:
                return {}
            self._server_config = summarize_server_info(info)
        return self._server_config

    def is_alive(self) -> bool:
        try:
            return self._get("/health").status_code == 200
        except httpx.HTTPError:
            return False

    def adapt_request(self, body: dict[str, Any]) -> dict[str, Any]:
        """Ask for the generated token ids in each streamed chunk (``return_token_ids``, vLLM
        chat API); used by the lossless-output guard. Side effect in vLLM: a chunk is sent for
        every engine step even when the detokenizer holds text back, so some chunks carry
        token ids and no content."""
        if not self.return_token_ids:
            return body
        return {**body, "return_token_ids": True}

    def extract_token_ids(self, chunk: dict[str, Any]) -> list[int] | None:
        return chunk_token_ids(chunk)

    def notes(self) -> list[str]:
        return []


def detect(url: str, model: str | None, api_key: str | None) -> VllmClient | None:
    """A VllmClient when ``url`` is a vLLM server: ``/version`` answers and ``/metrics`` has
    ``vllm:`` series. None otherwise (the next engine module is asked)."""
    base = normalize_url(url)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        with httpx.Client(timeout=5.0, headers=headers, trust_env=False) as http:
            ver = http.get(f"{base}/version")
            if ver.status_code != 200 or "version" not in ver.json():
                return None
            met = http.get(f"{base}/metrics")
            if met.status_code != 200 or "vllm:" not in met.text:
                return None
            if model is None:
                models = http.get(f"{base}/v1/models").json().get("data") or []
                if not models:
                    return None
                model = str(models[0]["id"])
    except (httpx.HTTPError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return VllmClient(base, model, api_key)
