"""``kvplan disagg``: separate prefill and decode pools for R requests/s of ISL prompt and OSL output tokens under TTFT
and TPOT targets, the K/V each request hands over and the link it needs, beside one aggregated deployment.

The arithmetic (/work/shared/reference/serving-features.md section 3) follows aiconfigurator's disagg mode
(``sdk/picking.py``, ai-dynamo/aiconfigurator 095f58a5) and NVIDIA Dynamo's SLA planner, with kvplan's own plan
(the engine's pool) and roofline (latency lower bounds) for each worker:

    prefill worker:  seq/s_p = 1 / TTFT(one ISL prompt)         TTFT x 1.8 (queueing) + hand-over <= --ttft-ms
    decode worker:   B_d = largest batch with TPOT(B) <= --tpot-ms and B <= the pool's concurrency at ISL + OSL
                     seq/s_d = B_d / (OSL x TPOT(B_d))           (Little's law)
    workers:         n_p = ceil(R / (seq/s_p x 0.9)), n_d = ceil(R / (seq/s_d x 0.92))   (aiconfigurator's factors)
    hand-over:       cdiv(ISL, block) x block x K/V bytes per token of every layer and head (MLA: x decode TP, each
                     decode rank reads the whole latent; vLLM NixlConnector moves whole blocks)

Latencies are kvplan's roofline lower bounds, so the pools are the fewest workers that could meet the targets.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

from pydantic import BaseModel

from kvplan.cost.kvspec import kv_bytes_per_token, layer_specs
from kvplan.cost.parallel import Layout
from kvplan.errors import KvplanError, Refused
from kvplan.model.card import ModelCard
from kvplan.model.catalog import load_card
from kvplan.planning.capacity import PlanRequest, assemble, result, setup
from kvplan.planning.capacity.latency import latency
from kvplan.planning.results import RESULT
from kvplan.units import cdiv, require_fraction, require_positive

PREFILL_FACTOR = 0.9  # aiconfigurator picking.py: prefill bubble
DECODE_FACTOR = 0.92  # aiconfigurator picking.py: decode under-fill
TTFT_FACTOR = 1.8  # aiconfigurator _AUTOSCALE_TTFT_CORRECTION_FACTOR: queueing before a prefill
KV_LEASE_S = 30.0  # vLLM NixlConnector kv_lease_duration: the longest a prefill worker holds finished blocks
TP_SIZES = (1, 2, 4, 8)


class Pool(BaseModel):
    """One role's workers: each a TP x PP group of GPUs; ``replicas`` of them."""

    model_config = RESULT
    role: str
    gpu: str
    tp: int
    pp: int
    replicas: int
    gpus: int  # replicas x tp x pp
    max_concurrency: float  # requests one worker's pool holds at ISL + OSL
    kv_pool_bytes: int  # one worker's KV pool per GPU
    batch: int  # requests one worker runs at once (decode: the TPOT-bound batch; prefill: 1)
    ttft_ms: float | None  # prefill: one ISL prompt alone (roofline lower bound)
    tpot_ms: float | None  # decode: one step of the batch at ISL + OSL
    requests_per_s: float  # one worker's rate, before the factor
    launch_command: str


class DisaggResult(BaseModel):
    model_config = RESULT
    model: str
    engine: str
    rate: float
    isl: int
    osl: int
    ttft_ms: float
    tpot_ms: float
    prefill: Pool
    decode: Pool
    ratio: str  # prefill : decode workers
    total_gpus: int
    kv_transfer_bytes_per_request: int
    kv_transfer_bytes_per_s: float  # rate x per request: the aggregate over all P -> D links
    link_bytes_per_s_needed: float  # one hand-over within what TTFT leaves after the prefill
    transfer_budget_ms: float
    prefill_held_bytes_per_worker: int  # K/V a prefill worker holds until decode reads it
    aggregated_concurrency: float  # the same GPUs as aggregated replicas of the decode layout, at ISL + OSL
    notes: list[str]
    platform: str = "linux"  # --platform: the host OS whose GPU total the pools start from (windows: Windows, WSL2)

    def _repr_html_(self) -> str:
        """A notebook shows the two pools as a table (kvplan.planning.htmlrepr)."""
        from kvplan.planning.htmlrepr import disagg_html

        return disagg_html(self)


def disagg(model: ModelCard | str | Path, *, gpu: str, rate: float, isl: int, osl: int, ttft_ms: float,
           tpot_ms: float, engine: str = "vllm", max_gpus_per_worker: int = 8, prefill_factor: float = PREFILL_FACTOR,
           decode_factor: float = DECODE_FACTOR, ttft_factor: float = TTFT_FACTOR,
           gpu_file: str | None = None, **plan_kw) -> DisaggResult:
    """Prefill and decode pools for ``rate`` requests/s; KvplanError naming the flag when no worker meets a target."""
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0 < rate < 1e9:
        raise KvplanError(f"--rate: requests per second, a positive number below 1e9, got {rate!r}")
    require_positive("--isl", isl)
    require_positive("--osl", osl)
    require_positive("--max-gpus-per-worker", max_gpus_per_worker)
    for flag, v in (("--ttft-ms", ttft_ms), ("--tpot-ms", tpot_ms), ("--ttft-factor", ttft_factor)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v < 1e9:
            raise KvplanError(f"{flag}: a positive number below 1e9, got {v!r}")
    # efficiencies against the roofline bound: above 1 a worker would beat the lower bound (aiconfigurator's 0.9, 0.92)
    require_fraction("--prefill-factor", prefill_factor)
    require_fraction("--decode-factor", decode_factor)
    card = model if isinstance(model, ModelCard) else load_card(model)
    base = PlanRequest.build(gpu=gpu, gpu_file=gpu_file, max_model_len=isl + osl, engine=engine, **plan_kw)
    if base.runtime.disagg_roles is None:
        from kvplan.cost.runtimes import get_engine, names

        serving = [n for n in names() if get_engine(n).disagg_roles is not None]
        raise KvplanError(f"--engine: {base.runtime.display_name} has no disaggregated prefill/decode serving; "
                          f"allowed: {', '.join(serving)}")
    workers = _workers(card, base, max_gpus_per_worker)
    if not workers:
        raise KvplanError(f"--gpu: {card.name} at {isl + osl} tokens fits no TP layout of up to "
                          f"{max_gpus_per_worker} {base.gpu.name} GPUs (--max-gpus-per-worker)")
    per_token = kv_bytes_per_token(layer_specs(card, workers[0][0].kv_t, base.runtime))
    prefill = _prefill(workers, rate, isl, ttft_ms, ttft_factor, prefill_factor, card, per_token, base.gpu)
    reserve = base.runtime.disagg_decode_reserve_tokens  # a decode worker's request: ISL + OSL + this
    d_workers = workers if not reserve else _workers(card, replace(base, max_model_len=isl + osl + reserve),
                                                     max_gpus_per_worker)
    if not d_workers:
        raise KvplanError(f"--gpu: {card.name} at {isl + osl + reserve} tokens (with {reserve} reserved decode "
                          f"tokens) fits no TP layout of up to {max_gpus_per_worker} {base.gpu.name} GPUs "
                          "(--max-gpus-per-worker)")
    decode = _decode(d_workers, rate, osl, tpot_ms, decode_factor)
    d_tp = decode.tp
    p_block = prefill.block
    hand_over = cdiv(isl, p_block) * p_block * per_token * (d_tp if card.mla else 1)
    budget_ms = ttft_ms - ttft_factor * prefill.pool.ttft_ms
    link = hand_over / (budget_ms / 1e3)
    held = math.ceil(rate / prefill.pool.replicas * min(KV_LEASE_S, budget_ms / 1e3) * hand_over)
    if held > prefill.pool.kv_pool_bytes * prefill.tp:
        notes_held = [f"At that link speed a prefill worker would hold {held:,} B of finished requests, more than its "
                      f"pool ({prefill.pool.kv_pool_bytes * prefill.tp:,} B over {prefill.tp} GPUs): the link must be "
                      f"at least {held / (prefill.pool.kv_pool_bytes * prefill.tp):.1f}x faster, or prefill stalls."]
    else:
        notes_held = []
    total = prefill.pool.gpus + decode.pool.gpus
    agg = (total // (decode.tp * decode.pp)) * decode.pool.max_concurrency
    notes = [f"Launch: {base.runtime.disagg_note}.",
             f"Latencies are kvplan's roofline lower bounds (kvplan.planning.capacity.latency); aiconfigurator's factors: "
             f"prefill x {prefill_factor}, decode x {decode_factor}, TTFT queueing x {ttft_factor} "
             "(--prefill-factor, --decode-factor, --ttft-factor).",
             f"Hand-over: cdiv({isl}, {p_block}) x {p_block} tokens x {per_token:,} B of K/V per token (every layer "
             "and K/V head: the decode ranks read the whole request)"
             + (f" x decode TP {d_tp} (MLA: each decode rank reads the whole latent)" if card.mla else "")
             + f"; it must arrive within {budget_ms:.0f} ms of the TTFT target left after {ttft_factor} x the prefill.",
             f"A prefill worker holds each request's blocks until decode reads them (at most {KV_LEASE_S:.0f} s: "
             f"vLLM NixlConnector's kv_lease_duration, used for every engine); at the needed link speed that is "
             f"{held:,} B per worker.",
             *([f"{base.runtime.display_name}'s decode workers pre-allocate each request's input plus {reserve} "
                f"reserved decode tokens: their pools are planned at {isl + osl + reserve} tokens."]
               if reserve else []),
             f"Aggregated: the same {total} GPUs as {total // (decode.tp * decode.pp)} replicas of TP {decode.tp} hold "
             f"{agg:,.1f} requests of {isl + osl} tokens (capacity only; prefill then interrupts decode).",
             *([f"GPU memory: {base.gpu.name} under Windows or WSL2 (--platform windows), each worker's pool from "
                f"{base.gpu_memory or base.gpu.engine_memory_bytes:,} B per GPU, with what the desktop holds in use "
                "at the start as kvplan plan counts it (--context-memory)."] if base.gpu.platform == "windows" else [])]
    return DisaggResult(model=card.name, engine=base.runtime.name, rate=rate, isl=isl, osl=osl, ttft_ms=ttft_ms,
                        tpot_ms=tpot_ms, prefill=prefill.pool, decode=decode.pool,
                        ratio=f"{prefill.pool.replicas}:{decode.pool.replicas}", total_gpus=total,
                        kv_transfer_bytes_per_request=hand_over, kv_transfer_bytes_per_s=rate * hand_over,
                        link_bytes_per_s_needed=link, transfer_budget_ms=budget_ms,
                        prefill_held_bytes_per_worker=held, aggregated_concurrency=agg, notes=notes + notes_held,
                        platform=base.gpu.platform)


class _Choice:
    def __init__(self, pool: Pool, block: int, tp: int, pp: int):
        self.pool, self.block, self.tp, self.pp = pool, block, tp, pp


def _workers(card: ModelCard, base: PlanRequest, max_gpus: int) -> list:
    """(setup, stages, pool) of every TP layout the engine serves and whose pool holds one request."""
    out = []
    for tp in TP_SIZES:
        if tp > max_gpus:
            break
        try:
            s = setup(card, replace(base, layout=Layout(tp)))
            sts, p = assemble(s)
        except Refused:
            continue
        if p.fits:
            out.append((s, sts, p))
    return out


def _pool(role, s, sts, p, replicas, batch, ttft, tpot, rate) -> Pool:
    """One pool of ``role`` workers; its launch line is the plan's with the flags that make the server that role
    (``Runtime.disagg_roles``)."""
    lay = s.layout
    return Pool(role=role, gpu=s.gpu.name, tp=lay.tp, pp=lay.pp, replicas=replicas, gpus=replicas * lay.tp * lay.pp,
                max_concurrency=p.concurrency, kv_pool_bytes=p.pool.available_bytes, batch=batch, ttft_ms=ttft,
                tpot_ms=tpot, requests_per_s=rate,
                launch_command=s.engine.disagg_launch(result(s, sts, p).launch_command, role))


def _prefill(workers, rate, isl, ttft_ms, ttft_factor, factor, card, per_token, gpu) -> _Choice:
    best = None
    for s, sts, p in workers:
        ttft = latency(s, 1, isl, stages=sts).ttft_ms
        if ttft * ttft_factor >= ttft_ms:
            continue
        per_s = 1e3 / ttft  # one prompt after another: a compute-bound prefill's time grows with its tokens
        n = math.ceil(rate / (per_s * factor))
        choice = _Choice(_pool("prefill", s, sts, p, n, 1, ttft, None, per_s), s.block_size, s.layout.tp, 1)
        if best is None or (choice.pool.gpus, choice.tp) < (best.pool.gpus, best.tp):
            best = choice
    if best is None:
        raise KvplanError(f"--ttft-ms: no prefill worker of up to {workers[-1][0].layout.tp} GPUs prefills {isl} "
                          f"tokens within {ttft_ms} ms / {ttft_factor} (roofline lower bound)")
    return best


def _decode(workers, rate, osl, tpot_ms, factor) -> _Choice:
    best = None
    for s, sts, p in workers:
        cap = int(s.engine.running(s, p))
        if cap < 1 or latency(s, 1, 1, stages=sts).tpot_ms > tpot_ms:
            continue
        lo, hi = 1, cap  # the largest batch whose step meets TPOT (a step's time grows with the batch)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if latency(s, mid, 1, stages=sts).tpot_ms <= tpot_ms else (lo, mid - 1)
        tpot = latency(s, lo, 1, stages=sts).tpot_ms
        per_s = lo / (osl * tpot / 1e3)
        n = math.ceil(rate / (per_s * factor))
        choice = _Choice(_pool("decode", s, sts, p, n, lo, None, tpot, per_s), s.block_size, s.layout.tp, 1)
        if best is None or (choice.pool.gpus, choice.tp) < (best.pool.gpus, best.tp):
            best = choice
    if best is None:
        raise KvplanError(f"--tpot-ms: no decode worker meets {tpot_ms} ms per token even at batch 1 "
                          "(roofline lower bound)")
    return best
