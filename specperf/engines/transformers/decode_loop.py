"""Native greedy decoding of one request without ``generate()``'s per-token host work.

Why: on a fast GPU most of a native token's time through ``generate()`` is the host's, not the
GPU's: generate's Python per token, and a sync per token that leaves the GPU idle while the host
works. The host's speed wanders from minute to minute and from host to host, and with it the
engine's speed, so a small slowdown of the engine hides in that noise.

This loop calls the same compiled decode step ``generate()`` uses, takes the argmax on the
device and queues the next step before it waits for the previous token (``depth`` 2), so the GPU
always has a step to run and the host's speed matters only where its per-step work exceeds the
GPU's. Each token is still handed to ``on_step`` as soon as it is on the host: the stream and
its timestamps stay per token. The engine uses it only where the start-up check accepts it
(``GenerateBackend.check_fast_path``: its logits as close to an fp32 forward as eager's).
"""

from __future__ import annotations

import inspect
from collections import deque
from collections.abc import Callable
from typing import Any

import torch

from specperf.engines.transformers.eagle3.speculate import StepInfo
from specperf.engines.transformers.eagle3.target import cache_kwarg

DEPTH = 2  # steps queued on the device before the host waits for a token


class DecodeLoop:
    """Greedy decoding of one request: eager prefill, then one compiled step per token.

    ``step`` is the compiled call (``model.get_compiled_call``) or None for eager (CPU, tests).
    ``cache`` returns the engine's static cache for batch 1, reset."""

    def __init__(
        self,
        model: Any,
        cache: Callable[[], Any],
        step: Callable[..., Any] | None,
        depth: int = DEPTH,
    ) -> None:
        self.model = model
        self.cache = cache
        self.step = step
        self.depth = max(1, depth)
        self.device = next(model.parameters()).device
        self._kw = cache_kwarg(model)
        self._positions = "cache_position" in inspect.signature(model.forward).parameters

    def _forward(self, fn: Callable[..., Any], ids: torch.Tensor, pos: torch.Tensor, cache: Any):
        extra = {"cache_position": pos[0]} if self._positions else {}
        return fn(input_ids=ids, position_ids=pos, use_cache=True, **{self._kw: cache}, **extra)

    @torch.inference_mode()
    def run(
        self,
        prompt: list[int],
        max_tokens: int,
        on_token: Callable[[int], bool],
        keep_logits: bool = False,
    ) -> list[torch.Tensor]:
        """Decode up to ``max_tokens``; ``on_token(token)`` gets each token as it reaches the
        host and returns False to stop (the caller decides every other end: EOS, a cancelled
        client). Returns the fp32 logits of each token when ``keep_logits`` (the start-up
        check), else []."""
        cache = self.cache()
        n0 = len(prompt)
        pos = torch.arange(n0, device=self.device)[None]
        ids = torch.tensor([prompt], device=self.device)
        out = self._forward(self.model, ids, pos, cache)
        last = out.logits[:, -1:]
        logits = [last[0, 0].float()] if keep_logits else []
        tok = last.argmax(-1)
        first = int(tok.item())
        if not on_token(first) or max_tokens <= 1:
            return logits
        on_device = self.device.type == "cuda"
        slots = [
            torch.empty((1, 1), dtype=torch.long, pin_memory=on_device) for _ in range(self.depth)
        ]
        done = [torch.cuda.Event() if on_device else None for _ in range(self.depth)]
        fn = self.step if self.step is not None else self.model
        p = torch.full((1, 1), n0, device=self.device, dtype=torch.long)
        pending: deque[int] = deque()
        for i in range(max_tokens - 1):
            if self.step is not None:
                torch.compiler.cudagraph_mark_step_begin()
            o = self._forward(fn, tok, p, cache)
            last = o.logits[:, -1:]
            if keep_logits:  # copy now: a graph replay overwrites its outputs
                logits.append(last[0, 0].float().clone())
            tok = last.argmax(-1)
            p = p + 1
            slot = i % self.depth
            slots[slot].copy_(tok, non_blocking=on_device)
            event = done[slot]
            if event is not None:
                event.record()
            pending.append(slot)
            final = i == max_tokens - 2
            while pending and (len(pending) >= self.depth or final):
                s = pending.popleft()
                ev = done[s]
                if ev is not None:
                    ev.synchronize()
                if not on_token(int(slots[s][0, 0])):
                    return logits
        return logits


def stream_one(
    loop: DecodeLoop,
    prompt: list[int],
    max_tokens: int,
    stop_ids: set[int],
    on_step: Callable[[int, StepInfo, str | None], None],
    cancelled: Callable[[], bool],
) -> None:
    """One request through ``loop`` as the server streams it: a step per token, the last one
    with its reason ("stop" at a stop id, "length" at ``max_tokens``); nothing more once the
    client has gone."""
    count = 0

    def on_token(t: int) -> bool:
        nonlocal count
        if cancelled():
            return False
        count += 1
        reason = "stop" if t in stop_ids else ("length" if count >= max_tokens else None)
        on_step(0, StepInfo(tokens=[t], drafted=0, accepted=0), reason)
        return reason is None

    loop.run(prompt, max_tokens, on_token)
