"""The numbers behind ``kvplan report``: one ``ModelReport`` per model, computed by the library's own functions.

Nothing here draws or formats; ``kvplan.report.document`` renders these numbers, so every value in the document is
a value the library returns (tests compare them). Capacity sections come from ``kvplan.planning.capacity``
(``kvplan plan``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kvplan.cost.hardware import GPU, load_gpu, load_gpus
from kvplan.cost.kvspec import STATE_DTYPES
from kvplan.errors import KvplanError, Refused
from kvplan.units import require_positive
from kvplan.model.card import MAX_COUNT, ModelCard
from kvplan.model.catalog import load_card
from kvplan.cost.runtimes.setup import EXTRA_FLAGS
from kvplan.planning.capacity import PlanRequest, plan
from kvplan.planning.capacity.results import PlanResult
from kvplan.planning.compare import CompareResult, compare
from kvplan.planning.disagg import DisaggResult
from kvplan.planning.estimate import Estimate, estimate
from kvplan.planning.sweep import sweep

DEFAULT_GPUS = ("A100-80GB", "H100-SXM", "H200")
ROOF_BATCHES = (1, 8, 64)
KV_DTYPES = ("fp32", "bf16", "fp8_e4m3", "int8", "int4")
# what a layer kind of the Estimate's kv_cache.groups holds, as the report names it (kvplan.cost.kvspec kinds)
# every other kind: attention K/V; "padding": vLLM's padded state pages and padding layer slots (estimate's fold)
PART_OF_KIND = {"conv_state": "conv state", "ssm_state": "recurrent state", "padding": "page padding"}
ATTENTION_PART = "attention K/V"


@dataclass(frozen=True)
class LayoutPlan:
    """One layout the report was asked for (``tp`` GPUs of one type): the engine's plan (``kvplan plan``) at
    max_model_len with the latency bounds at the target concurrency, or why the engine refuses the layout. Every
    section of the report takes its memory, concurrency and latency figures from here."""

    gpu: GPU
    tp: int
    plan: PlanResult | None  # None: refused
    refused: str  # why the engine refuses the layout ("" when planned)
    concurrency_curve: tuple[float | None, ...]  # the plan's max_concurrency at each of kv_lengths (None: refused)
    # the requests the engine runs at once at each of kv_lengths: concurrency_curve capped by its scheduler
    # (PlanResult.max_running, x dp), None where refused
    running_curve: tuple[float | None, ...] = ()
    pp: int = 1
    dp: int = 1
    input_error: bool = False  # refused for a reason other than the layout (Refused): a flag, or the model itself

    @property
    def label(self) -> str:
        return layout_label(self.gpu.name, self.tp, self.pp, self.dp)

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.dp

    def holds(self, concurrency: int) -> bool:
        """The requested load runs: the plan's own verdict (PlanResult.target_met: whole requests each replica
        runs, its pool's capped by the engine's scheduler, times the replicas, hold ``concurrency``)."""
        return self.plan is not None and bool(self.plan.target_met)


@dataclass(frozen=True)
class RoofPoint:
    gpu: str
    tp: int  # each GPU of the TP group runs 1/tp of the FLOPs and moves its own rank's bytes
    phase: str  # prefill or decode
    batch: int
    intensity: float  # FLOP per byte moved, on one GPU
    attainable_flops_per_s: float  # one GPU's FLOPs / time: min(peak, intensity x bandwidth)
    time_s: float  # one GPU's share of the step (the TP all-reduce is in the plan's latency)
    bound: str
    compute_dtype: str  # the dtype the engine computes in (the served weights'), whose peak bounds compute
    peak_flops_per_s: float
    bytes_moved: int = 0  # the bytes one GPU of each stage moves in it, summed over the stages (plan's decode_*_bytes)
    micro_batches: int = 1  # decode on a pipeline: the micro-batches in flight, the step drawn one micro-batch's
    step_batch: int = 0  # requests in the step drawn: batch, or the largest micro-batch's
    pp: int = 1  # the layout's pipeline stages and replicas (its label)
    dp: int = 1

    @property
    def label(self) -> str:
        """The chart's name of the point: 'p8', 'd64'; one micro-batch's step of a batch of 64 in 2: 'd64/2'."""
        return f"{self.phase[0]}{self.batch}" + (f"/{self.micro_batches}" if self.micro_batches > 1 else "")


@dataclass(frozen=True)
class ModelReport:
    card: ModelCard
    estimate: Estimate  # concurrency x max_model_len on the report's engine, the whole model (before any split)
    layouts: list[LayoutPlan]  # one per GPU x TP asked; empty for a card the engines do not serve (why: serve_note)
    serve_note: str  # why no layout is planned ("" when they are)
    kv_lengths: list[int]
    kv_curve: dict[str, list[int]]  # KV dtype -> one sequence's KV bytes at each of kv_lengths
    kv_parts: dict[str, list[int]]  # state cards: part (attention K/V, conv state, recurrent state) -> one
    # sequence's bytes of it at each of kv_lengths, default dtype; empty without state layers
    curve_note: str  # why a KV dtype is left out of kv_curve ("" when none is)
    attention_layouts: CompareResult | None  # MHA/GQA/MQA what-ifs on the chosen layout's GPUs
    layout_note: str
    roof: list[RoofPoint]
    disagg: DisaggResult | None = None  # kvplan disagg on the report's first GPU, when a rate was asked

    @property
    def chosen(self) -> LayoutPlan | None:
        """The layout the verdict names: the fewest GPUs, then the smallest GPU, that holds the requested load;
        else the planned layout holding the most requests; None when none is planned."""
        return choose(self.layouts, self.estimate.inputs.batch)


@dataclass(frozen=True)
class Report:
    models: list[ModelReport]
    gpus: list[GPU]
    tps: tuple[int, ...]
    max_model_len: int
    concurrency: int
    engine: str
    disagg: dict | None = None  # kvplan disagg's rate, isl, osl, ttft_ms, tpot_ms
    plan_options: dict = field(default_factory=dict)  # kvplan.plan's other keywords, every layout's (--pp, --kv-dtype)


MAX_REPORT_MODELS = 100
MAX_REPORT_PLANS = 2_000


def build_report(models: list[str | ModelCard], *, gpus: list[str] | None = None, tp: tuple[int, ...] = (1,),
                 max_model_len: int = 8192, concurrency: int = 1, engine: str = "vllm", gpu_file: str | None = None,
                 disagg: dict | None = None, advance=None, **plan_options) -> Report:
    """Every number of the capacity report for ``models`` on ``tp`` GPUs of each of ``gpus``; with ``disagg`` (rate,
    isl, osl, ttft_ms, tpot_ms) each decoder's prefill and decode pools on the first GPU (``kvplan disagg``).
    ``plan_options``: the other keywords of ``kvplan.plan`` (pp, dp, gpu_memory_utilization, kv_dtype,
    weight_dtype, max_num_seqs, llama, ...), the same for every layout: each layout is the plan they ask for, and
    the estimate, KV curve, layouts and roofline take their dtypes. ``advance(1)`` is called after each model (a
    progress bar). At most ``MAX_REPORT_MODELS`` models and ``MAX_REPORT_PLANS`` plans (models x GPUs x TP sizes): a
    report is a document to read, refused past them."""
    if not models:
        raise KvplanError("--model: give one or more models")
    if len(models) > MAX_REPORT_MODELS:
        raise KvplanError(f"--model: {len(models):,} models; allowed: at most {MAX_REPORT_MODELS} in one report "
                          "(kvplan sweep takes more)")
    plans = len(models) * len(gpus or DEFAULT_GPUS) * len(set(tp))
    if plans > MAX_REPORT_PLANS:
        raise KvplanError(f"--model x --gpu x --tp: {plans:,} plans; allowed: at most {MAX_REPORT_PLANS:,} in one "
                          "report (kvplan sweep takes more)")
    for flag, value in (("--max-model-len", max_model_len), ("--concurrency", concurrency)):
        if not isinstance(value, int) or value < 1:
            raise KvplanError(f"{flag}: a positive integer, got {value}")
    unknown = set(plan_options) - PLAN_KEYWORDS
    if unknown:
        raise TypeError(f"build_report() got unexpected keyword arguments {sorted(unknown)}")
    platform = plan_options.get("platform")
    if not gpus and platform == "windows":  # the default GPUs are data-center ones: the catalog's with a Windows total
        gpus = [n for n, g in load_gpus(gpu_file).items() if g.windows_visible_memory_bytes is not None]
    given = plan_options.get("gpu_memory") is not None
    devs = [load_gpu(g, gpu_file).on_platform(platform or "linux", given) for g in (gpus or DEFAULT_GPUS)]
    tps = tuple(dict.fromkeys(tp))
    for t in tps:
        require_positive("--tp", t, maximum=1024)
    # the flags, once, before any card is read: sizes and ranges, and the engine's own flags (--mem-fraction-static
    # is SGLang's) are the user's input, not a layout the engine refuses
    req = PlanRequest.build(gpu=devs[0], max_model_len=max_model_len, tp=tps[0], engine=engine,
                            concurrency=concurrency, **plan_options)
    req.runtime.refuse_flags(req.flags)
    cards = [m if isinstance(m, ModelCard) else load_card(m) for m in models]
    reports = []
    for c in cards:
        reports.append(_model_report(c, devs, max_model_len, concurrency, engine, tps, gpu_file, disagg,
                                     plan_options))
        if advance is not None:
            advance(1)
    layouts = [lay for r in reports for lay in r.layouts]
    if layouts and all(lay.input_error for lay in layouts):  # no model is planned, and not for its layout: the
        raise KvplanError(layouts[0].refused)  # flags (--mem-fraction-static with vLLM), an answer of no document
    return Report(reports, devs, tps, max_model_len, concurrency, engine, disagg, dict(plan_options))


def choose(layouts: list[LayoutPlan], concurrency: int) -> LayoutPlan | None:
    """The fewest GPUs, then the smallest GPU, running ``concurrency`` requests at once; else the most requests
    running at once (the pool's, capped by the engine's scheduler, x dp)."""
    holding = [lay for lay in layouts if lay.holds(concurrency)]
    if holding:
        return min(holding, key=lambda lay: (lay.gpus, lay.gpu.engine_memory_bytes))
    planned = [lay for lay in layouts if lay.plan is not None and lay.plan.fits]
    return max(planned, key=lambda lay: (running(lay.plan), lay.plan.max_concurrency_total), default=None)


def running(p: PlanResult) -> float:
    """The requests a plan runs at once over its replicas: whole requests per replica (the pool's, capped by the
    engine's scheduler) x dp, as its verdict counts them; a fraction of one where not even one runs."""
    per = p.max_running if p.max_running < 1 else int(p.max_running)
    return per * p.inputs.dp


# kvplan.plan's keywords besides the model, GPU, TP, length, engine and target the report sets itself
PLAN_KEYWORDS = frozenset({
    "pp", "dp", "gpu_memory", "platform", "gpu_memory_utilization", "mem_fraction_static", "kv_cache_memory",
    "max_num_batched_tokens", "max_num_seqs", "block_size", "kv_dtype", "weight_dtype", "activation_memory",
    "non_torch_memory", "cuda_graph_memory", "context_memory", "prompt_len", "expert_parallel", "acceptance_rate",
    *EXTRA_FLAGS})


def _model_report(card: ModelCard, devs: list[GPU], length: int, conc: int, engine: str, tps: tuple[int, ...],
                  gpu_file: str | None, targets: dict | None = None, opts: dict | None = None) -> ModelReport:
    opts = opts or {}
    enc = length if card.architecture == "encoder-decoder" else None  # the encoder reads a max_model_len input
    lengths = kv_lengths(card, length) if card.has_kv_cache else []
    layouts, serve_note = [], ""
    if card.architecture == "decoder-only" and card.has_kv_cache:
        layouts = [layout_plan(card, d, t, length, conc, engine, lengths, opts) for d in devs for t in tps]
    else:
        serve_note = (f"Serving capacity is planned for decoder-only models (vLLM and SGLang serve them as "
                      f"generators); {card.name} is {card.architecture}: the sizes below are kvplan estimate's.")
    pick = choose(layouts, conc)
    # the estimate (formulas, KV curve) as the chosen plan's engine holds the model: on its GPU (vLLM's MXFP4
    # backend is the GPU's) and in its pages (vLLM's hybrid models unify them: 544 tokens for Qwen3-Next)
    from kvplan.cost.runtimes import get_engine

    sizing = engine
    if card.architecture == "encoder-decoder":  # an engine that loads none (vLLM, SGLang: T5): the ideal cache's
        try:
            get_engine(engine).check_release(card)
        except KvplanError as why:
            sizing, serve_note = "ideal", f"{serve_note} {str(why).split(': ', 1)[1]}: the ideal engine's sizes."
    block = pick.plan.inputs.block_size if pick and get_engine(sizing).takes_estimate_block else None
    dtypes = {k: opts[k] for k in ("kv_dtype", "weight_dtype") if opts.get(k) is not None}
    # --enable-prefix-caching / --no-enable-prefix-caching: the estimate and curves hold the state pages the plans do
    caching = opts.get("enable_prefix_caching") if sizing == engine else None
    est = estimate(card, batch=conc, seq_len=length, engine=sizing, encoder_len=enc, block_size=block,
                   gpu=pick.gpu.name if pick else None, gpu_file=gpu_file if pick else None,
                   enable_prefix_caching=caching, **dtypes)
    curve, parts = {}, {}
    if card.has_kv_cache:
        curve = kv_curve(card, lengths, sizing, est.kv_cache.dtype, enc, est.inputs.block_size, caching)
        parts = (state_parts_curve(card, lengths, sizing, est.kv_cache.dtype, est.inputs.block_size, caching)
                 if card.ssm else {})
    at = pick or (layouts[0] if layouts else None)
    attn, note = _layouts(card, length, conc, at.gpu if at else devs[0], at.tp if at else 1, sizing, opts)
    roof = []
    if card.architecture == "decoder-only":
        planned = [lay for lay in layouts if lay.plan is not None] or layouts  # a refused layout runs nothing
        roof = [p for lay in planned
                for p in roof_points(card, lay.gpu, lay.tp, length, _roof_batch(lay, conc), engine, gpu_file, dtypes,
                                     opts)]
    pools = None
    if targets and card.architecture == "decoder-only":
        from kvplan.planning.disagg import disagg

        pools = disagg(card, gpu=devs[0].name, engine=engine, gpu_file=gpu_file, **targets,
                       **{k: v for k, v in opts.items() if k not in ("pp", "dp")})  # disagg picks its own layouts
    return ModelReport(card, est, layouts, serve_note, lengths, curve, parts, _curve_note(card, engine), attn, note,
                       roof, pools)


def layout_plan(card: ModelCard, dev: GPU, tp: int, length: int, conc: int, engine: str,
                lengths: list[int], opts: dict | None = None) -> LayoutPlan:
    """The engine's plan of ``tp`` GPUs of ``dev`` (x ``opts``' pp and dp) at ``length`` (latency at ``conc``
    requests), and its concurrency at each of ``lengths``; a layout the engine refuses keeps the engine's reason."""
    opts = opts or {}
    pp, dp = opts.get("pp", 1), opts.get("dp", 1)
    try:
        p = plan(card, gpu=dev, tp=tp, max_model_len=length, engine=engine, concurrency=conc, **opts)
    except KvplanError as exc:
        return LayoutPlan(dev, tp, None, str(exc), (), (), pp, dp, not isinstance(exc, Refused))
    # the latency flags need a target: the curve's plans have none
    bare = {k: v for k, v in opts.items() if k not in ("prompt_len", "acceptance_rate")}
    at = [_plan_at(card, dev, tp, n, engine, bare) for n in lengths]
    return LayoutPlan(dev, tp, p, "", tuple(None if a is None else a.max_concurrency_total for a in at),
                      tuple(None if a is None else a.max_running * a.inputs.dp for a in at), pp, dp)


def _plan_at(card: ModelCard, dev: GPU, tp: int, length: int, engine: str, opts: dict) -> PlanResult | None:
    try:
        return plan(card, gpu=dev, tp=tp, max_model_len=length, engine=engine, **opts)
    except KvplanError:
        return None


def layout_label(gpu: str, tp: int, pp: int = 1, dp: int = 1) -> str:
    if tp == pp == dp == 1:
        return gpu
    split = ", ".join(f"{name} {n}" for name, n in (("TP", tp), ("PP", pp), ("DP", dp)) if n > 1 or name == "TP")
    return f"{tp * pp * dp}x {gpu} ({split})"


def kv_lengths(card: ModelCard, length: int) -> list[int]:
    """Context lengths for the KV curve: powers of two from 256 to the card's context, the asked length, or 32Ki
    (so a sliding window's plateau shows), whichever is longest. A card without a length limit (a pure state-space
    model: max_position_embeddings MAX_COUNT) ends at the asked length or 32Ki."""
    context = card.max_position_embeddings if card.max_position_embeddings < MAX_COUNT else 0
    top = max(context, length, 32768)
    out, n = [], 256
    while n < top:
        out.append(n)
        n *= 2
    return sorted(set(out) | {top, length})


def kv_curve(card: ModelCard, lengths: list[int], engine: str, default_dtype: str,
             encoder_len: int | None = None, block_size: int | None = None,
             enable_prefix_caching: bool | None = None) -> dict[str, list[int]]:
    """One sequence's KV bytes at each length, per KV dtype the engine stores (the report's dtype first), in pages
    of ``block_size`` tokens (None: the engine's default); ``enable_prefix_caching`` (vLLM's flag, given): a hybrid's
    state pages by its Mamba cache mode, as estimate's."""
    from kvplan.cost.runtimes import get_engine

    allowed = get_engine(engine).kv_dtypes_for(card)
    dtypes = [default_dtype] + [d for d in KV_DTYPES if d != default_dtype and (allowed is None or d in allowed)]
    rows = sweep(card, batch=1, seq_len=lengths, kv_dtype=dtypes, engine=engine, encoder_len=encoder_len,
                 block_size=block_size, enable_prefix_caching=enable_prefix_caching)
    curve: dict[str, list[int]] = {d: [] for d in dtypes}
    for row in rows:
        curve[row["kv_dtype"]].append(row["kv_cache.bytes_per_sequence"])
    return curve


def state_parts_curve(card: ModelCard, lengths: list[int], engine: str, dtype: str,
                      block_size: int | None = None, enable_prefix_caching: bool | None = None) -> dict[str, list[int]]:
    """One sequence's cache at each length split by part (the Estimate's kv_cache.groups by layer kind): attention
    K/V grows with the context, the conv and recurrent states of the state layers do not."""
    curve: dict[str, list[int]] = {}
    for n in lengths:
        est = estimate(card, seq_len=n, engine=engine, kv_dtype=dtype, block_size=block_size,
                       enable_prefix_caching=enable_prefix_caching)
        for part, nbytes in kv_parts(est).items():
            curve.setdefault(part, []).append(nbytes)
    return curve


def kv_parts(est: Estimate) -> dict[str, int]:
    """The Estimate's kv_cache.total_bytes by part: attention K/V (every attention kind), conv state, recurrent
    state; a part the model lacks is left out."""
    parts: dict[str, int] = {}
    for g in est.kv_cache.groups:
        part = PART_OF_KIND.get(g.kind, ATTENTION_PART)
        parts[part] = parts.get(part, 0) + g.total_bytes
    order = (ATTENTION_PART, *PART_OF_KIND.values())
    return {p: parts[p] for p in order if p in parts}


def _curve_note(card: ModelCard, engine: str) -> str:
    from kvplan.cost.runtimes import get_engine

    allowed = get_engine(engine).kv_dtypes_for(card)
    left = [d for d in KV_DTYPES if d not in STATE_DTYPES and (allowed is None or d in allowed)]
    if not card.ssm or not left:
        return ""
    verb = "quantizes" if len(left) == 1 else "quantize"
    return (f"{', '.join(left)} {verb} attention K/V only: the conv and recurrent states of {card.name}'s "
            f"{card.state_layers} state layers stay in the model dtype ({card.dtype}) beside them (vLLM's "
            "mamba_cache_dtype 'auto', kvplan.cost.kvspec.states_dtype).")


def _layouts(card: ModelCard, length: int, conc: int, dev: GPU, tp: int,
             engine: str, opts: dict | None = None) -> tuple[CompareResult | None, str]:
    if card.architecture != "decoder-only":
        return None, (f"Layout what-ifs are compared for decoder-only models; {card.name} is {card.architecture}.")
    if card.mla is not None:
        return None, (f"{card.name} uses MLA: each token caches one latent of {card.mla.kv_lora_rank} + "
                      f"{card.mla.qk_rope_head_dim} values per layer, shared by all {card.num_heads} heads; "
                      "MHA/GQA/MQA what-ifs do not apply (the KV curve above shows the MLA cache).")
    if card.ssm and not card.attention_layers:
        return None, (f"{card.name} has no attention layers: its {card.state_layers} state layers hold a conv and a "
                      "recurrent state of fixed size per sequence, set by the mixer's geometry, so MHA/GQA/MQA "
                      "what-ifs do not apply.")
    heads = [h for h in dict.fromkeys((card.num_heads, 8, 1)) if card.num_heads % h == 0 and h != card.num_kv_heads]
    specs = ["mha" if h == card.num_heads else "mqa" if h == 1 else f"gqa:{card.num_heads // h}" for h in heads]
    if not specs:
        return None, "No other K/V-head layout applies to this card."
    note = "" if not card.ssm else (
        f"The layouts change the K/V heads of the {card.attention_layers} attention layers only; the conv and "
        f"recurrent states of the {card.state_layers} state layers are the same in every row, so the cache shrinks "
        "by less than the head ratio.")
    return compare(card, attention=specs, seq_len=length, batch=conc, gpu=dev, tp=tp, engine=engine,
                   **(opts or {})), note


def _roof_batch(lay: LayoutPlan, conc: int) -> int:
    """The requests a replica of ``lay`` decodes together at the report's concurrency: the plan's latency batch (the
    target over the replicas, or the most the layout runs at once), else ``conc``."""
    lat = lay.plan.latency if lay.plan is not None else None
    return lat.batch_per_replica if lat is not None else conc


# the plan's keywords that shape a layout's setup (not its latency target), which the roofline's setup takes
_SETUP_OPTS = PLAN_KEYWORDS - {"prompt_len", "acceptance_rate"}


def roof_points(card: ModelCard, dev: GPU, tp: int, length: int, conc: int, engine: str,
                gpu_file: str | None = None, dtypes: dict | None = None, opts: dict | None = None) -> list[RoofPoint]:
    """Prefill and decode of ``length`` tokens at several batch sizes (requests one replica steps; ``conc``: the
    plan's) on one GPU of each stage of a TP group of ``tp``, as ``kvplan plan`` bounds its latency
    (kvplan.planning.capacity.latency.step_phases): FLOPs / tp and the bytes that GPU moves (its rank's weights as
    held, its cache), summed over the stages; on a pipeline whose plan decodes in micro-batches, the decode point is
    one micro-batch's step, the step its TPOT is computed from. A layout the engine refuses (drawn only when every
    layout is) takes the estimate's roofline / tp. ``dtypes``: the report's kv_dtype, weight_dtype; ``opts``: the
    report's other plan keywords (pp, dp, block size, ...), as each layout's plan takes them."""
    from kvplan.planning.capacity import PlanRequest, assemble, setup
    from kvplan.planning.capacity.latency import gpu_times, step_phases

    kw = {k: v for k, v in (opts or {}).items() if k in _SETUP_OPTS} | (dtypes or {})
    try:
        s = setup(card, PlanRequest.build(gpu=dev, max_model_len=length, tp=tp, engine=engine, **kw))
        sts = assemble(s)[0]
    except KvplanError:
        s = sts = None
    points = []
    for b in sorted({*ROOF_BATCHES, conc}):
        try:
            phases = step_phases(s, sts, b) if s is not None else None
        except KvplanError:  # the collectives of a GPU that states no link: the estimate's roofline below
            phases = None
        if phases is None:
            r = estimate(card, batch=b, seq_len=length, engine=engine, gpu=dev.name, gpu_file=gpu_file,
                         **(dtypes or {})).roofline
            for phase, p in (("prefill", r.prefill), ("decode", r.decode_step)):
                points.append(RoofPoint(dev.name, tp, phase, b, p.arithmetic_intensity_flops_per_byte,
                                        p.flops / p.time_s, p.time_s / tp, p.bound, r.compute_dtype,
                                        r.peak_flops_per_s, p.bytes_moved, 1, b))
            continue
        for phase, flops, traffic, r, micro, size in phases:
            compute, memory = gpu_times(r, flops, traffic, tp)
            time = max(compute, memory)
            points.append(RoofPoint(dev.name, tp, phase, b, flops / tp / traffic.total_bytes, flops / tp / time, time,
                                    "compute" if compute >= memory else "memory", r.compute_dtype, r.peak_flops_per_s,
                                    traffic.total_bytes, micro, size, s.layout.pp, s.layout.dp))
    return points
