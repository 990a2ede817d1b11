"""Load and save EAGLE3 heads in the published checkpoint format (safetensors only, no pickle).

The format is what the EAGLE repository publishes and vLLM/SGLang load: ``config.json``
(``LlamaForCausalLMEagle3``, ``draft_vocab_size``,
``eagle_config.eagle_aux_hidden_state_layer_ids``) and weights ``fc.weight``, ``midlayer.*``,
``norm.weight``, ``lm_head.weight``, ``d2t`` (draft→target offsets, int64) and ``t2d`` (bool
mask over the target vocabulary), optionally ``embed_tokens.weight`` (absent: the head shares
the target's embeddings).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from specperf.engines.transformers.eagle3.config import Eagle3Config, load_config
from specperf.engines.transformers.eagle3.head import Eagle3Head
from specperf.errors import ConfigError

WEIGHTS = "model.safetensors"
INDEX = "model.safetensors.index.json"
# prefixes other exporters put in front of the canonical names
_RENAMES = (("model.layers.0.", "midlayer."), ("layers.0.", "midlayer."), ("model.", ""))


def _weight_files(root: Path) -> list[Path]:
    if (root / WEIGHTS).exists():
        return [root / WEIGHTS]
    if (root / INDEX).exists():
        try:
            index = json.loads((root / INDEX).read_text())
        except ValueError as exc:
            raise ConfigError(f"{root / INDEX}: not valid JSON ({exc})") from None
        return [root / f for f in sorted(set(index.get("weight_map", {}).values()))]
    if any(root.glob("*.bin")) or any(root.glob("*.pt")):
        raise ConfigError(
            f"{root}: only pickle weights (*.bin/*.pt) found; specperf loads safetensors only "
            "(convert the head to model.safetensors)"
        )
    raise ConfigError(f"{root}: no {WEIGHTS} in the EAGLE3 head directory")


def _canonical(name: str) -> str:
    for old, new in _RENAMES:
        if name.startswith(old):
            return new + name[len(old) :]
    return name


def read_state(root: str | Path) -> dict[str, torch.Tensor]:
    """All tensors of a head checkpoint under their canonical names."""
    from safetensors.torch import load_file

    state: dict[str, torch.Tensor] = {}
    for f in _weight_files(Path(root)):
        for k, v in load_file(str(f)).items():
            state[_canonical(k)] = v
    return state


def load_head(
    path: str | Path,
    *,
    num_target_layers: int | None = None,
    target_vocab_size: int | None = None,
    target_hidden_size: int | None = None,
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.float32,
) -> Eagle3Head:
    """Build an :class:`Eagle3Head` from a checkpoint directory, checked against the target."""
    root = Path(path)
    cfg = load_config(root, num_target_layers)
    where = str(root / "config.json")
    if target_vocab_size is not None and cfg.vocab_size != target_vocab_size:
        raise ConfigError(
            f"{where}: vocab_size {cfg.vocab_size} differs from the target's {target_vocab_size}"
        )
    if target_hidden_size is not None and cfg.target_hidden_size != target_hidden_size:
        raise ConfigError(
            f"{where}: target_hidden_size {cfg.target_hidden_size} differs from the target's "
            f"hidden size {target_hidden_size}"
        )
    if num_target_layers is not None and max(cfg.aux_layer_ids) >= num_target_layers:
        raise ConfigError(
            f"{where}: eagle_aux_hidden_state_layer_ids {list(cfg.aux_layer_ids)} must be below "
            f"the target's {num_target_layers} layers (id = input of that layer)"
        )
    state = read_state(root)
    head = Eagle3Head(cfg, own_embeddings="embed_tokens.weight" in state)
    if "d2t" not in state:
        if cfg.draft_vocab_size != cfg.vocab_size:
            raise ConfigError(f"{root}: draft_vocab_size < vocab_size but no d2t tensor")
        state["d2t"] = torch.zeros(cfg.draft_vocab_size, dtype=torch.long)
    if "t2d" not in state:
        t2d = torch.zeros(cfg.vocab_size, dtype=torch.bool)
        t2d[torch.arange(cfg.draft_vocab_size) + state["d2t"].long()] = True
        state["t2d"] = t2d
    state["d2t"] = state["d2t"].long()
    state["t2d"] = state["t2d"].bool()
    expected = {k: tuple(v.shape) for k, v in head.state_dict().items()}
    missing = sorted(set(expected) - set(state))
    if missing:
        raise ConfigError(f"{root}: head weights missing {', '.join(missing)}")
    for k, shape in expected.items():
        if tuple(state[k].shape) != shape:
            raise ConfigError(
                f"{root}: weight {k} has shape {tuple(state[k].shape)}, config implies {shape}"
            )
    ignored = sorted(set(state) - set(expected))
    head.load_state_dict({k: state[k] for k in expected})
    head.ignored_weights = ignored  # type: ignore[assignment]
    targets = torch.arange(cfg.draft_vocab_size) + head.d2t
    if int(targets.min()) < 0 or int(targets.max()) >= cfg.vocab_size:
        raise ConfigError(f"{root}: d2t maps draft ids outside the target vocabulary")
    return head.to(device=device, dtype=dtype).eval()


def save_head(head: Eagle3Head, path: str | Path, *, dtype: torch.dtype | None = None) -> Path:
    """Write ``config.json`` + ``model.safetensors`` in the published layout."""
    from safetensors.torch import save_file

    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    state: dict[str, torch.Tensor] = {}
    for k, v in head.state_dict().items():
        t = v.detach().cpu()
        if dtype is not None and t.is_floating_point():
            t = t.to(dtype)
        state[k] = t.contiguous()
    save_file(state, str(out / WEIGHTS), metadata={"format": "pt"})
    cfg_json: dict[str, Any] = head.cfg.to_json()
    if dtype is not None:
        cfg_json["torch_dtype"] = str(dtype).removeprefix("torch.")
    (out / "config.json").write_text(json.dumps(cfg_json, indent=2, sort_keys=True) + "\n")
    return out


def new_head(
    cfg: Eagle3Config, draft_vocab: torch.Tensor | None = None, seed: int = 0
) -> Eagle3Head:
    """A randomly initialised head; ``draft_vocab`` (ascending target ids) sets d2t/t2d."""
    gen = torch.Generator().manual_seed(seed)
    head = Eagle3Head(cfg)
    with torch.no_grad():
        for name, p in head.named_parameters():
            if name.endswith("norm.weight"):
                p.fill_(1.0)
            elif p.dim() >= 2:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.02)
            else:
                p.zero_()
        if draft_vocab is not None:
            ids = torch.as_tensor(draft_vocab, dtype=torch.long)
            if ids.numel() != cfg.draft_vocab_size:
                raise ValueError("draft_vocab length must equal draft_vocab_size")
            head.d2t.copy_(ids - torch.arange(cfg.draft_vocab_size))
            head.t2d.zero_()
            head.t2d[ids] = True
    return head
