"""Readers for attention / state-space hybrids with MoE or parallel mixers (Granite-MoE-Hybrid, Jamba, Falcon-H1),
as transformers 5.x builds them: config.json keys -> card fields, with a card ``ssm:`` block.

Layer rules:

- Granite-MoE-Hybrid (modeling_granitemoehybrid.py): ``layer_types`` ("mamba"/"linear_attention" -> a Mamba-2
  mixer, "attention"/"full_attention" -> attention; default all Mamba-2); every layer holds routed experts
  (``num_local_experts`` of ``intermediate_size``; none when 0) plus one always-on ``shared_mlp`` of
  ``shared_intermediate_size``; RoPE only when ``position_embedding_type`` is "rope".
- Jamba (modeling_jamba.py): layer i attends iff i % attn_layer_period == attn_layer_offset, else a Mamba-1 mixer with
  RMSNorms on dt, B and C; its FFN is MoE (num_experts > 1) iff i % expert_layer_period == expert_layer_offset.
- Falcon-H1 (modeling_falcon_h1.py): every layer runs attention and a Mamba-2 mixer side by side (cache layer
  "hybrid": K/V plus both states), then a gated MLP; ``mamba_d_ssm`` sets the mixer width, ``mamba_rms_norm`` its
  gated norm, ``projectors_bias`` its out_proj bias. The mu-P multipliers scale activations only (no parameters).

``ALL_READERS`` extends families_ssm's chain.
"""

from __future__ import annotations

from typing import Callable

from kvplan.errors import KvplanError, clip
from kvplan.model.hf import families_ssm
from kvplan.model.hf.families import _compress, _decoder_core
from kvplan.model.hf.families_ssm import mamba2_block
from kvplan.model.hf.reader import Config

_GRANITE_TYPES = {"mamba": "mamba", "linear_attention": "mamba", "attention": "global", "full_attention": "global"}


def granitemoehybrid(cfg: Config) -> dict:
    types = _granite_types(cfg)
    experts, shared = cfg.integer("num_local_experts", minimum=0), cfg.integer("shared_intermediate_size")
    if experts:  # GraniteMoeHybridMoE (router without bias, gate_up/down experts) plus the shared gated MLP
        ffn = {"moe": {"num_experts": experts, "experts_per_token": cfg.integer("num_experts_per_tok"),
                       "expert_ffn_size": cfg.integer("intermediate_size"), "num_shared_experts": 1,
                       "shared_expert_ffn_size": shared}}
    else:  # no experts: the shared MLP alone is the layer's FFN
        ffn = {"ffn_size": shared}
    bias = cfg.flag("attention_bias")
    rope = cfg.lookup("position_embedding_type") == "rope"
    return {**_decoder_core(cfg), **ffn, "layer_pattern": _compress(types), "ssm": mamba2_block(cfg),
            "qkv_bias": bias, "out_bias": bias, "position": "rope" if rope else "none"}


def _granite_types(cfg: Config) -> list[str]:
    n = cfg.layers("num_hidden_layers")
    key = "layer_types" if "layer_types" in cfg.data else "layers_block_type"
    raw = cfg.data.get(key)
    if raw is None:  # GraniteMoeHybridConfig.__post_init__: every layer a Mamba-2 mixer
        cfg.assumed.append(f"layer_types=['mamba'] * {n} (transformers default for granitemoehybrid)")
        return ["mamba"] * n
    if not isinstance(raw, list) or len(raw) != n or any(t not in _GRANITE_TYPES for t in raw):
        raise KvplanError(f"{cfg.origin}: {key}: {clip(raw)} is not a list of num_hidden_layers ({n}) layer types; "
                          f"allowed: {', '.join(_GRANITE_TYPES)}")
    return [_GRANITE_TYPES[t] for t in raw]


def jamba(cfg: Config) -> dict:
    n = cfg.layers("num_hidden_layers")
    attn = _period(cfg, "attn_layer_period", "attn_layer_offset")
    rank = cfg.get("mamba_dt_rank")
    ssm = {"kind": "mamba", "d_state": cfg.integer("mamba_d_state"), "d_conv": cfg.integer("mamba_d_conv"),
           "expand": cfg.integer("mamba_expand"), "dt_rank": None if rank == "auto" else cfg.integer("mamba_dt_rank"),
           "conv_bias": cfg.flag("mamba_conv_bias"), "proj_bias": cfg.flag("mamba_proj_bias"), "dt_bc_norms": True}
    types = ["global" if attn(i) else "mamba" for i in range(n)]
    # JambaAttention applies no rotary embedding (JambaModel has no rotary_emb): position comes from the Mamba layers
    fields = {**_decoder_core(cfg), "layer_pattern": _compress(types), "ssm": ssm, "position": "none"}
    experts = cfg.integer("num_experts")
    if experts == 1:  # JambaMLP in every layer
        return fields
    period, offset = cfg.integer("expert_layer_period"), cfg.integer("expert_layer_offset", minimum=0)
    if offset != period - 1:  # the card's MoE rule: layer i is MoE iff (i + 1) % layer_interval == 0
        raise KvplanError(f"{cfg.origin}: expert_layer_offset {offset} with expert_layer_period {period} is not "
                          f"modelled; allowed: expert_layer_offset = expert_layer_period - 1 ({period - 1})")
    moe = {"num_experts": experts, "experts_per_token": cfg.integer("num_experts_per_tok"),
           "expert_ffn_size": cfg.integer("intermediate_size"), "layer_interval": period}
    return {**fields, "moe": moe}


def _period(cfg: Config, period_key: str, offset_key: str) -> Callable[[int], bool]:
    period, offset = cfg.integer(period_key), cfg.integer(offset_key, minimum=0)
    if offset >= period:
        raise KvplanError(f"{cfg.origin}: {offset_key} ({offset}) must be smaller than {period_key} ({period}); "
                          f"allowed: 0..{period - 1}")
    return lambda i: i % period == offset


def falcon_h1(cfg: Config) -> dict:
    ssm = {**mamba2_block(cfg), "out_proj_bias": cfg.flag("projectors_bias"),
           "gated_norm": cfg.flag("mamba_rms_norm")}
    d_ssm = cfg.lookup("mamba_d_ssm")
    if d_ssm is not None:
        ssm["intermediate_size"] = cfg.integer("mamba_d_ssm")
    bias = cfg.flag("attention_bias")
    return {**_decoder_core(cfg), "layer_pattern": ["hybrid"], "ssm": ssm, "qkv_bias": bias, "out_bias": bias,
            "mlp_bias": cfg.flag("mlp_bias")}


READERS: dict[str, Callable[[Config], dict]] = {
    "granitemoehybrid": granitemoehybrid, "jamba": jamba, "falcon_h1": falcon_h1,
}
ALL_READERS: dict[str, Callable[[Config], dict]] = families_ssm.ALL_READERS | READERS
