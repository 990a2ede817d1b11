"""The transformers engine without a server: command building, counters, the step streamer that
turns ``generate``'s puts into verify steps, incremental detokenisation, request parsing, the
batch-size-1 rule and the fast-path (compiled vs eager) check."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import torch

from specperf.engines.base import Devices, EngineSpec
from specperf.engines.transformers.backend import Cancelled, Request
from specperf.engines.transformers.counters import Counters
from specperf.engines.transformers.eagle3.sampling import Sampling
from specperf.engines.transformers.eagle3.speculate import StepInfo
from specperf.engines.transformers.engine import TransformersClient, build_command
from specperf.engines.transformers.fast_path import accept_compiled, compare_verify_paths
from specperf.engines.transformers.generate import StepStreamer
from specperf.engines.transformers.protocol import BadRequest, Detokenizer, parse_request
from specperf.errors import ConfigError, UnsupportedError
from specperf.schemas import WorkloadSpec

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def tiny_path() -> Path:
    from specperf.testkit.models import ensure_tiny_model

    return ensure_tiny_model()


@pytest.fixture(scope="module")
def tokenizer(tiny_path: Path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(tiny_path))


def spec(**kw) -> EngineSpec:
    base = dict(kind="transformers", label="hf", model="/m")
    base.update(kw)
    return EngineSpec(**base)


# ---------------------------------------------------------------- command


def flag(cmd: list[str], name: str) -> str | None:
    return cmd[cmd.index(name) + 1] if name in cmd else None


def test_command_per_method() -> None:
    cmd = build_command(spec(), 8000, Devices())
    assert cmd[1:3] == ["-m", "specperf.engines.transformers.server"]
    assert flag(cmd, "--method") == "native" and flag(cmd, "--port") == "8000"
    assert flag(cmd, "--host") == "127.0.0.1"
    e = build_command(
        spec(method="eagle3", num_speculative_tokens=3, draft_model="/h", dtype="float32"),
        1,
        Devices(cpus=(0, 1)),
    )
    assert (flag(e, "--method"), flag(e, "--num-speculative-tokens")) == ("eagle3", "3")
    assert (flag(e, "--draft-model"), flag(e, "--dtype"), flag(e, "--threads")) == (
        "/h",
        "float32",
        "2",
    )
    n = build_command(spec(method="ngram", num_speculative_tokens=4, ngram_max=3), 1, Devices())
    assert flag(n, "--ngram-max") == "3"
    r = build_command(
        spec(
            model="~/m",
            method="draft_model",
            num_speculative_tokens=2,
            draft_model="~/d",
            options=(("random_weights", True), ("draft_random_weights", True), ("compile", "off")),
        ),
        1,
        Devices(),
    )
    assert not flag(r, "--model").startswith("~") and not flag(r, "--draft-model").startswith("~")
    assert "--random-weights" in r and "--draft-random-weights" in r
    assert flag(r, "--compile") == "off"
    assert "--phase-timing" not in r  # the server's default (on)
    for value, want in ((False, "off"), ("on", "on"), ("off", "off")):
        e3 = spec(
            method="eagle3",
            num_speculative_tokens=3,
            draft_model="/h",
            options=(("phase_timing", value),),
        )
        assert flag(build_command(e3, 1, Devices()), "--phase-timing") == want
    bad = spec(
        method="eagle3",
        num_speculative_tokens=3,
        draft_model="/h",
        options=(("phase_timing", "sometimes"),),
    )
    with pytest.raises(ConfigError, match="phase_timing"):
        build_command(bad, 1, Devices())


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"method": "mtp", "num_speculative_tokens": 1}, "not supported by the transformers"),
        ({"method": "eagle3", "draft_model": "/h"}, "needs num_speculative_tokens"),
        ({"method": "draft_model", "num_speculative_tokens": 3}, "needs a draft"),
    ],
)
def test_command_errors_name_the_engine(kw: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as exc:
        build_command(spec(**kw), 1, Devices())
    assert "'hf'" in str(exc.value)


# ---------------------------------------------------------------- counters


def test_counters_follow_the_design_definitions() -> None:
    c = Counters(3, speculative=True, timed=True)
    c.add_request(10)
    c.add_step(StepInfo([5], drafted=0, accepted=0))  # prefill token: not a draft
    c.add_step(StepInfo([1, 2, 3], drafted=3, accepted=2, draft_s=0.5, verify_s=1.0))
    c.add_step(StepInfo([4], drafted=3, accepted=0, draft_s=0.5, verify_s=1.0))
    s = c.snapshot()
    assert (s["drafts"], s["draft_tokens"], s["accepted_tokens"]) == (2, 6, 2)
    assert s["accepted_per_position"] == [1, 1, 0]
    assert (s["generation_tokens"], s["prompt_tokens"], s["steps"]) == (5, 10, 3)
    assert (s["draft_time_s"], s["verify_time_s"]) == (1.0, 2.0)
    native = Counters(None, speculative=False).snapshot()
    assert native["drafts"] is None and native["accepted_per_position"] is None
    assert Counters(3, speculative=True, timed=False).snapshot()["draft_time_s"] is None


def test_client_maps_counters_and_enforces_batch_size_one() -> None:
    client = TransformersClient("http://127.0.0.1:1", "m")
    payload = {
        "requests": 2,
        "steps": 9,
        "drafts": 4,
        "draft_tokens": 12,
        "accepted_tokens": 5,
        "accepted_per_position": [3, 2, 0],
        "generation_tokens": 20,
        "prompt_tokens": 30,
        "draft_time_s": None,
        "verify_time_s": None,
    }
    client._get = lambda path: payload  # the HTTP layer is covered by the integration test
    c = client.counters()
    assert (c.drafts, c.draft_tokens, c.accepted_tokens) == (4, 12, 5)
    assert c.accepted_per_position == (3.0, 2.0, 0.0)
    assert dict(c.extra) == {"requests": 2.0, "steps": 9.0}  # None-valued timings left out
    client._config = {"method": "eagle3"}
    client.check_workload(WorkloadSpec(concurrency=1))
    with pytest.raises(UnsupportedError, match="batch size 1"):
        client.check_workload(WorkloadSpec(concurrency=2))
    client._config = {"method": "native"}
    client.check_workload(WorkloadSpec(concurrency=8))
    assert client.extract_token_ids({"choices": [{"token_ids": [1, 2]}]}) == [1, 2]
    assert client.extract_token_ids({"choices": []}) is None


# ---------------------------------------------------------------- streamer


def collect_steps():
    seen: list[tuple[int, list[int], int, int, str | None]] = []

    def on_step(row: int, info: StepInfo, reason: str | None) -> None:
        seen.append((row, info.tokens, info.drafted, info.accepted, reason))

    return seen, on_step


def test_streamer_native_batch_stops_rows_on_eos_and_length() -> None:
    rows = [Request([1], 5, Sampling()), Request([1], 2, Sampling())]
    seen, on_step = collect_steps()
    st = StepStreamer(rows, {9}, on_step)
    st.put(torch.tensor([[1, 1], [1, 1]]))  # the prompt: skipped
    st.put(torch.tensor([4, 5]))
    st.put(torch.tensor([9, 6]))  # row 0 hits EOS, row 1 its max_tokens
    st.put(torch.tensor([0, 0]))  # padding after both finished: nothing
    assert seen == [
        (0, [4], 0, 0, None),
        (1, [5], 0, 0, None),
        (0, [9], 0, 0, "stop"),
        (1, [6], 0, 0, "length"),
    ]


def test_streamer_assisted_puts_are_verify_steps() -> None:
    proposed = iter([3, 3, 2])
    req = Request([1], 6, Sampling())
    seen, on_step = collect_steps()
    st = StepStreamer([req], {9}, on_step, drafted=lambda: next(proposed))
    st.put(torch.tensor([[1]]))
    st.put(torch.tensor([[4, 5, 6]]))  # 2 of 3 drafts accepted + the target's token
    st.put(torch.tensor([[7]]))  # nothing accepted
    st.put(torch.tensor([[8, 9, 3]]))  # EOS inside: kept, the rest dropped
    assert seen == [
        (0, [4, 5, 6], 3, 2, None),
        (0, [7], 3, 0, None),
        (0, [8, 9], 2, 2, "stop"),
    ]
    ignore = Request([1], 3, Sampling(), ignore_eos=True)
    seen, on_step = collect_steps()
    st = StepStreamer([ignore], {9}, on_step)
    st.put(torch.tensor([[1]]))
    st.put(torch.tensor([[9, 9, 9, 9]]))
    assert seen == [(0, [9, 9, 9], 0, 3, "length")]
    cancelled = Request([1], 3, Sampling(), cancelled=threading.Event())
    cancelled.cancelled.set()
    st = StepStreamer([cancelled], {9}, lambda *a: None)
    st.put(torch.tensor([[1]]))
    with pytest.raises(Cancelled):
        st.put(torch.tensor([[2]]))


# ---------------------------------------------------------------- text and requests


def test_detokenizer_deltas_add_up_to_the_text(tokenizer) -> None:
    text = "Speed 快速的 模型 and caches: 12 + 7 = 19."
    ids = tokenizer.encode(text, add_special_tokens=False)
    d = Detokenizer(tokenizer)
    parts = [d.add([i], final=(n == len(ids) - 1)) for n, i in enumerate(ids)]
    assert "".join(parts) == tokenizer.decode(ids, skip_special_tokens=True)
    assert all("\ufffd" not in p for p in parts)


def test_parse_request(tokenizer) -> None:
    body = {
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 8,
        "temperature": 0,
        "top_k": -1,
        "seed": 3,
        "stream": True,
        "stream_options": {"include_usage": True},
        "chat_template_kwargs": {"enable_thinking": False},
    }
    req, stream, usage = parse_request(body, tokenizer, 4096)
    assert stream and usage and req.max_tokens == 8 and req.sampling.greedy
    assert req.sampling.seed == 3 and req.prompt_ids[-1] != req.prompt_ids[0]
    for bad, message in (
        ({"messages": []}, "messages"),
        ({"max_tokens": 5000}, "max model length"),
        ({"temperature": "hot"}, "temperature"),
        ({"chat_template_kwargs": [1]}, "chat_template_kwargs"),
    ):
        with pytest.raises(BadRequest, match=message):
            parse_request({**body, **bad}, tokenizer, 4096)


# ---------------------------------------------------------------- fast-path check


def test_accept_compiled_thresholds() -> None:
    assert accept_compiled(0.05, 0.04) and accept_compiled(0.05, 0.08)
    assert not accept_compiled(0.05, 0.2)
    assert accept_compiled(0.0, 0.005) and not accept_compiled(0.0, 0.05)


def test_compare_verify_paths_tells_a_broken_graph(tiny_path: Path) -> None:
    from transformers import AutoModelForCausalLM

    from specperf.engines.transformers.eagle3.target import TargetRunner

    model = AutoModelForCausalLM.from_pretrained(str(tiny_path), dtype=torch.bfloat16).eval()
    prompt = list(range(10, 40))
    same = TargetRunner(model, aux_layer_ids=(1,), cache="static", max_len=128, compiled=model)
    assert compare_verify_paths(same, prompt, 3)["compiled"] is True

    def shifted(**kw):  # a graph that baked in the wrong positions
        kw = dict(kw)
        kw["position_ids"] = kw["position_ids"] + 7
        return model(**kw)

    broken = TargetRunner(model, aux_layer_ids=(1,), cache="static", max_len=128, compiled=shifted)
    res = compare_verify_paths(broken, prompt, 3)
    assert res["compiled"] is False
    assert res["error_compiled"] > 5 * res["error_eager"]
