"""SGLang's token pool as small pure functions. Followed: SGLang 0.5.23 (paths inside ``python/sglang``).

SGLang does not profile activations: ``mem_fraction_static`` (mfs) is the share of the free memory at start-up that
weights and the KV pool may take; activations and CUDA graphs live in the rest::

    pre  = free memory after distributed init, before weights          (srt/distributed/bootstrap.py)
    rest = (pre - weights) - pre x (1 - mfs) = pre x mfs - weights      (srt/mem_cache/kv_cache_configurator.py)
    max_total_num_tokens = rest // cell_size, rounded down to page_size, MIN over ranks
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from types import MappingProxyType

from kvplan.cost import quant
from kvplan.errors import KvplanError
from kvplan.model.quant import Quantization

RULES = "SGLang 0.5.23"
DEFAULT_PAGE_SIZE = 1  # srt/arg_groups/overrides.py _page_size_default: 1 on CUDA
MIB = 2**20
# The free memory that mem_fraction_static multiplies is read after the distributed init (model_runner.py
# init_torch_distributed, 0.4.9.post2 and 0.5.x: before_avail_memory, then init_distributed_environment and
# initialize_model_parallel, then min_per_gpu_memory): at TP > 1 that init builds the TP group's NCCL communicator
# (distributed/device_communicators/pynccl.py PyNcclCommunicator: "A small all_reduce for warmup", which makes NCCL
# allocate its channel buffers) and the custom all-reduce buffers (8 MiB max_size), logged as "Init torch distributed
# ends. mem usage=X GB". How much NCCL takes is its own choice by topology, not SGLang's: over PCIe 0.13 GiB (4x L4,
# docs/logs/sglang-didierdurand-qwq-32b-*.log: 22.16 - 21.63 = 0.53 GiB in use at the load, inside the 512 MiB
# context kvplan charges to 0.03 GiB), over NVLink (SXM / HGX boards, gpus.yaml nvlink_all_gpus) 1.25 GiB logged
# (8x H100 80GB HBM3, nccl 2.27.3, Sep 2025, GitHub code index file 45518106035: "Load weight begin. avail mem=77.43
# GB" of 79.19: 1.76 GiB in use) and 1.96 GiB (8x H200, sglang PR 11716, Oct 2025, rank 0: 137.34 of 139.80 GiB free
# at the load: 2.46 GiB in use). FITTED: the middle of the two NVLink logs' memory in use beyond the 512 MiB context
# (1.26, 1.96 GiB), 1,649 MiB, -0.35 / +0.35 GiB on them; an ESTIMATE, --context-memory overrides the sum.
NCCL_NVLINK_BYTES = 1649 * MIB


def start_in_use_bytes(context_bytes: int, gpus: int, nvlink: bool) -> int:
    """The memory in use on a GPU when SGLang reads the free memory it sizes from: the CUDA context, plus at more than
    one GPU over NVLink the communicators' buffers (NCCL_NVLINK_BYTES; over PCIe they fit the context's figure)."""
    return context_bytes + (NCCL_NVLINK_BYTES if gpus > 1 and nvlink else 0)
_GIB_MIB = 1024
# The 20 - 35 GiB tier of the defaults below (A10, L4, RTX 4090): (chunked_prefill_size, decode CUDA-graph max batch
# size for tp < 4, for tp >= 4), as each release sets it (server_args.py _handle_gpu_memory_settings; from 0.5.20
# srt/arg_groups/memory_hook.py handle_gpu_memory_settings; read in the PyPI wheels)
MID_TIER_0_5_3 = (2048, 16, 80)  # 0.5.3 - 0.5.4
MID_TIER_0_5_5 = (2048, 24, 80)  # 0.5.5 - 0.5.19
MID_TIER_0_5_20 = (4096, 48, 160)  # 0.5.20 on
# (below this many MiB, chunked_prefill_size, decode max batch size for tp < 4, for tp >= 4); the 20 - 35 GiB row is
# the release's MID_TIER
_GPU_TIERS = ((20 * _GIB_MIB, 2048, 8, 8), (35 * _GIB_MIB, *MID_TIER_0_5_20), (60 * _GIB_MIB, 4096, 32, 160),
              (90 * _GIB_MIB, 8192, 256, 512), (160 * _GIB_MIB, 8192, 256, 512))
_PREFILL_GRAPH_STEPS = ((4, 32, 4), (48, 256, 16), (288, 512, 32), (576, 1024, 64), (1280, 4096, 256),
                        (4608, None, 512))


def capacity_mib(total: int, catalog_total: int, nvidia_smi_mib: int | None) -> int:
    """The GPU memory SGLang's defaults are a function of (utils/common.py get_device_memory_capacity: on CUDA
    get_nvgpu_memory_capacity, ``nvidia-smi --query-gpu=memory.total``, the minimum over the GPUs, MiB): the catalog's
    nvidia-smi figure where it has one (H100 80GB: 81,559 MiB, where torch sees 81,091), else the plan's total; a
    total the user gave (--gpu-memory) is taken as given."""
    if nvidia_smi_mib is not None and total == catalog_total:
        return nvidia_smi_mib
    return total // MIB


def gpu_defaults(gpu_mem_mib: int, tp: int, mid_tier: tuple[int, int, int] = MID_TIER_0_5_20) -> tuple[int, int]:
    """(chunked_prefill_size, decode cuda_graph_max_bs) by GPU memory (memory_hook.py handle_gpu_memory_settings)."""
    for limit, chunk, small_tp, big_tp in _GPU_TIERS:
        if gpu_mem_mib < limit:
            if limit == 35 * _GIB_MIB:
                chunk, small_tp, big_tp = mid_tier
            return chunk, small_tp if tp < 4 else big_tp
    return 16384, 512


def prefill_graph_sizes(max_bs: int) -> list[int]:
    """generate_prefill_cuda_graph_batch_sizes: 4..32/4, 48..256/16, 288..512/32, 576..1024/64, 1280..4096/256,
    4608../512, up to max_bs."""
    sizes = []
    for start, stop, step in _PREFILL_GRAPH_STEPS:
        sizes += range(start, min(stop or max_bs, max_bs) + 1, step)
    return sizes


def default_mem_fraction_static(gpu_mem_mib: int, tp: int, pp: int, mla: bool, prefill_graphs: bool = True,
                                mid_tier: tuple[int, int, int] = MID_TIER_0_5_20, spec_mib: int = 0) -> float:
    """0.5.3 on (memory_hook.py; server_args.py _handle_gpu_memory_settings before 0.5.20): reserved = 512 + 1.5 x
    max(chunked_prefill, 2048) + tp·pp/8 x 1024 + 2 x decode max_bs + prefill graphs (8 MiB each; MLA 1536), at
    least 10240 above 60 GiB, then + ``spec_mib`` (speculative_reserve_mib); mfs = round((gpu - reserved) / gpu, 3).
    ``prefill_graphs`` False: before 0.5.10
    piecewise (prefill) CUDA graphs are off by default (enable_piecewise_cuda_graph = False; 0.5.10:
    disable_piecewise_cuda_graph = False) and nothing is reserved for them."""
    chunk, max_bs = gpu_defaults(gpu_mem_mib, tp, mid_tier)
    graphs = 2 * max_bs + ((1536 if mla else 8 * len(prefill_graph_sizes(chunk))) if prefill_graphs else 0)
    reserved = 512 + 1.5 * max(chunk, 2048) + tp * pp / 8 * 1024 + graphs
    if gpu_mem_mib > 60 * _GIB_MIB:
        reserved = max(reserved, 10240)
    return round((gpu_mem_mib - reserved - spec_mib) / gpu_mem_mib, 3)


# The speculative-decoding reserve the default mem_fraction_static adds (MiB), by release (server_args.py
# _handle_gpu_memory_settings / __post_init__, "draft model and larger cuda graph buffers"; read in every wheel 0.4.8 -
# 0.5.23): "any" 0.4.8 - 0.5.2, 2 GiB for any algorithm (0.4.8 line 309, after the GPU tier); "eagle_2g" 0.5.4 - 0.5.9,
# after the 10 GiB floor: STANDALONE 6 GiB, NGRAM none, any other 2 GiB (0.5.9 lines 1051-1057); "eagle_4g" 0.5.10 -
# 0.5.13: the same with 4 GiB (0.5.10 lines 1316-1323); "" (0.5.14 on, and before 0.4.8): none
SPEC_RESERVES = ("", "any", "eagle_2g", "eagle_4g")


def speculative_reserve_mib(rule: str, algorithm: str | None) -> int:
    """The MiB the release's default mem_fraction_static keeps for speculative decoding (SPEC_RESERVES)."""
    if rule not in SPEC_RESERVES:
        raise ValueError(f"speculative_reserve_mib: rule {rule!r} is none of {SPEC_RESERVES}")
    if algorithm is None or not rule:
        return 0
    if rule == "any":
        return 2 * _GIB_MIB
    name = algorithm.upper()
    if name == "STANDALONE":
        return 6 * _GIB_MIB
    if name == "NGRAM":
        return 0
    return (2 if rule == "eagle_2g" else 4) * _GIB_MIB


# adjust_mem_fraction_for_vlm (server_args.py 0.4.10 - 0.5.19, arg_groups/memory_hook.py from 0.5.20; read in every
# wheel 0.4.10 - 0.5.23): a multimodal model's default mem_fraction_static x 0.95 x clamp(1 - 0.1 x (vision layers x
# vision hidden^2 / (24 x 1024^2) - 1), 0.8, 1.05), unrounded (post_capture_kv_sizing, 0.5.20+, is off by default:
# SGLANG_ENABLE_POST_CAPTURE_KV_SIZING False). Multimodal (configs/model_config.py is_multimodal): the architecture in
# multimodal_model_archs, or from 0.5.10 a config whose text config is a sub-config (has_multimodal_subconfig:
# LLaVA-NeXT), unless mm_disabled_models turns it off by default (every release 0.4.10 - 0.5.23: Gemma 3, Llama 4)
VLM_LISTED_ARCHITECTURES = frozenset({"Qwen2_5_VLForConditionalGeneration", "Mistral3ForConditionalGeneration",
                                      "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration"})
MM_DISABLED_ARCHITECTURES = frozenset({"Gemma3ForConditionalGeneration", "Llama4ForConditionalGeneration"})


def vlm_mem_fraction(mfs: float, vit_layers: int, vit_hidden: int) -> float:
    """adjust_mem_fraction_for_vlm: mfs x 0.95 x clamp(1 - 0.1 x (layers x hidden^2 / (24 x 1024^2) - 1), 0.8,
    1.05)."""
    ratio = vit_layers * vit_hidden**2 / (24 * 1024**2)
    return mfs * 0.95 * max(0.8, min(1.05, 1.0 - 0.1 * (ratio - 1.0)))


def mem_fraction_by_tp(tp: int) -> float:
    """SGLang 0.4.0 - 0.4.5 (srt/server_args.py ServerArgs.__post_init__): the default mem_fraction_static by TP size
    alone: 0.79 from 16 GPUs, 0.81 from 8, 0.85 from 4, 0.87 from 2, 0.88 on one."""
    return next(f for least, f in ((16, 0.79), (8, 0.81), (4, 0.85), (2, 0.87), (1, 0.88)) if tp >= least)


def mem_fraction_0_4_6(gpu_mem_mib: int, tp: int) -> float:
    """SGLang 0.4.6 (server_args.py __post_init__): by TP size up to 81,920 MiB, above it (gpu - 13 GiB) / gpu
    ("FIXME: more fine grained auto-selection polices"), unrounded."""
    return mem_fraction_by_tp(tp) if gpu_mem_mib <= 81920 else (gpu_mem_mib - 13 * _GIB_MIB) / gpu_mem_mib


def mem_fraction_0_4_7(gpu_mem_mib: int, tp: int, pp: int, cuda: bool) -> float:
    """SGLang 0.4.7 (server_args.py __post_init__): by tp x pp up to 81,920 MiB, else 0.88; then 0.79 above 180,000
    MiB on CUDA, and above 96 GiB min(m + 48 GiB x (1 - m) / gpu, (gpu - 18 GiB) / gpu) ("15 GB + additional 3GB
    for cuda graph"); no speculative decoding."""
    m = mem_fraction_by_tp(tp * pp) if gpu_mem_mib <= 81920 else 0.88
    if gpu_mem_mib > 180 * 1000 and cuda:
        return 0.79
    if gpu_mem_mib > 96 * _GIB_MIB:
        return min(m + 48 * _GIB_MIB * (1 - m) / gpu_mem_mib, (gpu_mem_mib - 18 * _GIB_MIB) / gpu_mem_mib)
    return m


# SGLang 0.4.8 - 0.5.2 (server_args.py __post_init__ / _handle_gpu_memory_settings, "Set mem fraction static"): the
# memory kept from weights and pool, in GiB, by GPU memory: (below this many MiB, GiB fixed, GiB per tp x pp GPU)
_RESERVED_TIERS_GIB = ((20 * _GIB_MIB, 2.8, 0.1), (35 * _GIB_MIB, 2.8, 0.1), (90 * _GIB_MIB, 9.5, 0.5),
                       (100 * _GIB_MIB, 12, 0.5), (160 * _GIB_MIB, 12, 0.5))


def mem_fraction_by_tier(gpu_mem_mib: int, tp: int, pp: int, spec_mib: int = 0) -> float:
    """SGLang 0.4.8 - 0.5.2: reserved = (fixed + tp·pp x per GPU) GiB of its GPU tier (32 GiB from 160 GiB: B200,
    MI300X); mfs = round((gpu - reserved) / gpu, 3). H100 80 GB (81,559 MiB), TP 1: (81559 - 10240) / 81559 =
    0.874, the value SGLang's docs notebooks print in June 2025. ``spec_mib``: speculative decoding's reserve
    (speculative_reserve_mib); no DP attention."""
    fixed, per_gpu = next(((f, g) for limit, f, g in _RESERVED_TIERS_GIB if gpu_mem_mib < limit), (32, 0))
    return round((gpu_mem_mib - (fixed + tp * pp * per_gpu) * _GIB_MIB - spec_mib) / gpu_mem_mib, 3)


def rope_cache_bytes(model_dtype_cache: int, model_dtype_bytes: int, fp32: bool) -> int:
    """The rotary cos/sin cache as SGLang holds it from the load on (srt/layers/rotary_embedding.py
    RotaryEmbedding.__init__: "cache needs to be in FP32 for numerical stability", ``if not _is_cuda: cache =
    cache.to(dtype)``; sglang PR 3134, first released in 0.4.2): float32 on CUDA, the model dtype elsewhere (ROCm) and
    before 0.4.2. ``model_dtype_cache``: the cache in the model dtype (kvplan.cost.parallel.rope_buffer_bytes). The
    pool is sized after the load, so the fp32 cache is in what it measures (Llama 3.1 8B, 131,072 x 128 positions:
    64 MiB, not 32)."""
    if not fp32 or model_dtype_bytes >= 4:
        return model_dtype_cache
    return model_dtype_cache // model_dtype_bytes * 4


# srt/models/qwen3_vl.py Qwen3VLMoeVisionModel.__init__ (Qwen3.5's tower too: qwen3_5.py imports it), from 0.5.7: the
# tower's own ``get_rope(head_size=head_dim, rotary_dim=head_dim // 2, max_position=8192, base=10000.0)``, a
# RotaryEmbedding with its own cos/sin cache of 8192 positions x head_dim // 2 (kept float32 on CUDA like the
# decoder's). 0.5.3 - 0.5.6 (Qwen3-VL's first releases) build transformers' ``Qwen2_5_VisionRotaryEmbedding(head_dim //
# 2)`` instead, which keeps no position cache (only head_dim // 4 float32 inverse frequencies, not counted, as the
# decoder's are not): SglangVersion.qwen3_vl_tower_rope. Read in every wheel 0.5.3 - 0.5.23.
QWEN3_VL_TOWER_ROPE_POSITIONS = 8192


def rope_buffers_model_dtype(card, dtype_bytes: int, tower_rope: bool) -> int:
    """The rotary cos/sin caches SGLang builds for ``card``, in the model dtype (``rope_cache_bytes`` makes them
    float32): the decoder's as vLLM's (kvplan.cost.parallel.rope_buffer_bytes: partial rotary width, scaling) but an
    M-RoPE cache unenlarged (MRotaryEmbedding.__init__ passes max_position_embeddings to RotaryEmbedding, where vLLM's
    is 4x: srt/layers/rotary_embedding.py 0.4.2 - 0.5.9, rotary_embedding/mrope.py 0.5.10 - 0.5.23, read in every
    wheel; 0.4.0 - 0.4.1 build vLLM's get_rope, vllm <= 0.6.4.post1, whose MRotaryEmbedding has no 4x either: read in
    that wheel), plus, with ``tower_rope`` (SglangVersion.qwen3_vl_tower_rope, 0.5.7+), a Qwen3-VL / Qwen3.5 tower's
    own (QWEN3_VL_TOWER_ROPE_POSITIONS)."""
    from kvplan.cost.parallel import rope_buffer_bytes

    tower = 0
    if tower_rope and card.vision is not None and card.vision.kind == "qwen3_vl":
        tower = QWEN3_VL_TOWER_ROPE_POSITIONS * (card.vision.hidden_size // card.vision.num_heads // 2) * dtype_bytes
    return rope_buffer_bytes(card, dtype_bytes, mrope_factor=1) + tower


def position_table_saving(card, tp: int, split: bool) -> int:
    """Parameters one rank holds fewer than kvplan.cost.parallel's (vLLM's) split: SGLang splits a Qwen3-VL / Qwen3.5
    tower's position table over TP (kvplan.cost.vision.vision_params ``split_positions``), vLLM keeps it whole.
    ``split``: SglangVersion.qwen3_vl_split_positions (srt/models/qwen3_vl.py Qwen3VLMoeVisionModel.__init__: a
    ``VocabParallelEmbedding`` from 0.5.8, an ``nn.Embedding`` whole on every rank 0.5.3 - 0.5.7; every wheel read)."""
    if not split or card.vision is None or card.vision.kind != "qwen3_vl" or tp == 1:
        return 0
    from kvplan.cost.vision import vision_params

    return (vision_params(card, hf=False, tp=tp).total
            - vision_params(card, hf=False, tp=tp, split_positions=True).total)


def pool_bytes(free_at_start: int, mem_fraction_static: float, weights: int) -> int:
    """kv_cache_configurator.py _profile_available_bytes: free - pre x (1 - mfs) = pre x mfs - weights."""
    if not 0 < mem_fraction_static <= 1:
        raise KvplanError(f"--mem-fraction-static: a fraction in (0, 1], got {mem_fraction_static}")
    return int(free_at_start * mem_fraction_static) - weights


# the trtllm_mha backend's page sizes (arg_groups/overrides.py _mla_backend_page_constraints, 0.5.23; server_args.py
# before 0.5.15, read in 0.5.1 - 0.5.14): 16, 32 or 64 from 0.5.1 (0.4.10 has no trtllm_mha; 0.5.0 not read) through
# 0.5.16, 128 added in 0.5.17 (read in every wheel 0.5.10 - 0.5.23); any other becomes 64 ("TensorRT-LLM MHA only
# supports page_size of 16, 32 or 64, changing page_size from None to 64")
TRTLLM_MHA_PAGES_0_5_1 = (16, 32, 64)
TRTLLM_MHA_PAGES_0_5_17 = (16, 32, 64, 128)
TRTLLM_MHA_PAGE = 64
# MLA models on SM100 whose architecture is in the release's DeepSeek-family branch get trtllm_mla when no attention
# backend is given, unless the checkpoint is a DSA/NSA one (index_topk in its config: is_deepseek_nsa, from 0.5.13
# is_deepseek_dsa; kvplan has no DSA model, so a card is taken as dense MLA): server_args.py
# _handle_model_specific_adjustments ("Use trtllm_mla as attention backend on sm100 for DeepseekV3ForCausalLM", the
# message whatever the architecture), 0.5.4 - 0.5.14; arg_groups/overrides.py _deepseek_family_overrides 0.5.15 -
# 0.5.18; arg_groups/model_overrides/deepseek_v2.py _deepseek_family_overrides 0.5.19 - 0.5.23 (read in every wheel
# 0.5.4 - 0.5.23; 0.5.1 has no such branch, 0.5.2 - 0.5.3 not read: the 0.5.3-0.5.4 range follows 0.5.4). The branch's
# architectures by release: DeepseekV3ForCausalLM from 0.5.4 (deepseek-v3, deepseek-v3-fp8, kimi-k2-instruct: the
# only bundled cards it takes; DeepseekV2ForCausalLM is never in it and keeps SGLang's MLA default, flashinfer on
# SM100, page size 1); MistralLarge3ForCausalLM and PixtralForConditionalGeneration from 0.5.7;
# KimiK25ForConditionalGeneration and GlmMoeDsaForCausalLM from 0.5.9; DeepseekV32ForCausalLM from 0.5.12;
# LongcatFlashForCausalLM(NextN) from 0.5.16; Dots3NoteForCausalLM from 0.5.19; Glm5NextForConditionalGeneration and
# HYV4ForCausalLM(NextN) from 0.5.20. Kimi-K3 (KimiK3ForConditionalGeneration) has its own override from 0.5.17
# (overrides.py / model_overrides/kimi_k3.py _kimi_k3_overrides: trtllm_mla for prefill and decode on SM 10.0/10.3
# without DCP), also 32- or 64-token pages. A range takes its newest release's list. The branch sets trtllm_mla for
# any model of those architectures; kvplan gives it to MLA cards only. The trtllm_mla pages hold 32 or 64 tokens, any
# other page size becoming 64 ("TensorRT-LLM MLA only supports page_size of 32 or 64, changing page_size from None to
# 64": server_args.py _handle_attention_backend_compatibility up to 0.5.14, arg_groups/overrides.py
# _mla_backend_page_constraints 0.5.15 - 0.5.23, the same in every wheel read). No release picks flashmla (64-token
# pages), cutlass_mla (128), cutedsl_mla or tokenspeed_mla (32/64) by default, and the MLA default elsewhere (fa3 on
# Hopper, flashinfer on SM100, triton otherwise: _get_default_attn_backend, model_override_base.py from 0.5.19) keeps
# page size 1; the DSA branch's own 64-token pages ("Setting page size to 64 for DeepSeek NSA/DSA", 0.5.4+) are not
# modelled (no DSA cards).
TRTLLM_MLA_ARCHITECTURES_0_5_4 = frozenset({"DeepseekV3ForCausalLM"})
TRTLLM_MLA_ARCHITECTURES_0_5_7 = TRTLLM_MLA_ARCHITECTURES_0_5_4 | {"MistralLarge3ForCausalLM",
                                                                  "PixtralForConditionalGeneration"}
TRTLLM_MLA_ARCHITECTURES_0_5_9 = TRTLLM_MLA_ARCHITECTURES_0_5_7 | {"KimiK25ForConditionalGeneration",
                                                                  "GlmMoeDsaForCausalLM"}
TRTLLM_MLA_ARCHITECTURES_0_5_12 = TRTLLM_MLA_ARCHITECTURES_0_5_9 | {"DeepseekV32ForCausalLM"}
TRTLLM_MLA_ARCHITECTURES_0_5_16 = TRTLLM_MLA_ARCHITECTURES_0_5_12 | {"LongcatFlashForCausalLM",
                                                                    "LongcatFlashForCausalLMNextN"}
TRTLLM_MLA_ARCHITECTURES_0_5_17 = TRTLLM_MLA_ARCHITECTURES_0_5_16 | {"KimiK3ForConditionalGeneration"}
TRTLLM_MLA_ARCHITECTURES_0_5_19 = TRTLLM_MLA_ARCHITECTURES_0_5_17 | {"Dots3NoteForCausalLM"}
TRTLLM_MLA_ARCHITECTURES_0_5_20 = TRTLLM_MLA_ARCHITECTURES_0_5_19 | {"Glm5NextForConditionalGeneration",
                                                                    "HYV4ForCausalLM", "HYV4ForCausalLMNextN"}
# the first release whose branch names each architecture (for the plan's note)
TRTLLM_MLA_SINCE = MappingProxyType({
    **dict.fromkeys(TRTLLM_MLA_ARCHITECTURES_0_5_4, "0.5.4"),
    **dict.fromkeys(TRTLLM_MLA_ARCHITECTURES_0_5_7 - TRTLLM_MLA_ARCHITECTURES_0_5_4, "0.5.7"),
    **dict.fromkeys(TRTLLM_MLA_ARCHITECTURES_0_5_9 - TRTLLM_MLA_ARCHITECTURES_0_5_7, "0.5.9"),
    **dict.fromkeys(TRTLLM_MLA_ARCHITECTURES_0_5_12 - TRTLLM_MLA_ARCHITECTURES_0_5_9, "0.5.12"),
    **dict.fromkeys(TRTLLM_MLA_ARCHITECTURES_0_5_16 - TRTLLM_MLA_ARCHITECTURES_0_5_12, "0.5.16"),
    **dict.fromkeys(TRTLLM_MLA_ARCHITECTURES_0_5_17 - TRTLLM_MLA_ARCHITECTURES_0_5_16, "0.5.17"),
    **dict.fromkeys(TRTLLM_MLA_ARCHITECTURES_0_5_19 - TRTLLM_MLA_ARCHITECTURES_0_5_17, "0.5.19"),
    **dict.fromkeys(TRTLLM_MLA_ARCHITECTURES_0_5_20 - TRTLLM_MLA_ARCHITECTURES_0_5_19, "0.5.20"),
})
TRTLLM_MLA_PAGES = (32, 64)
# Before 0.5.7 trtllm_mha was the default on SM100 only for some families, each in server_args.py
# _handle_model_specific_adjustments (model_specific_adjustments in 0.5.1) when no attention backend is given:
# GptOssForCausalLM from 0.5.1, Olmo2ForCausalLM from 0.5.4 (its branch is absent in 0.5.1), Llama 4 ('"Llama4" in
# model_arch') from 0.5.5 (0.5.4 asserts fa3, aiter or triton for it). Read in 0.5.1, 0.5.4, 0.5.5, 0.5.6.
TRTLLM_MHA_ARCHITECTURES_0_5_1 = frozenset({"GptOssForCausalLM"})
TRTLLM_MHA_ARCHITECTURES_0_5_4 = TRTLLM_MHA_ARCHITECTURES_0_5_1 | {"Olmo2ForCausalLM"}
TRTLLM_MHA_ARCHITECTURES_0_5_5 = TRTLLM_MHA_ARCHITECTURES_0_5_4 | {"Llama4ForConditionalGeneration",
                                                                  "Llama4ForCausalLM"}
# From 0.5.7 trtllm_mha is the default for every model without MLA on SM100 (trtllm_mha_default), except where the
# release's _handle_model_specific_adjustments picks another backend first on SM100 (with the radix cache on, its
# default): 0.5.7 - 0.5.8 NemotronHForCausalLM (flashinfer), Qwen3NextForCausalLM, FalconH1ForCausalLM,
# JetNemotronForCausalLM and JetVLMForConditionalGeneration (triton); 0.5.9 (_handle_mamba_radix_cache's
# sm100_default_attention_backend) adds Qwen3.5 (triton), GraniteMoeHybridForCausalLM with mamba layers (triton) and
# Lfm2ForCausalLM (flashinfer)
TRTLLM_MHA_EXCEPTIONS_0_5_7 = frozenset({"NemotronHForCausalLM", "Qwen3NextForCausalLM", "FalconH1ForCausalLM",
                                         "JetNemotronForCausalLM", "JetVLMForConditionalGeneration"})
TRTLLM_MHA_EXCEPTIONS_0_5_9 = TRTLLM_MHA_EXCEPTIONS_0_5_7 | {
    "Qwen3_5MoeForConditionalGeneration", "Qwen3_5ForConditionalGeneration", "GraniteMoeHybridForCausalLM",
    "Lfm2ForCausalLM"}
# From 0.5.10 the Qwen3-Next / Qwen3.5 branch picks triton only when trtllm_mha would need page size 1: with the radix
# cache on, no mamba extra buffer (mamba_scheduler_strategy "auto" becomes no_buffer, 0.5.10 - 0.5.14; from 0.5.15 the
# strategy is still "auto" when the branch reads it) and no speculative decoding; with speculative decoding it keeps
# trtllm_mha (server_args.py _handle_model_specific_adjustments 0.5.10 - 0.5.14, arg_groups/overrides.py
# _qwen3_5_hybrid_overrides 0.5.15 - 0.5.18, arg_groups/model_overrides/qwen3_5.py from 0.5.19). Each range below takes
# its newest release's lists (read in every wheel 0.5.10 - 0.5.23): the first set picks another backend on SM100
# always, the second unless speculative decoding is on.
TRTLLM_MHA_EXCEPTIONS_0_5_10 = frozenset({
    "NemotronHForCausalLM", "FalconH1ForCausalLM", "JetNemotronForCausalLM", "JetVLMForConditionalGeneration",
    "GraniteMoeHybridForCausalLM", "Lfm2ForCausalLM"})
TRTLLM_MHA_SPEC_EXCEPTIONS_0_5_10 = frozenset({"Qwen3NextForCausalLM", "Qwen3_5MoeForConditionalGeneration",
                                               "Qwen3_5ForConditionalGeneration"})
# 0.5.12 adds MiniCPM-V 4.6 (triton) and Intern-S2-Preview (the Qwen3.5 rule), 0.5.13 NemotronHPuzzleForCausalLM
# (flashinfer, as Nemotron-H); Granite hybrids move from triton to flashinfer in 0.5.13 (still not trtllm_mha)
TRTLLM_MHA_EXCEPTIONS_0_5_11 = TRTLLM_MHA_EXCEPTIONS_0_5_10 | {"MiniCPMV4_6ForConditionalGeneration",
                                                              "NemotronHPuzzleForCausalLM"}
TRTLLM_MHA_SPEC_EXCEPTIONS_0_5_11 = TRTLLM_MHA_SPEC_EXCEPTIONS_0_5_10 | {"InternS2PreviewForConditionalGeneration"}
# 0.5.17 adds Lfm2MoeForCausalLM (flashinfer), 0.5.18 Intern-S2-Mobius (the Qwen3.5 rule)
TRTLLM_MHA_EXCEPTIONS_0_5_17 = TRTLLM_MHA_EXCEPTIONS_0_5_11 | {"Lfm2MoeForCausalLM"}
TRTLLM_MHA_SPEC_EXCEPTIONS_0_5_17 = TRTLLM_MHA_SPEC_EXCEPTIONS_0_5_11 | {"InternS2MobiusForConditionalGeneration"}
# 0.5.19 (model_overrides/nemotron_h.py): Nemotron-H takes trtllm_mha on SM100
TRTLLM_MHA_EXCEPTIONS_0_5_19 = TRTLLM_MHA_EXCEPTIONS_0_5_17 - {"NemotronHForCausalLM", "NemotronHPuzzleForCausalLM"}
# 0.5.20 adds Qwen4-Exp (model_overrides/qwen4_exp.py: the Qwen3.5 rule)
TRTLLM_MHA_SPEC_EXCEPTIONS_0_5_20 = TRTLLM_MHA_SPEC_EXCEPTIONS_0_5_17 | {"Qwen4ExpForConditionalGeneration"}


def sm100(vendor: str, compute_capability: float | None) -> bool:
    """An NVIDIA GPU of compute capability 10.x (B200, B300): SGLang's is_sm100_supported (major == 10, CUDA 12.8+)."""
    return vendor == "NVIDIA" and compute_capability is not None and 10 <= compute_capability < 11


def trtllm_mha_default(vendor: str, compute_capability: float | None, mla: bool, speculative: bool,
                       eagle_topk: int | None) -> bool:
    """SGLang 0.5.7+'s default attention backend is trtllm_mha: an NVIDIA SM100 GPU (compute capability 10.x:
    B200, B300), a model without MLA, and no speculative decoding unless its top-k is given as 1
    (server_args.py _handle_attention_backend_compatibility, 0.5.7 - 0.5.9 "1.2 Use trtllm_mha for SM100/SM103";
    _get_default_attn_backend from 0.5.10: is_sm100_supported() and is_no_spec_infer_or_topk_one and
    (speculative_algorithm is None or speculative_eagle_topk is not None))."""
    if not sm100(vendor, compute_capability) or mla:
        return False
    return not speculative or eagle_topk == 1


def max_total_tokens(pool: int, cell_size: int, page_size: int) -> int:
    """pool_configurator.py: pool // cell_size, rounded down to a multiple of page_size."""
    return max(0, pool) // cell_size // page_size * page_size


# Hybrid sliding-window pools (read in the PyPI wheels 0.4.8 - 0.5.23): the architectures a release gives a hybrid SWA
# pool keep their sliding-window layers' K/V in a pool of their own, swa_full_tokens_ratio (default 0.8, in (0, 1]) as
# many tokens as the full-attention layers' pool, unless --disable-hybrid-swa-memory. Which architectures, release by
# release (srt/configs/model_config.py, srt/model_executor/model_runner.py, srt/server_args.py):
# - 0.4.8: none. 0.4.9: none by default (model_config.py is_hybrid_model: Llama 4 only with --hybrid-kvcache-ratio,
#   which kvplan does not take).
# - 0.4.10: every model whose SGLang class has get_attention_sliding_window_size (> 0) and is not Llama 4
#   (model_runner.py ModelRunner.__init__, "Check if the model is using hybrid SWA"): Gemma 2, Gemma 3, Gemma 3n.
# - 0.5.1 - 0.5.6: the same rule, but server_args.py model_specific_adjustments / _handle_model_specific_adjustments
#   sets disable_hybrid_swa_memory for every class that has it (GptOssForCausalLM, Gemma 2/3/3n, from 0.5.4
#   Olmo2ForCausalLM): none by default.
# - 0.5.7: model_config.py is_hybrid_model: MiMo-V2-Flash (and its MTP) only (the model_runner rule is gone; 0.5.7
#   keeps their pool hybrid under --disable-hybrid-swa-memory too, which kvplan does not model).
# - 0.5.8 - 0.5.9: model_config.py is_hybrid_swa_model (Llama 4, gpt-oss, MiMo-V2; 0.5.9 adds Step-3.5, the 0.5.10
#   list); server_args.py keeps gpt-oss single under trtllm_mha (0.5.8 - 0.5.9) and speculative decoding (0.5.8).
# - 0.5.10+: is_hybrid_swa_model, below.
SWA_LAYER_KINDS = frozenset({"sliding", "chunked"})  # get_hybrid_layer_ids: Llama 4's chunked layers are its SWA ones
DEFAULT_SWA_FULL_TOKENS_RATIO = 0.8  # server_args / arg_groups/fields/schedule.py swa_full_tokens_ratio fallback
# 0.4.10: the classes with get_attention_sliding_window_size (models/gemma2.py, gemma3_causal.py, gemma3_mm.py,
# gemma3n_causal.py, gemma3n_mm.py: their EntryClass)
HYBRID_SWA_ARCHITECTURES_0_4_10 = frozenset({"Gemma2ForCausalLM", "Gemma3ForCausalLM",
                                             "Gemma3ForConditionalGeneration", "Gemma3nForCausalLM",
                                             "Gemma3nForConditionalGeneration"})
HYBRID_SWA_ARCHITECTURES_0_5_7 = frozenset({"MiMoV2FlashForCausalLM", "MiMoV2MTP"})
HYBRID_SWA_ARCHITECTURES_0_5_8 = HYBRID_SWA_ARCHITECTURES_0_5_7 | {"Llama4ForConditionalGeneration",
                                                                   "GptOssForCausalLM"}
HYBRID_SWA_ARCHITECTURES_0_5_10 = HYBRID_SWA_ARCHITECTURES_0_5_8 | {"Step3p5ForCausalLM", "Step3p5MTP"}  # and 0.5.9
# 0.5.11 adds MIMO_V2_MODEL_ARCHS' MiMoV2ForCausalLM and Gemma 4, 0.5.12 DeepSeek V4 and Laguna (only with a sliding
# window), 0.5.13 Step3p7 and Gemma4Unified, 0.5.15 UnlimitedOCR (the 0.5.11 - 0.5.15 range takes 0.5.15's list)
HYBRID_SWA_ARCHITECTURES_0_5_11 = HYBRID_SWA_ARCHITECTURES_0_5_10 | {
    "MiMoV2ForCausalLM", "Gemma4ForCausalLM", "Gemma4ForConditionalGeneration", "Gemma4UnifiedForConditionalGeneration",
    "DeepseekV4ForCausalLM", "DeepseekV4ForCausalLMNextN", "Step3p7ForConditionalGeneration", "LagunaForCausalLM",
    "UnlimitedOCRForCausalLM"}
# 0.5.16 adds DeepSeek V4 DSpark, Mellum and Inkling; 0.5.18 MuseGlimmer (the 0.5.17 - 0.5.18 range takes 0.5.18's)
HYBRID_SWA_ARCHITECTURES_0_5_16 = HYBRID_SWA_ARCHITECTURES_0_5_11 | {
    "DeepseekV4ForCausalLMDSpark", "MellumForCausalLM", "InklingForConditionalGeneration",
    "InklingForConditionalGenerationMTP"}
HYBRID_SWA_ARCHITECTURES_0_5_17 = HYBRID_SWA_ARCHITECTURES_0_5_16 | {"MuseGlimmerForCausalLM",
                                                                     "MuseGlimmerForConditionalGeneration"}
# 0.5.19 adds SWA_SINK_ARCHS' Granite SWA models
HYBRID_SWA_ARCHITECTURES_0_5_19 = HYBRID_SWA_ARCHITECTURES_0_5_17 | {"GraniteSWAForCausalLM",
                                                                     "GraniteMoeSWAForCausalLM"}
# 0.5.21 adds IQuest Q1, BailingMMNative (with its multi-gate config) and DiffusionGemma, 0.5.22 EmbeddingGemma2,
# 0.5.23 Beam (only with sliding layers): 0.5.23's list
HYBRID_SWA_ARCHITECTURES_0_5_20 = HYBRID_SWA_ARCHITECTURES_0_5_19 | {
    "IQuestQ1ForCausalLM", "IQuestQ1MTP", "BailingMMNativeForConditionalGeneration", "BeamForCausalLM",
    "EmbeddingGemma2Model", "DiffusionGemmaForBlockDiffusion"}
# How the pool is split into the full layers' tokens F and the sliding layers' (serving_sglang.hybrid_swa_tokens)
SWA_SPLITS = {
    # 0.5.11+ model_executor/pool_configurator.py HybridSWAPoolConfigurator
    "cell": "pool_configurator.py HybridSWAPoolConfigurator: full = pool // (full layers' bytes + ratio x sliding "
            "layers' bytes per token)",
    # 0.5.9 model_runner_kv_cache_mixin.py set_num_tokens_hybrid_swa, 0.5.10 _resolve_hybrid_swa_tokens
    "capacity": "model_runner_kv_cache_mixin.py: full = int(C x (full + sliding layers' bytes) / (full layers' "
                "bytes + ratio x sliding layers' bytes)), C the single pool's tokens",
    # 0.4.10 - 0.5.6 model_runner.py set_num_token_hybrid, 0.5.7 - 0.5.8 model_runner_kv_cache_mixin.py
    # set_num_tokens_hybrid_swa ("assume all layers have the same number of tokens"). 0.4.10 - 0.5.6 do not round
    # the two pools to a page, but build the hybrid allocator (SWATokenToKVPoolAllocator) for page size 1 only
    # (model_runner.py init_memory_pool), where rounding changes nothing
    "layers": "set_num_token(s)_hybrid(_swa): full = int(C x layers / (ratio x sliding layers + full layers)), C the "
              "single pool's tokens",
}


def hybrid_swa_tokens(pool: int, full_bytes: int, swa_bytes: int, ratio: float, page_size: int, split: str = "cell",
                      layers: tuple[int, int] = (0, 0)) -> tuple[int, int]:
    """(full_layer_tokens, swa_layer_tokens) of SGLang's hybrid SWA pool, ``full_bytes`` / ``swa_bytes`` one token of
    all the rank's full-attention / sliding-window layers, ``layers`` the model's (full, sliding) layer counts
    (SWA_SPLITS). ``split`` "cell" (0.5.11+ HybridSWAPoolConfigurator): full = int(pool // (F + ratio x S)), a float
    cell. The others first take the single pool's token capacity C = pool // (F + S), rounded down to a page
    (init_memory_pool / 0.5.10 _resolve_token_capacity); "capacity" (0.5.9 - 0.5.10): full = int(C x (F + S) /
    (F + ratio x S)); "layers" (0.4.10 - 0.5.8): full = int(C x (full + sliding layers) / (ratio x sliding layers +
    full layers)). Then swa = int(full x ratio), both rounded down to a page ("Use sliding window memory pool.
    full_layer_tokens=..., swa_layer_tokens=..."). SGLang's own float arithmetic, kept as it is written."""
    if split not in SWA_SPLITS:
        raise ValueError(f"hybrid_swa_tokens: split {split!r} is none of {', '.join(SWA_SPLITS)}")
    pool = max(0, pool)
    if split == "cell":
        full = int(pool // (full_bytes + ratio * swa_bytes))
    else:
        capacity = pool // (full_bytes + swa_bytes) // page_size * page_size
        if split == "capacity":
            full = int(capacity * (full_bytes + swa_bytes) / (full_bytes + ratio * swa_bytes))
        else:
            n_full, n_swa = layers
            full = int(capacity * (n_full + n_swa) / (ratio * n_swa + n_full))
    full = full // page_size * page_size
    return full, int(full * ratio) // page_size * page_size


# What the scheduler charges a request in the sliding-window pool at admission, release by release (read in every
# wheel 0.4.10 - 0.5.23; swa_tokens_per_request)
SWA_CHARGES = {
    # 0.4.10 - 0.5.10 managers/schedule_policy.py PrefillAdder: rem_total_tokens is the min of both pools' available
    # + evictable tokens, against which add_one_req charges extend_input_len + min(max_new_tokens,
    # CLIP_MAX_NEW_TOKENS)
    "whole": "its whole length (PrefillAdder.rem_total_tokens, the smaller of the two pools' free tokens)",
    # 0.5.11 - 0.5.16 PrefillAdder._swa_budget_for_req: max(alloc, sliding_window_size) + page_size (0.5.16 writes it
    # max(alloc - window, 0) + _swa_reserved_tokens, the window + a page: the same)
    "window_floor": "PrefillAdder._swa_budget_for_req: max(min(extend, chunked_prefill_size), window) + a page",
    # 0.5.17 - 0.5.20 _swa_budget_for_req, from 0.5.21 mem_cache/prefill_budget.py estimate_swa_kv_tokens:
    # max(alloc - window, 0) + min(extend + max_new_tokens, window) + page_size
    "window": "_swa_budget_for_req / prefill_budget.py estimate_swa_kv_tokens: max(min(extend, chunked_prefill_size) "
              "- window, 0) + min(extend, window) + a page",
}


def swa_tokens_per_request(max_model_len: int, window: int, page_size: int, charge: str = "window",
                           chunk: int | None = None) -> int:
    """The sliding-window pool's tokens the scheduler charges one request of max_model_len at admission (SWA_CHARGES),
    its prompt max_model_len rounded up to a page (``extend``: _update_prefill_budget charges ceil_paged_tokens),
    nothing cached, ``chunk`` the chunked_prefill_size (None: chunked prefill off) of which ``alloc`` = min(extend,
    chunk) is allocated in the first pass. "whole" (0.4.10 - 0.5.10): max_model_len, as in the full pool;
    "window_floor" (0.5.11 - 0.5.16): max(alloc, window) + page_size; "window" (0.5.17+): max(alloc - window, 0) +
    min(extend, window) + page_size. Decode then frees what leaves the window (ScheduleBatch.maybe_evict_swa), so
    a running request keeps about its window; the charge is what must be free to admit it. ``chunk`` 0: the window a
    request keeps with no prefill chunk (the release's _swa_reserved_tokens, 0.5.16+)."""
    if charge not in SWA_CHARGES:
        raise ValueError(f"swa_tokens_per_request: charge {charge!r} is none of {', '.join(SWA_CHARGES)}")
    if charge == "whole":
        return max_model_len
    extend = -(-max_model_len // page_size) * page_size
    alloc = extend if chunk is None else min(extend, chunk)
    if charge == "window_floor":
        return max(alloc, window) + page_size
    return max(alloc - window, 0) + min(extend, window) + page_size


def max_running_requests(tokens: int, context_len: int) -> int:
    """resolve_max_num_reqs: min(clamp(int(tokens / context_len x 512), 2048, 4096), tokens // 2)."""
    return min(_estimated_requests(tokens, context_len), tokens // 2)


def _estimated_requests(tokens: int, context_len: int) -> int:
    return max(2048, min(4096, int(tokens / context_len * 512)))


# Speculative decoding without --max-running-requests: SGLang sets it to 48 ("Max running requests is reset to 48 for
# speculative decoding") before the scheduler reads it, which then treats it as given (GIVEN_RUNNING_RULES): EAGLE,
# EAGLE3 and NEXTN (run as EAGLE) in server_args.py ServerArgs.__post_init__ 0.4.8 (line 451) - 0.5.2; STANDALONE and
# NGRAM too from 0.5.4 (0.5.4 - 0.5.12 server_args.py; 0.5.13 - 0.5.23 arg_groups/speculative_hook.py
# _handle_eagle_family, _handle_ngram)
SPEC_MAX_RUNNING_REQUESTS = 48

# auto_choose_speculative_params (server_args.py 0.4.8 - 0.5.13, arg_groups/speculative_hook.py
# _auto_choose_speculative_params 0.5.14 - 0.5.23): (speculative_num_steps, speculative_eagle_topk,
# speculative_num_draft_tokens) for the EAGLE family when --speculative-num-steps is not given, by the target's
# architectures[0]: (3, 1, 4) for the listed ones, (5, 4, 8) for LlamaForCausalLM, Grok1ForCausalLM and
# Grok1VForCausalLM, and for every other architecture (5, 4, 8) up to 0.5.7 and (3, 1, 4) from 0.5.8; STANDALONE
# (0.5.4+) always (3, 1, 4). The list grows by release (read in 0.4.8, 0.4.9, 0.4.10, 0.5.1, 0.5.4 - 0.5.23; 0.5.3
# taken as 0.5.4, 0.4.0 - 0.4.7 as 0.4.8):
_SPEC_3_STEPS_0_4 = frozenset({"DeepseekV3ForCausalLM", "DeepseekV2ForCausalLM"})
_SPEC_3_STEPS_0_5_0 = _SPEC_3_STEPS_0_4 | {"GptOssForCausalLM"}
_SPEC_3_STEPS_0_5_3 = _SPEC_3_STEPS_0_5_0 | {"DeepseekV32ForCausalLM", "BailingMoeForCausalLM", "BailingMoeV2ForCausalLM"}
_SPEC_3_STEPS_0_5_7 = _SPEC_3_STEPS_0_5_3 | {"Glm4MoeForCausalLM", "MistralLarge3ForCausalLM",
                                             "PixtralForConditionalGeneration", "MiMoV2FlashForCausalLM"}
SPEC_3_STEPS = (((0, 5, 7), _SPEC_3_STEPS_0_5_7), ((0, 5, 3), _SPEC_3_STEPS_0_5_3), ((0, 5, 0), _SPEC_3_STEPS_0_5_0),
                ((0, 0, 0), _SPEC_3_STEPS_0_4))
SPEC_5_STEPS = frozenset({"LlamaForCausalLM", "Grok1ForCausalLM", "Grok1VForCausalLM"})
SPEC_ELSE_3_STEPS_FROM = (0, 5, 8)


def auto_speculative_params(release: tuple[int, int, int], arch: str | None, algorithm: str) -> tuple[int, int, int]:
    """SGLang's auto-chosen (num_steps, eagle_topk, num_draft_tokens) for ``algorithm`` (EAGLE, EAGLE3, NEXTN,
    STANDALONE) on a target of architecture ``arch`` in ``release`` (the first release of kvplan's range)."""
    if algorithm.upper() == "STANDALONE":
        return 3, 1, 4
    if arch in SPEC_5_STEPS:
        return 5, 4, 8
    listed = next(archs for first, archs in SPEC_3_STEPS if release >= first)
    return (3, 1, 4) if arch in listed or release >= SPEC_ELSE_3_STEPS_FROM else (5, 4, 8)


# --max-running-requests N given (one replica, no DP attention), by release:
# - "as_given" (0.4.8 - 0.5.9; read in 0.4.8, 0.5.4, 0.5.7, 0.5.9): init_memory_pool(max_num_reqs=N) sizes the
#   ReqToTokenPool at N and tp_worker.py / model_runner.py take min(N // dp, req_to_token_pool.size) = N: no token cap;
# - "estimate" (0.5.10 - 0.5.13; model_runner_kv_cache_mixin.py _resolve_max_num_reqs): min(N // dp, the estimate
#   clamp(int(tokens / context_len x 512), 2048, 4096));
# - "half_tokens" (0.5.14+; 0.5.14 mixin, 0.5.17+ mem_cache/kv_cache_configurator.py resolve_max_num_reqs):
#   min(max(1, N // attn_dp_size), tokens // 2).
# A state-space hybrid's cap (max_mamba_cache_size // ratio) applies after each.
GIVEN_RUNNING_RULES = ("as_given", "estimate", "half_tokens")


def given_running_requests(n: int, tokens: int, context_len: int, rule: str) -> int:
    """SGLang's max_running_requests for --max-running-requests ``n`` under ``rule`` (GIVEN_RUNNING_RULES)."""
    if rule == "as_given":
        return n
    if rule == "estimate":
        return min(n, _estimated_requests(tokens, context_len))
    return min(max(1, n), tokens // 2)


def pp_partition_sizes(num_layers: int, pp: int) -> list[int]:
    """srt/distributed/utils.py get_pp_indices: [L//pp]*pp, the remainder to the LAST r stages (the last included)."""
    r = num_layers % pp
    return [num_layers // pp + (1 if i >= pp - r else 0) for i in range(pp)]


DEFAULT_MAMBA_FULL_MEMORY_RATIO = 0.9  # server_args.py mamba_full_memory_ratio
# configs/mamba_utils.py Mamba2StateShape (NemotronH, FalconH1, Qwen3Next); LFM2's short convolutions (configs/lfm2.py
# Lfm2Config.mamba2_cache_params: a conv state of hidden x (L_cache - 1) per layer, no temporal state: the log prints
# "Mamba Cache is allocated. max_mamba_cache_size: N, conv_state size: X GB, ssm_state size: 0.00GB")
SSM_STATE_KINDS = ("mamba2", "gated_deltanet", "short_conv")
CONV_STATE_BYTES, SSM_STATE_BYTES = 2, 4  # mamba2_state_dtype: conv bfloat16 (SGLANG_MAMBA_CONV_DTYPE), SSM float32
#                                           unless the config's mamba_ssm_dtype or SGLANG_MAMBA_SSM_DTYPE says otherwise


def state_bytes_per_request(conv_elems: int, ssm_elems: int) -> int:
    """BaseLinearStateParams.mamba_cache_per_req: (conv numel x conv itemsize + temporal numel x temporal itemsize)
    summed over the rank's state layers (the shapes: Mamba2StateShape.create, groups extended like vLLM's)."""
    return conv_elems * CONV_STATE_BYTES + ssm_elems * SSM_STATE_BYTES


def mamba_split(pool: int, per_request: int, ratio: float = DEFAULT_MAMBA_FULL_MEMORY_RATIO,
                padding_slot: bool = False) -> tuple[int, int]:
    """(bytes left for the K/V token pool, max_mamba_cache_size) (kv_cache_configurator.py _handle_max_mamba_cache,
    no speculative decoding, no --max-mamba-cache-size): mamba budget = rest x ratio / (1 + ratio); slots =
    int(budget // per_req); the K/V pool gets rest - slots x per_req. ``padding_slot`` (0.5.17+, read in every wheel
    0.5.16 - 0.5.23; 0.5.16 and before: int(budget // per_req)): slots = int((budget - per_slot) // per_slot) and the
    pool holds slots + 1 ("+1: the pool's padding slot is allocated alongside the request slots"; no ReplaySSM
    ring, the default), so the K/V pool gets rest - (slots + 1) x per_req."""
    if per_request <= 0:
        return pool, 0
    budget = max(0, pool) * ratio / (1 + ratio)
    if padding_slot:
        slots = int((budget - per_request) // per_request)
        return pool - (slots + 1) * per_request, slots
    slots = int(budget // per_request)
    return pool - slots * per_request, slots


# resolve_max_num_reqs (model_runner.py 0.5.4 - 0.5.6, model_runner_kv_cache_mixin.py 0.5.7 - 0.5.15,
# mem_cache/kv_cache_configurator.py from 0.5.16; the constant read in every wheel 0.5.4 - 0.5.23, absent in 0.5.1):
# with state layers (mambaish_config) max_running_requests = min(..., max_mamba_cache_size // ratio), ratio
# MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO = 3 with the radix cache (on by default), 1 without
# (--disable-radix-cache, or the release turning it off: MAMBA_RADIX_OFF_ARCHITECTURES_0_5_4); from 0.5.10
# (_calculate_mamba_ratio) the mamba extra_buffer strategy adds its tracking slots (mamba_tracking_slots)
MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO = 3


def mamba_ratio(radix_cache: bool = True, tracking_slots: int = 0) -> int:
    """resolve_max_num_reqs' divisor of the state slots, which caps max_running_requests for a model with state
    layers: 3 + the extra_buffer tracking slots with the radix cache (_calculate_mamba_ratio, 0.5.10+), 1 without it."""
    return MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO + tracking_slots if radix_cache else 1


# The mamba "extra_buffer" strategy (--mamba-scheduler-strategy 0.5.7 - 0.5.13, --mamba-radix-cache-strategy from
# 0.5.14; default "auto"): each request takes, beside its own state slot, ping-pong track buffers from the same slot
# allocator (mem_cache/memory_pool.py HybridReqToTokenPool._alloc_ping_pong_buffer: mamba_ping_pong_track_buffer_size
# = 2 with the overlap scheduler, 1 without; read in 0.5.14 and 0.5.23), and _calculate_mamba_ratio adds as many to
# the running cap's ratio (MAMBA_CACHE_V2_ADDITIONAL_RATIO_OVERLAP = 2, _NO_OVERLAP = 1, model_runner_kv_cache_mixin.py
# 0.5.10 - 0.5.15, kv_cache_configurator.py 0.5.16 - 0.5.21; allocation_sizing.py get_mamba_tracking_slots 0.5.22+;
# the lazy variant and SGLANG_OPT_MAMBA_SKIP_DECODE_LOCK, off by default, aside; sglang PR 14792 brought it, and PR
# 15337's docs say "it requires two extra mamba spaces for a ping-pong buffer for each request"). The pool's size
# does not change (_handle_max_mamba_cache reads neither). Whose default it is, release by release:
# - 0.5.7 - 0.5.13: nobody's (server_args.py __post_init__: "auto" becomes "no_buffer" before anything reads it;
#   read in every wheel 0.5.7 - 0.5.13).
# - 0.5.14 on: "auto" becomes extra_buffer where the overlap scheduler is on (the default) or the page size is over 1,
#   the architecture supports it and --linear-attn-backend is triton (the default); else no_buffer, which turns the
#   overlap scheduler off (server_args.py _handle_mamba_radix_cache 0.5.14, arg_groups/overrides.py
#   _mamba_radix_cache_resolution from 0.5.15), once the radix cache is on. The architectures
#   (_support_mamba_cache_extra_buffer 0.5.14, overrides.py _MAMBA_EXTRA_BUFFER_ARCHS 0.5.15+, read in every wheel
#   0.5.14 - 0.5.23; each set named after the release that changed it, 0.5.23's holding 0.5.20's and 0.5.21's
#   additions too: a kvplan range takes its newest release's set). Pipeline parallelism turns the overlap
#   scheduler off after that choice (_handle_pipeline_parallelism 0.5.14, overrides.py
#   _pipeline_parallel_overlap_disable 0.5.15+): one tracking slot at PP > 1.
MAMBA_EXTRA_BUFFER_ARCHITECTURES_0_5_14 = frozenset({
    "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration", "Qwen3NextForCausalLM",
    "InternS2PreviewForConditionalGeneration", "MiniCPMV4_6ForConditionalGeneration", "BailingMoeV2_5ForCausalLM",
    "FalconH1ForCausalLM", "GraniteMoeHybridForCausalLM", "NemotronHForCausalLM", "NemotronHPuzzleForCausalLM"})
MAMBA_EXTRA_BUFFER_ARCHITECTURES_0_5_16 = MAMBA_EXTRA_BUFFER_ARCHITECTURES_0_5_14 | {"KimiLinearForCausalLM"}
MAMBA_EXTRA_BUFFER_ARCHITECTURES_0_5_17 = MAMBA_EXTRA_BUFFER_ARCHITECTURES_0_5_16 | {"KimiK3ForConditionalGeneration"}
MAMBA_EXTRA_BUFFER_ARCHITECTURES_0_5_19 = MAMBA_EXTRA_BUFFER_ARCHITECTURES_0_5_17 | {
    "Qwen3_5MoeForCausalLM", "Qwen3_5ForCausalLM", "BailingMoeV3ForCausalLM"}
MAMBA_EXTRA_BUFFER_ARCHITECTURES_0_5_23 = MAMBA_EXTRA_BUFFER_ARCHITECTURES_0_5_19 | {
    "Qwen4ExpForConditionalGeneration", "Glm5NextForConditionalGeneration", "NemotronH_Omni_Reasoning_V3",  # 0.5.20
    "BailingMoeV3VLForConditionalGeneration", "InklingForConditionalGeneration",  # 0.5.21
    "InklingForConditionalGenerationMTP", "MiniCPMV4_7ForConditionalGeneration"}  # 0.5.21, 0.5.23
MAMBA_TRACKING_SLOTS_OVERLAP, MAMBA_TRACKING_SLOTS_NO_OVERLAP = 2, 1


def mamba_tracking_slots(extra_buffer: bool, overlap: bool) -> int:
    """allocation_sizing.py get_mamba_tracking_slots (0.5.22+; the same constants before): the ping-pong track
    buffers a request holds beside its state slot: 2 with the overlap scheduler, 1 without, 0 without extra_buffer."""
    if not extra_buffer:
        return 0
    return MAMBA_TRACKING_SLOTS_OVERLAP if overlap else MAMBA_TRACKING_SLOTS_NO_OVERLAP


# 0.5.4 - 0.5.6 turn the radix cache off for the Mamba-2 hybrids (model_runner.py ModelRunner.__init__: "if config :=
# self.mamba2_config: ... '{class_name} model detected, disable radix cache'"; mamba2_config is FalconH1Config |
# NemotronHConfig, read in 0.5.4, 0.5.5, 0.5.6; 0.5.3, not read, follows 0.5.4), as --disable-radix-cache does for any
# hybrid: the state pool is then sized by count (mamba_count_size), not memory. 0.5.7 drops the switch (server_args.py
# keeps the radix cache on for NemotronH and FalconH1 and turns the overlap scheduler off instead). The Gated DeltaNet
# hybrids (Qwen3-Next) keep the radix cache (MambaRadixCache) in every release unless --disable-radix-cache.
# (The 0.5.9 change of MAMBA_SIZE_RULES is sglang PR 18786, "Fix oom issue when memory is not enough for 512
# max_mamba_cache_size", merged 2026-02-13.)
MAMBA_RADIX_OFF_ARCHITECTURES_0_5_4 = frozenset({"NemotronHForCausalLM", "FalconH1ForCausalLM"})
MAMBA_CACHE_SIZE_WITHOUT_RADIX = 512
# How a hybrid's max_mamba_cache_size is set by count (--max-mamba-cache-size N, --max-running-requests R, the radix
# cache on or off) rather than by the mamba_full_memory_ratio split (mamba_split), release by release (no DP
# attention: the // dp_size of every branch is 1):
# - "radix_off" (0.5.4 - 0.5.6, model_runner.py handle_max_mamba_cache, read in 0.5.4, 0.5.5, 0.5.6): without the
#   radix cache N, else R, else 512; with it the ratio split, which overwrites a given N (the flag is not used);
# - "radix_off_or_given" (0.5.7 - 0.5.8, model_runner_kv_cache_mixin.py handle_max_mamba_cache, read in 0.5.7, 0.5.8):
#   without the radix cache or with N given: N, else R, else 512; else the ratio split;
# - "given" (0.5.9+: model_runner_kv_cache_mixin.py handle_max_mamba_cache 0.5.9 - 0.5.15, mem_cache/
#   kv_cache_configurator.py _handle_max_mamba_cache 0.5.16+, read in every wheel 0.5.9 - 0.5.23): N if given ("Use
#   explicitly set max_mamba_cache_size"); else without the radix cache R if given ("Use explicitly set
#   max_running_requests when radix cache is disabled"; 0.5.23 max(1, R // dp)); else the ratio split.
# "" (before 0.5.3): the flag does not exist (server_args.py 0.5.1 has no --max-mamba-cache-size).
# A count is not capped by memory: the K/V pool gets the rest, rest - N x per_req (+ the padding slot 0.5.17+:
# "(max_mamba_cache_size + 1) * stage_per_req"), and a rest at or below 0 fails the start-up (_profile_available_bytes
# 0.5.23: "Loaded weights leave no GPU memory for the KV cache").
MAMBA_SIZE_RULES = ("", "radix_off", "radix_off_or_given", "given")


def mamba_count_size(rule: str, radix_cache: bool, given: int | None, running: int | None) -> int | None:
    """max_mamba_cache_size where ``rule`` (MAMBA_SIZE_RULES) sizes the state pool by count: ``given``
    --max-mamba-cache-size, ``running`` --max-running-requests (None: not given); None: the ratio split
    (mamba_split) sizes it."""
    if rule not in MAMBA_SIZE_RULES:
        raise ValueError(f"mamba_count_size: rule {rule!r} is none of {MAMBA_SIZE_RULES}")
    if rule == "given":
        if given is not None:
            return given
        return max(1, running) if not radix_cache and running is not None else None
    if radix_cache and (rule == "radix_off" or given is None):
        return None
    return given if given is not None else running if running is not None else MAMBA_CACHE_SIZE_WITHOUT_RADIX


def mamba_fixed(pool: int, per_request: int, slots: int = MAMBA_CACHE_SIZE_WITHOUT_RADIX,
                padding_slot: bool = False) -> tuple[int, int]:
    """(bytes left for the K/V token pool, max_mamba_cache_size) where handle_max_mamba_cache sizes the state pool by
    count (mamba_count_size; 512 requests without the radix cache and without --max-running-requests, 0.5.4 - 0.5.8):
    the K/V pool gets rest - slots x per_req, one slot more with the padding slot (0.5.17+) (at or below 0: SGLang's
    pool has no room; its start-up fails)."""
    return pool - (slots + padding_slot) * per_request, slots


# Speculative decoding on a hybrid: the verify step keeps, for each running request, the states after each of the
# speculative_num_draft_tokens (D) draft tokens (mem_cache/memory_pool.py MambaPool: intermediate_ssm_state_cache and
# intermediate_conv_window, spec_state_size x D copies of a slot's states), which handle_max_mamba_cache charges at
# mamba_cache_per_req a copy (per_req below), by release (the state pool by count or by the ratio split as
# MAMBA_SIZE_RULES says; R = max_running_requests: given, else SPEC_MAX_RUNNING_REQUESTS; no DP attention):
# - "factor" (0.5.3 - 0.5.6; model_runner.py handle_max_mamba_cache, read in 0.5.4, 0.5.5, 0.5.6: speculativa_ratio):
#   every state slot carries its D copies: by ratio slots = int(budget // per_req // (1 + D)); by count the given
#   slots; the K/V pool gets rest - slots x per_req x (1 + D);
# - "upfront_split" (0.5.7 - 0.5.8; model_runner_kv_cache_mixin.py handle_max_mamba_cache, read in 0.5.7, 0.5.8):
#   the ratio branch alone first takes per_req x R x D off the rest, then splits what is left; by count nothing;
# - "upfront" (0.5.9 - 0.5.12; the same function, read in 0.5.9 - 0.5.12): per_req x R x D off the rest first,
#   whatever sizes the state pool;
# - "joint" (0.5.13 - 0.5.16; model_runner_kv_cache_mixin.py 0.5.13 - 0.5.15, mem_cache/kv_cache_configurator.py
#   _handle_max_mamba_cache 0.5.16, read in each): by ratio slots = int(budget // (per_req x (1 + D / ratio)))
#   ("Joint solve: main_state + intermediate = mamba_budget"); the copies are per_req x min(R, slots // ratio) x D
#   (ratio: _calculate_mamba_ratio, mamba_ratio); the K/V pool gets rest - copies - slots x per_req;
# - "joint_padded" (0.5.17+; kv_cache_configurator.py _handle_max_mamba_cache, read in every wheel 0.5.17 - 0.5.23):
#   the same with the padding slot on both buffers: slots = int((budget - per_req x (1 + D)) // (per_req x
#   (1 + D / ratio))), copies per_req x (min(R, slots // ratio) + 1) x D, state pool (slots + 1) x per_req.
# "" (before 0.5.3): no state pool rule (server_args.py 0.5.1 has none); the copies are not charged.
# The copies come out of the pool (mem_fraction_static's), before the K/V token pool gets the rest; ReplaySSM
# (--enable-linear-replayssm-spec, off by default, 0.5.17+) is not modelled.
MAMBA_SPEC_RULES = ("", "factor", "upfront_split", "upfront", "joint", "joint_padded")
# NGRAM's speculative_num_draft_tokens when not given: speculative_ngram_max_match_window_size = 12 (server_args.py
# 0.5.4 - 0.5.12, "if self.speculative_num_draft_tokens is None"), 12 (arg_groups/speculative_hook.py _handle_ngram,
# read in 0.5.13 and 0.5.23); the EAGLE family with top-k 1 takes speculative_num_steps + 1 whatever is given
# ("speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when speculative_eagle_topk == 1")
NGRAM_DRAFT_TOKENS = 12


def mamba_spec_copies(rule: str, per_request: int, draft_tokens: int, running: int, ratio: int, slots: int = 0,
                      count: int | None = None) -> int:
    """The bytes of speculative decoding's intermediate states that come out of the pool before the K/V token pool
    (MAMBA_SPEC_RULES ``rule``; ``draft_tokens`` D, ``running`` R, ``ratio`` the running cap's divisor, ``slots`` the
    state pool's max_mamba_cache_size, read by "factor" and the joint rules; ``count``: the state pool by count
    (mamba_count_size), else by the ratio split): 0 before 0.5.3 ("") and for "upfront_split" by count."""
    if rule not in MAMBA_SPEC_RULES:
        raise ValueError(f"mamba_spec_copies: rule {rule!r} is none of {MAMBA_SPEC_RULES}")
    if rule == "" or (rule == "upfront_split" and count is not None):
        return 0
    if rule == "factor":
        return slots * per_request * draft_tokens
    if rule in ("upfront_split", "upfront"):
        return per_request * running * draft_tokens
    pad = int(rule == "joint_padded")
    return per_request * (min(running, slots // ratio) + pad) * draft_tokens


def mamba_spec_split(rule: str, pool: int, per_request: int, draft_tokens: int, running: int, ratio: int,
                     count: int | None = None, padding_slot: bool = False) -> tuple[int, int]:
    """(bytes left for the K/V token pool, max_mamba_cache_size) with speculative decoding's intermediate states
    (MAMBA_SPEC_RULES ``rule``; ``draft_tokens`` D, ``running`` R, ``ratio`` the running cap's divisor; ``count``:
    the state pool by count (mamba_count_size), else by the ratio split); the states' bytes: mamba_spec_copies."""
    if rule not in MAMBA_SPEC_RULES:
        raise ValueError(f"mamba_spec_split: rule {rule!r} is none of {MAMBA_SPEC_RULES}")
    if per_request <= 0:
        return pool, 0
    d = draft_tokens
    if rule == "":
        return (mamba_split(pool, per_request, padding_slot=padding_slot) if count is None else
                mamba_fixed(pool, per_request, count, padding_slot))
    if rule in ("upfront_split", "upfront"):  # the copies first, whatever the state pool's size
        rest = pool - mamba_spec_copies(rule, per_request, d, running, ratio, count=count)
        return (mamba_fixed(rest, per_request, count, padding_slot) if count is not None else
                mamba_split(rest, per_request, padding_slot=padding_slot))
    pad = int(rule == "joint_padded")
    budget = max(0, pool) * DEFAULT_MAMBA_FULL_MEMORY_RATIO / (1 + DEFAULT_MAMBA_FULL_MEMORY_RATIO)
    if count is not None:
        slots = count
    elif rule == "factor":
        slots = int(budget // per_request // (1 + d))
    else:
        slots = int((budget - per_request * (1 + d) * pad) // (per_request * (1 + d / ratio)))
    copies = mamba_spec_copies(rule, per_request, d, running, ratio, slots, count)
    return pool - copies - (slots + pad) * per_request, slots


# --mamba-radix-cache-strategy (0.5.14+; --mamba-scheduler-strategy 0.5.7 - 0.5.13, kept as a deprecated alias to
# 0.5.19; server_args.py MAMBA_SCHEDULER_STRATEGY_CHOICES / MAMBA_RADIX_CACHE_STRATEGY_CHOICES, from 0.5.20
# arg_groups/fields/exec_.py): auto, no_buffer, extra_buffer (extra_buffer_lazy from 0.5.13, not modelled)
MAMBA_STRATEGIES = ("auto", "no_buffer", "extra_buffer")


# ---- AWQ and GPTQ: the method SGLang picks, and the model dtypes it takes -------------------------------------

INT_METHODS = MappingProxyType({  # configs/model_config.py _verify_quantization: the overrides in order
    # awq.py (0.4.10 - 0.5.10; awq/awq.py 0.5.11 - 0.5.23) AWQMarlinConfig.is_awq_marlin_compatible: ``if not
    # _is_cuda: return False``; get_supported_act_dtypes [torch.half, torch.bfloat16]; AWQConfig [torch.float16]
    # (bfloat16 too on Ascend NPUs only), get_min_capability 75. 0.4.8 - 0.4.9 import AWQMarlinConfig from vLLM
    # (layers/quantization/__init__.py; vLLM 0.9's, the same rule) beside their own AWQConfig ([torch.half])
    "awq": quant.IntMethods(
        "AWQ", plain="awq", plain_source="layers/quantization/awq.py (awq/awq.py from 0.5.11) AWQConfig, SGLang 0.4.8 "
        "- 0.5.23", marlin="awq_marlin", marlin_source="layers/quantization/awq.py (awq/awq.py from 0.5.11) "
        "AWQMarlinConfig, SGLang 0.4.10 - 0.5.23", marlin_first=(), marlin_rocm_first=None, min_capability=7.5,
        checkpoint="4-bit checkpoints with zero points and group size -1, 32, 64 or 128"),
    # layers/quantization/gptq.py (0.4.8 - 0.5.12; gptq/gptq.py 0.5.13 - 0.5.23): GPTQConfig [torch.half],
    # get_min_capability 60 (GPTQAscendConfig / CPUGPTQConfig / GPTQXPUConfig take bfloat16 too: not these GPUs);
    # GPTQMarlinConfig [torch.half, torch.bfloat16], get_min_capability 80; is_gptq_marlin_compatible asks ``if not
    # _is_cuda: return False`` through 0.5.12 and not from 0.5.13, where check_marlin_supported reads
    # torch.cuda.get_device_capability, a gfx version on ROCm (9.4 on an MI300X: 94 >= 80)
    "gptq": quant.IntMethods(
        "GPTQ", plain="gptq", plain_source="layers/quantization/gptq.py (gptq/gptq.py from 0.5.13) GPTQConfig, SGLang "
        "0.4.8 - 0.5.23", marlin="gptq_marlin", marlin_source="layers/quantization/gptq.py (gptq/gptq.py from "
        "0.5.13) GPTQMarlinConfig, SGLang 0.4.8 - 0.5.23", marlin_first=(), marlin_rocm_first=(0, 5, 13),
        min_capability=6.0, checkpoint="symmetric 4- or 8-bit checkpoints with group size -1, 32, 64 or 128"),
})
_MARLIN_MIN_CAPABILITY = 8.0  # marlin_utils.py query_marlin_supported_quant_types: device_capability < 80 -> []
# configs/model_config.py _verify_quantization: ``if is_hip() and self.quantization not in
# rocm_supported_quantization: raise ValueError(... "is currently not supported in ROCm.")``, after the overrides.
# The list holds awq in every release read, gptq_marlin in 0.4.8 - 0.4.10 only and gptq through 0.5.19
_ROCM_GPTQ_LAST = (0, 5, 19)


def int_kernel(release: tuple[int, ...], vendor: str, compute_capability: float | None,
               q: Quantization) -> quant.QuantKernel | None:
    """What SGLang ``release`` runs an AWQ or GPTQ checkpoint with on a GPU of ``vendor`` (None where kvplan has not
    read it: other vendors and formats), by INT_METHODS: the Marlin twin where its is_*_marlin_compatible holds (a
    Marlin checkpoint, quant.MARLIN_COMPATIBLE, on CUDA of compute capability 8.0+; GPTQ-Marlin on ROCm too from
    0.5.13), else the plain config. On ROCm GPTQ is refused from 0.5.13 (gptq_marlin, picked, is not in
    rocm_supported_quantization) and every GPTQ checkpoint from 0.5.20 (gptq left the list). Releases before 0.4.8
    are not read here and taken as 0.4.8's."""
    m = INT_METHODS.get(q.method)
    k = None if m is None else quant.pick_int_method(m, release, vendor, compute_capability, q,
                                                     _MARLIN_MIN_CAPABILITY)
    if k is not None and vendor.lower() == "amd" and (
            k.name == "gptq_marlin" or k.name == "gptq" and release > _ROCM_GPTQ_LAST):
        listed = "0.5.1 - 0.5.23" if k.name == "gptq_marlin" else "0.5.20 - 0.5.23"
        return replace(k, refused=f"{k.name} is not in rocm_supported_quantization ({listed}: configs/model_config.py "
                                  "_verify_quantization raises \"... is currently not supported in ROCm\")")
    return k


def fp8_kernel(release: tuple[int, ...], vendor: str, compute_capability: float | None,
               q: Quantization) -> quant.QuantKernel | None:
    """The config SGLang loads a float8 checkpoint (or online --quantization fp8) with, as far as the model dtype goes:
    layers/quantization/fp8.py Fp8Config.get_supported_act_dtypes [torch.bfloat16, torch.half] and
    compressed_tensors/compressed_tensors.py CompressedTensorsConfig [torch.float16, torch.bfloat16], both in every
    release 0.4.8 - 0.5.23 (no float32); get_min_capability not modelled here. None on vendors not read."""
    if vendor.lower() not in ("nvidia", "amd"):
        return None
    if q.checkpoint_format == "compressed-tensors":
        return quant.QuantKernel("compressed-tensors", ("fp16", "bf16"), "layers/quantization/compressed_tensors/"
                                 "compressed_tensors.py CompressedTensorsConfig, SGLang 0.4.8 - 0.5.23")
    return quant.QuantKernel("fp8", ("bf16", "fp16"), "layers/quantization/fp8.py Fp8Config, SGLang 0.4.8 - 0.5.23")


QUANT_KERNELS = MappingProxyType({"awq": int_kernel, "gptq": int_kernel, "fp8": fp8_kernel})  # per method


quant_kernel = partial(quant.pick_kernel, QUANT_KERNELS)  # (release, vendor, compute capability, quantization)
