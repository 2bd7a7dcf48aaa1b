"""Latency lower bounds of a serving layout: the roofline of one replica's batch, split over TP, plus the ring
collectives between ranks over the interconnect (kvplan.cost.comm: the model the sharded verify checks byte for
byte)."""

from __future__ import annotations

from functools import lru_cache

from kvplan.cost.comm import comm_time_s
from kvplan.cost.roofline import Workload, roofline
from kvplan.cost.runtimes.setup import Setup
from kvplan.planning.capacity_results import Latency
from kvplan.units import cdiv


def latency(s: Setup, concurrency: int, prompt_len: int | None = None) -> Latency:
    """TTFT of one request's prefill and TPOT of the replica's decode batch at max_model_len, per the module rules."""
    card, lay = s.card, s.layout
    batch, prompt = cdiv(concurrency, lay.dp), prompt_len or s.max_model_len
    roof = _roofline(card, batch, prompt, s.max_model_len, s.gpu, s.engine, s.kv_t, s.w_t, max(1, s.block_size))
    kw = dict(e=4 if s.w_t.bits == 32 else 2, link_bytes_per_s=s.gpu.interconnect_bandwidth_bytes_per_s,
              logit_rows=1)  # vLLM computes logits of the last position of each sequence
    prefill_comm = comm_time_s(card, lay, batch=1, new_tokens=prompt, **kw)
    decode_comm = comm_time_s(card, lay, batch=batch, new_tokens=1, **kw)
    ttft = roof.time_to_first_token_one_request_s / lay.tp + prefill_comm
    tpot = roof.time_per_output_token_s / lay.tp + decode_comm
    price = s.gpu.price_per_hour_usd * lay.gpus if s.gpu.price_per_hour_usd else None  # replicas x GPUs x $/GPU-h
    return Latency(batch_per_replica=batch, prompt_len=prompt, ttft_ms=ttft * 1e3, tpot_ms=tpot * 1e3,
                   allreduce_ms_per_token=decode_comm * 1e3, price_per_hour=price,
                   usd_per_million_output_tokens=per_million_tokens(price, concurrency, tpot * 1e3),
                   notes=["Lower bounds: roofline / tp per GPU plus ring all-reduce and PP hand-off time; the "
                          "prefill of one request alone (TTFT) and one decode step of the replica's batch (TPOT)."])


def per_million_tokens(price_per_hour: float | None, concurrency: int, tpot_ms: float) -> float | None:
    """Price of a million output tokens at the decode bound: each of ``concurrency`` requests gets a token per TPOT,
    so the layout emits at most concurrency / TPOT tokens a second, and a million cost at least
    price/h / 3600 x 1e6 / that. A floor: the roofline TPOT is a lower bound on the step time."""
    if price_per_hour is None or tpot_ms <= 0:
        return None
    return price_per_hour / 3600 * 1e6 / (concurrency / (tpot_ms / 1e3))


@lru_cache(maxsize=256)
def _roofline(card, batch, prompt, seq_len, gpu, engine, kv_t, w_t, block_size):
    """One roofline per (card, GPU, batch, lengths): the search asks for the same one from several layouts."""
    return roofline(Workload(card, engine, kv_t, w_t, batch, prompt, seq_len, block_size=block_size), gpu,
                    memory_needed_bytes=0)
