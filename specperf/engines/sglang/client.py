"""A running SGLang server seen from the workload: server info, counters (Prometheus deltas,
else per-request details), prefix-cache reset, and ``detect`` for ``specperf bench --url``."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

import httpx
from packaging.version import Version

from specperf.engines import http_util
from specperf.engines.base import EngineClient, normalize_url
from specperf.engines.sglang.command import Topology
from specperf.engines.sglang.counters import (
    MetricTotals,
    PerRequestTotals,
    counters_from_totals,
    parse_metric_totals,
    spec_details_of,
    summarize_server_info,
    topology_from_info,
)
from specperf.engines.sglang.versions import (
    HTTP_TIMEOUT_S,
    KIND,
    SPEC_DETAILS_SINCE,
    VERIFY_COUNTER_SINCE,
    parse_version,
)
from specperf.schemas import Counters


class SglangClient(EngineClient):
    """A running SGLang server (started by SglangEngine or found by ``detect``)."""

    kind = KIND

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        info: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(base_url, model, api_key)
        self._info: dict[str, Any] | None = dict(info) if info is not None else None
        self._lock = threading.Lock()
        self._per_request = PerRequestTotals()
        self._mode: str | None = None  # "counters" | "per_request" | "none"
        self._has_metrics: bool | None = None

    # -- HTTP

    def _get(self, path: str, timeout: float = HTTP_TIMEOUT_S) -> httpx.Response:
        return http_util.get(self, path, timeout)

    def server_info(self, refresh: bool = False) -> dict[str, Any] | None:
        """``/server_info``, falling back to ``/get_server_info`` (the only name before 0.5.10
        and a deprecated alias since)."""
        if self._info is not None and not refresh:
            return self._info
        for path in ("/server_info", "/get_server_info"):
            try:
                resp = self._get(path)
            except httpx.HTTPError:
                return self._info
            if resp.status_code == 200:
                try:
                    data = resp.json()
                except ValueError:
                    continue
                if isinstance(data, dict):
                    self._info = data
                    return data
        return self._info

    @property
    def topology(self) -> Topology | None:
        info = self.server_info()
        return topology_from_info(info) if info else None

    def version(self) -> str | None:
        info = self.server_info()
        return str(info["version"]) if info and info.get("version") else None

    def _version(self) -> Version | None:
        return parse_version(self.version())

    def server_config(self) -> dict[str, Any]:
        info = self.server_info()
        return summarize_server_info(info) if info else {}

    def metric_totals(self) -> MetricTotals | None:
        """None when the server exposes no /metrics (started without --enable-metrics)."""
        try:
            resp = self._get("/metrics")
        except httpx.HTTPError:
            return None
        if resp.status_code != 200:
            return None
        version = self._version()
        has_verify = version is not None and version >= VERIFY_COUNTER_SINCE
        return parse_metric_totals(resp.text, with_verify=has_verify)

    # -- acceptance

    def _choose_mode(self, totals: MetricTotals | None) -> str:
        if self.topology is None:
            return "none"  # native server: nothing to count
        if totals is not None and totals.verify_calls is not None:
            return "counters"
        version = self._version()
        if version is not None and version >= SPEC_DETAILS_SINCE:
            return "per_request"
        return "none"

    def counters(self) -> Counters:
        totals = self.metric_totals()
        self._has_metrics = totals is not None
        mode = self._choose_mode(totals)
        # first answer wins: a run's before/after snapshots must come from the same source
        with self._lock:
            if self._mode is None or (self._mode == "none" and mode != "none"):
                self._mode = mode
            mode = self._mode
        totals = totals or MetricTotals()
        if mode == "counters":
            return counters_from_totals(totals, self.topology)
        if mode == "per_request":
            with self._lock:
                return self._per_request.counters(self.topology, totals)
        return counters_from_totals(
            MetricTotals(
                generation_tokens=totals.generation_tokens,
                prompt_tokens=totals.prompt_tokens,
                num_requests=totals.num_requests,
                cached_tokens=totals.cached_tokens,
            ),
            None,
        )

    def adapt_request(self, body: dict[str, Any]) -> dict[str, Any]:
        """Ask for per-request spec details only where they are the acceptance source."""
        if self._mode == "per_request":
            return {**body, "return_spec_tokens_details": True}
        return body

    def observe_chunk(self, chunk: dict[str, Any]) -> None:
        """Every streamed chunk (SGLang sends ``sglext`` in a chunk with ``choices: []``)."""
        details = spec_details_of(chunk)
        if not details:
            return
        with self._lock:
            for d in details:
                self._per_request.add(d)

    def reset_prefix_cache(self) -> bool:
        """``POST /flush_cache``: empties the radix cache (and SGLang's internal accept-length
        average); refused (400) while requests are running."""
        resp = http_util.post_or_none(self, "/flush_cache", HTTP_TIMEOUT_S)
        return resp is not None and resp.status_code == 200

    def is_alive(self) -> bool:
        """False only when nothing answers; ``/v1/models`` does not run a generation."""
        return http_util.answers(lambda: self._get("/v1/models"))

    def notes(self) -> list[str]:
        out: list[str] = []
        topo = self.topology
        if topo is None:
            return out
        if self._mode == "counters":
            out.append(
                "SGLang acceptance from Prometheus deltas: drafts = Δspec_verify_calls, accepted "
                "= Δgeneration_tokens − Δverify − Δnum_requests (the prefill token is not a "
                "verify step), MAL = 1 + accepted/drafts"
            )
        elif self._mode == "per_request":
            out.append(
                "SGLang acceptance from per-request sglext.spec_tokens_details (no "
                "sglang:spec_verify_calls_total on this server): drafts = Σspec_verify_ct, "
                "accepted = Σspec_num_correct_drafts"
            )
        else:
            info = self.server_info(refresh=True) or {}
            avg = [
                s.get("avg_spec_accept_length")
                for s in info.get("internal_states") or []
                if isinstance(s, Mapping)
            ]
            version = self._version()
            if self._has_metrics is False and version and version >= VERIFY_COUNTER_SINCE:
                why = "exposes no /metrics (start it with --enable-metrics)"
            else:
                why = (
                    f"has no verify counter (sglang:spec_verify_calls_total, from "
                    f"{VERIFY_COUNTER_SINCE})"
                )
            out.append(
                f"SGLang {self.version() or '?'} {why} and no per-request spec details in its "
                f"OpenAI API (from {SPEC_DETAILS_SINCE}): acceptance not measured"
                + (
                    f"; its own interval-folded avg_spec_accept_length since the last flush: "
                    f"{avg} (not a counter delta, not used)"
                    if any(a is not None for a in avg)
                    else ""
                )
            )
        if topo.topk > 1:
            out.append(
                f"acceptance_rate divides by drafted depth ({topo.depth} per step); SGLang's own "
                f"rate divides by the tree ({topo.tree_size} draft tokens per step, counters."
                "extra.sglang_proposed_draft_tokens): tree rates are not comparable across engines"
            )
        return out


def detect(url: str, model: str | None, api_key: str | None) -> SglangClient | None:
    """An SglangClient when ``url`` is an SGLang server: ``/server_info`` (or, before 0.5.10,
    ``/get_server_info``) answers with SGLang's server args. None otherwise."""
    base = normalize_url(url)
    client = SglangClient(base, model or "", api_key)
    info = client.server_info()
    if not info or "model_path" not in info or "vllm_config" in info:
        return None
    if not any(k.startswith("speculative_") for k in info):
        return None
    if model is None:
        served = info.get("served_model_name") or info.get("model_path")
        try:
            resp = client._get("/v1/models")
            data = resp.json().get("data") or []
            served = str(data[0]["id"]) if data else served
        except (httpx.HTTPError, ValueError, KeyError, TypeError, AttributeError, IndexError):
            pass
        if not served:
            return None
        client.model = str(served)
    return client
