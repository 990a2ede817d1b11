"""The transformers engine server's side of the OpenAI chat protocol: a request body to a
``backend.Request`` (``BadRequest`` names the field), chat templates, incremental
detokenisation."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from specperf.engines.transformers.backend import Request
from specperf.engines.transformers.eagle3.sampling import Sampling


class Detokenizer:
    """Incremental detokenisation with a small prefix window (vLLM's scheme): text is released
    once it no longer ends in an incomplete UTF-8 sequence."""

    def __init__(self, tokenizer: Any) -> None:
        self.tok = tokenizer
        self.ids: list[int] = []
        self.prefix = 0
        self.read = 0

    def _decode(self, ids: Sequence[int]) -> str:
        return str(self.tok.decode(list(ids), skip_special_tokens=True))

    def add(self, new: Sequence[int], final: bool = False) -> str:
        self.ids.extend(new)
        before = self._decode(self.ids[self.prefix : self.read])
        full = self._decode(self.ids[self.prefix :])
        if len(full) > len(before) and (final or not full.endswith("\ufffd")):
            self.prefix, self.read = self.read, len(self.ids)
            return full[len(before) :]
        return ""


def encode_chat(tokenizer: Any, messages: list[dict[str, Any]], kwargs: dict[str, Any]) -> list:
    out = tokenizer.apply_chat_template(
        messages, add_generation_prompt=True, tokenize=True, **kwargs
    )
    if isinstance(out, dict) or hasattr(out, "keys"):
        out = out["input_ids"]
    if out and isinstance(out[0], list):
        out = out[0]
    return [int(t) for t in out]


class BadRequest(ValueError):
    pass


def _num(body: dict[str, Any], key: str, default: Any, kind: type) -> Any:
    v = body.get(key, default)
    if v is None:
        return default
    try:
        return kind(v)
    except (TypeError, ValueError):
        raise BadRequest(f"field {key!r} must be a {kind.__name__}, got {v!r}") from None


def parse_request(body: dict[str, Any], tokenizer: Any, max_len: int) -> tuple[Request, bool, bool]:
    """(request, stream, include_usage) from an OpenAI chat body; BadRequest names the field."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("field 'messages' must be a non-empty list")
    kwargs = body.get("chat_template_kwargs") or {}
    if not isinstance(kwargs, dict):
        raise BadRequest("field 'chat_template_kwargs' must be an object")
    try:
        prompt = encode_chat(tokenizer, messages, kwargs)
    except Exception as exc:
        raise BadRequest(f"chat template failed: {exc}") from None
    room = max_len - len(prompt)
    max_tokens = body.get("max_completion_tokens") or body.get("max_tokens") or room
    max_tokens = _num({"max_tokens": max_tokens}, "max_tokens", room, int)
    if max_tokens < 1:
        raise BadRequest("field 'max_tokens' must be >= 1")
    if max_tokens > room:
        raise BadRequest(
            f"prompt ({len(prompt)} tokens) + max_tokens ({max_tokens}) exceeds the server's "
            f"max model length {max_len}"
        )
    seed = body.get("seed")
    sampling = Sampling(
        temperature=_num(body, "temperature", 1.0, float),
        top_p=_num(body, "top_p", 1.0, float),
        top_k=_num(body, "top_k", -1, int),
        min_p=_num(body, "min_p", 0.0, float),
        seed=None if seed is None else _num(body, "seed", 0, int),
    )
    req = Request(prompt, max_tokens, sampling, ignore_eos=bool(body.get("ignore_eos", False)))
    stream = bool(body.get("stream", False))
    usage = bool((body.get("stream_options") or {}).get("include_usage", False))
    return req, stream, usage
