"""Latency lower bounds of a serving layout: the roofline of one replica's batch, split over TP, plus the ring
all-reduces between TP ranks over the interconnect (Megatron-LM: two all-reduces of the hidden states per layer)."""

from __future__ import annotations

from functools import lru_cache

from kvplan.cost.roofline import roofline
from kvplan.planning.capacity_engines import Setup
from kvplan.planning.capacity_results import Latency
from kvplan.errors import KvplanError
from kvplan.units import cdiv


def allreduce_s(tp: int, nbytes: int, link_bytes_per_s: int | None) -> float:
    """Ring all-reduce lower bound: 2 (tp - 1) / tp x bytes over one direction (half the stated both-way figure)."""
    if tp == 1:
        return 0.0
    if not link_bytes_per_s:
        raise KvplanError("--gpu: the GPU states no interconnect_bandwidth_bytes_per_s; add it with --gpu-file")
    return 2 * (tp - 1) / tp * nbytes / (link_bytes_per_s / 2)


def latency(s: Setup, concurrency: int, prompt_len: int | None = None) -> Latency:
    """TTFT of one request's prefill and TPOT of the replica's decode batch at max_model_len, per the module rules."""
    card, lay = s.card, s.layout
    batch, prompt = cdiv(concurrency, lay.dp), prompt_len or s.max_model_len
    roof = _roofline(card, batch, prompt, s.max_model_len, s.gpu, s.engine, s.kv_t, s.w_t, max(1, s.block_size))
    act = 4 if s.w_t.bits == 32 else 2
    link = s.gpu.interconnect_bandwidth_bytes_per_s

    def comm(tokens: int) -> float:
        per_layer = 2 * allreduce_s(lay.tp, tokens * card.hidden_size * act, link)
        handoff = (lay.pp - 1) * tokens * card.hidden_size * act / (link / 2) if lay.pp > 1 else 0.0
        return card.num_layers * per_layer + handoff

    ttft = roof.time_to_first_token_one_request_s / lay.tp + comm(prompt)
    tpot = roof.time_per_output_token_s / lay.tp + comm(batch)
    return Latency(batch_per_replica=batch, prompt_len=prompt, ttft_ms=ttft * 1e3, tpot_ms=tpot * 1e3,
                   allreduce_ms_per_token=comm(batch) * 1e3,
                   notes=["Lower bounds: roofline / tp per GPU plus ring all-reduce and PP hand-off time; the "
                          "prefill of one request alone (TTFT) and one decode step of the replica's batch (TPOT)."])


@lru_cache(maxsize=256)
def _roofline(card, batch, prompt, seq_len, gpu, engine, kv_t, w_t, block_size):
    """One roofline per (card, GPU, batch, lengths): the search asks for the same one from several layouts."""
    return roofline(card, batch=batch, prompt_len=prompt, seq_len=seq_len, gpu=gpu, engine=engine, kv_t=kv_t, w_t=w_t,
                    memory_needed_bytes=0, block_size=block_size)
