"""An EngineClient for the calibration server in tests: vLLM-style counters from /metrics
(prometheus_client's text parser), prefix-cache reset, liveness and token ids."""

from __future__ import annotations

from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from specperf.engines.base import EngineClient
from specperf.errors import UnsupportedError
from specperf.schemas import Counters

_NAMES = {
    "vllm:spec_decode_num_drafts_total": "drafts",
    "vllm:spec_decode_num_draft_tokens_total": "draft_tokens",
    "vllm:spec_decode_num_accepted_tokens_total": "accepted_tokens",
    "vllm:generation_tokens_total": "generation_tokens",
    "vllm:prompt_tokens_total": "prompt_tokens",
    "vllm:prefix_cache_queries_total": "prefix_cache_queries",
    "vllm:prefix_cache_hits_total": "prefix_cache_hits",
}
_PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos_total"


class CalibrationClient(EngineClient):
    kind = "calibration"

    def __init__(
        self,
        base_url: str,
        model: str = "calibration-model",
        api_key: str | None = None,
        token_ids: bool = False,
        max_concurrency: int | None = None,
    ) -> None:
        super().__init__(base_url, model, api_key)
        self.token_ids = token_ids
        self.max_concurrency = max_concurrency
        self.resets = 0

    def check_workload(self, workload: Any) -> None:
        """Dialled refusal (option ``max_concurrency``), as a batch-size-1 engine path refuses."""
        if self.max_concurrency is not None and workload.concurrency > self.max_concurrency:
            raise UnsupportedError(
                f"calibration engine: concurrency {workload.concurrency} > "
                f"max_concurrency {self.max_concurrency}"
            )

    def counters(self) -> Counters:
        text = httpx.get(f"{self.base_url}/metrics", timeout=10, trust_env=False).text
        vals: dict[str, float] = {}
        per_pos: dict[int, float] = {}
        for fam in text_string_to_metric_families(text):
            for s in fam.samples:
                if s.name == _PER_POS:
                    pos = int(s.labels["position"])
                    per_pos[pos] = per_pos.get(pos, 0.0) + s.value
                elif s.name in _NAMES:
                    key = _NAMES[s.name]
                    vals[key] = vals.get(key, 0.0) + s.value
        positions = tuple(per_pos[i] for i in sorted(per_pos)) if per_pos else None
        return Counters(accepted_per_position=positions, **vals)

    def reset_prefix_cache(self) -> bool:
        self.resets += 1
        r = httpx.post(f"{self.base_url}/reset_prefix_cache", timeout=10, trust_env=False)
        return r.status_code == 200

    def version(self) -> str | None:
        return httpx.get(f"{self.base_url}/version", timeout=10, trust_env=False).json()["version"]

    def is_alive(self) -> bool:
        try:
            httpx.get(f"{self.base_url}/health", timeout=5, trust_env=False)
        except httpx.TimeoutException:
            return True
        except httpx.TransportError:
            return False
        return True

    def adapt_request(self, body: dict[str, Any]) -> dict[str, Any]:
        if self.token_ids:
            body["return_token_ids"] = True
        return body

    def extract_token_ids(self, chunk: dict[str, Any]) -> list[int] | None:
        choices = chunk.get("choices") or []
        ids = choices[0].get("token_ids") if choices else None
        return list(ids) if ids else None
