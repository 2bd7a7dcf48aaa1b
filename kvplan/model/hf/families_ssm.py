"""Readers for state-space and hybrid model types (Mamba, Falcon-Mamba, Mamba-2, Bamba, Nemotron-H), as transformers
5.x builds them: config.json keys -> card fields, with a card ``ssm:`` block and ``mamba`` layers.

Layer rules: Bamba attends in ``attn_layer_indices`` and runs a Mamba-2 mixer elsewhere, every layer with an FFN
(modeling_bamba.py BambaDecoderLayer); Nemotron-H's ``layers_block_type`` gives one module per block, a Mamba-2
mixer, attention, or a squared-ReLU MLP (modeling_nemotron_h.py NemotronHBlock); Mamba / Mamba-2 have mixer-only
blocks. ``ALL_READERS`` extends families_2025's chain.
"""

from __future__ import annotations

from typing import Callable

from kvplan.errors import KvplanError, clip
from kvplan.model.card import MAX_COUNT
from kvplan.model.hf import families_2025
from kvplan.model.hf.families import _compress, _decoder_core
from kvplan.model.hf.reader import Config

_NEMOTRON_H_TYPES = {"mamba": "mamba", "linear_attention": "mamba", "attention": "global",
                     "full_attention": "global", "mlp": "mlp"}
# transformers NemotronHConfig._pattern_to_list (E, a MoE block, is refused below: not modelled)
_NEMOTRON_H_PATTERN = {"M": "linear_attention", "*": "full_attention", "-": "mlp", "E": "moe"}


def _pure(cfg: Config, ssm: dict) -> dict:
    """A model of mixer-only blocks: no attention and no FFN. The attention and FFN fields a card requires are inert
    here (num_heads 1, ffn_size = hidden_size): no layer reads them. No position encoding, so no length limit."""
    h = cfg.integer("hidden_size")
    return dict(num_layers=cfg.layers("num_hidden_layers"), hidden_size=h, num_heads=1, ffn_size=h, gated_ffn=False,
                activation="silu", vocab_size=cfg.integer("vocab_size"), tie_embeddings=cfg.flag("tie_word_embeddings"),
                norm="rmsnorm", norms_per_layer=1, position="none", max_position_embeddings=MAX_COUNT,
                layer_pattern=["mamba"], mixer_mlp=False, ssm=ssm)


def mamba(cfg: Config) -> dict:
    # MambaMixer: intermediate_size = int(expand * hidden_size) (MambaConfig.__post_init__), dt rank "auto" ->
    # ceil(hidden / 16). Falcon-Mamba adds weightless RMSNorms on B, C and dt: the same parameters.
    ssm = {"kind": "mamba", "d_state": cfg.integer("state_size"), "d_conv": cfg.integer("conv_kernel"),
           "expand": cfg.integer("expand"), "dt_rank": _dt_rank(cfg), "conv_bias": cfg.flag("use_conv_bias"),
           "proj_bias": cfg.flag("use_bias")}
    return _pure(cfg, ssm)


def _dt_rank(cfg: Config) -> int | None:
    rank = cfg.get("time_step_rank")
    return None if rank == "auto" else cfg.integer("time_step_rank")


def mamba2(cfg: Config) -> dict:
    # Mamba2Mixer: intermediate_size = int(expand * hidden_size); in_proj to (z, x, B, C, dt); gated RMSNorm
    ssm = {"kind": "mamba2", "d_state": cfg.integer("state_size"), "d_conv": cfg.integer("conv_kernel"),
           "expand": cfg.integer("expand"), "num_heads": cfg.integer("num_heads"), "head_dim": cfg.integer("head_dim"),
           "n_groups": cfg.integer("n_groups"), "chunk_size": cfg.integer("chunk_size"),
           "conv_bias": cfg.flag("use_conv_bias"), "proj_bias": cfg.flag("use_bias")}
    return _pure(cfg, ssm)


def bamba(cfg: Config) -> dict:
    n = cfg.layers("num_hidden_layers")
    attn = cfg.lookup("attn_layer_indices") or []
    if not isinstance(attn, list) or any(type(i) is not int or not 0 <= i < n for i in attn):
        raise KvplanError(f"{cfg.origin}: attn_layer_indices: {clip(attn)} is not a list of layer indices; "
                          f"allowed: integers 0..{n - 1}")
    ssm = mamba2_block(cfg)
    types = ["global" if i in attn else "mamba" for i in range(n)]
    bias = cfg.flag("attention_bias")
    return {**_decoder_core(cfg), "layer_pattern": _compress(types), "ssm": ssm, "qkv_bias": bias, "out_bias": bias,
            "mlp_bias": cfg.flag("mlp_bias")}


def mamba2_block(cfg: Config) -> dict:
    """The ``ssm`` block from the ``mamba_*`` keys Bamba, Granite-MoE-Hybrid and Falcon-H1 share (mamba_d_head
    "auto": intermediate / heads)."""
    head = cfg.get("mamba_d_head")
    return {"kind": "mamba2", "d_state": cfg.integer("mamba_d_state"), "d_conv": cfg.integer("mamba_d_conv"),
            "expand": cfg.integer("mamba_expand"), "num_heads": cfg.integer("mamba_n_heads"),
            "head_dim": None if head == "auto" else cfg.integer("mamba_d_head"),
            "n_groups": cfg.integer("mamba_n_groups"), "chunk_size": cfg.integer("mamba_chunk_size"),
            "conv_bias": cfg.flag("mamba_conv_bias"), "proj_bias": cfg.flag("mamba_proj_bias")}


def nemotron_h(cfg: Config) -> dict:
    types = _nemotron_h_types(cfg)
    n = len(types)
    # NemotronHMamba2Mixer: intermediate = mamba_num_heads x mamba_head_dim; in/out_proj biased by use_bias.
    # NemotronHConfig.__post_init__ renames the legacy mamba_n_groups, mamba_d_conv, mamba_chunk_size and
    # mamba_conv_bias (the legacy key wins when both are given); mamba_num_heads, mamba_head_dim and ssm_state_size
    # are its own names, with no legacy alias
    heads, head_dim = cfg.integer("mamba_num_heads"), cfg.integer("mamba_head_dim")
    ssm = {"kind": "mamba2", "d_state": cfg.integer("ssm_state_size"),
           "d_conv": cfg.integer("mamba_d_conv", "conv_kernel"), "intermediate_size": heads * head_dim,
           "num_heads": heads, "head_dim": head_dim, "n_groups": cfg.integer("mamba_n_groups", "n_groups"),
           "chunk_size": cfg.integer("mamba_chunk_size", "chunk_size"),
           "conv_bias": cfg.flag("mamba_conv_bias", "use_conv_bias"), "proj_bias": cfg.flag("use_bias"),
           "state_dtype": _state_dtype(cfg)}
    # NemotronHConfig.num_hidden_layers is len(layers_block_type); its to_dict() leaves the key out
    act = Config({**cfg.data, "hidden_act": cfg.text("mlp_hidden_act"), "num_hidden_layers": n}, cfg.model_type,
                 cfg.origin)
    act.assumed = cfg.assumed  # one record of the defaults assumed
    # head_dim: the published configs name it attention_head_dim (read by the checkpoints' own NemotronHConfig and
    # vLLM); transformers 5.x reads head_dim only (default 128, the value of every published Nemotron-H)
    core = {**families_2025._core(act), "head_dim": cfg.integer("head_dim", "attention_head_dim")}
    # NemotronHAttention: q/k/v/o without bias whatever attention_bias says, and no rotary embedding (the model has no
    # rotary_emb: the Mamba-2 blocks carry position); NemotronHMLP: up, down (mlp_bias)
    return {**core, "gated_ffn": False, "mlp_bias": cfg.flag("mlp_bias"), "norms_per_layer": 1, "mixer_mlp": False,
            "layer_pattern": _compress(types), "ssm": ssm, "position": "none"}


def _nemotron_h_types(cfg: Config) -> list[str]:
    """``layers_block_type``, else the published checkpoints' ``hybrid_override_pattern`` string, one character per
    block, as transformers 5.x NemotronHConfig.__post_init__ converts it (_pattern_to_list: M mamba, * attention,
    - mlp, E moe; an explicit layers_block_type wins). num_hidden_layers, when the file gives it too, must agree."""
    types = cfg.data.get("layers_block_type") or cfg.data.get("layer_types")
    pattern = cfg.data.get("hybrid_override_pattern")
    if types is None and pattern is not None:
        if not isinstance(pattern, str) or not pattern or set(pattern) - set(_NEMOTRON_H_PATTERN):
            raise KvplanError(f"{cfg.origin}: hybrid_override_pattern: {clip(pattern)} is not a string of block "
                              f"characters; allowed: {', '.join(_NEMOTRON_H_PATTERN)} "
                              "(mamba, attention, mlp, moe)")
        types = [_NEMOTRON_H_PATTERN[c] for c in pattern]
    if not isinstance(types, list) or not types:
        raise KvplanError(f"{cfg.origin}: layers_block_type: {clip(types)} is not a list of layer types; allowed: "
                          f"a list of {', '.join(_NEMOTRON_H_TYPES)} (or a hybrid_override_pattern string)")
    if cfg.has("num_hidden_layers") and cfg.layers("num_hidden_layers") != len(types):
        raise KvplanError(f"{cfg.origin}: num_hidden_layers ({cfg.data['num_hidden_layers']}) and layers_block_type "
                          f"({len(types)} entries) disagree; allowed: one entry per layer")
    unknown = [t for t in types if t not in _NEMOTRON_H_TYPES]
    if unknown:
        key = "layers_block_type" if pattern is None or "layers_block_type" in cfg.data else "hybrid_override_pattern"
        raise KvplanError(f"{cfg.origin}: {key}: {clip(unknown[0])} unsupported (MoE blocks are not "
                          f"modelled yet); allowed: {', '.join(_NEMOTRON_H_TYPES)}")
    return [_NEMOTRON_H_TYPES[t] for t in types]


def _state_dtype(cfg: Config) -> str | None:
    raw = cfg.lookup("mamba_ssm_cache_dtype")
    if raw in (None, "auto"):
        return None
    if raw not in ("float32", "float16", "bfloat16"):
        raise KvplanError(f"{cfg.origin}: mamba_ssm_cache_dtype {clip(raw)} unsupported; allowed: auto, float32, "
                          "float16, bfloat16")
    return raw


READERS: dict[str, Callable[[Config], dict]] = {
    "mamba": mamba, "falcon_mamba": mamba, "mamba2": mamba2, "bamba": bamba, "nemotron_h": nemotron_h,
}
ALL_READERS: dict[str, Callable[[Config], dict]] = families_2025.ALL_READERS | READERS
