"""vLLM's V1 engine: a paged cache of whole blocks, a profiled budget, KV cache groups for hybrids.

The formulas, each with its vLLM source, are in ``kvplan.cost.serving_vllm`` (the rules of ``serving_vllm.RULES``);
this runtime applies them: its options and defaults, what it refuses, a stage's budget, the pool, the launch line.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from kvplan.cost import serving_vllm as vl
from kvplan.cost import serving_vllm_v0 as v0
from kvplan.cost.engines import CacheRun
from kvplan.cost.runtimes import vllm_features as vf
from kvplan.cost.runtimes import vllm_mm as vm
from kvplan.cost.runtimes.base import Server, VersionRange, at_range, positive_size, rank_row, refuse_zamba_v1, utilization
from kvplan.cost.runtimes.setup import Options, Pool, ServingFlags, Setup, Stage
from kvplan.errors import KvplanError, Refused, clip, clip_text
from kvplan.model.dtypes import TORCH_NAME_OF, TORCH_NAMES, DType, parse_dtype
from kvplan.units import MAX_BLOCK_TOKENS, cdiv, fmt_bytes, fmt_int, require_positive

if TYPE_CHECKING:
    from kvplan.model.quant import Mxfp4Layout


@dataclass(frozen=True)
class VllmVersion(VersionRange):
    """The rules that differ between vLLM releases (serving-budget.md, "Versions change the printed figures"); one
    object per modelled range of releases, named in a plan's ``engine_rules``."""

    label: str
    first: tuple[int, ...]  # (major, minor[, patch]) of the first release covered
    last: tuple[int, ...] | None  # the last one (a (major, minor) bound: every patch of it); None: up to the newest
    default_utilization: float  # config/cache.py gpu_memory_utilization: 0.9, 0.92 since 0.20.0 (0.19.1: 0.9)
    cuda_graphs_in_budget: bool  # 0.20+: profile_cudagraph_memory subtracts the estimate before sizing the pool
    tokens_by_blocks: bool  # 0.9.1 - 0.20.0: "GPU KV cache size" = num_blocks // groups x block_size
    reserves_null_block: bool  # the fits check and the longest-length search keep BlockPool's null block free
    # the dummy sampler sorts the vocabulary of every row (serving_vllm.sorting_sampler_bytes; False: no sort,
    # serving_vllm's UNSORTED_SAMPLER_EXTRA_BYTES beside the logits, also what FlashInfer's sampler takes,
    # --flashinfer-sampler; V0 sorts unless VLLM_USE_FLASHINFER_SAMPLER is set, serving_vllm_v0)
    sorts_vocabulary: bool
    # V0 (serving_vllm_v0.py): one block table over all attention layers (no KV cache groups), each MLA entry padded
    # to 256 B, --swap-space CPU blocks, max_num_seqs 256 on every GPU, the whole max_model_len in the profile's
    # forward below 32K tokens, concurrency = blocks x block_size / max_model_len
    v0_engine: bool = False
    entry_alignment_bytes: int = 0  # CacheEngine align_to_256bytes (MLA entries), 0: none
    swap_space_bytes: int = 0  # --swap-space: CPU blocks of the same size ("# CPU blocks: M")
    profile_holds_qkv: bool = True  # the profile forward's peak (at the MLP) still holds the q/k/v output
    fixed_max_num_seqs: int | None = None  # V0: 256 on every GPU (None: by GPU memory, arg_utils get_batch_defaults)
    mnbt_covers_max_model_len: bool = False  # V0: max(max_model_len, 2048) up to 32K tokens, chunked (2048) above
    # ESTIMATE: the memory each captured CUDA graph adds to profile_cudagraph_memory's figure (serving_vllm
    # cuda_graph_estimate_bytes, fitted to public logs); charged where cuda_graphs_in_budget, only printed in 0.18-0.19;
    # None: the version prints no estimate (graphs captured after the pool is sized)
    cuda_graph_bytes_per_graph: int | None = None
    # 0.25 - 0.28: dense (not MoE, not hybrid) models run Model Runner V2, which estimates no graphs (0 charged)
    dense_runner_without_graph_estimate: bool = False
    # 0.17 - 0.28: the V1 runner's dummy sampler masks top-k/top-p with ops/topk_topp_triton.py, whose cached scratch
    # buffer (serving_vllm.triton_topk_topp_buffer_bytes: a float32 vocabulary row per SM) joins the sampler's peak
    triton_topk_topp_buffer: bool = False
    # 0.27+: the profile's non-KV figure is total_consumed (free memory dropped since the first snapshot) + the
    # transient peak (utils/mem_utils.py memory_profiling), so torch memory allocated after the weights' measurement
    # and before the profile counts (Model Runner V2's sampler state, serving_vllm.v2_sampler_state_bytes); before
    # 0.27 it is in no term (weights + the torch peak's increase during the profile + non-torch growth). Read in
    # 0.27.1 - 0.33.0: memory_profiling's total_consumed = before_create.free_memory - after_profile.free_memory,
    # before_create being gpu_worker.py init_device's init_snapshot (taken before load_model), and V2's
    # load_model (v1/worker/gpu/model_runner.py) builds Sampler -> PenaltiesState and StructuredOutputsWorker after
    # "Model loading took" is measured, in every release 0.25.0 - 0.33.0
    counts_torch_state_before_profile: bool = False
    # 0.33+: Model Runner V2's _dummy_sampler_run samples twice, the second time with SamplingParams.
    # for_sampler_warmup on every row ("pays for the fp32 logits pipeline", v1/worker/gpu/model_runner.py 0.33.0;
    # absent in 0.25.0 - 0.32.0, which sample once with no request added: serving_vllm.v2_dummy_sampler_bytes);
    # that pass's peak, traced in 0.33.0 and flashinfer-python 0.7.2.post1: serving_vllm.v2_warmup_sampler_bytes
    v2_sampler_warmup_pass: bool = False
    # 0.27+: gpu_worker.py determine_available_memory sets peak_activation_memory = transient_peak_headroom +
    # cudagraph_memory_estimate_applied (read in 0.27.1, 0.28.0, 0.29.0 - 0.33.0; 0.21.0 - 0.26.0:
    # torch_peak_increase alone), which compile_or_warm_up_model prints as "X GiB for peak activation"
    peak_line_holds_graph_estimate: bool = False
    # 0.10 - 0.28 (V1 runner, read in 0.10.0, 0.10.1.1, 0.17.0 and 0.28.0): profile_run holds the forward's output and
    # its last rows while _dummy_sampler_run runs (serving_vllm.held_hidden_bytes); 0.29+ is not read here
    sampler_holds_hidden: bool = False
    # 0.8.0 - 0.9.2 (V1, read in the 0.8.0 - 0.8.5.post1, 0.9.0 and 0.9.1 wheels): _dummy_run returns only
    # ``hidden_states[logit_indices]``, so the forward's output is freed before the sampler runs (0.10.0 returns both)
    profile_keeps_forward_output: bool = True
    # 0.9.0+: _dummy_sampler_run draws ``hidden_states = torch.rand_like(hidden_states)`` beside the rows profile_run
    # holds (absent in 0.8.0 - 0.8.5.post1)
    dummy_sampler_noise: bool = True
    # V0 0.6.5 - 0.6.6 (utils.py memory_profiling): the non-torch figure is the device memory used after the profile's
    # empty_cache minus the baseline, the weights' and the profile's allocated bytes, so the free bytes the caching
    # allocator keeps in segments that hold a live block count (serving_vllm_v0.py, "Non-torch memory by release")
    non_torch_counts_cached_free: bool = False
    # 0.11.1+: a first boot's torch.compile benchmarks Inductor's combo kernels inside the memory profile, one random
    # copy of the embedding table (serving_vllm.cold_compile_peak_bytes, --cold-compile); True from the 0.11 range
    # on, whose 0.11.0 (torch 2.8) does not benchmark (the range cannot tell it apart)
    compile_benchmarks_kernels: bool = False
    # 0.26+: a sliding window's pages per request cover max_concurrent_batches x max_num_batched_tokens scheduled
    # tokens (config/vllm.py max_in_flight_tokens); before, one batch (serving_vllm.max_in_flight_tokens)
    in_flight_batches: bool = False
    # 0.29+: Model Runner V2 for every model (config/vllm.py use_v2_model_runner, unless a feature it lacks is asked
    # for); 0.25 - 0.28: dense models only (dense_runner_without_graph_estimate)
    v2_runner_every_model: bool = False
    # 0.28+: engine/arg_utils.py get_batch_defaults gives GPUs of 160 GiB and more (B200, B300, MI300X) 16,384
    # batched tokens for `vllm serve`; before (read in 0.9.1 - 0.27.0), every GPU of 70 GiB and more but an A100 gets
    # 8,192 (serving_vllm.batch_defaults)
    large_gpu_batch_defaults: bool = False
    # 0.22 - 0.28: the architectures that run Model Runner V2 by default (config/vllm.py
    # DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES, read in each release); ``v2_listed_dense_only``: 0.22 - 0.23 also require
    # a model neither MoE nor quantized (_is_default_v2_model_runner_model: "not model_config.is_moe and not
    # model_config.is_quantized")
    v2_architectures: frozenset[str] = frozenset()
    v2_listed_dense_only: bool = False
    # `--block-size` choices: V0 argparse's (serving_vllm_v0.BLOCK_SIZE_CHOICES); 0.9.1 - 0.17 those argparse builds
    # from config/cache.py BlockSize (engine/arg_utils.py literal_to_kwargs): Literal[1, 8, 16, 32, 64, 128], 256
    # added in 0.11.1 (the 0.11 range takes it); None: 0.18+, any int > 0 (``SkipValidation[int]``; 0.28: gt=0)
    block_size_choices: tuple[int, ...] | None = None
    # the MLA block without --block-size (serving_vllm.MLA_BLOCK_RULES): "hopper" 0.8.0 - 0.9.0 (FlashMLA's 64 on
    # Hopper only), "forced" 0.9.1 - 0.14 (FlashMLA 64 on
    # Hopper, CUTLASS 128 on Blackwell), "flashinfer" 0.15 - 0.17 (FlashInfer MLA's 64 on Blackwell), "preferred"
    # 0.18+ (the backend's get_preferred_block_size(16): 16 on Hopper, 32 on Blackwell)
    mla_block_rule: str = "forced"
    # V0 0.7.1 - 0.7.3: MLA's matrix absorption materializes W_Q_UK, W_UV_O and W_QR beside the checkpoint tensors
    # (serving_vllm.mla_absorbed_bytes), counted in the weights; otherwise the W_UK/W_UV copies (mla_dequant_bytes)
    mla_absorbed_weights: bool = False
    # caches MLA's compressed latent (vLLM's MLA attention, first in 0.7.1); before, DeepSeek's per-head K/V
    # (not modelled: refused)
    mla_latent_cache: bool = True
    # V0 through 0.7.3: fused MoE's three intermediate caches, separate (serving_vllm.profile_activation_bytes)
    moe_separate_caches: bool = False
    # 0.15+: a state group's pages per request count the speculative tokens (v1/kv_cache_interface.py
    # MambaSpec.max_memory_usage_bytes: 1 + num_speculative_blocks, mamba/abstract.py num_speculative_blocks =
    # num_speculative_tokens; read in 0.15.0, 0.20.0, 0.26.0, 0.28.0, 0.33.0); 0.12 - 0.14: cdiv(max_model_len,
    # mamba_block_size = max_model_len) = 1, 0.10 - 0.11: page_size_bytes, 1
    state_pages_count_speculative: bool = False
    # 0.28+: prefix caching on by default for hybrid models (engine/arg_utils.py
    # _set_default_chunked_prefill_and_prefix_caching_args: default_prefix_caching = is_prefix_caching_supported,
    # True for generative hybrids in config/model.py; 0.26.0 - 0.27.1 "keep it opt-in for now": `and not is_hybrid`;
    # 0.12 - 0.25 is_prefix_caching_supported is False for them), so MambaModelConfig.verify_and_update_config
    # (models/config.py, through HybridAttentionMambaModelConfig for every is_hybrid model) sets mamba_cache_mode
    # "align": 2 pages per state group and request (serving_vllm.state_pages). Attention-free models keep it off.
    hybrid_prefix_caching: bool = False
    # --enable-prefix-caching given on a hybrid (read in 0.19.1 - 0.33.0): the architectures
    # MambaModelConfig.verify_and_update_config (models/config.py) puts in Mamba cache mode "all" rather than "align"
    # (0.20 - 0.27: ``"all" if model_config.supports_mamba_prefix_caching else "align"``, the models declaring
    # SupportsMambaPrefixCaching, serving_vllm.MAMBA_PREFIX_CACHING_ALL_0_22 / _0_24; 0.20.0 - 0.25.1 take the flag as
    # 0.26 does: the same HybridAttentionMambaModelConfig, platforms/interface.py _align_hybrid_block_size (0.20.x
    # lacks only 0.21's turboquant_ cache-dtype branch), config/model.py get_mamba_chunk_size and, but for 0.20 - 0.21's
    # speculative rule (all_mode_yields_to_speculation), MambaModelConfig; _set_default_chunked_prefill_and_prefix_
    # caching_args only defaults the flag (is_prefix_caching_supported False for hybrids) and keeps a given True;
    # 0.19.1 has no _align_hybrid_block_size (HybridAttentionMambaModelConfig aligns the block itself) and another
    # MambaModelConfig: not compared, refused; 0.28+: "none" becomes "align" for every model: empty; "all" is then
    # reached only by --mamba-cache-mode all, which kvplan does not take, and 0.32.0 drops it from MambaCacheMode);
    # "all" pages: serving_vllm.all_mode_pages, the block aligned to the Mamba chunk (serving_vllm.mamba_chunk_size).
    # None: a release whose explicit flag kvplan has not verified on hybrids (refused)
    explicit_prefix_caching_all: frozenset[str] | None = None
    # 0.20.0 - 0.21.0 (models/config.py MambaModelConfig.verify_and_update_config): a SupportsMambaPrefixCaching model
    # takes "align", not "all", when a speculative config is given ("Mamba cache mode is set to 'align' ... when
    # prefix caching and speculative decoding are enabled"; gone in 0.22.0). So their mode "all" never holds
    # speculative pages, which their MambaSpec.max_memory_usage_bytes ("all": cdiv(max_model_len, block_size) pages,
    # no num_speculative_blocks; added in 0.22.0) would not count
    all_mode_yields_to_speculation: bool = False
    # align mode's num_prefill_checkpoint_blocks (one more page per state group and request) by the card's ssm kind:
    # 0.32+ Mamba-2 (mamba_mixer2.py MambaMixer2.get_kv_cache_spec: replace(spec, num_prefill_checkpoint_blocks=1),
    # absent in 0.31.0); 0.33+ Gated DeltaNet where its prefill runs FlashInfer's kernel (gdn/qwen_gdn_linear_attn.py
    # get_kv_cache_spec, ``checkpoint_on_sm90``), which also aligns the block to serving_vllm.GDN_CHECKPOINT_ALIGNMENT
    checkpoint_state_kinds: frozenset[str] = frozenset()
    # 0.33+: Gated DeltaNet layers export prefill checkpoints in align mode on SM 9.0 (_resolve_gdn_prefill_backend:
    # "Hopper (SM90) - no further constraints" picks FlashInfer; on Blackwell it needs head_k_dim 128 and a CUDA 13
    # runtime, which kvplan cannot see: there it takes Triton/FLA, no checkpoint, and the plan's note says so)
    gdn_checkpoints: bool = False
    # 0.14+: chunked local attention layers (Llama-4) keep the hybrid KV cache manager, their own groups of
    # ChunkedLocalAttentionSpec pages (envs.py VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE defaults to "1");
    # before, the manager is off and they are full attention (serving_vllm.without_hybrid_manager)
    chunked_local_groups: bool = True
    # V1 0.8.0 - 0.9.0 (serving_vllm.available_kv_bytes_0_8, v1/worker/gpu_worker.py determine_available_memory): the
    # pool is int(total x utilization - (torch's allocated peak + every non-torch byte in use)), so the CUDA context
    # (--context-memory) and the allocator's cached free bytes are charged inside the budget, and init_device makes
    # no free >= requested check
    peak_counts_all_non_torch: bool = False
    # V1 0.8.0 - 0.9.0 (v1/core/kv_cache_utils.py _get_kv_cache_config_uniform_type): "GPU KV cache size" = num_blocks
    # x block_size and "Maximum concurrency" = that / max_model_len (serving_vllm_v0.max_tokens / max_concurrency)
    tokens_over_max_model_len: bool = False
    # V1 0.8.0 - 0.8.5: engine/arg_utils.py _set_default_args_v1's batch defaults (serving_vllm.batch_defaults_0_8:
    # "name_1024", "name", "memory"); None: get_batch_defaults' (serving_vllm.batch_defaults)
    batch_rule: str | None = None
    # V1 0.8.0 - 0.9.0: one KV cache spec type (serving_vllm.specs_0_8): False 0.8.0 - 0.8.2, every layer full
    # attention; True 0.8.3 - 0.9.0, a model of sliding layers only keeps them; None: the hybrid manager (0.9.1+)
    sliding_specs: bool | None = None
    # V1 0.8.0 - 0.9.0: the clauses of engine/arg_utils.py EngineArgs._is_v1_supported_oracle, read in each release,
    # under which `vllm serve` without VLLM_USE_V1 runs V0 (VLLM.engine_for): "any_kv_dtype" (0.8.0 - 0.8.1: any
    # --kv-cache-dtype but auto), "fp8_kv" (0.8.2+: fp8 K/V unless FlashAttention 3 on SM 9.x,
    # attention/utils/fa_utils.py flash_attn_supports_fp8), "lora_offload" (0.8.0 - 0.8.2: _warn_or_fallback("LORA"),
    # --cpu-offload-gb), "pp" (0.8.0 - 0.8.5: _warn_or_fallback("PP"), 0.8.3+ "Pipeline Parallelism without Ray"),
    # "speculative" (0.8.x: every method; ngram and Eagle through _warn_or_fallback), "speculative_0_9" (0.9.0: a
    # method other than ngram, medusa, eagle, eagle3, deepseek_mtp: "Speculative Decoding"); every range: compute capability
    # < 8.0, a non-CUDA GPU, --dtype float32, a model V1 does not support (ModelConfig.is_v1_compatible: state models)
    v1_fallbacks: frozenset[str] | None = None
    # V0 0.8.0 - 0.9.0: chosen by VLLM_USE_V1=0 (envs.py), which its launch line sets (--engine vllm==X:v0)
    v0_opt_in: bool = False

    def pp_vocab_every_stage(self, hf_architecture: str | None) -> frozenset[str]:
        """What of the vocabulary ("embedding", "lm_head") every pipeline stage holds for this architecture in this
        range (serving_vllm.PP_VOCAB_EVERY_STAGE: modules without PPMissingLayer for them); empty: llama.py's
        placement (the embedding on the first stage, and the last when tied; the head on the last)."""
        return frozenset(vl.pp_vocab_every_stage(self.first, self.last).get(hf_architecture or "", ()))


def _v0(label: str, first: tuple[int, ...], last: tuple[int, ...], **release) -> VllmVersion:
    """A range of V0 releases (serving_vllm_v0.py: the rules they share; ``release``: what differs)."""
    return VllmVersion(f"vLLM {label} (V0 engine{release.pop('note', '')})", first, last, 0.9, False, False, False,
                       True, v0_engine=True, block_size_choices=v0.BLOCK_SIZE_CHOICES,
                       entry_alignment_bytes=v0.ENTRY_ALIGNMENT_BYTES, swap_space_bytes=v0.DEFAULT_SWAP_SPACE_BYTES,
                       profile_holds_qkv=False, fixed_max_num_seqs=v0.DEFAULT_MAX_NUM_SEQS, chunked_local_groups=False,
                       mnbt_covers_max_model_len=True, **release)


# V0's non-torch figure by release (serving_vllm_v0.py, "Non-torch memory by release"): 0.6.5-0.6.6 count the
# caching allocator's cached free bytes in it; 0.6.3 and 0.6.4 have rules of their own, not modelled (the default)
V0_RANGES = (
    _v0("0.2-0.6.4", (0, 2), (0, 6, 4), moe_separate_caches=True, mla_latent_cache=False),
    _v0("0.6.5-0.6.6", (0, 6, 5), (0, 6, 6), non_torch_counts_cached_free=True, moe_separate_caches=True,
        mla_latent_cache=False, note="; non-torch counts the allocator's cached free bytes"),
    # 0.8.0 - 0.9.0 ran the V1 engine by default, whose determine_available_memory (v1/worker/gpu_worker.py 0.9.0)
    # charges torch's allocated peak plus all device memory outside torch's live tensors after empty_cache (the CUDA
    # context, other processes, the allocator's cached free bytes) and prints no "Available KV cache memory" line:
    # not modelled. This range is their V0 engine (VLLM_USE_V1=0, or a model V1 did not support).
    # 0.7.x has no FlashMLA: MLA takes TRITON_MLA with the config's 16-token block (serving_vllm.MLA_BLOCK_RULES
    # "none"); 0.7.1 - 0.7.3 absorb MLA's up-projections into materialized weights (PR 12528, "[Attention] MLA decode
    # optimizations", 0.7.1; removed by PR 14770 for 0.8.0). 0.7.0 and before cached DeepSeek's per-head K/V (MLA
    # came with 0.7.1), which kvplan does not model: an MLA card is refused there (mla_latent_cache).
    _v0("0.7.0", (0, 7, 0), (0, 7, 0), mla_block_rule="none", moe_separate_caches=True, mla_latent_cache=False),
    _v0("0.7.1-0.7.3", (0, 7, 1), (0, 7, 3), mla_block_rule="none", mla_absorbed_weights=True,
        moe_separate_caches=True,
        note="; for MLA models: absorbed weights, 16-token blocks"),
    _v0("0.8.0-0.9.0", (0, 8, 0), (0, 9, 0), v0_opt_in=True, mla_block_rule="hopper",
        note="; VLLM_USE_V1=0, --engine vllm==X:v0"),
)
# V1 0.8.0 - 0.9.0, `vllm serve`'s default engine (envs.py VLLM_USE_V1 unset: V1 unless the oracle falls back). Read in
# the 0.8.0, 0.8.1, 0.8.2, 0.8.3, 0.8.4, 0.8.5, 0.8.5.post1 and 0.9.0 wheels against 0.9.1's: profile_run (_dummy_run
# returns hidden_states[logit_indices]; _dummy_sampler_run with top_p 0.9 and top_k vocab - 1 through
# ops/topk_topp_sampler.py forward_native's sort, FlashInfer's only with a FlashInfer older than 0.2.3 installed, as
# 0.9.1's), the MLA block (platforms/cuda.py: FlashMLA's 64 forced on Hopper) and the CUDA graphs (captured in
# compile_or_warm_up_model after the pool) are 0.9.1's; the budget, the printed figures, the batch defaults, the
# cache specs and the oracle differ (the fields above), and between releases: the batch rule (0.8.0 - 0.8.3, 0.8.4,
# 0.8.5, 0.9.0), the sliding specs (0.8.3+), the --block-size choices (config.py BlockSize Literal from 0.8.5) and
# the oracle's clauses
_V1_0_8 = dict(peak_counts_all_non_torch=True, tokens_over_max_model_len=True, non_torch_counts_cached_free=True,
               sampler_holds_hidden=True, profile_keeps_forward_output=False, chunked_local_groups=False,
               mla_block_rule="hopper")
V1_0_8_RANGES = tuple(
    VllmVersion(f"vLLM {label} (V1 engine)", first, last, 0.9, False, False, False, True,
                batch_rule=batch, sliding_specs=sliding, block_size_choices=choices, v1_fallbacks=frozenset(falls),
                dummy_sampler_noise=first >= (0, 9), **_V1_0_8)
    for label, first, last, batch, sliding, choices, falls in (
        ("0.8.0-0.8.1", (0, 8, 0), (0, 8, 1), "name_1024", False, v0.BLOCK_SIZE_CHOICES,
         ("any_kv_dtype", "lora_offload", "pp", "speculative")),
        ("0.8.2", (0, 8, 2), (0, 8, 2), "name_1024", False, v0.BLOCK_SIZE_CHOICES,
         ("fp8_kv", "lora_offload", "pp", "speculative")),
        ("0.8.3", (0, 8, 3), (0, 8, 3), "name_1024", True, v0.BLOCK_SIZE_CHOICES, ("fp8_kv", "pp", "speculative")),
        ("0.8.4", (0, 8, 4), (0, 8, 4), "name", True, v0.BLOCK_SIZE_CHOICES, ("fp8_kv", "pp", "speculative")),
        ("0.8.5", (0, 8, 5), (0, 8, 5), "memory", True, vl.BLOCK_SIZE_CHOICES_0_9_1, ("fp8_kv", "pp", "speculative")),
        ("0.9.0", (0, 9, 0), (0, 9, 0), None, True, vl.BLOCK_SIZE_CHOICES_0_9_1, ("fp8_kv", "speculative_0_9"))))
# 0.18+: the MLA block is the backend's preferred size, and a state group's pages count the speculative tokens
_V0_18 = dict(mla_block_rule="preferred", state_pages_count_speculative=True)
VERSIONS = (
    *V0_RANGES[:-1],
    *V1_0_8_RANGES,
    # 0.9.1 - 0.9.2 (read in the 0.9.1 wheel against 0.10.0's): determine_available_memory, memory_profiling, the
    # snapshot before init_worker_distributed_environment, the sorting top-k/top-p sampler, get_batch_defaults and
    # the "GPU KV cache size" formula are 0.10's; profile_run then holds only the forward's last rows (and their
    # rand_like) while the dummy sampler runs (_dummy_run returns hidden_states[logit_indices]), 0.10.0 the forward's
    # output too (profile_keeps_forward_output)
    VllmVersion("vLLM 0.9.1-0.9.2 (V1 engine)", (0, 9, 1), (0, 9, 2), 0.9, False, True, False,
                True, sampler_holds_hidden=True, profile_keeps_forward_output=False,
                block_size_choices=vl.BLOCK_SIZE_CHOICES_0_9_1, chunked_local_groups=False),
    VllmVersion("vLLM 0.10 (V1 engine)", (0, 10), (0, 10), 0.9, False, True, False,
                True, sampler_holds_hidden=True,
                block_size_choices=vl.BLOCK_SIZE_CHOICES_0_9_1, chunked_local_groups=False),
    # 0.11, 0.12-0.13, 0.14 and 0.15-0.16 share every rule but the MXFP4 backend on Hopper (serving_vllm.mxfp4_layout:
    # Marlin until triton_kernels is vendored in 0.12.0, then Triton), chunked local attention's groups (0.14+), and
    # from 0.15 FlashInfer MLA's block on Blackwell and the speculative tokens in a state group's pages
    *(VllmVersion(f"vLLM {label} (V1 engine)", first, last, 0.9, False, True, False,
                  True, sampler_holds_hidden=True,
                  compile_benchmarks_kernels=True, block_size_choices=vl.BLOCK_SIZE_CHOICES_0_11_1,
                  mla_block_rule=mla, state_pages_count_speculative=spec_pages, chunked_local_groups=first >= (0, 14))
      for label, first, last, mla, spec_pages in (("0.11", (0, 11), (0, 11), "forced", False),
                                                  ("0.12-0.13", (0, 12), (0, 13), "forced", False),
                                                  ("0.14", (0, 14), (0, 14), "forced", False),
                                                  ("0.15-0.16", (0, 15), (0, 16), "flashinfer", True))),
    # 0.17.0 adds ops/topk_topp_triton.py: the dummy sampler's top-k/top-p no longer sorts (serving_vllm)
    VllmVersion("vLLM 0.17 (V1 engine)", (0, 17), (0, 17), 0.9, False, True, False, False,
                triton_topk_topp_buffer=True, sampler_holds_hidden=True, compile_benchmarks_kernels=True,
                block_size_choices=vl.BLOCK_SIZE_CHOICES_0_11_1, mla_block_rule="flashinfer",
                state_pages_count_speculative=True),
    # 0.18.0 - 0.19.1 print profile_cudagraph_memory's estimate without charging it; every release through 0.20.0
    # prints the token count by blocks (kv_cache_utils.py: num_blocks // len(groups) x min block size; 0.20.1:
    # int(max_concurrency x max_model_len)); read in every release's source, 0.9.1 - 0.33.0
    VllmVersion("vLLM 0.18-0.19 (V1 engine)", (0, 18), (0, 19), 0.9, False, True, False, False,
                cuda_graph_bytes_per_graph=vl.CUDA_GRAPH_BYTES_PER_GRAPH_0_19,
                triton_topk_topp_buffer=True, sampler_holds_hidden=True, compile_benchmarks_kernels=True, **_V0_18),
    # 0.20.0: CacheConfig's default utilization 0.92 and VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS "1" (charged: its
    # log's "default since v0.21.0" notwithstanding); profile_cudagraph_memory is the same code in 0.19.1, 0.20.0 and
    # 0.21.0, so the charged per-graph ESTIMATE is 0.21's fit
    VllmVersion("vLLM 0.20.0 (V1 engine)", (0, 20, 0), (0, 20, 0), vl.DEFAULT_UTILIZATION, True, True, False, False,
                cuda_graph_bytes_per_graph=vl.CUDA_GRAPH_BYTES_PER_GRAPH_0_21,
                triton_topk_topp_buffer=True, sampler_holds_hidden=True, compile_benchmarks_kernels=True,
                explicit_prefix_caching_all=vl.MAMBA_PREFIX_CACHING_ALL_0_22, all_mode_yields_to_speculation=True,
                **_V0_18),
    # the Triton kernel's buffer is the same in 0.19.1 and 0.28.0 (read), taken as unchanged between them
    *(VllmVersion(f"vLLM {label} (V1 engine)", first, last, vl.DEFAULT_UTILIZATION, True, False, False, False,
                  cuda_graph_bytes_per_graph=vl.CUDA_GRAPH_BYTES_PER_GRAPH_0_21,
                  triton_topk_topp_buffer=True, sampler_holds_hidden=True, compile_benchmarks_kernels=True,
                  v2_architectures=frozenset(v2), v2_listed_dense_only=dense_only,
                  explicit_prefix_caching_all=all_mode, all_mode_yields_to_speculation=first < (0, 22), **_V0_18)
      for label, first, last, v2, dense_only, all_mode in (
          ("0.20.1-0.21", (0, 20, 1), (0, 21), (), False, vl.MAMBA_PREFIX_CACHING_ALL_0_22),
          ("0.22", (0, 22), (0, 22), vl.V2_ARCHITECTURES_0_22, True, vl.MAMBA_PREFIX_CACHING_ALL_0_22),
          ("0.23", (0, 23), (0, 23), vl.V2_ARCHITECTURES_0_23, True, vl.MAMBA_PREFIX_CACHING_ALL_0_22),
          ("0.24", (0, 24), (0, 24), vl.V2_ARCHITECTURES_0_24, False, vl.MAMBA_PREFIX_CACHING_ALL_0_24))),
    # 0.25 - 0.28: dense models run Model Runner V2 (config/vllm.py _is_default_v2_model_runner_model: "or not
    # model_config.is_moe", hybrid and attention-free models excluded; first in 0.25.0, absent in 0.24.0), whose
    # profile_cudagraph_memory returns 0 ("NOTE(woosuk): It is TBD whether we keep this API or not", v1/worker/gpu/
    # model_runner.py 0.25.0 - 0.28.0; implemented from 0.29.0): no graphs in their budget
    VllmVersion("vLLM 0.25 (V1 engine)", (0, 25), (0, 25), vl.DEFAULT_UTILIZATION, True, False, False, False,
                cuda_graph_bytes_per_graph=vl.CUDA_GRAPH_BYTES_PER_GRAPH_0_21,
                dense_runner_without_graph_estimate=True, triton_topk_topp_buffer=True, sampler_holds_hidden=True,
                compile_benchmarks_kernels=True, v2_architectures=vl.V2_ARCHITECTURES_0_25,
                explicit_prefix_caching_all=vl.MAMBA_PREFIX_CACHING_ALL_0_24, **_V0_18),
    # 0.26 - 0.28: 0.28's _dummy_sampler_run (V1 runner) still samples with top_k and top_p (through the Triton
    # kernel, then once more through forward_native with a generator; the peak is one call's); the null-block
    # reservation (PR 47272) first appears in 0.29.0 (kv_cache_utils.py check_enough_kv_cache_memory and
    # get_kv_cache_configs: available_memory - _pool_bytes_per_block(groups); 0.28.0 checks the whole memory)
    VllmVersion("vLLM 0.26 (V1 engine)", (0, 26), (0, 26), vl.DEFAULT_UTILIZATION, True, False, False, False,
                cuda_graph_bytes_per_graph=vl.CUDA_GRAPH_BYTES_PER_GRAPH_0_21,
                dense_runner_without_graph_estimate=True, triton_topk_topp_buffer=True, sampler_holds_hidden=True,
                compile_benchmarks_kernels=True, in_flight_batches=True, v2_architectures=vl.V2_ARCHITECTURES_0_26,
                explicit_prefix_caching_all=vl.MAMBA_PREFIX_CACHING_ALL_0_24, **_V0_18),
    # 0.27.0's memory_profiling counts total_consumed (the first release with it; 0.26.0 does not)
    VllmVersion("vLLM 0.27 (V1 engine)", (0, 27), (0, 27), vl.DEFAULT_UTILIZATION, True, False, False, False,
                cuda_graph_bytes_per_graph=vl.CUDA_GRAPH_BYTES_PER_GRAPH_0_21,
                dense_runner_without_graph_estimate=True, triton_topk_topp_buffer=True,
                counts_torch_state_before_profile=True, sampler_holds_hidden=True, compile_benchmarks_kernels=True,
                in_flight_batches=True, v2_architectures=vl.V2_ARCHITECTURES_0_27, peak_line_holds_graph_estimate=True,
                explicit_prefix_caching_all=vl.MAMBA_PREFIX_CACHING_ALL_0_24, **_V0_18),
    # 0.28.0 adds get_batch_defaults' 160 GiB tier (absent in 0.27.0, present in 0.28.0 and 0.29.0) and turns prefix
    # caching on for hybrid models (hybrid_prefix_caching: Mamba cache mode "align")
    VllmVersion("vLLM 0.28 (V1 engine)", (0, 28), (0, 28), vl.DEFAULT_UTILIZATION, True, False, False, False,
                cuda_graph_bytes_per_graph=vl.CUDA_GRAPH_BYTES_PER_GRAPH_0_21,
                dense_runner_without_graph_estimate=True, triton_topk_topp_buffer=True,
                counts_torch_state_before_profile=True, sampler_holds_hidden=True, compile_benchmarks_kernels=True,
                in_flight_batches=True, large_gpu_batch_defaults=True, v2_architectures=vl.V2_ARCHITECTURES_0_28,
                peak_line_holds_graph_estimate=True,
                hybrid_prefix_caching=True, explicit_prefix_caching_all=frozenset(), **_V0_18),
    # 0.29+: Model Runner V2 for every model it supports (config/vllm.py use_v2_model_runner), and its
    # profile_cudagraph_memory estimates the graphs (_profile_cudagraph_memory); align mode's prefill checkpoint
    # page: Mamba-2 layers from 0.32.0, Gated DeltaNet on FlashInfer's prefill (and its 64-token block alignment)
    # from 0.33.0 (checkpoint_state_kinds, gdn_checkpoints)
    # (V2's persistent sampler state counts in the non-KV figure as in 0.27 - 0.28: counts_torch_state_before_profile)
    *(VllmVersion(label, first, last, vl.DEFAULT_UTILIZATION, True, False, True, False,
                  cuda_graph_bytes_per_graph=vl.CUDA_GRAPH_BYTES_PER_GRAPH_0_21, compile_benchmarks_kernels=True,
                  in_flight_batches=True, v2_runner_every_model=True, large_gpu_batch_defaults=True,
                  counts_torch_state_before_profile=True, v2_sampler_warmup_pass=warmup,
                  peak_line_holds_graph_estimate=True,
                  hybrid_prefix_caching=True, checkpoint_state_kinds=frozenset(kinds), gdn_checkpoints=gdn,
                  explicit_prefix_caching_all=frozenset(), **_V0_18)
      for label, first, last, kinds, gdn, warmup in (
          ("vLLM 0.29-0.31 (V1 engine)", (0, 29), (0, 31), (), False, False),
          ("vLLM 0.32 (V1 engine)", (0, 32), (0, 32), ("mamba2",), False, False),
          (f"vLLM 0.33+ (V1 engine; {vl.RULES.split(' (')[0]} rules)", (0, 33), None, ("mamba2", "gated_deltanet"),
           True, True))),
)


V1_DEFAULT_FIRST = V1_0_8_RANGES[0].first  # envs.py VLLM_USE_V1: V1 by default from 0.8.0 (opt-in "1" in 0.7.x)
V0_LAST = V0_RANGES[-1].last  # V0 is modelled through 0.9.0 (0.9.1 - 0.10 still had it behind VLLM_USE_V1=0)
ENGINE_SUFFIXES = ("v0", "v1")


def engine_choice(text: str) -> tuple[str, tuple[VllmVersion, ...]]:
    """(the release, the version table to find its range in) of ``--engine vllm==X[:v0|:v1]``: ``:v0`` the V0 ranges
    (VLLM_USE_V1=0; modelled through 0.9.0), ``:v1`` the V1 engine (the default of 0.8.0 and later; V1 before 0.8.0,
    an opt-in alpha, is not modelled); KvplanError naming --engine otherwise."""
    release, sep, engine = str(text).strip().partition(":")
    if not sep:
        return release, VERSIONS
    if engine not in ENGINE_SUFFIXES:
        raise KvplanError(f"--engine: vllm=={clip_text(text, 40)}: the engine after ':' is v0 (VLLM_USE_V1=0) or v1; got "
                          f"{clip(engine, 20)}")
    from kvplan.cost.runtimes.base import parse_release

    at = parse_release("--engine", release)
    if engine == "v0" and at[:len(V0_LAST)] > V0_LAST:
        raise KvplanError(f"--engine: vllm=={clip_text(text, 40)}: vLLM's V0 engine is modelled through "
                          f"{'.'.join(map(str, V0_LAST))} (0.9.1 - 0.10 kept it behind VLLM_USE_V1=0, not modelled); "
                          f"allowed: vllm=={release} (V1) or a release up to {'.'.join(map(str, V0_LAST))} with :v0")
    if engine == "v1" and at < V1_DEFAULT_FIRST:
        raise KvplanError(f"--engine: vllm=={clip_text(text, 40)}: vLLM {release}'s V1 engine (an opt-in alpha, "
                          f"VLLM_USE_V1=1) is not modelled; allowed: vllm=={release} (its V0 engine) or :v1 from "
                          f"{'.'.join(map(str, V1_DEFAULT_FIRST))}")
    return release, (V0_RANGES if engine == "v0" else VERSIONS)


# the speculative methods 0.9.0's oracle keeps on V1 (engine/arg_utils.py _is_v1_supported_oracle)
_V1_SPECULATIVE_0_9 = ("ngram", "[ngram]", "medusa", "eagle", "eagle3", "deepseek_mtp")


def _canonical_dtype(name: str | None) -> str:
    """kvplan's name of a dtype given by any alias (float32 -> fp32, e4m3 -> fp8_e4m3); "auto" and "" as given; a
    name kvplan does not know as given (its flag refuses it where it is read)."""
    text = (name or "").strip().lower()
    if text in ("", "auto"):
        return text
    try:
        return parse_dtype(text).name
    except KvplanError:
        return text


def v1_fallback(clauses: frozenset[str], card, gpu, layout, flags: ServingFlags, kv_dtype: str | None,
                weight_dtype: str | None = None) -> str | None:
    """The clause of V1 0.8.0 - 0.9.0's _is_v1_supported_oracle (engine/arg_utils.py, read in each release) that
    sends ``card`` on ``gpu`` with these flags to V0, as vLLM names it; None: V1 serves it (VllmVersion.v1_fallbacks
    lists the clauses that differ by release)."""
    cc = getattr(gpu, "compute_capability", None)
    if gpu is not None and getattr(gpu, "vendor", "NVIDIA") != "NVIDIA":  # _warn_or_fallback(device_name)
        return f"{gpu.name} is not a CUDA GPU (_warn_or_fallback(current_platform.device_name))"
    if cc is not None and cc < 8.0:
        return f"'Compute Capability < 8.0' ({gpu.name}: {cc})"
    if card.ssm is not None:  # ModelConfig.is_v1_compatible: the architecture's SupportsV0Only
        return f"{card.hf_architecture or card.name} is not V1-compatible (ModelConfig.is_v1_compatible)"
    kv, weights = _canonical_dtype(kv_dtype), _canonical_dtype(weight_dtype)  # every alias as its dtype (float32)
    if "fp32" in (kv, weights):
        return "'--dtype torch.float32' (V1_SUPPORTED_DTYPES: bfloat16, float16)"
    if kv and kv not in ("auto", "fp16", "bf16"):
        if "any_kv_dtype" in clauses:
            return f"'--kv-cache-dtype' ({kv}: any but auto)"
        if "fp8_kv" in clauses and (not kv.startswith("fp8") or cc is None or int(cc) != 9):
            return f"'--kv-cache-dtype' ({kv}: fp8 K/V needs FlashAttention 3 on SM 9.x, fa_utils.flash_attn_supports_fp8)"
    if "lora_offload" in clauses and flags.enable_lora:
        return "LoRA (_warn_or_fallback('LORA'))"
    if "lora_offload" in clauses and flags.cpu_offload_gb:
        return "'--cpu-offload-gb'"
    if "pp" in clauses and layout.pp > 1:
        return "pipeline parallelism (_warn_or_fallback('PP'); 0.8.3+: 'Pipeline Parallelism without Ray')"
    spec = flags.speculative_config
    if spec is not None and "speculative" in clauses:
        return "'Speculative Decoding' (ngram and Eagle through _warn_or_fallback)"
    if spec is not None and "speculative_0_9" in clauses:
        import json

        try:
            value = json.loads(spec) if isinstance(spec, str) else spec
        except ValueError:  # not JSON: the features' parser refuses it, naming the flag
            return None
        method = value.get("method") if isinstance(value, dict) else None
        model = value.get("model") if isinstance(value, dict) else None
        if (method or model) not in _V1_SPECULATIVE_0_9:
            return f"'Speculative Decoding' (method {method or model!r}: V1 takes {', '.join(_V1_SPECULATIVE_0_9)})"
    return None


_FORCED_V1: dict[type, object] = {}  # VLLM.at_version's ":v1" runtimes


class VLLM(Server):
    name = "vllm"
    use_v1_env = False  # `--engine vllm==X:v1` (0.8.0 - 0.9.0): VLLM_USE_V1=1, no fallback to V0
    moe_across_dp = True  # fused_moe/config.py FusedMoEParallelConfig.make: experts over the flattened dp x tp group
    launches_replicas = True  # --data-parallel-size
    kv_follows_model_dtype = True
    newest_read = (0, 33, 0)  # the newest release whose source the rules were read in
    registry_column = "vllm"  # model_registries.FIRST_RELEASES: the first release loading each architecture
    # config/model.py _get_and_verify_max_len (0.11.0 - 0.33.0; config.py in 0.9.1, config/__init__.py in 0.10.2):
    # a --max-model-len past the derived one raises unless this is 1 (envs.py; vllm PR 7080, 2024-08)
    long_context_env = "VLLM_ALLOW_LONG_MAX_MODEL_LEN"
    # config/kv_transfer.py KVTransferConfig (kv_connector default None: no hand-over; kv_role kv_producer |
    # kv_consumer | kv_both) and the NixlConnector of distributed/kv_transfer/kv_connector/factory.py (0.33), whose
    # kv_lease_duration kvplan disagg models; docs/features/nixl_connector_usage.md launches both roles kv_both
    disagg_roles = {role: """--kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'"""
                    for role in ("prefill", "decode")}
    disagg_note = ("vLLM: a router sends each request to a prefill worker, then to a decode worker with the prefill's "
                   "kv_transfer_params (vLLM's disaggregated-serving proxy examples); NIXL must be installed")
    display_name = "vLLM"
    rules = VERSIONS[-1].label
    version = VERSIONS[-1]
    versions = tuple(v.span for v in VERSIONS)

    def decode_micro_batches(self, pp: int) -> int:
        """pp batches in flight (read in 0.9.1, 0.10.0, 0.20.0, 0.33.0): EngineCore.step_with_batch_queue keeps a
        batch_queue of max_concurrent_batches = pp_size (the multiproc and Ray executors' property 0.9.1-0.22;
        config/vllm.py VllmConfig.max_concurrent_batches 0.23+: "PP requires PP-size concurrent batches to fill the
        pipeline"), and Scheduler.schedule skips a running request whose last step has not returned (num_new_tokens
        == 0: "PP>1 and we have already scheduled all prompt tokens but they are not finished yet"), so the running
        requests are split among the batches, each in the one it was scheduled in (nothing rebalances them: an even
        split is the best case). Async scheduling is off at PP > 1 on the V1 model runner (config/vllm.py 0.33:
        "does not support it with pipeline parallelism"); on Model Runner V2 AsyncScheduler spaces a request's
        decodes pp steps apart (next_decode_eligible_step 0.23+, decode_stagger = pp_size 0.31+). V0 (0.9.x): one
        scheduler per virtual engine, pipeline_parallel_size of them, a new request to the least loaded
        (engine/llm_engine.py LLMEngine._add_processed_request)."""
        return pp

    description = ("vLLM v1 paged cache: whole blocks of block_size tokens; sliding layers free blocks that left "
                   "the window")
    flops_rule = ("vLLM: logits only for the last position of each sequence; FlashAttention over the sequence's "
                  "own tokens (sliding: last W); MLA: expand in prefill, absorb in decode (MLACommonImpl)")
    kv_dtypes = ("fp32", "fp16", "bf16", "fp8_e4m3", "fp8_e5m2", "int8", "int4")
    paged = True
    takes_estimate_block = True
    reference_cache = True
    _dtype_hint = (" (vLLM kv_cache_dtype: auto, fp8, fp8_e4m3, fp8_e5m2; 0.20+ int8_per_token_head, 0.25+ "
                   "int4_per_token_head; not modelled: fp8_per_token_head, nvfp4, turboquant_*)")
    extra_flags = frozenset({"speculative_config", "shared_prefix_len", "enable_lora", "max_loras", "max_lora_rank",
                             "flashinfer_sampler", "pp_layer_partition", "limit_mm_per_prompt", "mm_encoder_tp_mode",
                             "cold_compile", "cpu_offload_gb", "enable_prefix_caching"})

    def check_dtype(self, kv_dtype) -> None:
        """Refuse int8/int4 K/V in a release without vLLM's per-token-head cache dtype (PER_TOKEN_HEAD), and fp8 K/V
        where the release's --kv-cache-dtype lacks it (LAUNCH_FLAG_FIRST)."""
        super().check_dtype(kv_dtype)
        if kv_dtype.name in ("fp8_e4m3", "fp8_e5m2"):
            self._refuse_before_flag("--kv-dtype", f"--kv-cache-dtype {kv_dtype.name}")
        layout = PER_TOKEN_HEAD.get(kv_dtype.name)
        if layout is not None and self.version.first < layout.first:
            raise KvplanError(f"--kv-dtype: {self.rules} has no {kv_dtype.name} K/V cache ({layout.flag} is first in "
                              f"vLLM {'.'.join(map(str, layout.first))}.0); allowed here: {', '.join(self._dtypes_here())}"
                              f", or --engine vllm=={'.'.join(map(str, layout.first))}")

    def _dtypes_here(self) -> list[str]:
        return [n for n in self.kv_dtypes if n not in PER_TOKEN_HEAD or self.version.first >= PER_TOKEN_HEAD[n].first]

    def kv_dtypes_for(self, card) -> tuple[str, ...]:
        """This release's dtypes; an MLA model without int8/int4 (kv_layout)."""
        return tuple(n for n in self._dtypes_here() if card.mla is None or n not in PER_TOKEN_HEAD)

    def cache_type_flags(self, kv_dtype, llama):
        """vLLM's own --kv-cache-dtype spellings of its per-token-head caches (int8_per_token_head, a log's
        ``kv_cache_dtype``) read as the int8/int4 whose layout ``kv_layout`` gives; other names unchanged."""
        flags = {p.flag: name for name, p in PER_TOKEN_HEAD.items()}
        return flags.get(kv_dtype, kv_dtype) if isinstance(kv_dtype, str) else kv_dtype, llama

    def kv_layout(self, kv_dtype, card):
        """int8/int4: vLLM's per-token-head layout (PER_TOKEN_HEAD), which only the Triton attention backend stores;
        no MLA backend takes it (supported_kv_cache_dtypes of every v1/attention/backends/mla backend, 0.20.0 -
        0.33.0: auto, float16, bfloat16, fp8...), so an MLA model is refused as vLLM finds no backend."""
        layout = PER_TOKEN_HEAD.get(kv_dtype.name)
        if layout is None:
            return kv_dtype
        if card.mla is not None:
            raise KvplanError(f"--kv-dtype: vLLM stores {kv_dtype.name} K/V ({layout.flag}) only on its Triton "
                              f"attention backend, which does not run MLA ({card.name}); allowed: fp8_e4m3 or the "
                              "model dtype")
        return layout.dtype

    def kv_layout_note(self, kv_dtype):
        layout = PER_TOKEN_HEAD.get(kv_dtype.name)
        if layout is None or kv_dtype != layout.dtype:
            return None
        return (f"{kv_dtype.name} KV as vLLM stores it (--kv-cache-dtype {layout.flag}, 0.{layout.first[1]}+, Triton "
                f"attention backend): {kv_dtype.describe_element()} values plus one fp32 scale per token, KV head and "
                "K/V (v1/kv_cache_interface.py page_size_bytes; TritonAttentionBackend.customize_spec), not kvplan's "
                "ideal per-64 groups.")

    def kv_dtype_name(self, s: Setup) -> str:
        layout = PER_TOKEN_HEAD.get(s.kv_t.name)
        return layout.flag if layout is not None else s.kv_t.name

    def at_version(self, text: str) -> VLLM:
        """The runtime for the release ``text`` (``--engine vllm==0.11``): the modelled range that covers it; a
        ``:v0`` / ``:v1`` suffix picks the engine of a release that had both (engine_choice)."""
        release, table = engine_choice(text)
        rt = at_range(self, VLLM, release, table)
        if not str(text).strip().endswith(":v1") or rt.version.v1_fallbacks is None:
            return rt
        key = type(rt)  # VLLM_USE_V1=1: one subclass per pinned release, as at_range keeps one per release
        if key not in _FORCED_V1:
            _FORCED_V1[key] = type(f"{key.__name__}_v1", (key,), {"use_v1_env": True})()
        return _FORCED_V1[key]

    def engine_for(self, card, gpu, layout, flags: ServingFlags, kv_dtype: str | None,
                   weight_dtype: str | None = None) -> tuple[VLLM, str | None]:
        """(the engine `vllm serve` runs ``card`` with, why where it is not this one): V1 0.8.0 - 0.9.0 falls back to
        V0 where engine/arg_utils.py _is_v1_supported_oracle says so (VllmVersion.v1_fallbacks: v1_fallback), as it
        does without VLLM_USE_V1; the V0 range of the same release is planned, and the note names the clause."""
        if self.version.v1_fallbacks is None:
            return self, None
        why = v1_fallback(self.version.v1_fallbacks, card, gpu, layout, flags, kv_dtype, weight_dtype)
        if why is None:
            return self, None
        release = self.pinned or ".".join(map(str, self.version.first))
        if self.use_v1_env:  # VLLM_USE_V1=1: vLLM raises (_raise_or_fallback) or runs a V1 path not modelled here
            raise Refused(f"--engine: vllm=={release}:v1 (VLLM_USE_V1=1) with {why}: vLLM refuses it or runs a V1 "
                          f"feature of {release} kvplan does not model; allowed: vllm=={release} (vLLM's own choice, "
                          f"V0 here) or vllm=={release}:v0")
        return self.at_version(f"{release}:v0"), (
            f"vLLM {release} runs this on its V0 engine, not V1 (engine/arg_utils.py _is_v1_supported_oracle: {why}; "
            "V1 would be chosen only by VLLM_USE_V1=1): planned with V0's rules.")

    def log_engine(self, spec: str, v0_lines: bool) -> str:
        """The engine spec of a log that states ``spec``'s release: ``:v0`` for a V0 start-up (``v0_lines``: "# GPU
        blocks", "Memory profiling takes", "Initializing a V0 LLM engine") of a release whose default is V1 (0.8.0 -
        0.9.0), so its V0 rules plan it."""
        chosen = v0_lines and self.version.v1_fallbacks is not None and ":" not in spec  # an engine given stays
        return f"{spec}:v0" if chosen else spec

    # -- cache rules --

    def positions_held(self, window: int | None, run: CacheRun) -> int:
        return self.blocks_held(window, run) * run.block_size

    def cross_positions(self, run: CacheRun) -> int:
        return cdiv(run.encoder_len, run.block_size) * run.block_size

    def chunk_positions(self, chunk: int, run: CacheRun) -> int:
        """``ChunkedLocalAttentionManager``: before a step from C = L - 1 computed tokens, the (C // chunk) * chunk
        tokens before the current chunk are skipped and their whole blocks freed (get_num_skipped_tokens). Before
        0.14 the layer is full attention (serving_vllm.without_hybrid_manager): every block held."""
        if not self.version.chunked_local_groups:
            return self.positions_held(None, run)
        skipped = (run.seq_len - 1) // chunk * chunk
        return (cdiv(run.seq_len, run.block_size) - skipped // run.block_size) * run.block_size

    @staticmethod
    def blocks_held(window: int | None, run: CacheRun) -> int:
        """Blocks one sequence holds during the decode step that brings it to ``seq_len`` tokens.

        Full attention and MLA: cdiv(L, block_size) (``FullAttentionManager``, nothing is freed before the request
        ends). Sliding window: before allocating a step, ``SlidingWindowManager.remove_skipped_blocks(C)`` frees the
        blocks wholly before token C - W + 1 (C computed tokens), so a step from C = L - 1 to L holds
        cdiv(L, bs) - max(0, L - W) // bs blocks (vllm/v1/core/single_type_kv_cache_manager.py). A prefill chunk of
        n tokens frees nothing while it runs and can briefly hold more; this is the steady decode state.
        """
        held = cdiv(run.seq_len, run.block_size)
        if window:
            held -= max(0, run.seq_len - window) // run.block_size
        return held

    # -- options --

    def scheduler_defaults(self, gpu, total: int, max_model_len: int) -> tuple[int, int]:
        """(max_num_batched_tokens, max_num_seqs) this release takes when neither is given: by the GPU's memory
        (serving_vllm.batch_defaults; V1 0.8.0 - 0.8.5: batch_defaults_0_8, whose device-name test reads the catalog's
        GPU name, "H100-SXM" for torch's "NVIDIA H100 80GB HBM3"), V0's 256 sequences and the batch that covers
        max_model_len."""
        v = self.version
        mnbt, seqs = (vl.batch_defaults_0_8(total, gpu.name, v.batch_rule) if v.batch_rule  # V1 0.8.0 - 0.8.5
                      else vl.batch_defaults(total, gpu.name, v.large_gpu_batch_defaults))
        mnbt = v0.max_num_batched_tokens(max_model_len) if v.mnbt_covers_max_model_len else mnbt
        return mnbt, v.fixed_max_num_seqs or seqs

    def resolve(self, flags: ServingFlags, card, gpu, total, layout, max_model_len) -> Options:
        v = self.version
        mnbt, seqs = self.scheduler_defaults(gpu, total, max_model_len)
        if card.mla is not None and not v.mla_latent_cache:
            raise KvplanError(f"--engine: {v.label.split(' (')[0]} caches {card.name}'s per-head K/V, not MLA's "
                              "latent (vLLM's MLA attention is first in 0.7.1); not modelled: plan it with --engine "
                              "vllm==0.7.1 or later")
        if v.v0_engine and card.ssm is not None:
            raise KvplanError(f"--engine: vLLM V0 keeps state layers in its own MambaCacheManager (not modelled); "
                                  f"plan {card.name} with --engine vllm==0.10 or later")
        block = (self._block_size(flags.block_size, card, gpu) if flags.block_size is not None
                 else self.block_size_on(card, gpu, flags.kv_cache_dtype))
        util = utilization(flags.gpu_memory_utilization, self.version.default_utilization)
        self._refuse_sglang_only(flags)
        if flags.kv_cache_memory is not None and not flags.kv_cache_memory_what_if:
            self._refuse_before_flag("--kv-cache-memory", "--kv-cache-memory-bytes")
        if flags.mm_encoder_tp_mode is not None:
            self._refuse_before_flag("--mm-encoder-tp-mode", "--mm-encoder-tp-mode")
        if flags.enable_prefix_caching:  # off: V0's default, left off the line where --no- is not verified
            self._refuse_before_flag("--enable-prefix-caching", "--enable-prefix-caching")
        kv_mem = None if flags.kv_cache_memory is None else positive_size("--kv-cache-memory", flags.kv_cache_memory)
        if flags.cold_compile and not v.compile_benchmarks_kernels:
            raise KvplanError(f"--cold-compile: modelled for vLLM 0.11.1 and later (Inductor's combo-kernel benchmark "
                              f"while compiling), not {v.label}")
        split = None
        if flags.pp_layer_partition is not None:
            from kvplan.cost.parallel import custom_pp_partition

            split = custom_pp_partition(flags.pp_layer_partition, card.num_layers, layout.pp)
        offload = _offload_gb(flags, card)
        features = vf.resolve_features(flags, card, layout)
        self._check_mtp_spelling(features["speculative"])
        forced = self._mla_backend_note(flags, card, gpu) or (None if flags.block_size in (None, block) else (
            f"--block-size {flags.block_size}: {v.label.split(' (')[0]} serves {card.name} in blocks of {block} on "
            f"{gpu.name} (platforms/cuda.py check_and_update_config forces the MLA backend's block, 'Forcing kv cache "
            f"block size to {block}'); the launch line keeps the flag as given"))
        caching = flags.enable_prefix_caching
        self.check_prefix_caching(card, caching)
        if caching is False and features["shared_prefix_len"]:
            raise KvplanError("--shared-prefix-len: shares blocks through prefix caching, which "
                              "--no-enable-prefix-caching turns off; give one of them")
        return Options(util=util, util_given=flags.gpu_memory_utilization is not None, kv_cache_memory=kv_mem,
                       block_size=block, pp_layer_partition=split, page_note=forced,
                       cpu_offload_gb=offload, prefix_caching=caching,
                       **self.state_options(card, gpu, features["speculative"], caching),
                       mnbt=_given("--max-num-batched-tokens", flags.max_num_batched_tokens, mnbt),
                       max_num_seqs=_given("--max-num-seqs", flags.max_num_seqs, seqs),
                       flashinfer_sampler=flags.flashinfer_sampler, cold_compile=flags.cold_compile,
                       **features,
                       **vm.resolve_mm(flags, card, v))

    def vocab_every_stage(self, card) -> frozenset[str]:
        return self.version.pp_vocab_every_stage(card.hf_architecture)

    def check_servable(self, card, layout) -> None:
        if layout.expert_parallel:  # vLLM's --enable-expert-parallel is modelled (kvplan.cost.parallel)
            layout = type(layout)(layout.tp, layout.pp, layout.dp, False)
        super().check_servable(card, layout)

    def served_card(self, card):
        """Shared blocks (Zamba, Zamba2): vLLM serves Zamba2 only (models/zamba2.py); its Zamba2Attention builds
        ``QKVParallelLinear(2h, head_dim, num_attention_heads)`` without num_kv_heads, so K/V weights and caches are
        num_attention_heads wide, and Zamba2ForCausalLM always ties lm_head to embed_tokens."""
        if card.shared_blocks is None:
            return card, ()
        refuse_zamba_v1(card, self.name)
        from kvplan.model.catalog import card_from_dict

        notes = ["Zamba2 on vLLM (models/zamba2.py): each shared block's weights once per GPU, split over TP as its "
                 "layers are (q/k/v and gate_up by outputs, o_proj and down by inputs, each adapter's A and B by "
                 "outputs), every hybrid layer's Linear(hidden, hidden) replicated; each hybrid layer caches its own "
                 "K/V (one Attention per invocation) beside every layer's Mamba-2 states."]
        data = card.model_dump(exclude_none=True)
        if card.num_kv_heads != card.num_heads:
            data["num_kv_heads"] = card.num_heads
            notes.append(f"vLLM's Zamba2Attention builds K/V with num_attention_heads ({card.num_heads}) heads "
                         f"whatever num_key_value_heads ({card.num_kv_heads}) says (QKVParallelLinear without "
                         "num_kv_heads): the weights and K/V cache here are sized as vLLM allocates them; a "
                         "checkpoint with fewer K/V heads does not match its shapes.")
        if not card.tie_embeddings:
            data["tie_embeddings"] = True
            notes.append("vLLM's Zamba2ForCausalLM ties lm_head to embed_tokens whatever tie_word_embeddings says: "
                         "no separate LM head is held.")
        return card_from_dict(data, origin=f"{card.name} as vLLM builds it"), tuple(notes)

    def overhead_defaults(self, gpus: int) -> tuple[int, int, int]:
        non_torch = vl.DEFAULT_NON_TORCH_BYTES if gpus == 1 else vl.DEFAULT_NON_TORCH_MULTI_GPU_BYTES
        graphs = vl.DEFAULT_CUDA_GRAPH_BYTES if self.version.cuda_graphs_in_budget else 0  # before 0.20: outside
        return non_torch, graphs, vl.DEFAULT_CONTEXT_BYTES

    def cuda_graph_default(self, opts: Options, default: int, card) -> int:
        """0.20+: profile_cudagraph_memory's ESTIMATE for this capture list (serving_vllm.cuda_graph_estimate_bytes
        over cudagraph_counts of max_num_seqs and max_num_batched_tokens, decode queries of 1 + k speculative
        tokens); before 0.20 the graphs are captured after the pool is sized: ``default`` (0); 0.25 - 0.28 dense
        models: 0 (``runs_graphless_v2``)."""
        v = self.version
        if not v.cuda_graphs_in_budget or v.cuda_graph_bytes_per_graph is None:
            return default
        if self.runs_graphless_v2(card, opts):
            return 0
        return vl.cuda_graph_estimate_bytes(_graph_counts(opts), v.cuda_graph_bytes_per_graph)

    def peak_line_holds_graphs(self) -> bool:
        return self.version.peak_line_holds_graph_estimate

    def runs_v2(self, card, opts: Options) -> bool:
        """Whether this version serves ``card`` with Model Runner V2 (0.29+: every model, unless a feature V2 lacks
        sends it back to V1: ngram speculation, config/vllm.py _get_v2_model_runner_unsupported_features, 0.29.0;
        0.22 - 0.28: ``runs_graphless_v2``)."""
        ngram = opts.speculative is not None and opts.speculative.method.startswith("ngram")
        return (self.version.v2_runner_every_model and not ngram) or self.runs_graphless_v2(card, opts)

    def check_block_choice(self, block: int) -> None:
        """--block-size among this release's argparse choices (VllmVersion.block_size_choices), as plan checks it."""
        require_positive("--block-size", block, MAX_BLOCK_TOKENS)
        v = self.version
        if v.block_size_choices is not None and block not in v.block_size_choices:
            raise KvplanError(f"--block-size: {v.label} takes {', '.join(map(str, v.block_size_choices))} "
                              f"(engine/arg_utils.py: the --block-size choices), got {block}")

    def _block_size(self, block: int, card, gpu) -> int:
        """A given --block-size as this release takes it: argparse's choices (VllmVersion.block_size_choices), and on
        NVIDIA GPUs a multiple of 16 for standard attention (serving_vllm.block_size_refusal)."""
        self.check_block_choice(block)
        v = self.version
        why = None if v.v0_engine else vl.block_size_refusal(block, card.mla is not None, gpu.vendor)
        if why:
            raise KvplanError(f"--block-size: {why}, got {block}")
        return block if v.v0_engine else vl.forced_mla_block(block, card, gpu.compute_capability, v.mla_block_rule)

    def _mla_backend_note(self, flags: ServingFlags, card, gpu) -> str | None:
        """0.18+, an MLA model on an NVIDIA GPU: the attention backend vLLM's selector takes for the K/V dtype and a
        given --block-size (serving_vllm.mla_backend). None found, vLLM raises ("No valid attention backend found"),
        and so does kvplan: fp8_e5m2 K/V (no MLA backend lists it) as Refused, a block no backend takes as bad
        input. A note where the given block rules out the backends vLLM takes without it (its warning "--block-size N
        precluded higher-priority backend(s) ..."); else None."""
        v, cc = self.version, gpu.compute_capability
        if card.mla is None or v.mla_block_rule != "preferred" or gpu.vendor != "NVIDIA" or cc is None:
            return None
        kv, given, release = flags.kv_cache_dtype, flags.block_size, v.label.split(" (")[0]
        default = vl.mla_backend(card, cc, kv)
        if default is None:
            raise Refused(f"--kv-dtype: {release} has no MLA attention backend for {kv} K/V on {gpu.name} "
                          "(supported_kv_cache_dtypes of each v1/attention/backends/mla backend: auto, float16, "
                          "bfloat16, fp8, fp8_e4m3; platforms/cuda.py: 'No valid attention backend found'); allowed: "
                          "fp8_e4m3 or the model dtype")
        if given is None:
            return None
        backend = vl.mla_backend(card, cc, kv, given)
        ahead = [b for b in vl.mla_backends(cc) if b.takes(int(cc), card.mla.qk_nope_head_dim, kv, None)]
        if backend is None:
            takes = ", ".join(f"{b.name} {' or '.join(map(str, b.blocks))}" for b in ahead)
            sizes = sorted({n for b in ahead for n in b.blocks})
            least = [n for n in sizes if not any(n % m == 0 for m in sizes if m < n)]
            raise KvplanError(f"--block-size: {release} finds no MLA attention backend for {card.name} on {gpu.name} "
                              f"with blocks of {given} tokens (get_supported_kernel_block_sizes, a block a multiple "
                              f"of one: {takes}; platforms/cuda.py: 'No valid attention backend found'); allowed: a "
                              f"multiple of {' or '.join(map(str, least))}")
        if backend is default:
            return None
        ruled_out = ", ".join(f"{b.name} ({' or '.join(map(str, b.blocks))})" for b in ahead[:ahead.index(backend)])
        return (f"--block-size {given}: {release} serves {card.name} on {gpu.name} with the {backend.name} attention "
                f"backend (v1/attention/backends/mla/{backend.file}), not {default.name}: blocks of {given} rule out "
                f"{ruled_out} (platforms/cuda.py get_attn_backend_cls: '--block-size {given} precluded higher-"
                f"priority backend(s)'); the pool's blocks hold the same K/V under either")

    def block_size_on(self, card, gpu, kv_dtype: str | None = None) -> int:
        """The block this release takes without --block-size: config/cache.py's default, or its MLA block on ``gpu``
        (serving_vllm.default_block_size under the version's mla_block_rule; ``kv_dtype``: the K/V dtype's name)."""
        return vl.default_block_size(card, gpu.compute_capability, self.version.mla_block_rule, kv_dtype)

    def prefix_caching_hybrid(self, card, enabled: bool | None = None) -> bool:
        """Whether this release serves ``card``, a hybrid (state and attention layers), with prefix caching on (Mamba
        cache mode "align" or "all", ``mamba_cache_mode``): by default where VllmVersion.hybrid_prefix_caching, or as
        ``enabled`` (--enable-prefix-caching / --no-enable-prefix-caching, checked by check_prefix_caching); False
        for other models."""
        if card.ssm is None or not card.attention_layers:
            return False
        return self.version.hybrid_prefix_caching if enabled is None else enabled

    def mamba_cache_mode(self, card, enabled: bool | None = None, speculative=None) -> str:
        """The Mamba cache mode of ``card``'s state layers (MambaModelConfig.verify_and_update_config, models/config.py
        0.20.0 - 0.33.0): "none" with prefix caching off; on, "all" where --enable-prefix-caching is given and the
        release puts the architecture there (VllmVersion.explicit_prefix_caching_all: 0.20 - 0.27, the models
        declaring SupportsMambaPrefixCaching; 0.20 - 0.21 not with ``speculative``, all_mode_yields_to_speculation),
        else "align" (0.28+'s default for every hybrid keeps "align")."""
        if not self.prefix_caching_hybrid(card, enabled):
            return "none"
        v = self.version
        listed = v.explicit_prefix_caching_all or frozenset()
        if speculative is not None and v.all_mode_yields_to_speculation:
            listed = frozenset()
        return "all" if enabled and card.hf_architecture in listed else "align"

    def check_prefix_caching(self, card, enabled: bool | None) -> None:
        """Refuse --enable-prefix-caching where kvplan has not verified the Mamba cache mode it gives: a hybrid on a
        release before 0.20, an attention-free state model (platforms/interface.py _align_hybrid_block_size runs for
        is_hybrid models only, so in mode "all" an attention-free model's mamba_block_size stays the 16-token block,
        below the Mamba-2 chunk its prefill kernels step by: not modelled)."""
        if not enabled or card.ssm is None:
            return
        v = self.version
        if not card.attention_layers:
            raise KvplanError(f"--enable-prefix-caching: not modelled for an attention-free state model ({card.name}: "
                              "its Mamba cache mode under prefix caching is not verified); plan it without the flag")
        if v.explicit_prefix_caching_all is None:
            raise KvplanError(f"--enable-prefix-caching: not modelled for a hybrid on {v.label} (its Mamba cache mode "
                              "is verified from vLLM 0.20: 0.19's hybrid configuration is other code); use "
                              "--engine vllm==0.20 or later, or leave the flag off")

    def gdn_checkpoints_on(self, card, gpu, enabled: bool | None = None) -> bool:
        """0.33+: a Gated DeltaNet hybrid in align mode on SM 9.0 exports prefill checkpoints (FlashInfer's prefill,
        VllmVersion.gdn_checkpoints): one more page per state group and request, the block aligned to 64 tokens."""
        return (self.version.gdn_checkpoints and self.prefix_caching_hybrid(card, enabled)
                and card.ssm.kind == "gated_deltanet" and getattr(gpu, "compute_capability", None) == 9.0)

    def speculative_state_blocks(self, speculative) -> int:
        """The pages a state group holds per request for the speculative tokens, where this release counts them
        (VllmVersion.state_pages_count_speculative: MambaSpec num_speculative_blocks, 0.15+)."""
        return speculative.k if speculative is not None and self.version.state_pages_count_speculative else 0

    def state_options(self, card, gpu, speculative, enabled: bool | None = None) -> dict:
        """The Options of a state model's pages (serving_vllm.state_pages): the Mamba cache mode this release takes
        (``mamba_cache_mode``), the pages one request holds per state group (the speculative tokens where the
        release counts them, align mode's checkpoint page where the card's state layers declare one; mode "all": the
        speculative ones, plus one per block of the request, serving_vllm.all_mode_pages) and the alignment of the
        hybrid block (align mode's checkpoint alignment; mode "all": the Mamba chunk, serving_vllm.mamba_chunk_size)."""
        if card.ssm is None:
            return {}
        mode = self.mamba_cache_mode(card, enabled, speculative)
        spec = self.speculative_state_blocks(speculative)
        if mode == "all":
            return dict(state_pages=spec, mamba_cache_mode=mode, state_alignment=vl.mamba_chunk_size(card.ssm))
        align = mode == "align"
        v = self.version
        gdn = self.gdn_checkpoints_on(card, gpu, enabled)
        checkpoint = int(align and (gdn if card.ssm.kind == "gated_deltanet" else card.ssm.kind
                                    in v.checkpoint_state_kinds))
        return dict(state_pages=vl.state_pages(align, spec, checkpoint), mamba_cache_mode=mode,
                    state_alignment=vl.GDN_CHECKPOINT_ALIGNMENT if gdn else 1)

    def runs_graphless_v2(self, card, opts: Options) -> bool:
        """0.22 - 0.28: Model Runner V2, whose profile_cudagraph_memory returns 0 and whose dummy sampler takes no
        top-k/top-p, runs a model of the release's default architecture list (0.22 - 0.23: if neither MoE nor
        quantized; a hybrid one only from 0.27) and, from 0.25, any dense model (not MoE, no state layers), unless a
        feature V2 lacks sends it back to V1 (ngram speculation: _get_v2_model_runner_unsupported_features)."""
        v = self.version
        ngram = opts.speculative is not None and opts.speculative.method.startswith("ngram")
        listed = card.hf_architecture in v.v2_architectures and (card.ssm is None or v.first >= (0, 27))
        if v.v2_listed_dense_only:
            listed = listed and card.moe is None and card.quantization is None
        dense = v.dense_runner_without_graph_estimate and card.moe is None and card.ssm is None
        return (listed or dense) and not ngram

    def hybrid_block(self, card, kv_t, layout, opts, state_t):
        """vLLM hybrid (attention + state layers): (the block size raised so one attention page holds a state page,
        the state page padded to the attention page, the unpadded state page) by serving_vllm.hybrid_block_size,
        with one rank's shapes and align mode's checkpoint alignment (``opts.state_alignment``); other models keep
        the block."""
        block_size = opts.block_size
        if card.ssm is None:
            return block_size, None, 0
        from kvplan.cost.parallel import Layout, rank_layer_specs

        per_layer = [specs for _, specs in rank_layer_specs(card, kv_t, self, Layout(tp=layout.tp), 0,
                                                            state_t=state_t)]
        attn = next((sp.bytes_per_token for specs in per_layer for sp in specs if not sp.per_sequence), 0)
        mamba = next(sum(sp.bytes_per_token for sp in specs if sp.per_sequence) for specs in per_layer
                     if any(sp.per_sequence for sp in specs))
        if not card.attention_layers:  # attention-free: one MambaSpec group, nothing to unify
            return block_size, None, mamba
        return (*vl.hybrid_block_size(attn, mamba, block_size, hybrid_alignment(card), opts.state_alignment), mamba)

    def held_pages(self, spec, run: CacheRun) -> int:
        """Pages one sequence holds in a KV cache group of ``spec``: a state group's pages per request
        (serving_vllm.pages_per_request), an attention group's ``positions_held`` in blocks."""
        if spec.per_sequence:
            return vl.pages_per_request(spec, run.seq_len, run.block_size, 0)
        return spec.positions_held(self, run) // run.block_size

    def cache_groups(self, card, kv_t, block_size: int, gpu=None, prefix_caching: bool | None = None):
        """V1: the plan's block and KV cache groups at TP 1 (``hybrid_block``'s unified pages, ``_kv_cache_groups``
        with the plan's state dtype and this release's state pages: ``state_options`` without speculative decoding,
        on ``gpu`` where given, with --enable-prefix-caching / --no-enable-prefix-caching as ``prefix_caching``); V0
        (one block table, no groups) or a card that caches nothing: None."""
        if self.version.v0_engine or not card.has_kv_cache:
            return None
        return _cache_groups(self, card, kv_t, block_size, gpu, prefix_caching)

    # -- budget --

    def stages(self, s: Setup) -> list[Stage]:
        """Each stage's budget over vLLM's split: VLLM_PP_LAYER_PARTITION when given (--pp-layer-partition), else
        get_pp_indices' default (kvplan.cost.parallel.pp_partition); MXFP4 experts padded for this version's
        backend on this GPU (``mxfp4_loaded``)."""
        s = mxfp4_loaded(s)
        if s.opts.cold_compile and _eager(s):
            raise KvplanError("--cold-compile: --cuda-graph-memory 0 is vLLM's --enforce-eager, which turns "
                              "torch.compile off (config/vllm.py: CompilationMode.NONE), so nothing compiles in the "
                              "profile; allowed: one of them")
        if s.opts.pp_layer_partition is None:
            return super().stages(s)
        from kvplan.cost.parallel import stage_ranges

        parts = stage_ranges(list(s.opts.pp_layer_partition))
        return [self.stage(s, i, parts) for i in range(s.layout.pp)]

    def held_stages(self, s: Setup, sts: list[Stage]):
        """The base's, with the MXFP4 experts as this version loads them on this GPU (``mxfp4_loaded``, as the
        stages' weights hold them)."""
        return super().held_stages(mxfp4_loaded(s), sts)

    def stage(self, s: Setup, pp_rank: int, parts: list[range]) -> Stage:
        """The base budget, plus the draft model's weights and K/V layers and the LoRA slots (vllm_features); V1
        0.8.0 - 0.9.0 charges the CUDA context (--context-memory) inside it as well (VllmVersion.
        peak_counts_all_non_torch, serving_vllm.available_kv_bytes_0_8)."""
        st = super().stage(s, pp_rank, parts)
        params, tower = vm.skipped_tower(s)  # --limit-mm-per-prompt 0 for every modality: no tower is built
        if tower:
            st = s.charged(st, -tower, weights=st.weights - tower, params=st.params - params)
        rounding = _allocator_rounding(s, pp_rank, parts)
        st = _with_offload(s, s.charged(st, rounding, weights=st.weights + rounding, rounding=rounding))
        cached = _cached_free(s, pp_rank, parts)
        if cached:
            st = s.charged(st, cached, non_torch=st.non_torch + cached, cached_free=cached)
        cold = _cold_compile_peak(s, pp_rank, parts)
        if cold > st.activation:  # a first boot's compile sets the profile's torch peak (--cold-compile)
            st = s.charged(st, cold - st.activation, activation=cold)
        st = vf.with_features(s, st)
        extra = vm.data_parallel_extra(s)  # --mm-encoder-tp-mode data: the vision tower whole on every rank
        st = s.charged(st, extra, weights=st.weights + extra) if extra else st
        if self.version.peak_counts_all_non_torch and s.kv_cache_memory is None:  # V1 0.8.0 - 0.9.0
            peak = st.requested - st.available + s.context  # every non-KV byte charged, and what was in use at start
            # the table's "requested": int(total x util) less the context, so that its rows add up to the pool to
            # the byte (int(x - peak) = int(x) - peak for a whole peak, available_kv_bytes_0_8)
            st = st.replaced(requested=int(s.total * s.util) - s.context,
                             available=vl.available_kv_bytes_0_8(s.total, s.util, peak))
        return st

    def mla_load_bytes(self, s: Setup, layers: int) -> int:
        """V0 0.7.1 - 0.7.3: the absorbed MLA weights (serving_vllm.mla_absorbed_bytes); otherwise the W_UK / W_UV
        copies of a quantized kv_b_proj (Runtime.mla_load_bytes)."""
        if self.version.mla_absorbed_weights:
            return vl.mla_absorbed_bytes(s.card, s.layout.tp, layers, s.w_t.activation_bytes)
        return super().mla_load_bytes(s, layers)

    def activation(self, s: Setup, last_stage: bool) -> int:
        """The profile run's peak: forward of max_num_batched_tokens tokens, sampler on max_num_seqs rows."""
        if s.activation is not None:
            return s.activation
        from kvplan.cost.parallel import moe_tp, pad_vocab

        mnbt = vl.scheduled_tokens(s.mnbt, s.max_num_seqs, s.max_model_len)
        act_bytes = s.w_t.activation_bytes
        rows, padded = min(s.max_num_seqs, mnbt), pad_vocab(s.card.vocab_size)
        forward = vl.profile_activation_bytes(s.card, s.layout.tp, act_bytes, mnbt, rows, padded, False,
                                              moe_tp(s.layout), self.version.profile_holds_qkv,
                                              self.version.moe_separate_caches)
        text = max(forward, self.sampler_peak(s, (mnbt, rows), act_bytes) if last_stage else 0)
        return vm.profile_bytes(s, text, act_bytes)  # a multimodal card: the encoder's dummy batch too

    def sampler_peak(self, s: Setup, batch: tuple[int, int], act_bytes: int) -> int:
        """The dummy sampler's peak after a forward of ``batch`` = (tokens, rows): Model Runner V2's logits alone
        (where V2 runs: 0.22 - 0.28 by its default lists, 0.29 - 0.32 every model); 0.33+'s warmup-param pass
        (serving_vllm.v2_warmup_sampler_bytes) beside the forward's output profile_run holds; else the V1 runner's (and V0's): the sort's tensors (serving_vllm.sorting_sampler_bytes) or the
        float32 copies, plus the hidden states profile_run holds and the Triton top-k/top-p kernel's buffer where
        this version runs it and the catalog knows the GPU's SM count."""
        from kvplan.cost.parallel import pad_vocab

        (tokens, rows), padded = batch, pad_vocab(s.card.vocab_size)
        h = s.card.hidden_size
        if self.runs_v2(s.card, s.opts) and self.version.v2_sampler_warmup_pass:
            # profile_run holds _dummy_run's hidden_states and hidden_states[logits_indices] (no noise) meanwhile
            return (vl.v2_warmup_sampler_bytes(rows, padded, s.card.vocab_size, act_bytes, _v2_flashinfer(s),
                                               _v2_triton_buffer_bytes(s, rows))
                    + vl.held_hidden_bytes(tokens, rows, h, act_bytes, noise=False))
        if self.runs_v2(s.card, s.opts):  # 0.22 - 0.32: profile_run holds the forward's output and its last rows
            # while _dummy_sampler_run samples (v1/worker/gpu/model_runner.py, read in 0.22.1, 0.24.0, 0.25.0, 0.28.0,
            # 0.29.0, 0.30.0, 0.32.0: ``hidden_states, sample_hidden_states = self._dummy_run(...)``; no rand_like)
            return (vl.v2_dummy_sampler_bytes(rows, padded, s.card.vocab_size, act_bytes)
                    + vl.held_hidden_bytes(tokens, rows, h, act_bytes, noise=False))
        v = self.version
        held = (vl.held_hidden_bytes(tokens if v.profile_keeps_forward_output else 0, rows, h, act_bytes,
                                     v.dummy_sampler_noise) if v.sampler_holds_hidden
                else v0.held_forward_bytes(tokens, h, act_bytes) if self.version.v0_engine else 0)
        if _sorts(s):
            return vl.sorting_sampler_bytes(rows, s.card.vocab_size, padded, act_bytes) + held
        return vl.dummy_sampler_bytes(rows, padded, act_bytes) + held + _triton_buffer_bytes(s, rows)

    def non_torch_default(self, opts: Options, default: int, card) -> int:
        """The non-torch growth default, plus Model Runner V2's persistent sampler state where this version's non-KV
        figure counts it (0.27+: serving_vllm.v2_sampler_state_bytes; the log's "consumed memory (weights +
        non-torch)" holds it). With pipeline parallelism only the last stage holds it; kvplan charges every stage."""
        if not (self.version.counts_torch_state_before_profile and self.runs_v2(card, opts)):
            return default
        reqs = min(opts.max_num_seqs, opts.mnbt)  # arg_utils: max_num_seqs = min(max_num_seqs, max_num_batched_tokens)
        return default + vl.v2_sampler_state_bytes(reqs, card.vocab_size, _decode_query_len(opts))

    def activation_estimated(self, s: Setup) -> bool:
        return s.activation is None

    def check_budget(self, s: Setup, sts: list[Stage]) -> None:
        """vLLM's start-up check, free memory at start >= ceil(total x utilization) (v1/worker/gpu_worker.py
        init_device 0.9.1; v1/worker/utils.py request_memory 0.14+), made whatever sizes the pool: with
        --kv-cache-memory-bytes on the line (which then carries no --gpu-memory-utilization) at the release's
        default utilization unless one is given (the line then carries it); a fixed pool of a release without the
        flag has no launch line to check. V0 makes no
        such check (worker/worker.py init_device takes its baseline snapshot and goes on: a V0 start-up at 0.95 of a
        Windows desktop's RTX 2060, docs/logs/vllm-code41236106506-qwen3-4b-rtx2060-wsl2.log), nor does V1 0.8.0 -
        0.9.0 (v1/worker/gpu_worker.py init_device keeps init_gpu_memory for an assert only; what is in use at start
        is charged inside the budget)."""
        fixed = s.kv_cache_memory is not None
        if (self.version.v0_engine or self.version.peak_counts_all_non_torch
                or fixed and not self.has_launch_flag("--kv-cache-memory-bytes")):
            return super().check_budget(s, sts)
        util = s.util  # given, or the release's default (the line then carries none)
        requested = vl.requested_memory(s.total, util) if fixed else sts[0].requested
        if s.total - s.context < requested:
            free = fmt_bytes(s.total - s.context)
            held = ("in use on a Windows desktop by default, the least public reading, an ESTIMATE" if
                    s.gpu.platform == "windows" and "context" not in s.given else "CUDA context/NCCL")
            which = (f"the default utilization, {util}: the line with --kv-cache-memory-bytes carries no "
                     "--gpu-memory-utilization" if fixed and not s.opts.util_given else f"{util}")
            most = _util_leaving(s.total, s.context)
            allowed = (f"; allowed: --gpu-memory-utilization {most} or less, or a smaller --context-memory" if most > 0
                       else "; allowed: a smaller --context-memory")
            raise Refused(f"--{'kv-cache-memory' if fixed and not s.opts.util_given else 'gpu-memory-utilization'}: "
                          f"vLLM refuses: free memory on startup ({free} after {fmt_bytes(s.context)} {held}, "
                          f"--context-memory) is less than desired GPU memory utilization ({which}, "
                          f"{fmt_bytes(requested)}) (v1/worker/utils.py request_memory){allowed}")
        super().check_budget(s, sts)

    # -- pool --

    def pool(self, s: Setup, sts: list[Stage]) -> Pool:
        """Groups of the whole model, each stage's bytes per block and blocks, the min over ranks."""
        from kvplan.cost.runtimes.results import KVCachePool

        if self.version.v0_engine:
            return _v0_pool(s, sts)
        drafts = vf.draft_layer_specs(s)  # speculative decoding: the proposer's layers join the pool
        if drafts:
            from kvplan.cost.parallel import Layout, rank_layer_specs

            per_layer = rank_layer_specs(s.card, s.kv_t, self, Layout(tp=s.layout.tp), 0, state_t=s.state_t) + drafts
            groups = _groups_of(self, per_layer, s.state_page_padded, s.block_size, s.opts.state_pages,
                                s.opts.mamba_cache_mode == "all")
            block_bytes = lambda layers: vl.bytes_per_block(groups, s.block_size, layers)  # noqa: E731
        else:
            key = (self, s.card, s.kv_t, s.layout.tp, s.state_t, s.state_page_padded, s.block_size, s.opts.state_pages,
                   s.opts.mamba_cache_mode == "all")
            groups, block_bytes = _kv_cache_groups(*key), lambda layers: _block_bytes(*key, layers)  # noqa: E731
        mnbt = vl.scheduled_tokens(s.mnbt, s.max_num_seqs, s.max_model_len)
        inflight = vl.max_in_flight_tokens(mnbt, s.layout.pp, self.version.in_flight_batches,
                                           self.runs_v2(s.card, s.opts))
        per_req = vl.blocks_per_request(groups, s.max_model_len, s.block_size, inflight)
        rows = []
        for st in sts:
            bpb = block_bytes(st.layers if s.layout.pp > 1 else None)
            fit = vl.max_model_len_fit(groups, bpb, st.available, s.max_model_len, s.block_size, inflight,
                                       self.version.reserves_null_block)
            rows.append(rank_row(st, bpb, vl.num_blocks(st.available, bpb), fit))
        lim = min(range(len(sts)), key=lambda i: rows[i].num_blocks)
        blocks, bpb = rows[lim].num_blocks, rows[lim].bytes_per_block
        conc = (vf.prefix_concurrency(s, blocks, per_req, len(groups)) if s.opts.shared_prefix_len
                else vl.max_concurrency(blocks, per_req))
        if self.version.tokens_over_max_model_len:  # V1 0.8.0 - 0.9.0: num_blocks x block_size, / max_model_len
            tokens = v0.max_tokens(blocks, s.block_size)
            conc = conc if s.opts.shared_prefix_len else v0.max_concurrency(blocks, s.block_size, s.max_model_len)
        else:
            tokens = (vl.kv_cache_tokens_by_blocks(blocks, len(groups), s.block_size) if self.version.tokens_by_blocks
                      else vl.kv_cache_tokens(conc, s.max_model_len))
        pool = KVCachePool(available_bytes=sts[lim].available, block_size=s.block_size, bytes_per_block=bpb,
                           num_blocks=blocks, tokens=tokens, groups=len(groups),
                           padding_layers=vl.padding_layers(groups), blocks_per_request=per_req,
                           state_bytes_per_request=sts[lim].state_bytes, state_page_bytes=s.state_page_bytes,
                           state_page_padded_bytes=s.state_page_padded)
        fits = all(vl.fits(st.available, r.bytes_per_block, r.bytes_per_block * per_req,
                           self.version.reserves_null_block) for st, r in zip(sts, rows))
        return Pool(sts[lim], pool, conc, bpb * per_req, fits, min(r.max_model_len_fit for r in rows), rows)

    running_limit_flag = "--max-num-seqs"

    def quant_kernel(self, card, gpu):
        """AWQ and GPTQ as this release picks them on ``gpu`` (serving_vllm.int_kernel, by the release planned:
        Server.release); other quantizations: serving_vllm.quant_kernel."""
        return vl.quant_kernel(self.release(), str(gpu.vendor), gpu.compute_capability, card.quantization)

    def mxfp4_layout_on(self, gpu) -> Mxfp4Layout | None:
        """The backend this version picks on ``gpu`` (serving_vllm.mxfp4_layout); without one, Marlin's, as on a
        GPU without a compute capability."""
        return vl.mxfp4_layout(self.version.first, None if gpu is None else gpu.compute_capability)

    def running_limit(self, s: Setup, p: Pool) -> int | None:
        return s.max_num_seqs

    def has_launch_flag(self, flag: str) -> bool:
        """Whether the release planned takes vLLM's ``flag`` (LAUNCH_FLAG_FIRST: the first release with it)."""
        first = LAUNCH_FLAG_FIRST.get(flag)
        return first is None or self.release() >= first

    def loaded_card(self, card, w_t, model_t):
        """Online fp8 (--quantization fp8) where the release's --quantization takes it (LAUNCH_FLAG_FIRST)."""
        if w_t.name.startswith("fp8") and card.quantization is None and model_t.bits >= 16:
            self._refuse_before_flag("--weight-dtype", "--quantization fp8")
        return super().loaded_card(card, w_t, model_t)

    def no_launch_reason(self, s: Setup) -> str | None:
        """A fixed pool (kvplan's what-if: --from-log's logged pool) on a release without --kv-cache-memory-bytes: no
        flag of that release sets the pool in bytes (its pool is what the memory profile leaves), so no line."""
        if s.kv_cache_memory is None or self.has_launch_flag("--kv-cache-memory-bytes"):
            return None
        first, planned = self._flag_first("--kv-cache-memory-bytes")
        return (f"No launch command: this plan's fixed KV pool ({fmt_bytes(s.kv_cache_memory)}, {s.kv_cache_memory:,} "
                f"B per GPU) is kvplan's what-if; {planned} has no --kv-cache-memory-bytes (first in vLLM {first}, "
                "engine/arg_utils.py) and no other flag that sets the pool in bytes: its pool is what the memory "
                "profile leaves of --gpu-memory-utilization.")

    def _refuse_before_flag(self, given: str, flag: str) -> None:
        """KvplanError naming ``given`` where the release planned lacks vLLM's ``flag`` (argparse exits on it)."""
        if not self.has_launch_flag(flag):
            first, planned = self._flag_first(flag)
            raise KvplanError(f"{given}: vLLM's {flag} is first in vLLM {first} (engine/arg_utils.py"
                              f"{'; kvplan dates V0 flags conservatively' if self.version.v0_engine else ''}"
                              f"); {planned} rejects it; use --engine vllm=={first} or later, or leave it off")

    def _flag_first(self, flag: str) -> tuple[str, str]:
        """(the first release with vLLM's ``flag``, the release planned), as the refusals name them."""
        planned = f"vLLM {self.pinned}" if self.pinned is not None else self.rules
        return ".".join(map(str, LAUNCH_FLAG_FIRST[flag])), planned

    def _check_mtp_spelling(self, spec) -> None:
        """A pinned release that does not take the MTP method's spelling refuses the config (SpeculativeConfig's
        Literal): "mtp" is first in 0.11; 0.9.1 - 0.10.2 take the model type's name (deepseek_mtp)."""
        if spec is None or spec.method != "mtp" or self.pinned is None:
            return
        from kvplan.cost.features import MTP_FIRST_RELEASES

        release, first = self.release(), MTP_FIRST_RELEASES.get(spec.spelling)
        if first is not None and release < first:
            taken = sorted(n for n, f in MTP_FIRST_RELEASES.items() if f <= release)
            raise KvplanError(f"--speculative-config: method {spec.spelling!r} is first in vLLM "
                              f"{'.'.join(map(str, first))} (config/speculative.py SpeculativeMethod); vLLM "
                              f"{self.pinned} takes {', '.join(taken) or 'no MTP method'}")

    def host_read_note(self, s: Setup) -> str | None:
        """--cpu-offload-gb: the weights vLLM keeps in pinned host memory are read over the host link every step."""
        if not s.opts.cpu_offload_gb:
            return None
        off = max(st.offloaded for st in self.stages(s))
        return (f"--cpu-offload-gb: {fmt_bytes(off)} ({off:,} B) of weights per GPU stay in pinned host memory, which "
                "vLLM reads in place through UVA views on every forward (model_executor/offloader/uva.py "
                f"UVAOffloader, 0.33): each step moves them over the host link (at PCIe Gen5 x16's 64 GB/s per "
                f"direction, {off / 64e9 * 1e3:,.1f} ms a step), which these GPU bounds leave out.")

    # -- what a plan prints --

    def launch_command(self, s: Setup, repo: str, revision: str | None = None) -> str:
        """Every input that moves the plan: the layout, the scheduler limits and the budget flags, the features, the
        dtypes, and the environment it reads (a PP split, FlashInfer's sampler, a max_model_len past the model's)."""
        lay = s.layout
        env = self.launch_env(s, *(["VLLM_USE_V1=0"] if self.version.v0_opt_in else []),
                              *(["VLLM_USE_V1=1"] if self.use_v1_env else []),
                              *([f"VLLM_PP_LAYER_PARTITION={','.join(map(str, s.opts.pp_layer_partition))}"]
                                if s.opts.pp_layer_partition else []),
                              *(["VLLM_USE_FLASHINFER_SAMPLER=1"] if s.opts.flashinfer_sampler else []))
        serve = ("vllm serve" if self.has_launch_flag("vllm serve")
                 else "python -m vllm.entrypoints.openai.api_server --model")
        cmd = [f"{env}{serve} {repo}", *([f"--revision {revision}"] if revision else []),
               f"--tensor-parallel-size {lay.tp}"]
        cmd += [f"--pipeline-parallel-size {lay.pp}"] if lay.pp > 1 else []
        cmd += [f"--data-parallel-size {lay.dp}"] if lay.dp > 1 else []
        cmd += ["--enable-expert-parallel"] if lay.expert_parallel else []
        cmd += [f"--max-model-len {s.max_model_len}"] + _scheduler_flags(s) + vf.launch_flags(s) + vm.launch_flags(s)
        cmd += [f"--cpu-offload-gb {s.opts.cpu_offload_gb:g}"] if s.opts.cpu_offload_gb else []
        if s.opts.prefix_caching:
            cmd.append("--enable-prefix-caching")
        elif s.opts.prefix_caching is False and self.has_launch_flag("--no-enable-prefix-caching"):
            cmd.append("--no-enable-prefix-caching")
        # a fixed pool ignores the utilization for its size, but vLLM's start-up check reads it (check_budget): kept
        # when given
        cmd += ([f"--kv-cache-memory-bytes {s.kv_cache_memory}"] if s.kv_cache_memory is not None else [])
        cmd += [f"--gpu-memory-utilization {s.util}"] if s.kv_cache_memory is None or s.opts.util_given else []
        # the block size as given: a hybrid's attention block is vLLM's own multiple of it (hybrid_block)
        if s.opts.block_size != s.engine.block_size_on(s.card, s.gpu, s.kv_t.name):
            cmd.append(f"--block-size {s.opts.block_size}")
        return " ".join(cmd + dtype_flags(s, "--kv-cache-dtype"))

    def pool_summary(self, p: Pool, s: Setup) -> str:
        return f" ({fmt_int(p.pool.num_blocks)} blocks of {s.block_size})"

    def notes(self, s: Setup, p: Pool) -> list[str]:
        out = [_budget_note(s), *filter(None, [self.no_launch_reason(s)])]
        if s.kv_cache_memory is not None:
            heavy = p.limiting  # the stage whose budget sizes the pool
            held = heavy.weights + s.kv_cache_memory + heavy.activation + heavy.non_torch + heavy.cuda_graph
            if held > s.total - s.context:
                out.append(f"--kv-cache-memory: the fixed pool ({fmt_bytes(s.kv_cache_memory)}) with the weights "
                           f"({fmt_bytes(heavy.weights)}), activation peak and overheads needs {fmt_bytes(held)} of a "
                           f"GPU that holds {fmt_bytes(s.total - s.context)} after the CUDA context: vLLM would run "
                           "out of memory allocating it on this GPU (the figures fit a larger one).")
        if s.opts.page_note:
            out.append(s.opts.page_note + ".")
        if self.version.v0_engine:
            out.append(_v0_note(s, p))
        elif s.gpu.platform == "windows" and s.kv_cache_memory is None:
            out.append(_windows_note(s, p))
        if s.opts.cpu_offload_gb:
            out.append(_offload_note(s, p))
        if p.pool.padding_layers:
            out.append(f"vLLM hybrid KV cache: {p.pool.groups} groups share one block pool; 'Add "
                       f"{p.pool.padding_layers} padding layers' (kv_cache_utils.py); a request takes "
                       f"{p.pool.blocks_per_request} blocks (sliding layers: the window plus the in-flight tokens).")
        return out + _state_notes(s, p) + vf.notes(s, p) + vm.notes(s)

    def context_in_budget(self, s: Setup) -> bool:
        return self.version.peak_counts_all_non_torch

    def requested_rule(self, s: Setup) -> str:
        if self.version.peak_counts_all_non_torch:  # gpu_worker.py 0.8.0 - 0.9.0: int(total x util - peak)
            return (f"int(total x gpu_memory_utilization {s.util}) - context + NCCL (V1 0.8.0-0.9.0 charges what is in "
                    "use at start inside the budget: gpu_worker.py determine_available_memory)")
        if self.version.v0_engine:  # worker.py determine_num_available_blocks: a float, blocks = int(rest // block)
            return f"total x gpu_memory_utilization {s.util} (V0)"
        return super().requested_rule(s)

    def activation_rule(self, s: Setup) -> str:
        if s.activation is None:
            return "profile-run peak, ESTIMATED (--activation-memory)"
        return super().activation_rule(s)


def _scheduler_flags(s: Setup) -> list[str]:
    """--max-num-seqs and --max-num-batched-tokens where they differ from this release's defaults on this GPU, and
    --enforce-eager for --cuda-graph-memory 0 (no CUDA graphs, no torch.compile: config/vllm.py)."""
    mnbt, seqs = s.engine.scheduler_defaults(s.gpu, s.total, s.max_model_len)
    out = [f"--max-num-seqs {s.max_num_seqs}"] if s.max_num_seqs != seqs else []
    out += [f"--max-num-batched-tokens {s.mnbt}"] if s.mnbt != mnbt else []
    return out + (["--enforce-eager"] if _eager(s) else [])


def _eager(s: Setup) -> bool:
    """--cuda-graph-memory 0 given where this release charges CUDA graphs by default: --enforce-eager (vLLM 0.33.0
    config/vllm.py VllmConfig.__post_init__: enforce_eager sets CompilationMode.NONE and CUDAGraphMode.NONE). Where the
    default is 0 already (before 0.20 the graphs are captured after the pool is sized; 0.25 - 0.28 dense models run
    graphless) a 0 is the measured figure, and eager mode would not change the plan."""
    if "cuda_graph" not in s.given or s.cuda_graph != 0:
        return False
    rt = s.engine
    return rt.cuda_graph_default(s.opts, rt.overhead_defaults(s.layout.tp * s.layout.pp)[1], s.card) > 0


def _offload_gb(flags: ServingFlags, card) -> float:
    """--cpu-offload-gb as given (0: none); the card's layers must be listable in vLLM's parameter order."""
    from kvplan.cost.offload import budget_bytes, check_offloadable

    if not flags.cpu_offload_gb or not budget_bytes(flags.cpu_offload_gb):
        return 0.0
    check_offloadable(card)
    return flags.cpu_offload_gb


def _with_offload(s: Setup, st: Stage) -> Stage:
    """--cpu-offload-gb: the stage's offloaded parameters leave its weights (kvplan.cost.offload); V0 copies one
    offloaded layer back to the GPU for its forward, so its profile peak holds the largest such layer."""
    if not s.opts.cpu_offload_gb:
        return st
    from kvplan.cost.offload import budget_bytes, offloaded_per_layer

    if s.online_fp8:
        raise KvplanError("--cpu-offload-gb: kvplan lists vLLM's offloaded parameters for 16-bit weights; "
                          "not with --quantization fp8")
    per_layer = offloaded_per_layer(s.card, s.w_t, s.layout, st.layers, budget_bytes(s.opts.cpu_offload_gb))
    off, copy = sum(per_layer), max(per_layer) if s.engine.version.v0_engine else 0
    return s.charged(st, copy - off, weights=st.weights - off, offloaded=off, activation=st.activation + copy)


def _util_leaving(total: int, held: int) -> float:
    """The largest --gpu-memory-utilization, to two decimals, whose requested share leaves ``held`` bytes of
    ``total`` free (0 where none does): the start-up check's bound (VLLM.check_budget, _windows_note)."""
    import math

    return max(0.0, math.floor((total - held) / total * 100) / 100)


def _windows_note(s: Setup, p: Pool) -> str:
    """Under Windows and WSL2 the total is the whole board, but the desktop holds some of it: V1 refuses to start
    when the free memory at start is below the requested share (v1/worker/gpu_worker.py init_device 0.9.1,
    v1/worker/utils.py request_memory 0.14+), so what the plan requests must leave the desktop's share free."""
    from kvplan.cost.hardware import WINDOWS_IN_USE_READINGS_GIB, windows_in_use_range

    requested = p.limiting.requested
    left = s.total - requested
    high = max(WINDOWS_IN_USE_READINGS_GIB.values())
    text = (f"Windows/WSL2: vLLM refuses to start when the free memory at start is below the {fmt_bytes(requested)} "
            f"this plan requests (util {s.util} x the whole board), which leaves {fmt_bytes(left)} for what is "
            f"already on the GPU (this plan counts {fmt_bytes(s.context)}, --context-memory); public Windows "
            f"start-ups show {windows_in_use_range()} GiB in use (the display, the CUDA context), an ESTIMATE of "
            "yours (nvidia-smi's used memory before the start, plus the context)")
    need = int(high * 2**30)
    if left >= need:
        return text + "."
    fits = _util_leaving(s.total, need)
    return text + (f": below the {high} GiB some showed; --gpu-memory-utilization {fits} leaves it."
                   if fits > 0 else ".")


def _offload_note(s: Setup, p: Pool) -> str:
    st = p.limiting
    v0_copy = (" V0 copies an offloaded layer to the GPU for its forward (functional_call): the profile peak holds "
               "the largest one." if s.engine.version.v0_engine else
               " V1 reads them in place through UVA views of pinned memory: nothing is copied back.")
    return (f"--cpu-offload-gb {s.opts.cpu_offload_gb:g}: {fmt_bytes(st.offloaded)} of decoder-layer parameters per "
            f"GPU in CPU memory (vLLM offloader/uva.py: layer by layer, parameter by parameter, until "
            f"int(cpu_offload_gb x 2^30) bytes are reached; the embedding, lm_head and buffers stay).{v0_copy}")


def mxfp4_loaded(s: Setup) -> Setup:
    """MXFP4 experts as this version loads them on this GPU: the backend serving_vllm.mxfp4_layout picks for the
    range's first release and the GPU's compute capability (Marlin, Triton on Hopper from 0.12, FlashInfer TRT-LLM
    on a B200 from 0.11.1), its paddings, swizzled copies and bias dtype (kvplan.cost.quant.mxfp4_expert_bytes)."""
    q = s.card.quantization
    if q is None or q.method != "mxfp4":
        return s
    from dataclasses import replace

    from kvplan.cost.quant import with_kernel_layout

    layout = s.engine.mxfp4_layout_on(s.gpu)
    return replace(s, card=with_kernel_layout(s.card, layout, f"MXFP4, {layout.backend} backend"))


def _v0_pool(s: Setup, sts: list[Stage]) -> Pool:
    """vLLM V0 (serving_vllm_v0.py): one block of every attention layer on the rank (MLA entries padded to 256 B),
    int(available // block) per worker and the min over workers (executor: min of determine_num_available_blocks);
    a request of max_model_len tokens fits when the pool holds block_size x blocks >= that many tokens."""
    from kvplan.cost.runtimes.results import KVCachePool

    L, bs, rows = s.max_model_len, s.block_size, []
    model_bytes = s.w_t.activation_bytes  # the alignment counts elements of model_config.dtype
    align = s.engine.version.entry_alignment_bytes
    for st in sts:
        entries = [(count * (v0.aligned_entry_elems(elems, model_bytes) if align and sp.kind == "mla" else elems),
                    sp.dtype.bits // 8) for sp in st.specs if not sp.per_sequence for count, elems in sp.vectors]
        bpb = v0.cache_block_bytes(entries, bs)
        blocks = v0.num_blocks(st.available, bpb)
        rows.append(rank_row(st, bpb, blocks, min(L, v0.max_tokens(blocks, bs))))
    lim = min(range(len(sts)), key=lambda i: rows[i].num_blocks)
    blocks, bpb = rows[lim].num_blocks, rows[lim].bytes_per_block
    per_req = cdiv(L, bs)
    pool = KVCachePool(available_bytes=sts[lim].available, block_size=bs, bytes_per_block=bpb, num_blocks=blocks,
                       tokens=v0.max_tokens(blocks, bs), groups=1, padding_layers=0, blocks_per_request=per_req)
    fits = v0.max_tokens(blocks, bs) >= L
    return Pool(sts[lim], pool, v0.max_concurrency(blocks, bs, L), bpb * per_req, fits,
                min(r.max_model_len_fit for r in rows), rows)


def _v0_note(s: Setup, p: Pool) -> str:
    """The V0 figures a log prints beside the pool: '# GPU blocks: N, # CPU blocks: M' and the concurrency rule."""
    swap = s.engine.version.swap_space_bytes
    cpu = v0.cpu_blocks(swap, p.pool.bytes_per_block)
    more = (" Each MLA latent entry is padded to a multiple of 256 bytes (cache_engine.py align_to_256bytes)."
            if s.card.mla is not None else "")
    if p.limiting.cached_free:
        more += (f" This release's non-torch figure counts the {fmt_bytes(p.limiting.cached_free)} the caching "
                 "allocator keeps in the weights' segments after empty_cache (utils.py memory_profiling subtracts "
                 "allocated, not reserved, bytes; 0.7 subtracts reserved): an ESTIMATE replaying the load "
                 "(kvplan.cost.allocator), not the profile run's own allocations.")
    return (f"vLLM V0 (worker.py determine_num_available_blocks): '# GPU blocks: {fmt_int(p.pool.num_blocks)}, "
            f"# CPU blocks: {fmt_int(cpu)}' (--swap-space {fmt_bytes(swap)} of pinned host memory per GPU); "
            f"concurrency = blocks x {s.block_size} / max_model_len (executor_base.py), one block table over all "
            f"layers (sliding windows are not freed per layer); a max_model_len above "
            f"{fmt_int(p.pool.tokens)} tokens is refused.{more}")


@lru_cache(maxsize=512)
def _kv_cache_groups(rt: VLLM, card, kv_t, tp: int, state_t, padded: int | None, block_size: int,
                     state_pages: int = 1, per_block: bool = False) -> list:
    """vLLM's KV cache groups of the whole model on one TP rank (serving_vllm.kv_cache_groups over the per-layer
    table; ``state_pages``: each state layer's pages per request, ``per_block``: one more per block, Mamba cache mode
    "all"): the same for every pipeline split and memory budget, so computed once per (card, dtypes, tp, block)."""
    from kvplan.cost.parallel import Layout, rank_layer_specs

    per_layer = rank_layer_specs(card, kv_t, rt, Layout(tp=tp), 0, state_t=state_t)
    return _groups_of(rt, per_layer, padded, block_size, state_pages, per_block)


def _groups_of(rt: VLLM, per_layer: list, padded: int | None, block_size: int, state_pages: int = 1,
               per_block: bool = False) -> list:
    """serving_vllm.kv_cache_groups of a per-layer table as this release groups it (``state_pages``: each state
    layer's pages per request, ``per_block``: Mamba cache mode "all"): chunked local layers as full attention before
    0.14 (serving_vllm.without_hybrid_manager); V1 0.8.0 - 0.9.0 one spec type (serving_vllm.specs_0_8)."""
    specs, layers = vl.vllm_layer_specs(per_layer, padded, state_pages, per_block)
    if rt.version.sliding_specs is not None:  # V1 0.8.0 - 0.9.0: one spec type
        specs = vl.specs_0_8(specs, rt.version.sliding_specs)
    elif not rt.version.chunked_local_groups:
        specs = vl.without_hybrid_manager(specs)
    return vl.kv_cache_groups(specs, block_size, layers)


@lru_cache(maxsize=512)
def _cache_groups(rt: VLLM, card, kv_t, block_size: int, gpu, prefix_caching: bool | None = None) -> tuple[int, list]:
    """VLLM.cache_groups: the state dtype, state pages and hybrid block as ``plan`` resolves them
    (planning.capacity.setup, VLLM.state_options with ``prefix_caching`` as --enable-prefix-caching) at TP 1, then
    ``_kv_cache_groups``."""
    from types import SimpleNamespace

    from kvplan.cost.parallel import Layout
    from kvplan.model.dtypes import parse_dtype

    state_t = rt.state_dtype(card, kv_t, parse_dtype(rt.default_kv_dtype(card.dtype)[0]))
    states = rt.state_options(card, gpu, None, prefix_caching)
    opts = SimpleNamespace(block_size=block_size, state_alignment=states.get("state_alignment", 1))
    block, padded, _ = rt.hybrid_block(card, kv_t, Layout(), opts, state_t)
    return block, _kv_cache_groups(rt, card, kv_t, 1, state_t, padded, block, states.get("state_pages", 1),
                                   states.get("mamba_cache_mode") == "all")


@lru_cache(maxsize=2048)
def _block_bytes(rt: VLLM, card, kv_t, tp: int, state_t, padded: int | None, block_size: int, state_pages: int,
                 per_block: bool, layers: range | None) -> int:
    """serving_vllm.bytes_per_block of ``_kv_cache_groups`` on a stage's ``layers`` (None: all): once per layout and
    stage in a search, not once per GPU type."""
    groups = _kv_cache_groups(rt, card, kv_t, tp, state_t, padded, block_size, state_pages, per_block)
    return vl.bytes_per_block(groups, block_size, layers)


def _graph_counts(opts: Options) -> tuple[int, int]:
    """(PIECEWISE, FULL) CUDA graphs vLLM captures with these options (serving_vllm.cudagraph_counts)."""
    return vl.cudagraph_counts(opts.max_num_seqs, opts.mnbt, _decode_query_len(opts))


def _decode_query_len(opts: Options) -> int:
    """Tokens a decode step of one request verifies: 1, plus the draft tokens of speculative decoding."""
    return 1 + (opts.speculative.k if opts.speculative is not None else 0)


def _given(flag: str, value: int | None, default: int | None) -> int | None:
    return default if value is None else require_positive(flag, value)


def hybrid_alignment(card) -> int:
    """The kernel block alignment vLLM's hybrid page unification starts from (before max with block_size): the
    attention backend's smallest kernel block, 16; MLA hybrids (Kimi-Linear) 128 (vl.MLA_HYBRID_ALIGNMENT)."""
    return vl.MLA_HYBRID_ALIGNMENT if card.mla else vl.DEFAULT_BLOCK_SIZE


# vLLM flags kvplan prints that a release it models lacks -> the first release with it. --kv-cache-memory-bytes and
# --mm-encoder-tp-mode: absent from engine/arg_utils.py in 0.9.1, 0.9.2, 0.10.0 and 0.10.1.1, first in 0.10.2
# (/tmp/audit/src/0.10.2/vllm/engine/arg_utils.py add_cli_args: cache_group "--kv-cache-memory-bytes", multimodal
# group "--mm-encoder-tp-mode"); FlexibleArgumentParser exits on an unrecognized argument. V0 (0.2 - 0.9.0) has
# neither.
#
# The releases before 0.5 (kvplan's "0.2-0.6.4" range; no source tree of 0.2 - 0.8 on this machine), read in a
# public copy of vllm/engine/arg_utils.py of the 0.4 era (it has --image-input-type and the tokenizer pool; exact
# release not pinned): '--kv-cache-dtype' choices=['auto', 'fp8_e5m2'], '--quantization' choices=['awq', 'gptq',
# 'squeezellm', None], '--enable-prefix-caching' action='store_true' (no --no- form). kvplan cannot pin each flag's
# first release from it, so it refuses CONSERVATIVELY: fp8_e4m3 K/V (--kv-cache-dtype fp8_e4m3) and online fp8
# (--quantization fp8) below 0.5.0; fp8_e5m2 K/V below 0.3.0 (vLLM PR 2279, "FP8 E5M2 KV cache", merged 2024-01);
# --enable-prefix-caching below 0.4.0 (PR 2762, automatic prefix caching, merged after 0.3.3). On every V0 release
# (< 0.9.1) the line leaves --no-enable-prefix-caching off (a store_true flag in the 0.4-era copy, its --no- form not
# verified there; V0 caches no prefix by default, so the line without it runs the plan).
# `vllm serve` is vLLM PR 5090 (merged July 2024; PR 6431 waited for "the release", v0.5.2): below 0.5.3 the line
# is `python -m vllm.entrypoints.openai.api_server --model MODEL` (every release has that module).
LAUNCH_FLAG_FIRST = {"--kv-cache-memory-bytes": (0, 10, 2), "--mm-encoder-tp-mode": (0, 10, 2),
                     "--kv-cache-dtype fp8_e4m3": (0, 5, 0), "--kv-cache-dtype fp8_e5m2": (0, 3, 0),
                     "--quantization fp8": (0, 5, 0), "--enable-prefix-caching": (0, 4, 0),
                     "--no-enable-prefix-caching": (0, 9, 1), "vllm serve": (0, 5, 3)}


@dataclass(frozen=True)
class PerTokenHead:
    """A vLLM per-token-head K/V cache dtype: its flag, the first release with it, the bytes it stores."""

    flag: str
    first: tuple[int, int]
    dtype: DType


# vLLM's int8/int4 K/V caches (config/cache.py CacheDType: "int8_per_token_head" from 0.20.0, "int4_per_token_head"
# from 0.25.0; absent in 0.19.1 and 0.24.0). Only TritonAttentionBackend lists them in supported_kv_cache_dtypes
# (v1/attention/backends/triton_attn.py, 0.20.0 - 0.33.0), so the backend selector (platforms/cuda.py
# _get_backend_priorities, validate_configuration: "kv_cache_dtype not supported") passes FlashAttention and
# FlashInfer over and picks TRITON_ATTN. Per token and KV head, K and V each: head_size values (int4: head_size // 2
# bytes, two values per byte) and one fp32 scale: v1/kv_cache_interface.py AttentionSpec.page_size_bytes adds
# 2 x block_size x num_kv_heads x 4 B to real_page_size_bytes (0.20.0 - 0.27.1; int4's head_size // 2 from 0.25.0),
# TritonAttentionBackend.customize_spec (0.28.0 - 0.33.0): (hs_k + hs_v) x 1 B + 2 x 4 B. The Triton backend takes
# blocks in multiples of 16 (get_supported_kernel_block_sizes: [MultipleOf(16)]), so the default block 16 stands, and
# supports CUDA graphs ALWAYS (TritonAttentionMetadataBuilder._cudagraph_support), so FULL_AND_PIECEWISE captures the
# same graphs. Not modelled: its softmax_segm_* scratch (v1/attention/backends/triton_attn.py __init__ of the
# metadata builder, float32 [min(128 // kv_heads snapped to a capture size, max_num_seqs), heads, 16,
# next_power_of_2(head_size)], ~4 MiB for Llama-3.1-8B), allocated with the builders after the pool is sized.
PER_TOKEN_HEAD = {"int8": PerTokenHead("int8_per_token_head", (0, 20), DType("int8", 8, vector_scale_bytes=4)),
                  "int4": PerTokenHead("int4_per_token_head", (0, 25), DType("int4", 4, vector_scale_bytes=4))}
_KV_DTYPE_FLAG = {"fp8_e4m3": "fp8_e4m3", "fp8_e5m2": "fp8_e5m2",
                  **{name: p.flag for name, p in PER_TOKEN_HEAD.items()}}  # int8/int4: vLLM only (SGLang refuses)


def dtype_flags(s: Setup, kv_flag: str) -> list[str]:
    """The K/V and weight dtype flags of a server's launch line (vLLM and SGLang spell them alike): every 16/32-bit
    model dtype other than the checkpoint's is set with --dtype (vLLM config/model.py ModelConfig.dtype, 0.11.0:
    "auto" is the checkpoint's torch_dtype, float32 downcast; SGLang 0.5.10 server_args.py --dtype, the same)."""
    from kvplan.cost.roofline import served_compute_dtype

    flags = [f"{kv_flag} {_KV_DTYPE_FLAG[s.kv_t.name]}"] if s.kv_t.name in _KV_DTYPE_FLAG else []
    if s.w_t.name.startswith("fp8") or s.online_fp8:  # online fp8 for a 16-bit checkpoint
        flags.append("--quantization fp8")
    ckpt = TORCH_NAMES.get(s.card.dtype)
    if s.w_t.name in ("fp16", "fp32") and s.w_t.name != ckpt:
        flags.append(f"--dtype {TORCH_NAME_OF[s.w_t.name]}")
    elif s.w_t.name == "bf16" and served_compute_dtype(s.gpu, "bf16") == "fp16":  # no bf16 units (T4): float16
        flags.append("--dtype float16")
    elif s.w_t.name == "bf16" and ckpt not in ("bf16", None):  # bf16 of a float16/float32 checkpoint
        flags.append("--dtype bfloat16")
    elif ((s.w_t.bits < 16 or s.online_fp8 or s.card.quantization is not None) and s.kv_t.name in ("fp16", "fp32")
          and s.kv_t.name != (s.w_t.name if s.w_t.bits >= 16 else ckpt or "bf16")):
        # quantized weights with 16/32-bit K/V other than the checkpoint's: only --dtype sets them, since
        # kv_cache_dtype "auto" is the model's dtype (vLLM 0.11.0 v1/worker/gpu_model_runner.py GPUModelRunner.__init__:
        # kv_cache_dtype = model_config.dtype when cache_config.cache_dtype == "auto"; SGLang 0.5.10
        # model_runner.py ModelRunner.configure_kv_cache_dtype: "auto" -> self.dtype)
        flags.append(f"--dtype {TORCH_NAME_OF[s.kv_t.name]}")
    return flags


def _budget_note(s: Setup) -> str:
    if s.kv_cache_memory is not None:
        return ("--kv-cache-memory: the KV pool is fixed (vLLM kv_cache_memory_bytes skips memory profiling and "
                "ignores --gpu-memory-utilization for the pool's size; its start-up free-memory check still reads "
                "it); the per-GPU figures above are shown for reference.")
    act = "given (--activation-memory)" if s.activation is not None else (
        "kvplan's APPROXIMATION of vLLM's profile run (forward of max_num_batched_tokens tokens, sampler on "
        "max_num_seqs rows); vLLM measures it, so pass --activation-memory with the logged figure")
    v = s.engine.version
    graphs = (f"CUDA graphs ({fmt_bytes(s.cuda_graph)})" if v.cuda_graphs_in_budget or s.cuda_graph
              else "CUDA graphs (captured after the pool is sized before 0.20: not in the budget)")
    if v.cuda_graphs_in_budget and s.engine.runs_graphless_v2(s.card, s.opts):
        graphs += (f" [Model Runner V2, this release's default for {s.card.hf_architecture or 'dense models'} "
                   "(0.22-0.24: its list of architectures; 0.25-0.28: that list and every dense model), estimates no "
                   "graphs: "
                   "profile_cudagraph_memory returns 0]")
    elif v.cuda_graph_bytes_per_graph is not None and s.opts.max_num_seqs and s.opts.mnbt:
        pw, full = _graph_counts(s.opts)
        est = vl.cuda_graph_estimate_bytes((pw, full), v.cuda_graph_bytes_per_graph)
        graphs += (f" [{pw} PIECEWISE + {full} FULL graphs x {fmt_bytes(v.cuda_graph_bytes_per_graph)}, an ESTIMATE "
                   f"fitted to public logs: 'Estimated CUDA graph memory: {est / 2**30:.2f} GiB total'"
                   + ("" if v.cuda_graphs_in_budget else ", printed, not charged, before 0.20") + "]")
    sampler = ("; the profile peak is the larger of the dummy forward and the dummy sampler, which sorts the whole "
               "vocabulary of max_num_seqs rows in this version (DERIVED from vLLM's sampler and PyTorch's CUDA "
               "sort: the model-dtype logits, their float32 copy, the sorted values and int64 indices, the sort's "
               f"own index buffers and cub's alternate key and value buffers, {_sort_note(s)}; a run whose log says "
               "'Using FlashInfer for top-p & top-k sampling.' does not sort: --flashinfer-sampler)"
               if _sorts(s) else
               "; the profile peak is the larger of the dummy forward and the dummy sampler over max_num_seqs rows of "
               f"the vocabulary without a sort ({'FlashInfer' if s.opts.flashinfer_sampler else 'Triton'} top-k/top-p:"
               f" the logits plus {vl.UNSORTED_SAMPLER_EXTRA_BYTES} B of float32 copies per row and entry"
               + _triton_buffer_note(s) + ")")
    if s.engine.runs_v2(s.card, s.opts):
        state = ("; Model Runner V2's persistent sampler state (penalty counts and masks, max_num_seqs x vocabulary x "
                 "4 B) is in the non-torch figure" if v.counts_torch_state_before_profile else
                 "; Model Runner V2's persistent sampler state is allocated before the profile and this version's "
                 "non-KV figure leaves it out")
        sampler = _v2_warmup_note(s) + state if v.v2_sampler_warmup_pass else (
            "; the profile peak is the larger of the dummy forward and Model Runner V2's dummy sampler, which "
            "samples the model-dtype logits of max_num_seqs rows without top-k/top-p (no request sets them)" + state)
    requested = f"total x {s.util}" if v.v0_engine else f"ceil(total x {s.util})"  # V0: a float, then // block
    if v.peak_counts_all_non_torch:
        return (f"{v.label}: available = int(total x {s.util} - (torch's allocated peak + every non-torch byte in "
                f"use)) (v1/worker/gpu_worker.py determine_available_memory, 0.8.0 - 0.9.0): weights + activation peak + "
                f"non-torch ({fmt_bytes(s.non_torch)}) + the memory in use at start ({fmt_bytes(s.context)}, "
                "--context-memory: the CUDA context, other processes, an ESTIMATE) + the free bytes the caching "
                "allocator keeps after empty_cache (an ESTIMATE); no 'Available KV cache memory' line, no start-up "
                f"free-memory check; CUDA graphs are captured after the pool; activation peak: {act}{sampler}.")
    return (f"{v.label}: available = {requested} - weights - activation peak - non-torch "
            f"({fmt_bytes(s.non_torch)}) - {graphs}; activation peak: {act}{sampler}{_compile_note(s)}. "
            "Non-torch and CUDA-graph figures are documented defaults (--non-torch-memory, --cuda-graph-memory).")


def _compile_note(s: Setup) -> str:
    """What the budget note says of torch.compile's cache (serving_vllm.cold_compile_peak_bytes)."""
    if not s.engine.version.compile_benchmarks_kernels or s.activation is not None:
        return ""
    if s.opts.cold_compile:
        mixed = (" from 0.11.1; this range's 0.11.0 (torch 2.8) does not benchmark"
                 if s.engine.version.first < (0, 12) else "")
        return ("; a first boot (--cold-compile): torch.compile's Inductor benchmarks its kernels inside the profile"
                f"{mixed}, and a random copy of the embedding table sets the peak where it exceeds the rest (an "
                "ESTIMATE)")
    return ("; a warm boot (torch.compile's cache holds this model and shape): a first boot compiles inside the "
            "profile and keeps less for the cache (--cold-compile)")


def _cold_compile_peak(s: Setup, pp_rank: int, parts: list[range]) -> int:
    """--cold-compile: the compile's torch peak on this stage (serving_vllm.cold_compile_peak_bytes, one copy of the
    embedding table this rank holds); 0 for a warm boot or a given --activation-memory (the logged peak holds it)."""
    if not s.opts.cold_compile or s.activation is not None:
        return 0
    from kvplan.cost.parallel import DEFAULT_VOCAB_PADDING, rank_breakdown

    table = rank_breakdown(s.card, s.layout, pp_rank, vocab_padding=DEFAULT_VOCAB_PADDING, stages=parts,
                           vocab_every_stage=s.engine.vocab_every_stage(s.card))["embedding"]
    return vl.cold_compile_peak_bytes(table, s.w_t.activation_bytes)


def _triton_buffer_bytes(s: Setup, rows: int) -> int:
    """The Triton top-k/top-p kernel's buffer (serving_vllm.triton_topk_topp_buffer_bytes) where this version's dummy
    sampler runs it (not FlashInfer's sampler) and the catalog gives the GPU's SM count; else 0."""
    if not s.engine.version.triton_topk_topp_buffer or s.opts.flashinfer_sampler or s.gpu.sm_count is None:
        return 0
    return vl.triton_topk_topp_buffer_bytes(s.gpu.sm_count, rows, s.card.vocab_size)


def _v2_flashinfer(s: Setup) -> bool:
    """Whether 0.33+'s V2 warmup-param pass samples in FlashInfer (serving_vllm.flashinfer_samples; --flashinfer-sampler
    sets VLLM_USE_FLASHINFER_SAMPLER=1, the default)."""
    return s.opts.flashinfer_sampler or vl.flashinfer_samples(s.gpu.compute_capability, s.gpu.sm_count)


def _v2_triton_buffer_bytes(s: Setup, rows: int) -> int:
    """0.33+'s Triton top-k/top-p buffer where its V2 warmup-param pass does not sample in FlashInfer (any row count;
    0 where the catalog has no SM count)."""
    if _v2_flashinfer(s) or s.gpu.sm_count is None:
        return 0
    return vl.triton_topk_topp_buffer_bytes(s.gpu.sm_count, rows, s.card.vocab_size, min_rows=1)


def _triton_buffer_note(s: Setup) -> str:
    """What the budget note says of the Triton kernel's per-SM buffer."""
    if not s.engine.version.triton_topk_topp_buffer or s.opts.flashinfer_sampler:
        return ""
    if s.gpu.sm_count is None:
        return f"; the kernel's per-SM scratch rows are not charged: the catalog has no SM count for {s.gpu.name}"
    rows = min(s.max_num_seqs, vl.scheduled_tokens(s.mnbt, s.max_num_seqs, s.max_model_len))
    return (f", and the kernel's cached scratch rows, one float32 vocabulary row per program on {s.gpu.sm_count} SMs: "
            f"{fmt_bytes(_triton_buffer_bytes(s, rows))}")


def _v2_warmup_note(s: Setup) -> str:
    """What the budget note says of 0.33+'s V2 sampler (serving_vllm.v2_warmup_sampler_bytes), DERIVED from the source."""
    rows = min(s.max_num_seqs, vl.scheduled_tokens(s.mnbt, s.max_num_seqs, s.max_model_len))
    if _v2_flashinfer(s):
        how = (f"FlashInfer's top-k/top-p sampler: {vl.V2_WARMUP_FLASHINFER_FP32_TENSORS} float32 tensors of the "
               "vocabulary per row (the copy, the top-k-masked logits, their softmax) and its 1 MiB row-state buffer")
    else:
        how = "Triton top-k/top-p in place on one float32 copy per row, gumbel-max partial maxima"
        buf = _v2_triton_buffer_bytes(s, rows)
        how += (f", and the kernel's cached scratch rows, one float32 vocabulary row per program on "
                f"{s.gpu.sm_count} SMs: {fmt_bytes(buf)}" if s.gpu.sm_count is not None else
                f"; the kernel's per-SM scratch rows are not charged: the catalog has no SM count for {s.gpu.name}")
    return ("; the profile peak is the larger of the dummy forward and Model Runner V2's dummy sampler, whose second "
            f"pass sets SamplingParams.for_sampler_warmup on all {rows:,} rows (DERIVED from vLLM 0.33.0's sampler: the "
            f"model-dtype logits, {how}, beside the forward's output profile_run holds)")


def _sort_note(s: Setup) -> str:
    """The sort's bytes (serving_vllm.sorting_sampler_bytes) at the rows the profile samples, for the budget note."""
    from kvplan.cost.parallel import pad_vocab

    rows = min(s.max_num_seqs, vl.scheduled_tokens(s.mnbt, s.max_num_seqs, s.max_model_len))
    v = s.card.vocab_size
    return f"{fmt_bytes(vl.sorting_sampler_bytes(rows, v, pad_vocab(v), s.w_t.activation_bytes))} at {rows} rows"


def _sorts(s: Setup) -> bool:
    """Whether the dummy sampler sorts the vocabulary: the version's PyTorch top-k/top-p, not its Triton kernel nor
    FlashInfer's sampler (--flashinfer-sampler, 'Using FlashInfer for top-p & top-k sampling.')."""
    return s.engine.version.sorts_vocabulary and not s.opts.flashinfer_sampler


def _state_notes(s: Setup, p: Pool) -> list[str]:
    """What a plan chose for state layers (conv and SSM states of fixed size per request), and why; what
    --enable-prefix-caching / --no-enable-prefix-caching changed (nothing in memory for a model without them)."""
    given = s.opts.prefix_caching
    if s.card.ssm is None:
        if given is None:
            return []
        where = ("on the launch line" if given or s.engine.has_launch_flag("--no-enable-prefix-caching") else
                 "left off the launch line (V0 caches no prefix by default; its --no- form is not verified)")
        return [f"--{'' if given else 'no-'}enable-prefix-caching: {where}; no memory changes for a model "
                "without state layers (prefix caching shares full attention blocks between requests, which a plan "
                "counts only through --shared-prefix-len)"]
    states = fmt_bytes(p.pool.state_bytes_per_request)
    pages, v = s.opts.state_pages, s.engine.version
    spec = s.engine.speculative_state_blocks(s.opts.speculative)
    if s.opts.mamba_cache_mode == "all":
        pages = vl.all_mode_pages(s.max_model_len, s.block_size, spec)
        why = (f"{pages} pages per request and state group (MambaSpec.max_memory_usage_bytes, mamba_cache_mode 'all': "
               f"cdiv(max_model_len {fmt_int(s.max_model_len)}, block {fmt_int(s.block_size)})"
               + (f" + {spec} speculative" if spec else "") + "): --enable-prefix-caching puts "
               f"{s.card.hf_architecture}, which declares SupportsMambaPrefixCaching, in mode 'all' on {v.label} "
               "(MambaModelConfig.verify_and_update_config, models/config.py 0.20 - 0.27: 'Mamba cache mode is set "
               "to 'all' ... when prefix caching is enabled'), a state page per block of the sequence; the block "
               f"is aligned to the Mamba chunk ({fmt_int(s.opts.state_alignment)} tokens, config/model.py "
               "get_mamba_chunk_size). vLLM's fits check and concurrency count all of them; a decoding request keeps "
               "its last state and frees the older ones into the prefix cache (evictable). Launched without the "
               f"flag, vLLM keeps {1 + spec} (mode 'none'); 0.28+ gives 'align'")
    elif s.opts.mamba_cache_mode == "align":
        checkpoint = pages - 2 - spec
        on = ("--enable-prefix-caching turns prefix caching on (MambaModelConfig.verify_and_update_config, "
              "models/config.py 0.20+: mode 'none' becomes 'align'"
              + ("; on 0.20 - 0.21 a model declaring SupportsMambaPrefixCaching takes 'align', not 'all', with a "
                 "speculative config" if v.all_mode_yields_to_speculation and s.opts.speculative is not None
                 and s.card.hf_architecture in (v.explicit_prefix_caching_all or ()) else "") + ")" if given else
              "this release turns prefix caching on by default for hybrid models (engine/arg_utils.py, 0.28+)")
        why = (f"{pages} pages per request and state group (MambaSpec.max_memory_usage_bytes, mamba_cache_mode "
               f"'align': 2" + (f" + {spec} speculative" if spec else "")
               + (" + 1 prefill checkpoint" if checkpoint else "") + f"): {on}; 'Mamba cache mode is set to "
               "'align' ... when prefix caching is enabled'; launched with --no-enable-prefix-caching, vLLM keeps "
               f"{1 + spec} (mode 'none')")
    else:
        off = ("an attention-free model keeps prefix caching off (config/model.py is_prefix_caching_supported)"
               if not s.card.attention_layers else
               ("--no-enable-prefix-caching: MambaModelConfig.verify_and_update_config (models/config.py, read in "
                "0.20.0 - 0.33.0) keeps mode 'none'" if v.explicit_prefix_caching_all is not None else
                "--no-enable-prefix-caching: prefix caching off, as this release's default for hybrids")
               if given is False else
               "vLLM turns prefix caching off by default for hybrid models before 0.28 (engine/arg_utils.py)")
        why = (f"{pages} page{'s' if pages > 1 else ''} per request and state group (MambaSpec with mamba_cache_mode "
               f"'none'" + (f": 1 + {spec} speculative" if spec else "") + f"; {off})")
    out = [f"vLLM state layers ({s.card.state_layers} of {s.card.num_layers}): {why}; states "
           f"{fmt_bytes(s.state_page_bytes)} per layer and request on this GPU, {states} for all its state layers. A "
           f"request takes {fmt_int(p.pool.blocks_per_request)} blocks over {p.pool.groups} KV cache groups: "
           f"cdiv(max_model_len, block) per attention group, {fmt_int(pages)} per state group."]
    if (v.gdn_checkpoints and s.opts.mamba_cache_mode == "align" and s.card.ssm.kind == "gated_deltanet"
            and s.opts.state_alignment == 1 and (s.gpu.compute_capability or 0) >= 10):
        out.append("Gated DeltaNet prefill: on Blackwell kvplan takes vLLM's Triton/FLA kernel (no prefill checkpoint "
                   "page, no 64-token block alignment); vLLM 0.33 picks FlashInfer's there when head_k_dim is "
                   "128 and the CUDA runtime is 13 or newer (qwen_gdn_linear_attn.py _resolve_gdn_prefill_backend), "
                   "which adds both: not modelled.")
    if s.unified_block or s.state_page_padded:
        attn_layers = max(1, sum(1 for sp in p.limiting.specs if not sp.per_sequence))
        attn_page = s.block_size * (p.limiting.kv_bytes_per_token // attn_layers)
        pct = 100 * (attn_page - s.state_page_bytes) / s.state_page_bytes
        alignment = vl.hybrid_alignment_tokens(hybrid_alignment(s.card), s.opts.block_size, s.opts.state_alignment)
        chunk = (f" (lcm of the Mamba chunk {fmt_int(s.opts.state_alignment)} and the kernel block: mode 'all')"
                 if s.opts.mamba_cache_mode == "all" else "")
        out.append(f"vLLM hybrid page unification (platforms/interface.py _align_hybrid_block_size): attention block "
                   f"size {fmt_int(s.block_size)} tokens, the smallest multiple of {fmt_int(alignment)}{chunk} whose "
                   f"attention page ({fmt_int(attn_page)} B) holds one layer's states ({fmt_int(s.state_page_bytes)} "
                   f"B) ('Setting attention block size to {s.block_size} tokens'); "
                   + (f"the state page is padded by {pct:.2f}% to equal it ('Padding mamba page size by {pct:.2f}%')."
                      if s.state_page_padded else "the pages are equal: no padding."))
    return out


def _cached_free(s: Setup, pp_rank: int, parts: list[range]) -> int:
    """V0 0.6.5 - 0.6.6 (``non_torch_counts_cached_free``), with the non-torch figure not given: the free bytes the
    loaded rank's segments keep (kvplan.cost.allocator.cached_free_bytes, an ESTIMATE of the load's allocations;
    0 where the replay does not model the load); else 0."""
    if not s.engine.version.non_torch_counts_cached_free or "non_torch" in s.given:
        return 0
    from kvplan.cost.allocator import cached_free_bytes

    cc = s.gpu.compute_capability
    held = cached_free_bytes(s.card, s.w_t, s.layout, pp_rank, marlin=cc is not None and cc >= 8.0, stages=parts,
                             vocab_every_stage=s.engine.vocab_every_stage(s.card))
    return held or 0


def _allocator_rounding(s: Setup, pp_rank: int, parts: list[range]) -> int:
    """vLLM's "Model loading took" is torch.cuda.max_memory_allocated (DeviceMemoryProfiler): the caching
    allocator's blocks, which round each large tensor to its segment (kvplan.cost.allocator, imported here only)."""
    return _rounding(s.engine, s.card, s.w_t, s.layout, pp_rank, tuple(parts), s.opts.cpu_offload_gb,
                     not s.opts.mm_tower_skipped)


@lru_cache(maxsize=4096)
def _rounding(rt: VLLM, card, w_t, layout, pp_rank: int, parts: tuple[range, ...], cpu_offload_gb: float,
              tower: bool = True) -> int:
    """``_allocator_rounding`` of what it depends on, none of it the GPU's: once per layout and stage in a search."""
    from kvplan.cost.allocator import rounding_bytes
    from kvplan.cost.offload import budget_bytes

    return rounding_bytes(card, w_t, layout, pp_rank, stages=list(parts), vocab_every_stage=rt.vocab_every_stage(card),
                          offload=budget_bytes(cpu_offload_gb), tower=tower)
