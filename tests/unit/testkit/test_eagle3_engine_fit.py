"""The engine-path EAGLE3 fit: the GPU suite's head is distilled on the served
path's own greedy tokens and aux rows. Checked here on CPU: the loss the GPU uses equals
F.cross_entropy, collected aux rows sit at the positions they describe (also when drafts are
accepted), the plan is the suite's measured prompts, the recipe digest names what the head is
made from (not where it lies), and gpu_run's random-head swap and start annotation."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from specperf.engines.transformers.eagle3.checkpoint import new_head, read_state, save_head
from specperf.engines.transformers.eagle3.config import Eagle3Config
from specperf.testkit import eagle3_fit as fit

ROOT = Path(__file__).resolve().parents[3]
SUITE = str(ROOT / "specperf" / "suites" / "h200-transformers.toml")
K = 3

pytestmark = pytest.mark.usefixtures("one_thread")


# ---------------------------------------------------------------- the loss


def test_manual_cross_entropy_equals_torch_with_ignored_labels() -> None:
    torch.manual_seed(0)
    logits = torch.randn(7, 11, requires_grad=True)
    labels = torch.tensor([3, -100, 0, 10, -100, 5, 5])
    want = F.cross_entropy(logits, labels, ignore_index=-100)
    (g_want,) = torch.autograd.grad(want, logits)
    got = fit.cross_entropy(logits, labels, manual=True)
    (g_got,) = torch.autograd.grad(got, logits)
    assert float(got.detach()) == pytest.approx(float(want.detach()), rel=1e-6)
    assert torch.allclose(g_got, g_want, atol=1e-7)
    # on CPU the default is torch's own (the tiny fit's recipe, bit for bit)
    assert float(fit.cross_entropy(logits, labels).detach()) == float(want.detach())


def _tiny_head_and_examples(n: int) -> tuple[Any, list[fit.Example]]:
    """A 32-wide head over a 50-token vocabulary and ``n`` random 24-token examples."""
    cfg = Eagle3Config(
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
    torch.manual_seed(0)
    head = new_head(cfg, torch.arange(20), seed=0)
    head.share_embeddings(torch.nn.Embedding(50, 32))
    examples = []
    for _ in range(n):
        ids = torch.randint(0, 20, (24,))
        labels = torch.cat([torch.full((4,), -1), ids[5:], torch.randint(0, 20, (1,))])
        examples.append(fit.Example(ids=ids, aux=torch.randn(24, 96), labels=labels))
    return head, examples


def test_full_batch_training_memorises_and_stops_early() -> None:
    head, examples = _tiny_head_and_examples(3)
    ecfg = fit.EngineFitConfig(steps=300, lr=1e-2, warmup=5, stop_loss=0.05)
    stats = fit.train_full_batch(head, examples, ecfg, ecfg.lr)
    assert stats["final_loss"] <= 0.05 < stats["first_loss"]
    assert stats["steps"] < 300  # stopped at stop_loss


# ---------------------------------------------------------------- collection on the served path


@pytest.fixture(scope="module")
def tiny() -> Any:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from specperf.engines.transformers.eagle3.checkpoint import load_head
    from specperf.testkit.models import ensure_tiny_model, tiny_eagle3_path

    path = ensure_tiny_model()
    tok = AutoTokenizer.from_pretrained(str(path))
    model = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32).eval()
    head = load_head(tiny_eagle3_path(path), num_target_layers=model.config.num_hidden_layers)
    return model, tok, head


class Oracle:
    """Drafts the reference continuation, wrong at position ``wrong``: every step accepts
    exactly ``wrong`` drafts, so aux rows 0..wrong of each block are used."""

    def __init__(self, reference: list[int], wrong: int) -> None:
        self.reference, self.wrong = reference, wrong

    def patch(self, spec: Any) -> None:
        def draft(cache: Any, tokens: torch.Tensor, fused: torch.Tensor) -> torch.Tensor:
            pos = spec.target.length + 1
            out = [self.reference[i] if i < len(self.reference) else 0 for i in range(pos, pos + K)]
            out[self.wrong] = (out[self.wrong] + 1) % 2048
            return torch.tensor([out])

        spec._draft = draft


@pytest.mark.parametrize("wrong", [None, 0, 2])
def test_collected_aux_rows_are_the_positions_they_describe(tiny: Any, wrong: int | None) -> None:
    """Each example's aux row t equals the fused state a single teacher-forced forward over the
    whole sequence gives at t, and its label is token t+1 (from the last prompt token on)."""
    from specperf.engines.transformers.eagle3.speculate import Eagle3Speculator
    from specperf.engines.transformers.eagle3.target import TargetRunner

    model, tok, head = tiny
    runner = TargetRunner(model, aux_layer_ids=head.cfg.aux_layer_ids, cache="dynamic")
    spec = Eagle3Speculator(runner, head, K, timing=False)
    prompts = [fit.chat_ids(tok, "Explain how a cache works."), fit.chat_ids(tok, "def f(x):")]
    n_new = 21
    if wrong is not None:  # accept `wrong` drafts per step from the native continuation
        want = model.generate(
            torch.tensor([prompts[0]]), max_new_tokens=n_new, do_sample=False, pad_token_id=0
        )[0].tolist()
        Oracle(want, wrong).patch(spec)
        prompts = prompts[:1]
    backend = SimpleNamespace(runner=runner, spec=spec, device=torch.device("cpu"))
    examples, conts = fit.collect_engine_path(backend, prompts, n_new, set())
    assert "forward" not in vars(runner)  # the served method is back
    for p, ex, cont in zip(prompts, examples, conts, strict=True):
        seq = p + cont
        assert len(cont) == n_new
        assert ex.ids.tolist() == seq[:-1]
        assert ex.labels[: len(p) - 1].tolist() == [-1] * (len(p) - 1)
        assert ex.labels[len(p) - 1 :].tolist() == seq[len(p) :]
        ref = TargetRunner(model, aux_layer_ids=head.cfg.aux_layer_ids, cache="dynamic")
        ref.start(len(seq))
        _logits, aux = ref.forward(torch.tensor([seq[:-1]]))
        assert ex.aux.shape == aux.shape
        assert torch.allclose(ex.aux, aux.float(), atol=1e-4, rtol=1e-4)


# ---------------------------------------------------------------- plan and digest


@pytest.fixture(scope="module")
def shapes(gpu_run: ModuleType, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    a, b = tmp_path_factory.mktemp("models-a"), tmp_path_factory.mktemp("models-b")
    gpu_run.models.build_models(a, "tiny")
    gpu_run.models.build_models(b, "tiny")
    return a, b


def _plan(models: Path) -> fit.EnginePlan:
    return fit.engine_fit_plan(SUITE, {"models_dir": str(models), "device": "cpu"})


def test_plan_is_the_suites_measured_first_turns(shapes: tuple[Path, Path]) -> None:
    from specperf.config import load_suite
    from specperf.datasets import load_dataset
    from specperf.workload import plan_requests

    plan = _plan(shapes[0])
    (item,) = [it for it in load_suite(SUITE).items() if it.key.method == "eagle3"]
    conv, _o, _r, unmeasured = plan_requests(
        load_dataset(item.key.dataset, tier=item.tier).items, item.workload.num_requests, 0
    )
    assert [m[-1]["content"] for m in plan.prompts] == [c.item.turns[0] for c in conv]
    assert len(plan.prompts) == item.workload.num_requests == 12
    # held out: past the warm-up prompt, never a measured one
    assert [m[-1]["content"] for m in plan.heldout] == [w.turns[0] for w in unmeasured[1:5]]
    assert plan.max_tokens == 128 and plan.ignore_eos and plan.k == 3
    assert plan.chat_kwargs == {"enable_thinking": False}
    for flag in ("--port", "--host", "--draft-model", "--draft-random-weights", "--threads"):
        assert flag not in plan.server_args
    assert "--random-weights" in plan.server_args
    assert plan.target_identity and plan.target_identity.startswith("content:")


def test_digest_names_what_the_head_is_made_from_not_where(shapes: tuple[Path, Path]) -> None:
    from transformers import AutoTokenizer

    a, b = shapes
    plan_a, plan_b = _plan(a), _plan(b)
    tok = AutoTokenizer.from_pretrained(plan_a.tokenizer)
    shape = json.loads((a / "qwen3-8b-eagle3-shape" / "config.json").read_text())
    cfg = fit.EngineFitConfig()
    base = fit.engine_fit_digest(plan_a, shape, cfg, tok)
    assert fit.engine_fit_digest(plan_b, shape, cfg, tok) == base  # another folder, same files
    assert fit.engine_fit_digest(plan_a, shape, fit.EngineFitConfig(lr=1e-3), tok) != base
    fewer = fit.EnginePlan(**{**vars(plan_a), "prompts": plan_a.prompts[:-1]})
    assert fit.engine_fit_digest(fewer, shape, cfg, tok) != base
    other = fit.EnginePlan(**{**vars(plan_a), "target_identity": "content:0000"})
    assert fit.engine_fit_digest(other, shape, cfg, tok) != base
    wider = {**shape, "intermediate_size": shape["intermediate_size"] * 2}
    assert fit.engine_fit_digest(plan_a, wider, cfg, tok) != base
    info = fit.ensure_engine_fitted_head(
        plan_a, a / "qwen3-8b-eagle3-shape", a, "h", cfg, digest_only=True
    )
    assert info["identity"] == f"fit:h@{base}" and not info["cached"]
    assert info["path"] == str(a / f"h-{base}")


# ---------------------------------------------------------------- gpu_run


def test_random_head_swap_keeps_shape_and_draft_vocab(gpu_run: ModuleType, tmp_path: Path) -> None:
    cfg = Eagle3Config(
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
    fitted = save_head(new_head(cfg, torch.arange(30, 50), seed=3), tmp_path / "fitted")
    out = gpu_run.head.write_random_head(tmp_path, fitted, tmp_path / "random", seed=7)
    a, b = read_state(fitted), read_state(out)
    assert set(a) == set(b)
    assert torch.equal(a["d2t"], b["d2t"]) and torch.equal(a["t2d"], b["t2d"])
    assert all(a[k].shape == b[k].shape for k in a)
    assert not torch.equal(a["fc.weight"].float(), b["fc.weight"].float())
    assert json.loads((out / "config.json").read_text())["draft_vocab_size"] == 20


def test_annotate_starts_marks_only_this_runs_starts(gpu_run: ModuleType, tmp_path: Path) -> None:
    old = {"value": 1.0, "host": "h", "date": "2026-12-01T10:00:00Z"}
    other = {"value": 2.0, "host": "elsewhere", "date": "2026-12-01T12:00:00Z"}
    new = {"value": 3.0, "host": "h", "date": "2026-12-01T12:00:01Z"}
    # the product writes boot_id itself now: a start that has it keeps it
    own = {"value": 4.0, "host": "h", "date": "2026-12-01T12:00:02Z", "boot_id": "own"}
    starts = [old, other, new, own]
    data = {"schema": 1, "entries": {"k": {"metrics": {"m": {"starts": starts}}}}}
    path = tmp_path / "b.json"
    path.write_text(json.dumps(data))
    host = {"hostname": "h", "boot_id": "boot", "gpus": [{"uuid": "GPU-1"}]}
    assert gpu_run.passes.annotate_starts(path, "2026-12-01T12:00:00Z", host) == 2
    starts = json.loads(path.read_text())["entries"]["k"]["metrics"]["m"]["starts"]
    assert "gpu_uuid" not in starts[0] and "gpu_uuid" not in starts[1]
    assert starts[2]["gpu_uuid"] == "GPU-1" and starts[2]["boot_id"] == "boot"
    assert starts[3]["gpu_uuid"] == "GPU-1" and starts[3]["boot_id"] == "own"
    assert gpu_run.passes.annotate_starts(path, "2026-12-01T12:00:00Z", host) == 0  # idempotent


def test_data_digests_tell_tokens_aux_and_target_apart() -> None:
    target = torch.nn.Module()
    target.embed = torch.nn.Embedding(10, 4)
    target.get_input_embeddings = lambda: target.embed  # type: ignore[method-assign]
    ex = [fit.Example(ids=torch.arange(5), aux=torch.ones(5, 12), labels=torch.arange(5))]
    base = fit.data_digests(target, ex, [[1, 2, 3]])
    assert fit.data_digests(target, ex, [[1, 2, 3]]) == base
    assert fit.data_digests(target, ex, [[1, 2, 4]])["continuations"] != base["continuations"]
    ex2 = [fit.Example(ids=ex[0].ids, aux=ex[0].aux + 1e-6, labels=ex[0].labels)]
    moved = fit.data_digests(target, ex2, [[1, 2, 3]])
    assert moved["aux"] != base["aux"] and moved["continuations"] == base["continuations"]
    with torch.no_grad():
        target.embed.weight[0, 0] += 1
    assert fit.data_digests(target, ex, [[1, 2, 3]])["target_sample"] != base["target_sample"]


def test_a_cpu_fit_that_hits_its_time_cap_is_refused_not_stored_early() -> None:
    """The head's identity is its recipe digest: a fit cut short by the wall clock (a starved
    machine) would store other bits under the same digest, so it must raise instead."""
    from specperf.errors import SpecperfError

    head, examples = _tiny_head_and_examples(1)
    with pytest.raises(SpecperfError, match="safety cap"):
        fit.train(head, examples, fit.FitConfig(epochs=3, time_budget_s=-1.0))
