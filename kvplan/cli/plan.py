"""`kvplan plan`: concurrency on a layout (with --gpu), or which GPUs and how many (without)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from kvplan.cli import options as o

Size = Optional[str]


def _opt(flag: str, text: str):
    return typer.Option(flag, help=text)


def plan(
    model: o.Model = None,
    hf_config: o.HfConfig = None,
    max_model_len: Annotated[int, _opt("--max-model-len", "Tokens per request (prompt + output), as the engine's "
                                                          "max_model_len / context length.")] = ...,
    gpu: o.Gpu = None,
    gpu_file: o.GpuFile = None,
    gpu_memory: Annotated[Size, _opt("--gpu-memory", "Memory per GPU (80GB, 81559MiB, bytes); default: catalog.")] = None,
    tp: Annotated[Optional[int], _opt("--tp", "Tensor-parallel size (default 1).")] = None,
    pp: Annotated[Optional[int], _opt("--pp", "Pipeline-parallel size (default 1).")] = None,
    dp: Annotated[Optional[int], _opt("--dp", "Data-parallel replicas (default 1).")] = None,
    engine: Annotated[str, _opt("--engine", "vllm, sglang, hf-static, hf-dynamic or ideal.")] = "vllm",
    util: Annotated[Optional[float], _opt("--gpu-memory-utilization", "vLLM: share of GPU memory (default 0.92); "
                                                                       "hf/ideal: default 1.0.")] = None,
    mfs: Annotated[Optional[float], _opt("--mem-fraction-static", "SGLang: default from its GPU formula.")] = None,
    kv_cache_memory: Annotated[Size, _opt("--kv-cache-memory", "vLLM kv_cache_memory_bytes: fix the pool per GPU "
                                                               "(6.51GiB) to reproduce a log.")] = None,
    mnbt: Annotated[Optional[int], _opt("--max-num-batched-tokens", "vLLM; default by GPU size.")] = None,
    max_num_seqs: Annotated[Optional[int], _opt("--max-num-seqs", "vLLM; default by GPU size.")] = None,
    block_size: Annotated[Optional[int], _opt("--block-size", "vLLM block / SGLang page (default 16 / 1; "
                                                              "vLLM MLA: 64 on Hopper).")] = None,
    kv_dtype: o.KvDtype = None,
    weight_dtype: o.WeightDtype = None,
    activation_memory: Annotated[Size, _opt("--activation-memory", "Profile-run activation peak per GPU; default: "
                                                                   "kvplan's estimate.")] = None,
    non_torch_memory: Annotated[Size, _opt("--non-torch-memory", "vLLM non-torch growth (default 256MiB, "
                                                                 "512MiB multi-GPU).")] = None,
    cuda_graph_memory: Annotated[Size, _opt("--cuda-graph-memory", "vLLM CUDA-graph estimate (default 512MiB; "
                                                                   "0 with --enforce-eager).")] = None,
    context_memory: Annotated[Size, _opt("--context-memory", "CUDA context + NCCL per GPU (default 512MiB).")] = None,
    concurrency: Annotated[Optional[int], _opt("--concurrency", "Requests to hold at once; without --gpu: search.")] = None,
    gpus: Annotated[Optional[str], _opt("--gpus", "Search: GPU types to try, comma-separated (default all).")] = None,
    max_gpus: Annotated[int, _opt("--max-gpus", "Search: at most this many GPUs.")] = 8,
    ttft_ms: Annotated[Optional[float], _opt("--ttft-ms", "Search: time-to-first-token bound to meet.")] = None,
    tpot_ms: Annotated[Optional[float], _opt("--tpot-ms", "Search: time-per-output-token bound to meet.")] = None,
    prompt_len: Annotated[Optional[int], _opt("--prompt-len", "Prefill tokens for TTFT (default --max-model-len).")] = None,
    as_json: o.Json = False,
) -> None:
    """How many concurrent requests of --max-model-len fit, with the engine's own arithmetic; without --gpu, which
    GPUs and how many hold --concurrency of them."""
    from kvplan.errors import KvplanError
    from kvplan.model.catalog import resolve_card

    card = resolve_card(model, hf_config)
    common = dict(max_model_len=max_model_len, engine=engine, gpu_memory=gpu_memory, gpu_file=gpu_file,
                  gpu_memory_utilization=util, mem_fraction_static=mfs, kv_cache_memory=kv_cache_memory,
                  max_num_batched_tokens=mnbt, max_num_seqs=max_num_seqs, block_size=block_size, kv_dtype=kv_dtype,
                  weight_dtype=weight_dtype, activation_memory=activation_memory, non_torch_memory=non_torch_memory,
                  cuda_graph_memory=cuda_graph_memory, context_memory=context_memory, prompt_len=prompt_len)
    if gpu is None:
        if concurrency is None:
            raise KvplanError("--gpu: give a GPU (`kvplan gpus list`), or --concurrency N to search for GPUs")
        for flag, value in (("--tp", tp), ("--pp", pp), ("--dp", dp)):
            if value is not None:
                raise KvplanError(f"{flag}: the search tries TP 1,2,4,8 x PP 1..4 x DP itself; give --gpu to plan "
                                  "one layout")
        from kvplan.plan.search import search

        names = [n.strip() for n in gpus.split(",") if n.strip()] if gpus else None
        result = search(card, concurrency=concurrency, gpus=names, max_gpus=max_gpus, ttft_ms=ttft_ms,
                        tpot_ms=tpot_ms, **common)
        return _emit(result, as_json, "render_search")
    for flag, value in (("--gpus", gpus), ("--ttft-ms", ttft_ms), ("--tpot-ms", tpot_ms)):
        if value is not None:
            raise KvplanError(f"{flag}: only used by the search (without --gpu)")
    from kvplan.plan.capacity import plan as run

    result = run(card, gpu=gpu, tp=tp or 1, pp=pp or 1, dp=dp or 1, concurrency=concurrency, **common)
    _emit(result, as_json, "render_plan")


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
