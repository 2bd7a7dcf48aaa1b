"""What every reader shares: the Llama-style decoder keys, the sliding / global layer rules, and the pattern a
list of layer types repeats.

Each reader (``dense``, ``moe``, ``mla``, ``state_space``, ``hybrid``, ``linear``) returns the architecture fields of
a card (the importer adds name, source and dtype); shapes follow transformers' ``models/<type>/modeling_<type>.py``.
Where a config.json omits ``layer_types``, the layer rule is the config class's own ``__post_init__`` fallback.
"""

from __future__ import annotations

from typing import Callable

from kvplan.errors import KvplanError, clip
from kvplan.model.hf.reader import Config, activation


LAYER_TYPES = {"sliding_attention": "sliding", "full_attention": "global"}
# families whose transformers 5.24 attention sizes a left-out head_dim as ``getattr(config, "head_dim", None) or
# config.hidden_size // config.num_attention_heads`` and whose config class does not refuse a hidden_size that the
# heads do not divide (modeling_glm4_moe.py:181, modeling_mistral.py, modeling_qwen2.py, ...): the width is floored
# (q_proj heads x floor rows). The others (LlamaConfig, Gemma2Config, GPTNeoXConfig ``validate_architecture``, ...)
# refuse such a file, and so does the card (Cohere2Config always computes it: its reader floors too).
# tests/test_hf_defaults.py builds each on the meta device.
FLOOR_HEAD_DIM = frozenset({
    "ernie4_5_moe", "exaone4", "falcon_h1", "glm4_moe", "granite", "granitemoe", "jamba", "lfm2", "minimax",
    "mistral", "mixtral", "olmo2", "olmo3", "phi", "phi3", "qwen2", "qwen2_moe", "qwen3_moe", "smollm3", "starcoder2"})


def fallback_head_dim(cfg: Config, hidden: int, heads: int) -> int | None:
    """transformers' hidden_size // num_attention_heads for a family that floors it where the heads do not divide
    the width; None: the card derives (and checks) it."""
    return hidden // heads if hidden % heads and cfg.model_type in FLOOR_HEAD_DIM else None


def decoder_core(cfg: Config, act_keys: tuple[str, ...] = ("hidden_act",), latent: bool = False) -> dict:
    """Keys shared by the Llama family (llama, mistral, qwen, gemma, phi3, deepseek). num_key_value_heads and head_dim
    left out are the config class's own (``Config.sized``: Mistral 8 K/V heads, Gemma head_dim 256, Llama the query
    heads and hidden_size // num_attention_heads). ``latent`` (MLA): neither is read, the ``mla`` block sizes the
    heads and the cache."""
    heads, hidden = cfg.integer("num_attention_heads"), cfg.integer("hidden_size")
    return dict(
        num_layers=cfg.layers("num_hidden_layers"), hidden_size=hidden, num_heads=heads,
        num_kv_heads=heads if latent else cfg.sized("num_key_value_heads", heads, "num_attention_heads"),
        head_dim=None if latent else cfg.sized("head_dim", fallback_head_dim(cfg, hidden, heads),
                                               "hidden_size // num_attention_heads"),
        ffn_size=cfg.integer("intermediate_size"), gated_ffn=True,
        activation=activation(cfg, *act_keys), vocab_size=cfg.integer("vocab_size"),
        tie_embeddings=cfg.flag("tie_word_embeddings"), norm="rmsnorm", position="rope",
        max_position_embeddings=cfg.integer("max_position_embeddings"))


def compress(types: list[str]) -> list[str]:
    """The shortest pattern that repeats into ``types`` (Gemma-2's 42 entries -> [sliding, global])."""
    for n in range(1, len(types) + 1):
        if all(types[i] == types[i % n] for i in range(len(types))):
            return types[:n]
    return types


def window(cfg: Config, fallback: Callable[[int], list[str]] | None = None) -> dict:
    """Sliding-window layers: ``layer_types`` when the config lists them, else the model type's own rule."""
    n = cfg.layers("num_hidden_layers")
    if cfg.has("layer_types"):
        types = [LAYER_TYPES[t] for t in layer_types(cfg, n)][:n]
    elif fallback is not None:
        types = fallback(n)
    else:  # transformers' default when no layer_types: every layer sliding when sliding_window is set
        types = ["sliding" if cfg.lookup("sliding_window") else "global"] * n
    if "sliding" not in types:
        return {}
    size = cfg.lookup("sliding_window")  # an explicit null stays None in transformers: its sliding layers see all
    if size is None:  # (DynamicLayer, not DynamicSlidingWindowLayer; vLLM's per_layer_sliding_window None)
        return {}
    pattern = compress(types)  # all-sliding needs no pattern: it is the card's default once a window is set
    return {"sliding_window": cfg.check_int("sliding_window", size),
            "layer_pattern": None if pattern == ["sliding"] else pattern}


def layer_types(cfg: Config, n: int) -> list[str]:
    """``layer_types``: a list of at least num_hidden_layers known names."""
    types = cfg.data["layer_types"]
    allowed = f"allowed: a list of {n} entries from {', '.join(LAYER_TYPES)}"
    if not isinstance(types, list) or len(types) < n:
        raise KvplanError(f"{cfg.origin}: layer_types: {clip(types)} is not a list of num_hidden_layers ({n}) "
                          f"entries; {allowed}")
    unknown = [t for t in types if not isinstance(t, str) or t not in LAYER_TYPES]
    if unknown:
        raise KvplanError(f"{cfg.origin}: layer_types: {clip(unknown[0])} unsupported; {allowed}")
    return types


def every_nth(n: int, kind: str = "sliding") -> Callable[[int], list[str]]:
    """Layer i is global iff (i + 1) % n == 0, else ``kind`` (OLMo-3, EXAONE-4, Cohere2 fallbacks)."""
    return lambda layers: [kind if (i + 1) % n else "global" for i in range(layers)]


def relu2_core(cfg: Config) -> dict:
    """``decoder_core``, plus squared ReLU (Nemotron, Persimmon) besides the activations ``reader.activation`` knows."""
    if cfg.get("hidden_act") != "relu2":
        return decoder_core(cfg)
    data, cfg.data = cfg.data, {**cfg.data, "hidden_act": "relu"}
    try:
        return {**decoder_core(cfg), "activation": "relu2"}
    finally:
        cfg.data = data


def mtp_layers(cfg: Config, *aliases: str) -> dict:
    """``num_nextn_predict_layers`` (or an alias): the multi-token-prediction layers a checkpoint stores after its
    decoder layers (model.layers.{num_hidden_layers}...), which transformers never builds
    (_keys_to_ignore_on_load_unexpected) and vLLM / SGLang skip at load (get_spec_layer_idx_from_weight_name) unless
    they serve them as a speculative draft. Absent with no transformers default: the card does not say."""
    keys = ("num_nextn_predict_layers", *aliases)
    if all(cfg.data.get(k) is None for k in keys) and not any(k in cfg.defaults for k in keys):
        return {}
    return {"mtp_layers": cfg.integer(*keys, minimum=0)}
