"""One reader per transformers ``model_type``: config.json keys -> ModelCard fields, as the modeling code uses them.

Each reader returns the architecture fields (the caller adds name, source and dtype). Shapes follow the module
definitions in transformers' ``models/<type>/modeling_<type>.py``.
"""

from __future__ import annotations

from typing import Callable

from kvplan.errors import KvplanError, clip
from kvplan.model.hf.reader import Config, activation

_LAYER_TYPES = {"sliding_attention": "sliding", "full_attention": "global"}


def _decoder_core(cfg: Config, act_keys: tuple[str, ...] = ("hidden_act",)) -> dict:
    """Keys shared by the Llama family (llama, mistral, qwen, gemma, phi3, deepseek)."""
    heads = cfg.integer("num_attention_heads")
    return dict(
        num_layers=cfg.layers("num_hidden_layers"), hidden_size=cfg.integer("hidden_size"), num_heads=heads,
        num_kv_heads=cfg.integer("num_key_value_heads") if cfg.has("num_key_value_heads") else heads,
        head_dim=cfg.optional("head_dim"), ffn_size=cfg.integer("intermediate_size"), gated_ffn=True,
        activation=activation(cfg, *act_keys), vocab_size=cfg.integer("vocab_size"),
        tie_embeddings=cfg.flag("tie_word_embeddings"), norm="rmsnorm", position="rope",
        max_position_embeddings=cfg.integer("max_position_embeddings"))


def _compress(types: list[str]) -> list[str]:
    """The shortest pattern that repeats into ``types`` (Gemma-2's 42 entries -> [sliding, global])."""
    for n in range(1, len(types) + 1):
        if all(types[i] == types[i % n] for i in range(len(types))):
            return types[:n]
    return types


def _window(cfg: Config, fallback: Callable[[int], list[str]] | None = None) -> dict:
    """Sliding-window layers: ``layer_types`` when the config lists them, else the model type's own rule."""
    n = cfg.layers("num_hidden_layers")
    if cfg.has("layer_types"):
        types = [_LAYER_TYPES[t] for t in _layer_types(cfg, n)][:n]
    elif fallback is not None:
        types = fallback(n)
    else:  # transformers' default when no layer_types: every layer sliding when sliding_window is set
        types = ["sliding" if cfg.lookup("sliding_window") else "global"] * n
    if "sliding" not in types:
        return {}
    pattern = _compress(types)  # all-sliding needs no pattern: it is the card's default once a window is set
    return {"sliding_window": cfg.integer("sliding_window"),
            "layer_pattern": None if pattern == ["sliding"] else pattern}


def _layer_types(cfg: Config, n: int) -> list[str]:
    """``layer_types``: a list of at least num_hidden_layers known names."""
    types = cfg.data["layer_types"]
    allowed = f"allowed: a list of {n} entries from {', '.join(_LAYER_TYPES)}"
    if not isinstance(types, list) or len(types) < n:
        raise KvplanError(f"{cfg.origin}: layer_types: {clip(types)} is not a list of num_hidden_layers ({n}) "
                          f"entries; {allowed}")
    unknown = [t for t in types if not isinstance(t, str) or t not in _LAYER_TYPES]
    if unknown:
        raise KvplanError(f"{cfg.origin}: layer_types: {clip(unknown[0])} unsupported; {allowed}")
    return types


def llama(cfg: Config) -> dict:
    bias = cfg.flag("attention_bias")
    return {**_decoder_core(cfg), **_window(cfg), "qkv_bias": bias, "out_bias": bias,
            "mlp_bias": cfg.flag("mlp_bias")}


def mistral(cfg: Config) -> dict:
    return {**_decoder_core(cfg), **_window(cfg)}


def mixtral(cfg: Config) -> dict:
    moe = {"num_experts": cfg.integer("num_local_experts"), "experts_per_token": cfg.integer("num_experts_per_tok"),
           "expert_ffn_size": cfg.integer("intermediate_size")}  # every Mixtral layer is sparse
    return {**_decoder_core(cfg), **_window(cfg), "moe": moe}


def qwen2(cfg: Config, every_layer: bool = False) -> dict:
    # Qwen2 attention: q/k/v with bias, o_proj without. use_sliding_window false disables the window
    # (Qwen2Config sets sliding_window None); layers >= max_window_layers slide when it is on (every layer for
    # Qwen3-MoE, which has no max_window_layers).
    on = cfg.flag("use_sliding_window")

    def rule(n: int) -> list[str]:
        first = 0 if every_layer else cfg.integer("max_window_layers", minimum=0)
        return ["sliding" if on and cfg.lookup("sliding_window") and i >= first else "global" for i in range(n)]

    if not on:
        cfg.data.pop("layer_types", None)  # cfg.data is the importer's own copy, never the caller's dict
    return {**_decoder_core(cfg), **_window(cfg, rule), "qkv_bias": True}


def _qwen_moe(cfg: Config, shared: bool) -> dict:
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
    return {**qwen2(cfg), **_qwen_moe(cfg, shared=True)}


def qwen3(cfg: Config, every_layer: bool = False) -> dict:
    bias = cfg.flag("attention_bias")
    return {**qwen2(cfg, every_layer), "qkv_bias": bias, "out_bias": bias, "qk_norm": True}


def qwen3_moe(cfg: Config) -> dict:
    return {**qwen3(cfg, every_layer=True), **_qwen_moe(cfg, shared=False)}


def gemma(cfg: Config) -> dict:
    return {**_decoder_core(cfg, ("hidden_activation", "hidden_act")), **_window(cfg)}


def gemma2(cfg: Config) -> dict:
    # Gemma2 without layer_types: even layers slide, odd layers are global; four norms per block.
    alternate = lambda n: ["sliding" if (i + 1) % 2 else "global" for i in range(n)]  # noqa: E731
    return {**gemma(cfg), **_window(cfg, alternate), "norms_per_layer": 4}


def gemma3_text(cfg: Config) -> dict:
    # Gemma3 without layer_types: layer i is global iff (i + 1) % sliding_window_pattern == 0.
    every = cfg.integer("sliding_window_pattern") if cfg.has("sliding_window_pattern") else 6
    pattern = lambda n: ["sliding" if (i + 1) % every else "global" for i in range(n)]  # noqa: E731
    return {**gemma(cfg), **_window(cfg, pattern), "norms_per_layer": 4, "qk_norm": True}


def phi3(cfg: Config) -> dict:
    return {**_decoder_core(cfg), **_window(cfg)}  # fused qkv_proj and gate_up_proj: same shapes, no biases


def deepseek(cfg: Config) -> dict:
    freq = cfg.data.get("moe_layer_freq", 1)
    if type(freq) is not int or freq != 1:  # DeepSeek's every-layer MoE after first_k_dense_replace
        raise KvplanError(f"{cfg.origin}: moe_layer_freq {clip(freq)} unsupported; allowed: 1")
    mla = {k: cfg.integer(k) for k in ("kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim")}
    if "q_lora_rank" not in cfg.data:  # transformers' default is 1536 (compressed): a config must say which
        raise KvplanError(f"{cfg.origin}: missing key 'q_lora_rank' (null for no query compression), which a "
                          f"{cfg.model_type} card needs")
    mla["q_lora_rank"] = cfg.optional("q_lora_rank", minimum=0) or None  # null or 0: no query compression
    moe = {"num_experts": cfg.integer("n_routed_experts"), "experts_per_token": cfg.integer("num_experts_per_tok"),
           "expert_ffn_size": cfg.integer("moe_intermediate_size"),
           "num_shared_experts": cfg.integer("n_shared_experts", minimum=0),
           "first_dense_layers": cfg.integer("first_k_dense_replace", minimum=0)}
    core = _decoder_core(cfg)
    core["num_kv_heads"] = core["num_heads"]  # nominal for MLA: the cache holds one latent per token
    core.pop("head_dim")  # MLA heads are qk_nope + qk_rope wide for Q/K and v_head_dim for V: the mla block says so
    bias = cfg.flag("attention_bias")  # q_a_proj, kv_a_proj_with_mqa and o_proj (kvplan.cost.shapes.mla_matrices)
    # transformers 5.24 DeepseekV2/V3PreTrainedModel._keep_in_fp32_modules_strict: "gate.weight" (kvplan.cost.fp32)
    return {**core, "mla": mla, "moe": moe, "qkv_bias": bias, "out_bias": bias, "hf_fp32": ("router",)}


def falcon(cfg: Config) -> dict:
    """Falcon, including the legacy RefinedWeb (40B) and RefinedWebModel (7B) configs' key names."""
    heads, hidden = cfg.integer("num_attention_heads", "n_head"), cfg.integer("hidden_size", "n_embed")
    new_arch = cfg.flag("new_decoder_architecture") or cfg.model_type == "RefinedWeb"
    if new_arch:
        kv = cfg.integer("num_kv_heads", "n_head_kv")
        norms = cfg.integer("num_ln_in_parallel_attn") if cfg.has("num_ln_in_parallel_attn") else 2
    else:
        kv = 1 if cfg.flag("multi_query") else heads
        norms = 1 if cfg.flag("parallel_attn") else 2  # input_layernorm (+ post_attention_layernorm)
    bias = cfg.flag("bias")
    return dict(
        num_layers=cfg.layers("num_hidden_layers", "n_layer"), hidden_size=hidden, num_heads=heads, num_kv_heads=kv,
        head_dim=cfg.optional("head_dim"), ffn_size=cfg.optional("ffn_hidden_size") or 4 * hidden, gated_ffn=False,
        activation="gelu", vocab_size=cfg.integer("vocab_size"), tie_embeddings=cfg.flag("tie_word_embeddings"),
        norm="layernorm", norms_per_layer=norms, qkv_bias=bias, out_bias=bias, mlp_bias=bias,
        position="alibi" if cfg.flag("alibi") else "rope",
        max_position_embeddings=cfg.integer("max_position_embeddings"),
        # transformers' FalconAttention broadcasts K/V to all query heads before the cache update when
        # new_decoder_architecture is set, so its cache holds num_heads K/V heads (vLLM holds num_kv_heads).
        hf_kv_heads=heads if new_arch and kv != heads else None)


def gpt2(cfg: Config) -> dict:
    hidden = cfg.integer("n_embd", "hidden_size")  # GPT2Config.attribute_map accepts the generic names too
    return dict(num_layers=cfg.layers("n_layer", "num_hidden_layers"), hidden_size=hidden,
                num_heads=cfg.integer("n_head", "num_attention_heads"),
                ffn_size=cfg.optional("n_inner") or 4 * hidden, gated_ffn=False,
                activation=activation(cfg, "activation_function"), vocab_size=cfg.integer("vocab_size"),
                tie_embeddings=cfg.flag("tie_word_embeddings"), norm="layernorm", position="learned",
                max_position_embeddings=cfg.integer("n_positions", "max_position_embeddings"), qkv_bias=True,
                out_bias=True, mlp_bias=True)


def gpt_neox(cfg: Config) -> dict:
    bias = cfg.flag("attention_bias")
    return dict(num_layers=cfg.layers("num_hidden_layers"), hidden_size=cfg.integer("hidden_size"),
                num_heads=cfg.integer("num_attention_heads"), ffn_size=cfg.integer("intermediate_size"),
                gated_ffn=False, activation=activation(cfg, "hidden_act"), vocab_size=cfg.integer("vocab_size"),
                tie_embeddings=cfg.flag("tie_word_embeddings"), norm="layernorm", position="rope",
                max_position_embeddings=cfg.integer("max_position_embeddings"), qkv_bias=bias, out_bias=bias,
                mlp_bias=True)


def gptj(cfg: Config) -> dict:
    hidden = cfg.integer("n_embd")  # parallel attention + MLP after one ln_1; biased MLP and LM head
    return dict(num_layers=cfg.layers("n_layer"), hidden_size=hidden, num_heads=cfg.integer("n_head"),
                ffn_size=cfg.optional("n_inner") or 4 * hidden, gated_ffn=False,
                activation=activation(cfg, "activation_function"), vocab_size=cfg.integer("vocab_size"),
                tie_embeddings=cfg.flag("tie_word_embeddings"), lm_head_bias=True, norm="layernorm",
                norms_per_layer=1, position="rope", max_position_embeddings=cfg.integer("n_positions"), mlp_bias=True)


def opt(cfg: Config) -> dict:
    hidden = cfg.integer("hidden_size")
    if (cfg.optional("word_embed_proj_dim") or hidden) != hidden:
        raise KvplanError(f"{cfg.origin}: word_embed_proj_dim != hidden_size (OPT-350m's projections) unsupported")
    bias = cfg.flag("enable_bias")
    remove_final = cfg.check_flag("_remove_final_layer_norm", cfg.data.get("_remove_final_layer_norm", False))
    return dict(num_layers=cfg.layers("num_hidden_layers"), hidden_size=hidden,
                num_heads=cfg.integer("num_attention_heads"), ffn_size=cfg.integer("ffn_dim"), gated_ffn=False,
                activation=activation(cfg, "activation_function"), vocab_size=cfg.integer("vocab_size"),
                tie_embeddings=cfg.flag("tie_word_embeddings"), norm="layernorm",
                final_norm=cfg.flag("do_layer_norm_before") and not remove_final, position="learned",
                max_position_embeddings=cfg.integer("max_position_embeddings"),
                learned_position_offset=2,  # OPTLearnedPositionalEmbedding: num_embeddings + 2 rows
                qkv_bias=bias, out_bias=bias, mlp_bias=bias)


def bloom(cfg: Config) -> dict:
    hidden = cfg.integer("hidden_size", "n_embed")
    if not cfg.has("seq_length"):
        cfg.assumed.append("max_position_embeddings=2048 (ALiBi has no limit; BLOOM trained at 2048)")
    return dict(num_layers=cfg.layers("n_layer", "num_hidden_layers"), hidden_size=hidden,
                num_heads=cfg.integer("n_head", "num_attention_heads"), ffn_size=4 * hidden, gated_ffn=False,
                activation="gelu_tanh", vocab_size=cfg.integer("vocab_size"),
                tie_embeddings=cfg.flag("tie_word_embeddings"), norm="layernorm", embedding_norm=True,
                position="alibi", max_position_embeddings=cfg.optional("seq_length") or 2048,
                qkv_bias=True, out_bias=True, mlp_bias=True)


def mpt(cfg: Config) -> dict:
    """transformers' MptModel: FFN 4 x d_model, no biases, ALiBi, whatever expansion_ratio, no_bias and
    attn_config.alibi say; a config that says otherwise is refused rather than sized for a model transformers
    does not build."""
    hidden = cfg.integer("d_model")
    attn = cfg.data.get("attn_config")
    if attn is not None and not isinstance(attn, dict):
        raise KvplanError(f"{cfg.origin}: attn_config: {clip(attn)} is not a mapping; allowed: a mapping or null")
    alibi = cfg.check_flag("attn_config.alibi", (attn or {}).get("alibi", True))
    _mpt_as_built(cfg, "expansion_ratio", cfg.number("expansion_ratio"), 4, "an FFN of 4 x d_model")
    _mpt_as_built(cfg, "no_bias", cfg.flag("no_bias"), True, "no biases")
    _mpt_as_built(cfg, "attn_config.alibi", alibi, True, "ALiBi positions")
    return dict(num_layers=cfg.layers("n_layers"), hidden_size=hidden, num_heads=cfg.integer("n_heads"),
                ffn_size=4 * hidden, gated_ffn=False, activation="gelu", vocab_size=cfg.integer("vocab_size"),
                tie_embeddings=True,  # MPT has no separate LM head
                norm="layernorm_nobias",  # MptBlock sets norm_1.bias = norm_2.bias = None
                position="alibi", max_position_embeddings=cfg.integer("max_seq_len"))


def _mpt_as_built(cfg: Config, key: str, value: object, built: object, what: str) -> None:
    if value != built:
        raise KvplanError(f"{cfg.origin}: {key} {clip(value)} unsupported: transformers' MPT ignores it and builds "
                          f"{what}; allowed: {str(built).lower()}")


def t5(cfg: Config) -> dict:
    proj = cfg.text("feed_forward_proj")
    gated = proj.startswith("gated-")
    act = proj.removeprefix("gated-")
    act = "gelu_tanh" if gated and act == "gelu" else activation(Config({"a": act}, "t5", cfg.origin), "a")
    layers = cfg.layers("num_layers")
    if not cfg.has("n_positions"):
        cfg.assumed.append("max_position_embeddings=512 (T5's relative positions have no hard limit; trained at 512)")
    return dict(architecture="encoder-decoder", num_layers=cfg.optional("num_decoder_layers") or layers,
                num_encoder_layers=layers, hidden_size=cfg.integer("d_model"), num_heads=cfg.integer("num_heads"),
                head_dim=cfg.integer("d_kv"), ffn_size=cfg.integer("d_ff"), gated_ffn=gated, activation=act,
                vocab_size=cfg.integer("vocab_size"), tie_embeddings=cfg.flag("tie_word_embeddings"), norm="rmsnorm",
                position="relative", relative_attention_num_buckets=cfg.integer("relative_attention_num_buckets"),
                max_position_embeddings=cfg.optional("n_positions") or 512,
                hf_fp32=("ffn_out",))  # T5PreTrainedModel._keep_in_fp32_modules = ["wo"] (fp16 loads)


def bert(cfg: Config) -> dict:
    # BertModel: embeddings (+ token types, LayerNorm), post-LN blocks, pooler; no final norm.
    return dict(architecture="encoder-only", num_layers=cfg.layers("num_hidden_layers"),
                hidden_size=cfg.integer("hidden_size"), num_heads=cfg.integer("num_attention_heads"),
                ffn_size=cfg.integer("intermediate_size"), gated_ffn=False, activation=activation(cfg, "hidden_act"),
                vocab_size=cfg.integer("vocab_size"), tie_embeddings=True, norm="layernorm", final_norm=False,
                embedding_norm=True, pooler=True, type_vocab_size=cfg.integer("type_vocab_size", minimum=0),
                position="learned", max_position_embeddings=cfg.integer("max_position_embeddings"), qkv_bias=True,
                out_bias=True, mlp_bias=True)


READERS: dict[str, Callable[[Config], dict]] = {
    "llama": llama, "mistral": mistral, "mixtral": mixtral, "qwen2": qwen2, "qwen2_moe": qwen2_moe,
    "qwen3": qwen3, "qwen3_moe": qwen3_moe, "gemma": gemma, "gemma2": gemma2, "gemma3_text": gemma3_text,
    "phi3": phi3, "deepseek_v2": deepseek, "deepseek_v3": deepseek, "falcon": falcon, "RefinedWeb": falcon,
    "RefinedWebModel": falcon, "gpt2": gpt2, "gpt_neox": gpt_neox, "gptj": gptj, "opt": opt, "bloom": bloom,
    "mpt": mpt, "t5": t5, "bert": bert,
}
