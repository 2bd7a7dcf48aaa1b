"""Roofline lower bounds for one prefill (time to first token) and one decode step (time per output token).

Each step takes at least max(FLOPs / (peak x mfu), bytes / (bandwidth x mbu)) (Williams, Waterman, Patterson,
"Roofline", CACM 2009). mfu and mbu (achieved fraction of peak FLOP/s and of peak bandwidth) default to 1.0, so the
times are lower bounds: a real engine adds kernel launches, scheduling, communication, and runs below peak.

FLOPs are what the engine executes: the dense count for the transformers engines (they build the full score
matrix), the causal count for ideal and vllm (FlashAttention skips masked blocks). Bytes: kvplan.cost.traffic.
"""

from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from kvplan.cost.engines import CacheRun, Engine
from kvplan.cost.flops import FlopsBreakdown, prefill_flops, step_breakdowns
from kvplan.cost.roofline_results import PhaseRoofline, RooflineResult
from kvplan.cost.kvspec import layer_spec_counts
from kvplan.cost.traffic import StepTraffic, model_weights, path_traffic
from kvplan.units import require_fraction
from kvplan.model.card import ModelCard
from kvplan.model.dtypes import TORCH_NAMES, DType

if TYPE_CHECKING:  # a plain estimate imports no catalog code
    from kvplan.cost.hardware import GPU

@dataclass(frozen=True)
class Workload:
    """What a roofline is taken of: the model as a runtime runs it, in which dtypes, at which batch and lengths."""

    card: ModelCard
    engine: Engine
    kv_t: DType
    w_t: DType
    batch: int
    prompt_len: int
    seq_len: int
    max_cache_len: int | None = None
    block_size: int = 16
    encoder_len: int = 0


def roofline(work: Workload, gpu: "GPU", *, memory_needed_bytes: int, compute_dtype: str | None = None,
             mfu: float = 1.0, mbu: float = 1.0, steps: tuple[FlopsBreakdown, FlopsBreakdown] | None = None,
             held: tuple | list | None = None) -> RooflineResult:
    """Roofline of prefilling ``prompt_len`` tokens and of the decode step that brings each sequence to ``seq_len``.
    ``memory_needed_bytes`` (weights + KV cache, from the caller's estimate) is compared with the GPU's memory;
    ``steps``: those two steps' FLOPs (``step_breakdowns`` of the same arguments) where the caller has them;
    ``held``: what the GPU(s) read where the engine holds the model otherwise than the weights row counts it
    (kvplan.cost.traffic.path_traffic's stages: llama.cpp's GGUF buffers), else the whole model as held
    (``traffic.model_weights``) and its cache."""
    card, engine, kv_t, w_t, batch = work.card, work.engine, work.kv_t, work.w_t, work.batch
    prompt_len, seq_len, max_cache_len, encoder_len = work.prompt_len, work.seq_len, work.max_cache_len, work.encoder_len
    block_size = work.block_size
    check_efficiency(mfu, mbu)
    compute = compute_dtype or served_compute_dtype(gpu, default_compute_dtype(card, w_t, engine))
    peak, bw = gpu.peak(compute) * mfu, gpu.memory_bandwidth_bytes_per_s * mbu
    flops_kw = dict(batch=batch, engine=engine, max_cache_len=max_cache_len, encoder_len=encoder_len)
    pre_f, dec_f = steps or step_breakdowns(card, prompt_len=prompt_len, seq_len=seq_len, **flops_kw)
    pre_run = CacheRun(prompt_len, encoder_len, max_cache_len, block_size)
    dec_run = CacheRun(seq_len, encoder_len, max_cache_len, block_size)
    held = held or ((model_weights(card, w_t, engine, gpu), layer_spec_counts(card, kv_t, engine)),)
    pre = _phase(pre_f, path_traffic(held, engine, pre_run, batch, decode=False), peak, bw, engine.flops_basis)
    dec = _phase(dec_f, path_traffic(held, engine, dec_run, batch, decode=True), peak, bw, engine.flops_basis)
    k = card.moe.experts_per_token if card.moe else None
    return RooflineResult.model_construct(
        gpu=gpu.name, gpu_source=gpu.source, engine=engine.name, batch=batch, prompt_len=prompt_len, seq_len=seq_len,
        compute_dtype=compute, peak_flops_per_s=gpu.peak(compute), ridge_point_flops_per_byte=peak / bw,
        memory_bandwidth_bytes_per_s=gpu.memory_bandwidth_bytes_per_s, mfu=mfu, mbu=mbu,
        memory_needed_bytes=memory_needed_bytes, gpu_memory_bytes=gpu.engine_memory_bytes,
        gpu_memory_visible=gpu.visible_memory_bytes is not None,
        fits_in_memory=memory_needed_bytes <= gpu.engine_memory_bytes, prefill=pre, decode_step=dec,
        moe_decode_weights_read_bytes_min=sum(h.read_bytes(batch, k) for h, _ in held) if card.moe else None,
        time_to_first_token_s=pre.time_s, time_per_output_token_s=dec.time_s,
        time_to_first_token_one_request_s=_one_request_prefill_s(card, engine, held, pre_run, peak, bw, flops_kw),
        decode_tokens_per_s=batch / dec.time_s, notes=_notes(card, engine, mfu, mbu))


def _one_request_prefill_s(card: ModelCard, engine: Engine, held, run: CacheRun, peak: float, bw: float,
                           flops_kw: dict) -> float:
    """The prefill of one request alone: the time to first token a single user sees on an idle GPU."""
    f = _one_request_flops(card, engine, run.seq_len, flops_kw["max_cache_len"], flops_kw["encoder_len"])
    return _phase(f, path_traffic(held, engine, run, 1, decode=False), peak, bw, engine.flops_basis).time_s


@lru_cache(maxsize=256)
def _one_request_flops(card: ModelCard, engine: Engine, prompt_len: int, max_cache_len: int | None,
                       encoder_len: int) -> FlopsBreakdown:
    """``prefill_flops`` of one request, which no GPU figure enters: once per model and length, not once per GPU
    type of a search (card, engine and breakdown are immutable)."""
    return prefill_flops(card, prompt_len=prompt_len, batch=1, engine=engine, max_cache_len=max_cache_len,
                         encoder_len=encoder_len)


def default_compute_dtype(card: ModelCard, w_t: DType, engine: Engine) -> str:
    """The dtype the engine's matrix multiplies run in, whose peak bounds compute: the served weight dtype, not the
    checkpoint's (vLLM and SGLang serve a float32 checkpoint in bfloat16: ``Engine.default_dtype``). fp8 weights run
    on the fp8 units; int8/int4 weights are weight-only, dequantized to the activation dtype, the engine's default
    for the checkpoint. A checkpoint quantized to fp8 (DeepSeek-V3's and Qwen3's FP8 block checkpoints) runs fp8
    GEMMs too: vLLM's ``Fp8LinearMethod.apply`` quantizes the activations per token (group) and multiplies in fp8
    (``apply_w8a8_block_fp8_linear``, ``cutlass_scaled_mm``; model_executor/layers/quantization/fp8.py, 0.10-0.33)."""
    if w_t.name.startswith("fp8") or (card.quantization is not None and card.quantization.method == "fp8"):
        return "fp8"
    if w_t.name in TORCH_NAMES.values():
        return w_t.name
    return engine.default_dtype(card.dtype)[0]


def served_compute_dtype(gpu: "GPU", compute: str) -> str:
    """bf16 on a GPU without bf16 matrix units (Turing: T4) runs in fp16: vLLM's dtype "auto" serves a bf16 checkpoint
    in float16 where the platform lacks bfloat16 (compute capability below 8.0); an explicit choice is kept. fp8
    weights on a GPU without fp8 units (Ampere: A100, A10) run vLLM's weight-only FP8 Marlin kernel, dequantized to
    the activation dtype (fp8.py ``use_marlin`` below compute capability 8.9): bf16 (fp16 where bf16 is missing)."""
    if compute == "fp8" and gpu.peak_flops.fp8 is None:
        compute = "bf16"
    if compute == "bf16" and gpu.peak_flops.bf16 is None and gpu.peak_flops.fp16 is not None:
        return "fp16"
    if compute == "fp16" and gpu.peak_flops.fp16 is None and gpu.peak_flops.bf16 is not None:
        return "bf16"  # the other way (Gaudi 3 states bf16 alone): auto takes a dtype the platform supports
    return compute


def _phase(f: FlopsBreakdown, t: StepTraffic, peak: float, bw: float, basis: str) -> PhaseRoofline:
    flops = f.executed(basis)
    compute_s, memory_s = flops / peak, t.total_bytes / bw
    return PhaseRoofline.model_construct(
        flops=flops, flops_basis=basis, weights_read_bytes=t.weights_read_bytes,
        kv_read_bytes=t.kv_read_bytes, kv_write_bytes=t.kv_write_bytes, bytes_moved=t.total_bytes,
        arithmetic_intensity_flops_per_byte=flops / t.total_bytes, compute_time_s=compute_s,
        memory_time_s=memory_s, time_s=max(compute_s, memory_s),
        bound="compute" if compute_s >= memory_s else "memory")


def check_efficiency(mfu: float, mbu: float) -> None:
    require_fraction("--mfu", mfu)
    require_fraction("--mbu", mbu)


def _notes(card: ModelCard, engine: Engine, mfu: float, mbu: float) -> list[str]:
    notes = [f"Lower bounds: each step takes at least max(FLOPs / (peak x {mfu}), bytes / (bandwidth x {mbu})); "
             "kernel launches, scheduling and communication add to this.",
             "Bytes moved: weights read once as the engine holds them (a quantized checkpoint's packed values and "
             "scales, the embedding table gathered by row), the attended KV cache read once, new K/V written once; "
             "activations, logits and re-reads inside attention kernels are not counted."]
    if card.moe:
        notes.append("MoE: weights of min(num_experts, tokens x experts_per_token) experts per layer are read; "
                     "for batch > 1 that is an upper bound on the experts touched "
                     "(moe_decode_weights_read_bytes_min: all tokens on the same experts).")
    if card.ssm:
        notes.append(f"State layers ({card.state_layers} {card.ssm.kind}): a step reads and writes each sequence's conv "
                     "and recurrent states once (in kv_read_bytes / kv_write_bytes), whatever the length; their "
                     "mixers' FLOPs count the projections, the conv and the scan's contractions (kvplan.cost.ssm_flops).")
    if engine.flops_basis == "dense":
        notes.append(f"{engine.name}: FLOPs are the dense count (eager attention scores every cached position) and the "
                     "LM head runs on every prompt position.")
    return notes
