"""Readers for linear-attention hybrids (Qwen3-Next's Gated DeltaNet, LFM2's short convolutions, MiniMax's lightning
attention, RecurrentGemma's RG-LRU), as transformers 5.x builds them: config.json keys -> card fields, with an
``ssm:`` block of that kind (kvplan.model.ssm) for the state layers and (local or full) attention elsewhere.

Layer rules:

- Qwen3-Next (modeling_qwen3_next.py): ``layer_types`` ("linear_attention" -> Gated DeltaNet, "full_attention"), else
  every ``full_attention_interval``-th layer (default 4) attends; the attention's q_proj also emits an output gate
  (twice as wide), with per-head q/k norms; every layer's FFN is a Qwen2-MoE block (routed experts plus a gated
  shared expert), or a dense MLP when num_experts is 0. Qwen3.5 (qwen3_5_text, qwen3_5_moe_text; the multimodal
  qwen3_5 / qwen3_5_moe configs import their text_config) builds the same layers: dense, or MoE in every layer.
- LFM2 (modeling_lfm2.py): ``layer_types`` ("conv" -> a short conv, "full_attention"), else the layers in
  ``full_attn_idxs`` attend (default: all); the MLP's width is adjusted from intermediate_size (``Lfm2MLP``); the
  final norm is called embedding_norm. LFM2-MoE: ``layer_types`` required; dense MLPs in the first
  num_dense_layers, routed experts after.
- MiniMax (modeling_minimax.py): ``layer_types`` ("linear_attention" -> lightning attention), else even layers
  attend and odd ones are linear (MiniMaxConfig.__post_init__); every FFN is a Mixtral-style MoE. Its cache,
  MiniMaxCache, keeps the linear states in its own ``linear_cache`` list beside ``layers``.
- RecurrentGemma (modeling_recurrent_gemma.py): ``block_types`` repeated over the layers ("recurrent" -> an RG-LRU
  block, "attention" -> local attention over attention_window_size); the RG-LRU states live on the modules, not in
  the cache object.

``ALL_READERS`` extends families_hybrid's chain.
"""

from __future__ import annotations

from typing import Callable

from kvplan.errors import KvplanError, clip
from kvplan.model.card import MAX_COUNT
from kvplan.model.hf import families_hybrid
from kvplan.model.hf.families import _compress, _decoder_core, _qwen_moe
from kvplan.model.hf.reader import Config


def _types(cfg: Config, names: dict[str, str], fallback: Callable[[int], list[str]]) -> list[str]:
    """``layer_types`` mapped to card layer types (one known entry per layer), else the config class's rule."""
    n = cfg.layers("num_hidden_layers")
    raw = cfg.data.get("layer_types")
    if raw is None:
        types = fallback(n)
        cfg.assumed.append(f"layer_types={_compress(types)!r} repeated (the {cfg.model_type} config class's rule)")
        return types
    if not isinstance(raw, list) or len(raw) != n or any(t not in names for t in raw):
        raise KvplanError(f"{cfg.origin}: layer_types: {clip(raw)} is not a list of num_hidden_layers ({n}) layer "
                          f"types; allowed: {', '.join(names)}")
    return [names[t] for t in raw]


def qwen3_next(cfg: Config) -> dict:
    experts = cfg.integer("num_experts", minimum=0)
    return _gated_deltanet_hybrid(cfg, _qwen_moe(cfg, shared=True) if experts else {})


def qwen3_5_text(cfg: Config) -> dict:
    return _qwen3_5_state_dtype(cfg, _gated_deltanet_hybrid(cfg, {}))  # Qwen3.5 dense: a gated MLP in every layer


def qwen3_5_moe_text(cfg: Config) -> dict:
    # every layer MoE with a gated shared expert; the config has no dense intermediate_size (no layer reads it)
    moe = {"num_experts": cfg.integer("num_experts"), "experts_per_token": cfg.integer("num_experts_per_tok"),
           "expert_ffn_size": cfg.integer("moe_intermediate_size"), "num_shared_experts": 1,
           "shared_expert_ffn_size": cfg.integer("shared_expert_intermediate_size"), "shared_expert_gate": True}
    own = Config({"intermediate_size": moe["expert_ffn_size"], **cfg.data}, cfg.model_type, cfg.origin)
    own.assumed = cfg.assumed  # one record of the defaults assumed
    return _qwen3_5_state_dtype(cfg, _gated_deltanet_hybrid(own, {"moe": moe}))


def _qwen3_5_state_dtype(cfg: Config, fields: dict) -> dict:
    """Qwen3.5's ``mamba_ssm_dtype`` (float32 in the published configs): vLLM keeps the recurrent state in it when
    mamba_ssm_cache_dtype is "auto" (model_executor/models/config.py, the Qwen3.5 rewrite of mamba_ssm_cache_dtype;
    qwen3_5.py get_mamba_state_dtype_from_config). transformers' torch path keeps it in float32 either way."""
    raw = cfg.data.get("mamba_ssm_dtype")
    if raw is None:
        return fields
    if raw not in ("float32", "float16", "bfloat16"):
        raise KvplanError(f"{cfg.origin}: mamba_ssm_dtype {clip(raw)} unsupported; allowed: float32, float16, "
                          "bfloat16")
    return {**fields, "ssm": {**fields["ssm"], "state_dtype": raw}}


def _gated_deltanet_hybrid(cfg: Config, ffn: dict) -> dict:
    """Qwen3-Next and Qwen3.5 text: Gated DeltaNet layers and every full_attention_interval-th gated attention (q/k
    norms); Qwen3.5 splits in_proj_qkvz / in_proj_ba into four projections of the same total size."""
    def fallback(n: int) -> list[str]:  # the config classes' __post_init__ pop full_attention_interval (default 4)
        every = cfg.optional("full_attention_interval") or 4
        return ["global" if (i + 1) % every == 0 else "mamba" for i in range(n)]

    types = _types(cfg, {"linear_attention": "mamba", "full_attention": "global"}, fallback)
    heads, width = cfg.integer("linear_num_value_heads"), cfg.integer("linear_value_head_dim")
    ssm = {"kind": "gated_deltanet", "d_state": cfg.integer("linear_key_head_dim"),
           "n_groups": cfg.integer("linear_num_key_heads"), "num_heads": heads, "head_dim": width,
           "intermediate_size": heads * width, "d_conv": cfg.integer("linear_conv_kernel_dim"), "conv_bias": False}
    bias = cfg.flag("attention_bias")
    return {**_decoder_core(cfg), "head_dim": cfg.integer("head_dim"), "layer_pattern": _compress(types),
            "ssm": ssm, "qk_norm": True, "attention_output_gate": True, "qkv_bias": bias, "out_bias": bias, **ffn}


def lfm2(cfg: Config) -> dict:
    def fallback(n: int) -> list[str]:
        idxs = cfg.data.get("full_attn_idxs")
        idxs = list(range(n)) if idxs is None else idxs
        if not isinstance(idxs, list) or any(type(i) is not int for i in idxs):
            raise KvplanError(f"{cfg.origin}: full_attn_idxs: {clip(idxs)} is not a list of layer indices")
        return ["global" if i in idxs else "mamba" for i in range(n)]

    return _short_conv_hybrid(cfg, _types(cfg, _LFM2_TYPES, fallback), _lfm2_ffn(cfg), {})


def lfm2_moe(cfg: Config) -> dict:
    # Lfm2MoeMLP of intermediate_size (no width adjustment) in the first num_dense_layers, then routed experts
    # (router without bias; its expert_bias is a buffer) of moe_intermediate_size; no shared expert
    def required(n: int) -> list[str]:
        raise KvplanError(f"{cfg.origin}: missing key 'layer_types', which an lfm2_moe card needs (its modeling "
                          "reads it per layer)")

    moe = {"num_experts": cfg.integer("num_experts"), "experts_per_token": cfg.integer("num_experts_per_tok"),
           "expert_ffn_size": cfg.integer("moe_intermediate_size"),
           "first_dense_layers": cfg.integer("num_dense_layers", minimum=0)}
    return _short_conv_hybrid(cfg, _types(cfg, _LFM2_TYPES, required), cfg.integer("intermediate_size"), {"moe": moe})


_LFM2_TYPES = {"conv": "mamba", "full_attention": "global"}


def _short_conv_hybrid(cfg: Config, types: list[str], ffn: int, extra: dict) -> dict:
    """LFM2 layers: short convs and attention with q/k norms; SiLU gated MLPs (w1, w3, w2)."""
    bias = cfg.flag("conv_bias")
    ssm = {"kind": "short_conv", "d_conv": cfg.integer("conv_L_cache"), "conv_bias": bias, "proj_bias": bias}
    # F.silu; the tie_embedding kwarg wins over tie_word_embeddings (the config classes' __post_init__)
    data = {**cfg.data, "hidden_act": "silu", "intermediate_size": ffn,
            "tie_word_embeddings": cfg.flag("tie_embedding", "tie_word_embeddings")}
    own = Config(data, cfg.model_type, cfg.origin)
    own.assumed = cfg.assumed  # one record of the defaults assumed
    return {**_decoder_core(own), "layer_pattern": _compress(types), "ssm": ssm if "mamba" in types else None,
            "qk_norm": True, **extra}


def _lfm2_ffn(cfg: Config) -> int:
    """Lfm2MLP's width: 2/3 of intermediate_size, scaled by block_ffn_dim_multiplier and rounded up to
    block_multiple_of when a multiplier is set."""
    ffn = cfg.integer("block_ff_dim", "intermediate_size")
    if not cfg.flag("block_auto_adjust_ff_dim"):
        return ffn
    ffn = int(2 * ffn / 3)
    mult = cfg.lookup("block_ffn_dim_multiplier")
    if mult is None:
        return ffn
    if type(mult) not in (int, float) or not 0 < mult < 1000:
        raise KvplanError(f"{cfg.origin}: block_ffn_dim_multiplier: {clip(mult)} is not a positive number")
    step = cfg.integer("block_multiple_of")
    return step * ((int(mult * ffn) + step - 1) // step)


def minimax(cfg: Config) -> dict:
    if cfg.data.get("layer_types") is None and cfg.data.get("attn_type_list") is not None:
        raise KvplanError(f"{cfg.origin}: attn_type_list (MiniMax's remote-code key) is ignored by transformers 5.x, "
                          "which would build alternating layers instead; allowed: give layer_types "
                          "(linear_attention / full_attention per layer)")
    if cfg.lookup("sliding_window") is not None:
        raise KvplanError(f"{cfg.origin}: sliding_window: {clip(cfg.data['sliding_window'])} is not modelled for "
                          "minimax; allowed: null")
    types = _types(cfg, {"linear_attention": "mamba", "full_attention": "global"},
                   lambda n: ["global" if (i + 1) % 2 else "mamba" for i in range(n)])
    core = _decoder_core(cfg)
    heads = core["num_heads"]
    width = core["head_dim"] or core["hidden_size"] // heads
    ssm = {"kind": "lightning", "num_heads": heads, "head_dim": width, "intermediate_size": heads * width}
    moe = {"num_experts": cfg.integer("num_local_experts", "num_experts"),
           "experts_per_token": cfg.integer("num_experts_per_tok"), "expert_ffn_size": cfg.integer("intermediate_size")}
    return {**core, "layer_pattern": _compress(types), "ssm": ssm, "moe": moe}


def recurrent_gemma(cfg: Config) -> dict:
    n = cfg.layers("num_hidden_layers")
    blocks = cfg.get("block_types")
    if not isinstance(blocks, (list, tuple)) or not blocks or any(b not in ("recurrent", "attention") for b in blocks):
        raise KvplanError(f"{cfg.origin}: block_types: {clip(blocks)} is not a list of block types; allowed: "
                          "recurrent, attention")
    types = [("mamba" if b == "recurrent" else "sliding") for b in (list(blocks) * n)[:n]]  # layers_block_type
    heads = cfg.integer("num_attention_heads")
    hidden = cfg.integer("hidden_size")
    width = cfg.optional("lru_width") or hidden  # RecurrentGemmaConfig.__post_init__
    ssm = {"kind": "rglru", "intermediate_size": width, "num_heads": heads, "d_conv": cfg.integer("conv1d_width"),
           "conv_bias": True, "proj_bias": True}
    # RecurrentGemmaMlp: gate/up/down with biases, intermediate_size // 2 wide; o_proj always biased; head_dim is
    # hidden / heads whatever the file says; no position limit (the config class has no max_position_embeddings)
    data = {"max_position_embeddings": MAX_COUNT, **cfg.data, "head_dim": hidden // heads,
            "intermediate_size": cfg.integer("intermediate_size") // 2}
    own = Config(data, cfg.model_type, cfg.origin)
    own.assumed = cfg.assumed  # one record of the defaults assumed
    core = _decoder_core(own, ("hidden_activation",))
    pattern = _compress(types)
    return {**core, "layer_pattern": None if pattern == ["sliding"] else pattern, "ssm": ssm if "mamba" in types else
            None, "sliding_window": cfg.integer("attention_window_size") if "sliding" in types else None,
            "qkv_bias": cfg.flag("attention_bias"), "out_bias": True, "mlp_bias": True}


READERS: dict[str, Callable[[Config], dict]] = {
    "qwen3_next": qwen3_next, "qwen3_5_text": qwen3_5_text, "qwen3_5_moe_text": qwen3_5_moe_text, "lfm2": lfm2,
    "lfm2_moe": lfm2_moe, "minimax": minimax, "recurrent_gemma": recurrent_gemma,
}
ALL_READERS: dict[str, Callable[[Config], dict]] = families_hybrid.ALL_READERS | READERS
