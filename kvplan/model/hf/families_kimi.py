"""Readers for Kimi-Linear (Kimi Delta Attention and MLA) and OLMo-hybrid (Gated DeltaNet and OLMo-2 attention), as
transformers 5.x builds them: config.json keys -> card fields, with an ``ssm:`` block (kvplan.model.ssm) for the
linear-attention layers.

Layer rules:

- Kimi-Linear (modeling_kimi_linear.py, KimiLinearConfig.__post_init__): ``layer_types`` ("linear_attention" -> a
  KDA mixer, "full_attention" -> MLA); else the checkpoint's 1-based ``linear_attn_config.full_attn_layers`` /
  ``kda_layers``; else layer i attends iff i > 0 and i % 4 == 0. ``linear_attn_config``'s head_dim, num_heads and
  short_conv_kernel_size win over linear_head_dim, linear_num_heads and linear_conv_kernel_dim. MLA without RoPE
  (NoPE: no rotary embedding, yet the cache keeps the latent and the qk_rope_head_dim key as DeepSeek's does);
  attention_bias biases q_a_proj, kv_a_proj_with_mqa and o_proj. FFN: ``mlp_layer_types`` ("dense" -> a gated MLP of
  intermediate_size, "sparse" -> MoE), else the first ``first_k_dense_replace`` layers dense; the MoE holds
  num_experts routed experts of moe_intermediate_size, a sigmoid router without bias (its e_score_correction_bias is a
  buffer) and one shared MLP of num_shared_experts x moe_intermediate_size. Its config stores several keys under
  attribute_map names (num_experts, num_experts_per_token, num_shared_experts, model_max_length); both spellings
  are read, the stored one first (it wins in transformers too). KimiLinearForCausalLM ties no weights, whatever
  tie_word_embeddings says.
- OLMo-hybrid (modeling_olmo_hybrid.py): ``layer_types`` ("linear_attention" -> Gated DeltaNet, "full_attention"),
  else every 4th layer attends (the last one when none would); at least one of each (validate_architecture). The
  attention layers are OLMo-2's (q/k RMSNorms over all heads, post-norms), the linear layers pre-norm: two norms per
  block either way. Its Gated DeltaNet has separate q/k/v/a/b/g projections of the same sizes as Qwen3-Next's fused
  ones; linear_num_key/value_heads default to num_attention_heads, linear_key_head_dim to int(0.75 x hidden /
  key heads), linear_value_head_dim to twice that. RoPE: transformers 5.x fills default rope_parameters whatever the
  file says, so the model always builds its rotary embedding (no parameters).

``ALL_READERS`` extends families_linear's chain.
"""

from __future__ import annotations

from typing import Callable

from kvplan.errors import KvplanError, clip
from kvplan.model.hf import families_linear
from kvplan.model.hf.families import _compress, _decoder_core
from kvplan.model.hf.families_linear import _types
from kvplan.model.hf.reader import Config

_ATTENTION_TYPES = {"linear_attention": "mamba", "full_attention": "global"}


def kimi_linear(cfg: Config) -> dict:
    lin = cfg.data.get("linear_attn_config") or {}
    if not isinstance(lin, dict):
        raise KvplanError(f"{cfg.origin}: linear_attn_config: {clip(lin)} is not a mapping; allowed: an object")
    heads, kv_heads = cfg.integer("num_attention_heads"), cfg.data.get("num_key_value_heads")
    if kv_heads is not None and kv_heads != heads:  # expand_kv gives every query head its K/V; repeat_kv then breaks
        raise KvplanError(f"{cfg.origin}: num_key_value_heads: {clip(kv_heads)}; Kimi-Linear's MLA expands K/V to "
                          f"every query head; allowed: num_attention_heads ({heads})")
    width, n = _kda_int(cfg, lin, "head_dim", "linear_head_dim"), _kda_int(cfg, lin, "num_heads", "linear_num_heads")
    ssm = {"kind": "kda", "num_heads": n, "head_dim": width, "intermediate_size": n * width, "conv_bias": False,
           "d_conv": _kda_int(cfg, lin, "short_conv_kernel_size", "linear_conv_kernel_dim")}
    types = _kimi_layer_types(cfg, lin)
    mla = {k: cfg.integer(k) for k in ("kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim")}
    if "q_lora_rank" not in cfg.data:
        cfg.assumed.append("q_lora_rank=None (transformers default for kimi_linear: no query compression)")
    mla["q_lora_rank"] = cfg.optional("q_lora_rank")
    data = {**cfg.data, "num_key_value_heads": heads, "head_dim": None,  # its head_dim is qk_rope_head_dim: unused
            "max_position_embeddings": cfg.integer("model_max_length", "max_position_embeddings")}
    if cfg.flag("tie_word_embeddings"):  # KimiLinearForCausalLM._tied_weights_keys = {}: lm_head stays its own
        cfg.assumed.append("tie_word_embeddings=false (KimiLinearForCausalLM ties no weights; the file's true is "
                           "ignored)")
    data["tie_word_embeddings"] = False
    own = Config(data, cfg.model_type, cfg.origin)
    own.assumed = cfg.assumed  # one record of the defaults assumed
    bias, moe = cfg.flag("attention_bias"), _kimi_moe(cfg)
    # _keep_in_fp32_modules_strict = ["e_score_correction_bias", "gate.weight", "dt_bias"] (kvplan.cost.fp32)
    fp32 = ("router",) * (moe is not None) + ("dt_bias",) * ("mamba" in types)
    return {**_decoder_core(own), "position": "none", "layer_pattern": _compress(types),
            "ssm": ssm if "mamba" in types else None, "mla": mla if "global" in types else None,
            "moe": moe, "qkv_bias": bias, "out_bias": bias, "hf_fp32": fp32}


def _kda_int(cfg: Config, lin: dict, sub_key: str, key: str) -> int:
    """A KDA size: linear_attn_config's entry when present (it wins in KimiLinearConfig.__post_init__), else the key."""
    if sub_key in lin:
        return cfg.check_int(f"linear_attn_config.{sub_key}", lin[sub_key])
    return cfg.integer(key)


def _kimi_layer_types(cfg: Config, lin: dict) -> list[str]:
    n = cfg.layers("num_hidden_layers")
    if cfg.data.get("layer_types") is None and "full_attn_layers" in lin and "kda_layers" in lin:
        full, kda = lin["full_attn_layers"], lin["kda_layers"]
        ok = all(isinstance(v, list) and all(type(i) is int for i in v) for v in (full, kda))
        if not ok or sorted(full + kda) != list(range(1, n + 1)):
            raise KvplanError(f"{cfg.origin}: linear_attn_config.full_attn_layers / kda_layers: {clip(full)} and "
                              f"{clip(kda)} must name each layer 1..{n} (num_hidden_layers, 1-based) exactly once")
        return ["global" if i + 1 in full else "mamba" for i in range(n)]
    return _types(cfg, _ATTENTION_TYPES, lambda n: ["global" if i and i % 4 == 0 else "mamba" for i in range(n)])


def _kimi_moe(cfg: Config) -> dict | None:
    """The card's MoE block from ``mlp_layer_types`` (dense layers first, then sparse), else first_k_dense_replace."""
    n = cfg.layers("num_hidden_layers")
    raw = cfg.data.get("mlp_layer_types")
    if raw is None:
        dense = min(n, cfg.integer("first_k_dense_replace", minimum=0))
    else:
        dense = raw.index("sparse") if isinstance(raw, list) and "sparse" in raw else n
        if not isinstance(raw, list) or raw != ["dense"] * dense + ["sparse"] * (n - dense):
            raise KvplanError(f"{cfg.origin}: mlp_layer_types: {clip(raw)} is not modelled; allowed: a list of "
                              f"num_hidden_layers ({n}) entries, dense layers first, then sparse ones")
    if dense == n:  # no sparse layer: a dense MLP everywhere
        return None
    return {"num_experts": cfg.integer("num_experts", "num_local_experts"),
            "experts_per_token": cfg.integer("num_experts_per_token", "num_experts_per_tok"),
            "expert_ffn_size": cfg.integer("moe_intermediate_size"), "first_dense_layers": dense,
            "num_shared_experts": cfg.integer("num_shared_experts", "n_shared_experts", minimum=0)}


def olmo_hybrid(cfg: Config) -> dict:
    def fallback(n: int) -> list[str]:  # OlmoHybridConfig.__post_init__
        types = ["global" if i % 4 == 3 else "mamba" for i in range(n)]
        return types if "global" in types else types[:-1] + ["global"]

    types = _types(cfg, _ATTENTION_TYPES, fallback)
    if "global" not in types or "mamba" not in types:  # OlmoHybridConfig.validate_architecture
        raise KvplanError(f"{cfg.origin}: layer_types: OLMo-hybrid needs at least one linear_attention and one "
                          "full_attention layer; allowed: both kinds")
    heads, hidden = cfg.integer("num_attention_heads"), cfg.integer("hidden_size")
    k_heads, v_heads = _derived(cfg, "linear_num_key_heads", heads), _derived(cfg, "linear_num_value_heads", heads)
    # int(0.75 * hidden / key heads), in integers: 3h // 4k (the quotient is never within a float ulp of an integer)
    k_dim = _derived(cfg, "linear_key_head_dim", 3 * hidden // (4 * k_heads))
    v_dim = _derived(cfg, "linear_value_head_dim", 2 * k_dim)
    ssm = {"kind": "gated_deltanet", "d_state": k_dim, "n_groups": k_heads, "num_heads": v_heads, "head_dim": v_dim,
           "intermediate_size": v_heads * v_dim, "d_conv": cfg.integer("linear_conv_kernel_dim"), "conv_bias": False}
    bias = cfg.flag("attention_bias")
    # OlmoHybridGatedDeltaNet builds A_log in float32 (kvplan.cost.fp32)
    return {**_decoder_core(cfg), "layer_pattern": _compress(types), "ssm": ssm, "qk_norm": True,
            "qk_norm_width": "all_heads", "qkv_bias": bias, "out_bias": bias, "hf_fp32": ("a_log",)}


def _derived(cfg: Config, key: str, value: int) -> int:
    """A size the config class derives when the file leaves it null (recorded as assumed)."""
    given = cfg.optional(key)
    if given is None:
        cfg.assumed.append(f"{key}={value} (derived by the olmo_hybrid config class)")
        if value < 1:
            raise KvplanError(f"{cfg.origin}: {key}: derives to {value}; give it explicitly (an integer >= 1)")
        return value
    return given


READERS: dict[str, Callable[[Config], dict]] = {"kimi_linear": kimi_linear, "olmo_hybrid": olmo_hybrid}
ALL_READERS: dict[str, Callable[[Config], dict]] = families_linear.ALL_READERS | READERS
