"""Dense decoders, encoders and encoder-decoders (one FFN per layer, plain multi-head / grouped attention, sliding
or global), as transformers 5.x builds them: Llama, Mistral, Qwen2/3, Gemma 1-3, Phi-3, Falcon, GPT-2, GPT-NeoX,
GPT-J, OPT, BLOOM, MPT, T5, BERT, and the families of 2024-2026 (OLMo-2/3, Granite, GLM, EXAONE-4, SmolLM3,
ERNIE-4.5, Cohere2, StarCoder2, Phi-2, StableLM, Persimmon, Nemotron).

``DEFAULTS``: transformers' config-class defaults for the behavioural keys read here, and for the two sizes a config
class fills itself (num_key_value_heads, head_dim: Mistral's 8 K/V heads, Gemma's head_dim 256; ``OrNull`` where the
field also takes null; ``Config.sized``); any other size missing is an error naming the key. From the transformers
5.23-5.24 config classes; tests/test_hf_import.py checks every entry against the installed transformers and
tests/test_hf_defaults.py a config.json without the key against what transformers builds from it.
"""

from __future__ import annotations

from typing import Callable

from kvplan.errors import KvplanError, clip
from kvplan.model.hf.families.core import decoder_core, every_nth, relu2_core, window
from kvplan.model.hf.reader import Config, OrNull, activation


def llama(cfg: Config) -> dict:
    bias = cfg.flag("attention_bias")
    return {**decoder_core(cfg), **window(cfg), "qkv_bias": bias, "out_bias": bias,
            "mlp_bias": cfg.flag("mlp_bias")}


def mistral(cfg: Config) -> dict:
    return {**decoder_core(cfg), **window(cfg)}


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
    return {**decoder_core(cfg), **window(cfg, rule), "qkv_bias": True}


def qwen3(cfg: Config, every_layer: bool = False) -> dict:
    bias = cfg.flag("attention_bias")
    return {**qwen2(cfg, every_layer), "qkv_bias": bias, "out_bias": bias, "qk_norm": True}


def gemma(cfg: Config) -> dict:
    return {**decoder_core(cfg, ("hidden_activation", "hidden_act")), **window(cfg)}


def gemma2(cfg: Config) -> dict:
    # Gemma2 without layer_types: even layers slide, odd layers are global; four norms per block.
    alternate = lambda n: ["sliding" if (i + 1) % 2 else "global" for i in range(n)]  # noqa: E731
    return {**gemma(cfg), **window(cfg, alternate), "norms_per_layer": 4}


def gemma3_text(cfg: Config) -> dict:
    # Gemma3 without layer_types: layer i is global iff (i + 1) % sliding_window_pattern == 0.
    every = cfg.integer("sliding_window_pattern") if cfg.has("sliding_window_pattern") else 6
    pattern = lambda n: ["sliding" if (i + 1) % every else "global" for i in range(n)]  # noqa: E731
    layers = window(cfg, pattern)
    # vLLM / SGLang gemma3.py Gemma3Attention: a sliding layer builds get_rope(base=rope_local_base_freq,
    # rope_scaling={"rope_type": "default"}), a global one get_rope(rope_theta, config.rope_scaling): two caches
    # (a null sliding_window: no sliding layer, and its second rotary cache is not counted)
    return {**gemma(cfg), **layers, "norms_per_layer": 4, "qk_norm": True, "local_rope": bool(layers)}


def phi3(cfg: Config) -> dict:
    return {**decoder_core(cfg), **window(cfg)}  # fused qkv_proj and gate_up_proj: same shapes, no biases


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
    # the activation after "gated-", checked under the config's own key (an error names feed_forward_proj)
    act = "gelu_tanh" if gated and act == "gelu" else activation(cfg.derive({"feed_forward_proj": act}),
                                                                  "feed_forward_proj")
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


def olmo2(cfg: Config) -> dict:
    # post-norms only (post_attention / post_feedforward) and q/k RMSNorms over all heads' width
    bias = bool(cfg.get("attention_bias"))
    return {**decoder_core(cfg), "qk_norm": True, "qk_norm_width": "all_heads", "qkv_bias": bias, "out_bias": bias}


def olmo3(cfg: Config) -> dict:
    return {**olmo2(cfg), **window(cfg, every_nth(4))}


def smollm3(cfg: Config) -> dict:
    # NoPE layers (no_rope_layers[i] == 0) are cached like full attention; they slide only with use_sliding_window
    def rule(n: int) -> list[str]:
        rope = cfg.data.get("no_rope_layers") or [int((i + 1) % (cfg.data.get("no_rope_layer_interval") or 4) != 0)
                                                   for i in range(n)]
        on = cfg.get("use_sliding_window") and cfg.lookup("sliding_window")
        return ["sliding" if on and not rope[i] else "global" for i in range(n)]

    return {**decoder_core(cfg), **window(cfg, rule), **_llama_biases(cfg)}


def _llama_biases(cfg: Config) -> dict:
    bias = bool(cfg.get("attention_bias"))
    return {"qkv_bias": bias, "out_bias": bias, "mlp_bias": bool(cfg.get("mlp_bias"))}


def glm(cfg: Config) -> dict:
    return {**decoder_core(cfg), "qkv_bias": bool(cfg.get("attention_bias"))}  # o_proj has no bias


def glm4(cfg: Config) -> dict:
    return {**glm(cfg), "norms_per_layer": 4}  # + post_self_attn_layernorm and post_mlp_layernorm


def exaone4(cfg: Config) -> dict:
    pattern = cfg.get("sliding_window_pattern") if cfg.has("sliding_window_pattern") else 4
    if not isinstance(pattern, int) or isinstance(pattern, bool) or pattern < 1:
        raise KvplanError(f"{cfg.origin}: sliding_window_pattern {pattern!r} unsupported; allowed: a positive integer")
    rule = every_nth(pattern) if cfg.lookup("sliding_window") else every_nth(1)
    return {**decoder_core(cfg), **window(cfg, rule), "qk_norm": True}


def ernie4_5(cfg: Config) -> dict:
    bias = bool(cfg.get("use_bias"))
    return {**decoder_core(cfg), "qkv_bias": bias, "out_bias": bias, "mlp_bias": bias}


def cohere2(cfg: Config) -> dict:
    # parallel block: one bias-free LayerNorm; Cohere2Config sets head_dim = hidden_size // num_attention_heads
    pattern = cfg.data.get("sliding_window_pattern") or 4
    bias = bool(cfg.get("attention_bias"))
    core = {**decoder_core(cfg), "head_dim": None, "norm": "layernorm_nobias", "norms_per_layer": 1}
    hidden, heads = core["hidden_size"], core["num_heads"]
    if hidden % heads:  # floored, as transformers builds it (q_proj heads x floor rows)
        core["head_dim"] = hidden // heads
        cfg.assume(f"head_dim={hidden // heads} (hidden_size // num_attention_heads): Cohere2Config's own")
    return {**core, **window(cfg, every_nth(pattern)), "qkv_bias": bias, "out_bias": bias}


def starcoder2(cfg: Config) -> dict:
    return {**decoder_core(cfg), **window(cfg), **_plain(cfg, bool(cfg.get("use_bias")))}


def _plain(cfg: Config, bias: bool, norm: str = "layernorm") -> dict:
    """A non-gated MLP (up, down), LayerNorm and optional biases everywhere (StarCoder2, Phi-2, Nemotron)."""
    return {"gated_ffn": False, "norm": norm, "qkv_bias": bias, "out_bias": bias, "mlp_bias": bias}


def phi(cfg: Config) -> dict:
    # parallel attention + MLP after one input_layernorm; biases everywhere, LM head included
    return {**decoder_core(cfg), **_plain(cfg, True), "norms_per_layer": 1, "lm_head_bias": True,
            "qk_norm": bool(cfg.get("qk_layernorm")), "activation": activation(cfg, "hidden_act")}


def stablelm(cfg: Config) -> dict:
    if cfg.get("qk_layernorm"):
        raise KvplanError(f"{cfg.origin}: qk_layernorm true (one LayerNorm per head) unsupported; allowed: false")
    core = {**decoder_core(cfg), "head_dim": None, "norm": "layernorm"}  # head_dim = hidden_size // heads
    return {**core, "norms_per_layer": 1 if cfg.get("use_parallel_residual") else 2,
            "qkv_bias": bool(cfg.get("use_qkv_bias"))}


def persimmon(cfg: Config) -> dict:
    # fused query_key_value and dense with biases; per-head-width q/k LayerNorms with biases; relu2 MLP with biases
    core = {**relu2_core(cfg), "num_kv_heads": cfg.get("num_attention_heads"), "head_dim": None}
    return {**core, **_plain(cfg, True), "qk_norm": bool(cfg.get("qk_layernorm"))}


def nemotron(cfg: Config) -> dict:
    bias = bool(cfg.get("attention_bias"))
    return {**relu2_core(cfg), **_plain(cfg, bias), "mlp_bias": bool(cfg.get("mlp_bias"))}


READERS: dict[str, Callable[[Config], dict]] = {
    "llama": llama, "mistral": mistral, "qwen2": qwen2, "qwen3": qwen3, "gemma": gemma, "gemma2": gemma2,
    "gemma3_text": gemma3_text, "phi3": phi3, "falcon": falcon, "RefinedWeb": falcon, "RefinedWebModel": falcon,
    "gpt2": gpt2, "gpt_neox": gpt_neox, "gptj": gptj, "opt": opt, "bloom": bloom, "mpt": mpt, "t5": t5, "bert": bert,
    "olmo2": olmo2, "olmo3": olmo3, "smollm3": smollm3, "granite": llama, "glm": glm, "glm4": glm4, "exaone4": exaone4,
    "ernie4_5": ernie4_5, "cohere2": cohere2, "starcoder2": starcoder2, "phi": phi, "stablelm": stablelm,
    "persimmon": persimmon, "nemotron": nemotron,
}

DEFAULTS: dict[str, dict] = {
    "llama": {"attention_bias": False, "hidden_act": "silu", "max_position_embeddings": 2048, "mlp_bias": False,
              "tie_word_embeddings": False},
    "mistral": {"num_key_value_heads": 8, "hidden_act": "silu", "max_position_embeddings": 131072,
                "sliding_window": 4096, "tie_word_embeddings": False},
    "qwen2": {"num_key_value_heads": OrNull(32), "hidden_act": "silu", "max_position_embeddings": 32768,
              "max_window_layers": 28, "tie_word_embeddings": False, "use_sliding_window": False},
    "qwen3": {"num_key_value_heads": OrNull(32), "head_dim": 128, "attention_bias": False, "hidden_act": "silu",
              "max_position_embeddings": 32768, "max_window_layers": 28, "tie_word_embeddings": False,
              "use_sliding_window": False},
    "gemma": {"num_key_value_heads": 16, "head_dim": 256, "attention_bias": False, "hidden_act": "gelu_pytorch_tanh",
              "max_position_embeddings": 8192, "tie_word_embeddings": True},
    "gemma2": {"num_key_value_heads": 4, "head_dim": 256, "attention_bias": False,
               "hidden_activation": "gelu_pytorch_tanh", "max_position_embeddings": 8192, "sliding_window": 4096,
               "tie_word_embeddings": True},
    "gemma3_text": {"num_key_value_heads": 4, "head_dim": 256, "attention_bias": False,
                    "hidden_activation": "gelu_pytorch_tanh", "max_position_embeddings": 131072, "sliding_window": 4096,
                    "tie_word_embeddings": True},
    "phi3": {"hidden_act": "silu", "max_position_embeddings": 4096, "tie_word_embeddings": False},
    "falcon": {"alibi": False, "bias": False, "max_position_embeddings": 2048, "multi_query": True,
               "new_decoder_architecture": False, "parallel_attn": True, "tie_word_embeddings": True},
    "gpt2": {"activation_function": "gelu_new", "max_position_embeddings": 1024, "n_positions": 1024,
             "tie_word_embeddings": True},
    "gpt_neox": {"attention_bias": True, "hidden_act": "gelu", "max_position_embeddings": 2048,
                 "tie_word_embeddings": False},
    "gptj": {"activation_function": "gelu_new", "max_position_embeddings": 2048, "n_positions": 2048,
             "tie_word_embeddings": False},
    "opt": {"activation_function": "relu", "do_layer_norm_before": True, "enable_bias": True,
            "max_position_embeddings": 2048, "tie_word_embeddings": True},
    "bloom": {"tie_word_embeddings": True},
    "mpt": {"expansion_ratio": 4, "max_seq_len": 2048, "no_bias": True, "tie_word_embeddings": True},
    "t5": {"feed_forward_proj": "relu", "relative_attention_num_buckets": 32, "tie_word_embeddings": True},
    "bert": {"hidden_act": "gelu", "max_position_embeddings": 512, "tie_word_embeddings": True, "type_vocab_size": 2},
    "olmo2": {"attention_bias": False, "hidden_act": "silu", "max_position_embeddings": 2048,
              "tie_word_embeddings": False},
    "olmo3": {"attention_bias": False, "hidden_act": "silu", "max_position_embeddings": 2048, "sliding_window": 4096,
              "tie_word_embeddings": False},
    "smollm3": {"num_key_value_heads": OrNull(4), "attention_bias": False, "hidden_act": "silu",
                "max_position_embeddings": 32768, "mlp_bias": False, "no_rope_layer_interval": 4,
                "tie_word_embeddings": True, "use_sliding_window": False},
    "granite": {"attention_bias": False, "hidden_act": "silu", "max_position_embeddings": 2048, "mlp_bias": False,
                "tie_word_embeddings": False},
    "glm": {"num_key_value_heads": 2, "head_dim": 128, "attention_bias": True, "hidden_act": "silu",
            "max_position_embeddings": 131072, "tie_word_embeddings": False},
    "glm4": {"num_key_value_heads": 2, "head_dim": 128, "attention_bias": True, "hidden_act": "silu",
             "max_position_embeddings": 131072, "tie_word_embeddings": False},
    "exaone4": {"num_key_value_heads": 32, "hidden_act": "silu", "max_position_embeddings": 2048,
                "sliding_window": 4096, "sliding_window_pattern": 4, "tie_word_embeddings": False},
    "ernie4_5": {"num_key_value_heads": OrNull(2), "head_dim": OrNull(128), "hidden_act": "silu",
                 "max_position_embeddings": 131072, "tie_word_embeddings": True, "use_bias": False},
    "cohere2": {"attention_bias": False, "hidden_act": "silu", "max_position_embeddings": 8192, "sliding_window": 4096,
                "tie_word_embeddings": True},
    "starcoder2": {"num_key_value_heads": 2, "hidden_act": "gelu_pytorch_tanh", "max_position_embeddings": 4096,
                   "tie_word_embeddings": True, "use_bias": True},
    "phi": {"hidden_act": "gelu_new", "max_position_embeddings": 2048, "qk_layernorm": False,
            "tie_word_embeddings": False},
    "stablelm": {"num_key_value_heads": 32, "hidden_act": "silu", "max_position_embeddings": 4096,
                 "qk_layernorm": False, "tie_word_embeddings": False, "use_parallel_residual": False,
                 "use_qkv_bias": False},
    "persimmon": {"hidden_act": "relu2", "max_position_embeddings": 16384, "qk_layernorm": True,
                  "tie_word_embeddings": False},
    "nemotron": {"attention_bias": False, "hidden_act": "relu2", "max_position_embeddings": 4096, "mlp_bias": False,
                 "tie_word_embeddings": False},
}
