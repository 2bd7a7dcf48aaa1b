"""Reading a config.json's RoPE scaling into a card's ``rope_scaling`` (kvplan.model.rope).

transformers 4.x writes ``rope_scaling`` (``rope_type``, or the legacy ``type``); 5.x writes ``rope_parameters``,
flat or one dict per layer type (``full_attention`` / ``sliding_attention``): the global layers' entry is the one
read. A scaling that leaves vLLM's rotary cache at max_position_embeddings (``default``, ``llama3``, ``ntk``, M-RoPE,
a dict without a type, which transformers only warns about) is not carried.
"""

from __future__ import annotations

from typing import Any

from kvplan.errors import KvplanError, clip
from kvplan.model.hf.reader import NOT_CARRIED, Config
from kvplan.model.rope import RAW_TYPES

# vLLM's config patch renames Phi-3's early "su" scaling to longrope (transformers_utils/config.py)
_ALIASES = {"su": "longrope"}


def rope_scaling(cfg: Config) -> dict:
    """``{"rope_scaling": {...}}`` for a scaling that sets the rotary cache's length, else ``{}``."""
    raw, key = _raw(cfg)
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise KvplanError(f"{cfg.origin}: {key}: {clip(raw)} is not an object; allowed: an object or null")
    named = raw.get("rope_type", raw.get("type"))
    kind = RAW_TYPES.get(_ALIASES.get(named, named)) if isinstance(named, str) else None
    if kind is None or (kind == "dynamic" and "factor" not in raw):  # dynamic by alpha (Hunyuan): max_position
        if named not in (None, "default"):
            cfg.assume(f"{NOT_CARRIED}{key} of type {clip(named)}: it does not change the rotary cache kvplan "
                       "sizes (kvplan.model.rope)")
        return {}
    out: dict[str, Any] = {"rope_type": kind}
    if kind != "longrope":
        out["factor"] = _number(cfg, key, raw.get("factor"))
    if kind in ("yarn", "longrope"):
        out["original_max_position_embeddings"] = _original(cfg, key, raw)
    return {"rope_scaling": out}


def partial_rotary(cfg: Config) -> dict:
    """``{"partial_rotary_factor": f}`` where the rotary embedding turns only ``f`` of head_dim, else ``{}``: the
    config's own key (Qwen3-Next, Phi-2), else the one transformers 5.x moves into ``rope_parameters`` (Qwen3.5's
    text_config), else the config class's default."""
    raw, key = _raw(cfg)
    if cfg.has("partial_rotary_factor"):
        value, key = cfg.data["partial_rotary_factor"], "partial_rotary_factor"
    elif isinstance(raw, dict) and raw.get("partial_rotary_factor") is not None:
        value, key = raw["partial_rotary_factor"], f"{key}.partial_rotary_factor"
    elif "partial_rotary_factor" in cfg.defaults:
        value, key = cfg.get("partial_rotary_factor"), "partial_rotary_factor"
    else:
        return {}
    if type(value) not in (int, float) or not 0 < value <= 1:
        raise KvplanError(f"{cfg.origin}: {key}: {clip(value)} is not a rotary fraction; allowed: a number in (0, 1]")
    return {} if value == 1 else {"partial_rotary_factor": float(value)}


def _original(cfg: Config, key: str, raw: dict) -> int:
    """The pre-training context as transformers 5.x standardizes it (modeling_rope_utils.py
    ``standardize_rope_params``): the top-level key first (Phi-3 keeps it there), then the scaling's own, else
    max_position_embeddings (recorded as assumed)."""
    if cfg.has("original_max_position_embeddings"):
        return cfg.integer("original_max_position_embeddings")
    if raw.get("original_max_position_embeddings") is not None:
        return cfg.check_int(f"{key}.original_max_position_embeddings", raw["original_max_position_embeddings"])
    cfg.assumed.append(f"{key}.original_max_position_embeddings=max_position_embeddings (transformers' fallback)")
    return cfg.integer("max_position_embeddings")


def _raw(cfg: Config) -> tuple[Any, str]:
    if cfg.data.get("rope_scaling") is not None:
        return cfg.data["rope_scaling"], "rope_scaling"
    params = cfg.data.get("rope_parameters")
    if params is None and "rope_parameters" in cfg.defaults:  # gpt-oss: __post_init__ fills YaRN x32 for None too
        params = cfg.get("rope_parameters")
    if isinstance(params, dict) and isinstance(params.get("full_attention"), dict):
        return params["full_attention"], "rope_parameters.full_attention"
    return params, "rope_parameters"


def _number(cfg: Config, key: str, value: Any) -> float:
    if type(value) in (int, float) and 0 < value <= 1e6:
        return float(value)
    raise KvplanError(f"{cfg.origin}: {key}.factor: {clip(value)} is not a scaling factor; allowed: a number in "
                      "(0, 1e6]")
