"""`kvplan estimate`."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from kvplan.cli import options as o
from kvplan.cli.output import emit


def estimate(
    model: o.Model = None,
    gguf: o.Gguf = None,
    hf_config: o.HfConfig = None,
    batch: o.Batch = 1,
    seq_len: Annotated[int, typer.Option("--seq-len", help="Tokens each sequence holds (prompt + generated).")] = ...,
    encoder_len: o.EncoderLen = None,
    kv_dtype: o.KvDtype = None,
    weight_dtype: o.WeightDtype = None,
    kv_heads: Annotated[Optional[int], typer.Option("--kv-heads", help="What-if: this many KV heads.")] = None,
    attention: o.Attention = None,
    engine: o.Engine = "ideal",
    max_cache_len: Annotated[Optional[int], typer.Option(
        "--max-cache-len", help="hf-static: preallocated positions (default --seq-len).")] = None,
    block_size: o.EstimateBlockSize = None,
    enable_prefix_caching: o.EnablePrefixCaching = None,
    prompt_len: Annotated[Optional[int], typer.Option(
        "--prompt-len", help="Prefill length for FLOPs; default --seq-len.")] = None,
    gpu: o.Gpu = None,
    gpu_file: o.GpuFile = None,
    mfu: Annotated[Optional[float], typer.Option("--mfu", help="With --gpu: achieved share of peak FLOP/s, (0, 1].")] = None,
    mbu: Annotated[Optional[float], typer.Option("--mbu", help="With --gpu: achieved share of bandwidth, (0, 1].")] = None,
    ctx_size: o.EstimateCtxSize = None, parallel: o.EstimateParallel = None, kv_unified: o.KvUnified = None,
    cache_type_k: o.CacheTypeK = None, cache_type_v: o.CacheTypeV = None, flash_attn: o.FlashAttn = None,
    n_gpu_layers: o.NGpuLayers = None, swa_full: o.SwaFull = False, ubatch_size: o.UbatchSize = None,
    llamacpp_rules: o.LlamaRules = None, gguf_quant: o.GgufQuant = None,
    tensor_split: o.TensorSplit = None, override_tensor: o.OverrideTensor = None, cpu_moe: o.CpuMoe = False,
    n_cpu_moe: o.NCpuMoe = None, lora: o.Lora = None, lora_rank: o.LoraRank = None,
    lora_targets: o.LoraTargets = None,
    as_json: o.Json = False,
) -> None:
    """KV cache bytes (per token, per sequence, whole batch), weights, and the formula with numbers filled in."""
    from kvplan.model.resolve import resolve_card
    from kvplan.planning.estimate import EstimateRequest, check_block_flag, estimate_request

    given = dict(n_ctx=ctx_size, n_parallel=parallel, kv_unified=kv_unified, type_k=cache_type_k, type_v=cache_type_v,
                 flash_attn=flash_attn, n_gpu_layers=n_gpu_layers, swa_full=swa_full or None, n_ubatch=ubatch_size,
                 rules=llamacpp_rules, gguf_quant=gguf_quant,
                 tensor_split=tensor_split, overrides=override_tensor, cpu_moe=cpu_moe or None, n_cpu_moe=n_cpu_moe,
                 lora=lora, lora_rank=lora_rank, lora_targets=lora_targets)
    llama = None
    if any(v is not None for v in given.values()):  # llama.cpp's flags: its module loads only when one is given
        from kvplan.cost.llamacpp import llama_flags

        llama = llama_flags(**given)
    request = EstimateRequest.build(
        batch=batch, seq_len=seq_len, encoder_len=encoder_len, kv_dtype=kv_dtype, weight_dtype=weight_dtype,
        engine=engine, max_cache_len=max_cache_len, block_size=block_size, kv_heads=kv_heads, attention=attention,
        prompt_len=prompt_len, gpu=gpu, gpu_file=gpu_file, mfu=mfu, mbu=mbu, llama=llama,
        enable_prefix_caching=enable_prefix_caching)
    check_block_flag(request)
    result = estimate_request(resolve_card(model, hf_config, gguf), request)
    from kvplan.report.estimate import render_estimate

    emit(result, as_json, render_estimate)


def register(app: typer.Typer) -> None:
    from kvplan.cli.examples import epilog

    app.command(epilog=epilog("estimate"))(estimate)
