"""One reader per transformers ``model_type``: config.json keys -> ModelCard fields, as the modeling code uses them.

Each reader returns the architecture fields (the caller adds name, source and dtype). Shapes follow the module
definitions in transformers' ``models/<type>/modeling_<type>.py``.
"""

from __future__ import annotations

from typing import Callable

from kvplan.errors import KvplanError
from kvplan.model.hf.reader import Config, activation

_LAYER_TYPES = {"sliding_attention": "sliding", "full_attention": "global"}


def _decoder_core(cfg: Config, act_keys: tuple[str, ...] = ("hidden_act",)) -> dict:
    """Keys shared by the Llama family (llama, mistral, qwen, gemma, phi3, deepseek)."""
    heads = cfg.get("num_attention_heads")
    return dict(
        num_layers=cfg.get("num_hidden_layers"), hidden_size=cfg.get("hidden_size"), num_heads=heads,
        num_kv_heads=cfg.get("num_key_value_heads") if cfg.has("num_key_value_heads") else heads,
        head_dim=cfg.data.get("head_dim"), ffn_size=cfg.get("intermediate_size"), gated_ffn=True,
        activation=activation(cfg, *act_keys), vocab_size=cfg.get("vocab_size"),
        tie_embeddings=bool(cfg.get("tie_word_embeddings")), norm="rmsnorm", position="rope",
        max_position_embeddings=cfg.get("max_position_embeddings"))


def _compress(types: list[str]) -> list[str]:
    """The shortest pattern that repeats into ``types`` (Gemma-2's 42 entries -> [sliding, global])."""
    for n in range(1, len(types) + 1):
        if all(types[i] == types[i % n] for i in range(len(types))):
            return types[:n]
    return types


def _window(cfg: Config, fallback: Callable[[int], list[str]] | None = None) -> dict:
    """Sliding-window layers: ``layer_types`` when the config lists them, else the model type's own rule."""
    n = cfg.get("num_hidden_layers")
    if cfg.has("layer_types"):
        unknown = set(cfg.data["layer_types"]) - set(_LAYER_TYPES)
        if unknown:
            raise KvplanError(f"{cfg.origin}: layer_types {sorted(unknown)} unsupported; allowed: {list(_LAYER_TYPES)}")
        types = [_LAYER_TYPES[t] for t in cfg.data["layer_types"]][:n]
    elif fallback is not None:
        types = fallback(n)
    else:  # transformers' default when no layer_types: every layer sliding when sliding_window is set
        types = ["sliding" if cfg.lookup("sliding_window") else "global"] * n
    if "sliding" not in types:
        return {}
    pattern = _compress(types)  # all-sliding needs no pattern: it is the card's default once a window is set
    return {"sliding_window": cfg.get("sliding_window"), "layer_pattern": None if pattern == ["sliding"] else pattern}


def llama(cfg: Config) -> dict:
    bias = bool(cfg.get("attention_bias"))
    return {**_decoder_core(cfg), **_window(cfg), "qkv_bias": bias, "out_bias": bias,
            "mlp_bias": bool(cfg.get("mlp_bias"))}


def mistral(cfg: Config) -> dict:
    return {**_decoder_core(cfg), **_window(cfg)}


def mixtral(cfg: Config) -> dict:
    moe = {"num_experts": cfg.get("num_local_experts"), "experts_per_token": cfg.get("num_experts_per_tok"),
           "expert_ffn_size": cfg.get("intermediate_size")}  # every Mixtral layer is sparse
    return {**_decoder_core(cfg), **_window(cfg), "moe": moe}


def qwen2(cfg: Config) -> dict:
    # Qwen2 attention: q/k/v with bias, o_proj without. use_sliding_window false disables the window
    # (Qwen2Config sets sliding_window None); layers >= max_window_layers slide when it is on.
    def rule(n: int) -> list[str]:
        on = cfg.get("use_sliding_window") and cfg.lookup("sliding_window")
        return ["sliding" if on and i >= cfg.get("max_window_layers") else "global" for i in range(n)]

    if not cfg.get("use_sliding_window"):
        cfg.data.pop("layer_types", None)
    return {**_decoder_core(cfg), **_window(cfg, rule), "qkv_bias": True}


def _qwen_moe(cfg: Config, shared: bool) -> dict:
    if cfg.get("decoder_sparse_step") != 1 or cfg.get("mlp_only_layers"):
        raise KvplanError(f"{cfg.origin}: decoder_sparse_step != 1 or mlp_only_layers set: interleaved dense/MoE "
                          "layers are not supported yet (supported: every layer MoE)")
    moe = {"num_experts": cfg.get("num_experts", "num_local_experts"), "experts_per_token": cfg.get("num_experts_per_tok"),
           "expert_ffn_size": cfg.get("moe_intermediate_size")}
    if shared:  # one shared expert of its own size, behind a sigmoid gate Linear(hidden, 1)
        moe |= {"num_shared_experts": 1, "shared_expert_ffn_size": cfg.get("shared_expert_intermediate_size"),
                "shared_expert_gate": True}
    return {"moe": moe}


def qwen2_moe(cfg: Config) -> dict:
    return {**qwen2(cfg), **_qwen_moe(cfg, shared=True)}


def qwen3(cfg: Config) -> dict:
    return {**qwen2(cfg), "qkv_bias": bool(cfg.get("attention_bias")), "out_bias": bool(cfg.get("attention_bias")),
            "qk_norm": True}


def qwen3_moe(cfg: Config) -> dict:
    return {**qwen3(cfg), **_qwen_moe(cfg, shared=False)}


def gemma(cfg: Config) -> dict:
    return {**_decoder_core(cfg, ("hidden_activation", "hidden_act")), **_window(cfg)}


def gemma2(cfg: Config) -> dict:
    # Gemma2 without layer_types: even layers slide, odd layers are global; four norms per block.
    alternate = lambda n: ["sliding" if (i + 1) % 2 else "global" for i in range(n)]  # noqa: E731
    return {**gemma(cfg), **_window(cfg, alternate), "norms_per_layer": 4}


def gemma3_text(cfg: Config) -> dict:
    # Gemma3 without layer_types: layer i is global iff (i + 1) % sliding_window_pattern == 0.
    every = cfg.get("sliding_window_pattern") if cfg.has("sliding_window_pattern") else 6
    pattern = lambda n: ["sliding" if (i + 1) % every else "global" for i in range(n)]  # noqa: E731
    return {**gemma(cfg), **_window(cfg, pattern), "norms_per_layer": 4, "qk_norm": True}


def phi3(cfg: Config) -> dict:
    return {**_decoder_core(cfg), **_window(cfg)}  # fused qkv_proj and gate_up_proj: same shapes, no biases


def deepseek(cfg: Config) -> dict:
    if cfg.data.get("moe_layer_freq", 1) != 1:  # DeepSeek's every-layer MoE after first_k_dense_replace
        raise KvplanError(f"{cfg.origin}: moe_layer_freq {cfg.data['moe_layer_freq']} unsupported; allowed: 1")
    mla = {k: cfg.get(k) for k in ("kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim")}
    mla["q_lora_rank"] = cfg.data.get("q_lora_rank") or None  # null or 0: no query compression
    moe = {"num_experts": cfg.get("n_routed_experts"), "experts_per_token": cfg.get("num_experts_per_tok"),
           "expert_ffn_size": cfg.get("moe_intermediate_size"), "num_shared_experts": cfg.get("n_shared_experts") or 0,
           "first_dense_layers": cfg.get("first_k_dense_replace")}
    core = _decoder_core(cfg)
    core["num_kv_heads"] = core["num_heads"]  # nominal for MLA: the cache holds one latent per token
    core.pop("head_dim")  # MLA heads are qk_nope + qk_rope wide for Q/K and v_head_dim for V: the mla block says so
    return {**core, "mla": mla, "moe": moe, "qkv_bias": bool(cfg.get("attention_bias"))}


def falcon(cfg: Config) -> dict:
    """Falcon, including the legacy RefinedWeb (40B) and RefinedWebModel (7B) configs' key names."""
    heads, hidden = cfg.get("num_attention_heads", "n_head"), cfg.get("hidden_size", "n_embed")
    new_arch = bool(cfg.get("new_decoder_architecture")) or cfg.model_type == "RefinedWeb"
    if new_arch:
        kv = cfg.get("num_kv_heads", "n_head_kv")
        norms = cfg.get("num_ln_in_parallel_attn") if cfg.has("num_ln_in_parallel_attn") else 2
    else:
        kv = 1 if cfg.get("multi_query") else heads
        norms = 1 if cfg.get("parallel_attn") else 2  # input_layernorm (+ post_attention_layernorm)
    bias = bool(cfg.get("bias"))
    ffn = cfg.data.get("ffn_hidden_size") or 4 * hidden
    return dict(
        num_layers=cfg.get("num_hidden_layers", "n_layer"), hidden_size=hidden, num_heads=heads, num_kv_heads=kv,
        head_dim=cfg.data.get("head_dim"), ffn_size=ffn, gated_ffn=False, activation="gelu",
        vocab_size=cfg.get("vocab_size"), tie_embeddings=bool(cfg.get("tie_word_embeddings")), norm="layernorm",
        norms_per_layer=norms, qkv_bias=bias, out_bias=bias, mlp_bias=bias,
        position="alibi" if cfg.get("alibi") else "rope", max_position_embeddings=cfg.get("max_position_embeddings"),
        # transformers' FalconAttention broadcasts K/V to all query heads before the cache update when
        # new_decoder_architecture is set, so its cache holds num_heads K/V heads (vLLM holds num_kv_heads).
        hf_kv_heads=heads if new_arch and kv != heads else None)


def gpt2(cfg: Config) -> dict:
    hidden = cfg.get("n_embd", "hidden_size")  # GPT2Config.attribute_map accepts the generic names too
    return dict(num_layers=cfg.get("n_layer", "num_hidden_layers"), hidden_size=hidden,
                num_heads=cfg.get("n_head", "num_attention_heads"),
                ffn_size=cfg.data.get("n_inner") or 4 * hidden, gated_ffn=False,
                activation=activation(cfg, "activation_function"), vocab_size=cfg.get("vocab_size"),
                tie_embeddings=bool(cfg.get("tie_word_embeddings")), norm="layernorm", position="learned",
                max_position_embeddings=cfg.get("n_positions", "max_position_embeddings"), qkv_bias=True,
                out_bias=True, mlp_bias=True)


def gpt_neox(cfg: Config) -> dict:
    bias = bool(cfg.get("attention_bias"))
    return dict(num_layers=cfg.get("num_hidden_layers"), hidden_size=cfg.get("hidden_size"),
                num_heads=cfg.get("num_attention_heads"), ffn_size=cfg.get("intermediate_size"), gated_ffn=False,
                activation=activation(cfg, "hidden_act"), vocab_size=cfg.get("vocab_size"),
                tie_embeddings=bool(cfg.get("tie_word_embeddings")), norm="layernorm", position="rope",
                max_position_embeddings=cfg.get("max_position_embeddings"), qkv_bias=bias, out_bias=bias,
                mlp_bias=True)


def gptj(cfg: Config) -> dict:
    hidden = cfg.get("n_embd")  # parallel attention + MLP after one ln_1; biased MLP and LM head
    return dict(num_layers=cfg.get("n_layer"), hidden_size=hidden, num_heads=cfg.get("n_head"),
                ffn_size=cfg.data.get("n_inner") or 4 * hidden, gated_ffn=False,
                activation=activation(cfg, "activation_function"), vocab_size=cfg.get("vocab_size"),
                tie_embeddings=bool(cfg.get("tie_word_embeddings")), lm_head_bias=True, norm="layernorm",
                norms_per_layer=1, position="rope", max_position_embeddings=cfg.get("n_positions"), mlp_bias=True)


def opt(cfg: Config) -> dict:
    hidden = cfg.get("hidden_size")
    if (cfg.data.get("word_embed_proj_dim") or hidden) != hidden:
        raise KvplanError(f"{cfg.origin}: word_embed_proj_dim != hidden_size (OPT-350m's projections) unsupported")
    bias = bool(cfg.get("enable_bias"))
    final = bool(cfg.get("do_layer_norm_before")) and not cfg.data.get("_remove_final_layer_norm", False)
    return dict(num_layers=cfg.get("num_hidden_layers"), hidden_size=hidden, num_heads=cfg.get("num_attention_heads"),
                ffn_size=cfg.get("ffn_dim"), gated_ffn=False, activation=activation(cfg, "activation_function"),
                vocab_size=cfg.get("vocab_size"), tie_embeddings=bool(cfg.get("tie_word_embeddings")),
                norm="layernorm", final_norm=final, position="learned",
                max_position_embeddings=cfg.get("max_position_embeddings"),
                learned_position_offset=2,  # OPTLearnedPositionalEmbedding: num_embeddings + 2 rows
                qkv_bias=bias, out_bias=bias, mlp_bias=bias)


def bloom(cfg: Config) -> dict:
    hidden = cfg.get("hidden_size", "n_embed")
    if not cfg.has("seq_length"):
        cfg.assumed.append("max_position_embeddings=2048 (ALiBi has no limit; BLOOM trained at 2048)")
    return dict(num_layers=cfg.get("n_layer", "num_hidden_layers"), hidden_size=hidden,
                num_heads=cfg.get("n_head", "num_attention_heads"), ffn_size=4 * hidden, gated_ffn=False,
                activation="gelu_tanh", vocab_size=cfg.get("vocab_size"),
                tie_embeddings=bool(cfg.get("tie_word_embeddings")), norm="layernorm", embedding_norm=True,
                position="alibi", max_position_embeddings=cfg.data.get("seq_length") or 2048,
                qkv_bias=True, out_bias=True, mlp_bias=True)


def mpt(cfg: Config) -> dict:
    hidden = cfg.get("d_model")
    attn = cfg.data.get("attn_config") or {}
    bias = not cfg.get("no_bias")
    return dict(num_layers=cfg.get("n_layers"), hidden_size=hidden, num_heads=cfg.get("n_heads"),
                ffn_size=cfg.get("expansion_ratio") * hidden, gated_ffn=False, activation="gelu",
                vocab_size=cfg.get("vocab_size"), tie_embeddings=True,  # MPT has no separate LM head
                norm="layernorm_nobias",  # MptBlock sets norm_1.bias = norm_2.bias = None
                position="alibi" if attn.get("alibi", True) else "learned",
                max_position_embeddings=cfg.get("max_seq_len"), qkv_bias=bias, out_bias=bias, mlp_bias=bias)


def t5(cfg: Config) -> dict:
    proj = str(cfg.get("feed_forward_proj"))
    gated = proj.startswith("gated-")
    act = proj.removeprefix("gated-")
    act = "gelu_tanh" if gated and act == "gelu" else activation(Config({"a": act}, "t5", cfg.origin), "a")
    layers = cfg.get("num_layers")
    if not cfg.has("n_positions"):
        cfg.assumed.append("max_position_embeddings=512 (T5's relative positions have no hard limit; trained at 512)")
    return dict(architecture="encoder-decoder", num_layers=cfg.data.get("num_decoder_layers") or layers,
                num_encoder_layers=layers, hidden_size=cfg.get("d_model"), num_heads=cfg.get("num_heads"),
                head_dim=cfg.get("d_kv"), ffn_size=cfg.get("d_ff"), gated_ffn=gated, activation=act,
                vocab_size=cfg.get("vocab_size"), tie_embeddings=bool(cfg.get("tie_word_embeddings")), norm="rmsnorm",
                position="relative", relative_attention_num_buckets=cfg.get("relative_attention_num_buckets"),
                max_position_embeddings=cfg.data.get("n_positions") or 512)


def bert(cfg: Config) -> dict:
    # BertModel: embeddings (+ token types, LayerNorm), post-LN blocks, pooler; no final norm.
    return dict(architecture="encoder-only", num_layers=cfg.get("num_hidden_layers"),
                hidden_size=cfg.get("hidden_size"), num_heads=cfg.get("num_attention_heads"),
                ffn_size=cfg.get("intermediate_size"), gated_ffn=False, activation=activation(cfg, "hidden_act"),
                vocab_size=cfg.get("vocab_size"), tie_embeddings=True, norm="layernorm", final_norm=False,
                embedding_norm=True, pooler=True, type_vocab_size=cfg.get("type_vocab_size"), position="learned",
                max_position_embeddings=cfg.get("max_position_embeddings"), qkv_bias=True, out_bias=True,
                mlp_bias=True)


READERS: dict[str, Callable[[Config], dict]] = {
    "llama": llama, "mistral": mistral, "mixtral": mixtral, "qwen2": qwen2, "qwen2_moe": qwen2_moe,
    "qwen3": qwen3, "qwen3_moe": qwen3_moe, "gemma": gemma, "gemma2": gemma2, "gemma3_text": gemma3_text,
    "phi3": phi3, "deepseek_v2": deepseek, "deepseek_v3": deepseek, "falcon": falcon, "RefinedWeb": falcon,
    "RefinedWebModel": falcon, "gpt2": gpt2, "gpt_neox": gpt_neox, "gptj": gptj, "opt": opt, "bloom": bloom,
    "mpt": mpt, "t5": t5, "bert": bert,
}
