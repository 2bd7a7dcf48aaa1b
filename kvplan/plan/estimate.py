"""``kvplan.estimate``: KV cache and weight memory of a model, as a typed, JSON-ready result.

>>> from kvplan import estimate
>>> r = estimate("llama-2-7b", batch=16, seq_len=4096)
>>> r.kv_cache.bytes_per_token, r.kv_cache.total_bytes
(524288, 34359738368)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from kvplan.model.card import ModelCard
from kvplan.model.catalog import load_card
from kvplan.model.dtypes import TORCH_NAMES, DType, parse_dtype
from kvplan.errors import KvplanError
from kvplan.cost.kvspec import ENGINE_DESCRIPTIONS, EngineParams, KVLayerSpec, check_engine, layer_specs, positions_held
from kvplan.model.layouts import with_layout
from kvplan.cost.params import count_params
from kvplan.units import fmt_bytes

SCHEMA_VERSION = 1
_RESULT = ConfigDict(frozen=True, extra="forbid")


class EstimateInputs(BaseModel):
    """The inputs, echoed, with defaults resolved (dtypes, max_cache_len)."""

    model_config = _RESULT
    model: str
    batch: int
    seq_len: int
    encoder_len: int | None
    kv_dtype: str
    weight_dtype: str
    engine: str
    max_cache_len: int | None
    block_size: int
    kv_heads: int | None
    attention: str | None
    prompt_len: int
    gpu: str | None = None


class ModelSummary(BaseModel):
    model_config = _RESULT
    name: str
    source: str
    architecture: str
    attention: str  # MHA, MQA, GQA or MLA
    attention_detail: str
    num_layers: int
    num_kv_heads: int
    head_dim: int
    layout_changed: bool  # --kv-heads / --attention replaced the card's own layout


class KVGroup(BaseModel):
    """Layers of one kind with identical cache geometry, e.g. Gemma-2's 21 sliding layers."""

    model_config = _RESULT
    kind: str  # full, sliding, mla, cross
    layers: int
    window: int | None
    bytes_per_token: int  # per layer, per sequence
    positions_held: int  # per layer, per sequence
    total_bytes: int  # these layers, whole batch
    formula: str


class KVCacheResult(BaseModel):
    model_config = _RESULT
    engine: str
    engine_rule: str
    dtype: str
    bytes_per_token: int  # one more cached token, one sequence, while no window is full (self-attention layers)
    bytes_per_sequence: int
    scale_bytes: int  # fixed per-layer quantization scales (fp8 per-tensor k/v scales), whole model
    total_bytes: int  # whole batch
    groups: list[KVGroup]


class WeightsResult(BaseModel):
    model_config = _RESULT
    params: int
    active_params: int  # per token: only the routed experts a token uses (equal to params for dense models)
    dtype: str
    bytes: int
    breakdown: dict[str, int]


class Estimate(BaseModel):
    """Everything ``kvplan estimate`` reports; ``--json`` prints exactly this."""

    model_config = _RESULT
    schema_version: int = SCHEMA_VERSION
    inputs: EstimateInputs
    model: ModelSummary
    kv_cache: KVCacheResult
    weights: WeightsResult
    total_bytes: int  # weights + KV cache
    flops: dict[str, dict[str, int | str | None]] | None  # prefill and decode_step (kvplan.cost.flops); decoder-only
    roofline: dict[str, Any] | None = None  # kvplan.cost.roofline.RooflineResult, with --gpu
    notes: list[str]


def estimate(model: ModelCard | str | Path, *, batch: int = 1, seq_len: int, encoder_len: int | None = None,
             kv_dtype: str | None = None, weight_dtype: str | None = None, engine: str = "ideal",
             max_cache_len: int | None = None, block_size: int = 16, kv_heads: int | None = None,
             attention: str | None = None, prompt_len: int | None = None, gpu: str | None = None,
             gpu_file: str | None = None, mfu: float = 1.0, mbu: float = 1.0) -> Estimate:
    """Estimate KV cache and weight bytes of ``model`` (a card, a bundled name, or a card path).

    ``seq_len`` is the tokens each of ``batch`` sequences holds; ``encoder_len`` the encoder tokens that
    cross-attention caches (encoder-decoder models). Dtypes default to the card's. ``prompt_len`` (default
    ``seq_len``) sizes the prefill FLOPs; ``gpu`` adds roofline bounds. Raises KvplanError on bad input.
    """
    base = model if isinstance(model, ModelCard) else load_card(model)
    card = with_layout(base, kv_heads=kv_heads, attention=attention)
    _check_sizes(card, batch=batch, seq_len=seq_len, encoder_len=encoder_len, block_size=block_size)
    kv_t = parse_dtype(kv_dtype or TORCH_NAMES[card.dtype], what="--kv-dtype")
    w_t = parse_dtype(weight_dtype or TORCH_NAMES[card.dtype], what="--weight-dtype")
    check_engine(engine, kv_t)
    if engine == "hf-static":
        max_cache_len = max_cache_len or seq_len
        if max_cache_len < seq_len:
            raise KvplanError(f"--max-cache-len: {max_cache_len} is below --seq-len {seq_len}; a StaticCache cannot "
                              "hold more positions than it preallocates")
    elif max_cache_len is not None:
        raise KvplanError(f"--max-cache-len: only used by --engine hf-static (got --engine {engine})")
    params = EngineParams(engine, seq_len, encoder_len or 0, max_cache_len or 0, block_size)
    inputs = EstimateInputs(model=card.name, batch=batch, seq_len=seq_len, encoder_len=encoder_len,
                            kv_dtype=kv_t.name, weight_dtype=w_t.name, engine=engine, max_cache_len=max_cache_len,
                            block_size=block_size, kv_heads=kv_heads, attention=attention,
                            prompt_len=prompt_len or seq_len, gpu=gpu)
    kv = kv_cache(card, kv_t, params, batch)
    weights = weights_result(card, w_t)
    notes = _notes(card, kv_t, w_t, seq_len) + _engine_notes(kv, batch)
    flops, roof = _compute(card, inputs, gpu_file=gpu_file, mfu=mfu, mbu=mbu, notes=notes)
    return Estimate(inputs=inputs, model=summarize(card, base), kv_cache=kv, weights=weights,
                    total_bytes=kv.total_bytes + weights.bytes, flops=flops, roofline=roof, notes=notes)


def _compute(card: ModelCard, i: EstimateInputs, *, gpu_file: str | None, mfu: float, mbu: float,
             notes: list[str]) -> tuple[dict | None, dict | None]:
    """FLOPs of the prefill and one decode step (decoder-only), and with a GPU the roofline bounds."""
    if i.prompt_len < 1 or i.prompt_len > i.seq_len:
        raise KvplanError(f"--prompt-len: must be 1..{i.seq_len} (--seq-len), got {i.prompt_len}")
    if card.architecture != "decoder-only":
        notes.append("FLOPs and roofline bounds are modelled for decoder-only models; none are reported here.")
        if i.gpu:
            raise KvplanError(f"--gpu: roofline bounds are modelled for decoder-only models; {card.name} is "
                              f"{card.architecture}")
        return None, None
    from kvplan.cost.flops import flops_result

    flops = flops_result(card, batch=i.batch, prompt_len=i.prompt_len, seq_len=i.seq_len, engine=i.engine,
                         max_cache_len=i.max_cache_len)
    if i.gpu is None:
        return flops, None
    from kvplan.cost.roofline import roofline

    roof = roofline(card, batch=i.batch, prompt_len=i.prompt_len, seq_len=i.seq_len, gpu=i.gpu, engine=i.engine,
                    kv_dtype=i.kv_dtype, weight_dtype=i.weight_dtype, mfu=mfu, mbu=mbu,
                    max_cache_len=i.max_cache_len, block_size=i.block_size, gpu_file=gpu_file)
    return flops, roof.model_dump(mode="json")


def _check_sizes(card: ModelCard, *, batch: int, seq_len: int, encoder_len: int | None, block_size: int) -> None:
    for flag, value in (("--batch", batch), ("--seq-len", seq_len), ("--block-size", block_size)):
        if value < 1:
            raise KvplanError(f"{flag}: must be a positive integer, got {value}")
    if card.architecture == "encoder-decoder":
        if encoder_len is None or encoder_len < 1:
            raise KvplanError(f"--encoder-len: {card.name} is encoder-decoder; give the encoder tokens its "
                              "cross-attention caches (a positive integer)")
    elif encoder_len is not None:
        raise KvplanError(f"--encoder-len: only for encoder-decoder models; {card.name} is {card.architecture}")


def kv_cache(card: ModelCard, kv_t: DType, e: EngineParams, batch: int) -> KVCacheResult:
    """Sum the per-layer specs; group identical layers for the breakdown."""
    specs = layer_specs(card, kv_t, e.name)
    groups: dict[tuple, list[KVLayerSpec]] = {}
    for spec in specs:
        groups.setdefault((spec.kind, spec.vectors, spec.window), []).append(spec)
    rows = [_group_row(members[0], len(members), e, batch) for members in groups.values()]
    per_seq = sum(positions_held(s, e) * s.bytes_per_token for s in specs)
    scale_bytes = kv_t.layer_scale_bytes * len(specs)
    return KVCacheResult(
        engine=e.name, engine_rule=ENGINE_DESCRIPTIONS[e.name], dtype=kv_t.name,
        bytes_per_token=sum(s.bytes_per_token for s in specs if s.kind != "cross"),
        bytes_per_sequence=per_seq, scale_bytes=scale_bytes, total_bytes=batch * per_seq + scale_bytes, groups=rows)


def _group_row(spec: KVLayerSpec, layers: int, e: EngineParams, batch: int) -> KVGroup:
    held = positions_held(spec, e)
    total = batch * layers * held * spec.bytes_per_token
    tokens = f"{held} tokens"
    if e.name == "vllm":
        tokens += f" ({held // e.block_size} blocks of {e.block_size})"
    factor = f" x {spec.factor}" if spec.factor else ""
    formula = f"{batch} seq x {layers} layers x {spec.shape} x {tokens}{factor} x {spec.dtype.describe_element()}"
    scales = sum(count * spec.dtype.scale_bytes(elems) for count, elems in spec.vectors)
    if scales:
        formula += f" + scales {scales} B per token and layer"
    return KVGroup(kind=spec.kind, layers=layers, window=spec.window, bytes_per_token=spec.bytes_per_token,
                   positions_held=held, total_bytes=total, formula=f"{formula} = {fmt_bytes(total)}")


def weights_result(card: ModelCard, w_t: DType) -> WeightsResult:
    p = count_params(card)
    breakdown = {"embedding": p.embedding, "positions": p.positions, "attention": p.attention, "mlp": p.mlp,
                 "norms": p.norms, "lm_head": p.lm_head, "other": p.other}
    return WeightsResult(params=p.total, active_params=p.active, dtype=w_t.name,
                         bytes=w_t.data_bytes(p.total), breakdown=breakdown)


def summarize(card: ModelCard, base: ModelCard) -> ModelSummary:
    return ModelSummary(name=card.name, source=card.source, architecture=card.architecture,
                        attention=card.attention_kind, attention_detail=card.attention_label,
                        num_layers=card.num_layers, num_kv_heads=card.num_kv_heads, head_dim=card.head_dim,
                        layout_changed=card.num_kv_heads != base.num_kv_heads)


def _engine_notes(kv: KVCacheResult, batch: int) -> list[str]:
    """What the engine's memory holds beyond its tensors' own sizes."""
    notes = []
    for g in kv.groups:
        if kv.engine == "hf-dynamic" and g.kind == "sliding" and g.positions_held == g.window - 1:
            # transformers slices [-W+1:] as a view of the step's cat() result: the storage of W positions stays
            extra = batch * g.layers * g.bytes_per_token
            notes.append(f"hf-dynamic: each sliding layer's {g.positions_held} positions are a view of a "
                         f"{g.window}-position tensor, so the allocator holds {fmt_bytes(extra)} ({extra} B) more "
                         "than the cache tensors (and a whole prompt's worth right after a long prefill).")
    return notes


def _notes(card: ModelCard, kv_t: DType, w_t: DType, seq_len: int) -> list[str]:
    notes = []
    if not card.has_kv_cache:
        notes.append(f"{card.name} is encoder-only: it reads its whole input in one bidirectional pass and holds "
                     "no KV cache at inference, so the KV cache is 0 B.")
    if seq_len > card.max_position_embeddings:
        notes.append(f"--seq-len {seq_len} exceeds the model's max_position_embeddings "
                     f"({card.max_position_embeddings}); the model was not trained for this length.")
    if kv_t.layer_scale_bytes:
        notes.append(f"{kv_t.name} KV: per-tensor fp32 k_scale and v_scale per layer ({kv_t.layer_scale_bytes} B "
                     "each layer) are included in the total.")
    if w_t.name in ("int8", "int4"):
        notes.append(f"{w_t.name} weights: the bytes are the packed values only; per-group scales and zero-points of "
                     "a GPTQ/AWQ checkpoint add to this.")
    return notes
