"""``kvplan.plan``: how many requests of max_model_len tokens fit a model on a GPU layout, as the engine computes it.

>>> from kvplan import plan
>>> r = plan("llama-3.1-70b", gpu="H100-SXM", tp=4, max_model_len=8192)
>>> r.kv_cache.num_blocks > 0, r.fits
(True, True)

Engines: every runtime of ``kvplan.cost.runtimes`` (``vllm``: V1, the newest modelled range, 0.33+ with 0.33's
rules; ``vllm==0.11`` and the like: an older range's; ``sglang``: 0.5.23 rules;
``hf-static`` / ``hf-dynamic``: transformers, one GPU; ``ideal``: exactly the tokens attention needs, no overheads).
A plan is assembled here from the runtime's answers (options, refusals, budget, pool, launch line, notes); this
module never asks a runtime's name. ``PlanRequest`` is the typed input, validated once; ``plan_request(card, req)``
the orchestrator; ``plan(...)`` the keyword API.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from kvplan.cost.hardware import GPU, in_use_at_start_bytes, load_gpu
from kvplan.cost.parallel import Layout, check_layout
from kvplan.cost.runtimes import get_engine
from kvplan.cost.runtimes.base import Runtime, positive_size
from kvplan.cost.runtimes.setup import EXTRA_FLAGS, Pool, ServingFlags, Setup, Stage
from kvplan.errors import KvplanError, WeightsDoNotFit
from kvplan.model.card import ModelCard
from kvplan.model.catalog import load_card
from kvplan.planning.capacity.results import Latency, PerGPU, PlanInputs, PlanResult
from kvplan.planning.estimate import _dtype, auto_kv
from kvplan.planning.results import weights_format
from kvplan.units import parse_size, require_positive

if TYPE_CHECKING:
    from kvplan.cost.llamacpp import LlamaFlags


MIN_GPU_MEMORY = 256 * 2**20  # no GPU that holds an LLM has less: a smaller --gpu-memory is a unit left out


def gpu_memory_size(value) -> int:
    """--gpu-memory in bytes; KvplanError naming --gpu-memory for a figure no GPU has (a bare ``80`` is 80 bytes)."""
    from kvplan.units import fmt_bytes

    n = positive_size("--gpu-memory", value)
    if n < MIN_GPU_MEMORY:
        raise KvplanError(f"--gpu-memory: {value!r} is {fmt_bytes(n)}, less than any GPU holds (a bare number is "
                          f"bytes); give a unit, e.g. 80GiB or 81559MiB, or leave it out for the catalog's total")
    return n


@dataclass(frozen=True)
class PlanRequest:
    """What a plan asks, validated on construction (sizes parsed, lengths positive, the runtime looked up); what
    depends on the card (dtypes, layouts the engine refuses) is checked when it is planned."""

    gpu: GPU
    max_model_len: int
    runtime: Runtime
    layout: Layout = Layout()
    flags: ServingFlags = ServingFlags()
    kv_dtype: str | None = None
    weight_dtype: str | None = None
    gpu_memory: int | None = None  # bytes; None: the catalog's
    activation: int | None = None  # bytes given; None: the runtime's estimate
    non_torch: int | None = None
    cuda_graph: int | None = None
    context: int | None = None
    concurrency: int | None = None
    prompt_len: int | None = None
    acceptance_rate: float | None = None  # speculative decoding: each drafted token's acceptance probability

    def __post_init__(self) -> None:
        require_positive("--max-model-len", self.max_model_len)
        if self.concurrency is None and self.prompt_len is not None:
            raise KvplanError("--prompt-len: only used with --concurrency (latency bounds)")
        if self.concurrency is not None:
            require_positive("--concurrency", self.concurrency)
        if self.prompt_len is not None:
            require_positive("--prompt-len", self.prompt_len)
        if self.acceptance_rate is not None:
            from kvplan.cost.features import expected_tokens_per_step

            if self.concurrency is None:
                raise KvplanError("--acceptance-rate: only used with --concurrency (latency bounds)")
            expected_tokens_per_step(self.acceptance_rate, 1)  # a probability in [0, 1]

    def with_layout(self, layout: Layout) -> PlanRequest:
        """This request on ``layout``: ``dataclasses.replace`` without its walk over the fields and the checks of
        ``__post_init__``, which no layout enters (a search makes one per GPU type and layout)."""
        new = object.__new__(PlanRequest)
        object.__setattr__(new, "__dict__", {**self.__dict__, "layout": layout})
        return new

    @classmethod
    def build(cls, *, gpu: str | GPU, max_model_len: int, tp: int = 1, pp: int = 1, dp: int = 1,
              engine: str | Runtime = "vllm", **kw) -> PlanRequest:
        """From the keyword API's values (names, sizes as text); KvplanError naming the flag."""
        g = gpu if isinstance(gpu, GPU) else load_gpu(gpu, kw.pop("gpu_file", None))
        kw.pop("gpu_file", None)
        platform = kw.pop("platform", None)
        if platform is not None:  # Windows/WSL2: the total CUDA reports there, unless --gpu-memory gives it
            g = g.on_platform(platform, total_given=kw.get("gpu_memory") is not None)
        size = lambda flag, v: None if v is None else parse_size(flag, v)  # noqa: E731
        flags = ServingFlags(gpu_memory_utilization=kw.pop("gpu_memory_utilization", None),
                             mem_fraction_static=kw.pop("mem_fraction_static", None),
                             kv_cache_memory=kw.pop("kv_cache_memory", None),
                             kv_cache_memory_what_if=bool(kw.pop("kv_cache_memory_what_if", False)),
                             max_num_batched_tokens=kw.pop("max_num_batched_tokens", None),
                             max_num_seqs=kw.pop("max_num_seqs", None), block_size=kw.pop("block_size", None),
                             **{k: v for k in EXTRA_FLAGS if (v := kw.pop(k, None)) is not None})
        gpu_memory = kw.pop("gpu_memory", None)
        return cls(gpu=g, max_model_len=max_model_len, runtime=get_engine(engine),
                   layout=Layout(tp, pp, dp, bool(kw.pop("expert_parallel", False))), flags=flags,
                   kv_dtype=kw.pop("kv_dtype", None), weight_dtype=kw.pop("weight_dtype", None),
                   gpu_memory=None if gpu_memory is None else gpu_memory_size(gpu_memory),
                   activation=size("--activation-memory", kw.pop("activation_memory", None)),
                   non_torch=size("--non-torch-memory", kw.pop("non_torch_memory", None)),
                   cuda_graph=size("--cuda-graph-memory", kw.pop("cuda_graph_memory", None)),
                   context=size("--context-memory", kw.pop("context_memory", None)),
                   concurrency=kw.pop("concurrency", None), prompt_len=kw.pop("prompt_len", None),
                   acceptance_rate=kw.pop("acceptance_rate", None), **kw)


def plan(model: ModelCard | str | Path, *, gpu: str | GPU, max_model_len: int, tp: int = 1, pp: int = 1, dp: int = 1,
         engine: str = "vllm", gpu_memory: int | str | None = None, gpu_file: str | None = None,
         platform: str | None = None, gpu_memory_utilization: float | None = None, mem_fraction_static: float | None = None,
         kv_cache_memory: int | str | None = None, max_num_batched_tokens: int | None = None,
         max_num_seqs: int | None = None, block_size: int | None = None, kv_dtype: str | None = None,
         weight_dtype: str | None = None, activation_memory: int | str | None = None,
         non_torch_memory: int | str | None = None, cuda_graph_memory: int | str | None = None,
         context_memory: int | str | None = None, concurrency: int | None = None,
         prompt_len: int | None = None, expert_parallel: bool = False, acceptance_rate: float | None = None,
         kv_cache_memory_what_if: bool = False, **engine_flags) -> PlanResult:
    """Plan ``model`` on ``tp x pp`` GPUs (x ``dp`` replicas) of type ``gpu``; KvplanError on a layout the engine
    refuses or on memory that leaves nothing for the cache. A request that does not fit is an answer (fits=False).
    ``platform`` "windows": the GPU under Windows or WSL2, whose total CUDA reports is the whole board
    (``GPU.on_platform``); default the catalog's Linux total.
    ``concurrency`` adds latency bounds at that many requests (``prompt_len`` tokens of prefill, default
    max_model_len). ``engine_flags``: the engines' own flags (``kvplan.cost.runtimes.base.EXTRA_FLAGS``:
    free_gpu_memory_fraction, max_num_tokens, max_batch_size for trtllm; cuda_memory_fraction,
    max_batch_prefill_tokens for tgi; speculative_config, enable_lora, max_loras, max_lora_rank for vllm;
    shared_prefix_len for the paged engines). ``kv_cache_memory_what_if``: ``kv_cache_memory`` is kvplan's what-if (a
    log's pool), not vLLM's --kv-cache-memory-bytes, so a release without that flag (before 0.10.2) takes it too and
    its plan prints no launch command (``launch_command`` None, a note says why)."""
    unknown = set(engine_flags) - set(EXTRA_FLAGS)
    if unknown:
        raise TypeError(f"plan() got unexpected keyword arguments {sorted(unknown)}")
    card = model if isinstance(model, ModelCard) else load_card(model)
    req = PlanRequest.build(
        gpu=gpu, gpu_file=gpu_file, max_model_len=max_model_len, tp=tp, pp=pp, dp=dp, engine=engine,
        gpu_memory=gpu_memory, platform=platform, gpu_memory_utilization=gpu_memory_utilization, mem_fraction_static=mem_fraction_static,
        kv_cache_memory=kv_cache_memory, max_num_batched_tokens=max_num_batched_tokens, max_num_seqs=max_num_seqs,
        block_size=block_size, kv_dtype=kv_dtype, weight_dtype=weight_dtype, activation_memory=activation_memory,
        non_torch_memory=non_torch_memory, cuda_graph_memory=cuda_graph_memory, context_memory=context_memory,
        concurrency=concurrency, prompt_len=prompt_len, expert_parallel=expert_parallel,
        acceptance_rate=acceptance_rate, kv_cache_memory_what_if=kv_cache_memory_what_if, **engine_flags)
    return plan_request(card, req)


def plan_request(card: ModelCard, req: PlanRequest) -> PlanResult:
    """The orchestrator: the runtime's setup, stages, pool and budget check, then the result (with a Hub model's
    checkpoint bytes beside kvplan's whole-model count, as the estimate has them)."""
    s = setup(card, req)
    try:
        sts, p = assemble(s)
    except WeightsDoNotFit as exc:
        smaller = quantized_variants(card)
        if not smaller:
            raise
        raise WeightsDoNotFit(f"{exc}; bundled quantized card(s) of this model: {', '.join(smaller)} "
                              f"(-m {smaller[0]})", weights_bytes=exc.weights_bytes, room_bytes=exc.room_bytes,
                              gpu_bytes=exc.gpu_bytes) from None
    if req.concurrency is None:
        out = result(s, sts, p)
    else:
        out = result(s, sts, p, _latency_at_target(s, sts, p, req), req.concurrency)
    from kvplan.planning.estimate import checkpoint_of_card  # a Hub model: its checkpoint's bytes, as the estimate's

    check = checkpoint_of_card(card)
    return out if check is None else out.model_copy(update={"checkpoint": check})


def _latency_at_target(s: Setup, sts: list[Stage], p: Pool, req: PlanRequest) -> Latency:
    """The bounds at the target concurrency, or at the most requests the layout runs at once (its pool, capped by
    the engine's scheduler: ``running``) where the target is more: the rest wait, and a decode step never holds
    them."""
    import math

    from kvplan.planning.capacity.latency import latency

    target, running = req.concurrency, math.floor(s.engine.running(s, p)) * s.layout.dp  # whole requests
    if running < 1 or running >= target:
        return latency(s, target, req.prompt_len, req.acceptance_rate, sts)
    lat = latency(s, running, req.prompt_len, req.acceptance_rate, sts)
    return lat.model_copy(update={"notes": lat.notes + [
        f"Target {target:,} > the {running:,} requests this layout runs at once: TPOT and $/Mtok are at {running:,} "
        "(the rest queue); more replicas or GPUs run more."]})


def quantized_variants(card: ModelCard) -> list[str]:
    """The bundled cards of the same model with quantized weights: named ``<card>-<suffix>`` with a
    ``quantization`` (deepseek-v3 -> deepseek-v3-fp8, qwen3-8b -> qwen3-8b-awq); none for a card that is quantized."""
    from kvplan.model.catalog import bundled_names

    if card.quantization is not None:
        return []
    return [n for n in bundled_names() if n.startswith(f"{card.name}-") and load_card(n).quantization is not None]


def assemble(s: Setup) -> tuple[list[Stage], Pool]:
    """Every stage's budget and the pool, refused (``Refused``) where the memory leaves nothing for the cache."""
    sts = s.engine.stages(s)
    s.engine.check_budget(s, sts)  # before the pool: a refused layout (most of a search's) costs no pool
    return sts, s.engine.pool(s, sts)


def setup(card: ModelCard, req: PlanRequest) -> Setup:
    """The request resolved for ``card`` by its runtime: the card as served, options with defaults, dtypes, pages."""
    rt, layout = req.runtime, req.layout
    # the engine the release runs this with (vLLM 0.8 - 0.9.0: V1, or V0 where its oracle falls back)
    rt, switched = rt.engine_for(card, req.gpu, layout, req.flags, req.kv_dtype, req.weight_dtype)
    rt.check_gpu(req.gpu)
    args = (card, rt, layout, req.kv_dtype, req.weight_dtype, req.flags)
    try:
        card, notes, flags, kv_t, w_t, online_fp8 = _served(*args)
    except TypeError as exc:  # a flag value that is unhashable (a list): no cache
        if "unhashable" not in str(exc):
            raise
        card, notes, flags, kv_t, w_t, online_fp8 = _served.__wrapped__(*args)
    notes = notes + ((switched,) if switched else ())
    # the model dtype as the runtime takes it on this GPU (a quantization method's own dtypes: Runtime.served_dtypes)
    w_t, kv_t, dtype_notes = rt.served_dtypes(card, req.gpu, w_t, kv_t, req.weight_dtype is not None,
                                              req.kv_dtype is not None)
    notes = notes + dtype_notes
    total = req.gpu.engine_memory_bytes if req.gpu_memory is None else req.gpu_memory  # what torch sees
    if req.context is not None and req.context >= total:  # nothing would be left for the engine at all
        from kvplan.units import fmt_bytes

        raise KvplanError(f"--context-memory: {fmt_bytes(req.context)}; allowed: less than the memory per GPU "
                          f"({fmt_bytes(total)} on {req.gpu.name}, --gpu-memory)")
    if flags.kv_cache_dtype != kv_t.name:  # the resolved K/V dtype (vLLM's MLA block depends on it)
        flags = replace(flags, kv_cache_dtype=kv_t.name)
    opts = rt.resolve(flags, card, req.gpu, total, layout, req.max_model_len)
    if opts.shared_prefix_len and opts.shared_prefix_len > req.max_model_len:
        raise KvplanError(f"--shared-prefix-len: {opts.shared_prefix_len:,} tokens; allowed: at most --max-model-len "
                          f"({req.max_model_len:,}), the prefix is part of each request")
    non_torch, cuda_graph, context = rt.overhead_defaults(layout.tp * layout.pp)
    cuda_graph = rt.cuda_graph_default(opts, cuda_graph, card)
    context = rt.context_default(layout.tp * layout.pp, req.gpu, in_use_at_start_bytes(req.gpu, context))
    non_torch = rt.non_torch_default(opts, non_torch, card)
    state_t = rt.state_dtype(card, kv_t, _dtype(card, rt, None, "--kv-dtype")[0])
    block, padded, state_page = rt.hybrid_block(card, kv_t, layout, opts, state_t)
    pick = lambda given, default: default if given is None else given  # noqa: E731
    return Setup(card=card, engine=rt, gpu=req.gpu, total=total, layout=layout, max_model_len=req.max_model_len,
                 kv_t=kv_t, w_t=w_t, opts=opts, activation=req.activation, non_torch=pick(req.non_torch, non_torch),
                 cuda_graph=pick(req.cuda_graph, cuda_graph), context=pick(req.context, context), block_size=block,
                 state_page_padded=padded, state_page_bytes=state_page, state_t=state_t,
                 card_notes=notes, online_fp8=online_fp8,
                 given=frozenset(n for n, v in (("non_torch", req.non_torch), ("cuda_graph", req.cuda_graph),
                                                ("context", req.context)) if v is not None))


@lru_cache(maxsize=1024)
def _served(card: ModelCard, rt: Runtime, layout: Layout, kv_dtype: str | None, weight_dtype: str | None,
            flags: ServingFlags) -> tuple:
    """What ``setup`` resolves before the GPU enters: the card as served and loaded (with the notes of how it
    differs), the flags with the cache types as one choice, the K/V and weight dtypes, whether fp8 is quantized
    online; the runtime's refusals of the card, layout and flags. Once per request less its GPU: a search asks for
    each GPU type (cards, runtimes, layouts and flags are immutable; what it raises is raised each time)."""
    card, card_notes = rt.served_card(card)
    rt.check_servable(card, layout)
    check_layout(card, rt.replica_layout(layout))  # the MoE split one replica's weights must allow
    if card.architecture != "decoder-only":
        raise KvplanError(f"--model: serving capacity is planned for decoder-only models (vLLM V1 and SGLang serve "
                          f"them as generators); {card.name} is {card.architecture}: size it with `kvplan estimate`"
                          + (" --encoder-len N" if card.architecture == "encoder-decoder" else ""))
    kv_dtype, llama = rt.cache_type_flags(kv_dtype, flags.llama)  # llama.cpp: --kv-dtype is -ctk/-ctv
    flags = flags if llama is flags.llama else replace(flags, llama=llama)
    kv_t, w_t = _dtype(card, rt, kv_dtype, "--kv-dtype")[0], _dtype(card, rt, weight_dtype, "--weight-dtype")[0]
    rt.check_dtype(kv_t)
    kv_t = rt.kv_layout(kv_t, card)
    # quantized weights (fp8, int4, ...): the model's dtype is then the engine's --dtype, which the launch line sets to
    # the K/V's (the runtime's dtype_flags), so any 16/32-bit K/V is servable
    if rt.kv_follows_model_dtype and kv_dtype is not None and kv_t.bits >= 16 and w_t.bits >= 16:
        model_t = w_t
        if kv_t.name != model_t.name:
            raise KvplanError(f"--kv-dtype: {rt.display_name} keeps K/V in the model's dtype ({model_t.name} here: "
                              f"--kv-cache-dtype auto) or in fp8 (fp8_e4m3, fp8_e5m2); for {kv_t.name} K/V serve the "
                              f"model in {kv_t.name} (--weight-dtype {kv_t.name})")
    elif (auto := auto_kv(rt, kv_t, w_t, kv_dtype is not None, weight_dtype is not None)) is not kv_t:
        kv_t = rt.kv_layout(auto, card)  # --kv-cache-dtype auto: the model dtype --weight-dtype sets
    served, (card, w_t, load_notes) = card, rt.loaded_card(card, w_t, _dtype(card, rt, None, "--weight-dtype")[0])
    rt.refuse_flags(flags)
    return card, card_notes + load_notes, flags, kv_t, w_t, card is not served


def result(s: Setup, sts: list[Stage], p: Pool, lat: Latency | None = None,
           concurrency: int | None = None) -> PlanResult:
    from kvplan.planning.capacity.text import launch_command, notes, target_met, verdict

    rt = s.engine
    inputs = PlanInputs(model=s.card.name, engine=rt.name, engine_rules=rt.rules_text, gpu=s.gpu.name,
                        gpu_memory_bytes=s.total, platform=s.gpu.platform, tp=s.layout.tp, pp=s.layout.pp, dp=s.layout.dp,
                        expert_parallel=s.layout.expert_parallel,
                        max_model_len=s.max_model_len, kv_dtype=rt.kv_dtype_name(s),
                        weight_dtype="fp8_e4m3" if s.online_fp8 else s.w_t.name,  # as asked: --quantization fp8
                        gpu_memory_utilization=s.util, mem_fraction_static=s.mfs,
                        kv_cache_memory_bytes=s.kv_cache_memory, max_num_batched_tokens=s.mnbt,
                        max_num_seqs=s.max_num_seqs, block_size=s.block_size, paged=rt.server,
                        free_gpu_memory_fraction=s.opts.free_gpu_memory_fraction,
                        cuda_memory_fraction=s.opts.cuda_memory_fraction, shared_prefix_len=s.opts.shared_prefix_len,
                        speculative=None if s.opts.speculative is None else str(s.opts.speculative))
    return PlanResult(inputs=inputs, per_gpu=per_gpu(s, p), kv_cache=p.pool, max_concurrency=p.concurrency,
                      max_concurrency_total=p.concurrency * s.layout.dp, max_running=rt.running(s, p),
                      running_limit=rt.running_limit(s, p), running_limit_flag=rt.running_limit_flag,
                      target_met=None if concurrency is None else target_met(s, p, concurrency),
                      request_kv_bytes=p.request_bytes,
                      fits=p.fits, max_model_len_fit=p.max_model_len_fit, ranks=p.ranks,
                      launch_command=launch_command(s), verdict=verdict(s, p, concurrency), latency=lat,
                      notes=notes(s, p), **rt.plan_extras(s))


def per_gpu(s: Setup, p: Pool) -> PerGPU:
    """The plan's per-GPU budget (the limiting rank's): what ``result`` and a search's options show."""
    lim, rt, q = p.limiting, s.engine, s.card.quantization
    return PerGPU(pp_rank=lim.pp_rank, layers=len(lim.layers), params=lim.params, weights_bytes=lim.weights,
                  buffers_bytes=lim.buffers, activation_bytes=lim.activation,
                  activation_estimated=rt.activation_estimated(s),
                  non_torch_bytes=lim.non_torch, cuda_graph_bytes=lim.cuda_graph,
                  overhead_bytes=lim.non_torch + lim.cuda_graph, context_bytes=s.context,
                  context_in_budget=rt.context_in_budget(s),
                  requested_bytes=lim.requested, kv_bytes_per_token=rt.kv_bytes_per_token(s, p),
                  available_kv_bytes=lim.available, requested_rule=rt.requested_rule(s),
                  activation_rule=rt.activation_rule(s), vision_bytes=_vision_bytes(s),
                  weights_rounding_bytes=lim.rounding, non_torch_cached_bytes=lim.cached_free,
                  offloaded_bytes=lim.offloaded, overheads_given=tuple(sorted(s.given)),
                  weights_format=rt.weights_label(s) or weights_format(q and q.label, s.w_t.name))


def _vision_bytes(s: Setup) -> int:
    """The vision tower and projector on one GPU (kvplan.cost.vision): split by TP, whole with
    ``--mm-encoder-tp-mode data`` where the model supports it."""
    if s.card.vision is None or s.opts.mm_tower_skipped:  # vLLM --limit-mm-per-prompt 0 everywhere: none built
        return 0
    from kvplan.cost.vision import vision_params

    tp = 1 if s.opts.mm_encoder_data else s.layout.tp
    return s.w_t.data_bytes(vision_params(s.card, hf=False, tp=tp).total)
