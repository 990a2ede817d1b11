"""Engine registry: engine kind → module. The only place that knows which kinds exist."""

from __future__ import annotations

import importlib

from specperf.engines.base import Devices, Engine, EngineClient, EngineRecord, EngineSpec

# kind -> "module:EngineClass"; engine modules import lazily (SGLang/vLLM never imported here).
_ENGINES: dict[str, str] = {
    "vllm": "specperf.engines.vllm:VllmEngine",
    "transformers": "specperf.engines.transformers.engine:TransformersEngine",
    "sglang": "specperf.engines.sglang:SglangEngine",
}
# modules asked, in order, whether a URL is theirs (bench --url detection)
_DETECTORS: list[str] = [
    "specperf.engines.vllm",
    "specperf.engines.sglang",
    "specperf.engines.transformers.engine",
]


def register(kind: str, target: str, detector_module: str | None = None) -> None:
    """Register an engine kind (used by tests for the calibration engine, and by plugins)."""
    _ENGINES[kind] = target
    if detector_module and detector_module not in _DETECTORS:
        _DETECTORS.append(detector_module)


def kinds() -> list[str]:
    return sorted(_ENGINES)


def get_engine_class(kind: str) -> type[Engine]:
    from specperf.errors import ConfigError

    if kind not in _ENGINES:
        raise ConfigError(f"unknown engine kind {kind!r}; known: {', '.join(kinds())}")
    mod, _, cls = _ENGINES[kind].partition(":")
    return getattr(importlib.import_module(mod), cls)


def detect_client(url: str, model: str | None, api_key: str | None) -> EngineClient:
    """Ask each engine module's ``detect(url, model, api_key)`` in turn; the first non-None
    answer wins. Falls back to a generic OpenAI client without counters."""
    for mod in _DETECTORS:
        found = importlib.import_module(mod).detect(url, model, api_key)
        if found is not None:
            return found
    from specperf.engines.generic import GenericClient

    return GenericClient.connect(url, model, api_key)


__all__ = [
    "Devices",
    "Engine",
    "EngineClient",
    "EngineRecord",
    "EngineSpec",
    "detect_client",
    "get_engine_class",
    "kinds",
    "register",
]
