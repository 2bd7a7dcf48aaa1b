"""What every runtime answers when it serves a model: its options and defaults, the layouts it refuses, the budget of
a pipeline stage, the pool, concurrency, the longest length that fits, the launch line, notes and its version.

``Runtime`` extends the cache rules of ``kvplan.cost.engines.Engine`` with these serving rules. The defaults here are
those of an unpaged runtime that runs one process on one GPU (ideal, transformers): a request holds what
``positions_held`` says, memory is ``ceil(total x utilization)`` less weights and overheads. Paged servers (vLLM,
SGLang) override what differs, in their own module. Planning (``kvplan.planning.capacity``) assembles these answers
and never asks a runtime's name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from kvplan.cost.engines import CacheRun, Engine
from kvplan.errors import KvplanError, Refused
from kvplan.units import fmt_bytes, require_fraction

if TYPE_CHECKING:
    from kvplan.cost.hardware import GPU
    from kvplan.cost.llamacpp import LlamaFlags
    from kvplan.cost.kvspec import KVLayerSpec
    from kvplan.cost.parallel import Layout
    from kvplan.cost.runtimes.results import KVCachePool, RankRow
    from kvplan.model.card import ModelCard
    from kvplan.model.dtypes import DType

DEFAULT_CONTEXT_BYTES = 512 * 2**20  # CUDA context + cuBLAS workspace (+ NCCL): kvplan.cost.serving_vllm cites it


# ---- what a plan asks and what the runtime resolves ---------------------------------------------------------------

@dataclass(frozen=True)
class ServingFlags:
    """The serving options a plan was given (None: not given); each runtime takes those it has, refuses the rest
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
    llama: LlamaFlags | None = None  # llama.cpp's own flags (-c, -np, -ctk, -ctv, -fa, -ngl, ...): llamacpp, ollama


# ServingFlags field -> (the flag as the CLI spells it, the engines that take it)
EXTRA_FLAGS = {"free_gpu_memory_fraction": ("--kv-cache-free-gpu-memory-fraction", "trtllm"),
               "max_num_tokens": ("--max-num-tokens", "trtllm"), "max_batch_size": ("--max-batch-size", "trtllm"),
               "cuda_memory_fraction": ("--cuda-memory-fraction", "tgi"),
               "max_batch_prefill_tokens": ("--max-batch-prefill-tokens", "tgi"),
               "speculative_config": ("--speculative-config", "vllm"),
               "shared_prefix_len": ("--shared-prefix-len", "vllm, trtllm or tgi"),
               "enable_lora": ("--enable-lora", "vllm"), "max_loras": ("--max-loras", "vllm"),
               "max_lora_rank": ("--max-lora-rank", "vllm"),
               "llama": ("-c/-np/-ctk/-ctv/-fa/-ngl", "llamacpp or ollama")}


@dataclass(frozen=True)
class Options:
    """A runtime's options with its defaults filled in (None: the runtime has no such option)."""

    util: float | None = None
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

    @property
    def util(self) -> float | None:
        return self.opts.util

    @property
    def mfs(self) -> float | None:
        return self.opts.mfs

    @property
    def kv_cache_memory(self) -> int | None:
        return self.opts.kv_cache_memory

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
    specs: list[KVLayerSpec] = field(default_factory=list)

    @property
    def kv_bytes_per_token(self) -> int:
        """K/V bytes one more token adds to one request on this rank (state layers add none)."""
        return sum(s.bytes_per_token for s in self.specs if not s.per_sequence)

    @property
    def state_bytes(self) -> int:
        """The conv and SSM states of one request on this rank (all its state layers), unpadded."""
        return sum(s.bytes_per_token for s in self.specs if s.per_sequence)


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


# ---- the runtime ------------------------------------------------------------------------------------------------

class Runtime(Engine):
    """Cache rules (``Engine``) plus serving rules. Class attributes describe the runtime; methods answer a plan."""

    display_name: ClassVar[str] = "ideal"  # as a verdict names it
    rules: ClassVar[str] = ""  # the engine version whose rules are followed; "" for kvplan's own runtimes
    server: ClassVar[bool] = False  # a serving engine: pads the vocabulary, keeps the rotary cache, pages its pool
    single_process: ClassVar[bool] = False  # one process on one GPU: no TP/PP
    budget_flag: ClassVar[str] = "--gpu-memory-utilization"  # the flag that sizes the pool
    extra_flags: ClassVar[frozenset[str]] = frozenset()  # the ServingFlags of EXTRA_FLAGS this runtime takes
    versions: ClassVar[tuple[str, ...]] = ()  # the release ranges modelled (``--engine NAME==VERSION``)

    def at_version(self, text: str) -> Runtime:
        """The runtime for release ``text`` of this engine; KvplanError where no version is modelled."""
        raise KvplanError(f"--engine: {self.name} models no engine versions; use --engine {self.name}")

    # -- options and refusals --

    def refuse_flags(self, flags: ServingFlags) -> None:
        """Refuse, by flag, the engine-specific flags of ``EXTRA_FLAGS`` this runtime does not take."""
        for name, (flag, owner) in EXTRA_FLAGS.items():
            if name not in self.extra_flags and getattr(flags, name) not in (None, False):
                raise KvplanError(f"{flag}: only for --engine {owner} (got --engine {self.name})")

    def resolve(self, flags: ServingFlags, card: ModelCard, gpu: GPU, total: int, layout: Layout,
                max_model_len: int) -> Options:
        """The options this runtime takes, with its defaults; a flag it has no use for is refused by name."""
        if flags.block_size is not None:
            raise KvplanError(f"--block-size: {self.name} keeps no pages; only --engine vllm or sglang")
        util = utilization(flags.gpu_memory_utilization, 1.0)
        self._refuse_sglang_only(flags)
        self._refuse_vllm_only(flags)
        return Options(util=util)

    def _refuse_sglang_only(self, flags: ServingFlags) -> None:
        if flags.mem_fraction_static is not None:
            raise KvplanError(f"--mem-fraction-static: only for --engine sglang (got --engine {self.name})")

    def _refuse_vllm_only(self, flags: ServingFlags) -> None:
        if flags.kv_cache_memory is not None:
            raise KvplanError(f"--kv-cache-memory: vLLM's kv_cache_memory_bytes; not used by --engine {self.name}")
        for flag, value in (("--max-num-batched-tokens", flags.max_num_batched_tokens),
                            ("--max-num-seqs", flags.max_num_seqs)):
            if value is not None:
                raise KvplanError(f"{flag}: a vLLM scheduler limit; not used by --engine {self.name}")


    @property
    def takes_llama_flags(self) -> bool:
        """llama.cpp's flags (-c, -np, -ctk ...): llamacpp and ollama."""
        return "llama" in self.extra_flags

    def estimate_memory(self, card: ModelCard, w_bits: int, seq_len: int, batch: int, flags: LlamaFlags | None):
        """What the engine itself allocates for ``batch`` sequences of ``seq_len`` (llama.cpp: every buffer per
        device); None where the estimate's KV and weights say it all."""
        return None

    def plan_extras(self, s: Setup) -> dict:
        """Fields a runtime adds to a plan's result (llama.cpp: its context and per-device buffers)."""
        return {}

    def check_servable(self, card: ModelCard, layout: Layout) -> None:
        """What this runtime does not serve (or kvplan does not model) for this card and layout."""
        if layout.expert_parallel:
            raise KvplanError(f"--expert-parallel: vLLM's --enable-expert-parallel; not modelled for --engine "
                              f"{self.name}")
        if self.single_process and layout.tp * layout.pp > 1:
            raise Refused(f"--tp/--pp: {self.name} runs one process on one GPU here; use --dp for replicas")

    def served_card(self, card: ModelCard) -> tuple[ModelCard, tuple[str, ...]]:
        """The card as this runtime builds it, and notes saying how it differs."""
        return card, ()

    def overhead_defaults(self, gpus: int) -> tuple[int, int, int]:
        """(non-torch, CUDA graphs, CUDA context) bytes when not given."""
        return 0, 0, 0

    def loaded_card(self, card: ModelCard, w_t: DType, model_t: DType) -> tuple[ModelCard, DType, tuple[str, ...]]:
        """(the card as its weights are loaded, the dtype of its unquantized tensors, notes): unchanged here."""
        return card, w_t, ()

    def state_dtype(self, card: ModelCard, kv_t: DType, model_t: DType) -> DType | None:
        """The dtype of conv and SSM states when it differs from the K/V dtype; None: the same."""
        return None

    def hybrid_block(self, card: ModelCard, kv_t: DType, layout: Layout, block_size: int,
                     state_t: DType | None) -> tuple[int, int | None, int]:
        """(block size, state page padded, state page) after page unification; unpaged runtimes keep the block."""
        return block_size, None, 0

    # -- the budget --

    def partition(self, card: ModelCard, pp: int) -> list[range]:
        from kvplan.cost.parallel import pp_partition

        return pp_partition(card.num_layers, pp)

    def stages(self, s: Setup) -> list[Stage]:
        parts = self.partition(s.card, s.layout.pp)
        return [self.stage(s, i, parts) for i in range(s.layout.pp)]

    def stage(self, s: Setup, pp_rank: int, parts: list[range]) -> Stage:
        """requested = ceil(total x util); available = requested - weights - activation - overheads."""
        from kvplan.cost import serving_vllm as vl

        w, specs = stage_weights(s, pp_rank, parts)
        weights, act = w.bytes + w.buffers_bytes, self.activation(s, pp_rank == s.layout.pp - 1)
        q = s.card.quantization  # a quantized kv_b_proj is dequantized into bf16 W_UK / W_UV copies
        w_bits = q.bits if q and q.quantizes("kv_b_proj") else s.w_t.bits
        weights += vl.mla_dequant_bytes(s.card, s.layout.tp, len(w.layers), w_bits)
        requested = vl.requested_memory(s.total, s.util)
        available = vl.available_kv_bytes(requested, weights, act, s.non_torch, s.cuda_graph)
        if s.kv_cache_memory is not None:  # vLLM gpu_worker.py: kv_cache_memory_bytes skips the profiling arithmetic
            available = s.kv_cache_memory
        return Stage(pp_rank, w.layers, w.params, weights, w.buffers_bytes, act, s.non_torch, s.cuda_graph,
                     requested, available, specs)

    def activation(self, s: Setup, last_stage: bool) -> int:
        """The activation peak charged to the budget: the given one, else none."""
        return s.activation or 0

    def activation_estimated(self, s: Setup) -> bool:
        return False

    def check_budget(self, s: Setup, sts: list[Stage]) -> None:
        """Refuse, as the runtime would, a memory that leaves nothing for the cache."""
        worst = min(sts, key=lambda st: st.available)
        if worst.available <= 0:
            flag = self.budget_flag
            raise Refused(
                f"{flag}: {self.name}: no available memory for the cache blocks on pipeline stage {worst.pp_rank}: "
                f"{fmt_bytes(worst.requested)} requested - {fmt_bytes(worst.weights)} weights - "
                f"{fmt_bytes(worst.activation)} activations - {fmt_bytes(worst.non_torch + worst.cuda_graph)} "
                f"overheads = {fmt_bytes(worst.available)}; raise {flag}, use more GPUs (--tp/--pp) or a bigger --gpu")

    # -- the pool --

    def pool(self, s: Setup, sts: list[Stage]) -> Pool:
        """A request holds what ``positions_held`` says, no pages (block size 1)."""
        from kvplan.cost.runtimes.results import KVCachePool

        L = s.max_model_len

        def request(st: Stage, length: int) -> int:
            run = CacheRun(length, 0, length if self.static else None, 1)
            return sum(sp.positions_held(self, run) * sp.bytes_per_token for sp in st.specs)

        # positions of block size 1; an attention-free model (Mamba) caches no positions: 0 blocks, states only
        rows = [rank_row(st, st.kv_bytes_per_token,
                         max(0, st.available) // st.kv_bytes_per_token if st.kv_bytes_per_token else 0,
                         longest(lambda n, st=st: request(st, n) <= st.available, L)) for st in sts]
        lim = min(range(len(sts)), key=lambda i: max(0, sts[i].available) / request(sts[i], L))
        req = request(sts[lim], L)
        conc = max(0, sts[lim].available) / req
        pool = KVCachePool(available_bytes=sts[lim].available, block_size=1,
                           bytes_per_block=sts[lim].kv_bytes_per_token, num_blocks=rows[lim].num_blocks,
                           tokens=int(conc * L), groups=1, padding_layers=0,
                           blocks_per_request=L if sts[lim].kv_bytes_per_token else 0,
                           state_bytes_per_request=sts[lim].state_bytes)
        return Pool(sts[lim], pool, conc, req, all(request(st, L) <= st.available for st in sts),
                    min(r.max_model_len_fit for r in rows), rows)

    def running_limit(self, s: Setup) -> int | None:
        """The most requests the scheduler runs at once per replica, where it caps them below the pool."""
        return None

    # -- what a plan prints --

    def launch_command(self, s: Setup, repo: str, revision: str | None = None) -> str:
        """The command that starts this plan (``revision``: the commit a Hub model was read at)."""
        return "(ideal: no engine to launch; the lower bound any engine can reach)"

    def pool_summary(self, p: Pool, s: Setup) -> str:
        """What the verdict says about the pool after its size."""
        return ""

    def notes(self, s: Setup, p: Pool) -> list[str]:
        """The runtime's own notes on a plan (budget, scheduler, states)."""
        out = []
        if s.card.ssm is not None:
            out.append(f"State layers: one request holds {fmt_bytes(p.pool.state_bytes_per_request)} of conv and SSM "
                       "states on this GPU, whatever its length.")
        if s.activation is None:
            out.append(f"{self.name}: no activation peak is charged (pass --activation-memory for generate()'s "
                       "transient memory); memory = requested - weights - the CUDA context (--non-torch-memory).")
        return out

    def requested_rule(self, s: Setup) -> str:
        """How the requested memory is computed, for the budget table."""
        return f"ceil(total x gpu_memory_utilization {s.util})"

    def activation_rule(self, s: Setup) -> str:
        return "given (--activation-memory)" if s.activation else "not modelled (--activation-memory)"

    @property
    def rules_text(self) -> str:
        return self.rules or f"kvplan {self.name} engine (kvplan.cost.runtimes)"


# ---- helpers the runtimes share ---------------------------------------------------------------------------------

def utilization(value: float | None, default: float) -> float:
    """--gpu-memory-utilization: a fraction in (0, 1]; the runtime's default when not given."""
    from kvplan.cost import serving_vllm as vl

    util = default if value is None else value
    if isinstance(util, bool) or not isinstance(util, (int, float)):
        require_fraction("--gpu-memory-utilization", util)  # a string or None: refused by type, one line
    vl.requested_memory(1, util)  # (0, 1] check, vLLM's wording
    return util


def parse_version(flag: str, text: str) -> tuple[int, int]:
    """'0.11', '0.11.2', 'v0.11.0rc1', '0.10.1.dev8168' -> (0, 11), ...; KvplanError naming the flag otherwise."""
    import re

    m = re.fullmatch(r"v?(\d{1,4})\.(\d{1,4})(?:\.\d{1,6})?(?:[.+-]?[A-Za-z0-9.+]{1,40})?", str(text).strip())
    if m is None:
        raise KvplanError(f"{flag}: a version is MAJOR.MINOR[.PATCH] (e.g. vllm==0.11), got {str(text)[:40]!r}")
    return int(m[1]), int(m[2])


def stage_weights(s: Setup, pp_rank: int, parts: list[range]):
    """One rank of a stage: its weight shards (kvplan.cost.parallel.rank_weights) and its KV layer specs. Servers
    pad the vocabulary and keep the rotary cos/sin cache as buffers."""
    from kvplan.cost.parallel import DEFAULT_VOCAB_PADDING, rank_kv_specs, rank_weights

    served = s.engine.server
    w = rank_weights(s.card, s.w_t, s.layout, 0, pp_rank, kv_t=s.kv_t, stages=parts, include_buffers=served,
                     vocab_padding=DEFAULT_VOCAB_PADDING if served else 1)
    specs = rank_kv_specs(s.card, s.kv_t, s.engine, s.layout, pp_rank, stages=parts, state_t=s.state_t)
    return w, specs


def longest(ok, hi: int) -> int:
    """Binary search for the largest n in [0, hi] with ok(n) (ok monotone; ok(0) assumed)."""
    lo = 0
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if ok(mid) else (lo, mid - 1)
    return lo


def rank_row(st: Stage, bpb: int, blocks: int, fit: int) -> RankRow:
    from kvplan.cost.runtimes.results import RankRow

    return RankRow(pp_rank=st.pp_rank, first_layer=st.layers.start, last_layer=st.layers.stop - 1, params=st.params,
                   weights_bytes=st.weights, activation_bytes=st.activation,
                   overhead_bytes=st.non_torch + st.cuda_graph, available_kv_bytes=st.available,
                   kv_bytes_per_token=st.kv_bytes_per_token, bytes_per_block=bpb, num_blocks=blocks,
                   max_model_len_fit=fit)


def positive_size(flag: str, value) -> int:
    from kvplan.units import parse_size

    n = parse_size(flag, value)
    if n < 1:
        raise KvplanError(f"{flag}: must be a positive size, got {value!r}")
    return n


class Server(Runtime):
    """A serving engine (vLLM, SGLang): pages its pool, pads the vocabulary, keeps the rotary cache as a buffer, and
    keeps conv and SSM states in the model dtype whatever the K/V use."""

    server = True
    serves_fp32 = False

    def check_servable(self, card: ModelCard, layout: Layout) -> None:
        super().check_servable(card, layout)
        if card.ssm and card.ssm.kind == "rglru":
            raise KvplanError(f"--engine {self.name}: {card.name}'s RG-LRU layers (RecurrentGemma) are not modelled "
                              "for vLLM or SGLang, which serve no RecurrentGemma model here; use --engine ideal, "
                              "hf-static or hf-dynamic")

    def served_card(self, card: ModelCard) -> tuple[ModelCard, tuple[str, ...]]:
        """Shared blocks (Zamba, Zamba2): served by vLLM's Zamba2 only (which overrides this)."""
        if card.shared_blocks is not None:
            refuse_zamba_v1(card, self.name)
            raise KvplanError(f"--engine {self.name}: {self.display_name} serves no Zamba2 model; use --engine vllm "
                              "(models/zamba2.py)")
        return card, ()

    def loaded_card(self, card: ModelCard, w_t: DType, model_t: DType) -> tuple[ModelCard, DType, tuple[str, ...]]:
        """Online fp8 (``--quantization fp8`` on a 16-bit checkpoint; vLLM quantization/fp8.py
        Fp8Config.get_quant_method, SGLang alike): linear and MoE layers in float8 with one fp32 scale per tensor
        (per expert), quantized at load; embeddings, a tied or untied LM head, norms and routers stay in the model
        dtype."""
        if not (w_t.name.startswith("fp8") and card.quantization is None and model_t.bits >= 16) or (
                card.ssm is not None or card.shared_blocks is not None):  # no quantized-mixer rule: all fp8 there
            return card, w_t, ()
        from kvplan.model.catalog import card_from_dict

        data = card.model_dump(exclude_none=True)
        data["quantization"] = {"method": "fp8", "weight_scales": "tensor", "activation_scheme": "dynamic"}
        loaded = card_from_dict(data, origin=f"{card.name} with --quantization fp8")
        return loaded, model_t, (f"--quantization fp8 (online, {self.display_name}): the linear and MoE layers are "
                                 "quantized to float8 at load with one fp32 scale per tensor; embeddings, the LM head, "
                                 f"norms and routers stay {model_t.name}.",)

    def state_dtype(self, card: ModelCard, kv_t: DType, model_t: DType) -> DType | None:
        """vLLM mamba_cache_dtype "auto" is the model dtype (MambaStateDtypeCalculator); SGLang mamba2_state_dtype."""
        if card.ssm is None:
            return None
        return None if model_t == kv_t else model_t


def refuse_zamba_v1(card: ModelCard, engine: str) -> None:
    if card.ssm.kind != "mamba2":
        raise KvplanError(f"--engine {engine}: {card.name} is a Zamba (v1) model (shared blocks over "
                          f"{card.ssm.kind} layers); vLLM serves only Zamba2 (Zamba2ForCausalLM) and SGLang neither; "
                          "use --engine ideal, hf-static or hf-dynamic")
