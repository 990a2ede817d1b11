"""EAGLE3 head configuration, read from the published checkpoint's ``config.json``.

Why a dataclass of our own: the published heads (yuhuili/EAGLE3-*, AngelSlim, the speculators
format vLLM tests use) are Llama-shaped configs with a few EAGLE3 extras spread over the top level
and ``eagle_config``. Reading them in one place, with one-line errors that name the file and the
field, keeps the head model and the fitter free of config archaeology.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from specperf.errors import ConfigError

ARCHITECTURE = "LlamaForCausalLMEagle3"
ROPE_TYPES = ("default", "linear", "llama3")


@dataclass(frozen=True)
class Eagle3Config:
    """Shape and options of one EAGLE3 head (one decoder layer over fused target states)."""

    hidden_size: int
    intermediate_size: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    vocab_size: int  # target vocabulary (embedding rows, d2t targets)
    draft_vocab_size: int  # rows of the head's own lm_head
    aux_layer_ids: tuple[int, ...]  # target layers whose *input* hidden states are fused
    target_hidden_size: int
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    rope_scaling: dict[str, Any] | None = None
    max_position_embeddings: int = 4096
    attention_bias: bool = False
    mlp_bias: bool = False
    norm_before_residual: bool = False
    hidden_act: str = "silu"
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def num_aux(self) -> int:
        return len(self.aux_layer_ids)

    @property
    def rope_type(self) -> str:
        if not self.rope_scaling:
            return "default"
        return str(self.rope_scaling.get("rope_type") or self.rope_scaling.get("type") or "default")

    def to_json(self) -> dict[str, Any]:
        """The published config.json layout (what vLLM/SGLang read)."""
        out: dict[str, Any] = {
            "architectures": [ARCHITECTURE],
            "model_type": "llama",
            "hidden_size": self.hidden_size,
            "intermediate_size": self.intermediate_size,
            "num_hidden_layers": 1,
            "num_attention_heads": self.num_attention_heads,
            "num_key_value_heads": self.num_key_value_heads,
            "head_dim": self.head_dim,
            "hidden_act": self.hidden_act,
            "max_position_embeddings": self.max_position_embeddings,
            "rms_norm_eps": self.rms_norm_eps,
            "rope_theta": self.rope_theta,
            "rope_scaling": self.rope_scaling,
            "attention_bias": self.attention_bias,
            "mlp_bias": self.mlp_bias,
            "tie_word_embeddings": False,
            "vocab_size": self.vocab_size,
            "draft_vocab_size": self.draft_vocab_size,
            "target_hidden_size": self.target_hidden_size,
            "norm_before_residual": self.norm_before_residual,
            "eagle_config": {
                "eagle_aux_hidden_state_layer_ids": list(self.aux_layer_ids),
                "use_aux_hidden_state": True,
            },
        }
        for k, v in self.extra.items():
            out.setdefault(k, v)
        return out

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def default_aux_layer_ids(num_target_layers: int) -> tuple[int, ...]:
    """EAGLE3's default choice (low, middle, high), as vLLM and SGLang pick it; for targets so
    shallow that it repeats a layer (fewer than 8 layers), three distinct ones instead."""
    n = num_target_layers
    ids = (2, n // 2, n - 3)
    if len(set(ids)) < 3 or min(ids) < 0:
        ids = (1, n // 2, n - 1)
    if len(set(ids)) < 3:
        raise ConfigError(f"a target of {n} layers is too shallow for three aux layers")
    return ids


def _req(raw: dict[str, Any], key: str, where: str) -> Any:
    if key not in raw or raw[key] is None:
        raise ConfigError(f"{where}: missing field {key!r}")
    return raw[key]


def parse_config(
    raw: dict[str, Any], where: str = "config.json", num_target_layers: int | None = None
) -> Eagle3Config:
    """Validate a published EAGLE3 config dict; ``where`` names the file in errors."""
    archs = raw.get("architectures") or []
    if archs and not any("Eagle3" in a or "eagle3" in a.lower() for a in archs):
        raise ConfigError(
            f"{where}: field 'architectures' is {archs}, not an EAGLE3 head ({ARCHITECTURE})"
        )
    if int(raw.get("num_hidden_layers", 1)) != 1:
        raise ConfigError(
            f"{where}: field 'num_hidden_layers' is {raw['num_hidden_layers']}; "
            "only one-layer EAGLE3 heads are supported"
        )
    hidden = int(_req(raw, "hidden_size", where))
    heads = int(_req(raw, "num_attention_heads", where))
    eagle = raw.get("eagle_config") or {}
    if eagle.get("use_aux_hidden_state") is False:
        raise ConfigError(f"{where}: eagle_config.use_aux_hidden_state is false (not EAGLE3)")
    layer_ids = eagle.get("eagle_aux_hidden_state_layer_ids") or raw.get(
        "eagle_aux_hidden_state_layer_ids"
    )
    if not layer_ids:
        if num_target_layers is None:
            raise ConfigError(
                f"{where}: field 'eagle_config.eagle_aux_hidden_state_layer_ids' is missing "
                "and the target's layer count is unknown"
            )
        layer_ids = list(default_aux_layer_ids(num_target_layers))
    if not all(isinstance(i, int) and i >= 0 for i in layer_ids):
        raise ConfigError(
            f"{where}: field 'eagle_aux_hidden_state_layer_ids' must be non-negative integers, "
            f"got {layer_ids}"
        )
    if any(b <= a for a, b in itertools.pairwise(layer_ids)):
        # vLLM and SGLang collect the states once per layer, in layer order, and fc's input
        # columns follow that order: repeated or unsorted ids cannot mean the same there
        raise ConfigError(
            f"{where}: field 'eagle_aux_hidden_state_layer_ids' must be strictly increasing "
            f"(engines concatenate the states in layer order), got {layer_ids}"
        )
    rope_scaling = raw.get("rope_scaling")
    vocab = int(_req(raw, "vocab_size", where))
    cfg = Eagle3Config(
        hidden_size=hidden,
        intermediate_size=int(_req(raw, "intermediate_size", where)),
        num_attention_heads=heads,
        num_key_value_heads=int(raw.get("num_key_value_heads") or heads),
        head_dim=int(raw.get("head_dim") or hidden // heads),
        vocab_size=vocab,
        draft_vocab_size=int(raw.get("draft_vocab_size") or vocab),
        aux_layer_ids=tuple(int(i) for i in layer_ids),
        target_hidden_size=int(raw.get("target_hidden_size") or hidden),
        rms_norm_eps=float(raw.get("rms_norm_eps", 1e-6)),
        rope_theta=float(raw.get("rope_theta", 10000.0)),
        rope_scaling=dict(rope_scaling) if rope_scaling else None,
        max_position_embeddings=int(raw.get("max_position_embeddings", 4096)),
        attention_bias=bool(raw.get("attention_bias", False)),
        mlp_bias=bool(raw.get("mlp_bias", False)),
        norm_before_residual=bool(raw.get("norm_before_residual", False)),
        hidden_act=str(raw.get("hidden_act", "silu")),
    )
    if cfg.rope_type not in ROPE_TYPES:
        raise ConfigError(
            f"{where}: field 'rope_scaling' has type {cfg.rope_type!r}; supported: "
            f"{', '.join(ROPE_TYPES)}"
        )
    if cfg.hidden_act != "silu":
        raise ConfigError(f"{where}: field 'hidden_act' is {cfg.hidden_act!r}; only 'silu'")
    if cfg.num_attention_heads % cfg.num_key_value_heads:
        raise ConfigError(
            f"{where}: num_attention_heads ({heads}) is not a multiple of num_key_value_heads "
            f"({cfg.num_key_value_heads})"
        )
    if cfg.draft_vocab_size > cfg.vocab_size:
        raise ConfigError(
            f"{where}: draft_vocab_size ({cfg.draft_vocab_size}) exceeds vocab_size ({vocab})"
        )
    return cfg


def load_config(path: str | Path, num_target_layers: int | None = None) -> Eagle3Config:
    """Read ``<dir>/config.json`` (or the file itself)."""
    p = Path(path)
    file = p / "config.json" if p.is_dir() else p
    try:
        raw = json.loads(file.read_text())
    except FileNotFoundError:
        raise ConfigError(f"{file}: EAGLE3 head config not found") from None
    except ValueError as exc:
        raise ConfigError(f"{file}: not valid JSON ({exc})") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{file}: expected a JSON object")
    return parse_config(raw, str(file), num_target_layers)
