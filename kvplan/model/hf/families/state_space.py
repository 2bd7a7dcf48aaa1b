"""State-space models of mixer-only blocks (Mamba, Falcon-Mamba, Mamba-2), as transformers 5.x builds them: a card
``ssm:`` block and ``mamba`` layers; ``mamba2_block`` reads the ``mamba_*`` keys the hybrids share.

``DEFAULTS``: the behavioural keys and the conv kernel / expand / group / chunk knobs a config.json may omit (never
the sizes d_state, heads, widths), read from the transformers 5.23 config classes' field defaults (before
``__post_init__``: time_step_rank "auto"); checked in tests/test_state_layers.py.
"""

from __future__ import annotations

from typing import Callable

from kvplan.model.card import MAX_COUNT
from kvplan.model.hf.reader import Config


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
           "expand": cfg.integer("expand"), "num_heads": cfg.integer("num_heads"),
           "head_dim": cfg.sized("head_dim", None, "no fallback"),
           "n_groups": cfg.integer("n_groups"), "chunk_size": cfg.integer("chunk_size"),
           "conv_bias": cfg.flag("use_conv_bias"), "proj_bias": cfg.flag("use_bias")}
    return _pure(cfg, ssm)


def mamba2_block(cfg: Config) -> dict:
    """The ``ssm`` block from the ``mamba_*`` keys Bamba, Granite-MoE-Hybrid and Falcon-H1 share (mamba_d_head
    "auto": intermediate / heads)."""
    head = cfg.get("mamba_d_head")
    return {"kind": "mamba2", "d_state": cfg.integer("mamba_d_state"), "d_conv": cfg.integer("mamba_d_conv"),
            "expand": cfg.integer("mamba_expand"), "num_heads": cfg.integer("mamba_n_heads"),
            "head_dim": None if head == "auto" else cfg.integer("mamba_d_head"),
            "n_groups": cfg.integer("mamba_n_groups"), "chunk_size": cfg.integer("mamba_chunk_size"),
            "conv_bias": cfg.flag("mamba_conv_bias"), "proj_bias": cfg.flag("mamba_proj_bias")}


READERS: dict[str, Callable[[Config], dict]] = {
    "mamba": mamba, "falcon_mamba": mamba, "mamba2": mamba2,
}

DEFAULTS: dict[str, dict] = {
    "mamba": {"conv_kernel": 4, "expand": 2, "tie_word_embeddings": True, "time_step_rank": "auto", "use_bias": False,
              "use_conv_bias": True},
    "falcon_mamba": {"conv_kernel": 4, "expand": 2, "tie_word_embeddings": True, "time_step_rank": "auto",
                     "use_bias": False, "use_conv_bias": True},
    "mamba2": {"head_dim": 64, "chunk_size": 256, "conv_kernel": 4, "expand": 2, "n_groups": 8,
               "tie_word_embeddings": False, "use_bias": False, "use_conv_bias": True},
}
