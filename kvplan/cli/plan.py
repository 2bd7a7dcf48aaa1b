"""`kvplan plan`: concurrency on a layout (with --gpu), or which GPUs and how many (without)."""

from __future__ import annotations

import typer

from kvplan.cli import options as o


def plan(
    model: o.Model = None, hf_config: o.HfConfig = None, gguf: o.Gguf = None, max_model_len: o.MaxModelLen = ..., gpu: o.Gpu = None,
    gpu_file: o.GpuFile = None, gpu_memory: o.GpuMemory = None, tp: o.Tp = None, pp: o.Pp = None, dp: o.Dp = None,
    engine: o.PlanEngine = "vllm", util: o.Util = None, mfs: o.Mfs = None, kv_cache_memory: o.KvCacheMemory = None,
    mnbt: o.Mnbt = None, max_num_seqs: o.MaxNumSeqs = None, block_size: o.PlanBlockSize = None,
    kv_dtype: o.KvDtype = None, weight_dtype: o.WeightDtype = None, activation_memory: o.ActivationMemory = None,
    non_torch_memory: o.NonTorchMemory = None, cuda_graph_memory: o.CudaGraphMemory = None,
    context_memory: o.ContextMemory = None, concurrency: o.Concurrency = None, gpus: o.Gpus = None,
    max_gpus: o.MaxGpus = 8, ttft_ms: o.TtftMs = None, tpot_ms: o.TpotMs = None, prompt_len: o.PromptLen = None,
    expert_parallel: o.ExpertParallel = False, ctx_size: o.CtxSize = None, parallel: o.Parallel = None,
    kv_unified: o.KvUnified = None, cache_type_k: o.CacheTypeK = None, cache_type_v: o.CacheTypeV = None,
    flash_attn: o.FlashAttn = None, n_gpu_layers: o.NGpuLayers = None, swa_full: o.SwaFull = False,
    ubatch_size: o.UbatchSize = None, llamacpp_rules: o.LlamaRules = None, gguf_quant: o.GgufQuant = None,
    as_json: o.Json = False,
    free_gpu_memory_fraction: o.FreeGpuMemoryFraction = None, max_num_tokens: o.MaxNumTokens = None,
    max_batch_size: o.MaxBatchSize = None, cuda_memory_fraction: o.CudaMemoryFraction = None,
    max_batch_prefill_tokens: o.MaxBatchPrefillTokens = None, speculative_config: o.SpeculativeConfig = None,
    shared_prefix_len: o.SharedPrefixLen = None, enable_lora: o.EnableLora = False, max_loras: o.MaxLoras = None,
    max_lora_rank: o.MaxLoraRank = None, limit_mm_per_prompt: o.LimitMmPerPrompt = None,
    mm_encoder_tp_mode: o.MmEncoderTpMode = None,
) -> None:
    """How many concurrent requests of --max-model-len fit, with the engine's own arithmetic; without --gpu, which
    GPUs and how many hold --concurrency of them."""
    from kvplan.cost.llamacpp import llama_flags
    from kvplan.model.resolve import resolve_card

    card = resolve_card(model, hf_config, gguf)
    common = dict(max_model_len=max_model_len, engine=engine, gpu_memory=gpu_memory, gpu_file=gpu_file,
                  gpu_memory_utilization=util, mem_fraction_static=mfs, kv_cache_memory=kv_cache_memory,
                  max_num_batched_tokens=mnbt, max_num_seqs=max_num_seqs, block_size=block_size, kv_dtype=kv_dtype,
                  weight_dtype=weight_dtype, activation_memory=activation_memory, non_torch_memory=non_torch_memory,
                  cuda_graph_memory=cuda_graph_memory, context_memory=context_memory, prompt_len=prompt_len,
                  expert_parallel=expert_parallel,
                  llama=llama_flags(n_ctx=ctx_size, n_parallel=parallel, kv_unified=kv_unified, type_k=cache_type_k,
                                    type_v=cache_type_v, flash_attn=flash_attn, n_gpu_layers=n_gpu_layers,
                                    swa_full=swa_full or None, n_ubatch=ubatch_size, rules=llamacpp_rules,
                                    gguf_quant=gguf_quant))
    common.update({k: v for k, v in dict(
        free_gpu_memory_fraction=free_gpu_memory_fraction, max_num_tokens=max_num_tokens,
        max_batch_size=max_batch_size, cuda_memory_fraction=cuda_memory_fraction,
        max_batch_prefill_tokens=max_batch_prefill_tokens, speculative_config=speculative_config,
        shared_prefix_len=shared_prefix_len, enable_lora=enable_lora or None, max_loras=max_loras,
        max_lora_rank=max_lora_rank, limit_mm_per_prompt=limit_mm_per_prompt,
        mm_encoder_tp_mode=mm_encoder_tp_mode).items() if v is not None})
    if gpu is None:
        _emit(_search(card, concurrency, (tp, pp, dp), gpus, max_gpus, ttft_ms, tpot_ms, common), as_json,
              "render_search")
        return
    from kvplan.errors import KvplanError
    from kvplan.planning.capacity import plan as run

    for flag, value in (("--gpus", gpus), ("--ttft-ms", ttft_ms), ("--tpot-ms", tpot_ms)):
        if value is not None:
            raise KvplanError(f"{flag}: only used by the search (without --gpu)")
    _emit(run(card, gpu=gpu, tp=tp or 1, pp=pp or 1, dp=dp or 1, concurrency=concurrency, **common), as_json,
          "render_plan")


def _search(card, concurrency, layout, gpus, max_gpus, ttft_ms, tpot_ms, common):
    from kvplan.errors import KvplanError
    from kvplan.planning.search import search

    if concurrency is None:
        raise KvplanError("--gpu: give a GPU (`kvplan gpus list`), or --concurrency N to search for GPUs")
    for flag, value in zip(("--tp", "--pp", "--dp"), layout):
        if value is not None:
            raise KvplanError(f"{flag}: the search tries TP 1,2,4,8 x PP 1..4 x DP itself; give --gpu to plan one "
                              "layout")
    names = [n.strip() for n in gpus.split(",") if n.strip()] if gpus else None
    return search(card, concurrency=concurrency, gpus=names, max_gpus=max_gpus, ttft_ms=ttft_ms, tpot_ms=tpot_ms,
                  **common)


def _emit(result, as_json: bool, renderer: str) -> None:
    if as_json:
        from kvplan.report.jsonout import print_json

        print_json(result)
        return
    from kvplan.report import plan as report
    from kvplan.report.console import make_console

    getattr(report, renderer)(result, make_console())


def register(app: typer.Typer) -> None:
    app.command()(plan)
