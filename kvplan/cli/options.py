"""Options shared by several commands, written once as ``Annotated`` aliases."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

Model = Annotated[Optional[str], typer.Option(
    "--model", "-m", help="Bundled card name (llama-2-7b), a card .yaml, or a Hugging Face Hub id ORG/NAME[@REVISION].")]
HfConfig = Annotated[Optional[str], typer.Option("--hf-config", help="A Hugging Face config.json, or its folder.")]
Json = Annotated[bool, typer.Option("--json", help="Print the result as JSON (exact bytes).", metavar="")]
Batch = Annotated[int, typer.Option("--batch", help="Sequences held at once.")]
KvDtype = Annotated[Optional[str], typer.Option(
    "--kv-dtype", help="fp32, fp16, bf16, fp8_e4m3, fp8_e5m2, int8, int4; default: what the engine serves.")]
WeightDtype = Annotated[Optional[str], typer.Option(
    "--weight-dtype", help="Weight dtype (same names); default: what the engine serves the checkpoint in.")]
Engine = Annotated[str, typer.Option("--engine", help="ideal, hf-dynamic, hf-static, vllm or sglang.")]
BlockSize = Annotated[int, typer.Option("--block-size", help="vllm: tokens per KV block.")]
EncoderLen = Annotated[Optional[int], typer.Option("--encoder-len", help="Encoder tokens (encoder-decoder models).")]
Gpu = Annotated[Optional[str], typer.Option("--gpu", help="A GPU of the catalog (`kvplan gpus list`), e.g. H100-SXM.")]
GpuFile = Annotated[Optional[str], typer.Option(
    "--gpu-file", help="YAML of extra or overriding GPUs (format: `kvplan gpus --help`).")]
Attention = Annotated[Optional[str], typer.Option(
    "--attention", help="What-if layout: mha, mqa, or gqa:G where G is the number of query heads per KV head.")]

# `kvplan plan`
_S = Optional[str]
MaxModelLen = Annotated[int, typer.Option(
    "--max-model-len", help="Tokens per request (prompt + output): the engine's max_model_len / context length.")]
GpuMemory = Annotated[_S, typer.Option(
    "--gpu-memory", help="Memory per GPU as torch sees it (79.19GiB, bytes); default: the catalog's visible total.")]
Tp = Annotated[Optional[int], typer.Option("--tp", help="Tensor-parallel size (default 1).")]
Pp = Annotated[Optional[int], typer.Option("--pp", help="Pipeline-parallel size (default 1).")]
Dp = Annotated[Optional[int], typer.Option("--dp", help="Data-parallel replicas (default 1).")]
PlanEngine = Annotated[str, typer.Option("--engine", help="vllm, sglang, hf-static, hf-dynamic or ideal; a version "
                                         "as vllm==0.11 (modelled: 0.10-0.17, 0.18-0.20, 0.21-0.25, 0.26+; default the newest) "
                                         "or sglang==0.5.")]
Util = Annotated[Optional[float], typer.Option(
    "--gpu-memory-utilization", help="vLLM: share of GPU memory (default 0.92); hf/ideal: default 1.0.")]
Mfs = Annotated[Optional[float], typer.Option("--mem-fraction-static", help="SGLang; default: its GPU formula.")]
KvCacheMemory = Annotated[_S, typer.Option(
    "--kv-cache-memory", help="vLLM kv_cache_memory_bytes: the pool per GPU (6.51GiB), to reproduce a log.")]
Mnbt = Annotated[Optional[int], typer.Option("--max-num-batched-tokens", help="vLLM; default by GPU size.")]
MaxNumSeqs = Annotated[Optional[int], typer.Option("--max-num-seqs", help="vLLM; default by GPU size.")]
PlanBlockSize = Annotated[Optional[int], typer.Option(
    "--block-size", help="vLLM block / SGLang page (default 16 / 1; vLLM MLA: 64 on Hopper, 128 on Blackwell).")]
ActivationMemory = Annotated[_S, typer.Option(
    "--activation-memory", help="Profile-run activation peak per GPU; default: kvplan's estimate (vLLM).")]
NonTorchMemory = Annotated[_S, typer.Option(
    "--non-torch-memory", help="vLLM non-torch growth (default 256MiB; 512MiB multi-GPU).")]
CudaGraphMemory = Annotated[_S, typer.Option(
    "--cuda-graph-memory", help="vLLM CUDA-graph estimate (default 512MiB; 0 for --enforce-eager).")]
ContextMemory = Annotated[_S, typer.Option("--context-memory", help="CUDA context + NCCL per GPU (default 512MiB).")]
Concurrency = Annotated[Optional[int], typer.Option(
    "--concurrency", help="Requests to hold at once: latency bounds with --gpu; without --gpu, search.")]
Gpus = Annotated[_S, typer.Option("--gpus", help="Search: GPU types to try, comma-separated (default: all).")]
MaxGpus = Annotated[int, typer.Option("--max-gpus", help="Search: at most this many GPUs.")]
TtftMs = Annotated[Optional[float], typer.Option("--ttft-ms", help="Search: time-to-first-token bound to meet.")]
TpotMs = Annotated[Optional[float], typer.Option("--tpot-ms", help="Search: time-per-output-token bound to meet.")]
PromptLen = Annotated[Optional[int], typer.Option(
    "--prompt-len", help="Prefill tokens for the TTFT bound (default --max-model-len).")]
ExpertParallel = Annotated[bool, typer.Option(
    "--expert-parallel", metavar="", help="vLLM --enable-expert-parallel: routed experts spread over dp x tp ranks.")]
