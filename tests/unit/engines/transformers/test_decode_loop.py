"""The transformers engine's bare decode loop (specperf.engines.transformers.decode_loop) on the
tiny model, eager on CPU: it must stream what ``generate()`` streams — the same greedy tokens, one
step per token, "stop" at EOS and "length" at max_tokens, nothing after a client leaves — and the
start-up check must refuse a loop whose logits are wrong."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from specperf.engines.transformers.backend import Request
from specperf.engines.transformers.decode_loop import DecodeLoop
from specperf.engines.transformers.eagle3.sampling import Sampling
from specperf.engines.transformers.generate import GenerateBackend

pytestmark = pytest.mark.usefixtures("one_thread")

PROMPT = list(range(10, 40))
TOKENS = 24


@pytest.fixture(scope="module")
def model():
    from transformers import AutoModelForCausalLM

    from specperf.testkit.models import ensure_tiny_model

    path: Path = ensure_tiny_model()
    return AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32).eval()


def backend(model, mode: str = "on", eos: set[int] | None = None) -> GenerateBackend:
    b = GenerateBackend(
        model, eos or {1}, 0, 256, method="native", static_cache=True, decode_loop=mode
    )
    b.check_fast_path(PROMPT, 16)
    return b


def steps_of(b: GenerateBackend, req: Request, via_generate: bool = False) -> list[tuple]:
    out: list[tuple] = []

    def on_step(row, info, reason):
        out.append((tuple(info.tokens), reason))

    (b.generate([req], on_step) if via_generate else b.run([req], on_step))
    return out


def test_loop_streams_generates_tokens_one_step_per_token(model) -> None:
    b = backend(model)
    assert b.fast_path["decode_loop"]["used"] is True, b.fast_path
    assert b.fast_path["decode_loop"]["first_difference"] is None  # fp32: bit-equal tokens
    req = Request(PROMPT, TOKENS, Sampling(), ignore_eos=True)
    loop = steps_of(b, req)
    ref = steps_of(b, req, via_generate=True)
    assert len(loop) == TOKENS and all(len(t) == 1 for t, _ in loop)
    # the greedy output holds the EOS id (1) before step 24: ignore_eos must run past it (generate
    # stopped there before its config's None eos was kept from being filled in)
    assert (1,) in [t for t, _ in ref[: TOKENS - 1]] and len(ref) == TOKENS
    assert [t for t, _ in loop] == [t for t, _ in ref]
    assert [r for _, r in loop] == [None] * (TOKENS - 1) + ["length"]


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_queue_depth_does_not_change_tokens(model, depth: int) -> None:
    b = backend(model)
    want: list[int] = []
    b.loop.run(PROMPT, TOKENS, lambda t: want.append(t) is None)
    got: list[int] = []
    DecodeLoop(model, lambda: b._cache(1), None, depth=depth).run(
        PROMPT, TOKENS, lambda t: got.append(t) is None
    )
    assert got == want


def test_loop_stops_at_eos_like_generate(model) -> None:
    plain = backend(model)
    toks = [t for (t,), _ in steps_of(plain, Request(PROMPT, TOKENS, Sampling(), True))]
    eos = toks[5]
    first = toks.index(eos)
    b = backend(model, eos={eos})
    loop = steps_of(b, Request(PROMPT, TOKENS, Sampling()))
    ref = steps_of(b, Request(PROMPT, TOKENS, Sampling()), via_generate=True)
    assert loop == ref
    assert len(loop) == first + 1 and loop[-1] == ((eos,), "stop")


def test_nothing_is_streamed_after_the_client_leaves(model) -> None:
    b = backend(model)
    req = Request(PROMPT, TOKENS, Sampling(), ignore_eos=True)
    seen: list[tuple] = []

    def on_step(row, info, reason):
        seen.append((tuple(info.tokens), reason))
        if len(seen) == 3:
            req.cancelled.set()

    b.run([req], on_step)
    assert len(seen) == 3 and all(r is None for _, r in seen)


def test_sampling_and_batches_still_go_through_generate(model, monkeypatch) -> None:
    b = backend(model)
    calls: list[int] = []
    monkeypatch.setattr(b, "generate", lambda reqs, on_step: calls.append(len(reqs)))
    b.run([Request(PROMPT, 4, Sampling(temperature=0.7, seed=1))], lambda *a: None)
    b.run([Request(PROMPT, 4, Sampling()), Request(PROMPT, 4, Sampling())], lambda *a: None)
    b.run([Request(PROMPT, 4, Sampling())], lambda *a: None)  # greedy batch 1: the loop
    assert calls == [1, 2]


def test_off_and_auto_without_a_compiled_step_keep_generate(model) -> None:
    assert backend(model, "off").loop is None
    auto = backend(model, "auto")  # CPU: no compiled step, so no loop
    assert auto.loop is None
    assert auto.fast_path["decode_loop"] == {"used": False, "reason": "no compiled decode step"}


def test_check_refuses_a_loop_with_wrong_positions(model, monkeypatch) -> None:
    def shifted(**kw):  # a step that baked in the wrong positions
        kw = dict(kw)
        kw["position_ids"] = kw["position_ids"] + 7
        return model(**kw)

    b = GenerateBackend(model, {1}, 0, 256, static_cache=True, decode_loop="on")
    b.fast_path = {"compiled": True}
    monkeypatch.setattr(model, "get_compiled_call", lambda cfg: shifted, raising=False)
    monkeypatch.setattr(torch.compiler, "cudagraph_mark_step_begin", lambda: None)
    b._check_decode_loop(PROMPT, 16, None)
    res = b.fast_path["decode_loop"]
    assert res["used"] is False and b.loop is None
    assert res["error_loop"] > 5 * res["error_eager"]
    assert any("generate()" in n for n in b.notes)


def test_an_unknown_mode_is_a_clear_error(model) -> None:
    with pytest.raises(ValueError, match="decode_loop 'fast'"):
        GenerateBackend(model, {1}, 0, 256, decode_loop="fast")


def test_the_option_reaches_the_server_and_its_parser() -> None:
    from specperf.engines.base import Devices, EngineSpec
    from specperf.engines.transformers.engine import build_command
    from specperf.engines.transformers.server import parse_args

    spec = EngineSpec(kind="transformers", label="hf", model="/m", options={"decode_loop": "auto"})
    cmd = build_command(spec, 8000, Devices())
    assert cmd[cmd.index("--decode-loop") + 1] == "auto"
    assert parse_args(cmd[3:]).decode_loop == "auto"
    assert parse_args(["--model", "/m", "--port", "1"]).decode_loop == "off"
    with pytest.raises(SystemExit):
        parse_args(["--model", "/m", "--port", "1", "--decode-loop", "fast"])
