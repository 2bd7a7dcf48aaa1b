"""The numbers behind ``kvplan report``: one ``ModelReport`` per model, computed by the library's own functions.

Nothing here draws or formats; ``kvplan.report.document`` renders these numbers, so every value in the document is
a value the library returns (tests compare them). Capacity sections come from ``kvplan.planning.capacity``
(``kvplan plan``).
"""

from __future__ import annotations

import importlib

from dataclasses import dataclass, field

from kvplan.cost.hardware import GPU, load_gpu
from kvplan.cost.kvspec import STATE_DTYPES
from kvplan.errors import KvplanError
from kvplan.units import require_positive
from kvplan.model.card import MAX_COUNT, ModelCard
from kvplan.model.catalog import load_card
from kvplan.planning.compare import CompareResult, compare
from kvplan.planning.estimate import Estimate, estimate
from kvplan.planning.sweep import sweep

DEFAULT_GPUS = ("A100-80GB", "H100-SXM", "H200")
ROOF_BATCHES = (1, 8, 64)
KV_DTYPES = ("fp32", "bf16", "fp8_e4m3", "int8", "int4")
# what a layer kind of the Estimate's kv_cache.groups holds, as the report names it (kvplan.cost.kvspec kinds)
PART_OF_KIND = {"conv_state": "conv state", "ssm_state": "recurrent state"}  # every other kind: attention K/V
ATTENTION_PART = "attention K/V"


@dataclass(frozen=True)
class GpuFit:
    """One GPU holding the weights and ``concurrency`` requests of ``max_model_len`` tokens (no parallelism)."""

    gpu: GPU
    weights_bytes: int
    kv_bytes: int  # concurrency x one request's KV at max_model_len
    free_bytes: int  # memory - weights - KV (negative: does not fit)
    fits: bool
    max_concurrency: int | None  # (memory - weights) // one request's KV: an upper bound; None: no KV cache


@dataclass(frozen=True)
class RoofPoint:
    gpu: str
    phase: str  # prefill or decode
    batch: int
    intensity: float  # FLOP per byte moved
    attainable_flops_per_s: float  # FLOPs / time: min(peak, intensity x bandwidth)
    time_s: float
    bound: str
    compute_dtype: str  # the dtype the engine computes in (the served weights'), whose peak bounds compute
    peak_flops_per_s: float


@dataclass(frozen=True)
class ModelReport:
    card: ModelCard
    estimate: Estimate  # concurrency x max_model_len on the report's engine
    fits: list[GpuFit]
    kv_lengths: list[int]
    kv_curve: dict[str, list[int]]  # KV dtype -> one sequence's KV bytes at each of kv_lengths
    kv_parts: dict[str, list[int]]  # state cards: part (attention K/V, conv state, recurrent state) -> one
    # sequence's bytes of it at each of kv_lengths, default dtype; empty without state layers
    curve_note: str  # why a KV dtype is left out of kv_curve ("" when none is)
    concurrency_curve: dict[str, list[int]]  # GPU -> max concurrency at each of kv_lengths (default dtype)
    layouts: CompareResult | None
    layout_note: str
    roof: list[RoofPoint]
    capacity: list[dict] = field(default_factory=list)  # kvplan.planning.capacity, flattened, one per GPU, when present


@dataclass(frozen=True)
class Report:
    models: list[ModelReport]
    gpus: list[GPU]
    max_model_len: int
    concurrency: int
    engine: str


def build_report(models: list[str | ModelCard], *, gpus: list[str] | None = None, tp: tuple[int, ...] = (1,),
                 max_model_len: int = 8192,
                 concurrency: int = 1, engine: str = "vllm", gpu_file: str | None = None) -> Report:
    """Every number of the capacity report for ``models`` on ``gpus``."""
    if not models:
        raise KvplanError("--model: give one or more models")
    for flag, value in (("--max-model-len", max_model_len), ("--concurrency", concurrency)):
        if not isinstance(value, int) or value < 1:
            raise KvplanError(f"{flag}: a positive integer, got {value}")
    devs = [load_gpu(g, gpu_file) for g in (gpus or DEFAULT_GPUS)]
    planner = importlib.import_module("kvplan.planning.capacity")  # resolved through sys.modules (tests stub it)
    cards = [m if isinstance(m, ModelCard) else load_card(m) for m in models]
    tps = tuple(tp)
    for t in tps:
        require_positive("--tp", t, maximum=1024)
    reports = [_model_report(c, devs, max_model_len, concurrency, engine, planner, tps) for c in cards]
    return Report(reports, devs, max_model_len, concurrency, engine)


def _model_report(card: ModelCard, devs: list[GPU], length: int, conc: int, engine: str, planner,
                  tps: tuple[int, ...] = (1,)) -> ModelReport:
    enc = length if card.architecture == "encoder-decoder" else None  # the encoder reads a max_model_len input
    est = estimate(card, batch=conc, seq_len=length, engine=engine, encoder_len=enc)
    per_req = est.kv_cache.bytes_per_sequence
    fits = [_fit(d, est.weights.bytes, per_req, conc) for d in devs]
    lengths, curve, conc_curve, parts = [], {}, {}, {}
    if card.has_kv_cache:
        lengths = kv_lengths(card, length)
        curve = kv_curve(card, lengths, engine, est.kv_cache.dtype, enc)
        parts = state_parts_curve(card, lengths, engine, est.kv_cache.dtype) if card.ssm else {}
        conc_curve = {d.name: [max(0, (d.memory_bytes - est.weights.bytes) // b) for b in curve[est.kv_cache.dtype]]
                      for d in devs}
    layouts, note = _layouts(card, length, conc, devs[0], engine)
    roof = []
    if card.architecture == "decoder-only":
        roof = [p for d in devs for p in roof_points(card, d, length, conc, engine)]
    capacity = [_capacity(planner, card, d, length, engine, t) for d in devs for t in tps] if card.has_kv_cache else []
    return ModelReport(card, est, fits, lengths, curve, parts, _curve_note(card, engine), conc_curve, layouts, note,
                       roof, capacity)


def _fit(dev: GPU, weights: int, per_req: int, conc: int) -> GpuFit:
    free = dev.memory_bytes - weights - conc * per_req
    most = max(0, (dev.memory_bytes - weights) // per_req) if per_req else None
    return GpuFit(dev, weights, conc * per_req, free, free >= 0, most)


def kv_lengths(card: ModelCard, length: int) -> list[int]:
    """Context lengths for the KV curve: powers of two from 256 to the card's context, the asked length, or 32Ki
    (so a sliding window's plateau shows), whichever is longest. A card without a length limit (a pure state-space
    model: max_position_embeddings MAX_COUNT) ends at the asked length or 32Ki."""
    context = card.max_position_embeddings if card.max_position_embeddings < MAX_COUNT else 0
    top = max(context, length, 32768)
    out, n = [], 256
    while n < top:
        out.append(n)
        n *= 2
    return sorted(set(out) | {top, length})


def kv_curve(card: ModelCard, lengths: list[int], engine: str, default_dtype: str,
             encoder_len: int | None = None) -> dict[str, list[int]]:
    """One sequence's KV bytes at each length, per KV dtype the engine stores (the card's default first)."""
    from kvplan.cost.runtimes import get_engine

    allowed = get_engine(engine).kv_dtypes
    dtypes = [default_dtype] + [d for d in KV_DTYPES if d != default_dtype and (allowed is None or d in allowed)]
    rows = sweep(card, batch=1, seq_len=lengths, kv_dtype=dtypes, engine=engine, encoder_len=encoder_len)
    curve: dict[str, list[int]] = {d: [] for d in dtypes}
    for row in rows:
        curve[row["kv_dtype"]].append(row["kv_cache.bytes_per_sequence"])
    return curve


def state_parts_curve(card: ModelCard, lengths: list[int], engine: str, dtype: str) -> dict[str, list[int]]:
    """One sequence's cache at each length split by part (the Estimate's kv_cache.groups by layer kind): attention
    K/V grows with the context, the conv and recurrent states of the state layers do not."""
    curve: dict[str, list[int]] = {}
    for n in lengths:
        for part, nbytes in kv_parts(estimate(card, seq_len=n, engine=engine, kv_dtype=dtype)).items():
            curve.setdefault(part, []).append(nbytes)
    return curve


def kv_parts(est: Estimate) -> dict[str, int]:
    """The Estimate's kv_cache.total_bytes by part: attention K/V (every attention kind), conv state, recurrent
    state; a part the model lacks is left out."""
    parts: dict[str, int] = {}
    for g in est.kv_cache.groups:
        part = PART_OF_KIND.get(g.kind, ATTENTION_PART)
        parts[part] = parts.get(part, 0) + g.total_bytes
    order = (ATTENTION_PART, *PART_OF_KIND.values())
    return {p: parts[p] for p in order if p in parts}


def _curve_note(card: ModelCard, engine: str) -> str:
    from kvplan.cost.runtimes import get_engine

    allowed = get_engine(engine).kv_dtypes
    left = [d for d in KV_DTYPES if d not in STATE_DTYPES and (allowed is None or d in allowed)]
    if not card.ssm or not left:
        return ""
    verb = "quantizes" if len(left) == 1 else "quantize"
    return (f"{', '.join(left)} {verb} attention K/V only: the conv and recurrent states of {card.name}'s "
            f"{card.state_layers} state layers stay in the model dtype ({card.dtype}) beside them (vLLM's "
            "mamba_cache_dtype 'auto', kvplan.cost.kvspec.states_dtype).")


def _layouts(card: ModelCard, length: int, conc: int, dev: GPU, engine: str) -> tuple[CompareResult | None, str]:
    if card.architecture != "decoder-only":
        return None, (f"Layout what-ifs are compared for decoder-only models; {card.name} is {card.architecture}.")
    if card.mla is not None:
        return None, (f"{card.name} uses MLA: each token caches one latent of {card.mla.kv_lora_rank} + "
                      f"{card.mla.qk_rope_head_dim} values per layer, shared by all {card.num_heads} heads; "
                      "MHA/GQA/MQA what-ifs do not apply (the KV curve above shows the MLA cache).")
    if card.ssm and not card.attention_layers:
        return None, (f"{card.name} has no attention layers: its {card.state_layers} state layers hold a conv and a "
                      "recurrent state of fixed size per sequence, set by the mixer's geometry, so MHA/GQA/MQA "
                      "what-ifs do not apply.")
    heads = [h for h in dict.fromkeys((card.num_heads, 8, 1)) if card.num_heads % h == 0 and h != card.num_kv_heads]
    specs = ["mha" if h == card.num_heads else "mqa" if h == 1 else f"gqa:{card.num_heads // h}" for h in heads]
    if not specs:
        return None, "No other K/V-head layout applies to this card."
    note = "" if not card.ssm else (
        f"The layouts change the K/V heads of the {card.attention_layers} attention layers only; the conv and "
        f"recurrent states of the {card.state_layers} state layers are the same in every row, so the cache shrinks "
        "by less than the head ratio.")
    return compare(card, attention=specs, seq_len=length, batch=conc, gpu=dev, engine=engine), note


def roof_points(card: ModelCard, dev: GPU, length: int, conc: int, engine: str) -> list[RoofPoint]:
    """Prefill and decode of ``length`` tokens at several batch sizes, as ``estimate(..., gpu=...)`` bounds them."""
    points = []
    for b in sorted({*ROOF_BATCHES, conc}):
        r = estimate(card, batch=b, seq_len=length, engine=engine, gpu=dev.name).roofline
        for phase, p in (("prefill", r.prefill), ("decode", r.decode_step)):
            points.append(RoofPoint(dev.name, phase, b, p.arithmetic_intensity_flops_per_byte, p.flops / p.time_s,
                                    p.time_s, p.bound, r.compute_dtype, r.peak_flops_per_s))
    return points


def _capacity(planner, card: ModelCard, dev: GPU, length: int, engine: str, tp: int = 1) -> dict:
    """The planner's result for ``tp`` GPUs of one type, flattened with dots; {"error": why} where it refuses."""
    from kvplan.planning.sweep_extra import flatten

    try:
        result = planner.plan(card, gpu=dev, max_model_len=length, engine=engine, **({"tp": tp} if tp > 1 else {}))
    except KvplanError as exc:
        return {"gpu": _option(dev.name, tp), "tp": tp, "error": str(exc)}
    data = result.model_dump(mode="json") if hasattr(result, "model_dump") else dict(result)
    return {"gpu": _option(dev.name, tp), "tp": tp, **flatten(data)}


def _option(gpu: str, tp: int) -> str:
    return gpu if tp == 1 else f"{tp}x {gpu} (TP {tp})"
