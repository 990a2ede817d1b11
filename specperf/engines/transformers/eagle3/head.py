"""The EAGLE3 draft head as a torch module, numerically the layer vLLM and SGLang run.

Structure (``LlamaForCausalLMEagle3``; weight names as in the published checkpoints):
``fc`` fuses the target's hidden states of three layers (3·H → H); one decoder layer
(``midlayer``) reads ``cat(input_layernorm(embed(token)), hidden_norm(hidden))`` (2·H wide
q/k/v), then the usual residual + MLP; ``norm`` gives the state for ``lm_head`` over the reduced
draft vocabulary, and the pre-norm sum is the hidden state fed to the next draft step. Draft ids
map to target ids by ``target = draft + d2t[draft]``.

Our own small attention (SDPA + a per-request KV cache) instead of transformers' LlamaAttention:
that class' signature moved between transformers 5.17 and 5.24, and the head must load anywhere.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel

from specperf.engines.transformers.eagle3.config import Eagle3Config

# no cuDNN: it builds an execution plan per new shape, too slow for one-token draft steps
SDPA_BACKENDS = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]


class RMSNorm(nn.Module):
    """Llama RMSNorm (fp32 statistics, weight applied in the input dtype)."""

    def __init__(self, size: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.to(dtype)


def rope_inv_freq(cfg: Eagle3Config) -> tuple[torch.Tensor, float]:
    """Inverse frequencies and position scale for the head's RoPE (default, linear, llama3)."""
    hd = cfg.head_dim
    inv = 1.0 / (cfg.rope_theta ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
    pos_scale = 1.0
    rs = cfg.rope_scaling or {}
    if cfg.rope_type == "linear":
        pos_scale = 1.0 / float(rs["factor"])
    elif cfg.rope_type == "llama3":
        factor = float(rs["factor"])
        low, high = float(rs.get("low_freq_factor", 1.0)), float(rs.get("high_freq_factor", 4.0))
        old_ctx = float(rs.get("original_max_position_embeddings", 8192))
        low_wl, high_wl = old_ctx / low, old_ctx / high
        wl = 2 * math.pi / inv
        scaled = torch.where(wl > low_wl, inv / factor, inv)
        smooth = (old_ctx / wl - low) / (high - low)
        mid = (1 - smooth) * scaled / factor + smooth * scaled
        is_mid = (wl >= high_wl) & (wl <= low_wl)
        inv = torch.where(is_mid, mid, scaled)
    return inv.float(), pos_scale


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class Eagle3KVCache:
    """K/V of the head's one layer for one sequence; ``length`` positions are valid.
    Rewinding only moves ``length`` (later entries are overwritten by the next write).

    Attention always reads the whole preallocated buffer under a mask: the shapes then never
    change from step to step, so attention kernels that plan per shape (cuDNN's SDPA) plan once
    instead of every draft step. Zero-filled, so masked rows never carry NaN garbage."""

    def __init__(self, max_len: int) -> None:
        self.max_len = max_len
        self.k: torch.Tensor | None = None
        self.v: torch.Tensor | None = None
        self.kv_pos: torch.Tensor | None = None  # arange(max_len) on the cache's device
        self.length = 0

    def write(self, start: int, k: torch.Tensor, v: torch.Tensor) -> None:
        n = k.shape[-2]
        if start + n > self.max_len:
            raise ValueError(f"EAGLE3 head cache overflow: {start + n} > {self.max_len}")
        if self.k is None:
            shape = (k.shape[0], k.shape[1], self.max_len, k.shape[3])
            self.k = k.new_zeros(shape)
            self.v = v.new_zeros(shape)
        assert self.v is not None
        self.k[:, :, start : start + n] = k
        self.v[:, :, start : start + n] = v
        self.length = start + n

    def view(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The whole buffer (positions >= ``length`` must be masked by the caller)."""
        assert self.k is not None and self.v is not None
        return self.k, self.v

    def mask(self, start: int, t: int, device: torch.device) -> torch.Tensor:
        """(t, max_len) attention mask for queries at ``start..start+t-1``: causal over the block,
        everything before ``start`` visible, the unwritten tail masked. One comparison kernel
        per call (the position vector is made once per cache; its rows are the query positions)
        — the draft phase is launch-bound, so every kernel per step counts."""
        if self.kv_pos is None or self.kv_pos.device != device:
            self.kv_pos = torch.arange(self.max_len, device=device)
        return self.kv_pos[None, :] <= self.kv_pos[start : start + t, None]

    def rewind(self, length: int) -> None:
        self.length = min(self.length, length)


class Eagle3Attention(nn.Module):
    def __init__(self, cfg: Eagle3Config) -> None:
        super().__init__()
        h2, hd = 2 * cfg.hidden_size, cfg.head_dim
        self.num_heads, self.num_kv, self.head_dim = (
            cfg.num_attention_heads,
            cfg.num_key_value_heads,
            hd,
        )
        self.q_proj = nn.Linear(h2, self.num_heads * hd, bias=cfg.attention_bias)
        self.k_proj = nn.Linear(h2, self.num_kv * hd, bias=cfg.attention_bias)
        self.v_proj = nn.Linear(h2, self.num_kv * hd, bias=cfg.attention_bias)
        self.o_proj = nn.Linear(self.num_heads * hd, cfg.hidden_size, bias=cfg.attention_bias)

    def qkv(
        self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """x: (B, T, 2H) → q (B, nh, T, hd), k/v (B, nkv, T, hd), RoPE applied to q and k."""
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, self.num_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, t, self.num_kv, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.num_kv, self.head_dim).transpose(1, 2)
        cos, sin = cos.to(q.dtype), sin.to(q.dtype)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        return q, k, v

    def forward(
        self,
        x: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        cache: Eagle3KVCache,
        start: int,
    ) -> torch.Tensor:
        q, k, v = self.qkv(x, cos, sin)
        cache.write(start, k, v)
        keys, values = cache.view()
        t = q.shape[-2]
        mask = cache.mask(start, t, q.device)
        with sdpa_kernel(SDPA_BACKENDS):
            out = F.scaled_dot_product_attention(
                q, keys, values, attn_mask=mask, enable_gqa=self.num_kv != self.num_heads
            )
        b = x.shape[0]
        return self.o_proj(out.transpose(1, 2).reshape(b, t, self.num_heads * self.head_dim))


class Eagle3MLP(nn.Module):
    def __init__(self, cfg: Eagle3Config) -> None:
        super().__init__()
        h, i = cfg.hidden_size, cfg.intermediate_size
        self.gate_proj = nn.Linear(h, i, bias=cfg.mlp_bias)
        self.up_proj = nn.Linear(h, i, bias=cfg.mlp_bias)
        self.down_proj = nn.Linear(i, h, bias=cfg.mlp_bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Eagle3Layer(nn.Module):
    """``midlayer`` of the checkpoint."""

    def __init__(self, cfg: Eagle3Config) -> None:
        super().__init__()
        self.norm_before_residual = cfg.norm_before_residual
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.hidden_norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.self_attn = Eagle3Attention(cfg)
        self.mlp = Eagle3MLP(cfg)

    def attn_input(
        self, embeds: torch.Tensor, hidden: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """cat(norm(embeds), norm(hidden)) and the residual, as vLLM's first EAGLE3 layer."""
        e = self.input_layernorm(embeds)
        if self.norm_before_residual:
            hidden = self.hidden_norm(hidden)
            residual = hidden
        else:
            residual = hidden
            hidden = self.hidden_norm(hidden)
        return torch.cat([e, hidden], dim=-1), residual

    def finish(self, attn_out: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        """Post-attention residual + MLP; returns the pre-norm output (next step's hidden)."""
        residual = attn_out + residual
        return self.mlp(self.post_attention_layernorm(residual)) + residual


class Eagle3Head(nn.Module):
    """The whole head. State-dict names equal the published checkpoint's."""

    def __init__(self, cfg: Eagle3Config, own_embeddings: bool = False) -> None:
        super().__init__()
        self.cfg = cfg
        self.fc = nn.Linear(cfg.num_aux * cfg.target_hidden_size, cfg.hidden_size, bias=False)
        self.midlayer = Eagle3Layer(cfg)
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.lm_head = nn.Linear(cfg.hidden_size, cfg.draft_vocab_size, bias=False)
        self.embed_tokens = (
            nn.Embedding(cfg.vocab_size, cfg.hidden_size) if own_embeddings else None
        )
        self.register_buffer("d2t", torch.zeros(cfg.draft_vocab_size, dtype=torch.long))
        self.register_buffer("t2d", torch.ones(cfg.vocab_size, dtype=torch.bool))
        # fp32 outside the module's buffers: .to(bfloat16) must not round the RoPE frequencies
        self._inv_freq, self.pos_scale = rope_inv_freq(cfg)
        self._inv_freq_on: dict[torch.device, torch.Tensor] = {}
        # cos/sin of positions 0..n-1 per (device, dtype), grown on demand (see rope_rows)
        self._rope_tables: dict[tuple[torch.device, torch.dtype], tuple[torch.Tensor, ...]] = {}
        # a tuple, so nn.Module does not register the target's embedding as our submodule
        self._shared_embed: tuple[nn.Module, ...] = ()

    # ---------------------------------------------------------------- wiring
    def share_embeddings(self, embed: nn.Module) -> None:
        """Use the target's input embeddings (heads published without ``embed_tokens``)."""
        self._shared_embed = (embed,)

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        if self.embed_tokens is not None:
            return self.embed_tokens(ids)
        if not self._shared_embed:
            raise RuntimeError("EAGLE3 head has no embed_tokens: call share_embeddings(target)")
        return self._shared_embed[0](ids)

    def rope(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """cos/sin of shape (T, hd) for integer positions (fp32)."""
        inv = self._inv_freq_on.get(positions.device)
        if inv is None:
            inv = self._inv_freq_on.setdefault(
                positions.device, self._inv_freq.to(positions.device)
            )
        freqs = (positions.float() * self.pos_scale)[:, None] * inv[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos(), emb.sin()

    def rope_rows(
        self, start: int, t: int, device: torch.device, dtype: torch.dtype
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """cos/sin for positions ``start..start+t-1`` in ``dtype``: views of a table computed
        once by :meth:`rope` (the same elementwise fp32 arithmetic, then one cast), so a draft
        step launches no RoPE kernels — equal values to ``rope(arange(start, start+t))``."""
        key = (torch.device(device), dtype)
        table = self._rope_tables.get(key)
        if table is None or table[0].shape[0] < start + t:
            n = max(start + t, 2 * table[0].shape[0] if table is not None else 1024)
            cos, sin = self.rope(torch.arange(n, device=device))
            table = self._rope_tables[key] = (cos.to(dtype), sin.to(dtype))
        return table[0][start : start + t], table[1][start : start + t]

    def draft_to_target(self, draft_ids: torch.Tensor) -> torch.Tensor:
        return draft_ids + self.d2t[draft_ids]

    # ---------------------------------------------------------------- compute
    def fuse(self, aux: torch.Tensor) -> torch.Tensor:
        """(…, n_aux·H_target) concatenated target states → (…, H)."""
        return self.fc(aux.to(self.fc.weight.dtype))

    def step(
        self,
        token_ids: torch.Tensor,
        hidden: torch.Tensor,
        start: int,
        cache: Eagle3KVCache,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Run the layer over T new positions ``start..start+T-1`` of one sequence.

        token_ids (1, T) are the tokens one ahead of the positions whose hidden states are given
        (vLLM's convention); hidden (1, T, H) is fused target state or the previous step's
        pre-norm output. Returns (normed for lm_head, pre-norm for the next step).
        """
        embeds = self.embed(token_ids).to(hidden.dtype)
        x, residual = self.midlayer.attn_input(embeds, hidden)
        cos, sin = self.rope_rows(start, token_ids.shape[1], hidden.device, x.dtype)
        attn = self.midlayer.self_attn(x, cos, sin, cache, start)
        prenorm = self.midlayer.finish(attn, residual)
        return self.norm(prenorm), prenorm

    def logits(self, normed: torch.Tensor) -> torch.Tensor:
        return self.lm_head(normed)
