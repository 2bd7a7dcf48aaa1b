"""What a plan asks a runtime (``ServingFlags``), what the runtime resolves (``Options``, ``Setup``), and what its
budget and pool come to (``Stage``, ``Pool``): the data ``kvplan.cost.runtimes.base.Runtime`` works on. Loaded by a
plan only: a plain estimate never builds these classes."""

from __future__ import annotations

from dataclasses import dataclass, field, fields as dataclass_fields
from functools import cached_property
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kvplan.cost.hardware import GPU
    from kvplan.cost.kvspec import KVLayerSpec
    from kvplan.cost.llamacpp import LlamaFlags
    from kvplan.cost.parallel import Layout
    from kvplan.cost.runtimes.results import KVCachePool
    from kvplan.model.card import ModelCard
    from kvplan.model.dtypes import DType


# ---- what a plan asks and what the runtime resolves ---------------------------------------------------------------

@dataclass(frozen=True)
class ServingFlags:
    """The serving options a plan was given, where SGLang uses it (None: not); each runtime takes those it has, refuses the rest
    by flag, and fills its defaults (``Runtime.resolve``)."""

    gpu_memory_utilization: float | None = None
    mem_fraction_static: float | None = None
    kv_cache_memory: int | str | None = None  # bytes or a size as text: parsed by the runtime that takes it
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None
    block_size: int | None = None
    # -- the engines' own flags beyond vLLM's and SGLang's budget (issue 25); each runtime names those it takes in
    # ``Runtime.extra_flags`` and ``Runtime.refuse_flags`` refuses the rest by flag --
    free_gpu_memory_fraction: float | None = None  # TensorRT-LLM kv_cache_config.free_gpu_memory_fraction
    max_num_tokens: int | None = None  # TensorRT-LLM --max_num_tokens
    max_batch_size: int | None = None  # TensorRT-LLM --max_batch_size
    cuda_memory_fraction: float | None = None  # TGI --cuda-memory-fraction
    max_batch_prefill_tokens: int | None = None  # TGI --max-batch-prefill-tokens
    speculative_config: str | dict | None = None  # vLLM --speculative-config (JSON text or a dict)
    shared_prefix_len: int | None = None  # tokens of prompt prefix every request shares (prefix caching)
    enable_lora: bool = False  # vLLM --enable-lora
    max_loras: int | None = None  # vLLM --max-loras
    max_lora_rank: int | None = None  # vLLM --max-lora-rank
    flashinfer_sampler: bool = False  # vLLM samples top-k/top-p in FlashInfer (0.10-0.11 with it installed; opt-in since)
    cold_compile: bool = False  # vLLM: a first boot, torch.compile's cache misses (compiles inside the memory profile)
    pp_layer_partition: str | None = None  # vLLM's VLLM_PP_LAYER_PARTITION, e.g. "16,32" (layers per stage)
    limit_mm_per_prompt: str | dict | None = None  # vLLM --limit-mm-per-prompt (JSON text or a dict)
    mm_encoder_tp_mode: str | None = None  # vLLM --mm-encoder-tp-mode: weights (default) or data
    cpu_offload_gb: float | None = None  # vLLM --cpu-offload-gb: GiB of decoder-layer weights per GPU kept in CPU memory
    enable_prefix_caching: bool | None = None  # vLLM --enable-prefix-caching (True) / --no-enable-prefix-caching (False)
    # not a flag: kv_cache_memory is kvplan's what-if (--from-log's logged pool), taken on a release without vLLM's
    # --kv-cache-memory-bytes, whose launch line then prints no command (Options.no_launch)
    kv_cache_memory_what_if: bool = False
    kv_cache_dtype: str | None = None  # not a flag: the K/V dtype the plan resolved (vLLM's MLA backend depends on it)
    llama: LlamaFlags | None = None  # llama.cpp's own flags (-c, -np, -ctk, -ctv, -fa, -ngl, ...): llamacpp, ollama
    speculative_algorithm: str | None = None  # SGLang --speculative-algorithm EAGLE|EAGLE3|NEXTN|STANDALONE|NGRAM
    speculative_draft_model_path: str | None = None  # SGLang --speculative-draft-model-path
    speculative_num_steps: int | None = None  # SGLang --speculative-num-steps
    speculative_eagle_topk: int | None = None  # SGLang --speculative-eagle-topk
    speculative_num_draft_tokens: int | None = None  # SGLang --speculative-num-draft-tokens
    swa_full_tokens_ratio: float | None = None  # SGLang --swa-full-tokens-ratio (the hybrid SWA pool, default 0.8)
    disable_hybrid_swa_memory: bool = False  # SGLang --disable-hybrid-swa-memory (one pool for every layer)
    max_running_requests: int | None = None  # SGLang --max-running-requests (the scheduler's running cap)
    disable_radix_cache: bool = False  # SGLang --disable-radix-cache (no prefix caching; a hybrid's radix-off path)
    max_mamba_cache_size: int | None = None  # SGLang --max-mamba-cache-size (a hybrid's state slots by count)
    mamba_radix_cache_strategy: str | None = None  # SGLang --mamba-radix-cache-strategy (auto, no_buffer, extra_buffer)


# ServingFlags field -> (the flag as the CLI spells it, the engines that take it)
EXTRA_FLAGS = {"free_gpu_memory_fraction": ("--kv-cache-free-gpu-memory-fraction", "trtllm"),
               "max_num_tokens": ("--max-num-tokens", "trtllm"), "max_batch_size": ("--max-batch-size", "trtllm"),
               "cuda_memory_fraction": ("--cuda-memory-fraction", "tgi"),
               "max_batch_prefill_tokens": ("--max-batch-prefill-tokens", "tgi"),
               "speculative_config": ("--speculative-config", "vllm"),
               "shared_prefix_len": ("--shared-prefix-len", "vllm, trtllm or tgi"),
               "enable_lora": ("--enable-lora", "vllm"), "max_loras": ("--max-loras", "vllm"),
               "max_lora_rank": ("--max-lora-rank", "vllm"),
               "flashinfer_sampler": ("--flashinfer-sampler", "vllm"),
               "cold_compile": ("--cold-compile", "vllm"),
               "pp_layer_partition": ("--pp-layer-partition", "vllm"),
               "limit_mm_per_prompt": ("--limit-mm-per-prompt", "vllm"),
               "mm_encoder_tp_mode": ("--mm-encoder-tp-mode", "vllm"),
               "cpu_offload_gb": ("--cpu-offload-gb", "vllm"),
               "enable_prefix_caching": ("--enable-prefix-caching/--no-enable-prefix-caching", "vllm"),
               "llama": ("-c/-np/-ctk/-ctv/-fa/-ngl", "llamacpp or ollama"),
               "speculative_algorithm": ("--speculative-algorithm", "sglang"),
               "speculative_draft_model_path": ("--speculative-draft-model-path", "sglang"),
               "speculative_num_steps": ("--speculative-num-steps", "sglang"),
               "speculative_eagle_topk": ("--speculative-eagle-topk", "sglang"),
               "speculative_num_draft_tokens": ("--speculative-num-draft-tokens", "sglang"),
               "swa_full_tokens_ratio": ("--swa-full-tokens-ratio", "sglang"),
               "disable_hybrid_swa_memory": ("--disable-hybrid-swa-memory", "sglang"),
               "max_running_requests": ("--max-running-requests", "sglang"),
               "disable_radix_cache": ("--disable-radix-cache", "sglang"),
               "max_mamba_cache_size": ("--max-mamba-cache-size", "sglang"),
               "mamba_radix_cache_strategy": ("--mamba-radix-cache-strategy", "sglang")}
# EXTRA_FLAGS given both ways (--flag / --no-flag): False is given too, and refused where the engine lacks the flag
TRI_STATE_FLAGS = frozenset({"enable_prefix_caching"})
# LlamaFlags field -> the flag as the CLI spells it (kvplan/cli/options.py): a refusal names those given
LLAMA_FLAGS = {"n_ctx": "-c/--ctx-size", "n_parallel": "-np/--parallel", "kv_unified": "--kv-unified",
               "type_k": "-ctk/--cache-type-k", "type_v": "-ctv/--cache-type-v", "flash_attn": "-fa/--flash-attn",
               "n_gpu_layers": "-ngl/--n-gpu-layers", "swa_full": "--swa-full", "n_ubatch": "-ub/--ubatch-size",
               "rules": "--llamacpp-rules", "gguf_quant": "--gguf-quant", "tensor_split": "-ts/--tensor-split",
               "overrides": "-ot/--override-tensor", "cpu_moe": "--cpu-moe", "n_cpu_moe": "-ncmoe/--n-cpu-moe",
               "lora": "--lora", "lora_rank": "--lora-rank", "lora_targets": "--lora-targets"}


def llama_flag_names(f: LlamaFlags) -> str:
    """The llama.cpp flags given in ``f`` as the CLI spells them (--no-kv-unified for -kvu given off), in the CLI's
    order; the group's name where none was given by flag (flags built in Python)."""
    names = [("--no-kv-unified" if k == "kv_unified" and f.kv_unified is False else flag)
             for k, flag in LLAMA_FLAGS.items() if k in f.given]
    return ", ".join(names) or EXTRA_FLAGS["llama"][0]


@dataclass(frozen=True)
class Options:
    """A runtime's options with its defaults filled in (None: the runtime has no such option)."""

    util: float | None = None
    util_given: bool = False  # --gpu-memory-utilization given (vLLM: kept on a --kv-cache-memory-bytes line)
    mfs: float | None = None
    kv_cache_memory: int | None = None
    mnbt: int | None = None
    max_num_seqs: int | None = None
    block_size: int = 1  # tokens per page; 1 for the unpaged runtimes
    free_gpu_memory_fraction: float | None = None  # TensorRT-LLM
    cuda_memory_fraction: float | None = None  # TGI
    speculative: object | None = None  # kvplan.cost.features.Speculative (vLLM --speculative-config)
    shared_prefix_len: int = 0  # prompt tokens every request shares (prefix caching)
    lora: object | None = None  # kvplan.cost.features.LoRA (vLLM --enable-lora)
    flashinfer_sampler: bool = False  # vLLM: the dummy sampler runs in FlashInfer (no sort)
    cold_compile: bool = False  # vLLM: torch.compile compiles inside the memory profile (a first boot)
    pp_layer_partition: tuple[int, ...] | None = None  # vLLM VLLM_PP_LAYER_PARTITION: decoder layers per stage
    swa_ratio: float | None = None  # SGLang: swa_full_tokens_ratio where the card gets a hybrid SWA pool, else None
    swa_disabled: bool = False  # SGLang --disable-hybrid-swa-memory given
    page_note: str | None = None  # SGLang: why the page size is what it is (trtllm_mha on Blackwell)
    swa_note: str | None = None  # SGLang: --swa-full-tokens-ratio given where no hybrid SWA pool uses it
    mfs_note: str | None = None  # SGLang: what the default mem_fraction_static took off (speculative, multimodal)
    mm_limit: int | None = None  # images per prompt (vLLM --limit-mm-per-prompt; multimodal cards)
    mm_limit_config: str | None = None  # --limit-mm-per-prompt as given, every modality (the launch line's JSON)
    mm_tower_skipped: bool = False  # every modality limited to 0 in a release that then builds no tower or projector
    mm_encoder_data: bool = False  # the vision tower whole on every rank (--mm-encoder-tp-mode data, where supported)
    mm_encoder_mode: str | None = None  # --mm-encoder-tp-mode as given
    cpu_offload_gb: float = 0.0  # vLLM --cpu-offload-gb (kvplan.cost.offload)
    state_pages: int = 1  # vLLM: pages one request holds in each state group (serving_vllm.state_pages; "all": + 1/block)
    state_alignment: int = 1  # vLLM: the hybrid block's extra alignment (align: 0.33+ GDN 64; "all": the Mamba chunk)
    mamba_cache_mode: str | None = None  # vLLM hybrids: "none", "align" or "all" (prefix caching on), as planned
    prefix_caching: bool | None = None  # vLLM --enable-prefix-caching (True) / --no-enable-prefix-caching (False) given
    max_running_requests: int | None = None  # SGLang --max-running-requests as given (None: resolve_max_num_reqs')
    radix_disabled: bool = False  # SGLang --disable-radix-cache given
    max_mamba_cache_size: int | None = None  # SGLang --max-mamba-cache-size as given, where SGLang uses it (None: not)
    mamba_strategy: str | None = None  # SGLang --mamba-radix-cache-strategy as given, where SGLang uses it (None: auto's choice)
    mamba_note: str | None = None  # what SGLang does with those three flags for this model and release
    spec_note: str | None = None  # SGLang: the draft shape the line fixes where SGLang's own choice would differ
    llama: LlamaFlags | None = None  # llama.cpp's flags with its defaults (llamacpp, ollama)


@dataclass(frozen=True)
class Setup:
    """A plan's inputs after the runtime's defaults and checks."""

    card: ModelCard
    engine: Runtime
    gpu: GPU
    total: int  # bytes per GPU
    layout: Layout
    max_model_len: int
    kv_t: DType
    w_t: DType
    opts: Options
    activation: int | None  # given; None: the runtime's estimate
    non_torch: int
    cuda_graph: int
    context: int
    block_size: int  # after a hybrid's page unification (vLLM)
    state_page_padded: int | None = None  # vLLM hybrid: the mamba page padded to the attention page
    state_page_bytes: int = 0  # vLLM: one state layer's conv + SSM states of one request on one rank (unpadded)
    state_t: DType | None = None  # the states' dtype beside a quantized KV cache (mamba_cache_dtype auto: model dtype)
    card_notes: tuple[str, ...] = ()  # how the card differs as the runtime builds it (Runtime.served_card)
    online_fp8: bool = False  # --quantization fp8 on a 16-bit checkpoint (Runtime.loaded_card)
    # the overheads given as flags ("non_torch", "cuda_graph", "context"), not the runtime's defaults; a given
    # --non-torch-memory replaces every default (vLLM V0 0.6.5's cached bytes too)
    given: frozenset[str] = frozenset()

    @property
    def weight_layout(self) -> Layout:
        """The layout one replica's weights are split by (Runtime.replica_layout)."""
        return self.engine.replica_layout(self.layout)

    @property
    def util(self) -> float | None:
        return self.opts.util

    @property
    def mfs(self) -> float | None:
        return self.opts.mfs

    @property
    def kv_cache_memory(self) -> int | None:
        return self.opts.kv_cache_memory

    def charged(self, st: Stage, extra: int, **fields) -> Stage:
        """``st`` with ``fields`` replaced and ``extra`` more non-KV bytes taken from its pool, unless
        --kv-cache-memory fixes the pool (vLLM's kv_cache_memory_bytes skips the profiling arithmetic)."""
        return st.replaced(available=st.available if self.kv_cache_memory is not None else st.available - extra,
                           **fields)

    @property
    def mnbt(self) -> int | None:
        return self.opts.mnbt

    @property
    def max_num_seqs(self) -> int | None:
        return self.opts.max_num_seqs

    @property
    def unified_block(self) -> bool:
        """vLLM hybrid: block_size was raised so an attention page holds a state page."""
        return self.block_size != self.opts.block_size


class LayerSpecs(tuple):
    """A rank's KV layer specs (kvplan.cost.kvspec.KVLayerSpec) with the sums a budget reads, each computed once: the
    tuple never changes, and a search shares one per layout and stage over every GPU type."""

    @cached_property
    def kv_bytes_per_token(self) -> int:
        """K/V bytes one more token adds to one request on this rank (state layers add none)."""
        return sum(s.bytes_per_token for s in self if not s.per_sequence)

    @cached_property
    def state_bytes(self) -> int:
        """The conv and SSM states of one request on this rank (all its state layers), unpadded."""
        return sum(s.bytes_per_token for s in self if s.per_sequence)

    @cached_property
    def counts(self) -> tuple[tuple[KVLayerSpec, int], ...]:
        """Equal specs merged, (spec, how many layers), as kvplan.cost.kvspec.layer_spec_counts gives them: the
        per-step sums of kvplan.cost.traffic run over these."""
        from collections import Counter

        return tuple(Counter(self).items())


@dataclass(frozen=True)
class Stage:
    """One pipeline stage's budget (every TP rank of a stage holds the same shapes)."""

    pp_rank: int
    layers: range
    params: int
    weights: int  # incl. buffers
    buffers: int
    activation: int
    non_torch: int
    cuda_graph: int
    requested: int
    available: int
    specs: LayerSpecs = field(default_factory=LayerSpecs)  # any sequence of specs given: made a LayerSpecs
    rounding: int = 0  # of weights: the caching allocator's blocks beyond the tensors' bytes (vLLM)
    cached_free: int = 0  # of non_torch: free bytes the caching allocator keeps (vLLM V0 0.6.5 - 0.6.6)
    offloaded: int = 0  # weights kept in CPU memory (vLLM --cpu-offload-gb), not in ``weights``

    def __post_init__(self) -> None:
        if type(self.specs) is not LayerSpecs:
            object.__setattr__(self, "specs", LayerSpecs(self.specs))

    @property
    def kv_bytes_per_token(self) -> int:
        return self.specs.kv_bytes_per_token

    @property
    def state_bytes(self) -> int:
        return self.specs.state_bytes

    def replaced(self, **changes) -> Stage:
        """``dataclasses.replace(self, **changes)`` without its walk over the fields and ``__init__`` (a search
        builds thousands of stages); TypeError for a name that is no field."""
        if not changes.keys() <= _STAGE_FIELDS:
            raise TypeError(f"Stage has no field {sorted(changes.keys() - _STAGE_FIELDS)[0]!r}")
        new = object.__new__(Stage)
        object.__setattr__(new, "__dict__", {**self.__dict__, **changes})
        if "specs" in changes:
            new.__post_init__()
        return new


_STAGE_FIELDS = frozenset(f.name for f in dataclass_fields(Stage))


@dataclass(frozen=True)
class Pool:
    """What a runtime's pool gives: the limiting stage, the pool, concurrency, fit, and every stage's row."""

    limiting: Stage
    pool: KVCachePool
    concurrency: float
    request_bytes: int
    fits: bool
    max_model_len_fit: int
    ranks: list[RankRow]
