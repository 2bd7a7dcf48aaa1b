"""Latency lower bounds of a serving layout: the roofline of one replica's batch, split over TP, plus the ring
collectives between ranks over the interconnect (kvplan.cost.comm: the model the sharded verify checks byte for
byte)."""

from __future__ import annotations

from functools import lru_cache

from kvplan.cost.comm import comm_time_s
from kvplan.cost.roofline import Workload, roofline, step_breakdowns
from kvplan.cost.runtimes.setup import Setup
from kvplan.planning.capacity.results import Latency
from kvplan.errors import KvplanError
from kvplan.units import cdiv


def latency(s: Setup, concurrency: int, prompt_len: int | None = None,
            acceptance_rate: float | None = None) -> Latency:
    """TTFT of one request's prefill and TPOT of the replica's decode batch at max_model_len, per the module rules;
    with speculative decoding and ``acceptance_rate``, TPOT per accepted token (``speculative_step_s``)."""
    card, lay = s.card, s.layout
    batch, prompt = cdiv(concurrency, lay.dp), prompt_len or s.max_model_len
    roof = _roofline(card, batch, prompt, s.max_model_len, s.gpu, s.engine, s.kv_t, s.w_t, max(1, s.block_size))
    kw = dict(e=s.w_t.activation_bytes, link_bytes_per_s=s.gpu.interconnect_bandwidth_bytes_per_s,
              logit_rows=1)  # vLLM computes logits of the last position of each sequence
    decode_comm = comm_time_s(card, lay, batch=batch, new_tokens=1, **kw)
    ttft = layout_step_s(card, lay, roof.time_to_first_token_one_request_s, batch=1, new_tokens=prompt, **kw)
    tpot = roof.time_per_output_token_s / lay.tp + decode_comm
    price = s.gpu.price_per_hour_usd * lay.gpus if s.gpu.price_per_hour_usd else None  # replicas x GPUs x $/GPU-h
    notes = ["Lower bounds: roofline / tp per GPU plus ring all-reduce and PP hand-off time; the prefill of one "
             "request alone (TTFT) and one decode step of the replica's batch (TPOT)."]
    spec, per_step = s.opts.speculative, 1.0
    if spec is not None and acceptance_rate is None:
        notes.append(f"Speculative decoding ({spec}): TPOT is the plain decode step; give --acceptance-rate A for "
                     "the verification step over k+1 tokens, the drafts' cost and the tokens a step yields.")
    elif spec is not None:
        from kvplan.cost.features import expected_tokens_per_step

        per_step = expected_tokens_per_step(acceptance_rate, spec.k)
        step = speculative_step_s(s, roof, batch, prompt) / lay.tp
        verify_comm = comm_time_s(card, lay, batch=batch, new_tokens=spec.k + 1, **kw)
        tpot = (step + verify_comm) / per_step
        notes.append(f"Speculative decoding ({spec}), acceptance rate {acceptance_rate}: {per_step:.2f} tokens per "
                     "step, E = (1 - a^(k+1)) / (1 - a) (Leviathan et al. 2023); TPOT = (verification of k+1 tokens "
                     "per request + k drafting steps) / E. The drafts' cost is ESTIMATED (an EAGLE/MTP head: its "
                     "layer and the shared LM head read per step).")
    elif acceptance_rate is not None:
        raise KvplanError("--acceptance-rate: only with speculative decoding (--speculative-config)")
    return Latency(batch_per_replica=batch, prompt_len=prompt, ttft_ms=ttft * 1e3, tpot_ms=tpot * 1e3,
                   allreduce_ms_per_token=decode_comm * 1e3, tokens_per_step=per_step, price_per_hour=price,
                   usd_per_million_output_tokens=per_million_tokens(price, concurrency, tpot * 1e3), notes=notes)


def layout_step_s(card, lay, one_gpu_s: float, *, batch: int, new_tokens: int, e: int,
                  link_bytes_per_s: int | None, logit_rows: int = 1) -> float:
    """A step's lower bound on a TP x PP layout: the one-GPU roofline time / tp, plus the ring collectives of
    ``batch`` x ``new_tokens`` between the ranks (kvplan.cost.comm; KvplanError where the GPU states no link)."""
    return one_gpu_s / lay.tp + comm_time_s(card, lay, batch=batch, new_tokens=new_tokens, logit_rows=logit_rows, e=e,
                                            link_bytes_per_s=link_bytes_per_s)


def speculative_step_s(s: Setup, roof, batch: int, prompt: int) -> float:
    """One speculative step of the replica's batch on one GPU-equivalent (before / tp): the target verifies k+1
    tokens per request in one forward (compute (k+1) x the decode step's FLOPs; memory: the decode step's bytes with
    the weights a batch of (k+1) x batch tokens touches, MoE experts included, and k more K/V writes), plus k
    drafting steps (draft_model: its own decode roofline; EAGLE / MTP: ``features.draft_step_cost``; ngram and
    suffix: none on the GPU)."""
    from kvplan.cost.features import draft_step_cost
    from kvplan.cost.traffic import weights_read_bytes

    spec, dec = s.opts.speculative, roof.decode_step
    k, peak, bw = spec.k, dec.flops / dec.compute_time_s, dec.bytes_moved / dec.memory_time_s
    verify_bytes = (dec.bytes_moved - dec.weights_read_bytes + weights_read_bytes(s.card, s.w_t, batch * (k + 1))
                    + k * dec.kv_write_bytes)
    verify = max((k + 1) * dec.compute_time_s, verify_bytes / bw)
    if spec.draft_card is not None:
        draft = _roofline(spec.draft_card, batch, prompt, s.max_model_len, s.gpu, s.engine, s.kv_t, s.w_t,
                          max(1, s.block_size)).time_per_output_token_s
    elif spec.draft_layers:
        kv = dec.kv_read_bytes * spec.draft_layers // max(1, s.card.attention_layers)
        flops, nbytes = draft_step_cost(s.card, s.w_t, spec, batch, kv)
        draft = max(flops / peak, nbytes / bw)
    else:
        draft = 0.0
    return verify + k * draft


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
                    memory_needed_bytes=0, steps=_steps(card, batch, prompt, seq_len, engine))


@lru_cache(maxsize=256)
def _steps(card, batch, prompt, seq_len, engine):
    """The prefill's and decode step's FLOPs, which no GPU figure enters: once per batch, not once per GPU type."""
    return step_breakdowns(card, prompt_len=prompt, seq_len=seq_len, batch=batch, engine=engine, max_cache_len=None,
                           encoder_len=0)
