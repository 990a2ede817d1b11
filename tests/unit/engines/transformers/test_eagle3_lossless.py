"""EAGLE3 is lossless: at temperature 0 in fp32 on CPU our speculative decoding emits exactly
the tokens of native greedy decoding (transformers' ``generate``), whatever the drafts are,
and counts acceptance exactly. The tiny random-weight target from testmodels."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import torch

from specperf.engines.transformers.eagle3.checkpoint import load_head
from specperf.engines.transformers.eagle3.sampling import Sampling, TokenSampler
from specperf.engines.transformers.eagle3.speculate import Eagle3Speculator, StepInfo
from specperf.engines.transformers.eagle3.target import TargetRunner

K = 3
PROMPTS = [
    "Explain how a cache works in a server.",
    "What is 12 + 7? Answer with the number.",
    "Write a short poem about rivers and cities.",
    "def add(a, b):",
]


@pytest.fixture(scope="module")
def tiny() -> Iterator[tuple[Any, Any, Any]]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from specperf.testkit.models import ensure_tiny_model, tiny_eagle3_path

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    path = ensure_tiny_model()
    tok = AutoTokenizer.from_pretrained(str(path))
    model = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32).eval()
    cfg = model.config
    head = load_head(
        tiny_eagle3_path(path),
        num_target_layers=cfg.num_hidden_layers,
        target_vocab_size=cfg.vocab_size,
        target_hidden_size=cfg.hidden_size,
    )
    yield model, tok, head
    torch.set_num_threads(threads)


def prompt_ids(tok: Any, text: str) -> list[int]:
    from specperf.testkit.eagle3_fit import chat_ids

    return chat_ids(tok, text)


def native_greedy(model: Any, ids: list[int], n: int) -> list[int]:
    out = model.generate(
        torch.tensor([ids]), max_new_tokens=n, do_sample=False, eos_token_id=None, pad_token_id=0
    )
    return out[0, len(ids) :].tolist()


class Recorder:
    def __init__(self) -> None:
        self.tokens: list[int] = []
        self.steps: list[StepInfo] = []

    def __call__(self, info: StepInfo) -> None:
        self.tokens.extend(info.tokens)
        self.steps.append(info)

    @property
    def drafts(self) -> list[StepInfo]:
        return [s for s in self.steps if s.drafted]


@pytest.mark.parametrize("cache", ["dynamic", "static"])
def test_eagle3_greedy_equals_native_greedy(tiny: Any, cache: str) -> None:
    model, tok, head = tiny
    runner = TargetRunner(model, aux_layer_ids=head.cfg.aux_layer_ids, cache=cache, max_len=512)
    spec = Eagle3Speculator(runner, head, K, timing=False)
    for text in PROMPTS:
        ids = prompt_ids(tok, text)
        want = native_greedy(model, ids, 40)
        rec = Recorder()
        reason = spec.generate(ids, 40, TokenSampler(Sampling()), set(), rec)
        assert rec.tokens == want, text
        assert reason == "length"
        assert all(s.drafted == K and 0 <= s.accepted <= K for s in rec.drafts)


class OracleSpeculator(Eagle3Speculator):
    """Drafts the native continuation (wrong at position ``wrong`` when set): exercises the
    accepting branch of verification and the cache rewinds after partial acceptance."""

    def __init__(self, *a: Any, reference: list[int], wrong: int | None = None, **kw: Any):
        super().__init__(*a, **kw)
        self.reference = reference
        self.wrong = wrong

    def _draft(self, cache: Any, tokens: torch.Tensor, fused: torch.Tensor) -> torch.Tensor:
        pos = self.target.length + 1  # the pending token sits at target.length
        out = [self.reference[i] if i < len(self.reference) else 0 for i in range(pos, pos + K)]
        if self.wrong is not None:
            out[self.wrong] = (out[self.wrong] + 1) % self.head.cfg.vocab_size
        return torch.tensor([out])


@pytest.mark.parametrize(("wrong", "accepted"), [(None, K), (0, 0), (1, 1), (2, 2)])
def test_acceptance_is_counted_exactly(tiny: Any, wrong: int | None, accepted: int) -> None:
    model, tok, head = tiny
    ids = prompt_ids(tok, PROMPTS[0])
    n = 1 + (K + 1) * 8  # first token from prefill, then 8 full steps when all drafts pass
    want = native_greedy(model, ids, n)
    runner = TargetRunner(model, aux_layer_ids=head.cfg.aux_layer_ids, cache="dynamic")
    spec = OracleSpeculator(runner, head, K, timing=False, reference=ids + want, wrong=wrong)
    rec = Recorder()
    spec.generate(ids, n, TokenSampler(Sampling()), set(), rec)
    assert rec.tokens == want
    assert {s.accepted for s in rec.drafts} == {accepted}
    if wrong is None:
        assert len(rec.drafts) == 8  # MAL = 1 + 3·8/8 = K + 1
        assert all(len(s.tokens) == K + 1 for s in rec.drafts)


@pytest.mark.parametrize("cache", ["dynamic", "static"])
def test_runner_length_is_the_cache_length(tiny: Any, cache: str) -> None:
    """The host-side length (no .item() per step) follows the cache's own count."""
    model, _tok, head = tiny
    runner = TargetRunner(model, aux_layer_ids=head.cfg.aux_layer_ids, cache=cache, max_len=128)
    for _ in range(2):  # the second request reuses the static cache (reset)
        _lengths_follow(runner)


@torch.inference_mode()
def _lengths_follow(runner: Any) -> None:
    from specperf.engines.transformers.eagle3.target import cache_length

    runner.start(64)
    runner.forward(torch.tensor([list(range(10, 30))]))
    runner.forward(torch.tensor([[5, 6, 7, 8]]))
    assert runner.length == cache_length(runner.cache) == 24
    runner.rewind(21)
    assert runner.length == cache_length(runner.cache) == 21
    runner.forward(torch.tensor([[9, 9]]))
    assert runner.length == cache_length(runner.cache) == 23


def test_phase_timing_splits_each_step_and_can_be_off(tiny: Any) -> None:
    model, tok, head = tiny
    ids = prompt_ids(tok, PROMPTS[0])
    for timing in (True, False):
        runner = TargetRunner(model, aux_layer_ids=head.cfg.aux_layer_ids, cache="dynamic")
        rec = Recorder()
        Eagle3Speculator(runner, head, K, timing=timing).generate(
            ids, 12, TokenSampler(Sampling()), set(), rec
        )
        if timing:
            assert all(s.draft_s > 0 and s.verify_s > 0 for s in rec.drafts)
        else:
            assert all(s.draft_s == 0 and s.verify_s == 0 for s in rec.drafts)
