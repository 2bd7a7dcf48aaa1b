"""The reference model with seeded random weights, in the dtypes its engine holds them in.

A transformers engine (hf-*) holds some parameters of a half-precision model in float32 (transformers 5.24
``_keep_in_fp32_modules(_strict)`` and modules built in float32; kvplan.cost.fp32): the reference model of such a run
holds the same parts in float32, so verify measures the bytes kvplan predicts. The reference implements the router,
norm and FFN-output parts; a card's state-mixer parts (a_log, dt_bias) belong to mixers it does not build.
"""

from __future__ import annotations

import torch
from torch import nn

from kvplan.cost.runtimes import get_engine
from kvplan.cost.fp32 import hf_fp32_parts
from kvplan.model.card import ModelCard
from kvplan.model.dtypes import parse_dtype
from kvplan.verify.reference.model import FFN, Block, MoE, Reference

_HALF = {torch.bfloat16: "bf16", torch.float16: "fp16"}


def build(card: ModelCard, *, engine: str = "ideal", dtype=torch.float32, device="cpu", seed: int = 0,
          hf_fp32: bool = True) -> Reference:
    """The reference model with seeded random weights: N(0, 0.02) matrices, norm weights 1 + N(0, 0.1).
    ``hf_fp32``: hold transformers' float32 modules when ``engine`` is one of its (``keep_fp32``); the sharded verify
    builds every engine's model as vLLM shards it, in the model dtype (kvplan.cost.parallel.rank_weights)."""
    model = Reference(card, engine=engine, dtype=dtype, device=device).eval()
    if hf_fp32:
        keep_fp32(model, card, engine, dtype)
    gen = torch.Generator(device=device).manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            is_norm = name.endswith("weight") and p.dim() == 1
            p.normal_(1.0 if is_norm else 0.0, 0.1 if is_norm else 0.02, generator=gen)
    return model


def keep_fp32(model: Reference, card: ModelCard, engine: str, dtype) -> None:
    """Hold in float32 what transformers keeps so when ``engine`` runs the model in ``dtype`` (kvplan.cost.fp32):
    the MoE routers, the norms, the dense FFNs' output projection (T5's wo)."""
    half = _HALF.get(dtype)
    parts = hf_fp32_parts(card, parse_dtype(half)) if half and get_engine(engine).transformers else ()
    for m in model.modules():
        if "norms" in parts and isinstance(m, (nn.RMSNorm, nn.LayerNorm)):
            m.float()
        elif "router" in parts and isinstance(m, MoE):
            m.router.float()
        elif "ffn_out" in parts and isinstance(m, Block) and isinstance(m.mlp, FFN):
            m.mlp.down.float()
