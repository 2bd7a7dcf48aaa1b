"""Mixture-of-experts decoders with standard attention, as transformers 5.x builds them: Mixtral, Qwen2-MoE,
Qwen3-MoE, Granite-MoE, gpt-oss, Llama-4 text, ERNIE-4.5-MoE, GLM-4.5 / 4.6 / 4.7 (glm4_moe).

- ERNIE-4.5-MoE (modeling_ernie4_5_moe.py): layer i is MoE iff (i + 1) % moe_layer_interval == 0 and
  moe_layer_start_index <= i <= moe_layer_end_index (-1: the last layer, Ernie4_5_MoeConfig.__post_init__), else a
  dense MLP of intermediate_size. A MoE layer: moe_num_experts routed experts of moe_intermediate_size (3-D
  tensors, no biases), a bias-free router plus its per-expert ``e_score_correction_bias`` parameter (the card's
  router_bias: as many parameters), and the moe_num_shared_experts shared experts as ONE MLP of
  moe_num_shared_experts x moe_intermediate_size. ``use_bias`` biases q/k/v/o, the dense and shared MLPs and the
  LM head, never the routed experts.

``DEFAULTS``: the config classes' defaults for the behavioural keys and the MoE knobs a config.json may omit (a
field's default, or the value ``__post_init__`` makes of it), from transformers 5.23; checked against the installed
transformers in tests/test_hf_import_2025.py.
"""

from __future__ import annotations

from typing import Callable

from kvplan.errors import KvplanError, clip
from kvplan.model.hf.families.core import compress, decoder_core, every_nth, mtp_layers, window
from kvplan.model.hf.families.dense import qwen2, qwen3
from kvplan.model.hf.reader import Config


def mixtral(cfg: Config) -> dict:
    moe = {"num_experts": cfg.integer("num_local_experts"), "experts_per_token": cfg.integer("num_experts_per_tok"),
           "expert_ffn_size": cfg.integer("intermediate_size")}  # every Mixtral layer is sparse
    return {**decoder_core(cfg), **window(cfg), "moe": moe}


def qwen_moe(cfg: Config, shared: bool) -> dict:
    dense = cfg.get("mlp_only_layers")
    if not isinstance(dense, list):
        raise KvplanError(f"{cfg.origin}: mlp_only_layers: {clip(dense)} is not a list; allowed: a list (empty)")
    if cfg.integer("decoder_sparse_step") != 1 or dense:
        raise KvplanError(f"{cfg.origin}: decoder_sparse_step != 1 or mlp_only_layers set: interleaved dense/MoE "
                          "layers are not supported yet (supported: every layer MoE)")
    moe = {"num_experts": cfg.integer("num_experts", "num_local_experts"),
           "experts_per_token": cfg.integer("num_experts_per_tok"),
           "expert_ffn_size": cfg.integer("moe_intermediate_size")}
    if shared:  # one shared expert of its own size, behind a sigmoid gate Linear(hidden, 1)
        moe |= {"num_shared_experts": 1, "shared_expert_ffn_size": cfg.integer("shared_expert_intermediate_size"),
                "shared_expert_gate": True}
    return {"moe": moe}


def qwen2_moe(cfg: Config) -> dict:
    return {**qwen2(cfg), **qwen_moe(cfg, shared=True)}


def qwen3_moe(cfg: Config) -> dict:
    return {**qwen3(cfg, every_layer=True), **qwen_moe(cfg, shared=False)}


def granitemoe(cfg: Config) -> dict:
    moe = {"num_experts": cfg.get("num_local_experts"), "experts_per_token": cfg.get("num_experts_per_tok"),
           "expert_ffn_size": cfg.get("intermediate_size")}
    bias = bool(cfg.get("attention_bias"))
    return {**decoder_core(cfg), "qkv_bias": bias, "out_bias": bias, "moe": moe}


def gpt_oss(cfg: Config) -> dict:
    # every layer MoE, biased router and experts; per-head attention-sink logits; sliding/full alternate
    bias = bool(cfg.get("attention_bias"))
    moe = {"num_experts": cfg.get("num_local_experts"), "experts_per_token": cfg.get("num_experts_per_tok"),
           "expert_ffn_size": cfg.get("intermediate_size"), "router_bias": True}
    # GptOssPreTrainedModel._keep_in_fp32_modules: the layer and final norms in fp16 loads (kvplan.cost.fp32)
    return {**decoder_core(cfg), **window(cfg, every_nth(2)), "attention_sinks": True, "qkv_bias": bias,
            "out_bias": bias, "mlp_bias": True, "moe": moe, "hf_fp32": ("norms",)}


def llama4_text(cfg: Config) -> dict:
    return {**decoder_core(cfg), **_llama4_layers(cfg), "ffn_size": cfg.get("intermediate_size_mlp"),
            "moe": _llama4_moe(cfg)}


def _llama4_moe(cfg: Config) -> dict:
    n, step = cfg.get("num_hidden_layers"), cfg.get("interleave_moe_layer_step")
    moe_layers = cfg.lookup("moe_layers")
    if moe_layers is not None and list(moe_layers) != list(range(step - 1, n, step)):
        raise KvplanError(f"{cfg.origin}: moe_layers {moe_layers} unsupported; allowed: every "
                          f"interleave_moe_layer_step-th layer ({list(range(step - 1, n, step))})")
    # Llama4TextMoe: experts of intermediate_size, one shared expert of the same size, bias-free router
    return {"num_experts": cfg.get("num_local_experts"), "experts_per_token": cfg.get("num_experts_per_tok"),
            "expert_ffn_size": cfg.get("intermediate_size"), "num_shared_experts": 1, "layer_interval": step}


def _llama4_layers(cfg: Config) -> dict:
    """Chunked layers carry RoPE (no_rope_layers[i] == 1), the NoPE layers attend globally."""
    n = cfg.get("num_hidden_layers")
    if cfg.has("layer_types"):
        types = _llama4_types(cfg)[:n]
    else:
        every = cfg.get("no_rope_layer_interval")
        rope = cfg.data.get("no_rope_layers") or [int((i + 1) % every != 0) for i in range(n)]
        types = ["chunked" if r else "global" for r in rope[:n]]
    if "chunked" not in types:
        return {}
    return {"attention_chunk_size": cfg.get("attention_chunk_size"), "layer_pattern": compress(types)}


_LLAMA4_TYPES = {"sliding_attention": "sliding", "full_attention": "global", "chunked_attention": "chunked"}


def _llama4_types(cfg: Config) -> list[str]:
    unknown = set(cfg.data["layer_types"]) - set(_LLAMA4_TYPES)
    if unknown:
        raise KvplanError(f"{cfg.origin}: layer_types {sorted(unknown)} unsupported; allowed: {list(_LLAMA4_TYPES)}")
    return [_LLAMA4_TYPES[t] for t in cfg.data["layer_types"]]


def ernie4_5_moe(cfg: Config) -> dict:
    n, bias = cfg.layers("num_hidden_layers"), cfg.flag("use_bias")
    fields = {**decoder_core(cfg), "num_kv_heads": cfg.integer("num_key_value_heads"), "qkv_bias": bias,
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


def glm4_moe(cfg: Config) -> dict:
    """GLM-4.5 / 4.6 / 4.7, transformers 5.24 modeling_glm4_moe.py. Glm4MoeAttention: q/k/v biased by attention_bias,
    o_proj never; per-head q/k RMSNorms with use_qk_norm; RoPE over partial_rotary_factor (0.5) of head_dim (no
    parameters; the cache holds whole heads). Layers >= first_k_dense_replace: Glm4MoeMoE, n_routed_experts gated
    experts of moe_intermediate_size (3-D tensors, no biases), a bias-free float32 router (Glm4MoeTopkRouter; its
    e_score_correction_bias is a buffer; n_group / topk_group only choose experts) and one shared Glm4MoeMLP of
    moe_intermediate_size x n_shared_experts (as many parameters as n_shared_experts experts); earlier layers a
    Glm4MoeMLP of intermediate_size. The num_nextn_predict_layers MTP layers the checkpoints store after the last
    decoder layer (model.layers.{num_hidden_layers}) are not built: Glm4MoePreTrainedModel
    ._keys_to_ignore_on_load_unexpected skips them, as vLLM's and SGLang's Glm4MoeForCausalLM do unless they load
    them as a speculative draft."""
    n, bias = cfg.layers("num_hidden_layers"), cfg.flag("attention_bias")
    dense = cfg.integer("first_k_dense_replace", minimum=0)
    fields = {**decoder_core(cfg), "qkv_bias": bias, "out_bias": False, "qk_norm": cfg.flag("use_qk_norm"),
              **mtp_layers(cfg, "num_mtp_layers")}
    if dense >= n:  # no layer reaches the MoE
        return fields
    moe = {"num_experts": cfg.integer("n_routed_experts", "num_local_experts"),
           "experts_per_token": cfg.integer("num_experts_per_tok"),
           "expert_ffn_size": cfg.integer("moe_intermediate_size"),
           "num_shared_experts": cfg.integer("n_shared_experts", minimum=0), "first_dense_layers": dense}
    # _keep_in_fp32_modules_strict = ["e_score_correction_bias", "gate.weight"] (kvplan.cost.fp32)
    return {**fields, "moe": moe, "hf_fp32": ("router",)}


READERS: dict[str, Callable[[Config], dict]] = {
    "mixtral": mixtral, "qwen2_moe": qwen2_moe, "qwen3_moe": qwen3_moe, "granitemoe": granitemoe, "gpt_oss": gpt_oss,
    "llama4_text": llama4_text, "ernie4_5_moe": ernie4_5_moe, "glm4_moe": glm4_moe,
}

DEFAULTS: dict[str, dict] = {
    "mixtral": {"num_key_value_heads": 8, "hidden_act": "silu", "max_position_embeddings": 131072,
                "num_experts_per_tok": 2, "tie_word_embeddings": False},
    "qwen2_moe": {"num_key_value_heads": 16, "decoder_sparse_step": 1, "hidden_act": "silu",
                  "max_position_embeddings": 32768, "max_window_layers": 28, "mlp_only_layers": [],
                  "num_experts_per_tok": 4, "tie_word_embeddings": False, "use_sliding_window": False},
    "qwen3_moe": {"num_key_value_heads": 4, "attention_bias": False, "decoder_sparse_step": 1, "hidden_act": "silu",
                  "max_position_embeddings": 32768, "mlp_only_layers": [], "num_experts_per_tok": 8,
                  "tie_word_embeddings": False, "use_sliding_window": False},
    "granitemoe": {"attention_bias": False, "hidden_act": "silu", "max_position_embeddings": 2048,
                   "num_experts_per_tok": 2, "tie_word_embeddings": False},
    "gpt_oss": {"num_key_value_heads": 8, "head_dim": 64, "attention_bias": True, "hidden_act": "silu",
                "max_position_embeddings": 131072, "num_experts_per_tok": 4, "sliding_window": 128,
                "tie_word_embeddings": False,
                "rope_parameters": {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0,
                                    "truncate": False, "original_max_position_embeddings": 4096,
                                    "rope_theta": 150000.0}},
    "llama4_text": {"num_key_value_heads": 8, "head_dim": 128, "attention_bias": False, "attention_chunk_size": 8192,
                    "hidden_act": "silu", "interleave_moe_layer_step": 1, "max_position_embeddings": 131072,
                    "no_rope_layer_interval": 4, "num_experts_per_tok": 1, "tie_word_embeddings": False},
    "ernie4_5_moe": {"hidden_act": "silu", "max_position_embeddings": 131072, "tie_word_embeddings": True,
                     "use_bias": False, "num_key_value_heads": 4, "moe_intermediate_size": 1536, "moe_k": 6,
                     "moe_num_experts": 64, "moe_num_shared_experts": 2, "moe_layer_start_index": 1,
                     "moe_layer_end_index": -1, "moe_layer_interval": 1},
    "glm4_moe": {"num_key_value_heads": 8, "attention_bias": False, "first_k_dense_replace": 1, "hidden_act": "silu",
                 "max_position_embeddings": 131072, "n_shared_experts": 1, "num_experts_per_tok": 8,
                 "tie_word_embeddings": False, "use_qk_norm": False, "num_mtp_layers": 1},
}
