"""vLLM V1's memory rules as small pure functions: the KV budget, blocks, per-request budgets, concurrency.

Followed: vLLM 0.33.0 (paths inside the ``vllm`` package). Exact integer bytes; floats only for utilization and
concurrency, computed the way vLLM computes them.

The budget (``v1/worker/gpu_worker.py: determine_available_memory``)::

    requested = ceil(total x gpu_memory_utilization)                       # v1/worker/utils.py request_memory
    available = requested - weights - activation peak - non-torch growth - CUDA-graph estimate
    (--kv-cache-memory-bytes replaces all of it)

vLLM measures the last three; kvplan cannot, so they are documented defaults, each overridable. The activation peak
is an approximation of ``profile_run()`` (one dummy forward of max_num_batched_tokens tokens, then the sampler on
one row per request), not vLLM's number.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import lru_cache, partial
from types import MappingProxyType

from kvplan.cost import quant
from kvplan.cost.allocator import round_size
from kvplan.cost.kvspec import KVLayerSpec
from kvplan.cost.shapes import attention_matrices, ffn_matrices
from kvplan.errors import KvplanError
from kvplan.model.card import ModelCard
from kvplan.model.quant import Mxfp4Layout, Quantization
from kvplan.units import cdiv

RULES = "vLLM 0.33 (V1 engine)"
DEFAULT_UTILIZATION = 0.92  # config/cache.py gpu_memory_utilization Field(default=0.92) since 0.20.0 (0.9 before)
DEFAULT_BLOCK_SIZE = 16  # config/cache.py CacheConfig.DEFAULT_BLOCK_SIZE
# platforms/interface.py _align_hybrid_block_size: "For hybrid MLA/Mamba models, make the manager block size a
# multiple of 128" (TRTLLM/FlashInfer MLA decode kernels): kernel_block_alignment_size = max(alignment, 128)
MLA_HYBRID_ALIGNMENT = 128
GIB, MIB = 2**30, 2**20
# Estimated CUDA graph memory: the flat figure kvplan charged before it counted the capture list (kept for runtimes
# and versions without a per-graph estimate; VllmVersion.cuda_graph_bytes_per_graph replaces it for vLLM 0.20+).
DEFAULT_CUDA_GRAPH_BYTES = 512 * MIB
# The memory one captured CUDA graph adds to vLLM's estimate (cuda_graph_estimate_bytes), ESTIMATES fitted to the
# "Estimated CUDA graph memory: X GiB total" lines of public logs with the default capture list (51 PIECEWISE + 35
# FULL graphs, max_num_seqs 256); vLLM measures it per model, kvplan cannot (docs/capacity.md states the error).
# 0.18 - 0.20 print it without charging it ("In v0.19, CUDA graph memory profiling will be enabled by default"):
# Qwen3-8B on A100-40GB 2.35 GiB and Qwen2.5-72B at TP 4 on L40S 2.73 GiB (vLLM 0.19.0, docs/logs) -> 30 MiB a graph
# (2.49 GiB: +6.0%, -8.8%). 0.20+ charge it (0.20.0's envs.py VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS "1"; its log
# says "CUDA graph memory profiling is enabled (default since v0.21.0)"), and its figures are about a third of
# 0.19's: gemma-4-E4B 0.79 GiB (0.22.1, 51 + 35 graphs), 0.76 GiB for 51 + 51 graphs (0.2x on a 180 GiB GPU;
# GitHub code index files 54492899325 and 63390294774) -> 9 MiB a graph (0.75 GiB: -5.4%; 0.89 GiB: +17%).
CUDA_GRAPH_BYTES_PER_GRAPH_0_19 = 30 * MIB
CUDA_GRAPH_BYTES_PER_GRAPH_0_21 = 9 * MIB
# Non-torch growth during the profile run (cuBLAS/attention workspaces, lazy NCCL buffers): V1 logs "non-torch
# forward increase memory" of 0.01 - 0.14 GiB on one GPU (serving-budget.md; 0.02 GiB in the 0.10 logs of
# docs/capacity.md); 64 MiB is the middle of that range. More ranks add NCCL buffers. 0.9.1 - 0.10.2 take the first
# snapshot before init_worker_distributed_environment (v1/worker/gpu_worker.py init_device; 0.11.0 moves it after), so
# there the communicators and custom all-reduce buffers are non-torch growth too (non-torch 1.38 GiB logged at TP 2 on
# H200, 0.10.2; about 2.5 GiB implied at TP 4 on H100, vllm#21348); how much NCCL takes depends on the GPU, links
# and NCCL release, so the flat figure stays (docs/capacity.md "NCCL on NVSwitch boards": NCCL's buffers derived
# per release, 0.35 - 0.5 GiB a process on Hopper unexplained; the vllm#21348 miss).
# config/vllm.py DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES by release (read in 0.22.0 - 0.28.0; absent in 0.21.0): the
# architectures that run Model Runner V2 by default (VllmVersion.v2_architectures)
V2_ARCHITECTURES_0_22 = frozenset({"Qwen3ForCausalLM"})
V2_ARCHITECTURES_0_23 = V2_ARCHITECTURES_0_22 | {"LlamaForCausalLM", "MistralForCausalLM"}
V2_ARCHITECTURES_0_24 = V2_ARCHITECTURES_0_23 | {"DeepseekV2ForCausalLM", "Qwen2MoeForCausalLM",
                                                 "GraniteMoeForCausalLM"}
V2_ARCHITECTURES_0_25 = frozenset({"DeepseekV2ForCausalLM", "Qwen2MoeForCausalLM", "GraniteMoeForCausalLM"})
V2_ARCHITECTURES_0_26 = V2_ARCHITECTURES_0_25 | {"InklingForCausalLM", "InklingForConditionalGeneration",
                                                 "LongcatFlashNgramForCausalLM"}
V2_ARCHITECTURES_0_27 = V2_ARCHITECTURES_0_26 | {"KimiK3ForConditionalGeneration"}
V2_ARCHITECTURES_0_28 = V2_ARCHITECTURES_0_27 | {"DeepseekV4ForCausalLM"}
# the architectures that declare SupportsMambaPrefixCaching (models/interfaces.py; read in 0.24.0, 0.25.0, 0.25.1,
# 0.26.0 and 0.27.1: mamba.py, mamba2.py, jamba.py, zamba2.py, falcon_h1.py, granitemoehybrid.py, nemotron_h.py),
# which 0.20 - 0.27's MambaModelConfig.verify_and_update_config puts in Mamba cache mode "all" under
# --enable-prefix-caching
MAMBA_PREFIX_CACHING_ALL_0_24 = frozenset({"MambaForCausalLM", "Mamba2ForCausalLM", "JambaForCausalLM",
                                           "Zamba2ForCausalLM", "FalconH1ForCausalLM", "GraniteMoeHybridForCausalLM",
                                           "NemotronHForCausalLM"})
# 0.20.0 - 0.23.0 add bamba.py's BambaForCausalLM (it declares SupportsMambaPrefixCaching, read in 0.20.0, 0.20.1,
# 0.20.2, 0.21.0, 0.22.0, 0.22.1, 0.23.0; 0.24.0 removes the model:
# models/registry.py _PREVIOUSLY_SUPPORTED_MODELS "BambaForCausalLM": "0.23.0")
MAMBA_PREFIX_CACHING_ALL_0_22 = MAMBA_PREFIX_CACHING_ALL_0_24 | {"BambaForCausalLM"}
DEFAULT_NON_TORCH_BYTES = 64 * MIB
DEFAULT_NON_TORCH_MULTI_GPU_BYTES = 512 * MIB
# CUDA context + NCCL communicators + custom all-reduce buffers, allocated before the snapshot from 0.11.0 (the context
# alone before 0.11): outside `requested`, it must fit in (1 - utilization) x total (request_memory's free >= requested
# check); ~0.4 GiB per GPU observed.
DEFAULT_CONTEXT_BYTES = 512 * MIB


def batch_defaults(total_bytes: int, gpu_name: str, large_gpu_tier: bool = True) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) for `vllm serve` (engine/arg_utils.py get_batch_defaults, V1);
    ``large_gpu_tier``: the release has the 160 GiB tier (0.28+, VllmVersion.large_gpu_batch_defaults)."""
    if large_gpu_tier and total_bytes >= 160 * GIB:
        return 16384, 1024
    if total_bytes >= 70 * GIB and "a100" not in gpu_name.lower():
        return 8192, 1024
    return 2048, 256


# The MLA block vLLM takes without --block-size, by release (VllmVersion.mla_block_rule; platforms/cuda.py
# check_and_update_config forces it through 0.17, read in 0.9.1, 0.10.2, 0.11.0, 0.12.0, 0.14.1, 0.15.0, 0.17.1;
# the forcing code is absent from 0.18.0 on):
# "forced": FlashMLA's 64 on Hopper (is_flashmla_supported / is_flashmla_dense_supported: SM 9.x), CUTLASS MLA's
#   128 on Blackwell (0.10.1 - 0.14: "Blackwell => Force CutlassMLA"; 0.9.x and 0.10.0 force nothing on Blackwell:
#   not separated in their range), 16 elsewhere
# "flashinfer": 0.15 - 0.17, Blackwell with qk_nope_head_dim == 128 gets FlashInfer MLA ("Blackwell => Force
#   FlashInfer MLA"; "Forcing kv cache block size to 64 for FlashInferMLA backend", its block not in [32, 64]),
#   other Blackwell MLA models CUTLASS's 128; Hopper FlashMLA's 64. Dense FlashMLA is Hopper's only
#   (is_flashmla_dense_supported: "only supported on Hopper devices"), so SM 8.x and 12.x keep 16 in both.
# "preferred": 0.18+, platforms/interface.py update_block_size_for_backend: the backend vLLM picks for the model
#   (mla_backend below), its get_preferred_block_size(16) (16 if it takes 16, else the smallest of
#   get_supported_kernel_block_sizes; read in 0.18.0, 0.25.1, 0.33.0). SM 9.x: FLASH_ATTN_MLA
#   ([MultipleOf(16)]: 16) for 16-bit K/V; it takes no fp8, so fp8 K/V gets FLASHMLA ([64]). SM 10.x: FLASHINFER_MLA
#   ([32, 64]: 32) where qk_nope_head_dim is 64, 128 or 192 (supports_combination), else CUTLASS_MLA ([128]).
#   Others (SM 8.x: TRITON_MLA, SM 12.x: TRITON_MLA): [MultipleOf(16)], 16.
# "none": V0 0.7.x, before FlashMLA: the config's 16 on every GPU. Its one MLA backend is Triton's
#   (attention/backends/mla/utils.py MLACommonBackend.get_name "TRITON_MLA", read in a 0.7.3-era file, commit
#   04644e3f; 0.7.3's cuda.py itself not read): FlashMLA came with PR 13747, "[Kernel] FlashMLA integration", reviewed
#   2025-02-25, after 0.7.3's 2025-02-20 release, and the 64-token default with PR 14451, "[Attention] Default to
#   FlashMLA backend for MLA", opened 2025-03-07, whose check_and_update_config "Forcing kv cache block size to 64 for
#   FlashMLA backend." that 0.8.0 - 0.9.0 keep ("hopper": read in 0.8.0, 0.8.5 and 0.9.0 since). Measured:
#   docs/logs/vllm-code20903468563 (0.7.3, DeepSeek-R1 on H200) logs 18,418 blocks of 21.43 GiB at 61 x 640 x 2 B a
#   token: 16-token blocks.
# "hopper": 0.8.0 - 0.9.0 (platforms/cuda.py check_and_update_config forces 64 only where attention/ops/flashmla.py
#   is_flashmla_supported holds: "FlashMLA is only supported on Hopper devices", capability major 9; read in 0.8.0,
#   0.8.5 and 0.9.0): 64 on SM 9.x, the config's 16 elsewhere, Blackwell included
MLA_BLOCK_RULES = ("none", "hopper", "forced", "flashinfer", "preferred")


@dataclass(frozen=True)
class MlaBackend:
    """One of vLLM 0.18+'s dense MLA attention backends on CUDA (v1/attention/backends/mla/<file>), as its
    validate_configuration sees it: ``majors`` the compute capabilities it runs on (supports_compute_capability;
    FlashMLA's dense kernel also is_flashmla_dense_supported, "only supported on Hopper devices"; None: any), ``fp8``
    whether its supported_kv_cache_dtypes hold fp8 / fp8_e4m3 (every one holds auto, float16, bfloat16; none
    fp8_e5m2), ``blocks`` its get_supported_kernel_block_sizes (a block is taken when a multiple of one:
    supports_block_size) and ``qk_nope`` the qk_nope_head_dim its supports_combination takes (None: any)."""

    name: str
    file: str
    majors: tuple[int, ...] | None
    fp8: bool
    blocks: tuple[int, ...]
    qk_nope: tuple[int, ...] | None = None

    def takes(self, major: int, qk_nope_head_dim: int, kv_dtype: str | None, block_size: int | None) -> bool:
        """validate_configuration passes (``kv_dtype`` kvplan's K/V dtype name, None: the model's; ``block_size``
        None: no --block-size, which the selector then does not check)."""
        fp8 = kv_dtype is not None and kv_dtype.startswith("fp8")
        return ((self.majors is None or major in self.majors) and (not fp8 or (self.fp8 and kv_dtype != "fp8_e5m2"))
                and (block_size is None or any(block_size % b == 0 for b in self.blocks))
                and (self.qk_nope is None or qk_nope_head_dim in self.qk_nope))

    @property
    def preferred_block(self) -> int:
        """get_preferred_block_size(16): 16 where the backend takes it, else its smallest kernel block."""
        return DEFAULT_BLOCK_SIZE if any(DEFAULT_BLOCK_SIZE % b == 0 for b in self.blocks) else min(self.blocks)


# platforms/cuda.py get_attn_backend_cls (0.18+): the first backend of _get_backend_priorities(use_mla=True) whose
# validate_configuration passes, else "No valid attention backend found" (ValueError); a --block-size that rules out
# backends ahead of the one taken is logged ("--block-size N precluded higher-priority backend(s) ... Using X
# instead"). SM 10.x: FLASHINFER_MLA, CUTLASS_MLA, FLASH_ATTN_MLA, FLASHMLA, TRITON_MLA (0.21+ puts TOKENSPEED_MLA
# second: fp8 K/V, DeepSeek-R1's dims, blocks of 32 or 64 and an optional package, so never taken where FLASHINFER_MLA
# is not); other majors: FLASH_ATTN_MLA, FLASHMLA, FLASHINFER_MLA, TRITON_MLA (0.24+ gives SM 12.x TRITON_MLA alone:
# the same outcome, the others do not run there). The sparse (DSA) backends take no dense model. FLASHINFER_MLA's
# qk_nope_head_dim: [64, 128] in 0.18.x, [64, 128, 192] from 0.19.0. Read in 0.18.0, 0.19.0, 0.24.0, 0.31.0, 0.33.0
# (the backends' checks and the selector otherwise unchanged 0.18.0 - 0.33.0).
FLASHINFER_MLA = MlaBackend("FLASHINFER_MLA", "flashinfer_mla.py", (10,), True, (32, 64), (64, 128, 192))
CUTLASS_MLA = MlaBackend("CUTLASS_MLA", "cutlass_mla.py", (10,), True, (128,))
FLASH_ATTN_MLA = MlaBackend("FLASH_ATTN_MLA", "flashattn_mla.py", (9,), False, (16,))
FLASHMLA = MlaBackend("FLASHMLA", "flashmla.py", (9,), True, (64,))
TRITON_MLA = MlaBackend("TRITON_MLA", "triton_mla.py", None, True, (16,))
MLA_BACKENDS_SM100 = (FLASHINFER_MLA, CUTLASS_MLA, FLASH_ATTN_MLA, FLASHMLA, TRITON_MLA)
MLA_BACKENDS_OTHER = (FLASH_ATTN_MLA, FLASHMLA, FLASHINFER_MLA, TRITON_MLA)


def mla_backends(compute_capability: float) -> tuple[MlaBackend, ...]:
    """_get_backend_priorities(use_mla=True) for a GPU of ``compute_capability`` (dense backends)."""
    return MLA_BACKENDS_SM100 if int(compute_capability) == 10 else MLA_BACKENDS_OTHER


def mla_backend(card: ModelCard, compute_capability: float, kv_dtype: str | None = None,
                block_size: int | None = None) -> MlaBackend | None:
    """The backend vLLM 0.18+ serves MLA ``card`` with on a CUDA GPU of ``compute_capability`` (``kv_dtype``: the K/V
    dtype's name, None the model's; ``block_size``: a given --block-size), or None where it finds none and raises."""
    major = int(compute_capability)
    return next((b for b in mla_backends(compute_capability)
                 if b.takes(major, card.mla.qk_nope_head_dim, kv_dtype, block_size)), None)


def default_block_size(card: ModelCard, compute_capability: float | None, rule: str = "forced",
                       kv_dtype: str | None = None) -> int:
    """16, or the block vLLM takes for an MLA model on a GPU of ``compute_capability`` under the release's ``rule``
    (MLA_BLOCK_RULES, the note above); ``kv_dtype``: the K/V dtype's name (fp8 moves 0.18+ Hopper to FlashMLA)."""
    if card.mla is None or compute_capability is None or rule == "none":
        return DEFAULT_BLOCK_SIZE
    major = int(compute_capability)
    if rule == "preferred":  # no backend (vLLM raises): the runtime refuses (VLLM.mla_backend_note)
        backend = mla_backend(card, compute_capability, kv_dtype)
        return DEFAULT_BLOCK_SIZE if backend is None else backend.preferred_block
    if major == 10 and rule != "hopper":
        return 64 if rule == "flashinfer" and card.mla.qk_nope_head_dim == 128 else 128
    return 64 if major == 9 else DEFAULT_BLOCK_SIZE


def forced_mla_block(given: int, card: ModelCard, compute_capability: float | None, rule: str) -> int:
    """A given --block-size as platforms/cuda.py check_and_update_config forces it for an MLA model through 0.17
    (rules "forced" and "flashinfer", the note above; read in 0.14.1 and 0.15.0): FlashMLA (SM 9.x) "Forcing kv cache
    block size to 64" unless a multiple of 64; CUTLASS MLA (Blackwell) to 128 unless a multiple of 128; FlashInfer
    MLA (0.15 - 0.17, Blackwell, qk_nope_head_dim 128) to 64 unless 32 or a multiple of 64. 0.18+ ("preferred") and
    other GPUs keep it (0.18+: the backend it leaves, mla_backend, checks it)."""
    if card.mla is None or compute_capability is None or rule in ("none", "preferred"):
        return given
    major = int(compute_capability)
    if major == 9:
        return given if given % 64 == 0 else 64
    if major == 10 and rule != "hopper":
        if rule == "flashinfer" and card.mla.qk_nope_head_dim == 128:
            return given if given == 32 or given % 64 == 0 else 64
        return given if given % 128 == 0 else 128
    return given


# config/cache.py BlockSize, the `--block-size` choices (read in every release 0.9.1 - 0.17.1; 0.18.0 takes any int)
BLOCK_SIZE_CHOICES_0_9_1 = (1, 8, 16, 32, 64, 128)
BLOCK_SIZE_CHOICES_0_11_1 = (*BLOCK_SIZE_CHOICES_0_9_1, 256)
KERNEL_BLOCK_MULTIPLE = 16


def block_size_refusal(block_size: int, mla: bool, vendor: str) -> str | None:
    """Why V1 on an NVIDIA GPU cannot page standard attention in blocks of ``block_size`` tokens, or None: its default
    backend, FlashAttention, takes multiples of 16 only (v1/attention/backends/flash_attn.py get_kv_cache_shape:
    "Block size must be a multiple of 16", every release 0.9.1 - 0.33.0), and from the backend selector's block-size
    check on (v1/attention/backend.py supports_block_size) the Triton and FlexAttention backends declare the same
    (get_supported_kernel_block_sizes: [MultipleOf(16)], read in 0.28.0). Other vendors are not checked; MLA models
    are checked by their backend (mla_backend, 0.18+)."""
    if mla or vendor != "NVIDIA" or block_size % KERNEL_BLOCK_MULTIPLE == 0:
        return None
    return (f"vLLM's attention backends for NVIDIA GPUs page K/V in multiples of {KERNEL_BLOCK_MULTIPLE} tokens "
            f"(v1/attention/backends/flash_attn.py: \"Block size must be a multiple of 16\")")


def scheduled_tokens(max_num_batched_tokens: int, max_num_seqs: int, max_model_len: int) -> int:
    """arg_utils.py: max_num_batched_tokens = min(max_num_seqs x max_model_len, max_num_batched_tokens)."""
    return min(max_num_seqs * max_model_len, max_num_batched_tokens)


def requested_memory(total_bytes: int, utilization: float) -> int:
    """v1/worker/utils.py request_memory: ceil(total x gpu_memory_utilization)."""
    if not 0 < utilization <= 1:
        raise KvplanError(f"--gpu-memory-utilization: vLLM requires 0 < utilization <= 1 (config/cache.py "
                          f"Field(gt=0, le=1)), got {utilization}")
    return math.ceil(total_bytes * utilization)


def cudagraph_capture_sizes(max_num_seqs: int, max_num_batched_tokens: int, decode_query_len: int = 1) -> list[int]:
    """config/vllm.py VllmConfig._set_cudagraph_sizes (0.21.0), the default list: the largest size
    min(max_num_seqs x decode_query_len x 2, 512, max_num_batched_tokens); [1, 2, 4], then every 8 below 256, every 16
    from 256; max_num_batched_tokens itself when it is below the largest (e.g. 51 sizes up to 512 at 256 sequences)."""
    largest = min(max_num_seqs * decode_query_len * 2, 512, max_num_batched_tokens)
    sizes = [i for i in (1, 2, 4) if i <= largest]
    sizes += list(range(8, min(largest + 1, 256), 8)) if largest >= 8 else []
    sizes += list(range(256, largest + 1, 16)) if largest >= 256 else []
    if max_num_batched_tokens <= largest:
        sizes.append(max_num_batched_tokens)
    return sorted(set(sizes))


@lru_cache(maxsize=256)  # integers in, integers out: a search asks for the same few lists per GPU type
def cudagraph_counts(max_num_seqs: int, max_num_batched_tokens: int, decode_query_len: int = 1) -> tuple[int, int]:
    """(PIECEWISE, FULL) graphs of the default cudagraph_mode FULL_AND_PIECEWISE ('Profiling CUDA graph memory:
    PIECEWISE=51 (largest=512), FULL=35 (largest=256)'): a PIECEWISE graph per capture size; a FULL decode graph per
    size from decode_query_len up to decode_query_len x max_num_seqs (v1/cudagraph_dispatcher.py
    initialize_cudagraph_keys)."""
    sizes = cudagraph_capture_sizes(max_num_seqs, max_num_batched_tokens, decode_query_len)
    full = [x for x in sizes if decode_query_len <= x <= decode_query_len * max_num_seqs]
    return len(sizes), len(full)


def cuda_graph_estimate_bytes(counts: tuple[int, ...], bytes_per_graph: int) -> int:
    """v1/worker/gpu_model_runner.py profile_cudagraph_memory (0.21.0): per mode, the first (largest) capture plus
    (n - 1) x the second's; the modes share one pool, so the largest first capture once: max(first) + sum((n - 1) x
    per graph). ESTIMATE: every capture, first or not, costs ``bytes_per_graph`` (fitted, VllmVersion)."""
    graphs = [n for n in counts if n]
    return bytes_per_graph * (1 + sum(n - 1 for n in graphs)) if graphs else 0


# Pipeline parallelism: where the vocabulary lives. vLLM's llama.py builds embed_tokens only on the first stage (and on
# the last when tied: ``if get_pp_group().is_first_rank or (config.tie_word_embeddings and get_pp_group().is_last_rank)``)
# and lm_head only on the last (``else: self.lm_head = PPMissingLayer()``). The model modules below build them without
# that guard, so EVERY stage allocates and loads them (VocabParallelEmbedding / ParallelLMHead create their weight in
# __init__; load_weights skips only PPMissingLayer parameters, model_executor/models/utils.py is_pp_missing_parameter).
# Read from each release's vllm/model_executor/models/<module>.py (the registry's module for the architecture) in the
# wheels of 0.5.5, 0.6.0/.3/.6, 0.7.0/.3, 0.8.0/.4/.5, 0.9.0-0.9.2, 0.10.0-0.10.2, 0.11.0/.2 and every minor release
# 0.12.0 - 0.33.0 (an assignment of VocabParallelEmbedding / ParallelLMHead not under an ``if`` on is_first_rank /
# is_last_rank, in a module with a SupportsPP class). architecture -> (what every stage holds, first, last release
# (major, minor); None: still in 0.33.0). The first release is where the module became SupportsPP or was added (0.5.x
# refuse PP for all of them). A tied lm_head aliases the embedding (tie_weights: the head's own weight is dropped),
# so for tied models only the embedding counts. Not listed: DeepseekV2/V3ForCausalLM (lm_head on every stage in
# 0.6.3 - 0.7.3, guarded from 0.8.0: a patch range inside kvplan's V0 range), Qwen2ForCausalLM (0.6.3 only),
# Olmo2ForCausalLM from 0.26 (served by the Transformers backend, not read).
EVERY_STAGE_BOTH = ("embedding", "lm_head")
PP_VOCAB_EVERY_STAGE: dict[str, tuple[tuple[str, ...], tuple[int, int], tuple[int, int] | None]] = {
    "Qwen3MoeForCausalLM": (EVERY_STAGE_BOTH, (0, 8), None),  # qwen3_moe.py, added in 0.8.4
    "Qwen2MoeForCausalLM": (EVERY_STAGE_BOTH, (0, 6), None),  # qwen2_moe.py
    "MixtralForCausalLM": (EVERY_STAGE_BOTH, (0, 6), None),  # mixtral.py
    "OlmoeForCausalLM": (EVERY_STAGE_BOTH, (0, 6), None),  # olmoe.py
    "FalconForCausalLM": (EVERY_STAGE_BOTH, (0, 6), None),  # falcon.py
    "GPT2LMHeadModel": (EVERY_STAGE_BOTH, (0, 6), None),  # gpt2.py
    "JambaForCausalLM": (EVERY_STAGE_BOTH, (0, 6), None),  # jamba.py, SupportsPP from 0.6.6
    "Olmo2ForCausalLM": (EVERY_STAGE_BOTH, (0, 6), (0, 25)),  # olmo2.py, added in 0.6.6
    "NemotronHForCausalLM": (EVERY_STAGE_BOTH, (0, 9), None),  # nemotron_h.py, added in 0.9.1
    "GraniteMoeHybridForCausalLM": (EVERY_STAGE_BOTH, (0, 9), None),  # granitemoehybrid.py
    "GptOssForCausalLM": (EVERY_STAGE_BOTH, (0, 10), None),  # gpt_oss.py, SupportsPP from 0.10.2
    "Qwen3NextForCausalLM": (EVERY_STAGE_BOTH, (0, 10), None),  # qwen3_next.py, added in 0.10.2
    "Gemma2ForCausalLM": (("embedding",), (0, 6), None),  # gemma2.py (tied)
    "Gemma3ForCausalLM": (("embedding",), (0, 8), None),  # gemma3.py (tied; its lm_head is tie_weights'd from 0.14)
    "Gemma3ForConditionalGeneration": (("embedding",), (0, 8), None),  # gemma3_mm.py: its language model is gemma3.py's
    "Qwen3_5ForConditionalGeneration": (("embedding",), (0, 17), None),  # qwen3_5.py, added in 0.17.0
    "Qwen3_5ForCausalLM": (("embedding",), (0, 26), None),  # qwen3_5.py, registered from 0.26.0
}


@lru_cache(maxsize=None)  # a handful of ranges; a search asks for each thousands of times
def pp_vocab_every_stage(first: tuple[int, int], last: tuple[int, int] | None) -> Mapping[str, tuple[str, ...]]:
    """The architectures whose vocabulary matrices every pipeline stage holds in the releases first..last (a kvplan
    range): those of PP_VOCAB_EVERY_STAGE whose span overlaps it (no span starts or ends inside a modelled range but
    V0's, whose earlier releases refuse pipeline parallelism for these models)."""
    inf = (10**6, 0)
    return MappingProxyType({arch: what for arch, (what, lo, hi) in PP_VOCAB_EVERY_STAGE.items()
                             if lo <= (last or inf) and first <= (hi or inf)})


def available_kv_bytes(requested: int, weights: int, activation: int, non_torch: int, cuda_graph: int) -> int:
    """gpu_worker.py determine_available_memory: requested - non-KV memory - the CUDA-graph estimate."""
    return requested - weights - activation - non_torch - cuda_graph


# The sorting sampler's peak, DERIVED from the sources (it replaces a constant of 38 B per row and entry fitted to
# public 0.10 - 0.11 logs, which the derivation gives exactly for 16-bit models). The dummy sampler of vLLM 0.9.1 -
# 0.16 (v1/worker/gpu_model_runner.py _dummy_sampler_run: max_num_seqs rows, top_p 0.9, top_k = vocab - 1,
# all_random False) and V0's profile run (0.2 - 0.9.0, worker/model_runner.py _dummy_run: SamplingParams(top_p=0.99,
# top_k=vocab_size - 1)) sort every row of the vocabulary (v1/sample/ops/topk_topp_sampler.py apply_top_k_top_p,
# PyTorch path; V0 model_executor/layers/sampler.py _apply_top_k_top_p: ``logits.sort(dim=-1, descending=False)``;
# read in the wheels of 0.6.5, 0.6.6.post1, 0.7.3, 0.8.5, 0.9.1, 0.10.0, 0.10.1.1, 0.10.2, 0.11.0 - 0.16.0: the same
# code). Live while the sort runs, R rows, V the config's vocabulary, Vp the LM head's padded one, a the model dtype:
# - the model-dtype logits, R x Vp x a: model_executor/layers/logits_processor.py _get_logits (the LM head's output,
#   gathered across TP) returns the view ``logits[..., :org_vocab_size]`` of them; _dummy_sampler_run (V0:
#   execute_model) keeps them while the sampler runs;
# - their float32 copy, R x V x 4 (v1/sample/sampler.py forward: ``logits.to(torch.float32)``; V0 sampler.py forward:
#   ``logits.to(torch.float)``): none for a float32 model whose V = Vp (``to`` returns the tensor itself); a float32
#   model with V < Vp sorts a strided view, of which aten/src/ATen/native/cuda/Sort.cpp sort_cuda_kernel makes the
#   contiguous copy (``self_ = at::empty_strided(...)``) instead;
# - sort's outputs, values R x V x 4 and int64 indices R x V x 8 (Sort.cpp: the structured op's outputs, used in
#   place since their strides are the input's);
# - aten/src/ATen/native/cuda/SortStable.cu launch_stable_sort_kernel: 128+ rows (of fewer than 1,000,000 entries)
#   take segmented_sort_pairs, which allocates ``reverse_indices`` (the iota of int64 indices, R x V x 8) and calls
#   aten/src/ATen/cuda/cub.cuh segmented_sort_pairs -> CUB_WRAPPER(DeviceSegmentedRadixSort::SortPairs): the
#   temporary storage from the caching allocator, whose size cub's DispatchSegmentedRadixSort gives as the alternate
#   key and value buffers (allocation_sizes: num_items x sizeof(KeyT), num_items x sizeof(ValueT), not overwrite-okay)
#   each aligned to 256 B plus 255 B (util_device.cuh AliasTemporaries); one row (segmented_sort_large_segments) the
#   same per row: a V-entry int64 iota and radix_sort_pairs' temporaries. 2 - 127 rows take
#   segmented_sort_pairs_by_full_sort: two int2 buffers (R x V x 8 each) live throughout, and its first
#   radix_sort_pairs (keys_out nullptr: cub-RadixSortPairs radix_sort_pairs_impl allocates R x V x 4 of keys) runs
#   DeviceRadixSort::SortPairs, whose temporaries hold the alternate key and value (int2) buffers too; the second sort
#   (radix_sort_keys, int64) needs less. DeviceRadixSort's digit histograms are not charged (not sized here). Nothing
#   is chunked below INT_MAX entries (``nbatch = (numel_or_intmax / nsort) * nsort``; 1,024 x 201,088 = 2.1e8).
# Every allocation counts as the caching allocator rounds it (kvplan.cost.allocator.round_size, 512 B). That is
# a + 36 B per row and entry (38 for bf16/fp16; 2 - 127 rows: a + 48) + rounding. The rest of the sampler holds
# less: apply_top_k_top_p after the sort keeps the sorted values and indices, two bool masks, the softmax (cumsum
# ``out=`` it in V1, a new tensor in V0) and the scatter's output, a + 26 (V1) or a + 34 (V0) B per entry;
# random_sample after it a + 16.
# PyTorch: SortStable.cu, Sort.cpp and cub.cuh read at two stored commits of pytorch/pytorch (one before, one after
# the CCCL 3 changes) with this same path; the releases pin torch 2.5.1 (0.6.5 - 0.7.3), 2.6.0 (0.8.5), 2.7.0/2.7.1
# (0.9.1 - 0.10.1.1), 2.8.0 (0.10.2 - 0.11.0), 2.9.0/2.9.1 (0.12.0 - 0.16.0) (the wheels' Requires-Dist), whose
# exact tags were not read. Not charged: the per-row sampling tensors (V1: six [R] metadata vectors and the greedy
# argmax, under 60 KiB at 1,024 rows) and the up to 1 MiB a large block keeps when the allocator does not split it.
CUB_ALIGN_BYTES = 256  # cub util_device.cuh AliasTemporaries: ALIGN_BYTES


def sorting_sampler_bytes(num_reqs: int, vocab_size: int, padded_vocab: int, act_bytes: int) -> int:
    """The torch bytes live while the sorting sampler sorts ``num_reqs`` rows (the note above): the model-dtype
    logits, their float32 copy, sort's values and indices, and what SortStable.cu allocates inside the sort."""
    n = num_reqs * vocab_size
    copy = 0 if act_bytes == 4 and vocab_size == padded_vocab else round_size(4 * n)
    outside = round_size(num_reqs * padded_vocab * act_bytes) + copy + round_size(4 * n) + round_size(8 * n)
    if 1 < num_reqs < 128:  # segmented_sort_pairs_by_full_sort: two int2 buffers, keys_out, cub's temporaries
        return outside + 2 * round_size(8 * n) + round_size(4 * n) + _cub_pairs_temp_bytes(n, 4, 8)
    return outside + round_size(8 * n) + _cub_pairs_temp_bytes(n, 4, 8)  # segmented_sort_pairs (one row: the same)


def _cub_pairs_temp_bytes(num_items: int, key_bytes: int, value_bytes: int) -> int:
    """CUB_WRAPPER's temporary storage for a (segmented) radix sort of key/value pairs that may not overwrite its
    input: the alternate key and value buffers, each aligned to CUB_ALIGN_BYTES, + CUB_ALIGN_BYTES - 1 (cub
    AliasTemporaries), as the caching allocator rounds it."""
    def aligned(nbytes: int) -> int:
        return cdiv(nbytes, CUB_ALIGN_BYTES) * CUB_ALIGN_BYTES

    return round_size(aligned(num_items * key_bytes) + aligned(num_items * value_bytes) + CUB_ALIGN_BYTES - 1)


# V1 0.8.0 - 0.9.0 (v1/worker/gpu_worker.py Worker.determine_available_memory, the same code in 0.8.0, 0.8.1, 0.8.2,
# 0.8.3, 0.8.4, 0.8.5, 0.8.5.post1 and 0.9.0 but for a docstring line): after empty_cache and reset_peak_memory_stats,
# profile_run; peak_memory = memory_stats()["allocated_bytes.all.peak"] (the weights and every live tensor plus the
# profile's transient peak), then after another empty_cache non_torch_allocations = (total - free) -
# allocated_bytes.all.current is added when positive: all device memory in use outside torch's live tensors, the
# CUDA context, NCCL, other processes and the free bytes of segments that still hold a live block;
# available_kv_cache_memory = total_gpu_memory x gpu_memory_utilization - peak_memory, returned as int(...). No
# request_memory check: init_device's init_gpu_memory only feeds an assert (init > free after the profile).
def available_kv_bytes_0_8(total_bytes: int, utilization: float, peak_bytes: int) -> int:
    """v1/worker/gpu_worker.py determine_available_memory (0.8.0 - 0.9.0): int(total x utilization - peak), the
    float product of vLLM's own arithmetic (``peak_bytes``: torch's allocated peak + every non-torch byte)."""
    return int(total_bytes * utilization - peak_bytes)


def batch_defaults_0_8(total_bytes: int, gpu_name: str, rule: str) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) for `vllm serve` on V1 0.8.0 - 0.8.5.post1 (engine/arg_utils.py
    EngineArgs._set_default_args_v1, UsageContext.OPENAI_API_SERVER), by ``rule`` (VllmVersion.batch_rule):
    "name_1024" 0.8.0 - 0.8.3: 8192 tokens where "h100" or "h200" is in the device name (lower case), else 2048, and
    max_num_seqs 1024 on every GPU; "name" 0.8.4: the same name test, 1024 sequences there, 256 elsewhere; "memory"
    0.8.5: total >= 70 GiB (GiB_bytes), A100 80GB included, 8192 / 1024, else 2048 / 256. 0.9.0 is batch_defaults'
    (">= 70 GiB and 'a100' not in the name")."""
    if rule == "memory":
        big = total_bytes >= 70 * GIB
    elif rule in ("name", "name_1024"):
        name = gpu_name.lower()
        big = "h100" in name or "h200" in name
    else:
        raise ValueError(f"unknown 0.8 batch rule {rule!r}")
    return (8192 if big else 2048), (1024 if big or rule == "name_1024" else 256)


def specs_0_8(specs: list, sliding_specs: bool) -> list:
    """The KV cache specs of V1 0.8.0 - 0.9.0, one group of one spec type (kv_cache_utils.py get_kv_cache_config
    raises NotImplementedError for any other): 0.8.0 - 0.8.2 (``sliding_specs`` False) give every decoder layer a
    FullAttentionSpec (gpu_model_runner.py get_kv_cache_spec); 0.8.3 - 0.9.0 give a sliding layer a SlidingWindowSpec,
    and unify_hybrid_kv_cache_specs turns them into FullAttentionSpec where full layers exist too. Chunked local
    layers (Llama-4) have no spec of their own before 0.10: full attention."""
    attention = [sp for sp in specs if isinstance(sp, KVLayerSpec)]
    keep = sliding_specs and all(sp.window and not sp.chunk for sp in attention)
    return [replace(sp, kind="full", window=None, chunk=None)
            if isinstance(sp, KVLayerSpec) and (sp.window or sp.chunk) and not keep else sp for sp in specs]


# The dummy sampler WITHOUT a sort, derived from the source: vLLM 0.17+ masks top-k/top-p in place with a Triton kernel
# for 8+ rows (v1/sample/ops/topk_topp_sampler.py apply_top_k_top_p -> ops/topk_topp_triton.py
# apply_top_k_top_p_triton, "modified in-place"; first in 0.17.0, absent in 0.16.0), and 0.10-0.11 do the same work in
# FlashInfer when it is installed (TopKTopPSampler: "Using FlashInfer for top-p & top-k sampling.", forward_cuda ->
# flashinfer top_k_top_p_sampling_from_logits; opt-in with VLLM_USE_FLASHINFER_SAMPLER=1 from 0.13). Beside the
# model-dtype logits of compute_logits live three float32 tensors of the same shape: the copy
# (v1/sample/sampler.py forward: logits.to(torch.float32)), the probabilities (forward_native: softmax(dtype=float32);
# FlashInfer: top_k_mask_logits' masked copy, then its softmax) and the exponential noise (random_sample:
# q = torch.empty_like(probs); FlashInfer: the softmax of the masked copy), 12 B per row and vocabulary entry. V0's
# FlashInfer path (0.6-0.9, model_executor/layers/sampler.py forward with VLLM_USE_FLASHINFER_SAMPLER=1) holds the
# same three: logits.to(torch.float), torch.softmax and torch.log_softmax (dtype=torch.float).
UNSORTED_SAMPLER_EXTRA_BYTES = 12
# MXFP4 experts (gpt-oss) as each vLLM backend holds them after loading (kvplan.cost.quant.mxfp4_expert_bytes), read
# in the wheels of 0.10.1.1 - 0.33.0 as pip installs them (no env vars; triton_kernels is never a Requires-Dist, it
# is vendored as vllm/third_party/triton_kernels from 0.12.0; flashinfer-python an extra up to 0.11.0, required from
# 0.11.1). Per expert at TP 1 of gpt-oss (H = I = 2880), values + scales:
# - Marlin (quantization/mxfp4.py create_weights, "The moe marlin kernel requires that for each linear n % 256 == 0
#   and k % 128 == 0"; 0.19+ fused_moe/oracle/mxfp4.py mxfp4_round_up_hidden_size_and_intermediate_size): I to 128,
#   H to 256 (2944, 3072): 14,413,824 B; utils/marlin_utils_fp4.py prepare_moe_fp4_layer_for_marlin (0.27:
#   prepare_moe_mxfp4_layer_for_marlin) repacks values and scales to the same sizes (scales back to e8m0 bytes) and
#   keeps the biases padded in params_dtype (bf16); its int32 workspace (marlin_make_workspace_new, SMs x 4) is not
#   counted.
MXFP4_MARLIN = quant.MXFP4_MARLIN.model_copy(update={"bias_bytes": 2})  # kvplan.cost.quant's default, biases padded
# - FlashInfer TRT-LLM (SM100): create_weights / mxfp4_round_up_hidden_size_and_intermediate_size "TRTLLM_BACKENDS":
#   H and I to 256 up to 0.26.0 (15,040,512 B), I to 128 from 0.27.0 (as Marlin's); process_weights_after_loading
#   (0.19+: convert_gpt_oss_weight_to_mxfp4_moe_kernel_format) shuffles values and scales into new tensors of the
#   same sizes that replace the loaded ones, biases padded in float32 (w13_bias.data.to(torch.float32)); the
#   per-expert float32 gemm1_alpha / beta / clamp_limit of 0.10 (12 B an expert) are not counted.
MXFP4_FLASHINFER_TRTLLM = Mxfp4Layout(backend="FlashInfer TRT-LLM", intermediate_pad=256, bias_bytes=4)
MXFP4_FLASHINFER_TRTLLM_0_27 = Mxfp4Layout(backend="FlashInfer TRT-LLM", bias_bytes=4)
# - Triton (triton_kernels matmul_ogs) on CUDA: I to 64, H unpadded ("to hold non-uniform sharded tensor as well as
#   swizzling"); process_weights_after_loading converts the biases to float32 (replacing them) and
#   quantization/utils/mxfp4_utils.py _swizzle_mxfp4 copies values and scales into triton_kernels layouts
#   (convert_layout): on Hopper HopperMXValueLayout.swizzle_data pads each value matrix [n_out, n_in / 2] to 16 rows
#   and 32 bytes a row (its (2, 2, 4, 2, 1) and (1, 2, 4, 1, 4) tiles; vendored 0.17.0 - 0.21.0 first "Pre-pad both
#   matrix dims to multiples of 64": 1440 -> 1472 bytes a row for gpt-oss), HopperMXScaleLayout.swizzle_data each
#   scale matrix to SWIZZLE_ALIGN_M = 2 x num_warps x 2 x 8 = 256 rows (num_warps 8 without batched/DP kernels:
#   5760 -> 5888, 2880 -> 3072) and 2 scales a row; 0.26.0+ pads the scales to 4 a row first on SM90 ("Patches
#   #47303: pad K (num scale groups) to 0 mod 4": 90 -> 92). The loaded values are freed (del layer.w13_weight /
#   w2_weight; 0.11: replaced), the loaded scales stay beside the swizzled copy until 0.25.0 adds
#   del layer.w13_weight_scale / w2_weight_scale (fused_moe/oracle/mxfp4.py, TRITON_BACKENDS). 14,025,600 B in
#   0.12 - 0.16 and 0.22 - 0.24, 14,302,080 in 0.17 - 0.21, 13,248,000 in 0.25, 13,265,920 in 0.26+ (+17,280 B of
#   float32 biases over bf16 in each). torch < 2.8.1 (the 0.10.2 - 0.11.0 pins, 2.8.0) disables the Hopper
#   swizzle (StridedLayout: no copy, 13,219,200 B): only with a separately installed triton_kernels, not modelled.
_TRITON_HOPPER = Mxfp4Layout(backend="Triton", hidden_pad=1, intermediate_pad=64, value_align=(16, 32),
                             scale_align=(256, 2), kept_scales=True, bias_bytes=4)
MXFP4_TRITON_HOPPER = {(0, 12): _TRITON_HOPPER, (0, 17): _TRITON_HOPPER.model_copy(update={"value_align": (64, 64)}),
                       (0, 22): _TRITON_HOPPER, (0, 25): _TRITON_HOPPER.model_copy(update={"kept_scales": False}),
                       (0, 26): _TRITON_HOPPER.model_copy(update={"kept_scales": False, "scale_align": (256, 4)})}


def mxfp4_layout(first: tuple[int, ...], compute_capability: float | None) -> Mxfp4Layout:
    """The MXFP4 backend a vLLM release from ``first`` on picks for gpt-oss's experts on a GPU of this compute
    capability (MXFP4_* above: its bytes), a plain pip install without env vars:

    - 0.10.1: quantization/mxfp4.py Mxfp4MoEMethod._should_use_marlin: Marlin on CUDA but SM100, and on Hopper
      unless triton_kernels is installed and torch >= 2.8.0 (the wheel pins 2.7.1); SM100 FlashInfer only with the
      [flashinfer] extra (_should_use_flashinfer_mxfp4_bf16: has_flashinfer()).
    - 0.10.2 - 0.18.1: get_mxfp4_backend: SM100 with FlashInfer -> SM100_FI_MXFP4_BF16 (the extra up to 0.11.0,
      installed from 0.11.1: the "0.11" range follows 0.11.1, its other rules do; 0.11.0 on a B200 loads Marlin,
      2.77 GiB below kvplan for gpt-oss-120b); then Triton where triton_kernels imports, torch >= 2.8.0 and
      (9, 0) <= capability < (11, 0) (has_triton_kernels: _has_module("triton_kernels"), or the vendored
      "vllm.third_party.triton_kernels" from 0.12.0); else Marlin.
    - 0.19+: fused_moe/oracle/mxfp4.py select_mxfp4_moe_backend, the first supported of FLASHINFER_TRTLLM_MXFP4_BF16
      (is_device_capability_family(100) and has_flashinfer), ..., TRITON ((9, 0) <= capability < (11, 0);
      < (13, 0) in 0.33.0 but not on family 120, _get_priority_backends_for_gpt_oss), FLASHINFER_CUTLASS (SM90
      only for mxfp4, after Triton), MARLIN.

    So Ampere, Ada, consumer Blackwell (12.x) and every release up to 0.11 on Hopper: Marlin; Hopper 0.12+:
    Triton; B200 (10.0) 0.11.1+: FlashInfer. Not modelled (Marlin's bytes stand in): B300 (10.3) in 0.12 - 0.18
    (Triton with the Blackwell layouts: is_device_capability(100) is 10.0 only), GPUs without a compute capability
    (ROCm: its own paddings)."""
    cc = compute_capability
    if cc is not None and 9 <= cc < 10 and first >= (0, 12):
        return MXFP4_TRITON_HOPPER[max(k for k in MXFP4_TRITON_HOPPER if k <= first[:2])]
    if cc is not None and 10 <= cc < 11 and (first >= (0, 19) or cc == 10 and first >= (0, 11)):
        return MXFP4_FLASHINFER_TRTLLM_0_27 if first >= (0, 27) else MXFP4_FLASHINFER_TRTLLM
    return MXFP4_MARLIN


# vLLM 0.17.0+'s Triton top-k/top-p (v1/sample/ops/topk_topp_triton.py apply_top_k_top_p_triton, read in 0.17.0, 0.18.0,
# 0.19.1 and 0.28.0): for 8+ rows (topk_topp_sampler.py apply_top_k_top_p: "if HAS_TRITON and logits.shape[0] >= 8")
# it launches NUM_PROGRAMS = min(num_sm, rows) programs and caches one float32 scratch row of the vocabulary per
# program, `logits.new_empty((min(next_power_of_2(NUM_PROGRAMS), num_sm), vocab_size))` in _TRITON_BUFFER_CACHE;
# num_sm is platforms num_compute_units, torch's multi_processor_count. The buffer outlives the profile run, so it
# sits in vLLM's non-KV figure beside the sampler's float32 tensors. (Its two lookup tables, under 4 KiB, are left out.)
TRITON_TOPK_TOPP_MIN_ROWS = 8
TRITON_TOPK_TOPP_BUFFER_BYTES_PER_ENTRY = 4  # float32: apply_top_k_top_p_triton asserts logits.dtype == torch.float32


def triton_topk_topp_buffer_bytes(num_sms: int, num_rows: int, vocab_size: int,
                                  min_rows: int = TRITON_TOPK_TOPP_MIN_ROWS) -> int:
    """The Triton top-k/top-p kernel's cached scratch buffer (``TRITON_TOPK_TOPP_MIN_ROWS``): min(next_power_of_2(
    min(num_sm, rows)), num_sm) rows of the vocabulary in float32; none below ``min_rows`` rows (8: the PyTorch sort
    runs then; 0.33.0's apply_top_k_top_p calls the Triton kernel for any row count wherever Triton is: 1)."""
    if num_rows < min_rows:
        return 0
    programs = min(num_sms, num_rows)
    rows = min(1 << (programs - 1).bit_length(), num_sms)  # vllm.utils.math_utils.next_power_of_2
    return rows * vocab_size * TRITON_TOPK_TOPP_BUFFER_BYTES_PER_ENTRY


# Model Runner V2 (v1/worker/gpu/, the default for listed architectures from 0.22 and dense models in 0.25-0.28;
# read in 0.25.0, 0.26.0, 0.27.0, 0.28.0).
# Its _dummy_sampler_run adds no request to the sampler, so every SamplingStates row keeps its defaults (top_k =
# vocab, top_p = 1, temperature 0: sample/states.py) and Sampler._requires_logits_processing / needs_logits_processing
# is false: no float32 copy, no top-k/top-p; gumbel_sample reads the model-dtype logits of compute_logits and keeps
# int64 and float32 partial maxima per row and 1,024-entry block (sample/gumbel.py local_argmax / local_max).
GUMBEL_BLOCK = 1024
GUMBEL_PARTIAL_BYTES = 8 + 4  # local_argmax int64 + local_max float32 (float64 only with use_fp64_gumbel)
# Its persistent sampler state, allocated in load_model after "Model loading took" is measured: PenaltiesState
# prompt_bin_mask (max_num_reqs x cdiv(vocab, 32) int32) and output_bin_counts (max_num_reqs x vocab int32, "can be
# very large, taking up GBs"), StructuredOutputsWorker grammar_bitmask (max_num_reqs x decode_query_len x cdiv(vocab,
# 32) int32). vLLM 0.27.0+ counts it (utils/mem_utils.py memory_profiling: non_kv_cache_memory = total_consumed, the
# drop of free memory since the worker's first snapshot, + the transient peak); 0.25-0.26 do not (weights +
# torch peak increase during the profile + non-torch growth: torch memory allocated before the profile is in none).
# Smaller per-request tables (logit bias, stop and logprob token ids, about 1 MiB each at 256 requests) are left out.


def v2_dummy_sampler_bytes(num_reqs: int, padded_vocab: int, vocab_size: int, act_bytes: int) -> int:
    """Model Runner V2's dummy sampler: the model-dtype logits (the LM head's padded width) and gumbel_sample's
    partial maxima, no float32 copy."""
    return num_reqs * padded_vocab * act_bytes + num_reqs * cdiv(vocab_size, GUMBEL_BLOCK) * GUMBEL_PARTIAL_BYTES


# vLLM 0.33.0's Model Runner V2 samples twice in the memory profile (v1/worker/gpu/model_runner.py
# _dummy_sampler_run, called by profile_run inside gpu_worker.py determine_available_memory's memory_profiling; not on
# the CPU worker): the default pass of 0.25 - 0.32 (v2_dummy_sampler_bytes), then a "warmup-param pass" after
# sampler.add_request(SamplingParams.for_sampler_warmup()) on every row, min(max_num_seqs, max_num_batched_tokens)
# of them (_dummy_run: num_reqs = min(num_tokens, max_num_reqs)). for_sampler_warmup (sampling_params.py) sets
# temperature 0.9, top_p 0.9, top_k 50, min_p 0.1, frequency/presence 0.5, repetition 1.2, min_tokens 2, a logit
# bias, bad words, logprobs 5, prompt_logprobs 1, watermarking (read by GPUWatermarkSampler only, built when a
# watermark config is given). Traced in sample/sampler.py Sampler.__call__ (0.33.0):
# - apply_sampling_params: needs_logits_processing is set (states.py add_request: temperature 0.9), so "Copy logits to
#   a new FP32 tensor": torch.empty_like(logits, dtype=float32) of compute_logits' logits[..., :org_vocab_size]
#   (model_executor/layers/logits_processor.py _get_logits), a view that is not dense where the LM head pads the
#   vocabulary, so a contiguous rows x vocab_size float32 tensor. Logit bias, penalties, bad words (logit_bias.py,
#   penalties.py, bad_words.py apply), temperature (gumbel.py apply_temperature) and min_p (min_p.py) are Triton
#   kernels writing it in place; penalties' bincount fills the persistent state (v2_sampler_state_bytes).
# - sample: top_k and top_p set, no greedy row, no seed and raw_logprobs (config/model.py's default) make the fused
#   sampler eligible, and Sampler.use_flashinfer = flashinfer_sampler_supported() (v1/sample/ops/topk_topp_sampler.py:
#   CUDA, VLLM_USE_FLASHINFER_SAMPLER (default 1 in envs.py), FlashInferBackend.supports_compute_capability, 8.0 -
#   12.1 in v1/attention/backends/flashinfer.py, and more than 16 SMs). flashinfer_sample -> flashinfer-python
#   0.7.2.post1 (vLLM 0.33.0's pin) sampling.py top_k_top_p_sampling_from_logits, "top_k_first" with a per-row top_k
#   tensor (no _top_k_first_fast_path: it takes an int): top_k_mask_logits' mask_logits = torch.empty_like(logits)
#   and torch.softmax(masked_logits), two more rows x vocab_size float32 tensors live together with the copy (12 B a
#   row and entry, as UNSORTED_SAMPLER_EXTRA_BYTES), and top_k_mask_logits' row_states buffer, 1 MiB from
#   _get_cache_buf (flashinfer/utils.py), kept process-wide. Without FlashInfer (other GPUs, ROCm): apply_top_k_top_p
#   -> ops/topk_topp_triton.py apply_top_k_top_p_triton in place on the copy with its cached buffer (any row count:
#   triton_topk_topp_buffer_bytes with min_rows 1), then gumbel_sample's partial maxima over the copy.
# - compute_topk_scores (sample/logprob.py) on the raw model-dtype logits: torch.topk(logits, 5) and Triton kernels
#   whose outputs are rows x 6 wide; prompt logprobs are not computed by _dummy_sampler_run. Per-row tensors (top_k,
#   top_p gathers, samples, valid flags, a few KiB) are left out.
FLASHINFER_TOPK_MASK_STATE_BYTES = 1024 * 1024  # sampling.py top_k_mask_logits: buffer_bytes = 1024 * 1024
V2_WARMUP_FLASHINFER_FP32_TENSORS = 3  # the float32 copy, top_k_mask_logits' mask_logits, torch.softmax's probs
FLASHINFER_SAMPLER_CC = (8.0, 12.1)  # FlashInferBackend.supports_compute_capability, 0.33.0
FLASHINFER_SAMPLER_MAX_REFUSED_SMS = 16  # flashinfer_sampler_supported: "top-k masking requires more than 16 SMs"


def flashinfer_samples(compute_capability: float | None, sm_count: int | None) -> bool:
    """Whether vLLM 0.33.0's flashinfer_sampler_supported picks FlashInfer on this GPU (the note above): a CUDA
    compute capability in FLASHINFER_SAMPLER_CC and more than 16 SMs (an unknown SM count: assumed more)."""
    lo, hi = FLASHINFER_SAMPLER_CC
    return (compute_capability is not None and lo <= compute_capability <= hi
            and (sm_count is None or sm_count > FLASHINFER_SAMPLER_MAX_REFUSED_SMS))


def v2_warmup_sampler_bytes(num_reqs: int, padded_vocab: int, vocab_size: int, act_bytes: int, flashinfer: bool,
                            triton_buffer: int = 0) -> int:
    """The peak of 0.33.0's warmup-param sampler pass (the note above), each tensor as the caching allocator rounds
    it: the model-dtype logits (the LM head's padded width) + with FlashInfer three rows x vocab_size float32 tensors
    and the 1 MiB row-state buffer; without it the float32 copy, the Triton kernel's ``triton_buffer`` and
    gumbel_sample's partial maxima. It exceeds the default pass (v2_dummy_sampler_bytes), which frees its own."""
    logits = round_size(num_reqs * padded_vocab * act_bytes)
    fp32 = round_size(num_reqs * vocab_size * 4)
    if flashinfer:
        return logits + V2_WARMUP_FLASHINFER_FP32_TENSORS * fp32 + round_size(FLASHINFER_TOPK_MASK_STATE_BYTES)
    blocks = num_reqs * cdiv(vocab_size, GUMBEL_BLOCK)
    return logits + fp32 + triton_buffer + round_size(8 * blocks) + round_size(4 * blocks)


# A first boot compiles inside the memory profile. vLLM's torch.compile runs at the first forward, profile_run's
# (v1/worker/gpu_worker.py determine_available_memory: "a profile run which compiles the model for
# max_num_batched_tokens", under memory_profiling; read in 0.27.0 and 0.28.0), and when its cache misses (a new
# model, max_num_batched_tokens or max_model_len: vLLM issue 54383, "First boot of a new shape is granted a ~5%
# smaller KV cache", PR 54479 open on 0.28.0) Inductor compiles. vLLM turns on its combo kernels with
# benchmark_combo_kernel from 0.11.1 (config/compilation.py CompilationConfig.__post_init__, torch >= 2.9; read in
# every release 0.11.1-0.33.0, absent in 0.11.0, which pins torch 2.8.0), and Inductor benchmarks each candidate's
# kernels while compiling: scheduler.py
# speedup_by_combo_kernel -> codegen/triton.py benchmark_fused_nodes / benchmark_combo_kernel -> the generated
# get_args(), which allocates a random tensor (rand_strided) for every argument of the kernel, graph inputs included
# (read in torch 2.13). The largest input of a decoder's compiled graph is the embedding table, so a cold compile's
# torch peak is about one copy of the table on the rank. ESTIMATE (the kernel that takes it is not traced here):
# vLLM 0.27.1 logs "1.18 GiB for peak activation" on a cold boot of Qwen3-8B (table 1.16 GiB) and 0.19 GiB on the
# warm boots after it (GitHub code index file 58522340114, docs/logs); the other cold/warm pairs: docs/capacity.md.
# A warm boot loads the compiled graphs and benchmarks nothing.
def cold_compile_peak_bytes(embedding_params: int, act_bytes: int) -> int:
    """The torch peak of a first boot's compile (the note above): one random copy of the rank's embedding table in
    the model dtype; 0 on a rank without it (later pipeline stages)."""
    return embedding_params * act_bytes


def v2_sampler_state_bytes(max_num_reqs: int, vocab_size: int, decode_query_len: int = 1) -> int:
    """Model Runner V2's persistent vocabulary-wide sampler state (the note above ``v2_dummy_sampler_bytes``):
    output_bin_counts + prompt_bin_mask + grammar_bitmask, int32."""
    words = cdiv(vocab_size, 32)
    return 4 * (max_num_reqs * vocab_size + max_num_reqs * words + max_num_reqs * decode_query_len * words)


def dummy_sampler_bytes(num_reqs: int, padded_vocab: int, act_bytes: int) -> int:
    """The V1 runner's dummy sampler without a sort over ``num_reqs`` rows: the model-dtype logits +
    UNSORTED_SAMPLER_EXTRA_BYTES of float32 copies per row and entry (a sorting release: sorting_sampler_bytes)."""
    return num_reqs * padded_vocab * (act_bytes + UNSORTED_SAMPLER_EXTRA_BYTES)


def held_hidden_bytes(num_tokens: int, num_reqs: int, hidden_size: int, act_bytes: int, noise: bool = True) -> int:
    """What the V1 runner's profile_run still holds while its dummy sampler runs (v1/worker/gpu_model_runner.py,
    0.10.0 - 0.28.0): the forward's output (``num_tokens`` x hidden; 0 where _dummy_run returns only the last rows,
    0.8.0 - 0.9.2), its last rows (``hidden_states[logit_indices]``) and, with ``noise`` (0.9.0+),
    _dummy_sampler_run's ``torch.rand_like`` of them, in the model dtype."""
    return (num_tokens + (2 if noise else 1) * num_reqs) * hidden_size * act_bytes


@lru_cache(maxsize=4096)  # a search asks for the same few batches per layout and GPU type
def profile_activation_bytes(card: ModelCard, tp: int, act_bytes: int, num_tokens: int, num_reqs: int,
                             padded_vocab: int, last_stage: bool, expert_tp: int | None = None,
                             hold_qkv: bool = True, moe_separate_caches: bool = False) -> int:
    """Approximate torch peak of profile_run (gpu_model_runner.py _dummy_run + _dummy_sampler_run), kvplan's own:
    forward: N tokens x (gate_up + act output (3 I/tp) + q/k/v (/tp) + 4 hidden-wide buffers) x act bytes; MoE:
    the Triton fused-MoE workspace N·k·max(I/tp, H) + N·k·max(2I/tp, H) + N·H (fused_moe/experts/triton_moe.py).
    Sampler (last stage): R rows x padded vocab x (act bytes + UNSORTED_SAMPLER_EXTRA_BYTES), the sampler without a
    sort (a sorting release's sampler is the runtime's, VLLM.sampler_peak). The peak is the larger of the two phases.
    ``hold_qkv`` False (V0's eager forward): the q/k/v output is freed before the MLP that sets the peak (measured:
    a V0 0.7.2 log of Qwen2.5-1.5B over 32,768 tokens logs 2.02 GiB = 32,768 x (3 I + 4 H) x 2 B, docs/logs).
    ``moe_separate_caches`` (V0 through 0.7.3, fused_moe/fused_moe.py fused_experts_impl): three workspaces live
    together, intermediate_cache1 (N, k, 2I/tp), intermediate_cache2 (N·k, I/tp) and intermediate_cache3 (N, k, H),
    and the sum is written over the input (``inplace=True`` from FusedMoE's quant methods), so no N·H output; PR
    13625 ("[Kernel] Optimize moe intermediate_cache usage", opened on 0.7.3's release day, 2025-02-20) made cache3
    share cache1's memory, from 0.8.0 (its fused_moe.py not read)."""
    h = card.hidden_size
    qkv = sum(m.n_out for m in attention_matrices(card) if m.tp == "column") // tp if hold_qkv else 0
    dense = 3 * card.ffn_size // tp + qkv + 4 * h
    forward = dense if card.moe is None or card.moe.first_dense_layers else 0
    if card.moe:
        k, inner = card.moe.experts_per_token, card.moe.expert_ffn_size // (expert_tp or tp)
        if moe_separate_caches:
            workspace = k * (2 * inner + inner + h)
        else:
            workspace = k * max(inner, h) + k * max(2 * inner, h) + h
        forward = max(forward, workspace + qkv + 4 * h)
    sampler = dummy_sampler_bytes(num_reqs, padded_vocab, act_bytes) if last_stage else 0
    return max(num_tokens * forward * act_bytes, sampler)


def mla_dequant_bytes(card: ModelCard, tp: int, layers: int, w_bits: int) -> int:
    """MLAAttention.process_weights_after_loading (models/deepseek_v2.py path): a quantized checkpoint gets W_UK_T and
    W_UV rebuilt from a dequantized kv_b_proj in bf16, kv_lora_rank x heads/tp x (nope + v) x 2 B per layer; a bf16
    checkpoint's are views (0 B)."""
    if card.mla is None or w_bits >= 16:
        return 0
    m = card.mla
    return layers * m.kv_lora_rank * (card.num_heads // tp) * (m.qk_nope_head_dim + m.v_head_dim) * 2


def mla_absorbed_bytes(card: ModelCard, tp: int, layers: int, act_bytes: int) -> int:
    """V0 0.7.1 - 0.7.3 (attention/backends/mla/utils.py MLACommonImpl.process_weights_after_loading, read at commit
    04644e3f, a 0.7.3-era file; VLLM_MLA_PERFORM_MATRIX_ABSORPTION on by default, removed by PR 14770 "[Attention] MLA
    get rid of materialization", opened 2025-03-13, before 0.8.0's release; 0.8.0's file itself not read): what an
    MLA layer holds on a rank beyond its checkpoint tensors, per layer, with N = heads / tp, Lq = q_lora_rank
    (hidden_size without one), Lkv = kv_lora_rank:

    - W_Q_UK = einsum(W_Q, W_UK), Lq x N·Lkv, and W_UV_O = einsum(W_UV, W_O), N·Lkv x hidden: requantized to fp8
      (scaled_quantize, 1 B) with one float32 scale per weight block (per tensor: one) for an fp8 checkpoint
      (VLLM_MLA_DISABLE_REQUANTIZATION off by default), else in the model dtype;
    - W_QR, the rope part of q_proj: Lq x N·qk_rope, in the model dtype (``.to(act_dtype)``; a copy either way:
      ``.contiguous()`` of a strided slice);
    - self.W_UK / self.W_UV: views of kv_b_proj's weight, Lkv x N·(nope + v); for an fp8 checkpoint they keep the
      dequantized copy alive, float32 (scaled_dequantize's default out_dtype), 4 B an element; for a 16-bit one they
      view the loaded weight (0 B).

    Other quantized checkpoints raise there ("Only FP8 and UnquantizedLinearMethod are supported for MLA"); kvplan
    counts them as 16-bit. The dequantized and absorbed temporaries are freed before the load's measurement ends."""
    if card.mla is None:
        return 0
    m, q = card.mla, card.quantization
    heads, lq = card.num_heads // tp, m.q_lora_rank or card.hidden_size
    fp8 = q is not None and q.method == "fp8"

    def requantized(rows: int, cols: int) -> int:
        if not fp8:
            return rows * cols * act_bytes
        # scaled_quantize(x, weight_block_size): one scale per group_shape tile of the rows x cols product
        scales = cdiv(rows, q.block[0]) * cdiv(cols, q.block[1]) if q.block else 1
        return rows * cols + 4 * scales

    uk_uv = m.kv_lora_rank * heads * (m.qk_nope_head_dim + m.v_head_dim) * 4 if fp8 else 0
    per_layer = (requantized(lq, heads * m.kv_lora_rank) + requantized(heads * m.kv_lora_rank, card.hidden_size)
                 + lq * heads * m.qk_rope_head_dim * act_bytes + uk_uv)
    return layers * per_layer


def max_in_flight_tokens(max_num_batched_tokens: int, pp: int, concurrent_batches: bool = True,
                         v2_runner: bool = False, async_scheduling: bool = True) -> int:
    """The scheduled tokens a sliding-window (or chunked-local) layer's pages must cover beyond its window.
    0.10 - 0.25 (v1/kv_cache_interface.py SlidingWindowSpec.max_memory_usage_bytes, read in 0.10.1.1 and 0.25.1):
    one batch, max_num_batched_tokens. 0.26+ (``concurrent_batches``; config/vllm.py max_in_flight_tokens, read in
    0.26.0 and 0.33.0) max_concurrent_batches x max_num_batched_tokens: with async scheduling (the default) Model
    Runner V2 keeps pp + 1 batches in flight, the V1 runner 2 at PP 1 and pp otherwise; without it, pp."""
    if not concurrent_batches:
        return max_num_batched_tokens
    if not async_scheduling:
        return pp * max_num_batched_tokens
    return (pp + 1 if v2_runner else 2 if pp == 1 else pp) * max_num_batched_tokens


def pages_per_request(spec: KVLayerSpec | MambaPage, max_model_len: int, block_size: int, in_flight: int) -> int:
    """kv_cache_interface.py max_memory_usage_bytes / page_size_bytes: full and MLA cdiv(L, bs); sliding window
    cdiv(min(W - 1 + in-flight tokens, L), bs) + 1; chunked local attention (ChunkedLocalAttentionSpec, read in
    0.14.0 and 0.33.0: max_admission_blocks_per_request) cdiv(min(chunk + in-flight tokens, L), bs); a state layer
    its MambaPage's ``pages`` (``state_pages``), in Mamba cache mode "all" one more per block of L
    (``all_mode_pages``)."""
    if spec.per_sequence:
        pages = getattr(spec, "pages", 1)
        return all_mode_pages(max_model_len, block_size, pages) if getattr(spec, "per_block", False) else pages
    if spec.chunk is not None:
        return cdiv(min(spec.chunk + in_flight, max_model_len), block_size)
    if spec.window is None:
        return cdiv(max_model_len, block_size)
    return cdiv(min(spec.window - 1 + in_flight, max_model_len), block_size) + 1


def all_mode_pages(max_model_len: int, block_size: int, speculative_blocks: int = 0) -> int:
    """Pages one request holds in a state group in mamba_cache_mode "all" (v1/kv_cache_interface.py
    MambaSpec.max_memory_usage_bytes, read in 0.20.0 - 0.27.1; 0.20 - 0.21 without the speculative term, which
    their mode "all" never meets, VllmVersion.all_mode_yields_to_speculation: ``(cdiv(max_model_len, self.block_size) +
    self.num_speculative_blocks) x page_size_bytes``): one state page per block of the sequence, the state after each
    block's last token (what a later request's prefix hit resumes from), plus the speculative ones. The spec's
    block_size is cache_config.mamba_block_size, which _align_hybrid_block_size (platforms/interface.py) sets to the
    hybrid's attention block in this mode (``hybrid_block_size`` with the chunk alignment, ``mamba_chunk_size``).
    This is what vLLM's fits check and 'Maximum concurrency' count; while a request decodes, MambaManager frees the
    states before its last computed token into the prefix cache (get_num_skipped_tokens = num_computed_tokens - 1),
    where they stay until evicted."""
    return cdiv(max_model_len, block_size) + speculative_blocks


# config/model.py ModelConfig.get_mamba_chunk_size (read in 0.20.0 - 0.27.1): the HF config's
# mamba_chunk_size, else its chunk_size, else 2048 ("Since Mamba1 does not have a chunk notion we use a default chunk
# size of 2048"): Jamba's and Mamba-1's configs carry neither
MAMBA1_CHUNK_SIZE = 2048


def mamba_chunk_size(ssm) -> int:
    """The chunk a hybrid's attention block is aligned to in Mamba cache mode "all" (_align_hybrid_block_size: "With
    prefix caching, align to mamba chunk size for kernel perf"): the card's chunk_size (the HF config's
    mamba_chunk_size / chunk_size), 2048 for Mamba-1 layers, whose configs have no chunk (MAMBA1_CHUNK_SIZE)."""
    return MAMBA1_CHUNK_SIZE if ssm.kind == "mamba" else ssm.chunk_size


def state_pages(align: bool, speculative_blocks: int = 0, checkpoint_blocks: int = 0) -> int:
    """Pages one request holds in a state group (v1/kv_cache_interface.py MambaSpec.max_memory_usage_bytes /
    page_size_bytes): mamba_cache_mode "none" 1 + num_speculative_blocks; "align" (prefix caching on) 2 +
    num_speculative_blocks + num_prefill_checkpoint_blocks (0.28.0: 2 + speculative; the checkpoint term from 0.29.0).
    The callers pass what their release declares (VllmVersion)."""
    return (2 + checkpoint_blocks if align else 1) + speculative_blocks


# platforms/interface.py _align_hybrid_block_size (0.33.0), align mode: "Internal prefill checkpoints land on block
# boundaries": kernel_block_alignment_size = lcm(it, get_mamba_prefill_checkpoint_alignment) - the Gated DeltaNet
# layers on FlashInfer's prefill declare FLASHINFER_GDN_CHECKPOINT_ALIGNMENT (v1/attention/backends/gdn_attn.py: "its
# 64-token chunk"); absent before 0.33.0
GDN_CHECKPOINT_ALIGNMENT = 64


@dataclass(frozen=True)
class MambaPage:
    """One state layer's page in vLLM's pool (kv_cache_interface.py MambaSpec): its conv and SSM states of one
    request, ``state_bytes`` = sum(prod(shape) x dtype size); ``padded_bytes`` (cache_config.mamba_page_size_padded)
    makes it the size of an attention page; ``pages``: the pages one request holds (``state_pages``), and with
    ``per_block`` (Mamba cache mode "all") one more per block of the request's length (``all_mode_pages``)."""

    state_bytes: int
    padded_bytes: int | None = None
    pages: int = 1
    per_block: bool = False
    kind: str = "mamba"
    window: None = None
    chunk: None = None
    per_sequence: bool = True

    def page_size_bytes(self, block_size: int) -> int:
        """MambaSpec.page_size_bytes: the padded size when set, whatever the block size."""
        return self.padded_bytes if self.padded_bytes is not None else self.state_bytes


@dataclass(frozen=True)
class KVCacheGroup:
    """One KV cache group (v1/core/kv_cache_utils.py get_kv_cache_groups): layers sharing one block table."""

    spec: KVLayerSpec | MambaPage
    layers: tuple[int, ...]  # decoder layer indices (global)
    size: int  # group_size: layer slots per block, padding included


def kv_cache_groups(specs: list, block_size: int = DEFAULT_BLOCK_SIZE,
                    layers: list[int] | None = None) -> list[KVCacheGroup]:
    """All layers alike: one group. Hybrid (_get_kv_cache_groups_uniform_page_size): bucket layers by spec;
    group_size = min layers per type (max when max < 1.5 min); each type splits into cdiv(n, group_size) groups,
    layer i of a type going to group i % num_groups. ``layers``: the decoder layer of each spec (default its index;
    a Falcon-H1 layer gives an attention spec and a MambaPage with the same index)."""
    buckets: dict[KVLayerSpec | MambaPage, list[int]] = {}
    for i, spec in zip(layers if layers is not None else range(len(specs)), specs):
        buckets.setdefault(spec, []).append(i)
    if len({s.page_size_bytes(block_size) for s in buckets}) > 1:
        raise KvplanError("--engine: hybrid layers with different page sizes (vLLM pads or packs them) are not "
                          "modelled; use --engine ideal")
    counts = [len(v) for v in buckets.values()]
    size = max(counts) if max(counts) < 1.5 * min(counts) else min(counts)
    groups = []
    for spec, layers in buckets.items():
        n = cdiv(len(layers), size)
        groups += [KVCacheGroup(spec, tuple(layers[j::n]), size) for j in range(n)]
    return groups


def padding_layers(groups: list[KVCacheGroup]) -> int:
    """Empty layer slots: 'Add k padding layers, may waste at most p% KV cache memory'."""
    return sum(g.size - len(g.layers) for g in groups)


def bytes_per_block(groups: list[KVCacheGroup], block_size: int, layers: range | None = None) -> int:
    """kv_cache_utils.py: the largest group's pages; a PP worker sees its own layers of each group
    (_project_kv_cache_groups_to_worker). One group of all layers: layers x page."""
    slots = max(sum(1 for i in g.layers if layers is None or i in layers) for g in groups)
    return slots * groups[0].spec.page_size_bytes(block_size)


def hybrid_alignment_tokens(kernel_alignment: int, block_size: int, checkpoint_alignment: int = 1) -> int:
    """The token multiple a hybrid's attention block is raised to (_align_hybrid_block_size): max(kernel block size,
    block_size), lcm'd in align mode with the layers' prefill checkpoint alignment (1 otherwise)."""
    return math.lcm(max(kernel_alignment, block_size), checkpoint_alignment)


def hybrid_block_size(attn_bytes_per_token: int, mamba_bytes: int, block_size: int,
                      kernel_alignment: int = DEFAULT_BLOCK_SIZE, checkpoint_alignment: int = 1
                      ) -> tuple[int, int | None]:
    """(attention block size, padded mamba page) of a hybrid model (platforms/interface.py _align_hybrid_block_size;
    models/config.py HybridAttentionMambaModelConfig before it): alignment = max(kernel block size, block_size), in
    align mode lcm'd with the layers' prefill checkpoint alignment (``checkpoint_alignment``, 0.33+:
    GDN_CHECKPOINT_ALIGNMENT; 1 otherwise), in mode "all" (0.20 - 0.27, read in 0.20.0 - 0.27.1) with the
    Mamba chunk (``checkpoint_alignment`` = mamba_chunk_size: chunk_size = lcm(base_chunk_size,
    kernel_block_alignment_size); attn_block_size = chunk_size x cdiv(cdiv(mamba page, attention page of 1 token),
    chunk_size), the same as the formula below as cdiv(cdiv(m, a), c) = cdiv(m, a x c), and mamba_block_size = that
    block); attn_block = alignment x
    cdiv(mamba page, alignment x attention page of 1 token), taken when larger than block_size ('Setting attention
    block size to N tokens'); the mamba page is then padded to block x attention page ('Padding mamba page size by
    p%'), None when already equal. (0.28 - 0.32 align mode only sets mamba_block_size = block_size.)"""
    alignment = hybrid_alignment_tokens(kernel_alignment, block_size, checkpoint_alignment)
    attn_block = alignment * cdiv(mamba_bytes, alignment * attn_bytes_per_token)
    block = max(block_size, attn_block)
    attn_page = block * attn_bytes_per_token
    return block, (None if attn_page == mamba_bytes else attn_page)


def vllm_layer_specs(layer_specs: list[tuple[int, tuple[KVLayerSpec, ...]]],
                     padded: int | None = None, pages: int = 1, per_block: bool = False) -> tuple[list, list[int]]:
    """vLLM's per-layer KV cache specs of a rank (get_kv_cache_spec): each attention spec as it is, each state layer's
    conv and SSM states as one MambaPage of ``pages`` per request (MambaBase.get_kv_cache_spec; ``per_block``: Mamba
    cache mode "all", one more per block); and the decoder layer of each."""
    specs, layers = [], []
    for i, layer in layer_specs:
        attention = [sp for sp in layer if not sp.per_sequence]
        states = sum(sp.bytes_per_token for sp in layer if sp.per_sequence)
        for sp in attention + ([MambaPage(states, padded, pages, per_block)] if states else []):
            specs.append(sp)
            layers.append(i)
    return specs, layers


def without_hybrid_manager(specs: list) -> list:
    """Before 0.14 the hybrid KV cache manager is off for a model with chunked local attention (config/vllm.py:
    "Hybrid KV cache manager is not yet supported with chunked local attention" unless
    VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE, whose envs.py default is "0" in 0.10.0 - 0.13.0 and "1" from
    0.14.0), and v1/core/kv_cache_utils.py unify_hybrid_kv_cache_specs (read in 0.10.0 and 0.13.0) turns every
    chunked and sliding layer into a FullAttentionSpec: one group, cdiv(L, bs) pages per layer (0.9.1 has no
    ChunkedLocalAttentionSpec: its chunked layers are full attention already). Other models: ``specs`` as given."""
    if not any(getattr(sp, "chunk", None) for sp in specs):
        return specs
    return [replace(sp, kind="full", window=None, chunk=None) if sp.window or sp.chunk else sp for sp in specs]


def num_blocks(available: int, block_bytes: int) -> int:
    """kv_cache_utils.py get_kv_cache_config_from_groups: available // bytes_per_block (then min over ranks)."""
    return max(0, available) // block_bytes


def blocks_per_request(groups: list[KVCacheGroup], max_model_len: int, block_size: int, in_flight: int) -> int:
    """kv_cache_utils.py get_max_concurrency_for_kv_cache_config: sum over groups of pages one request needs."""
    return sum(pages_per_request(g.spec, max_model_len, block_size, in_flight) for g in groups)


def max_concurrency(blocks: int, per_request: int) -> float:
    """num_blocks / blocks_per_request ('Maximum concurrency for L tokens per request: C x')."""
    return blocks / per_request


def kv_cache_tokens(concurrency: float, max_model_len: int) -> int:
    """0.18+ get_kv_cache_capacity: int(max_concurrency x max_model_len) ('GPU KV cache size: N tokens')."""
    return int(concurrency * max_model_len)


def kv_cache_tokens_by_blocks(num_blocks: int, groups: int, block_size: int) -> int:
    """0.10 - 0.17 kv_cache_utils.py: num_blocks // len(kv_cache_groups) x block_size ('GPU KV cache size')."""
    return num_blocks // groups * block_size


def fits(available: int, block_bytes: int, needed: int, reserve_null: bool = True) -> bool:
    """_check_enough_kv_cache_memory: needed <= available, less one block where the version reserves BlockPool's
    null block (vLLM PR 47272: check_memory = available - bytes_per_block)."""
    return needed <= available - (block_bytes if reserve_null else 0)


def max_model_len_fit(groups: list[KVCacheGroup], block_bytes: int, available: int, max_model_len: int, block_size: int,
                      in_flight: int, reserve_null: bool = True) -> int:
    """_estimate_max_model_len_from_groups: binary search over [1, max_model_len] for the longest length whose one
    request fits; 0 when not even one token does."""
    def ok(length: int) -> bool:
        return fits(available, block_bytes, block_bytes * blocks_per_request(groups, length, block_size, in_flight),
                    reserve_null)

    if ok(max_model_len):  # the usual case in a search; ok is monotone in length, so the bisection would agree
        return max_model_len
    if all(g.spec.window is None and g.spec.chunk is None and not g.spec.per_sequence for g in groups):  # every group cdiv(L, bs) pages:
        # the bisection's answer in closed form, the most whole blocks per group that fit, times the block size
        budget = available - (block_bytes if reserve_null else 0)
        return max(0, budget // (block_bytes * len(groups))) * block_size if budget > 0 and groups else 0
    lo, hi = 0, max_model_len - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if ok(mid) else (lo, mid - 1)
    return lo


# ---- AWQ and GPTQ: the method vLLM picks, and the model dtypes it takes ----------------------------------------

AWQ_MARLIN_FIRST = (0, 5, 3)  # vllm PR 6612 (awq_marlin.py with bfloat16, merged 2024-07-21), first in 0.5.3
INT_METHODS = MappingProxyType({  # ModelConfig._verify_quantization: config.py 0.9.1, config/model.py 0.11.0+
    # awq.py AWQConfig.get_min_capability 75 (0.9.1 - 0.23.0); auto_awq.py the same (0.24+). awq_marlin.py
    # is_awq_marlin_compatible: current_platform.is_cuda() through 0.18.1, is_cuda_alike() from 0.19.0
    "awq": quant.IntMethods(
        "AWQ", plain="awq", plain_source="quantization/awq.py AWQConfig, vLLM 0.9.1 - 0.23.0", marlin="awq_marlin",
        marlin_source="quantization/awq_marlin.py AWQMarlinConfig, vLLM 0.9.1 - 0.23.0", marlin_first=AWQ_MARLIN_FIRST,
        marlin_rocm_first=(0, 19), min_capability=7.5,
        checkpoint="4-bit checkpoints with zero points and group size -1, 32, 64 or 128", auto="auto_awq",
        auto_source="quantization/auto_awq.py AutoAWQConfig, vLLM 0.24.0 - 0.33.0", auto_first=(0, 24)),
    # gptq.py GPTQConfig [torch.half], get_min_capability 60 (0.9.1 - 0.21.0); gptq_marlin.py GPTQMarlinConfig
    # is_gptq_marlin_compatible: current_platform.is_cuda() (0.9.1 - 0.13.0; ``is_cuda() or is_cpu()`` 0.14.0 -
    # 0.21.0: never ROCm); auto_gptq.py AutoGPTQConfig from 0.22.0: [torch.half, torch.bfloat16], get_min_capability
    # 60, override_quantization_method "auto_gptq" for every quant_method gptq checkpoint on every platform. When
    # GPTQ-Marlin took bfloat16 first is not read: every release before 0.9.1 is taken as 0.9.1's
    "gptq": quant.IntMethods(
        "GPTQ", plain="gptq", plain_source="quantization/gptq.py GPTQConfig, vLLM 0.9.1 - 0.21.0", marlin="gptq_marlin",
        marlin_source="quantization/gptq_marlin.py GPTQMarlinConfig, vLLM 0.9.1 - 0.21.0", marlin_first=(),
        marlin_rocm_first=None, min_capability=6.0,
        checkpoint="symmetric 4- or 8-bit checkpoints with group size -1, 32, 64 or 128", auto="auto_gptq",
        auto_source="quantization/auto_gptq.py AutoGPTQConfig, vLLM 0.22.0 - 0.33.0", auto_first=(0, 22)),
})


def int_kernel(release: tuple[int, ...], vendor: str, compute_capability: float | None,
               q: Quantization) -> quant.QuantKernel | None:
    """What vLLM ``release`` runs an AWQ or GPTQ checkpoint with on a GPU of ``vendor`` (and NVIDIA
    ``compute_capability``), by INT_METHODS: None where kvplan has not read it (other vendors and formats).

    - AWQ 0.24.0 - 0.33.0, GPTQ 0.22.0 - 0.33.0: AutoAWQConfig / AutoGPTQConfig on every platform but the CPU,
      [torch.half, torch.bfloat16]; they pick Marlin or another kernel per layer after the dtype check.
    - before: the Marlin twin (AWQMarlinConfig, GPTQMarlinConfig: [torch.half, torch.bfloat16]) where its
      is_*_marlin_compatible holds: the checkpoint (quant.MARLIN_COMPATIBLE) on CUDA of compute capability 8.0+
      (marlin_utils.py query_marlin_supported_quant_types: ``device_capability < 80`` through 0.13.0, ``< 75`` from
      0.14.0) or, for AWQ from 0.19.0, ROCm (no capability check there); else the plain config ([torch.half]). Read
      in every release 0.9.1 - 0.23.0; 0.5.3 - 0.9.0 are not read here and taken as 0.9.1's rule (vLLM 0.6.5 ran a
      bfloat16 GPTQ checkpoint with GPTQMarlinLinearMethod on an H100: docs/logs/vllm-code5773335890-phi-4-gptq-h100).
    - AWQ before 0.5.3: AWQConfig only (the bfloat16 refusal of vllm issues 1114, 1592, 1823, 2023)."""
    m = INT_METHODS.get(q.method)
    if m is None:
        return None
    return quant.pick_int_method(m, release, vendor, compute_capability, q, 7.5 if release >= (0, 14) else 8.0)



# fp8 checkpoints (and online --quantization fp8, which builds Fp8Config): quantization/fp8.py
# Fp8Config.get_supported_act_dtypes [torch.bfloat16, torch.half] in every release 0.9.1 - 0.33.0; compressed-tensors
# float8 checkpoints: compressed_tensors/compressed_tensors.py CompressedTensorsConfig [torch.float16,
# torch.bfloat16] in 0.9.1 - 0.10.0, [torch.float32, torch.float16, torch.bfloat16] from 0.10.1.1 (0.10.1 not read,
# taken as 0.10.1.1's)
CT_FP32_FIRST = (0, 10, 1)


def fp8_kernel(release: tuple[int, ...], vendor: str, compute_capability: float | None,
               q: Quantization) -> quant.QuantKernel | None:
    """The config vLLM ``release`` loads a float8 checkpoint (or online fp8) with, as far as the model dtype goes; its
    get_min_capability is not modelled here. None on vendors kvplan has not read."""
    if vendor.lower() not in ("nvidia", "amd"):
        return None
    if q.checkpoint_format == "compressed-tensors":
        old = release < CT_FP32_FIRST
        return quant.QuantKernel("compressed-tensors", ("fp16", "bf16") if old else ("fp16", "bf16", "fp32"),
                                 "quantization/compressed_tensors/compressed_tensors.py CompressedTensorsConfig, vLLM "
                                 + ("0.9.1 - 0.10.0" if old else "0.10.1.1 - 0.33.0"))
    return quant.QuantKernel("fp8", ("bf16", "fp16"), "quantization/fp8.py Fp8Config, vLLM 0.9.1 - 0.33.0")


QUANT_KERNELS = MappingProxyType({"awq": int_kernel, "gptq": int_kernel, "fp8": fp8_kernel})  # per method


quant_kernel = partial(quant.pick_kernel, QUANT_KERNELS)  # (release, vendor, compute capability, quantization)
