"""The typed results of ``kvplan.plan``: what ``kvplan plan --json`` prints (schema_version 1)."""

from __future__ import annotations

from pydantic import BaseModel

from kvplan.cost.llamacpp_results import Buffer, Cache, LlamaContext, LlamaFit, QuantFit  # noqa: F401 - part of the plan schema
from kvplan.cost.runtimes.results import KVCachePool, RankRow  # noqa: F401 - part of the plan schema
from kvplan.planning.results import RESULT, CheckpointCheck  # noqa: F401 - part of the plan schema

PLAN_SCHEMA_VERSION = 1


class PlanInputs(BaseModel):
    """The inputs with every default resolved, so the run can be repeated."""

    model_config = RESULT
    model: str
    engine: str
    engine_rules: str  # which engine version's rules are followed
    gpu: str
    gpu_memory_bytes: int  # per GPU: the catalog's (for the platform), or --gpu-memory
    platform: str = "linux"  # --platform: the host OS whose total the catalog's is (windows: Windows and WSL2)
    tp: int
    pp: int
    dp: int
    expert_parallel: bool  # vLLM --enable-expert-parallel
    max_model_len: int
    kv_dtype: str
    weight_dtype: str
    gpu_memory_utilization: float | None  # vLLM, transformers, ideal
    mem_fraction_static: float | None  # SGLang
    kv_cache_memory_bytes: int | None  # vLLM --kv-cache-memory-bytes
    max_num_batched_tokens: int | None
    max_num_seqs: int | None
    block_size: int  # vLLM block, SGLang page; 1 for the unpaged engines
    paged: bool = False  # a serving engine's block or page pool (vLLM, SGLang); False: unpaged (transformers, ideal)
    free_gpu_memory_fraction: float | None = None  # TensorRT-LLM
    cuda_memory_fraction: float | None = None  # TGI
    shared_prefix_len: int = 0  # prompt tokens every request shares (prefix caching)
    speculative: str | None = None  # vLLM --speculative-config as resolved, e.g. "eagle k=3 (1 draft layer)"


class PerGPU(BaseModel):
    """One GPU (the limiting rank when ranks differ): what vLLM charges against the requested memory."""

    model_config = RESULT
    pp_rank: int
    layers: int  # decoder layers on this rank
    params: int  # parameter elements on this rank
    weights_bytes: int  # shards + replicated tensors (+ fp8 KV scales) + buffers: what loading takes
    buffers_bytes: int  # of which rotary cos/sin cache
    activation_bytes: int  # profile-run peak (estimate unless --activation-memory)
    activation_estimated: bool
    non_torch_bytes: int  # non-torch growth during profiling (default unless --non-torch-memory)
    cuda_graph_bytes: int  # CUDA-graph estimate (default unless --cuda-graph-memory)
    overhead_bytes: int  # non_torch_bytes + cuda_graph_bytes
    context_bytes: int  # CUDA context + NCCL before the snapshot: outside the budget, inside (1 - util) x total
    context_in_budget: bool = False  # vLLM V1 0.8.0 - 0.9.0: the context is charged inside the budget instead
    requested_bytes: int  # what the engine may use, by requested_rule: vLLM ceil(total x util) from 0.9.1 (SGLang: free x mem_fraction_static)
    kv_bytes_per_token: int  # one more cached token of one request on this rank, all its layers
    available_kv_bytes: int
    requested_rule: str = ""  # how requested_bytes is computed, by the runtime's rule
    activation_rule: str = ""  # what activation_bytes is, by the runtime's rule
    vision_bytes: int = 0  # of weights_bytes: a multimodal card's vision tower and projector on this GPU
    weights_rounding_bytes: int = 0  # of weights_bytes: the caching allocator's blocks beyond the tensors (vLLM)
    non_torch_cached_bytes: int = 0  # of non_torch_bytes: free bytes the caching allocator keeps (vLLM V0 0.6.5-0.6.6)
    offloaded_bytes: int = 0  # parameters kept in CPU memory (vLLM --cpu-offload-gb): not in weights_bytes
    overheads_given: tuple[str, ...] = ()  # given as flags: "context", "cuda_graph", "non_torch" (else defaults)
    # how the weights are stored: the dtype, or a quantized checkpoint's format and the dtype of the rest
    # (kvplan.planning.results.weights_format); "" in a result made before this field
    weights_format: str = ""


class Latency(BaseModel):
    """Lower bounds (roofline per GPU plus TP all-reduce and PP hand-off time) at the target concurrency."""

    model_config = RESULT
    batch_per_replica: int
    prompt_len: int
    ttft_ms: float  # one request's prefill alone
    tpot_ms: float  # one decode step of the replica's batch at max_model_len
    allreduce_ms_per_token: float  # decode: 2 all-reduces per layer of batch x hidden
    # the TPOT step's bytes on one GPU, summed over the stages a token passes (kvplan.cost.traffic.path_traffic):
    # its rank's weights as held (the weights row less what a step does not read), its cache read and written
    decode_weights_read_bytes: int = 0
    decode_kv_read_bytes: int = 0
    decode_kv_write_bytes: int = 0
    tokens_per_step: float = 1.0  # speculative decoding: tokens a request gains per step (--acceptance-rate)
    # pipeline: the decode micro-batches in flight (Runtime.decode_micro_batches); above 1, tpot_ms is their token
    # period and the decode_* bytes are one micro-batch's step, summed over the stages
    decode_micro_batches: int = 1
    notes: list[str]
    price_per_hour: float | None = None  # USD, all the layout's GPUs at the catalog's (or --gpu-file's) price
    usd_per_million_output_tokens: float | None = None  # that price over the decode bound's tokens: a floor


class PlanResult(BaseModel):
    model_config = RESULT
    schema_version: int = PLAN_SCHEMA_VERSION
    inputs: PlanInputs
    per_gpu: PerGPU
    kv_cache: KVCachePool
    max_concurrency: float  # per replica, by the engine's formula
    max_concurrency_total: float  # x dp
    # per replica: the requests the engine runs at once, max_concurrency capped by its scheduler (running_limit)
    max_running: float
    running_limit: int | None = None  # vLLM max_num_seqs, SGLang max_running_requests, ...; None: the pool alone
    running_limit_flag: str = ""  # the engine's flag for running_limit (--max-num-seqs)
    target_met: bool | None = None  # with a target concurrency: whole running requests x dp hold it (the verdict's)
    request_kv_bytes: int  # one request at max_model_len, on the limiting rank
    fits: bool  # one request at max_model_len fits every rank
    max_model_len_fit: int  # the longest max_model_len that fits (vLLM's binary search); 0: none
    ranks: list[RankRow]
    launch_command: str | None  # None: no launch line reproduces the plan (a note says why)
    verdict: str
    latency: Latency | None = None
    notes: list[str]
    context: LlamaContext | None = None  # llama.cpp: n_ctx and n_ctx_seq after padding, slots, unified cache
    buffers: list[Buffer] | None = None  # llama.cpp: every buffer per device (model, kv, recurrent, output, compute)
    caches: list[Cache] | None = None  # llama.cpp: the cache summaries it logs
    llamacpp_fit: LlamaFit | None = None  # llama.cpp: the largest -c and the most -ngl that fit (the inverse)
    quants: list[QuantFit] | None = None  # llama.cpp, a card without a GGUF: each quant type's size and fit
    checkpoint: CheckpointCheck | None = None  # a Hub model: the checkpoint's bytes beside kvplan's whole-model count

    def _repr_html_(self) -> str:
        """A notebook shows the plan as a table (stdlib HTML, kvplan.planning.htmlrepr)."""
        from kvplan.planning.htmlrepr import plan_html

        return plan_html(self)


class PlanOption(BaseModel):
    """One layout of the search."""

    model_config = RESULT
    gpu: str
    num_gpus: int
    tp: int
    pp: int
    dp: int
    max_concurrency: float  # all replicas
    fits: bool
    price_per_hour: float | None  # all GPUs (replicas x GPUs x price per GPU-hour), where the catalog or --gpu-file gives one
    price_per_gpu_hour: float | None = None  # USD, the catalog's public on-demand price or the --gpu-file's
    price_source: str | None = None  # the pricing page (provider, product) the price was read from, or "--gpu-file"
    price_date: str | None = None  # the day it was read
    usd_per_million_output_tokens: float | None = None  # price at the decode bound (a floor), --concurrency decoding
    ttft_ms: float | None
    tpot_ms: float | None
    launch_command: str
    per_gpu: PerGPU
    kv_cache: KVCachePool


class SearchResult(BaseModel):
    model_config = RESULT
    schema_version: int = PLAN_SCHEMA_VERSION
    model: str
    engine: str
    max_model_len: int
    concurrency: int
    ttft_ms: float | None
    tpot_ms: float | None
    layouts_tried: int
    options: list[PlanOption]  # the minimal layout(s) per GPU type, best first
    notes: list[str]
    sort: str = "gpus"  # --sort: gpus, cost or latency

    def _repr_html_(self) -> str:
        """A notebook shows the options as a table (kvplan.planning.htmlrepr)."""
        from kvplan.planning.htmlrepr import search_html

        return search_html(self)
