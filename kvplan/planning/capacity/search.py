"""Which GPUs, how many, which layout: ``kvplan plan`` without ``--gpu``, and the latency bounds of a layout.

Latency extends kvplan.cost.roofline (kvplan.planning.capacity.latency): each GPU of a TP group runs 1/tp of the
FLOPs and reads the bytes its own rank holds (its weight shards as stored, its K/V heads: replicated ones in full), and
every decoder layer adds two all-reduces of tokens x hidden activations (after attention and after the MLP,
Megatron-LM arXiv:1909.08053 section 3); a ring all-reduce moves 2 (tp - 1) / tp of the data over each GPU's link
(Patarasuk & Yuan 2009). PP adds one hand-off of tokens x hidden per stage boundary. These are lower bounds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from kvplan.cost.hardware import GPU, load_gpus, require_platform
from kvplan.cost.parallel import Layout
from kvplan.cost.runtimes import get_engine
from kvplan.errors import KvplanError, Refused, WeightsDoNotFit
from kvplan.model.card import ModelCard
from kvplan.model.catalog import load_card
from kvplan.planning.capacity import PlanRequest, assemble, per_gpu, setup
from kvplan.planning.capacity.latency import latency, per_million_tokens
from kvplan.cost.runtimes.setup import Pool, Setup, Stage
from kvplan.planning.capacity.results import Latency, PlanOption, SearchResult
from kvplan.units import require_positive

TP_SIZES, PP_SIZES = (1, 2, 4, 8), (1, 2, 3, 4)
# fewest GPUs first, so that --sort gpus and cost skip the layouts that need more GPUs than the best one found
_LAYOUTS = sorted(((tp, pp) for tp in TP_SIZES for pp in PP_SIZES), key=lambda lay: (lay[0] * lay[1], lay[1]))
SORTS = ("gpus", "cost", "latency")
_BY_GPU_COUNT = ("gpus", "cost")  # orders whose key grows with the GPU count within one GPU type
# Layouts refused unbuilt: where one GPU cannot hold the weights (WeightsDoNotFit at TP 1 x PP 1), a layout of n GPUs
# whose even share, ceil(W / n), still fills the room one GPU has after its CUDA context is refused too: every rank
# of a TP x PP layout holds at least 1/n of the one-GPU weights (each tensor is split with rank 0 holding the larger
# shard, or replicated; KV heads and vision towers replicate; allocator rounding of a shard is at least its share of
# the whole's; the context only grows with the GPU count). --cpu-offload-gb breaks it (a fixed amount per GPU leaves):
# no pruning then. tests/test_search.py compares pruned and unpruned searches.


def search(model: ModelCard | str | Path, *, max_model_len: int, concurrency: int, gpus: list[str] | None = None,
           max_gpus: int = 8, engine: str = "vllm", ttft_ms: float | None = None, tpot_ms: float | None = None,
           prompt_len: int | None = None, gpu_file: str | None = None, sort: str = "gpus", **plan_kw) -> SearchResult:
    """Every catalog GPU (or ``gpus``) x TP 1,2,4,8 x PP 1..4 x DP: the layouts that hold ``concurrency`` requests of
    ``max_model_len`` tokens within ``max_gpus`` GPUs (and the latency targets), one per GPU type, ordered by
    ``sort``: ``gpus`` (fewest GPUs, then price), ``cost`` (replicas x GPUs x price per GPU-hour; unpriced last) or
    ``latency`` (the decode-step bound). Bad input exits at once naming its flag; only the layouts an engine refuses
    (``Refused``) are skipped."""
    require_positive("--concurrency", concurrency)
    require_positive("--max-gpus", max_gpus)
    for flag, v in (("--ttft-ms", ttft_ms), ("--tpot-ms", tpot_ms)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v < 1e9):
            raise KvplanError(f"{flag}: a latency bound in milliseconds, a positive number below 1e9, got {v!r}")
    if sort not in SORTS:
        raise KvplanError(f"--sort: {sort!r}; allowed: {', '.join(SORTS)}")
    card = model if isinstance(model, ModelCard) else load_card(model)
    catalog = load_gpus(gpu_file)
    chosen = _chosen(catalog, gpus)
    platform, left_out = plan_kw.get("platform"), []
    if require_platform(platform) == "windows" and plan_kw.get("gpu_memory") is None:  # the GPUs with a Windows total
        left_out = [g.name for g in chosen if g.windows_visible_memory_bytes is None]
        chosen = [g for g in chosen if g.windows_visible_memory_bytes is not None]
    options, tried, servable, filled = [], 0, {}, []
    runtime = get_engine(engine)
    for g in chosen:
        if not runtime.runs_on(g):  # an engine that does not run on this vendor's GPUs (TensorRT-LLM: NVIDIA only)
            continue
        base = PlanRequest.build(gpu=g, max_model_len=max_model_len, engine=engine, concurrency=concurrency,
                                 prompt_len=prompt_len,
                                 **{k: v for k, v in plan_kw.items() if v is not None})
        if base.context is not None and base.context >= (base.gpu_memory or base.gpu.engine_memory_bytes):
            filled.append(g.name)  # the --context-memory given fills this GPU: nothing is left (a plan refuses it)
            continue
        best, one_gpu = None, None
        for tp, pp in _LAYOUTS:
            if tp * pp > max_gpus:
                continue
            if best is not None and sort in _BY_GPU_COUNT and tp * pp > best.num_gpus:
                continue  # at least tp x pp GPUs: more than the best's, so more GPUs and (same GPU) a higher price
            tried += 1
            if one_gpu is not None and -(-one_gpu.weights_bytes // (tp * pp)) >= one_gpu.room_bytes:
                continue  # refused unbuilt: a rank holds at least an even share of one GPU's weights (below)
            if (tp, pp) not in servable:  # what the runtime refuses of the layout whatever the GPU, asked once
                servable[tp, pp] = _servable(card, base.runtime, Layout(tp, pp, 1, base.layout.expert_parallel))
            if not servable[tp, pp]:
                continue
            try:
                cand = _option(card, base.with_layout(Layout(tp, pp, 1, base.layout.expert_parallel)),
                               max_gpus, ttft_ms, tpot_ms)
            except WeightsDoNotFit as exc:
                cand = None
                if tp * pp == 1 and not base.flags.cpu_offload_gb:
                    one_gpu = exc
            if cand is not None and (best is None or _KEYS[sort](cand) < _KEYS[sort](best)):
                best = cand
        if best is not None:
            options.append(_finished(best))
    options.sort(key=_KEYS[sort])
    return SearchResult(model=card.name, engine=engine, max_model_len=max_model_len, concurrency=concurrency,
                        ttft_ms=ttft_ms, tpot_ms=tpot_ms, layouts_tried=tried, options=options, sort=sort,
                        notes=_search_notes(options, max_gpus, sort, get_engine(engine))
                        + _platform_note(platform, left_out, chosen)
                        + ([f"Left out: {', '.join(filled)}, whose memory the --context-memory given fills (a plan "
                            "needs less in use than the GPU holds)."] if filled else []))


def _servable(card: ModelCard, rt, layout: Layout) -> bool:
    """False where the runtime refuses ``layout`` for the card (``Runtime.check_servable``, the first check of
    ``setup``: of the card as served and the layout, no GPU figure), so that a search skips it on every GPU type
    unbuilt; any other error is raised as ``setup`` raises it."""
    try:
        rt.check_servable(rt.served_card(card)[0], layout)
    except WeightsDoNotFit:
        return True
    except Refused:
        return False
    return True


def _chosen(catalog: dict[str, GPU], names: list[str] | None) -> list[GPU]:
    if not names:
        return list(catalog.values())
    by_lower = {k.lower(): v for k, v in catalog.items()}
    unknown = [n for n in names if n.lower() not in by_lower]
    if unknown:
        raise KvplanError(f"--gpus: unknown GPU {unknown[0]!r}; known: {', '.join(sorted(catalog))}")
    return [by_lower[n.lower()] for n in names]


@dataclass(frozen=True)
class _Candidate:
    """A layout that holds the requests, with what the sort keys read (PlanOption's names); the option itself is
    built for the best layout of each GPU type only (``_finished``)."""

    num_gpus: int
    price_per_hour: float | None
    tpot_ms: float | None
    pp: int
    tp: int
    dp: int
    max_concurrency: int
    concurrency: int  # the requests asked for (--concurrency)
    setup: Setup
    stages: list[Stage]
    pool: Pool
    latency: Latency | None


def _option(card: ModelCard, req: PlanRequest, max_gpus: int, ttft_ms, tpot_ms) -> _Candidate | None:
    """The layout with the fewest replicas that hold the requests, or None (refused, no room, too slow)."""
    try:
        s = setup(card, req)
        sts, p = assemble(s)
    except WeightsDoNotFit:
        raise
    except Refused:
        return None
    per_replica = s.engine.running(s, p)
    if not p.fits or int(per_replica) < 1:
        return None
    lay, C = req.layout, req.concurrency
    dp = math.ceil(C / int(per_replica))  # whole requests per replica: 3.77 runs 3
    if lay.tp * lay.pp * dp > max_gpus:
        return None
    if dp > 1:  # vLLM's MoE: routed experts split over dp x tp, so a GPU of a DP layout holds less (never more);
        # the other engines' replicas are whole copies (Runtime.moe_across_dp): the same plan again
        try:  # a layout vLLM refuses (the MoE's dp x tp group does not divide its intermediate size) is skipped
            s = setup(card, req.with_layout(Layout(lay.tp, lay.pp, dp, lay.expert_parallel)))
        except Refused:
            return None
        sts = s.engine.stages(s)
        p = s.engine.pool(s, sts)
        per_replica = s.engine.running(s, p)
    g = req.gpu
    lat = (latency(s, C, req.prompt_len, req.acceptance_rate, sts)
           if (ttft_ms or tpot_ms or g.interconnect_bandwidth_bytes_per_s) else None)
    if lat and ((ttft_ms and lat.ttft_ms > ttft_ms) or (tpot_ms and lat.tpot_ms > tpot_ms)):
        return None
    n = lay.tp * lay.pp * dp
    price = g.price_per_hour_usd * n if g.price_per_hour_usd else None  # replicas x GPUs x price per GPU-hour
    return _Candidate(n, price, lat.tpot_ms if lat else None, lay.pp, lay.tp, dp, per_replica * dp, C, s, sts, p,
                      lat)


def _finished(c: _Candidate) -> PlanOption:
    """The option of a candidate: the plan's per-GPU budget, pool and launch line (``result``'s, without the notes
    and the runtime's extras an option does not show: llama.cpp's quant table fits every GGUF type), price and
    latency."""
    from kvplan.planning.capacity.text import launch_command

    s, g, lat = c.setup, c.setup.gpu, c.latency
    per_mtok = per_million_tokens(c.price_per_hour, c.concurrency, lat.tpot_ms) if lat else None
    return PlanOption(gpu=g.name, num_gpus=c.num_gpus, tp=c.tp, pp=c.pp, dp=c.dp, max_concurrency=c.max_concurrency,
                      fits=True, price_per_hour=c.price_per_hour, price_per_gpu_hour=g.price_per_hour_usd,
                      price_source=(g.price_source or "--gpu-file") if c.price_per_hour else None,
                      price_date=g.price_date or None if c.price_per_hour else None,
                      usd_per_million_output_tokens=per_mtok,
                      ttft_ms=lat.ttft_ms if lat else None, tpot_ms=lat.tpot_ms if lat else None,
                      launch_command=launch_command(s), per_gpu=per_gpu(s, c.pool), kv_cache=c.pool.pool)


def _inf(x: float | None) -> float:
    return math.inf if x is None else x


_KEYS = {  # the orders of --sort; each breaks ties by the others, then fewer pipeline stages
    "gpus": lambda o: (o.num_gpus, _inf(o.price_per_hour), _inf(o.tpot_ms), o.pp, o.tp),
    "cost": lambda o: (_inf(o.price_per_hour), o.num_gpus, _inf(o.tpot_ms), o.pp, o.tp),
    "latency": lambda o: (_inf(o.tpot_ms), _inf(o.price_per_hour), o.num_gpus, o.pp, o.tp),
}


def _platform_note(platform: str | None, left_out: list[str], chosen: list[GPU]) -> list[str]:
    """Which GPUs a --platform windows search tried, where it left others out (no Windows total recorded)."""
    if not left_out:
        return []
    return [f"--platform {platform}: the GPUs whose {platform} total is recorded ({', '.join(g.name for g in chosen)}"
            f"); {len(left_out)} left out ({', '.join(left_out)}: "
            "plan one with --gpu and --gpu-memory for its total there)."]


def _search_notes(options: list[PlanOption], max_gpus: int, sort: str, runtime=None) -> list[str]:
    if not options:
        return [f"No layout within --max-gpus {max_gpus} holds the requests; raise --max-gpus, shorten "
                "--max-model-len or use fp8 (--kv-dtype / --weight-dtype)."]
    order = {"gpus": "the fewest GPUs first, then price, then the decode-latency bound",
             "cost": "the lowest price first (GPUs x price per GPU-hour; GPUs without a price last), then fewer GPUs",
             "latency": "the lowest decode-latency bound (TPOT) first, then price"}[sort]
    notes = [f"One option per GPU type (DP replicas multiply concurrency), {order} (--sort {sort})."]
    extra = runtime.search_note() if runtime is not None else None
    if extra:
        notes.append(extra)
    priced = [o for o in options if o.price_per_hour is not None]
    if priced:
        notes.append("$/h: all the option's GPUs at public on-demand list prices (the catalog's, read on the date "
                     "shown; a --gpu-file entry with only price_per_hour_usd replaces one); $/Mtok: the price of a "
                     "million output tokens at the decode bound with --concurrency requests decoding, a floor (real "
                     "steps are slower than the roofline).")
    return notes
