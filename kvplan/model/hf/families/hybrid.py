"""Attention + state-space hybrids (Bamba, Nemotron-H, Granite-MoE-Hybrid, Jamba, Falcon-H1, Zamba, Zamba2), as
transformers 5.x builds them: config.json keys -> card fields, with a card ``ssm:`` block.

Layer rules:

- Bamba (modeling_bamba.py BambaDecoderLayer): attends in ``attn_layer_indices``, a Mamba-2 mixer elsewhere, every
  layer with an FFN.
- Nemotron-H (modeling_nemotron_h.py NemotronHBlock): ``layers_block_type`` gives one module per block, a Mamba-2
  mixer, attention, a squared-ReLU MLP, or a MoE of squared-ReLU experts with a shared MLP (Nemotron-3 Nano; card
  layer type "mlp", routed through ``moe``).
- Granite-MoE-Hybrid (modeling_granitemoehybrid.py): ``layer_types`` ("mamba"/"linear_attention" -> a Mamba-2
  mixer, "attention"/"full_attention" -> attention; default all Mamba-2); every layer holds routed experts
  (``num_local_experts`` of ``intermediate_size``; none when 0) plus one always-on ``shared_mlp`` of
  ``shared_intermediate_size``; RoPE only when ``position_embedding_type`` is "rope". The dense granite-4.0
  models (granite-4.0-micro) are this class with attention layers only and no experts.
- Jamba (modeling_jamba.py): layer i attends iff i % attn_layer_period == attn_layer_offset, else a Mamba-1 mixer with
  RMSNorms on dt, B and C; its FFN is MoE (num_experts > 1) iff i % expert_layer_period == expert_layer_offset.
- Falcon-H1 (modeling_falcon_h1.py): every layer runs attention and a Mamba-2 mixer side by side (cache layer
  "hybrid": K/V plus both states), then a gated MLP; ``mamba_d_ssm`` sets the mixer width, ``mamba_rms_norm`` its
  gated norm, ``projectors_bias`` its out_proj bias. The mu-P multipliers scale activations only (no parameters).
- Zamba (modeling_zamba.py): every layer a Mamba-1 mixer split into n_mamba_heads (the sizes of one Mamba-1
  mixer) after one RMSNorm; "hybrid" layers (layers_block_type, else [mamba, mamba, hybrid] then every
  attn_layer_period-th from attn_layer_offset, ZambaConfig.__post_init__) first invoke the one shared attention +
  MLP block (kvplan.model.shared); no positional encoding; head_dim attention_head_dim, else 2 x hidden / heads.
- Zamba2 (modeling_zamba2.py): Mamba-2 layers (conv bias always on; in/out_proj biased by add_bias_linear) and
  hybrid layers invoking num_mem_blocks shared blocks in turn, with per-invocation adapters of adapter_rank;
  head_dim is always 2 x hidden // heads; RoPE only with use_mem_rope; use_long_context sets 16384 positions.

``DEFAULTS``: the behavioural keys, the conv kernel / expand / group / chunk knobs and layer periods a config.json may
omit (and Falcon-H1's mamba_d_ssm, which overrides expand x hidden_size whenever the file leaves it out), from the
transformers 5.23 config classes: a field's default, or the value ``__post_init__`` makes of it. Zamba's
num_key_value_heads defaults to 16 whatever num_attention_heads is. Checked in tests/test_state_layers_2.py.
"""

from __future__ import annotations

from typing import Callable

from kvplan.errors import KvplanError, clip
from kvplan.model.hf.families.core import compress, decoder_core, mtp_layers, relu2_core
from kvplan.model.hf.families.state_space import mamba2_block
from kvplan.model.hf.reader import Config, OrNull


def bamba(cfg: Config) -> dict:
    n = cfg.layers("num_hidden_layers")
    attn = cfg.lookup("attn_layer_indices") or []
    if not isinstance(attn, list) or any(type(i) is not int or not 0 <= i < n for i in attn):
        raise KvplanError(f"{cfg.origin}: attn_layer_indices: {clip(attn)} is not a list of layer indices; "
                          f"allowed: integers 0..{n - 1}")
    ssm = mamba2_block(cfg)
    types = ["global" if i in attn else "mamba" for i in range(n)]
    bias = cfg.flag("attention_bias")
    return {**decoder_core(cfg), "layer_pattern": compress(types), "ssm": ssm, "qkv_bias": bias, "out_bias": bias,
            "mlp_bias": cfg.flag("mlp_bias")}


_NEMOTRON_H_TYPES = {"mamba": "mamba", "linear_attention": "mamba", "attention": "global",
                     "full_attention": "global", "mlp": "mlp", "moe": "moe"}
# transformers NemotronHConfig._pattern_to_list
_NEMOTRON_H_PATTERN = {"M": "linear_attention", "*": "full_attention", "-": "mlp", "E": "moe"}


def nemotron_h(cfg: Config) -> dict:
    blocks = _nemotron_h_types(cfg)
    types = ["mlp" if t == "moe" else t for t in blocks]  # an FFN-only block, dense or routed (card.is_moe_layer)
    n = len(types)
    # NemotronHMamba2Mixer: intermediate = mamba_num_heads x mamba_head_dim; in/out_proj biased by use_bias.
    # NemotronHConfig.__post_init__ renames the legacy mamba_n_groups, mamba_d_conv, mamba_chunk_size and
    # mamba_conv_bias (the legacy key wins when both are given); mamba_num_heads, mamba_head_dim and ssm_state_size
    # are its own names, with no legacy alias
    ssm = None
    if "mamba" in types:
        heads, head_dim = cfg.integer("mamba_num_heads"), cfg.integer("mamba_head_dim")
        ssm = {"kind": "mamba2", "d_state": cfg.integer("ssm_state_size"),
               "d_conv": cfg.integer("mamba_d_conv", "conv_kernel"), "intermediate_size": heads * head_dim,
               "num_heads": heads, "head_dim": head_dim, "n_groups": cfg.integer("mamba_n_groups", "n_groups"),
               "chunk_size": cfg.integer("mamba_chunk_size", "chunk_size"),
               "conv_bias": cfg.flag("mamba_conv_bias", "use_conv_bias"), "proj_bias": cfg.flag("use_bias"),
               "state_dtype": _state_dtype(cfg)}
    # NemotronHConfig.num_hidden_layers is len(layers_block_type); its to_dict() leaves the key out. A config of
    # MoE blocks only has no dense intermediate_size that any block reads
    data = {**cfg.data, "hidden_act": cfg.text("mlp_hidden_act"), "num_hidden_layers": n}
    if not cfg.has("head_dim") and cfg.has("attention_head_dim"):
        data["head_dim"] = cfg.data["attention_head_dim"]
    if "mlp" not in blocks and not cfg.has("intermediate_size"):
        data["intermediate_size"] = cfg.integer("moe_intermediate_size")
    act = cfg.derive(data)
    # head_dim: the published configs name it attention_head_dim (read by the checkpoints' own NemotronHConfig and
    # vLLM); transformers 5.x reads head_dim only (default 128, the value of every published Nemotron-H)
    core = relu2_core(act)
    # NemotronHAttention: q/k/v/o without bias whatever attention_bias says, and no rotary embedding (the model has no
    # rotary_emb: the Mamba-2 blocks carry position); NemotronHMLP: up, down (mlp_bias)
    fields = {**core, "gated_ffn": False, "mlp_bias": cfg.flag("mlp_bias"), "norms_per_layer": 1,
              "mixer_mlp": False, "layer_pattern": compress(types), "ssm": ssm, "position": "none"}
    return {**fields, **_nemotron_h_moe(cfg, blocks), **mtp_layers(cfg)}


def _nemotron_h_moe(cfg: Config, blocks: list[str]) -> dict:
    """The MoE blocks (``moe`` / 'E', Nemotron-3 Nano), transformers 5.24 modeling_nemotron_h.py NemotronHMoE:
    n_routed_experts non-gated experts (up, down; 3-D tensors, no biases) of moe_intermediate_size behind a bias-free
    float32 router (NemotronHTopkRouter: its e_score_correction_bias is a buffer), plus one always-on NemotronHMLP of
    moe_shared_expert_intermediate_size (transformers does not read n_shared_experts; vLLM's NemotronHMoE multiplies
    the width by it, so only 1 is accepted). moe_latent_size (fc1/fc2_latent_proj around the experts; vLLM:
    ReplicatedLinear) is refused: not modelled. Dense mlp blocks may only precede the first MoE block
    (card.moe.first_dense_layers)."""
    if "moe" not in blocks:
        return {}
    first = blocks.index("moe")
    if "mlp" in blocks[first:]:
        key = "layers_block_type" if cfg.data.get("layers_block_type") or cfg.data.get("layer_types") else \
            "hybrid_override_pattern"
        raise KvplanError(f"{cfg.origin}: {key}: an mlp block after the first moe block (layer {first}) is not "
                          "modelled; allowed: dense mlp blocks before every moe block")
    shared = cfg.data.get("n_shared_experts")
    if shared is not None and shared != 1:  # vLLM nemotron_h.py NemotronHMoE: moe_shared_expert_intermediate_size x
        raise KvplanError(f"{cfg.origin}: n_shared_experts: {clip(shared)}: transformers builds one shared MLP of "
                          "moe_shared_expert_intermediate_size whatever it says, vLLM one of that size x "
                          "n_shared_experts (none for 0); not modelled; allowed: 1")
    latent = cfg.lookup("moe_latent_size")
    if latent is not None:
        raise KvplanError(f"{cfg.origin}: moe_latent_size: {clip(latent)} (latent expert projections) is not "
                          "modelled; allowed: null")
    moe = {"num_experts": cfg.integer("n_routed_experts", "num_local_experts"),
           "experts_per_token": cfg.integer("num_experts_per_tok"),
           "expert_ffn_size": cfg.integer("moe_intermediate_size"), "num_shared_experts": 1,
           "shared_expert_ffn_size": cfg.integer("moe_shared_expert_intermediate_size"), "first_dense_layers": first}
    # _keep_in_fp32_modules_strict = ["e_score_correction_bias", "gate.weight"] (kvplan.cost.fp32)
    return {"moe": moe, "hf_fp32": ("router",)}


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
        raise KvplanError(f"{cfg.origin}: {key}: {clip(unknown[0])} unsupported; allowed: "
                          f"{', '.join(_NEMOTRON_H_TYPES)}")
    return [_NEMOTRON_H_TYPES[t] for t in types]


def _state_dtype(cfg: Config) -> str | None:
    raw = cfg.lookup("mamba_ssm_cache_dtype")
    if raw in (None, "auto"):
        return None
    if raw not in ("float32", "float16", "bfloat16"):
        raise KvplanError(f"{cfg.origin}: mamba_ssm_cache_dtype {clip(raw)} unsupported; allowed: auto, float32, "
                          "float16, bfloat16")
    return raw


_GRANITE_TYPES = {"mamba": "mamba", "linear_attention": "mamba", "attention": "global", "full_attention": "global"}


def granitemoehybrid(cfg: Config) -> dict:
    types = _granite_types(cfg)
    experts, shared = cfg.integer("num_local_experts", minimum=0), cfg.integer("shared_intermediate_size")
    if experts:  # GraniteMoeHybridMoE (router without bias, gate_up/down experts) plus the shared gated MLP
        ffn = {"moe": {"num_experts": experts, "experts_per_token": cfg.integer("num_experts_per_tok"),
                       "expert_ffn_size": cfg.integer("intermediate_size"), "num_shared_experts": 1,
                       "shared_expert_ffn_size": shared}}
    else:  # no experts: the shared MLP alone is the layer's FFN
        ffn = {"ffn_size": shared}
    bias = cfg.flag("attention_bias")
    rope = cfg.lookup("position_embedding_type") == "rope"
    # the dense granite-4.0 models (granite-4.0-micro) list attention layers only: no Mamba-2 mixer is built, and
    # whatever mamba_* keys the file carries are read by no module
    ssm = mamba2_block(cfg) if "mamba" in types else None
    pattern = compress(types)
    return {**decoder_core(cfg), **ffn, "layer_pattern": None if pattern == ["global"] else pattern, "ssm": ssm,
            "qkv_bias": bias, "out_bias": bias, "position": "rope" if rope else "none"}


def _granite_types(cfg: Config) -> list[str]:
    n = cfg.layers("num_hidden_layers")
    key = "layer_types" if "layer_types" in cfg.data else "layers_block_type"
    raw = cfg.data.get(key)
    if raw is None:  # GraniteMoeHybridConfig.__post_init__: every layer a Mamba-2 mixer
        cfg.assumed.append(f"layer_types=['mamba'] * {n} (transformers default for granitemoehybrid)")
        return ["mamba"] * n
    if not isinstance(raw, list) or len(raw) != n or any(t not in _GRANITE_TYPES for t in raw):
        raise KvplanError(f"{cfg.origin}: {key}: {clip(raw)} is not a list of num_hidden_layers ({n}) layer types; "
                          f"allowed: {', '.join(_GRANITE_TYPES)}")
    return [_GRANITE_TYPES[t] for t in raw]


def jamba(cfg: Config) -> dict:
    n = cfg.layers("num_hidden_layers")
    attn = _period(cfg, "attn_layer_period", "attn_layer_offset")
    rank = cfg.get("mamba_dt_rank")
    ssm = {"kind": "mamba", "d_state": cfg.integer("mamba_d_state"), "d_conv": cfg.integer("mamba_d_conv"),
           "expand": cfg.integer("mamba_expand"), "dt_rank": None if rank == "auto" else cfg.integer("mamba_dt_rank"),
           "conv_bias": cfg.flag("mamba_conv_bias"), "proj_bias": cfg.flag("mamba_proj_bias"), "dt_bc_norms": True}
    types = ["global" if attn(i) else "mamba" for i in range(n)]
    # JambaAttention applies no rotary embedding (JambaModel has no rotary_emb): position comes from the Mamba layers
    fields = {**decoder_core(cfg), "layer_pattern": compress(types), "ssm": ssm, "position": "none"}
    experts = cfg.integer("num_experts")
    if experts == 1:  # JambaMLP in every layer
        return fields
    period, offset = cfg.integer("expert_layer_period"), cfg.integer("expert_layer_offset", minimum=0)
    if offset != period - 1:  # the card's MoE rule: layer i is MoE iff (i + 1) % layer_interval == 0
        raise KvplanError(f"{cfg.origin}: expert_layer_offset {offset} with expert_layer_period {period} is not "
                          f"modelled; allowed: expert_layer_offset = expert_layer_period - 1 ({period - 1})")
    moe = {"num_experts": experts, "experts_per_token": cfg.integer("num_experts_per_tok"),
           "expert_ffn_size": cfg.integer("intermediate_size"), "layer_interval": period}
    return {**fields, "moe": moe}


def _period(cfg: Config, period_key: str, offset_key: str) -> Callable[[int], bool]:
    period, offset = cfg.integer(period_key), cfg.integer(offset_key, minimum=0)
    if offset >= period:
        raise KvplanError(f"{cfg.origin}: {offset_key} ({offset}) must be smaller than {period_key} ({period}); "
                          f"allowed: 0..{period - 1}")
    return lambda i: i % period == offset


def falcon_h1(cfg: Config) -> dict:
    ssm = {**mamba2_block(cfg), "out_proj_bias": cfg.flag("projectors_bias"),
           "gated_norm": cfg.flag("mamba_rms_norm")}
    d_ssm = cfg.lookup("mamba_d_ssm")
    if d_ssm is not None:
        ssm["intermediate_size"] = cfg.integer("mamba_d_ssm")
    bias = cfg.flag("attention_bias")
    return {**decoder_core(cfg), "layer_pattern": ["hybrid"], "ssm": ssm, "qkv_bias": bias, "out_bias": bias,
            "mlp_bias": cfg.flag("mlp_bias")}


_ZAMBA_TYPES = {"mamba": "mamba", "linear_attention": "mamba", "hybrid": "hybrid"}


# Zamba2Config.__post_init__'s layers_block_type when the file gives none (54 layers, Zamba2-2.7B)
_ZAMBA2_LAYERS = ["mamba"] + (["mamba"] * 5 + ["hybrid"]) * 7 + ["mamba"] * 4 + ["hybrid"] + ["mamba"] * 3 + [
    "hybrid"] + ["mamba"] * 2


def _layer_list(cfg: Config, fallback: Callable[[int], list[str]]) -> list[str]:
    """layers_block_type (alias layer_types) mapped to card types, else the config class's rule; transformers
    refuses a list whose length is not num_hidden_layers."""
    n = cfg.layers("num_hidden_layers")
    key = "layers_block_type" if cfg.has("layers_block_type") else "layer_types"
    raw = cfg.data.get(key)
    if raw is None:
        key, raw = "layers_block_type (the config class's default rule)", fallback(n)
        cfg.assumed.append(f"layers_block_type={compress(raw)!r} (the {cfg.model_type} config class's rule)")
    if not isinstance(raw, list) or any(t not in _ZAMBA_TYPES for t in raw):
        raise KvplanError(f"{cfg.origin}: {key}: {clip(raw)} is not a list of layer types; allowed: "
                          f"{', '.join(_ZAMBA_TYPES)}")
    if len(raw) != n:
        raise KvplanError(f"{cfg.origin}: {key} has {len(raw)} layers but num_hidden_layers is {n}; allowed: equal")
    types = [_ZAMBA_TYPES[t] for t in raw]
    ids = cfg.data.get("hybrid_layer_ids")
    if ids is not None and ids != [i for i, t in enumerate(types) if t == "hybrid"]:
        raise KvplanError(f"{cfg.origin}: hybrid_layer_ids {clip(ids)} disagree with {key} (hybrid at "
                          f"{[i for i, t in enumerate(types) if t == 'hybrid']})")
    return types


def _mamba_heads(cfg: Config, hidden: int) -> int:
    heads, inner = cfg.integer("n_mamba_heads"), cfg.integer("mamba_expand") * hidden
    if inner % heads:
        raise KvplanError(f"{cfg.origin}: n_mamba_heads {heads} does not divide mamba_expand x hidden_size ({inner})")
    return heads


def _zamba_core(cfg: Config, types: list[str], head_dim: int, ssm: dict, shared: dict) -> dict:
    """The fields Zamba and Zamba2 share: mixer-only layers (one RMSNorm each), gated MLP in the shared block."""
    core = {**decoder_core(cfg), "head_dim": head_dim, "num_kv_heads": cfg.integer("num_key_value_heads"),
            "layer_pattern": compress(types), "norms_per_layer": 1, "mixer_mlp": False, "ssm": ssm}
    return core | ({"shared_blocks": shared} if "hybrid" in types else {})


def zamba(cfg: Config) -> dict:
    period, offset = cfg.integer("attn_layer_period"), cfg.integer("attn_layer_offset", minimum=0)
    types = _layer_list(cfg, lambda n: ["mamba", "mamba", "hybrid"] + [
        "hybrid" if i % period == offset else "mamba" for i in range(n - 3)])
    h, heads = cfg.integer("hidden_size"), cfg.integer("num_attention_heads")
    width = cfg.optional("attention_hidden_size")
    if width not in (None, 2 * h):
        raise KvplanError(f"{cfg.origin}: attention_hidden_size {width}: the shared block attends over the hidden "
                          f"state and the embeddings concatenated; allowed: 2 x hidden_size ({2 * h})")
    rank = cfg.get("mamba_dt_rank")
    _mamba_heads(cfg, h)  # ZambaConfig.validate_architecture; the heads split one Mamba-1 mixer's sizes
    ssm = {"kind": "mamba", "d_state": cfg.integer("mamba_d_state"), "d_conv": cfg.integer("mamba_d_conv"),
           "expand": cfg.integer("mamba_expand"), "dt_rank": None if rank == "auto" else cfg.integer("mamba_dt_rank"),
           "conv_bias": cfg.flag("mamba_conv_bias"), "proj_bias": cfg.flag("mamba_proj_bias")}
    head_dim = cfg.optional("attention_head_dim") or cfg.optional("head_dim") or 2 * h // heads
    # ZambaMambaMixer builds A_log in float32 (kvplan.cost.fp32)
    return {**_zamba_core(cfg, types, head_dim, ssm, {}), "position": "none", "hf_fp32": ("a_log",)}


def zamba2(cfg: Config) -> dict:
    types = _layer_list(cfg, lambda n: list(_ZAMBA2_LAYERS))
    h, heads = cfg.integer("hidden_size"), cfg.integer("num_attention_heads")
    data = {**cfg.data, "intermediate_size": cfg.optional("intermediate_size") or 4 * h,  # Zamba2Config.__post_init__
            "num_key_value_heads": cfg.sized("num_key_value_heads", heads, "num_attention_heads")}
    if cfg.flag("use_long_context"):
        data["max_position_embeddings"] = 16384
    own = cfg.derive(data)
    bias = cfg.flag("add_bias_linear")
    ssm = {"kind": "mamba2", "d_state": cfg.integer("mamba_d_state"), "d_conv": cfg.integer("mamba_d_conv"),
           "expand": cfg.integer("mamba_expand"), "num_heads": _mamba_heads(cfg, h),
           "n_groups": cfg.integer("mamba_ngroups"), "chunk_size": cfg.integer("chunk_size"), "conv_bias": True,
           "proj_bias": bias}
    shared = {"num_blocks": cfg.integer("num_mem_blocks"), "adapter_rank": cfg.integer("adapter_rank"),
              "attention_adapters": cfg.flag("use_shared_attention_adapter"), "mlp_adapters": True}
    return {**_zamba_core(own, types, 2 * h // heads, ssm, shared), "mlp_bias": bias,
            "position": "rope" if cfg.flag("use_mem_rope") else "none"}


READERS: dict[str, Callable[[Config], dict]] = {
    "bamba": bamba, "nemotron_h": nemotron_h, "granitemoehybrid": granitemoehybrid, "jamba": jamba,
    "falcon_h1": falcon_h1, "zamba": zamba, "zamba2": zamba2,
}

DEFAULTS: dict[str, dict] = {
    "bamba": {"num_key_value_heads": OrNull(8), "attention_bias": False, "hidden_act": "silu", "mamba_chunk_size": 256,
              "mamba_conv_bias": True, "mamba_d_head": "auto", "mamba_d_conv": 4, "mamba_expand": 2,
              "mamba_n_groups": 1, "mamba_proj_bias": False, "max_position_embeddings": 262144, "mlp_bias": False,
              "tie_word_embeddings": False},
    "nemotron_h": {"num_key_value_heads": 8, "head_dim": 128, "chunk_size": 128, "conv_kernel": 4,
                   "mamba_ssm_cache_dtype": "float32", "max_position_embeddings": 4096, "mlp_bias": False,
                   "mlp_hidden_act": "relu2", "n_groups": 8, "num_experts_per_tok": 2, "moe_latent_size": None,
                   "num_nextn_predict_layers": 0, "tie_word_embeddings": False, "use_bias": False,
                   "use_conv_bias": True},
    "granitemoehybrid": {"attention_bias": False, "hidden_act": "silu", "mamba_chunk_size": 256,
                         "mamba_conv_bias": True, "mamba_d_conv": 4, "mamba_d_head": "auto", "mamba_expand": 2,
                         "mamba_n_groups": 1, "mamba_proj_bias": False, "max_position_embeddings": 2048,
                         "num_experts_per_tok": 2, "position_embedding_type": None, "tie_word_embeddings": False},
    "jamba": {"num_key_value_heads": 8, "attn_layer_offset": 4, "attn_layer_period": 8, "expert_layer_offset": 1,
              "expert_layer_period": 2, "hidden_act": "silu", "mamba_conv_bias": True, "mamba_d_conv": 4,
              "mamba_dt_rank": "auto", "mamba_expand": 2, "mamba_proj_bias": False, "max_position_embeddings": 262144,
              "num_experts_per_tok": 2, "tie_word_embeddings": False},
    "falcon_h1": {"num_key_value_heads": OrNull(8), "attention_bias": False, "hidden_act": "silu",
                  "mamba_chunk_size": 256, "mamba_conv_bias": True, "mamba_d_conv": 4, "mamba_d_head": "auto",
                  "mamba_d_ssm": 1024, "mamba_expand": 2, "mamba_n_groups": 1, "mamba_proj_bias": False,
                  "mamba_rms_norm": False, "max_position_embeddings": 8192, "mlp_bias": False, "projectors_bias": False,
                  "tie_word_embeddings": False},
    "zamba": {"hidden_act": "gelu", "max_position_embeddings": 4096, "tie_word_embeddings": True,
              "num_key_value_heads": 16, "n_mamba_heads": 2, "attn_layer_period": 6, "attn_layer_offset": 4,
              "mamba_d_state": 16, "mamba_d_conv": 4, "mamba_expand": 2, "mamba_dt_rank": "auto",
              "mamba_conv_bias": True, "mamba_proj_bias": False},
    "zamba2": {"hidden_act": "gelu", "max_position_embeddings": 4096, "tie_word_embeddings": True, "mamba_d_state": 64,
               "mamba_d_conv": 4, "mamba_expand": 2, "mamba_ngroups": 1, "n_mamba_heads": 8, "chunk_size": 256,
               "add_bias_linear": False, "num_mem_blocks": 1, "use_shared_attention_adapter": False,
               "adapter_rank": 128, "use_mem_rope": False, "use_long_context": False},
}
