"""Which GPUs, how many, which layout: ``kvplan plan`` without ``--gpu``, and the latency bounds of a layout.

Latency extends kvplan.cost.roofline: each GPU of a TP group runs 1/tp of the FLOPs and reads 1/tp of the bytes, and
every decoder layer adds two all-reduces of tokens x hidden activations (after attention and after the MLP,
Megatron-LM arXiv:1909.08053 section 3); a ring all-reduce moves 2 (tp - 1) / tp of the data over each GPU's link
(Patarasuk & Yuan 2009). PP adds one hand-off of tokens x hidden per stage boundary. These are lower bounds.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

from kvplan.cost.hardware import GPU, load_gpus
from kvplan.cost.parallel import Layout
from kvplan.errors import KvplanError, Refused
from kvplan.model.card import ModelCard
from kvplan.model.catalog import load_card
from kvplan.planning.capacity import PlanRequest, assemble, result, setup
from kvplan.planning.latency import latency
from kvplan.planning.capacity_results import PlanOption, PlanResult, SearchResult
from kvplan.units import require_positive

TP_SIZES, PP_SIZES = (1, 2, 4, 8), (1, 2, 3, 4)


def search(model: ModelCard | str | Path, *, max_model_len: int, concurrency: int, gpus: list[str] | None = None,
           max_gpus: int = 8, engine: str = "vllm", ttft_ms: float | None = None, tpot_ms: float | None = None,
           prompt_len: int | None = None, gpu_file: str | None = None, **plan_kw) -> SearchResult:
    """Every catalog GPU (or ``gpus``) x TP 1,2,4,8 x PP 1..4 x DP: the layouts that hold ``concurrency`` requests of
    ``max_model_len`` tokens within ``max_gpus`` GPUs (and the latency targets), the fewest GPUs per type first.
    Bad input exits at once naming its flag; only the layouts an engine refuses (``Refused``) are skipped."""
    require_positive("--concurrency", concurrency)
    require_positive("--max-gpus", max_gpus)
    card = model if isinstance(model, ModelCard) else load_card(model)
    catalog = load_gpus(gpu_file)
    chosen = _chosen(catalog, gpus)
    options, tried = [], 0
    for g in chosen:
        base = PlanRequest.build(gpu=g, max_model_len=max_model_len, engine=engine, concurrency=concurrency,
                                 prompt_len=prompt_len,
                                 **{k: v for k, v in plan_kw.items() if v is not None})
        best = None
        for tp in TP_SIZES:
            for pp in PP_SIZES:
                if tp * pp > max_gpus:
                    continue
                tried += 1
                opt = _option(card, replace(base, layout=Layout(tp, pp, 1, base.layout.expert_parallel)), max_gpus,
                              ttft_ms, tpot_ms)
                if opt is not None and (best is None or _key(opt) < _key(best)):
                    best = opt
        if best is not None:
            options.append(best)
    options.sort(key=_key)
    return SearchResult(model=card.name, engine=engine, max_model_len=max_model_len, concurrency=concurrency,
                        ttft_ms=ttft_ms, tpot_ms=tpot_ms, layouts_tried=tried, options=options,
                        notes=_search_notes(options, max_gpus))


def _chosen(catalog: dict[str, GPU], names: list[str] | None) -> list[GPU]:
    if not names:
        return list(catalog.values())
    by_lower = {k.lower(): v for k, v in catalog.items()}
    unknown = [n for n in names if n.lower() not in by_lower]
    if unknown:
        raise KvplanError(f"--gpus: unknown GPU {unknown[0]!r}; known: {', '.join(sorted(catalog))}")
    return [by_lower[n.lower()] for n in names]


def _option(card: ModelCard, req: PlanRequest, max_gpus: int, ttft_ms, tpot_ms) -> PlanOption | None:
    """The layout's option with the fewest replicas that hold the requests, or None (refused, no room, too slow)."""
    try:
        s = setup(card, req)
        sts, p = assemble(s)
    except Refused:
        return None
    limit = s.engine.running_limit(s)
    per_replica = min(p.concurrency, limit or math.inf)
    if not p.fits or per_replica <= 0:
        return None
    lay, C = req.layout, req.concurrency
    dp = math.ceil(C / per_replica)
    if lay.tp * lay.pp * dp > max_gpus:
        return None
    if dp > 1:  # MoE: routed experts split over dp x tp, so each GPU of a DP layout holds less (never more)
        try:  # a layout vLLM refuses (the MoE's dp x tp group does not divide its intermediate size) is skipped
            s = setup(card, replace(req, layout=Layout(lay.tp, lay.pp, dp, lay.expert_parallel)))
        except Refused:
            return None
        sts = s.engine.stages(s)
        p = s.engine.pool(s, sts)
        per_replica = min(p.concurrency, s.engine.running_limit(s) or math.inf)
    g = req.gpu
    lat = latency(s, C, req.prompt_len, req.acceptance_rate) if (ttft_ms or tpot_ms or g.interconnect_bandwidth_bytes_per_s) else None
    if lat and ((ttft_ms and lat.ttft_ms > ttft_ms) or (tpot_ms and lat.tpot_ms > tpot_ms)):
        return None
    r: PlanResult = result(s, sts, p)
    n = lay.tp * lay.pp * dp
    return PlanOption(gpu=g.name, num_gpus=n, tp=lay.tp, pp=lay.pp, dp=dp, max_concurrency=per_replica * dp, fits=True,
                      price_per_hour=g.price_per_hour * n if g.price_per_hour else None,
                      ttft_ms=lat.ttft_ms if lat else None, tpot_ms=lat.tpot_ms if lat else None,
                      launch_command=r.launch_command, per_gpu=r.per_gpu, kv_cache=r.kv_cache)


def _key(o: PlanOption) -> tuple:
    """Fewest GPUs, then price (where known), then decode latency, then fewer pipeline stages."""
    return (o.num_gpus, o.price_per_hour if o.price_per_hour is not None else math.inf,
            o.tpot_ms if o.tpot_ms is not None else math.inf, o.pp, o.tp)


def _search_notes(options: list[PlanOption], max_gpus: int) -> list[str]:
    if not options:
        return [f"No layout within --max-gpus {max_gpus} holds the requests; raise --max-gpus, shorten "
                "--max-model-len or use fp8 (--kv-dtype / --weight-dtype)."]
    return ["One option per GPU type: the fewest GPUs that hold the requests (DP replicas multiply concurrency), "
            "then price where the catalog or --gpu-file gives one, then the decode-latency bound."]
