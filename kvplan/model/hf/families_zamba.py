"""Readers for ERNIE-4.5-MoE and the Zamba hybrids (shared transformer blocks over Mamba layers), as transformers
5.x builds them: config.json keys -> card fields.

- ERNIE-4.5-MoE (modeling_ernie4_5_moe.py): layer i is MoE iff (i + 1) % moe_layer_interval == 0 and
  moe_layer_start_index <= i <= moe_layer_end_index (-1: the last layer, Ernie4_5_MoeConfig.__post_init__), else a
  dense MLP of intermediate_size. A MoE layer: moe_num_experts routed experts of moe_intermediate_size (3-D
  tensors, no biases), a bias-free router plus its per-expert ``e_score_correction_bias`` parameter (the card's
  router_bias: as many parameters), and the moe_num_shared_experts shared experts as ONE MLP of
  moe_num_shared_experts x moe_intermediate_size. ``use_bias`` biases q/k/v/o, the dense and shared MLPs and the
  LM head, never the routed experts.
- Zamba (modeling_zamba.py): every layer a Mamba-1 mixer split into n_mamba_heads (the sizes of one Mamba-1
  mixer) after one RMSNorm; "hybrid" layers (layers_block_type, else [mamba, mamba, hybrid] then every
  attn_layer_period-th from attn_layer_offset, ZambaConfig.__post_init__) first invoke the one shared attention +
  MLP block (kvplan.model.shared); no positional encoding; head_dim attention_head_dim, else 2 x hidden / heads.
- Zamba2 (modeling_zamba2.py): Mamba-2 layers (conv bias always on; in/out_proj biased by add_bias_linear) and
  hybrid layers invoking num_mem_blocks shared blocks in turn, with per-invocation adapters of adapter_rank;
  head_dim is always 2 x hidden // heads; RoPE only with use_mem_rope; use_long_context sets 16384 positions.

``ALL_READERS`` extends families_linear's chain.
"""

from __future__ import annotations

from typing import Callable

from kvplan.errors import KvplanError, clip
from kvplan.model.hf import families_linear
from kvplan.model.hf.families import _compress, _decoder_core
from kvplan.model.hf.reader import Config

_ZAMBA_TYPES = {"mamba": "mamba", "linear_attention": "mamba", "hybrid": "hybrid"}
# Zamba2Config.__post_init__'s layers_block_type when the file gives none (54 layers, Zamba2-2.7B)
_ZAMBA2_LAYERS = ["mamba"] + (["mamba"] * 5 + ["hybrid"]) * 7 + ["mamba"] * 4 + ["hybrid"] + ["mamba"] * 3 + [
    "hybrid"] + ["mamba"] * 2


def ernie4_5_moe(cfg: Config) -> dict:
    n, bias = cfg.layers("num_hidden_layers"), cfg.flag("use_bias")
    fields = {**_decoder_core(cfg), "num_kv_heads": cfg.integer("num_key_value_heads"), "qkv_bias": bias,
              "out_bias": bias, "mlp_bias": bias, "lm_head_bias": bias}
    start, every = cfg.integer("moe_layer_start_index", minimum=0), cfg.integer("moe_layer_interval")
    key, end = cfg.find("moe_layer_end_index")
    end = n - 1 if cfg.check_int(key, end, minimum=-(2**31)) == -1 else end
    if not any((i + 1) % every == 0 and start <= i <= end for i in range(n)):
        return fields  # no layer qualifies: every layer a dense MLP
    if bias:
        raise KvplanError(f"{cfg.origin}: use_bias true with MoE layers (biased dense and shared MLPs, unbiased routed "
                          "experts) is not modelled; allowed: false")
    moe = {"num_experts": cfg.integer("moe_num_experts", "num_experts"),
           "experts_per_token": cfg.integer("moe_k", "num_experts_per_tok"),
           "expert_ffn_size": cfg.integer("moe_intermediate_size"), "first_dense_layers": start,
           "layer_interval": every, "last_layer": end if end < n - 1 else None, "router_bias": True}
    # _keep_in_fp32_modules_strict = ["gate.weight", "e_score_correction_bias"]: the router (kvplan.cost.fp32)
    fields["hf_fp32"] = ("router",)
    shared = cfg.integer("moe_num_shared_experts", minimum=0)
    if shared:  # Ernie4_5_MoeMLP(config, moe_intermediate_size * moe_num_shared_experts)
        moe |= {"num_shared_experts": 1, "shared_expert_ffn_size": shared * moe["expert_ffn_size"]}
    return {**fields, "moe": moe}


def _layer_list(cfg: Config, fallback: Callable[[int], list[str]]) -> list[str]:
    """layers_block_type (alias layer_types) mapped to card types, else the config class's rule; transformers
    refuses a list whose length is not num_hidden_layers."""
    n = cfg.layers("num_hidden_layers")
    key = "layers_block_type" if cfg.has("layers_block_type") else "layer_types"
    raw = cfg.data.get(key)
    if raw is None:
        key, raw = "layers_block_type (the config class's default rule)", fallback(n)
        cfg.assumed.append(f"layers_block_type={_compress(raw)!r} (the {cfg.model_type} config class's rule)")
    if not isinstance(raw, list) or any(t not in _ZAMBA_TYPES for t in raw):
        raise KvplanError(f"{cfg.origin}: {key}: {clip(raw)} is not a list of layer types; allowed: "
                          f"{', '.join(_ZAMBA_TYPES)}")
    if len(raw) != n:
        raise KvplanError(f"{cfg.origin}: {key} has {len(raw)} layers but num_hidden_layers is {n}; allowed: equal")
    types = [_ZAMBA_TYPES[t] for t in raw]
    ids = cfg.data.get("hybrid_layer_ids")
    if ids is not None and ids != [i for i, t in enumerate(types) if t == "hybrid"]:
        raise KvplanError(f"{cfg.origin}: hybrid_layer_ids {clip(ids)} disagree with {key} (hybrid at "
                          f"{[i for i, t in enumerate(types) if t == 'hybrid']})")
    return types


def _mamba_heads(cfg: Config, hidden: int) -> int:
    heads, inner = cfg.integer("n_mamba_heads"), cfg.integer("mamba_expand") * hidden
    if inner % heads:
        raise KvplanError(f"{cfg.origin}: n_mamba_heads {heads} does not divide mamba_expand x hidden_size ({inner})")
    return heads


def _zamba_core(cfg: Config, types: list[str], head_dim: int, ssm: dict, shared: dict) -> dict:
    """The fields Zamba and Zamba2 share: mixer-only layers (one RMSNorm each), gated MLP in the shared block."""
    core = {**_decoder_core(cfg), "head_dim": head_dim, "num_kv_heads": cfg.integer("num_key_value_heads"),
            "layer_pattern": _compress(types), "norms_per_layer": 1, "mixer_mlp": False, "ssm": ssm}
    return core | ({"shared_blocks": shared} if "hybrid" in types else {})


def zamba(cfg: Config) -> dict:
    period, offset = cfg.integer("attn_layer_period"), cfg.integer("attn_layer_offset", minimum=0)
    types = _layer_list(cfg, lambda n: ["mamba", "mamba", "hybrid"] + [
        "hybrid" if i % period == offset else "mamba" for i in range(n - 3)])
    h, heads = cfg.integer("hidden_size"), cfg.integer("num_attention_heads")
    width = cfg.optional("attention_hidden_size")
    if width not in (None, 2 * h):
        raise KvplanError(f"{cfg.origin}: attention_hidden_size {width}: the shared block attends over the hidden "
                          f"state and the embeddings concatenated; allowed: 2 x hidden_size ({2 * h})")
    rank = cfg.get("mamba_dt_rank")
    _mamba_heads(cfg, h)  # ZambaConfig.validate_architecture; the heads split one Mamba-1 mixer's sizes
    ssm = {"kind": "mamba", "d_state": cfg.integer("mamba_d_state"), "d_conv": cfg.integer("mamba_d_conv"),
           "expand": cfg.integer("mamba_expand"), "dt_rank": None if rank == "auto" else cfg.integer("mamba_dt_rank"),
           "conv_bias": cfg.flag("mamba_conv_bias"), "proj_bias": cfg.flag("mamba_proj_bias")}
    head_dim = cfg.optional("attention_head_dim") or cfg.optional("head_dim") or 2 * h // heads
    # ZambaMambaMixer builds A_log in float32 (kvplan.cost.fp32)
    return {**_zamba_core(cfg, types, head_dim, ssm, {}), "position": "none", "hf_fp32": ("a_log",)}


def zamba2(cfg: Config) -> dict:
    types = _layer_list(cfg, lambda n: list(_ZAMBA2_LAYERS))
    h, heads = cfg.integer("hidden_size"), cfg.integer("num_attention_heads")
    data = {**cfg.data, "intermediate_size": cfg.optional("intermediate_size") or 4 * h,  # Zamba2Config.__post_init__
            "num_key_value_heads": cfg.optional("num_key_value_heads") or heads}
    if cfg.flag("use_long_context"):
        data["max_position_embeddings"] = 16384
    own = Config(data, cfg.model_type, cfg.origin)
    own.assumed = cfg.assumed  # one record of the defaults assumed
    bias = cfg.flag("add_bias_linear")
    ssm = {"kind": "mamba2", "d_state": cfg.integer("mamba_d_state"), "d_conv": cfg.integer("mamba_d_conv"),
           "expand": cfg.integer("mamba_expand"), "num_heads": _mamba_heads(cfg, h),
           "n_groups": cfg.integer("mamba_ngroups"), "chunk_size": cfg.integer("chunk_size"), "conv_bias": True,
           "proj_bias": bias}
    shared = {"num_blocks": cfg.integer("num_mem_blocks"), "adapter_rank": cfg.integer("adapter_rank"),
              "attention_adapters": cfg.flag("use_shared_attention_adapter"), "mlp_adapters": True}
    return {**_zamba_core(own, types, 2 * h // heads, ssm, shared), "mlp_bias": bias,
            "position": "rope" if cfg.flag("use_mem_rope") else "none"}


READERS: dict[str, Callable[[Config], dict]] = {"ernie4_5_moe": ernie4_5_moe, "zamba": zamba, "zamba2": zamba2}
ALL_READERS: dict[str, Callable[[Config], dict]] = families_linear.ALL_READERS | READERS
