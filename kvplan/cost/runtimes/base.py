"""What every runtime answers when it serves a model: its options and defaults, the layouts it refuses, the budget of
a pipeline stage, the pool, concurrency, the longest length that fits, the launch line, notes and its version.

``Runtime`` extends the cache rules of ``kvplan.cost.engines.Engine`` with these serving rules. The defaults here are
those of an unpaged runtime that runs one process on one GPU (ideal, transformers): a request holds what
``positions_held`` says, memory is ``ceil(total x utilization)`` less weights and overheads. Paged servers (vLLM,
SGLang) override what differs, in their own module. Planning (``kvplan.planning.capacity``) assembles these answers
and never asks a runtime's name.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, ClassVar

from kvplan.cost.engines import CacheRun, Engine
from kvplan.errors import DoesNotFit, KvplanError, Refused, WeightsDoNotFit
from kvplan.units import fmt_bytes, require_fraction

if TYPE_CHECKING:
    from kvplan.cost.hardware import GPU
    from kvplan.cost.llamacpp import LlamaFlags
    from kvplan.cost.kvspec import KVLayerSpec
    from kvplan.cost.parallel import Layout
    from kvplan.cost.quant import QuantKernel
    from kvplan.cost.runtimes.results import KVCachePool, RankRow
    from kvplan.cost.runtimes.setup import Options, Pool, ServingFlags, Setup, Stage
    from kvplan.cost.traffic import HeldWeights
    from kvplan.model.card import ModelCard
    from kvplan.model.dtypes import DType
    from kvplan.model.quant import Mxfp4Layout



# ---- the runtime ------------------------------------------------------------------------------------------------

class Runtime(Engine):
    """Cache rules (``Engine``) plus serving rules. Class attributes describe the runtime; methods answer a plan."""

    display_name: ClassVar[str] = "ideal"  # as a verdict names it
    rules: ClassVar[str] = ""  # the engine version whose rules are followed; "" for kvplan's own runtimes
    server: ClassVar[bool] = False  # a serving engine: pads the vocabulary, keeps the rotary cache, pages its pool
    single_process: ClassVar[bool] = False  # one process on one GPU: no TP/PP
    # the GPU vendors (the catalog's ``vendor``) the engine runs on; None: any (check_gpu)
    gpu_vendors: ClassVar[frozenset[str] | None] = None
    budget_flag: ClassVar[str] = "--gpu-memory-utilization"  # the flag that sizes the pool
    extra_flags: ClassVar[frozenset[str]] = frozenset()  # the ServingFlags of EXTRA_FLAGS this runtime takes
    versions: ClassVar[tuple[str, ...]] = ()  # the release ranges modelled (``--engine NAME==VERSION``)
    # disaggregated serving: tokens a decode worker holds per request beyond its input and output (kvplan disagg)
    disagg_decode_reserve_tokens: ClassVar[int] = 0
    # disaggregated serving: the flags that make a server a prefill or a decode worker, by role, and what else the
    # deployment needs; None: the engine serves no disaggregated prefill/decode (kvplan disagg refuses it)
    disagg_roles: ClassVar[dict[str, str] | None] = None
    disagg_note: ClassVar[str] = ""

    def decode_micro_batches(self, pp: int) -> int:
        """How many decode batches the runtime keeps in flight on a pipeline of ``pp`` stages, each holding a share of
        the running requests (a request is in one of them at a time): 1 where one batch walks the stages in turn and
        each stage waits for the others (kvplan.planning.capacity.latency bounds the token period accordingly)."""
        return 1

    def host_read_note(self, s) -> str | None:
        """Where a step also reads bytes held in host memory (CPU layers, offloaded weights): what the GPU bounds leave
        out, for the latency notes; None where the GPUs hold everything a step reads."""
        return None

    def disagg_launch(self, launch: str, role: str) -> str:
        """The plan's launch line made a ``role`` ("prefill", "decode") worker of a disaggregated deployment."""
        return f"{launch} {self.disagg_roles[role]}"
    # its --dp replicas split a MoE's routed experts between them (vLLM: the flattened DP x TP group of
    # FusedMoEParallelConfig); False: each replica holds the whole model (SGLang --dp-size without DP attention,
    # TGI, TensorRT-LLM, transformers: independent copies)
    moe_across_dp: ClassVar[bool] = False
    launches_replicas: ClassVar[bool] = False  # its launch line starts the --dp replicas (vLLM, SGLang); else one each
    # a 16/32-bit KV cache is the model's dtype (vLLM/SGLang --kv-cache-dtype auto); only fp8 is chosen apart
    kv_follows_model_dtype: ClassVar[bool] = False
    # the environment variable that lets a --max-model-len past max_position_embeddings start, where it refuses one
    long_context_env: ClassVar[str | None] = None
    newest_read: ClassVar[tuple[int, ...]] = ()  # the newest release whose source the rules were read in
    beyond_read: ClassVar[str | None] = None  # --engine NAME==X.Y newer than newest_read: planned on the newest rules
    # --engine NAME==X.Y as given (None: no release pinned): check_release refuses a card whose architecture this
    # release's model registry does not hold yet (kvplan.cost.model_registries)
    pinned: ClassVar[str | None] = None
    registry_column: ClassVar[str | None] = None  # its column of model_registries.FIRST_RELEASES (None: no table)
    def replica_layout(self, layout: Layout) -> Layout:
        """The layout one replica's weights are split by: ``layout``, or with DP 1 where this runtime's replicas are
        whole copies (``moe_across_dp`` False: no expert split between them; a DP that is no positive int is left for
        check_layout to name)."""
        dp = layout.dp
        if self.moe_across_dp or isinstance(dp, bool) or not isinstance(dp, int) or dp <= 1:
            return layout
        return type(layout)(layout.tp, layout.pp, 1, layout.expert_parallel)

    # MXFP4 experts as this runtime holds them in a plan without a GPU (Quantization.kernel_layout); None:
    # kvplan.cost.quant's default, vLLM's Marlin backend (vLLM's per release and GPU: runtimes/vllm.py mxfp4_loaded)
    mxfp4_layout: ClassVar[Mxfp4Layout | None] = None
    # its launch line loads the card's Hugging Face checkpoint (vLLM, SGLang, ...); llama.cpp's loads a GGUF
    loads_hf_checkpoint: ClassVar[bool] = False
    # sizes every layer from a GGUF's own metadata (per-layer K/V heads, tensor types): it takes a GGUF whose
    # attention.head_count_kv differs per layer, which no card can hold (kvplan.model.gguf_card)
    reads_gguf_layers: ClassVar[bool] = False

    def mxfp4_layout_on(self, gpu) -> Mxfp4Layout | None:
        """MXFP4 experts as this runtime holds them on ``gpu`` (None: no GPU named): ``mxfp4_layout`` unless the
        runtime picks its backend by GPU (vLLM)."""
        return self.mxfp4_layout

    def at_version(self, text: str) -> Runtime:
        """The runtime for release ``text`` of this engine; KvplanError where no version is modelled."""
        raise KvplanError(f"--engine: {self.name} models no engine versions; use --engine {self.name}")

    def engine_for(self, card: ModelCard, gpu, layout: Layout, flags: ServingFlags, kv_dtype: str | None,
                   weight_dtype: str | None = None) -> tuple[Runtime, str | None]:
        """(the runtime that serves ``card`` on ``gpu`` with these flags, why where it is not this one): an engine that
        picks between its own engines by what it serves (vLLM 0.8 - 0.9.0: V1 or V0) says so; here, this one."""
        return self, None

    def log_engine(self, spec: str, v0_lines: bool) -> str:
        """The engine spec to plan a log with, from ``spec`` (its release) and whether it shows V0 start-up lines
        (``v0_lines``): ``spec`` here."""
        return spec

    # -- options and refusals --

    def refuse_flags(self, flags: ServingFlags) -> None:
        """Refuse, by flag, the engine-specific flags of ``EXTRA_FLAGS`` this runtime does not take."""
        from kvplan.cost.runtimes.setup import EXTRA_FLAGS, TRI_STATE_FLAGS, llama_flag_names

        for name, (flag, owner) in EXTRA_FLAGS.items():
            value = getattr(flags, name)  # a switch left off (or 0) is not given; a --flag/--no-flag pair's False is
            given = value is not None if name in TRI_STATE_FLAGS else value not in (None, False)
            if name not in self.extra_flags and given:
                flag = llama_flag_names(flags.llama) if name == "llama" else flag  # the llama.cpp flags given
                raise KvplanError(f"{flag}: only for --engine {owner} (got --engine {self.name})")

    def resolve(self, flags: ServingFlags, card: ModelCard, gpu: GPU, total: int, layout: Layout,
                max_model_len: int) -> Options:
        """The options this runtime takes, with its defaults; a flag it has no use for is refused by name."""
        if flags.block_size is not None:
            raise KvplanError(f"--block-size: {self.name} keeps no pages; only --engine vllm or sglang")
        util = utilization(flags.gpu_memory_utilization, 1.0)
        self._refuse_sglang_only(flags)
        self._refuse_vllm_only(flags)
        from kvplan.cost.runtimes.setup import Options

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


    def cache_type_flags(self, kv_dtype: str | None, llama: LlamaFlags | None
                         ) -> tuple[str | None, LlamaFlags | None]:
        """(--kv-dtype, llama.cpp's flags) made one choice where this runtime sets its cache type by flags of its own
        (llama.cpp's -ctk/-ctv); unchanged here."""
        return kv_dtype, llama

    @property
    def takes_llama_flags(self) -> bool:
        """llama.cpp's flags (-c, -np, -ctk ...): llamacpp and ollama."""
        return "llama" in self.extra_flags

    def estimate_memory(self, card: ModelCard, w_bits: int, seq_len: int, batch: int, flags: LlamaFlags | None):
        """What the engine itself allocates for ``batch`` sequences of ``seq_len`` (llama.cpp: every buffer per
        device); None where the estimate's KV and weights say it all."""
        return None

    def estimate_held(self, card: ModelCard, w_t: DType, seq_len: int, batch: int, flags: LlamaFlags | None):
        """What each GPU reads in a step of an estimate where the engine holds the weights otherwise than the
        estimate's rows count them (llama.cpp: its GGUF buffers; kvplan.cost.traffic.path_traffic's stages); None:
        the rows say it all (the whole model as the weights row holds it)."""
        return None

    def weights_label(self, s: Setup) -> str | None:
        """How the plan's weights are stored where the runtime holds them otherwise than the card and dtype say
        (llama.cpp: a GGUF type); None: the card's format (kvplan.planning.results.weights_format)."""
        return None

    def plan_extras(self, s: Setup) -> dict:
        """Fields a runtime adds to a plan's result (llama.cpp: its context and per-device buffers)."""
        return {}

    def vocab_every_stage(self, card: ModelCard) -> frozenset[str]:
        """What of the vocabulary ("embedding", "lm_head") every pipeline stage holds beside its own layers; empty:
        the embedding on the first stage (and the last when tied), the head on the last (vLLM's llama.py)."""
        return frozenset()

    def check_release(self, card: ModelCard) -> None:
        """A pinned release (``--engine vllm==0.6.4``) older than the first whose model registry holds the card's
        architecture (kvplan.cost.model_registries.FIRST_RELEASES): KvplanError naming --engine and that release.
        No release pinned, or an architecture the table does not know: nothing refused. An encoder-decoder card
        (T5) on a runtime with a column of the table (vLLM, SGLang), whatever the release: no registry read holds
        one (model_registries.ENCODER_DECODER_SOURCES)."""
        from kvplan.cost.model_registries import encoder_decoder_refusal, release_refusal

        if self.registry_column is not None and card.architecture == "encoder-decoder":
            raise KvplanError(encoder_decoder_refusal(self.registry_column, self.display_name, card.name,
                                                      card.hf_architecture))
        if self.pinned is None:
            return

        why = release_refusal(self.registry_column, self.name, self.display_name, self.pinned, card.name,
                              card.hf_architecture)
        if why:
            raise KvplanError(why)

    def check_servable(self, card: ModelCard, layout: Layout) -> None:
        """What this runtime does not serve (or kvplan does not model) for this card and layout."""
        self.check_release(card)
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

    def context_default(self, gpus: int, gpu, default: int) -> int:
        """The memory in use before the engine reads its free memory (CUDA context, communicators) when not given,
        on ``gpus`` GPUs of ``gpu`` (a catalog GPU); ``default``: overhead_defaults'."""
        return default

    def cuda_graph_default(self, opts: Options, default: int, card: ModelCard) -> int:
        """The CUDA-graph bytes charged when not given, once the options are known (``default``: overhead_defaults')."""
        return default

    def non_torch_default(self, opts: Options, default: int, card: ModelCard) -> int:
        """The non-torch bytes charged when not given, once the options are known (``default``: overhead_defaults')."""
        return default

    def peak_line_holds_graphs(self) -> bool:
        """Whether the start-up summary's profile peak (a log's "X GiB for peak activation") is the transient peak
        plus the charged CUDA-graph estimate, so --from-log compares it with kvplan's peak + graphs: no here."""
        return False

    def loaded_card(self, card: ModelCard, w_t: DType, model_t: DType) -> tuple[ModelCard, DType, tuple[str, ...]]:
        """(the card as its weights are loaded, the dtype of its unquantized tensors, notes): unchanged here."""
        return card, w_t, ()

    def served_dtypes(self, card: ModelCard, gpu: GPU, w_t: DType, kv_t: DType, weight_given: bool,
                      kv_given: bool) -> tuple[DType, DType, tuple[str, ...]]:
        """(the model dtype, the K/V dtype, notes) as this runtime serves ``card`` on ``gpu``, from the dtypes asked
        (``weight_given``/``kv_given``: by --weight-dtype/--kv-dtype) or defaulted: unchanged here; a server refuses
        (``Refused``) a dtype its quantization method does not take, or changes a defaulted one (Server)."""
        return w_t, kv_t, ()

    def state_dtype(self, card: ModelCard, kv_t: DType, model_t: DType) -> DType | None:
        """The dtype of conv and SSM states when it differs from the K/V dtype; None: the same."""
        return None

    def hybrid_block(self, card: ModelCard, kv_t: DType, layout: Layout, opts: Options,
                     state_t: DType | None) -> tuple[int, int | None, int]:
        """(block size, state page padded, state page) after page unification of the block ``opts`` resolved;
        unpaged runtimes keep the block."""
        return opts.block_size, None, 0

    def cache_groups(self, card: ModelCard, kv_t: DType, block_size: int, gpu=None,
                     prefix_caching: bool | None = None):
        """(block size, KV cache groups) one TP-1 rank pages a request's cache in, where this runtime pools layers in
        groups of one block table (vLLM V1: serving_vllm.KVCacheGroup, hybrid pages unified; ``gpu``, where known,
        for what depends on it; ``prefix_caching``: vLLM's --enable-prefix-caching as given, None its default); None: every layer by itself, the per-layer sum. ``estimate`` and ``sweep`` fold a
        sequence's bytes over the same groups as ``plan`` (the same pages for full, MLA and state groups; for sliding
        and chunked ones what a decoding sequence holds, not plan's admission bound)."""
        return None

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
        weights += self.mla_load_bytes(s, len(w.layers))
        requested = vl.requested_memory(s.total, s.util)
        available = vl.available_kv_bytes(requested, weights, act, s.non_torch, s.cuda_graph)
        if s.kv_cache_memory is not None:  # vLLM gpu_worker.py: kv_cache_memory_bytes skips the profiling arithmetic
            available = s.kv_cache_memory
        from kvplan.cost.runtimes.setup import Stage

        return Stage(pp_rank, w.layers, w.params, weights, w.buffers_bytes, act, s.non_torch, s.cuda_graph,
                     requested, available, specs)

    def kv_bytes_per_token(self, s: Setup, p: Pool) -> int:
        """One more cached token of one request on the limiting rank (the plan's "KV per token")."""
        return p.limiting.kv_bytes_per_token

    def kv_dtype_name(self, s: Setup) -> str:
        """The K/V cache type as the plan names it."""
        return s.kv_t.name

    def mla_load_bytes(self, s: Setup, layers: int) -> int:
        """What ``layers`` MLA layers hold beyond the checkpoint tensors after loading: a quantized kv_b_proj is
        dequantized into bf16 W_UK / W_UV copies (serving_vllm.mla_dequant_bytes)."""
        from kvplan.cost import serving_vllm as vl

        q = s.card.quantization
        w_bits = q.bits if q and q.quantizes("kv_b_proj") else s.w_t.bits
        return vl.mla_dequant_bytes(s.card, s.layout.tp, layers, w_bits)

    def activation(self, s: Setup, last_stage: bool) -> int:
        """The activation peak charged to the budget: the given one, else none."""
        return s.activation or 0

    def activation_estimated(self, s: Setup) -> bool:
        return False

    def check_budget(self, s: Setup, sts: list[Stage]) -> None:
        """Refuse, as the runtime would, a memory that leaves nothing for the cache; where the weights alone exceed
        the GPU (after the CUDA context), say so: no budget flag helps then (unless --kv-cache-memory fixes the pool:
        a log reproduced on a stand-in GPU of the catalog)."""
        heavy = max(sts, key=lambda st: st.weights)
        if s.kv_cache_memory is None and heavy.weights >= s.total - s.context:
            raise WeightsDoNotFit(
                f"--gpu: the weights alone do not fit: {fmt_bytes(heavy.weights)} per GPU on pipeline stage "
                f"{heavy.pp_rank} of {s.layout.tp * s.layout.pp}x {s.gpu.name}, which holds {fmt_bytes(s.total)} "
                f"({fmt_bytes(s.context)} of it the CUDA context); use more GPUs (--tp/--pp), a GPU with more memory, "
                "or smaller weights (--weight-dtype fp8, a quantized checkpoint)",
                weights_bytes=heavy.weights, room_bytes=s.total - s.context, gpu_bytes=_held(s, heavy))
        worst = min(sts, key=lambda st: st.available)
        if worst.available <= 0:
            flag = self.budget_flag
            raise DoesNotFit(
                f"{flag}: {self.name}: no available memory for the cache blocks on pipeline stage {worst.pp_rank}: "
                f"{fmt_bytes(worst.requested)} requested - {fmt_bytes(worst.weights)} weights - "
                f"{fmt_bytes(worst.activation)} activations - {fmt_bytes(worst.non_torch + worst.cuda_graph)} "
                f"overheads = {fmt_bytes(worst.available)}; raise {flag}, use more GPUs (--tp/--pp) or a bigger --gpu",
                gpu_bytes=_held(s, worst))

    # -- what one GPU reads in a step (the latency bounds) --

    def held_stages(self, s: Setup, sts: list[Stage]) -> list[tuple[HeldWeights, tuple]]:
        """Per pipeline stage, what one GPU of it holds as a step reads it (kvplan.cost.traffic.rank_held_weights:
        its rank's weight shards, the bytes of the plan's weights row) and the cache specs it keeps (its rank's:
        kv_heads_per_rank heads, MLA latents whole, the states of its TP shapes), for kvplan.cost.traffic
        .path_traffic."""
        parts = tuple(st.layers for st in sts)
        return [held_stage(self, s.card, s.w_t, s.kv_t, s.state_t, s.weight_layout, st.pp_rank, parts) for st in sts]

    def held_layout(self, card: ModelCard, w_t: DType, kv_t: DType, layout: Layout) -> list[tuple[HeldWeights, tuple]]:
        """``held_stages`` of ``card`` on ``layout`` without a plan (a sweep's row): this runtime's layer split, its
        replica layout, states in the model dtype beside a quantized K/V (``state_dtype``)."""
        from kvplan.model.dtypes import parse_dtype

        state_t = self.state_dtype(card, kv_t, parse_dtype(self.default_dtype(card.dtype)[0]))
        parts = tuple(self.partition(card, layout.pp))
        return [held_stage(self, card, w_t, kv_t, state_t, self.replica_layout(layout), i, parts)
                for i in range(layout.pp)]

    # -- the pool --

    def pool(self, s: Setup, sts: list[Stage]) -> Pool:
        """A request holds what ``positions_held`` says, no pages (block size 1)."""
        from kvplan.cost.runtimes.results import KVCachePool
        from kvplan.cost.runtimes.setup import Pool

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

    running_limit_flag = ""  # the engine's flag for that cap, named where it binds

    def running_limit(self, s: Setup, p: Pool) -> int | None:
        """The most requests the scheduler runs at once per replica (``p``: the pool it admits them to), where the
        engine caps them; None: the pool alone limits them."""
        return None

    def block_size_on(self, card: ModelCard, gpu, kv_dtype: str | None = None) -> int | None:
        """The tokens per page this runtime takes for ``card`` on ``gpu`` by default (``kv_dtype``: the K/V dtype as
        given, None: the engine's); None: no GPU-dependent choice (a sweep's KV columns keep their 16)."""
        return None

    def running(self, s: Setup, p: Pool) -> float:
        """The requests one replica runs at once: the pool's concurrency, capped by ``running_limit``."""
        limit = self.running_limit(s, p)
        return p.concurrency if limit is None else min(p.concurrency, limit)

    # -- what a plan prints --

    def launch_command(self, s: Setup, repo: str, revision: str | None = None) -> str:
        """The command that starts this plan (``revision``: the commit a Hub model was read at)."""
        return "(ideal: no engine to launch; the lower bound any engine can reach)"

    def launch_env(self, s: Setup, *settings: str) -> str:
        """What a launch line sets before its command, "NAME=VALUE " each: ``settings``, then ``long_context_env``=1
        where --max-model-len exceeds the model's max_position_embeddings (the engine refuses it otherwise)."""
        env = [*settings, *([f"{self.long_context_env}=1"] if self.needs_long_context(s) else [])]
        return "".join(f"{e} " for e in env)

    def needs_long_context(self, s: Setup) -> bool:
        """--max-model-len past the model's max_position_embeddings, which this engine refuses unless
        ``long_context_env`` is set."""
        return self.long_context_env is not None and s.max_model_len > s.card.max_position_embeddings

    def runs_on(self, gpu) -> bool:
        """Whether the engine runs on ``gpu`` at all (its vendor among ``gpu_vendors``)."""
        return self.gpu_vendors is None or str(gpu.vendor).lower() in {v.lower() for v in self.gpu_vendors}

    def check_gpu(self, gpu) -> None:
        """KvplanError naming --gpu and --engine where the engine does not run on ``gpu``'s vendor."""
        if not self.runs_on(gpu):
            raise KvplanError(f"--gpu/--engine: {gpu.name} is made by {gpu.vendor}; {self.display_name} runs on "
                              f"{' or '.join(sorted(self.gpu_vendors))} GPUs only; pick another --gpu or --engine")

    def no_launch_reason(self, s: Setup) -> str | None:
        """Why no launch line of this runtime reproduces the plan ``s`` (a what-if given in kvplan's terms that the
        engine has no flag for); None: ``launch_command`` does."""
        return None

    def pool_summary(self, p: Pool, s: Setup) -> str:
        """What the verdict says about the pool after its size."""
        return ""

    def search_note(self) -> str | None:
        """What a layout search with this runtime should say about its options beyond the order (None: nothing)."""
        return None

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

    def context_in_budget(self, s: Setup) -> bool:
        """Whether the memory in use at start (CUDA context, NCCL; --context-memory) is charged inside the budget
        (vLLM V1 0.8.0 - 0.9.0) rather than left outside it: no here."""
        return False

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


_RANGES: dict[tuple[type, object], Runtime] = {}


class VersionRange:
    """The releases one engine-version object covers (a frozen dataclass with ``first`` and ``last``, None: up to the
    newest), shared by vLLM's and SGLang's version tables."""

    first: tuple[int, ...]
    last: tuple[int, ...] | None

    def covers(self, version: tuple[int, ...]) -> bool:
        """``version`` (major, minor, patch) compared at each bound's own precision: a (major, minor) bound covers
        every patch of that minor release."""
        return (self.first <= version[:len(self.first)]
                and (self.last is None or version[:len(self.last)] <= self.last))

    @property
    def span(self) -> str:
        first = ".".join(map(str, self.first))
        if self.last is None or self.last == self.first:  # "0.29+", "0.10" (one minor release), "0.11-0.16"
            return first if self.last else f"{first}+"
        return f"{first}-{'.'.join(map(str, self.last))}"


def at_range(rt: Runtime, root: type, text: str, versions) -> Runtime:
    """``--engine NAME==X.Y[.Z]``: the runtime object of the modelled range of ``versions`` covering that release,
    one instance per release as given (a subclass of the range's runtime whose ``pinned`` is ``text``: the release a
    card's architecture is checked against, Runtime.check_release); KvplanError naming --engine and the modelled
    ranges otherwise."""
    base = _range_runtime(rt, root, text, versions)
    pinned = str(text).strip()
    key = (type(base), pinned)
    if key not in _RANGES:
        _RANGES[key] = type(type(base).__name__, (type(base),), {"pinned": pinned, "__doc__": type(base).__doc__})()
    return _RANGES[key]


def _range_runtime(rt: Runtime, root: type, text: str, versions) -> Runtime:
    """The runtime object of the modelled range covering release ``text``, one instance per range (a subclass of
    ``root`` whose ``version`` and ``rules`` are that range's; a release newer than ``newest_read``: one per release,
    ``beyond_read`` set)."""
    release = parse_release("--engine", text)
    family = next((f for f in versions if f.covers(release)), None)
    if family is None:
        raise KvplanError(f"--engine: {rt.display_name} {text} is not modelled; modelled: "
                          f"{', '.join(f'{rt.name}==' + f.span for f in versions)}")
    if family.last is None and rt.newest_read and release > rt.newest_read:  # a release kvplan has not read
        key = (root, family, release)
        if key not in _RANGES:
            base = _range_runtime(rt, root, ".".join(map(str, rt.newest_read)), versions)
            _RANGES[key] = type(f"{type(base).__name__}_beyond", (type(base),), {"beyond_read": str(text)})()
        return _RANGES[key]
    if family is rt.version:
        return rt
    if (root, family) not in _RANGES:
        suffix = family.span.replace(".", "_").replace("-", "_").replace("+", "_up")
        cls = type(f"{root.__name__}_{suffix}", (root,),
                   {"version": family, "rules": family.label,
                    "__doc__": f"{rt.display_name}'s rules as of {family.label}."})
        _RANGES[root, family] = cls()
    return _RANGES[root, family]


def parse_version(flag: str, text: str) -> tuple[int, int]:
    """'0.11', '0.11.2', 'v0.11.0rc1', '0.10.1.dev8168' -> (0, 11), ...; KvplanError naming the flag otherwise."""
    return parse_release(flag, text)[:2]


def parse_release(flag: str, text: str) -> tuple[int, int, int]:
    """(major, minor, patch): '0.5.6.post2' -> (0, 5, 6); a missing patch is 0."""
    import re

    m = re.fullmatch(r"v?(\d{1,4})\.(\d{1,4})(?:\.(\d{1,6}))?(?:[.+-]?[A-Za-z0-9.+]{1,40})?", str(text).strip())
    if m is None:
        raise KvplanError(f"{flag}: a version is MAJOR.MINOR[.PATCH] (e.g. vllm==0.11), got {str(text)[:40]!r}")
    return int(m[1]), int(m[2]), int(m[3] or 0)


def stage_weights(s: Setup, pp_rank: int, parts: list[range]):
    """One rank of a stage: its weight shards (kvplan.cost.parallel.rank_weights) and its KV layer specs (a
    ``LayerSpecs``). Servers pad the vocabulary and keep the rotary cos/sin cache as buffers."""
    return _stage_weights(s.engine, s.card, s.w_t, s.kv_t, s.state_t, s.weight_layout, pp_rank, tuple(parts))


@lru_cache(maxsize=4096)
def _stage_weights(engine: Runtime, card: ModelCard, w_t: DType, kv_t: DType, state_t: DType | None, layout: Layout,
                   pp_rank: int, parts: tuple[range, ...]):
    """``stage_weights`` of what it depends on, none of it the GPU's: computed once per layout and stage, not once
    per GPU type of a search (runtimes are immutable: their class attributes and version)."""
    from kvplan.cost.parallel import DEFAULT_VOCAB_PADDING, rank_kv_specs, rank_weights

    served = engine.server
    w = rank_weights(card, w_t, layout, 0, pp_rank, kv_t=kv_t, stages=list(parts), include_buffers=served,
                     vocab_padding=DEFAULT_VOCAB_PADDING if served else 1,
                     vocab_every_stage=engine.vocab_every_stage(card) if served else frozenset())
    from kvplan.cost.runtimes.setup import LayerSpecs

    return w, LayerSpecs(rank_kv_specs(card, kv_t, engine, layout, pp_rank, stages=list(parts), state_t=state_t))


@lru_cache(maxsize=4096)
def held_stage(engine: Runtime, card: ModelCard, w_t: DType, kv_t: DType, state_t: DType | None, layout: Layout,
               pp_rank: int, parts: tuple[range, ...]) -> tuple[HeldWeights, tuple]:
    """One stage of ``held_stages``: its rank's weights as a step reads them and its cache specs, once per layout
    and stage (``_stage_weights``'s arguments)."""
    from kvplan.cost.traffic import rank_held_weights

    w, specs = _stage_weights(engine, card, w_t, kv_t, state_t, layout, pp_rank, parts)
    return rank_held_weights(card, w_t, layout, w), specs.counts


def longest(ok, hi: int, guess: int | None = None) -> int:
    """Binary search for the largest n in [0, hi] with ok(n) (ok monotone; ok(0) assumed). ``guess``: where the answer
    likely is; ok there and not one above ends the search at once (any guess gives the same answer)."""
    lo = 0
    for mid in (guess, guess + 1) if guess is not None else ():
        if lo < mid <= hi:
            lo, hi = (mid, hi) if ok(mid) else (lo, mid - 1)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if ok(mid) else (lo, mid - 1)
    return lo


def _held(s: Setup, st: Stage) -> int:
    """What a rank holds besides its KV pool: weights, activation peak, overheads and the CUDA context (the plan's
    per-GPU figure, kvplan.planning.check.figures.gpu_bytes)."""
    return st.weights + st.activation + st.non_torch + st.cuda_graph + s.context


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
    loads_hf_checkpoint = True
    online_fp8_flag: ClassVar[str] = "--quantization fp8"  # the flag that quantizes a 16-bit checkpoint to fp8 at load

    def release(self) -> tuple[int, ...]:
        """The release planned: the one pinned (``--engine vllm==0.10.1``), else the range's first (the newest range
        when no release is given), so a range spanning a flag's first release refuses it unless pinned past it."""
        return parse_release("--engine", self.pinned) if self.pinned is not None else self.version.first

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
        if w_t.name in ("int4", "int8") and card.quantization is None:
            raise KvplanError(f"--weight-dtype: {w_t.name}: {self.display_name} loads integer weights from a quantized "
                              "checkpoint (AWQ, GPTQ, compressed-tensors: its own card or --hf-config, e.g. -m "
                              "qwen3-8b-awq) and quantizes a 16-bit one online only to fp8; allowed here: "
                              + ", ".join(dict.fromkeys((model_t.name, "fp16", "bf16", "fp32", "fp8"))))
        if not (w_t.name.startswith("fp8") and card.quantization is None and model_t.bits >= 16) or (
                card.ssm is not None or card.shared_blocks is not None):  # no quantized-mixer rule: all fp8 there
            return card, w_t, ()
        from kvplan.model.catalog import card_from_dict

        data = card.model_dump(exclude_none=True)
        data["quantization"] = {"method": "fp8", "weight_scales": "tensor", "activation_scheme": "dynamic"}
        loaded = card_from_dict(data, origin=f"{card.name} with --quantization fp8")
        return loaded, model_t, (f"{self.online_fp8_flag} (online, {self.display_name}): the linear and MoE layers are "
                                 "quantized to float8 at load with one fp32 scale per tensor; embeddings, the LM head, "
                                 f"norms and routers stay {model_t.name}.",)

    def quant_kernel(self, card: ModelCard, gpu: GPU) -> QuantKernel | None:
        """The quantization method this release runs ``card``'s quantized checkpoint with on ``gpu``, as far as the
        model dtype goes (kvplan.cost.quant.QuantKernel); None: no rule read (any 16/32-bit model dtype)."""
        return None

    def served_dtypes(self, card: ModelCard, gpu: GPU, w_t: DType, kv_t: DType, weight_given: bool,
                      kv_given: bool) -> tuple[DType, DType, tuple[str, ...]]:
        """The model dtype checked against ``quant_kernel``: a method the platform refuses (``QuantKernel.refused``)
        and a GPU below the method's minimum compute capability are refused, and so is a model dtype it does not take
        where --weight-dtype (or a 16/32-bit --kv-dtype, which is the model's: with fp8 weights too) asked for it; a
        defaulted one (the checkpoint's torch_dtype, dtype auto) becomes the method's first (float16 for AWQ/GPTQ)
        with a note, since the engine would refuse the checkpoint's at load. Under --kv-cache-dtype
        auto the K/V follow the model dtype (vLLM v1/worker/gpu_model_runner.py, SGLang model_runner.py
        configure_kv_cache_dtype: "auto" is the model dtype)."""
        from kvplan.cost.roofline import served_compute_dtype
        from kvplan.model.dtypes import TORCH_NAME_OF, parse_dtype

        kernel = self.quant_kernel(card, gpu) if card.quantization is not None else None
        if kernel is None:
            return w_t, kv_t, ()
        method = card.quantization.method.upper()
        where = f"{self.display_name} {self.pinned or self.version.span}"
        if kernel.refused:
            raise Refused(f"--gpu: {gpu.name}: {where} runs {card.name}'s {method} checkpoint as {kernel.name} there, "
                          f"which it refuses: {kernel.refused}; pick another --gpu or --engine")
        cc = gpu.compute_capability
        if kernel.min_capability is not None and cc is not None and cc < kernel.min_capability:
            raise Refused(f"--gpu: {gpu.name} (compute capability {cc}): {where} runs {card.name}'s {method} "
                          f"checkpoint as {kernel.name}, which refuses GPUs below compute capability "
                          f"{kernel.min_capability} ({kernel.source}, get_min_capability); pick another --gpu")
        # a 16/32-bit --kv-dtype of quantized weights is the model dtype the launch line sets (--dtype: vLLM's and
        # SGLang's --kv-cache-dtype auto is the model's; kvplan.cost.runtimes.vllm.dtype_flags), as where online
        # --quantization fp8 asks for float32 K/V; bfloat16 on a GPU without bfloat16 units is served in float16
        asked_kv = kv_given and kv_t.bits >= 16 and not (weight_given and kv_t.name == w_t.name)
        model_t = kv_t if asked_kv else w_t
        model_t = parse_dtype(served_compute_dtype(gpu, "bf16")) if model_t.name == "bf16" else model_t
        if model_t.bits < 16 or model_t.name in kernel.dtypes:
            return w_t, kv_t, ()
        allowed = ", ".join(kernel.dtypes)
        why = (f"{where} runs {card.name}'s {method} linears on {gpu.name} as {kernel.name}"
               + (f" ({kernel.why})" if kernel.why else "")
               + f", which takes {allowed} activations only ({kernel.source}, get_supported_act_dtypes)")
        if weight_given or asked_kv:
            flag = "--kv-dtype" if asked_kv else "--weight-dtype"
            raise Refused(f"{flag}: {model_t.name}: {why}; allowed: {allowed}"
                          + (" (the model dtype), fp8_e4m3, fp8_e5m2" if asked_kv else ""))
        served = parse_dtype(kernel.dtypes[0])
        note = (f"{why}: --dtype auto resolves to {model_t.name} here (the checkpoint's torch_dtype {card.dtype}), "
                f"which the engine refuses at load, so this plan serves {served.name} (--dtype "
                f"{TORCH_NAME_OF[served.name]}); --weight-dtype takes {allowed}.")
        return served, served if kv_t.bits >= 16 else kv_t, (note,)

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
