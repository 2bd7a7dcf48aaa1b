"""Linear-attention hybrids (Qwen3-Next's Gated DeltaNet, LFM2's short convolutions, MiniMax's lightning
attention, RecurrentGemma's RG-LRU, Kimi-Linear's KDA + MLA, OLMo-hybrid's Gated DeltaNet), as transformers 5.x
builds them: config.json keys -> card fields, with an ``ssm:`` block of that kind (kvplan.model.ssm) for the state layers and (local or full) attention elsewhere.

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

``DEFAULTS``: the behavioural keys, conv kernels, MoE / dense-layer knobs and layer rules a config.json may omit (never
the hidden, head, latent or expert widths), from the transformers 5.23 config classes: a field's default, or the value
``__post_init__`` makes of it (Qwen3-Next's mlp_only_layers None -> []). Kimi-Linear's are stored under the names
``to_dict`` writes (its attribute_map: num_experts_per_tok -> num_experts_per_token, n_shared_experts ->
num_shared_experts, max_position_embeddings -> model_max_length); first_k_dense_replace is the ``__post_init__`` kwarg
default (1). Checked in tests/test_state_layers_kimi.py. Qwen3-Next's and Qwen3.5's partial_rotary_factor 0.25 is the
default rope_parameters entry of their config classes (transformers 5.24, ``Qwen3NextConfig().rope_parameters``).
"""

from __future__ import annotations

from typing import Callable

from kvplan.errors import KvplanError, clip
from kvplan.model.card import MAX_COUNT
from kvplan.model.hf.families.core import compress, decoder_core
from kvplan.model.hf.families.moe import qwen_moe
from kvplan.model.hf.reader import Config


def _types(cfg: Config, names: dict[str, str], fallback: Callable[[int], list[str]]) -> list[str]:
    """``layer_types`` mapped to card layer types (one known entry per layer), else the config class's rule."""
    n = cfg.layers("num_hidden_layers")
    raw = cfg.data.get("layer_types")
    if raw is None:
        types = fallback(n)
        cfg.assumed.append(f"layer_types={compress(types)!r} repeated (the {cfg.model_type} config class's rule)")
        return types
    if not isinstance(raw, list) or len(raw) != n or any(t not in names for t in raw):
        raise KvplanError(f"{cfg.origin}: layer_types: {clip(raw)} is not a list of num_hidden_layers ({n}) layer "
                          f"types; allowed: {', '.join(names)}")
    return [names[t] for t in raw]


def qwen3_next(cfg: Config) -> dict:
    experts = cfg.integer("num_experts", minimum=0)
    return _gated_deltanet_hybrid(cfg, qwen_moe(cfg, shared=True) if experts else {})


def qwen3_5_text(cfg: Config) -> dict:
    return _qwen3_5_state_dtype(cfg, _gated_deltanet_hybrid(cfg, {}))  # Qwen3.5 dense: a gated MLP in every layer


def qwen3_5_moe_text(cfg: Config) -> dict:
    # every layer MoE with a gated shared expert; the config has no dense intermediate_size (no layer reads it)
    moe = {"num_experts": cfg.integer("num_experts"), "experts_per_token": cfg.integer("num_experts_per_tok"),
           "expert_ffn_size": cfg.integer("moe_intermediate_size"), "num_shared_experts": 1,
           "shared_expert_ffn_size": cfg.integer("shared_expert_intermediate_size"), "shared_expert_gate": True}
    own = cfg.derive({"intermediate_size": moe["expert_ffn_size"], **cfg.data})
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
    return {**decoder_core(cfg), "layer_pattern": compress(types),
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
    own = cfg.derive(data)
    return {**decoder_core(own), "layer_pattern": compress(types), "ssm": ssm if "mamba" in types else None,
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
    core = decoder_core(cfg)
    heads = core["num_heads"]
    width = core["head_dim"] or core["hidden_size"] // heads
    ssm = {"kind": "lightning", "num_heads": heads, "head_dim": width, "intermediate_size": heads * width}
    moe = {"num_experts": cfg.integer("num_local_experts", "num_experts"),
           "experts_per_token": cfg.integer("num_experts_per_tok"), "expert_ffn_size": cfg.integer("intermediate_size")}
    return {**core, "layer_pattern": compress(types), "ssm": ssm, "moe": moe}


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
    own = cfg.derive(data)
    core = decoder_core(own, ("hidden_activation",))
    pattern = compress(types)
    return {**core, "layer_pattern": None if pattern == ["sliding"] else pattern, "ssm": ssm if "mamba" in types else
            None, "sliding_window": cfg.integer("attention_window_size") if "sliding" in types else None,
            "qkv_bias": cfg.flag("attention_bias"), "out_bias": True, "mlp_bias": True}


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
    data = {**cfg.data,  # its head_dim is qk_rope_head_dim: unused (decoder_core's latent)
            "max_position_embeddings": cfg.integer("model_max_length", "max_position_embeddings")}
    if cfg.flag("tie_word_embeddings"):  # KimiLinearForCausalLM._tied_weights_keys = {}: lm_head stays its own
        cfg.assumed.append("tie_word_embeddings=false (KimiLinearForCausalLM ties no weights; the file's true is "
                           "ignored)")
    data["tie_word_embeddings"] = False
    own = cfg.derive(data)
    bias, moe = cfg.flag("attention_bias"), _kimi_moe(cfg)
    # _keep_in_fp32_modules_strict = ["e_score_correction_bias", "gate.weight", "dt_bias"] (kvplan.cost.fp32)
    fp32 = ("router",) * (moe is not None) + ("dt_bias",) * ("mamba" in types)
    return {**decoder_core(own, latent=True), "position": "none", "layer_pattern": compress(types),
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
    return {**decoder_core(cfg), "layer_pattern": compress(types), "ssm": ssm, "qk_norm": True,
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


READERS: dict[str, Callable[[Config], dict]] = {
    "qwen3_next": qwen3_next, "qwen3_5_text": qwen3_5_text, "qwen3_5_moe_text": qwen3_5_moe_text, "lfm2": lfm2,
    "lfm2_moe": lfm2_moe, "minimax": minimax, "recurrent_gemma": recurrent_gemma, "kimi_linear": kimi_linear,
    "olmo_hybrid": olmo_hybrid,
}

DEFAULTS: dict[str, dict] = {
    "qwen3_next": {"num_key_value_heads": 2, "head_dim": 256, "attention_bias": False, "decoder_sparse_step": 1,
                   "hidden_act": "silu", "linear_conv_kernel_dim": 4, "max_position_embeddings": 32768,
                   "mlp_only_layers": [], "num_experts_per_tok": 10, "tie_word_embeddings": False,
                   "partial_rotary_factor": 0.25},
    "qwen3_5_text": {"num_key_value_heads": 4, "head_dim": 256, "attention_bias": False, "hidden_act": "silu",
                     "linear_conv_kernel_dim": 4, "max_position_embeddings": 32768, "tie_word_embeddings": False,
                     "partial_rotary_factor": 0.25},
    "qwen3_5_moe_text": {"num_key_value_heads": 2, "head_dim": 256, "attention_bias": False, "hidden_act": "silu",
                         "linear_conv_kernel_dim": 4, "max_position_embeddings": 32768, "tie_word_embeddings": False,
                         "num_experts_per_tok": 8, "partial_rotary_factor": 0.25},
    "lfm2": {"num_key_value_heads": 8, "block_auto_adjust_ff_dim": True, "block_ffn_dim_multiplier": 1.0,
             "block_multiple_of": 256, "conv_L_cache": 3, "conv_bias": False, "max_position_embeddings": 128000,
             "tie_word_embeddings": True},
    "lfm2_moe": {"num_key_value_heads": 8, "conv_L_cache": 3, "conv_bias": False, "max_position_embeddings": 128000,
                 "num_dense_layers": 2, "num_experts_per_tok": 4, "tie_word_embeddings": True},
    "minimax": {"num_key_value_heads": 8, "hidden_act": "silu", "max_position_embeddings": 131072,
                "num_experts_per_tok": 2, "sliding_window": None, "tie_word_embeddings": False},
    "recurrent_gemma": {"attention_bias": False, "attention_window_size": 2048,
                        "block_types": ["recurrent", "recurrent", "attention"], "conv1d_width": 4,
                        "hidden_activation": "gelu_pytorch_tanh", "tie_word_embeddings": True},
    "kimi_linear": {"attention_bias": False, "first_k_dense_replace": 1, "hidden_act": "silu",
                    "linear_conv_kernel_dim": 4, "model_max_length": 1048576, "num_experts_per_token": 8,
                    "num_shared_experts": 1, "tie_word_embeddings": False},
    "olmo_hybrid": {"attention_bias": False, "hidden_act": "silu", "linear_conv_kernel_dim": 4,
                    "max_position_embeddings": 65536, "tie_word_embeddings": False},
}
