"""specperf.engines.transformers.eagle3: config and checkpoint format, the head's cached
forward, the training-time test against the inference path, and the acceptance rule (greedy
exact, sampling unbiased)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from specperf.engines.transformers.eagle3.checkpoint import (
    load_head,
    new_head,
    read_state,
    save_head,
)
from specperf.engines.transformers.eagle3.config import Eagle3Config, load_config, parse_config
from specperf.engines.transformers.eagle3.head import Eagle3KVCache
from specperf.engines.transformers.eagle3.sampling import Sampling, TokenSampler
from specperf.errors import ConfigError
from specperf.testkit.eagle3_fit import pick_draft_vocab, ttt_loss

pytestmark = pytest.mark.usefixtures("one_thread")


def small_cfg(**kw) -> Eagle3Config:
    base = dict(
        hidden_size=32,
        intermediate_size=64,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        vocab_size=50,
        draft_vocab_size=20,
        aux_layer_ids=(1, 2, 3),
        target_hidden_size=32,
    )
    base.update(kw)
    return Eagle3Config(**base)


def published(**kw) -> dict:
    raw = small_cfg().to_json()
    raw.update(kw)
    return raw


# ---------------------------------------------------------------- config


def test_config_round_trip_and_defaults() -> None:
    cfg = parse_config(published())
    assert cfg == small_cfg()
    assert cfg.num_aux == 3 and cfg.rope_type == "default"
    raw = published()
    del raw["eagle_config"]
    assert parse_config(raw, num_target_layers=36).aux_layer_ids == (2, 18, 33)
    assert parse_config(raw, num_target_layers=4).aux_layer_ids == (1, 2, 3)  # no repeats


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"architectures": ["LlamaForCausalLM"]}, "architectures"),
        ({"num_hidden_layers": 2}, "num_hidden_layers"),
        ({"hidden_size": None}, "'hidden_size'"),
        ({"rope_scaling": {"rope_type": "yarn", "factor": 4}}, "rope_scaling"),
        ({"draft_vocab_size": 999}, "draft_vocab_size"),
        ({"num_key_value_heads": 3}, "num_key_value_heads"),
        ({"eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, -2]}}, "non-negative"),
        ({"eagle_config": {"eagle_aux_hidden_state_layer_ids": [2, 2, 1]}}, "strictly increasing"),
    ],
)
def test_config_errors_name_the_field(change: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as exc:
        parse_config(published(**change), "head/config.json")
    assert str(exc.value).startswith("head/config.json")


def test_config_without_layer_ids_needs_the_target(tmp_path: Path) -> None:
    raw = published()
    del raw["eagle_config"]
    (tmp_path / "config.json").write_text(json.dumps(raw))
    with pytest.raises(ConfigError, match="eagle_aux_hidden_state_layer_ids"):
        load_config(tmp_path)


# ---------------------------------------------------------------- checkpoint


def test_save_load_round_trip(tmp_path: Path) -> None:
    cfg = small_cfg()
    head = new_head(cfg, torch.arange(5, 25), seed=3)
    save_head(head, tmp_path)
    names = set(read_state(tmp_path))
    assert {
        "fc.weight",
        "midlayer.self_attn.q_proj.weight",
        "lm_head.weight",
        "d2t",
        "t2d",
    } <= names
    assert not any(n.startswith("embed_tokens") for n in names)  # shares the target's
    back = load_head(tmp_path, num_target_layers=4, target_vocab_size=50, target_hidden_size=32)
    for k, v in head.state_dict().items():
        assert torch.equal(v, back.state_dict()[k]), k
    assert back.draft_to_target(torch.tensor([0, 19])).tolist() == [5, 24]
    assert back.t2d.sum() == 20 and bool(back.t2d[5]) and not bool(back.t2d[4])


def test_load_rejects_mismatches(tmp_path: Path) -> None:
    save_head(new_head(small_cfg()), tmp_path)
    with pytest.raises(ConfigError, match="vocab_size 50 differs"):
        load_head(tmp_path, target_vocab_size=51)
    with pytest.raises(ConfigError, match="must be below the target's 3 layers"):
        load_head(tmp_path, num_target_layers=3)
    raw = json.loads((tmp_path / "config.json").read_text())
    raw["intermediate_size"] = 65
    (tmp_path / "config.json").write_text(json.dumps(raw))
    with pytest.raises(ConfigError, match=r"midlayer\.mlp"):
        load_head(tmp_path)


def test_load_refuses_pickle_only(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(published()))
    (tmp_path / "pytorch_model.bin").write_bytes(b"not read")
    with pytest.raises(ConfigError, match="safetensors only"):
        load_head(tmp_path)


def test_tiny_head_from_testmodels_loads() -> None:
    from specperf.testkit.models import ensure_tiny_model, tiny_eagle3_path

    target = ensure_tiny_model()
    tcfg = json.loads((target / "config.json").read_text())
    head = load_head(
        tiny_eagle3_path(target),
        num_target_layers=tcfg["num_hidden_layers"],
        target_vocab_size=tcfg["vocab_size"],
        target_hidden_size=tcfg["hidden_size"],
    )
    assert head.cfg.draft_vocab_size < head.cfg.vocab_size
    assert head.embed_tokens is None


# ---------------------------------------------------------------- head forward


def _head_with_embed(seed: int = 0):
    cfg = small_cfg()
    head = new_head(cfg, torch.arange(20), seed=seed)
    with torch.no_grad():  # larger weights than the init so the comparison is not trivial
        for p in head.parameters():
            if p.dim() >= 2:
                p.mul_(10)
    embed = torch.nn.Embedding(cfg.vocab_size, cfg.hidden_size)
    head.share_embeddings(embed)
    return head


def test_cached_steps_equal_one_pass() -> None:
    torch.manual_seed(0)
    head = _head_with_embed()
    ids = torch.randint(0, 50, (1, 9))
    hidden = torch.randn(1, 9, 32)
    whole_n, whole_p = head.step(ids, hidden, 0, Eagle3KVCache(16))
    cache = Eagle3KVCache(16)
    a_n, a_p = head.step(ids[:, :4], hidden[:, :4], 0, cache)
    b_n, b_p = head.step(ids[:, 4:], hidden[:, 4:], 4, cache)
    assert torch.allclose(torch.cat([a_n, b_n], 1), whole_n, atol=1e-5)
    assert torch.allclose(torch.cat([a_p, b_p], 1), whole_p, atol=1e-5)
    cache.rewind(6)  # a rewind then a rewrite gives the same rows again
    c_n, _ = head.step(ids[:, 6:], hidden[:, 6:], 6, cache)
    assert torch.allclose(c_n, whole_n[:, 6:], atol=1e-5)


def test_training_time_test_equals_inference_chain() -> None:
    """ttt_loss step s must see exactly what chain drafting sees: the step-0 (target-derived)
    entries of positions <= t plus its own entries of steps 1..s at t. Brute force it with the
    inference path (first pass over the prefix, then chained steps) and compare the loss."""
    torch.manual_seed(1)
    head = _head_with_embed(seed=1)
    t, steps = 10, 3
    ids = torch.randint(0, 50, (1, t))
    aux = torch.randn(1, t, 96)
    targets = torch.randint(0, 20, (1, t))
    valid = torch.ones(1, t, dtype=torch.bool)
    got = ttt_loss(head, ids, aux, targets, valid, steps, 0.8)

    fused = head.fuse(aux)
    total, weights = 0.0, 0.0
    for s in range(steps):
        logits, labels = [], []
        for pos in range(t - 1 - s):
            cache = Eagle3KVCache(32)
            nxt = torch.cat([ids[:, 1:], ids[:, :1]], 1)  # token one ahead (last one unused)
            normed, pre = head.step(nxt[:, : pos + 1], fused[:, : pos + 1], 0, cache)
            last_n, last_p = normed[:, -1:], pre[:, -1:]
            for j in range(1, s + 1):
                last_n, last_p = head.step(
                    ids[:, pos + 1 + j : pos + 2 + j], last_p, pos + j, cache
                )
            logits.append(head.logits(last_n)[0, 0])
            labels.append(targets[0, pos + 1 + s])
        loss = F.cross_entropy(torch.stack(logits), torch.stack(labels))
        total += 0.8**s * float(loss.detach())
        weights += 0.8**s
    assert float(got) == pytest.approx(total / weights, rel=1e-4)


def test_pick_draft_vocab_by_frequency() -> None:
    from specperf.testkit.eagle3_fit import Example

    ex = Example(
        ids=torch.zeros(6, dtype=torch.long),
        aux=torch.zeros(6, 4),
        labels=torch.tensor([-1, 7, 7, 3, 7, 3]),
    )
    assert pick_draft_vocab([ex], 4, 50).tolist() == [0, 1, 3, 7]  # 7, 3, then filled by id


# ---------------------------------------------------------------- acceptance rule


def test_greedy_verify_counts_the_matching_prefix() -> None:
    logits = torch.full((4, 6), -5.0)
    for row, best in enumerate([2, 4, 1, 5]):
        logits[row, best] = 5.0
    s = TokenSampler(Sampling())
    assert s.verify(logits, torch.tensor([2, 4, 1])) == (3, 5)  # all accepted, bonus row 3
    assert s.verify(logits, torch.tensor([2, 0, 1])) == (1, 4)  # stop at the first mismatch
    assert s.verify(logits, torch.tensor([3, 4, 1])) == (0, 2)


def test_sampling_verify_keeps_the_target_distribution() -> None:
    """Accept d with p(d), else sample p without d: the first emitted token is p-distributed
    whatever the draft proposes (here always token 1, which p rates at 0.1). Seeded, so the
    figures are fixed; the tolerance still catches the usual bug (resampling from p with d
    kept after a rejection gives token 1 a frequency of 0.19)."""
    logits = torch.log(torch.tensor([[0.5, 0.1, 0.3, 0.1], [0.25, 0.25, 0.25, 0.25]]))
    s = TokenSampler(Sampling(temperature=1.0, seed=7))
    n = 2000
    counts = torch.zeros(4)
    accepted = 0
    for _ in range(n):
        m, bonus = s.verify(logits, torch.tensor([1]))
        counts[1 if m == 1 else bonus] += 1
        accepted += m
    freq = counts / n
    assert torch.allclose(freq, torch.tensor([0.5, 0.1, 0.3, 0.1]), atol=0.04), freq
    assert accepted / n == pytest.approx(0.1, abs=0.025)


def test_sampler_is_reproducible_with_a_seed() -> None:
    logits = torch.randn(5, 30)
    drafts = torch.tensor([1, 2, 3, 4])
    a = [TokenSampler(Sampling(temperature=0.8, top_k=10, seed=3)).verify(logits, drafts)]
    b = [TokenSampler(Sampling(temperature=0.8, top_k=10, seed=3)).verify(logits, drafts)]
    assert a == b


# ---------------------------------------------------------------- fewer launches/syncs


def test_rope_rows_equal_rope_of_the_same_positions() -> None:
    from specperf.engines.transformers.eagle3.checkpoint import new_head

    head = new_head(small_cfg(), torch.arange(20), seed=0)
    for start, t in ((0, 1), (5, 4), (1023, 3), (2500, 2)):  # 2500: the table grows
        cos, sin = head.rope_rows(start, t, torch.device("cpu"), torch.bfloat16)
        want_cos, want_sin = head.rope(torch.arange(start, start + t))
        assert torch.equal(cos, want_cos.to(torch.bfloat16))
        assert torch.equal(sin, want_sin.to(torch.bfloat16))


def test_cache_mask_is_the_causal_mask_over_the_buffer() -> None:
    cache = Eagle3KVCache(12)
    for start, t in ((0, 5), (5, 1), (7, 4)):
        kv_pos = torch.arange(12)
        q_pos = torch.arange(start, start + t)
        want = kv_pos[None, :] <= q_pos[:, None]
        assert torch.equal(cache.mask(start, t, torch.device("cpu")), want)


@pytest.mark.parametrize("k", [1, 3])
def test_verify_emit_is_verify_with_the_emitted_tokens(k: int) -> None:
    gen = torch.Generator().manual_seed(3)
    for _ in range(50):
        logits = torch.randn(k + 1, 7, generator=gen)
        best = logits.argmax(-1)
        drafts = best[:k].clone()
        cut = int(torch.randint(0, k + 1, (1,), generator=gen))
        if cut < k:
            drafts[cut] = (drafts[cut] + 1) % 7  # first wrong draft at ``cut``
        greedy = TokenSampler(Sampling())
        m, emitted = greedy.verify_emit(logits, drafts)
        assert (m, emitted[-1]) == greedy.verify(logits, drafts)
        assert m == cut and emitted == [*drafts[:m].tolist(), int(best[m])]
