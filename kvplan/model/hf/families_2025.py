"""Readers for the model types of 2024-2026 (OLMo-2/3, Granite, GLM, EXAONE-4, SmolLM3, ERNIE-4.5, Cohere2,
StarCoder2, Phi-2, StableLM, Persimmon, Nemotron, gpt-oss, Llama-4 text), as transformers 5.x builds them.

Each reader returns the architecture fields, like ``families.py``; ``ALL_READERS`` is what the importer looks up.
Shapes follow ``transformers/models/<type>/modeling_<type>.py``; where a config.json omits ``layer_types``, the
layer rule is the config class's own ``__post_init__`` fallback.
"""

from __future__ import annotations

from typing import Callable

from kvplan.errors import KvplanError
from kvplan.model.hf import families
from kvplan.model.hf.reader import Config, activation
from kvplan.model.hf.families import _decoder_core, _window

_LAYER_TYPES = {"sliding_attention": "sliding", "full_attention": "global", "chunked_attention": "chunked"}


def _every(n: int, kind: str = "sliding") -> Callable[[int], list[str]]:
    """Layer i is global iff (i + 1) % n == 0, else ``kind`` (OLMo-3, EXAONE-4, Cohere2 fallbacks)."""
    return lambda layers: [kind if (i + 1) % n else "global" for i in range(layers)]


def _core(cfg: Config) -> dict:
    """``_decoder_core``, plus squared ReLU (Nemotron, Persimmon) besides the activations families.py knows."""
    if cfg.get("hidden_act") != "relu2":
        return _decoder_core(cfg)
    data, cfg.data = cfg.data, {**cfg.data, "hidden_act": "relu"}
    try:
        return {**_decoder_core(cfg), "activation": "relu2"}
    finally:
        cfg.data = data


def _plain(cfg: Config, bias: bool, norm: str = "layernorm") -> dict:
    """A non-gated MLP (up, down), LayerNorm and optional biases everywhere (StarCoder2, Phi-2, Nemotron)."""
    return {"gated_ffn": False, "norm": norm, "qkv_bias": bias, "out_bias": bias, "mlp_bias": bias}


def _sized_head(cfg: Config) -> dict:
    """Families whose config class defaults head_dim to a fixed number (GLM 128, gpt-oss 64, ...): no default."""
    return {**_decoder_core(cfg), "head_dim": cfg.get("head_dim")}


def olmo2(cfg: Config) -> dict:
    # post-norms only (post_attention / post_feedforward) and q/k RMSNorms over all heads' width
    bias = bool(cfg.get("attention_bias"))
    return {**_decoder_core(cfg), "qk_norm": True, "qk_norm_width": "all_heads", "qkv_bias": bias, "out_bias": bias}


def olmo3(cfg: Config) -> dict:
    return {**olmo2(cfg), **_window(cfg, _every(4))}


def smollm3(cfg: Config) -> dict:
    # NoPE layers (no_rope_layers[i] == 0) are cached like full attention; they slide only with use_sliding_window
    def rule(n: int) -> list[str]:
        rope = cfg.data.get("no_rope_layers") or [int((i + 1) % (cfg.data.get("no_rope_layer_interval") or 4) != 0)
                                                   for i in range(n)]
        on = cfg.get("use_sliding_window") and cfg.lookup("sliding_window")
        return ["sliding" if on and not rope[i] else "global" for i in range(n)]

    return {**_decoder_core(cfg), **_window(cfg, rule), **_llama_biases(cfg)}


def _llama_biases(cfg: Config) -> dict:
    bias = bool(cfg.get("attention_bias"))
    return {"qkv_bias": bias, "out_bias": bias, "mlp_bias": bool(cfg.get("mlp_bias"))}


def granitemoe(cfg: Config) -> dict:
    moe = {"num_experts": cfg.get("num_local_experts"), "experts_per_token": cfg.get("num_experts_per_tok"),
           "expert_ffn_size": cfg.get("intermediate_size")}
    bias = bool(cfg.get("attention_bias"))
    return {**_decoder_core(cfg), "qkv_bias": bias, "out_bias": bias, "moe": moe}


def glm(cfg: Config) -> dict:
    return {**_sized_head(cfg), "qkv_bias": bool(cfg.get("attention_bias"))}  # o_proj has no bias


def glm4(cfg: Config) -> dict:
    return {**glm(cfg), "norms_per_layer": 4}  # + post_self_attn_layernorm and post_mlp_layernorm


def exaone4(cfg: Config) -> dict:
    pattern = cfg.get("sliding_window_pattern") if cfg.has("sliding_window_pattern") else 4
    if not isinstance(pattern, int) or isinstance(pattern, bool) or pattern < 1:
        raise KvplanError(f"{cfg.origin}: sliding_window_pattern {pattern!r} unsupported; allowed: a positive integer")
    rule = _every(pattern) if cfg.lookup("sliding_window") else _every(1)
    return {**_decoder_core(cfg), **_window(cfg, rule), "qk_norm": True}


def ernie4_5(cfg: Config) -> dict:
    bias = bool(cfg.get("use_bias"))
    return {**_sized_head(cfg), "qkv_bias": bias, "out_bias": bias, "mlp_bias": bias}


def cohere2(cfg: Config) -> dict:
    # parallel block: one bias-free LayerNorm; Cohere2Config sets head_dim = hidden_size // num_attention_heads
    pattern = cfg.data.get("sliding_window_pattern") or 4
    bias = bool(cfg.get("attention_bias"))
    core = {**_decoder_core(cfg), "head_dim": None, "norm": "layernorm_nobias", "norms_per_layer": 1}
    return {**core, **_window(cfg, _every(pattern)), "qkv_bias": bias, "out_bias": bias}


def starcoder2(cfg: Config) -> dict:
    return {**_decoder_core(cfg), **_window(cfg), **_plain(cfg, bool(cfg.get("use_bias")))}


def phi(cfg: Config) -> dict:
    # parallel attention + MLP after one input_layernorm; biases everywhere, LM head included
    return {**_decoder_core(cfg), **_plain(cfg, True), "norms_per_layer": 1, "lm_head_bias": True,
            "qk_norm": bool(cfg.get("qk_layernorm")), "activation": activation(cfg, "hidden_act")}


def stablelm(cfg: Config) -> dict:
    if cfg.get("qk_layernorm"):
        raise KvplanError(f"{cfg.origin}: qk_layernorm true (one LayerNorm per head) unsupported; allowed: false")
    core = {**_decoder_core(cfg), "head_dim": None, "norm": "layernorm"}  # head_dim = hidden_size // heads
    return {**core, "norms_per_layer": 1 if cfg.get("use_parallel_residual") else 2,
            "qkv_bias": bool(cfg.get("use_qkv_bias"))}


def persimmon(cfg: Config) -> dict:
    # fused query_key_value and dense with biases; per-head-width q/k LayerNorms with biases; relu2 MLP with biases
    core = {**_core(cfg), "num_kv_heads": cfg.get("num_attention_heads"), "head_dim": None}
    return {**core, **_plain(cfg, True), "qk_norm": bool(cfg.get("qk_layernorm"))}


def nemotron(cfg: Config) -> dict:
    bias = bool(cfg.get("attention_bias"))
    return {**_core(cfg), **_plain(cfg, bias), "mlp_bias": bool(cfg.get("mlp_bias"))}


def gpt_oss(cfg: Config) -> dict:
    # every layer MoE, biased router and experts; per-head attention-sink logits; sliding/full alternate
    bias = bool(cfg.get("attention_bias"))
    moe = {"num_experts": cfg.get("num_local_experts"), "experts_per_token": cfg.get("num_experts_per_tok"),
           "expert_ffn_size": cfg.get("intermediate_size"), "router_bias": True}
    # GptOssPreTrainedModel._keep_in_fp32_modules: the layer and final norms in fp16 loads (kvplan.cost.fp32)
    return {**_sized_head(cfg), **_window(cfg, _every(2)), "attention_sinks": True, "qkv_bias": bias,
            "out_bias": bias, "mlp_bias": True, "moe": moe, "hf_fp32": ("norms",)}


def llama4_text(cfg: Config) -> dict:
    return {**_sized_head(cfg), **_llama4_layers(cfg), "ffn_size": cfg.get("intermediate_size_mlp"),
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
        types = _types(cfg)[:n]
    else:
        every = cfg.get("no_rope_layer_interval")
        rope = cfg.data.get("no_rope_layers") or [int((i + 1) % every != 0) for i in range(n)]
        types = ["chunked" if r else "global" for r in rope[:n]]
    if "chunked" not in types:
        return {}
    return {"attention_chunk_size": cfg.get("attention_chunk_size"), "layer_pattern": families._compress(types)}


def _types(cfg: Config) -> list[str]:
    unknown = set(cfg.data["layer_types"]) - set(_LAYER_TYPES)
    if unknown:
        raise KvplanError(f"{cfg.origin}: layer_types {sorted(unknown)} unsupported; allowed: {list(_LAYER_TYPES)}")
    return [_LAYER_TYPES[t] for t in cfg.data["layer_types"]]


READERS: dict[str, Callable[[Config], dict]] = {
    "olmo2": olmo2, "olmo3": olmo3, "granite": families.llama, "granitemoe": granitemoe, "glm": glm, "glm4": glm4,
    "exaone4": exaone4, "smollm3": smollm3, "ernie4_5": ernie4_5, "cohere2": cohere2, "starcoder2": starcoder2,
    "phi": phi, "stablelm": stablelm, "persimmon": persimmon, "nemotron": nemotron, "gpt_oss": gpt_oss,
    "llama4_text": llama4_text,
}
ALL_READERS: dict[str, Callable[[Config], dict]] = families.READERS | READERS
