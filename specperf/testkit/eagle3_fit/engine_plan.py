"""What an engine-path fit is made from: the plan taken from a suite's EAGLE3 items on the
transformers engine (server arguments, measured first turns, held-out prompts, sampling) and its
recipe digest, which names the cached head and is its identity in fingerprints."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from specperf.testkit.eagle3_fit.config import ENGINE_FIT_VERSION, EngineFitConfig, EnginePlan

_DROP_ARGS = {"--host": 1, "--port": 1, "--draft-model": 1, "--threads": 1}
_DROP_FLAGS = {"--draft-random-weights"}


def engine_fit_plan(
    suite: str, settings: dict[str, str] | None = None, method: str = "eagle3", heldout: int = 4
) -> EnginePlan:
    """The fit plan of a suite's EAGLE3 items (method name ``method``) on the transformers
    engine: the first turns of every measured conversation, in the workload's request plan.

    The head is fitted to exactly these prompts (held-out prompts accept next to nothing), so
    the items must send exactly them on every machine: their suite count, never a count the
    min-duration sizing grows (``specperf.workload.sizing``). A suite whose items may be sized
    (``[workload] size_to_min_duration`` true) is refused with a ``ConfigError``."""
    from specperf import datasets
    from specperf.config import load_suite
    from specperf.engines.base import Devices
    from specperf.engines.transformers.engine import build_command
    from specperf.errors import ConfigError
    from specperf.modelid import model_identity
    from specperf.workload import _messages, plan_requests

    s = load_suite(suite, settings or {})
    items = [it for it in s.items() if it.key.method == method]
    if not items:
        raise ConfigError(f"{suite}: no items of method {method!r}")
    sized = sorted({it.key.dataset for it in items if it.workload.size_to_min_duration})
    if sized:
        raise ConfigError(
            f"{suite}: its {method} items ({', '.join(sized)}) may be sized by measured duration, "
            "and a sized item sends prompts the head was not fitted on (its MAL would depend on "
            "the count picked): set [workload] size_to_min_duration = false, so every run sends "
            "the suite's count, the prompts the head is fitted to"
        )
    spec = items[0].spec
    if spec.kind != "transformers" or spec.method != "eagle3":
        raise ConfigError(
            f"{suite}: {method} is {spec.kind}/{spec.method}, not transformers/eagle3"
        )
    argv = build_command(spec, 0, Devices())[3:]  # less python -m module
    server_args: list[str] = []
    skip = 0
    for a in argv:
        if skip:
            skip -= 1
        elif a in _DROP_ARGS:
            skip = _DROP_ARGS[a]
        elif a not in _DROP_FLAGS:
            server_args.append(a)
    samplings = {it.sampling for it in items}
    if len(samplings) != 1:
        raise ConfigError(f"{suite}: {method} items use several samplings; fit one at a time")
    (sp,) = samplings
    if sp.temperature > 0:
        raise ConfigError(f"{suite}: the engine-path fit distils greedy continuations (temp 0)")
    prompts: list[list[dict[str, str]]] = []
    held: list[list[dict[str, str]]] = []
    seen: set[str] = set()
    for it in items:
        name, path = it.key.dataset, it.dataset.path
        if path and name not in datasets.list_datasets():
            ds = datasets.load_dataset(path, tier=it.tier)
        else:
            ds = datasets.load_dataset(name, tier=it.tier, path=path)
        plan, _order, _rep, unmeasured = plan_requests(
            ds.items, it.workload.num_requests, it.workload.seed
        )
        for conv in plan:  # first turns only: later turns carry the engine's own answers
            if f"{name}:{conv.item.id}" not in seen:
                seen.add(f"{name}:{conv.item.id}")
                prompts.append(
                    [*_messages(conv.item), {"role": "user", "content": conv.item.turns[0]}]
                )
        warm = it.workload.warmup_requests
        warm = max(1, it.workload.concurrency) if warm is None else warm
        for w in unmeasured[warm : warm + heldout]:  # past the warm-up prompts
            if len(held) < heldout:
                held.append([*_messages(w), {"role": "user", "content": w.turns[0]}])
    return EnginePlan(
        server_args=server_args,
        target=spec.model,
        target_identity=model_identity(spec.model, items[0].model_revision),
        tokenizer=spec.tokenizer or spec.model,
        prompts=prompts,
        heldout=held,
        chat_kwargs={"enable_thinking": sp.thinking},
        max_tokens=sp.max_tokens,
        ignore_eos=sp.ignore_eos,
        k=int(spec.num_speculative_tokens or 0),
    )


def _prompt_ids(plan: EnginePlan, tokenizer: Any) -> tuple[list[list[int]], list[list[int]]]:
    from specperf.engines.transformers.protocol import encode_chat

    def enc(msgs: list[dict[str, str]]) -> list[int]:
        return encode_chat(tokenizer, msgs, dict(plan.chat_kwargs))

    return [enc(m) for m in plan.prompts], [enc(m) for m in plan.heldout]


def engine_fit_digest(
    plan: EnginePlan, head_shape: dict[str, Any], cfg: EngineFitConfig, tokenizer: Any
) -> str:
    """Recipe digest of an engine-path fit: target identity (never a path), the server
    arguments (paths masked), the head's shape, the prompts' token ids, length and K, the fit's
    knobs and version. It names the cache directory and is the head's identity in fingerprints
    (``fit:<name>@<digest>``): what the fit is made FROM, not its weights' bytes."""
    import hashlib

    from specperf.modelid import portable

    train, held = _prompt_ids(plan, tokenizer)
    blob = {
        "version": ENGINE_FIT_VERSION,
        "target": plan.target_identity,
        "server_args": [portable(a) for a in plan.server_args],
        "head_shape": head_shape,
        "prompts": hashlib.sha256(json.dumps([train, held]).encode()).hexdigest(),
        "max_tokens": plan.max_tokens,
        "ignore_eos": plan.ignore_eos,
        "k": plan.k,
        "fit": asdict(cfg),
    }
    return hashlib.sha256(json.dumps(blob, sort_keys=True).encode()).hexdigest()[:12]
