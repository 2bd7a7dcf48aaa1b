"""Options shared by several commands, written once as ``Annotated`` aliases."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from kvplan.cost.runtimes import disagg_names
from kvplan.cost.runtimes import names as runtime_names

Model = Annotated[Optional[str], typer.Option(  # '\\[': rich would read '[@REVISION]' as markup and drop it
    "--model", "-m", help="Bundled card name (llama-2-7b), a card .yaml, or a Hugging Face Hub id "
    "ORG/NAME\\[@REVISION].")]
Gguf = Annotated[Optional[str], typer.Option(
    "--gguf", help="A GGUF model file (llama.cpp; a split GGUF by its first part). Needs kvplan\\[gguf].")]
HfConfig = Annotated[Optional[str], typer.Option("--hf-config", help="A Hugging Face config.json, or its folder.")]
Json = Annotated[bool, typer.Option("--json", help="Print the result as JSON (exact bytes).", metavar="")]
Batch = Annotated[int, typer.Option("--batch", help="Sequences held at once.")]
KvDtype = Annotated[Optional[str], typer.Option(
    "--kv-dtype", help="fp32, fp16, bf16, fp8_e4m3, fp8_e5m2, int8, int4; default: what the engine serves.")]
WeightDtype = Annotated[Optional[str], typer.Option(
    "--weight-dtype", help="Weight dtype (same names); default: what the engine serves the checkpoint in.")]
ENGINES_HELP = "one of: " + ", ".join(runtime_names())  # every runtime of kvplan.cost.runtimes, registered ones too
Engine = Annotated[str, typer.Option("--engine", help=f"The runtime whose cache is sized, {ENGINES_HELP}.")]
BlockSize = Annotated[Optional[int], typer.Option("--block-size", help="--engine vllm only: tokens per KV block "
                                                  "(default 16).")]
EstimateBlockSize = Annotated[Optional[int], typer.Option(
    "--block-size", help="--engine vllm only: tokens per KV block (default 16; with --gpu the engine's: vLLM 0.33 MLA 16 "
    "on Hopper, 32 on Blackwell; a hybrid's attention block is then raised as vLLM unifies its pages).")]
EncoderLen = Annotated[Optional[int], typer.Option("--encoder-len", help="Encoder tokens (encoder-decoder models).")]
Gpu = Annotated[Optional[str], typer.Option("--gpu", help="A GPU of the catalog (`kvplan gpus list`), e.g. H100-SXM.")]
GpuFile = Annotated[Optional[str], typer.Option(
    "--gpu-file", help="YAML of extra or overriding GPUs (format: `kvplan gpus --help`).")]
Attention = Annotated[Optional[str], typer.Option(
    "--attention", help="What-if layout: mha, mqa, gqa:G (G query heads per KV head) or mla:R (a latent of rank R).")]

# `kvplan plan`
_S = Optional[str]
MaxModelLen = Annotated[int, typer.Option(
    "--max-model-len", help="Tokens per request (prompt + output): the engine's max_model_len / context length.")]
_TOKENS = "; 32k = 32,000, 32K = 32,768, as vLLM reads it"
PlanMaxModelLen = Annotated[Optional[str], typer.Option(
    "--max-model-len", metavar="TOKENS", help="Tokens per request (prompt + output): the engine's max_model_len / "
    f"context length (required, except with --from-log){_TOKENS}.")]
FromLog = Annotated[Optional[str], typer.Option(
    "--from-log", help="A vLLM or SGLang start-up log (format: docs/capacity.md): kvplan beside every figure it "
    "states; flags given here override the log's, and the rows they change are marked not comparable.")]
Calibrate = Annotated[bool, typer.Option(
    "--calibrate", help="With --from-log: reuse the log's measured overheads for what-ifs on that deployment: "
    "--max-model-len, --kv-dtype, --gpu-memory-utilization, --block-size are exact; --max-num-seqs, "
    "--max-num-batched-tokens and --tp/--pp (from a multi-GPU log to another multi-GPU layout) are scaled, and the "
    "output says how; another model, engine release or GPU is refused.")]
GpuMemory = Annotated[_S, typer.Option(
    "--gpu-memory", help="Memory per GPU as torch sees it (79.19GiB, bytes); default: the catalog's visible total.")]
Platform = Annotated[Optional[str], typer.Option(
    "--platform", metavar="[linux|windows]",
    help="The host OS: windows for native Windows or WSL2, where CUDA sees the whole board (RTX 4090: 23.99 GiB, "
         "23.53 on Linux) and the desktop holds some of it (1.24 GiB in use at start by default, --context-memory); "
         "default linux, the catalog's total.")]
Tp = Annotated[Optional[int], typer.Option("--tp", help="Tensor-parallel size (default 1).")]
Pp = Annotated[Optional[int], typer.Option("--pp", help="Pipeline-parallel size (default 1).")]
Dp = Annotated[Optional[int], typer.Option("--dp", help="Data-parallel replicas (default 1).")]
VERSIONS_HELP = ("0.2-0.6.4, 0.6.5-0.6.6, 0.7.0, 0.7.1-0.7.3 (V0), 0.8.0-0.8.1, 0.8.2, 0.8.3, 0.8.4, 0.8.5, 0.9.0, "
                 "0.9.1-0.9.2, 0.10, 0.11, 0.12-0.13, 0.14, 0.15-0.16, 0.17, 0.18-0.19, 0.20.0, 0.20.1-0.21, 0.22, 0.23, "
                 "0.24, 0.25, 0.26, 0.27, 0.28, 0.29-0.31, 0.32, 0.33+")
# vLLM 0.8.0 - 0.9.0 ran V1 by default (the ranges above) and V0 under VLLM_USE_V1=0: `vllm==0.8.5:v0`
V0_SUFFIX_HELP = "0.8.0-0.9.0's V0 engine (VLLM_USE_V1=0) as vllm==0.8.5:v0"
# SGLang's modelled ranges (kvplan.cost.runtimes.sglang.VERSIONS; tests/test_cli_help.py keeps both lists equal to them)
SGLANG_VERSIONS_HELP = "0.4.0 to 0.5.20+, 20 ranges"
PlanEngine = Annotated[str, typer.Option(
    "--engine", help=f"The serving engine, {ENGINES_HELP}; a version as vllm==0.11 (modelled: {VERSIONS_HELP}; "
                     f"{V0_SUFFIX_HELP}; default the newest) or sglang==0.5.6 ({SGLANG_VERSIONS_HELP}).")]
DisaggEngine = Annotated[str, typer.Option(
    "--engine", help=f"The serving engine, one of: {', '.join(disagg_names())} (those with disaggregated prefill and "
                     f"decode); a version as vllm==0.11 (modelled: {VERSIONS_HELP}; {V0_SUFFIX_HELP}) or "
                     "sglang==0.5.6.")]
PlanEngineOrLog = Annotated[Optional[str], typer.Option(
    "--engine", help=f"The serving engine (default vllm), {ENGINES_HELP}; a version as vllm==0.11 (modelled: "
                     f"{VERSIONS_HELP}; {V0_SUFFIX_HELP}; default the newest) or sglang==0.5.6; with --from-log: the "
                     "log's engine and "
                     "version unless given.")]
Util = Annotated[Optional[float], typer.Option(
    "--gpu-memory-utilization", help="vLLM: share of GPU memory (default 0.92 from 0.20, 0.9 before); hf/ideal: "
                                     "default 1.0.")]
Mfs = Annotated[Optional[float], typer.Option("--mem-fraction-static", help="SGLang; default: its GPU formula.")]
KvCacheMemory = Annotated[_S, typer.Option(
    "--kv-cache-memory", help="vLLM 0.10.2+ kv_cache_memory_bytes: the pool per GPU (6.51GiB), to reproduce a log.")]
Mnbt = Annotated[Optional[str], typer.Option("--max-num-batched-tokens", metavar="TOKENS",
                                             help=f"vLLM; default by GPU size{_TOKENS}.")]
MaxNumSeqs = Annotated[Optional[int], typer.Option("--max-num-seqs", help="vLLM; default by GPU size.")]
MaxRunningRequests = Annotated[Optional[int], typer.Option(
    "--max-running-requests", help="SGLang: requests run at once (default: resolve_max_num_reqs from the pool).")]
PlanBlockSize = Annotated[Optional[int], typer.Option(
    "--block-size", help="vLLM block / SGLang page (default 16 / 1; vLLM MLA by release: 64 on Hopper through 0.17 "
                         "(fp8 K/V: always), 16 from 0.18; Blackwell 128 through 0.14, 64 in 0.15-0.17, 32 from 0.18).")]
SweepBlockSize = Annotated[Optional[int], typer.Option(
    "--block-size", help="The KV columns: --engine vllm only (its block; default as estimate's); with plan columns "
                         "(--tp/--pp/--max-model-len) each engine's block or page, as plan takes it.")]
ActivationMemory = Annotated[_S, typer.Option(
    "--activation-memory", help="Profile-run activation peak per GPU; default: kvplan's estimate (vLLM).")]
NonTorchMemory = Annotated[_S, typer.Option(
    "--non-torch-memory", help="vLLM non-torch growth (default 64MiB on one GPU, 512MiB on more); SGLang: what "
    "the load leaves reserved beyond the weights (default: the caching allocator's rests, an ESTIMATE).")]
CudaGraphMemory = Annotated[_S, typer.Option(
    "--cuda-graph-memory", help="vLLM CUDA graphs in the budget (default from 0.20: an ESTIMATE per captured graph; "
                                "0 for --enforce-eager).")]
ContextMemory = Annotated[_S, typer.Option(
    "--context-memory", help="Memory in use per GPU before the engine sizes from it: CUDA context + NCCL (default "
                             "512MiB, llama.cpp/Ollama 0; SGLang at TP x PP > 1 over NVLink: + an estimated 1649MiB "
                             "of NCCL buffers; --platform windows: at least 1270MiB, a desktop's).")]
Concurrency = Annotated[Optional[int], typer.Option(
    "--concurrency", help="Requests to hold at once: latency bounds with --gpu; without --gpu, search.")]
Gpus = Annotated[_S, typer.Option("--gpus", help="Search: GPU types to try, comma-separated (default: all).")]
MaxGpus = Annotated[int, typer.Option("--max-gpus", help="Search: at most this many GPUs.")]
Sort = Annotated[str, typer.Option("--sort", help="Search: order the options by gpus (fewest GPUs, then price), cost "
                                   "(GPUs x price per GPU-hour) or latency (the decode bound).")]
TtftMs = Annotated[Optional[float], typer.Option("--ttft-ms", help="Search: time-to-first-token bound to meet.")]
TpotMs = Annotated[Optional[float], typer.Option("--tpot-ms", help="Search: time-per-output-token bound to meet.")]
PromptLen = Annotated[Optional[int], typer.Option(
    "--prompt-len", help="Prefill tokens for the TTFT bound (default --max-model-len).")]
AcceptanceRate = Annotated[Optional[float], typer.Option(
    "--acceptance-rate", help="Speculative decoding: each drafted token's acceptance probability, for the TPOT bound.")]
ExpertParallel = Annotated[bool, typer.Option(
    "--expert-parallel", metavar="", help="vLLM --enable-expert-parallel: routed experts spread over dp x tp ranks.")]

# the engines' own flags (issue 25), spelled as each engine spells them so a command line pastes
_F, _I = Optional[float], Optional[int]
# trtllm-serve spells these with underscores; kvplan takes both (kvplan.cli.errors.KvplanGroup rewrites the
# underscore spelling before parsing, so the help's name column stays narrow enough to show every flag whole)
UNDERSCORE_SPELLINGS = {"--kv_cache_free_gpu_memory_fraction": "--kv-cache-free-gpu-memory-fraction",
                        "--max_num_tokens": "--max-num-tokens", "--max_batch_size": "--max-batch-size"}
FreeGpuMemoryFraction = Annotated[_F, typer.Option(
    "--kv-cache-free-gpu-memory-fraction",
    help="TensorRT-LLM: share of the memory free after the warm-up for the KV cache (default 0.9; also "
         "--kv_cache_free_gpu_memory_fraction).")]
MaxNumTokens = Annotated[_I, typer.Option("--max-num-tokens", help="TensorRT-LLM: tokens per forward pass (default "
                                          "8192; also --max_num_tokens).")]
MaxBatchSize = Annotated[_I, typer.Option("--max-batch-size", help="TensorRT-LLM: requests per batch (default 2048; "
                                          "also --max_batch_size).")]
CudaMemoryFraction = Annotated[_F, typer.Option("--cuda-memory-fraction",
                                                help="TGI: share of GPU memory the server may use (default 1.0).")]
MaxBatchPrefillTokens = Annotated[_I, typer.Option(
    "--max-batch-prefill-tokens", help="TGI: tokens of the warm-up prefill, pinned on the launch line; default: TGI's "
    "own (compute_optimal from its FLOP/s table, else 4096/8000/10000 by model type, capped at max positions and "
    "its memory bound), at least max_input_tokens under paged attention.")]
SpeculativeConfig = Annotated[_S, typer.Option(
    "--speculative-config", help='vLLM: JSON, e.g. \'{"method": "eagle", "model": "...", "num_speculative_tokens": 3}\'.')]
SpecAlgorithm = Annotated[_S, typer.Option("--speculative-algorithm", help="SGLang: EAGLE, EAGLE3, NEXTN, STANDALONE "
                                           "or NGRAM (the last two from 0.5.3; the draft's K/V in the token pool).")]
SpecDraftPath = Annotated[_S, typer.Option("--speculative-draft-model-path", help="SGLang: the draft (EAGLE head, or "
                                           "STANDALONE: a model kvplan reads; a card name is launched as its Hub "
                                           "repo).")]
SpecNumSteps = Annotated[_I, typer.Option("--speculative-num-steps", help="SGLang: drafting steps (default 3); the "
                                          "line always gives steps, top-k (default 1) and draft tokens (default "
                                          "steps + 1) together, as SGLang needs.")]
SpecEagleTopk = Annotated[_I, typer.Option("--speculative-eagle-topk", help="SGLang: branches per drafting step (above "
                                           "1 with --speculative-num-steps and --speculative-num-draft-tokens).")]
SpecDraftTokens = Annotated[_I, typer.Option("--speculative-num-draft-tokens", help="SGLang: tokens verified per "
                                             "step.")]
SwaFullTokensRatio = Annotated[_F, typer.Option("--swa-full-tokens-ratio", help="SGLang: the hybrid SWA pool's "
                                                "sliding-window tokens per full-attention token (default 0.8).")]
DisableHybridSwa = Annotated[bool, typer.Option("--disable-hybrid-swa-memory", metavar="", help="SGLang: one pool for "
                                                "every layer (gpt-oss, Llama 4 ... get two by default).")]
DisableRadixCache = Annotated[bool, typer.Option("--disable-radix-cache", metavar="", help="SGLang: no prefix "
                                                 "caching; a state-space hybrid's state pool by count, ratio 1.")]
MaxMambaCacheSize = Annotated[_I, typer.Option("--max-mamba-cache-size", help="SGLang: a state-space hybrid's state "
                                               "slots (default: by memory, mamba_full_memory_ratio 0.9).")]
MambaRadixCacheStrategy = Annotated[_S, typer.Option("--mamba-radix-cache-strategy", help="SGLang: auto, no_buffer or "
                                                     "extra_buffer (a hybrid's track slots; default auto).")]
SharedPrefixLen = Annotated[_I, typer.Option(
    "--shared-prefix-len", help="Prompt tokens every request shares (prefix caching: full blocks held once).")]
EnableLora = Annotated[bool, typer.Option("--enable-lora", metavar="", help="vLLM: LoRA adapter slots on the GPU.")]
MaxLoras = Annotated[_I, typer.Option("--max-loras", help="vLLM: adapters held at once (default 1).")]
MaxLoraRank = Annotated[_I, typer.Option("--max-lora-rank", help="vLLM: the largest adapter rank (default 16).")]
FlashinferSampler = Annotated[bool, typer.Option(
    "--flashinfer-sampler", metavar="",
    help="vLLM: top-k/top-p sampling in FlashInfer (the log says 'Using FlashInfer for top-p & top-k sampling.'; "
         "V1 0.8-0.9 with a FlashInfer older than 0.2.3 installed, 0.10-0.11 with FlashInfer installed, "
         "VLLM_USE_FLASHINFER_SAMPLER=1 later and on V0): no sort in the profile run.")]
ColdCompile = Annotated[bool, typer.Option(
    "--cold-compile", metavar="",
    help="vLLM 0.11.1+: a first boot, whose torch.compile cache misses (a new model, --max-num-batched-tokens or "
         "--max-model-len; the log says 'Compiling a graph for compile range'): Inductor's kernel benchmark inside "
         "the profile run holds a copy of the embedding table (an ESTIMATE). Default: a warm boot.")]
PpLayerPartition = Annotated[_S, typer.Option(
    "--pp-layer-partition", help="vLLM: decoder layers per pipeline stage, e.g. 16,32 (VLLM_PP_LAYER_PARTITION).")]
LimitMmPerPrompt = Annotated[_S, typer.Option(
    "--limit-mm-per-prompt", help='vLLM: items per prompt of each modality the model takes (image; video for '
                                  'Qwen-VL), JSON like \'{"image": 4}\'; every one 0: text-only, no vision tower '
                                  'where the release skips it.')]
MmEncoderTpMode = Annotated[_S, typer.Option(
    "--mm-encoder-tp-mode", help="vLLM 0.10.2+: weights (the vision tower split over TP, default) or data (whole per "
                          "GPU).")]
CpuOffloadGb = Annotated[_F, typer.Option(
    "--cpu-offload-gb", help="vLLM: GiB of decoder-layer weights per GPU kept in CPU memory (read over PCIe each step; "
                             "vLLM's cpu_offload_gb).")]
EnablePrefixCaching = Annotated[Optional[bool], typer.Option(
    "--enable-prefix-caching/--no-enable-prefix-caching", show_default=False,
    help="vLLM: prefix caching on or off (default: the release's; on a hybrid state-space model it sets the Mamba "
         "cache mode: 'none' off, 'align' on, 'all' on 0.20-0.27 for Mamba/Jamba/Nemotron-H/Falcon-H1/Granite-4/Zamba2 "
         "(0.20-0.21: without speculative decoding): a state page per block; refused on a hybrid before 0.20).")]

# llama.cpp's own flag names (`--engine llamacpp|ollama`), so a llama-server command line pastes in
CtxSize = Annotated[Optional[int], typer.Option("-c", "--ctx-size", help="llama.cpp n_ctx (default: --max-model-len "
                                                "x slots, or the whole context with a unified cache).")]
EstimateCtxSize = Annotated[Optional[int], typer.Option("-c", "--ctx-size", help="llama.cpp n_ctx (default: --seq-len "
                                                        "x slots; --seq-len x --batch with a unified cache).")]
Parallel = Annotated[Optional[int], typer.Option("-np", "--parallel", help="llama.cpp slots (default: the most of "
                                                 "--max-model-len that fit; with -c, llama-server's auto: 4, unified; "
                                                 "Ollama 1).")]
EstimateParallel = Annotated[Optional[int], typer.Option("-np", "--parallel", help="llama.cpp slots (default: --batch, "
                                                         "one per sequence, unified or not).")]
KvUnified = Annotated[Optional[bool], typer.Option("--kv-unified/--no-kv-unified", "-kvu", help="llama.cpp: one "
                                                   "cache shared by all slots (plan with -c and no -np: llama-server "
                                                   "forces it on, --no-kv-unified included).")]
CacheTypeK = Annotated[Optional[str], typer.Option("-ctk", "--cache-type-k", help="llama.cpp K cache type: f32, f16, "
                                                   "bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0, q5_1.")]
CacheTypeV = Annotated[Optional[str], typer.Option("-ctv", "--cache-type-v", help="llama.cpp V cache type (quantized "
                                                   "needs flash attention).")]
FlashAttn = Annotated[Optional[str], typer.Option("-fa", "--flash-attn", help="llama.cpp: on, off or auto.")]
NGpuLayers = Annotated[Optional[int], typer.Option("-ngl", "--n-gpu-layers", help="llama.cpp: layers on the GPU "
                                                   "(default all).")]
SwaFull = Annotated[bool, typer.Option("--swa-full", metavar="", help="llama.cpp: full-size cache for sliding layers.")]
UbatchSize = Annotated[Optional[int], typer.Option("-ub", "--ubatch-size", help="llama.cpp physical batch (512).")]
LlamaRules = Annotated[Optional[str], typer.Option("--llamacpp-rules", help="llama.cpp version rules: 2025-02, "
                                                   "2025-12 or 2026-08 (default).")]
TensorSplit = Annotated[Optional[str], typer.Option("-ts", "--tensor-split", help="llama.cpp: the layers' shares per "
                                                    "GPU, e.g. 3,1 (default even; plan: --pp GPUs, one per share).")]
OverrideTensor = Annotated[Optional[list[str]], typer.Option("-ot", "--override-tensor", help="llama.cpp: "
                                                             "PATTERN=BUFFER (CPU, CUDA0 ...), e.g. exps=CPU; "
                                                             "repeatable, comma-separated.")]
CpuMoe = Annotated[bool, typer.Option("--cpu-moe", "-cmoe", metavar="", help="llama.cpp: every layer's expert "
                                      "weights in host memory.")]
NCpuMoe = Annotated[Optional[int], typer.Option("--n-cpu-moe", "-ncmoe", help="llama.cpp: the expert weights of the "
                                                "first N layers in host memory.")]
Lora = Annotated[Optional[list[str]], typer.Option("--lora", help="llama.cpp: a LoRA adapter GGUF (repeatable); its "
                                                  "tensors on their base tensors' devices.")]
LoraRank = Annotated[Optional[int], typer.Option("--lora-rank", help="llama.cpp, no adapter file: an f16 adapter of "
                                                 "this rank on --lora-targets.")]
LoraTargets = Annotated[Optional[str], typer.Option("--lora-targets", help="llama.cpp with --lora-rank: tensors of "
                                                    "every layer, comma-separated (default attn_q,attn_v).")]
GgufQuant = Annotated[Optional[str], typer.Option("--gguf-quant", help="llama.cpp, a card without a GGUF: weights at "
                                                  "this llama-quantize type (Q4_K_M, Q5_K_M, Q6_K, Q8_0, ...).")]
