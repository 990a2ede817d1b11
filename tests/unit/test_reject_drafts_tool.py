"""tests/tools/reject_drafts, the test-only "accepts fewer tokens" regression behind the MAL
proofs (benchmarks/verdict_proofs.py --condition reject): on the transformers engine's EAGLE3
path it must lower the accepted drafts by about the share asked, keep greedy output identical,
be seeded (two runs, one answer), and do nothing when the variable is unset. Each case runs in a
fresh interpreter, because the tool is a ``sitecustomize`` read at start-up."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "tests" / "tools" / "reject_drafts"

# Decodes the four prompts with the fitted tiny head (K=3, fp32, one thread) and prints the
# tokens and the acceptance counters as JSON.
SCRIPT = r"""
import json, sys, torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from specperf.engines.transformers.eagle3.checkpoint import load_head
from specperf.engines.transformers.eagle3.sampling import Sampling, TokenSampler
from specperf.engines.transformers.eagle3.speculate import Eagle3Speculator
from specperf.engines.transformers.eagle3.target import TargetRunner
from specperf.testkit.eagle3_fit import chat_ids, ensure_fitted_head
from specperf.testkit.models import ensure_tiny_model

torch.set_num_threads(1)
path = ensure_tiny_model()
tok = AutoTokenizer.from_pretrained(str(path))
model = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32).eval()
cfg = model.config
head = load_head(ensure_fitted_head(path), num_target_layers=cfg.num_hidden_layers,
                 target_vocab_size=cfg.vocab_size, target_hidden_size=cfg.hidden_size).float()
runner = TargetRunner(model, aux_layer_ids=head.cfg.aux_layer_ids, cache="dynamic", max_len=512)
spec = Eagle3Speculator(runner, head, 3, timing=False)
tokens, drafts, accepted = [], 0, 0
for text in json.loads(sys.argv[1]):
    out = []
    def on_step(info):
        global drafts, accepted
        out.extend(info.tokens)
        if info.drafted:
            drafts += 1
            accepted += info.accepted
    spec.generate(chat_ids(tok, text), 96, TokenSampler(Sampling(temperature=0.0)), set(), on_step)
    tokens.append(out)
print(json.dumps({"tokens": tokens, "drafts": drafts, "accepted": accepted}))
"""
PROMPTS = [
    "Explain how a cache works in a server.",
    "Write a short poem about rivers and cities.",
    "def add(a, b):",
    "List three uses of a hash map.",
]


def _decode(rate: float | None, seed: int = 0) -> tuple[dict, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPECPERF_TEST_REJECT")}
    if rate is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(TOOL), env.get("PYTHONPATH", "")]).rstrip(
            os.pathsep
        )
        env["SPECPERF_TEST_REJECT_DRAFTS"] = str(rate)
        env["SPECPERF_TEST_REJECT_SEED"] = str(seed)
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, json.dumps(PROMPTS)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1]), out.stderr


def _mal(run: dict) -> float:
    return 1 + run["accepted"] / run["drafts"]


@pytest.fixture(scope="module")
def clean() -> dict:
    return _decode(None)[0]


def test_unset_rate_changes_nothing(clean):
    again, err = _decode(0.0)
    assert "[specperf test]" not in err
    assert again == clean


def test_replaced_drafts_lower_acceptance_keep_output_and_are_seeded(clean):
    q = 0.3
    hit, err = _decode(q, seed=3)
    assert "specperf.engines.transformers.eagle3.speculate: drafts replaced with p=0.3" in err
    assert hit["tokens"] == clean["tokens"]  # greedy stays lossless: only acceptance moves
    assert clean["accepted"] > 0, clean  # the fitted head accepts something to take away
    # each of K=3 chained drafts survives with probability 1-q, so the accepted count falls by
    # about q (most accepted drafts are first-position ones: MAL ~1.5) and at most 1-(1-q)^3;
    # bounds ~3.5 binomial sd wide for the ~100 accepted drafts of 4 prompts x 96 tokens
    drop = 1 - hit["accepted"] / clean["accepted"]
    assert 0.5 * q <= drop <= 1 - (1 - q) ** 3 + 0.15, (drop, clean, hit)
    assert _mal(hit) < _mal(clean)
    assert _decode(q, seed=3)[0] == hit  # seeded: the same run twice
