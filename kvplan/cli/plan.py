"""`kvplan plan`: concurrency on a layout (with --gpu), or which GPUs and how many (without)."""

from __future__ import annotations

import typer

from kvplan.cli import options as o


def plan(
    model: o.Model = None, hf_config: o.HfConfig = None, gguf: o.Gguf = None, max_model_len: o.PlanMaxModelLen = None,
    gpu: o.Gpu = None,
    gpu_file: o.GpuFile = None, gpu_memory: o.GpuMemory = None, platform: o.Platform = None, tp: o.Tp = None, pp: o.Pp = None, dp: o.Dp = None,
    engine: o.PlanEngineOrLog = None, util: o.Util = None, mfs: o.Mfs = None, kv_cache_memory: o.KvCacheMemory = None,
    mnbt: o.Mnbt = None, max_num_seqs: o.MaxNumSeqs = None, block_size: o.PlanBlockSize = None,
    kv_dtype: o.KvDtype = None, weight_dtype: o.WeightDtype = None, activation_memory: o.ActivationMemory = None,
    non_torch_memory: o.NonTorchMemory = None, cuda_graph_memory: o.CudaGraphMemory = None,
    context_memory: o.ContextMemory = None, concurrency: o.Concurrency = None, gpus: o.Gpus = None,
    max_gpus: o.MaxGpus = 8, sort: o.Sort = "gpus", ttft_ms: o.TtftMs = None, tpot_ms: o.TpotMs = None,
    prompt_len: o.PromptLen = None, acceptance_rate: o.AcceptanceRate = None, expert_parallel: o.ExpertParallel = False,
    ctx_size: o.CtxSize = None, parallel: o.Parallel = None,
    kv_unified: o.KvUnified = None, cache_type_k: o.CacheTypeK = None, cache_type_v: o.CacheTypeV = None,
    flash_attn: o.FlashAttn = None, n_gpu_layers: o.NGpuLayers = None, swa_full: o.SwaFull = False,
    ubatch_size: o.UbatchSize = None, llamacpp_rules: o.LlamaRules = None, gguf_quant: o.GgufQuant = None,
    tensor_split: o.TensorSplit = None, override_tensor: o.OverrideTensor = None, cpu_moe: o.CpuMoe = False,
    n_cpu_moe: o.NCpuMoe = None, lora: o.Lora = None, lora_rank: o.LoraRank = None,
    lora_targets: o.LoraTargets = None,
    as_json: o.Json = False,
    free_gpu_memory_fraction: o.FreeGpuMemoryFraction = None, max_num_tokens: o.MaxNumTokens = None,
    max_batch_size: o.MaxBatchSize = None, cuda_memory_fraction: o.CudaMemoryFraction = None,
    max_batch_prefill_tokens: o.MaxBatchPrefillTokens = None, speculative_config: o.SpeculativeConfig = None,
    shared_prefix_len: o.SharedPrefixLen = None, enable_lora: o.EnableLora = False, max_loras: o.MaxLoras = None,
    max_lora_rank: o.MaxLoraRank = None, flashinfer_sampler: o.FlashinferSampler = False,
    cold_compile: o.ColdCompile = False, pp_layer_partition: o.PpLayerPartition = None, from_log: o.FromLog = None,
    calibrate: o.Calibrate = False,
    speculative_algorithm: o.SpecAlgorithm = None, speculative_draft_model_path: o.SpecDraftPath = None,
    speculative_num_steps: o.SpecNumSteps = None, speculative_eagle_topk: o.SpecEagleTopk = None,
    speculative_num_draft_tokens: o.SpecDraftTokens = None, swa_full_tokens_ratio: o.SwaFullTokensRatio = None,
    disable_hybrid_swa_memory: o.DisableHybridSwa = False, max_running_requests: o.MaxRunningRequests = None,
    disable_radix_cache: o.DisableRadixCache = False, max_mamba_cache_size: o.MaxMambaCacheSize = None,
    mamba_radix_cache_strategy: o.MambaRadixCacheStrategy = None,
    limit_mm_per_prompt: o.LimitMmPerPrompt = None, mm_encoder_tp_mode: o.MmEncoderTpMode = None,
    cpu_offload_gb: o.CpuOffloadGb = None, enable_prefix_caching: o.EnablePrefixCaching = None,
) -> None:
    """How many concurrent requests of --max-model-len fit, with the engine's own arithmetic; without --gpu, which
    GPUs and how many hold --concurrency of them; with --from-log FILE, kvplan beside every figure of a real vLLM or
    SGLang start-up log (--calibrate: what-ifs on its measured budget)."""
    from kvplan.errors import KvplanError
    from kvplan.units import parse_tokens

    max_model_len = parse_tokens("--max-model-len", max_model_len, auto=True)
    mnbt = parse_tokens("--max-num-batched-tokens", mnbt)
    if from_log is not None:
        from kvplan.planning.capacity.fromlog import from_log as run_log

        for flag, value in (("--kv-cache-memory", kv_cache_memory), ("--activation-memory", activation_memory),
                            ("--non-torch-memory", non_torch_memory), ("--cuda-graph-memory", cuda_graph_memory),
                            ("--context-memory", context_memory), ("--concurrency", concurrency), ("--gpus", gpus)):
            if value is not None:
                raise KvplanError(f"{flag}: not used with --from-log (the log's own figures are compared; "
                                  "--calibrate reuses its measured overheads)")

        card = None if model is None and hf_config is None and gguf is None else _card(model, hf_config, gguf, engine)
        _emit(run_log(from_log, model=card, gpu=gpu, gpu_memory=gpu_memory, engine=engine, platform=platform,
                      calibrate=calibrate, max_model_len=max_model_len, tp=tp, pp=pp, dp=dp,
                      gpu_memory_utilization=util, mem_fraction_static=mfs, max_num_batched_tokens=mnbt,
                      max_num_seqs=max_num_seqs, block_size=block_size, kv_dtype=kv_dtype, weight_dtype=weight_dtype,
                      expert_parallel=expert_parallel or None, cold_compile=cold_compile or None,
                      cpu_offload_gb=cpu_offload_gb, enable_prefix_caching=enable_prefix_caching),
              as_json, "render_from_log", "fromlog")
        return
    if calibrate:
        raise KvplanError("--calibrate: only with --from-log FILE (the log whose measured overheads are reused)")
    if max_model_len is None:
        raise KvplanError("--max-model-len: required (tokens per request), except with --from-log")
    card = _card(model, hf_config, gguf, engine or "vllm")
    common = dict(max_model_len=max_model_len, engine=engine or "vllm", gpu_file=gpu_file,
                  **serving_keywords(locals()))
    if gpu is None:
        _emit(_search(card, concurrency, (tp, pp, dp), gpus, max_gpus, (ttft_ms, tpot_ms, sort), common), as_json,
              "render_search")
        return
    from kvplan.planning.capacity import plan as run

    for flag, value in (("--gpus", gpus), ("--ttft-ms", ttft_ms), ("--tpot-ms", tpot_ms),
                        ("--sort", None if sort == "gpus" else sort)):
        if value is not None:
            raise KvplanError(f"{flag}: only used by the search (without --gpu)")
    _emit(run(card, gpu=gpu, tp=1 if tp is None else tp, pp=default_pp(common, pp), dp=1 if dp is None else dp,
              concurrency=concurrency, **common), as_json, "render_plan")


# `kvplan plan`'s flags that shape one layout's plan (not the model, GPU, length, engine, search or output flags):
# `kvplan report` takes them too, with the same names, help and meaning (kvplan.cli.report)
PLAN_ONLY = frozenset({"model", "hf_config", "gguf", "max_model_len", "gpu", "gpu_file", "tp", "engine", "concurrency",
                       "gpus", "max_gpus", "sort", "ttft_ms", "tpot_ms", "as_json", "from_log", "calibrate"})


def serving_keywords(v: dict) -> dict:
    """The keyword arguments of ``kvplan.plan`` (its typed PlanRequest) from the values of the flags named as in
    ``plan``'s signature (``v``: every one of them not in PLAN_ONLY, by name), a flag not given left out; ``pp``
    and ``dp`` are the caller's (``default_pp``)."""
    from kvplan.cost.llamacpp import llama_flags

    common = dict(gpu_memory=v["gpu_memory"], platform=v["platform"], gpu_memory_utilization=v["util"], mem_fraction_static=v["mfs"],
                  kv_cache_memory=v["kv_cache_memory"], max_num_batched_tokens=v["mnbt"],
                  max_num_seqs=v["max_num_seqs"], block_size=v["block_size"], kv_dtype=v["kv_dtype"],
                  weight_dtype=v["weight_dtype"], activation_memory=v["activation_memory"],
                  non_torch_memory=v["non_torch_memory"], cuda_graph_memory=v["cuda_graph_memory"],
                  context_memory=v["context_memory"], prompt_len=v["prompt_len"],
                  acceptance_rate=v["acceptance_rate"], expert_parallel=v["expert_parallel"],
                  llama=llama_flags(n_ctx=v["ctx_size"], n_parallel=v["parallel"], kv_unified=v["kv_unified"],
                                    type_k=v["cache_type_k"], type_v=v["cache_type_v"], flash_attn=v["flash_attn"],
                                    n_gpu_layers=v["n_gpu_layers"], swa_full=v["swa_full"] or None,
                                    n_ubatch=v["ubatch_size"], rules=v["llamacpp_rules"], gguf_quant=v["gguf_quant"],
                                    tensor_split=v["tensor_split"], overrides=v["override_tensor"],
                                    cpu_moe=v["cpu_moe"] or None, n_cpu_moe=v["n_cpu_moe"], lora=v["lora"],
                                    lora_rank=v["lora_rank"], lora_targets=v["lora_targets"]))
    extra = {k: v[k] for k in (
        "free_gpu_memory_fraction", "max_num_tokens", "max_batch_size", "cuda_memory_fraction",
        "max_batch_prefill_tokens", "speculative_config", "shared_prefix_len", "max_loras", "max_lora_rank",
        "pp_layer_partition", "speculative_algorithm", "speculative_draft_model_path", "speculative_num_steps",
        "speculative_eagle_topk", "speculative_num_draft_tokens", "limit_mm_per_prompt", "mm_encoder_tp_mode",
        "cpu_offload_gb", "swa_full_tokens_ratio", "max_running_requests", "max_mamba_cache_size",
        "mamba_radix_cache_strategy", "enable_prefix_caching")}
    extra.update({k: v[k] or None for k in ("enable_lora", "flashinfer_sampler", "cold_compile",
                                             "disable_hybrid_swa_memory", "disable_radix_cache")})  # a switch left off: not given
    common.update({k: x for k, x in extra.items() if x is not None})
    return common


def default_pp(common: dict, pp: int | None) -> int:
    """--pp, else llama.cpp's one GPU per -ts share, else 1 (--pp 0 is refused by the planner, not read as 1)."""
    split = common["llama"].tensor_split if common.get("llama") else None
    return (len(split) if split else 1) if pp is None else pp


def _search(card, concurrency, layout, gpus, max_gpus, targets, common):
    from kvplan.errors import KvplanError
    from kvplan.planning.capacity.search import search

    if concurrency is None:
        raise KvplanError("--gpu: give a GPU (`kvplan gpus list`), or --concurrency N to search for GPUs")
    for flag, value in zip(("--tp", "--pp", "--dp"), layout):
        if value is not None:
            raise KvplanError(f"{flag}: the search tries TP 1,2,4,8 x PP 1..4 x DP itself; give --gpu to plan one "
                              "layout")
    if common.get("pp_layer_partition") is not None:
        raise KvplanError("--pp-layer-partition: the split of one layout; give --gpu and --pp N to plan it (the search "
                          "tries its own layouts)")
    names = [n.strip() for n in gpus.split(",") if n.strip()] if gpus else None
    ttft_ms, tpot_ms, sort = targets
    return search(card, concurrency=concurrency, gpus=names, max_gpus=max_gpus, ttft_ms=ttft_ms, tpot_ms=tpot_ms,
                  sort=sort, **common)


def _card(model, hf_config, gguf, engine):
    from kvplan.model.resolve import resolve_card

    per_layer_ok = False
    if gguf is not None and engine is not None:
        from kvplan.cost.runtimes import get_engine

        per_layer_ok = get_engine(engine).reads_gguf_layers
    return resolve_card(model, hf_config, gguf, engine, per_layer_ok)


def _emit(result, as_json: bool, renderer: str, module: str = "plan") -> None:
    if as_json:
        from kvplan.report.jsonout import print_json

        print_json(result)
        return
    from importlib import import_module

    from kvplan.report.console import make_console

    getattr(import_module(f"kvplan.report.{module}"), renderer)(result, make_console())


def register(app: typer.Typer) -> None:
    from kvplan.cli.examples import epilog

    app.command(epilog=epilog("plan"))(plan)
