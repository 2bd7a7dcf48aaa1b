"""Latency lower bounds of a serving layout: each GPU's share of one replica's step (kvplan.cost.roofline's bounds
with the FLOPs split over TP and the bytes that GPU itself moves), plus the ring collectives between ranks over the
interconnect (kvplan.cost.comm: the model the sharded verify checks byte for byte).

A GPU's bytes are its own (kvplan.cost.traffic.path_traffic over ``Runtime.held_stages``): the weights its rank
holds, as the plan's weights row counts them (quantized formats as stored; llama.cpp's GGUF tensors), and the cache
its rank keeps (kv_heads_per_rank heads, replicated when TP exceeds them; MLA latents whole on every rank), summed
over the pipeline stages a token passes. Its FLOPs are the model's / tp (Megatron-LM's split, arXiv:1909.08053).

A pipeline (pp > 1) decodes as its runtime does (``Runtime.decode_micro_batches``): one batch walking the stages in
turn, or m micro-batches of the running requests in flight (vLLM's batch queue, SGLang's and TensorRT-LLM's PP
micro-batches), each stage stepping them one after another; a request then gets a token once per round, the token
period (``pipelined_decode_s``), unless one batch walking the stages bounds lower (uneven stages, a small batch: the
engine runs that where the requests were scheduled together), which TPOT then is."""

from __future__ import annotations

from collections import Counter

from dataclasses import dataclass, replace
from functools import lru_cache

from kvplan.cost.comm import comm_time_s, stage_comm_times_s
from kvplan.cost.engines import CacheRun
from kvplan.cost.flops import prefill_flops
from kvplan.cost.roofline import Workload, roofline, step_breakdowns
from kvplan.cost.runtimes.setup import Setup, Stage
from kvplan.cost.traffic import StepTraffic, path_traffic
from kvplan.planning.capacity.results import Latency
from kvplan.errors import KvplanError
from kvplan.units import cdiv


def latency(s: Setup, concurrency: int, prompt_len: int | None = None,
            acceptance_rate: float | None = None, stages: list[Stage] | None = None) -> Latency:
    """TTFT of one request's prefill and TPOT of the replica's decode batch at max_model_len, per the module rules;
    with speculative decoding and ``acceptance_rate``, TPOT per accepted token (``speculative_step_s``).
    ``stages``: the plan's (``Runtime.stages``), where the caller has them."""
    card, lay = s.card, s.layout
    batch, prompt = cdiv(concurrency, lay.dp), prompt_len or s.max_model_len
    roof = _roofline(card, batch, prompt, s.max_model_len, s.gpu, s.engine, s.kv_t, s.w_t, max(1, s.block_size))
    held = s.engine.held_stages(s, s.engine.stages(s) if stages is None else stages)
    kw = comm_keywords(s)
    # speculative verification (--acceptance-rate) is bounded as one batch walking the stages (speculative_step_s)
    verify = s.opts.speculative is not None and acceptance_rate is not None
    step = decode_step(s, held, batch, prompt, kw, micro_batched=not verify)
    tpot, decode_comm, dec, micro = step.tpot_s, step.comm_s, step.traffic, step.micro
    notes_pp = ([] if step.lost_period_s is None else
                [one_batch_note(s.engine.display_name, lay.pp, batch, step.offered, step.lost_period_s)])
    cached = _cached_prefix(s, prompt)
    new_tokens = prompt - cached
    ttft = (gpu_step_s(roof, _one_request_flops(card, prompt, s.engine, cached),
                       gpu_traffic(s, held, 1, prompt, decode=False), lay.tp)
            + comm_time_s(card, lay, batch=1, new_tokens=new_tokens, **kw))
    price = s.gpu.price_per_hour_usd * lay.gpus if s.gpu.price_per_hour_usd else None  # replicas x GPUs x $/GPU-h
    what = ("one decode step of the replica's batch (TPOT), which reads" if micro == 1 else
            f"the token period of the pipeline's {micro} decode micro-batches (TPOT, below), one micro-batch's step of "
            f"{cdiv(batch, micro):,} requests reading")
    notes = [f"Lower bounds per GPU: max(FLOPs / tp / peak, the bytes this GPU moves / bandwidth) plus ring "
             f"all-reduce and PP hand-off time; the prefill of one request alone (TTFT) and {what} "
             f"{dec.weights_read_bytes:,} B of weights (as held: the weights "
             f"row less the rotary cache and the embedding table, which a step gathers from, and the experts its "
             f"tokens leave idle) and {dec.kv_read_bytes:,} B of its rank's cache on each GPU along the pipeline"
             + (", summed over the stages." if lay.pp > 1 else ".")]
    if micro > 1:
        notes.append(pipeline_note(s.engine.display_name, lay.pp, batch, micro))
    notes += notes_pp
    if cached:
        notes.append(f"--shared-prefix-len {s.opts.shared_prefix_len:,}: TTFT prefills the {new_tokens:,} tokens after "
                     f"the {cached:,} cached ones (the shared prefix's whole blocks of {s.block_size}; the last prompt "
                     "token is always computed: vLLM v1/core/kv_cache_manager.py get_computed_blocks), attending the "
                     "cached keys; its bytes are the whole prompt's (the cached K/V read instead of written).")
    host = s.engine.host_read_note(s)
    notes += [host] if host else []
    if getattr(s.opts, "lora", None) is not None:  # vLLM --enable-lora: slots in the weights row, none in the reads
        from kvplan.cost.features import lora_slot_elements

        slot = lora_slot_elements(card, lay.tp, s.opts.lora.max_lora_rank) * s.w_t.activation_bytes
        notes.append(f"LoRA: the weights row holds {s.opts.lora.max_loras} adapter slot(s) of {slot:,} B per GPU, "
                     "which the bytes read above leave out: each distinct adapter in a batch adds its slot's A and B "
                     f"matrices ({slot:,} B) to every step (vLLM's punica kernels).")
    spec, per_step = s.opts.speculative, 1.0
    if spec is not None and acceptance_rate is None:
        notes.append(f"Speculative decoding ({spec}): TPOT is the plain decode step; give --acceptance-rate A for "
                     "the verification step over k+1 tokens, the drafts' cost and the tokens a step yields.")
    elif spec is not None:
        from kvplan.cost.features import expected_tokens_per_step

        per_step = expected_tokens_per_step(acceptance_rate, spec.k)
        step = speculative_step_s(s, roof, held, dec, batch, prompt)
        verify_comm = comm_time_s(card, lay, batch=batch, new_tokens=spec.k + 1, **kw)
        tpot = (step + verify_comm) / per_step
        notes.append(f"Speculative decoding ({spec}), acceptance rate {acceptance_rate}: {per_step:.2f} tokens per "
                     "step, E = (1 - a^(k+1)) / (1 - a) (Leviathan et al. 2023); TPOT = (verification of k+1 tokens "
                     "per request + k drafting steps) / E. The drafts' cost is ESTIMATED (an EAGLE/MTP head: its "
                     "layer and the shared LM head read per step).")
    elif acceptance_rate is not None:
        raise KvplanError("--acceptance-rate: only with speculative decoding (--speculative-config)")
    return Latency(batch_per_replica=batch, prompt_len=prompt, ttft_ms=ttft * 1e3, tpot_ms=tpot * 1e3,
                   allreduce_ms_per_token=decode_comm * 1e3, decode_weights_read_bytes=dec.weights_read_bytes,
                   decode_kv_read_bytes=dec.kv_read_bytes, decode_kv_write_bytes=dec.kv_write_bytes,
                   tokens_per_step=per_step, decode_micro_batches=micro, price_per_hour=price,
                   usd_per_million_output_tokens=per_million_tokens(price, concurrency, tpot * 1e3), notes=notes)


def comm_keywords(s: Setup) -> dict:
    """The collectives' keywords of a plan's steps (kvplan.cost.comm): the activation bytes, the GPU's link, and
    logits of one row per sequence (vLLM computes the last position's)."""
    return dict(e=s.w_t.activation_bytes, link_bytes_per_s=s.gpu.interconnect_bandwidth_bytes_per_s, logit_rows=1)


@dataclass(frozen=True)
class DecodeStep:
    """The decode step a plan's TPOT is computed from (``decode_step``): ``micro`` micro-batches in flight (1: the
    replica's whole batch walking the stages), the largest of ``size`` requests; ``flops``: the model's FLOPs of
    that step, ``roof`` its roofline; ``traffic``: the bytes one GPU of each stage moves in it, summed over the
    stages; ``tpot_s`` and ``comm_s``: the TPOT bound and its communication share. ``offered``: the micro-batches
    the runtime keeps in flight; ``lost_period_s``: their token period where one batch bounded lower (else None)."""

    tpot_s: float
    comm_s: float
    traffic: StepTraffic
    flops: int
    roof: object
    micro: int
    size: int
    offered: int
    lost_period_s: float | None = None


def decode_step(s: Setup, held, batch: int, prompt: int, kw: dict, *, micro_batched: bool = True) -> DecodeStep:
    """The replica's decode of ``batch`` requests at max_model_len as ``latency`` bounds its TPOT (module docstring):
    one step of the whole batch, or on a pipeline whose runtime keeps micro-batches in flight (``micro_batched``)
    their token period (``pipelined_decode_s``) where it is the lower, then drawn as one micro-batch's step.
    ``held``: ``Runtime.held_stages``; ``kw``: ``comm_keywords``."""
    card, lay = s.card, s.layout

    def roof_of(b):
        return _roofline(card, b, prompt, s.max_model_len, s.gpu, s.engine, s.kv_t, s.w_t, max(1, s.block_size))

    roof, dec = roof_of(batch), gpu_traffic(s, held, batch, s.max_model_len, decode=True)
    comm = comm_time_s(card, lay, batch=batch, new_tokens=1, **kw)
    whole = DecodeStep(gpu_step_s(roof, roof.decode_step.flops, dec, lay.tp) + comm, comm, dec,
                       roof.decode_step.flops, roof, 1, batch, 1)
    micro = micro_batches(s.engine, lay.pp, batch) if micro_batched else 1
    if micro == 1:
        return whole
    period, period_comm, step = pipelined_decode_s(card, roof_of, held, s.engine, _decode_run(s), lay, batch, micro,
                                                   kw)
    if period >= whole.tpot_s:  # uneven stages and a small batch: one batch walking them is the faster schedule
        return replace(whole, offered=micro, lost_period_s=period)
    size = micro_batch_sizes(batch, micro)[0]
    return DecodeStep(period, period_comm, step, roof_of(size).decode_step.flops, roof_of(size), micro, size, micro)


def micro_batches(engine, pp: int, batch: int) -> int:
    """The decode micro-batches a pipeline of ``pp`` stages keeps in flight with ``batch`` running requests: the
    runtime's (``Runtime.decode_micro_batches``), at most one per request; 1 without a pipeline."""
    return max(1, min(engine.decode_micro_batches(pp), batch)) if pp > 1 else 1


def pipelined_decode_s(card, roof_of, held, engine, run: CacheRun, lay, batch: int, micro: int,
                       comm_kw: dict) -> tuple[float, float, StepTraffic]:
    """(token period, its communication share, the bytes one GPU of each stage moves in the largest micro-batch's
    step, summed over the stages) of ``batch`` decoding requests split into ``micro`` micro-batches (sizes differing by
    one at most) that the ``lay.pp`` stages step in turn: each stage steps every micro-batch once per period, and a
    micro-batch passes every stage once (vLLM v1/engine/core.py EngineCore.step_with_batch_queue; SGLang
    Scheduler.event_loop_pp; GPipe, arXiv:1811.06965, for the schedule). The period is at least each of: a stage's
    bytes of its ``micro`` steps / bandwidth plus its collectives (``stage_comm_times_s``); the FLOPs of those steps
    / tp / pp (the busiest stage computes at least the mean); one micro-batch's pass through the stages (the
    single-batch bound of its requests). ``roof_of(b)``: the roofline of a batch of b (its FLOPs and peaks); ``held``:
    ``Runtime.held_stages``."""
    sizes = micro_batch_sizes(batch, micro)
    memory, comm, compute = [0.0] * len(held), [0.0] * len(held), 0.0
    roofs = {b: roof_of(b) for b in set(sizes)}  # at most two sizes: each roofline once
    for b, n in Counter(sizes).items():
        roof = roofs[b]
        compute += n * gpu_times(roof, roof.decode_step.flops, StepTraffic(0, 0, 0), lay.tp)[0] / lay.pp
        for i, stage in enumerate(held):
            memory[i] += n * gpu_times(roof, 0, path_traffic([stage], engine, run, b, decode=True), lay.tp)[1]
        for i, c in enumerate(stage_comm_times_s(card, lay, batch=b, new_tokens=1, **comm_kw)[:len(held)]):
            comm[i] += n * c
    big = sizes[0]
    roof = roofs[big]
    path = path_traffic(held, engine, run, big, decode=True)
    path_comm = comm_time_s(card, lay, batch=big, new_tokens=1, **comm_kw)
    bounds = [(m + c, c) for m, c in zip(memory, comm)] + [(compute, 0.0)]
    bounds.append((gpu_step_s(roof, roof.decode_step.flops, path, lay.tp) + path_comm, path_comm))
    period, period_comm = max(bounds)
    return period, period_comm, path


def micro_batch_sizes(batch: int, micro: int) -> list[int]:
    """``batch`` requests split into ``micro`` micro-batches, sizes differing by one at most, the larger first."""
    return [batch // micro + (j < batch % micro) for j in range(micro)]


def pipeline_note(engine: str, pp: int, batch: int, micro: int) -> str:
    """The latency note of a pipeline's micro-batched decode (``pipelined_decode_s``)."""
    sizes = sorted(set(micro_batch_sizes(batch, micro)), reverse=True)
    split = " or ".join(f"{b:,}" for b in sizes)
    return (f"Pipeline: {engine} keeps {micro} decode micro-batches in flight on the {pp} stages, the batch of "
            f"{batch:,} split into micro-batches of {split} requests; "
            f"each stage steps them in turn, so a request gets a token once per round: TPOT >= the largest of the "
            f"slowest stage's bytes of its {micro} steps / bandwidth plus its collectives, their FLOPs / tp / pp, "
            f"and one micro-batch's pass through the stages. The bytes above are one micro-batch's step (each stage "
            f"reads its weights once per micro-batch, {micro} times a token). Still a lower bound: an even split is "
            f"the engine's best case (a request joins the micro-batch being scheduled when it arrives), and where "
            f"the split or the stages are uneven a stage waits.")


def one_batch_note(engine: str, pp: int, batch: int, micro: int, period_s: float) -> str:
    """The latency note where one batch walking a pipeline's stages bounds lower than its micro-batches."""
    return (f"Pipeline: {engine} keeps up to {micro} decode micro-batches in flight on the {pp} stages, but here their "
            f"token period (>= {period_s * 1e3:,.3f} ms: the slowest stage reads its weights once per micro-batch) is "
            f"longer than all {batch:,} requests in one batch walking the stages in turn, which the engine runs "
            f"where they were scheduled together: TPOT is that batch's step, the lower of the two.")


def _decode_run(s: Setup) -> CacheRun:
    """A decode step's cache run at max_model_len, as ``gpu_traffic`` reads it."""
    return CacheRun(s.max_model_len, 0, None, max(1, s.block_size))


def layout_bounds(roof, work: Workload, held, lay, *, e: int, link_bytes_per_s: int | None,
                  gpu) -> tuple[float, float, float]:
    """(TTFT of the batch's prefill, TTFT of one request's, TPOT of the batch's decode) of ``work`` on a TP x PP
    layout: each GPU's share (``gpu_step_s``: FLOPs / tp, the bytes ``held`` moves, ``Runtime.held_layout``) plus the
    ring collectives between the ranks (kvplan.cost.comm; KvplanError where the GPU states no link); on a pipeline
    whose runtime keeps micro-batches in flight, TPOT is their token period (``pipelined_decode_s``, the micro-batches'
    rooflines on ``gpu``). ``roof``: the model's roofline of ``work`` (its FLOPs and peaks)."""
    card, engine, batch, prompt = work.card, work.engine, work.batch, work.prompt_len
    kw = dict(e=e, link_bytes_per_s=link_bytes_per_s, logit_rows=1)
    run = CacheRun(work.seq_len, work.encoder_len, work.max_cache_len, work.block_size)
    pre_run = CacheRun(prompt, work.encoder_len, work.max_cache_len, work.block_size)
    ttft = (gpu_step_s(roof, roof.prefill.flops, path_traffic(held, engine, pre_run, batch, decode=False), lay.tp)
            + comm_time_s(card, lay, batch=batch, new_tokens=prompt, **kw))
    one = (gpu_step_s(roof, _one_request_flops(card, prompt, engine), path_traffic(held, engine, pre_run, 1,
                                                                                   decode=False), lay.tp)
           + comm_time_s(card, lay, batch=1, new_tokens=prompt, **kw))
    tpot = (gpu_step_s(roof, roof.decode_step.flops, path_traffic(held, engine, run, batch, decode=True), lay.tp)
            + comm_time_s(card, lay, batch=batch, new_tokens=1, **kw))
    micro = micro_batches(engine, lay.pp, batch)
    if micro > 1:
        def roof_of(b):
            return roofline(replace(work, batch=b), gpu, memory_needed_bytes=0)

        tpot = min(tpot, pipelined_decode_s(card, roof_of, held, engine, run, lay, batch, micro, kw)[0])
    return ttft, one, tpot


def gpu_times(roof, flops: int, traffic: StepTraffic, tp: int) -> tuple[float, float]:
    """(compute, memory) seconds of one GPU's share of a step: FLOPs / tp / peak and the bytes it moves / bandwidth,
    at the peak of the dtype ``roof`` computes in and its mfu / mbu."""
    return (flops / tp / (roof.peak_flops_per_s * roof.mfu),
            traffic.total_bytes / (roof.memory_bandwidth_bytes_per_s * roof.mbu))


def gpu_step_s(roof, flops: int, traffic: StepTraffic, tp: int) -> float:
    """One GPU's share of a step (Williams et al., "Roofline", CACM 2009): the larger of ``gpu_times``."""
    return max(gpu_times(roof, flops, traffic, tp))


def step_phases(s: Setup, sts: list[Stage], batch: int) -> tuple[tuple[str, int, StepTraffic, object, int, int], ...]:
    """("prefill" | "decode", the model's FLOPs, the bytes one GPU moves, the model's roofline, micro-batches,
    requests in the step) of a plan's prefill of ``batch`` requests of max_model_len tokens and of their decode at
    that length, on one GPU of each stage: the points a report's roofline draws, by the rules of ``latency``. The
    decode is the step the plan's TPOT is computed from (``decode_step``): on a pipeline that keeps micro-batches in
    flight, one micro-batch's step (the largest), whose bytes are the plan's decode_*_bytes."""
    L = s.max_model_len
    roof = _roofline(s.card, batch, L, L, s.gpu, s.engine, s.kv_t, s.w_t, max(1, s.block_size))
    held = s.engine.held_stages(s, sts)
    dec = decode_step(s, held, batch, L, comm_keywords(s))
    return (("prefill", roof.prefill.flops, gpu_traffic(s, held, batch, L, decode=False), roof, 1, batch),
            ("decode", dec.flops, dec.traffic, dec.roof, dec.micro, dec.size))


def gpu_traffic(s: Setup, held, batch: int, seq_len: int, *, decode: bool) -> StepTraffic:
    """Bytes one GPU of each stage moves in a decode step of ``batch`` sequences to ``seq_len`` tokens, or in their
    prefill of ``seq_len`` tokens (``held``: ``Runtime.held_stages``), summed over the stages."""
    return path_traffic(held, s.engine, CacheRun(seq_len, 0, None, max(1, s.block_size)), batch, decode=decode)


def speculative_step_s(s: Setup, roof, held, dec: StepTraffic, batch: int, prompt: int) -> float:
    """One speculative step of the replica's batch on one GPU: the target verifies k+1 tokens per request in one
    forward (compute (k+1) x the decode step's FLOPs / tp; memory: the GPU's decode bytes ``dec`` with the weights a
    batch of (k+1) x batch tokens touches, MoE experts included, and k more K/V writes), plus k drafting steps / tp
    (draft_model: its own decode roofline; EAGLE / MTP: ``features.draft_step_cost``; ngram and suffix: none on the
    GPU)."""
    from kvplan.cost.features import draft_step_cost

    spec, whole, tp = s.opts.speculative, roof.decode_step, s.layout.tp
    k, peak, bw = spec.k, whole.flops / whole.compute_time_s, whole.bytes_moved / whole.memory_time_s
    verify_weights = sum(h.read_bytes(batch * (k + 1)) for h, _ in held)
    verify = gpu_step_s(roof, (k + 1) * whole.flops, StepTraffic(verify_weights, dec.kv_read_bytes,
                                                                 (k + 1) * dec.kv_write_bytes), tp)
    if spec.draft_card is not None:
        draft = _roofline(spec.draft_card, batch, prompt, s.max_model_len, s.gpu, s.engine, s.kv_t, s.w_t,
                          max(1, s.block_size)).time_per_output_token_s
    elif spec.draft_layers:
        kv = whole.kv_read_bytes * spec.draft_layers // max(1, s.card.attention_layers)
        flops, nbytes = draft_step_cost(s.card, s.w_t, spec, batch, kv)
        draft = max(flops / peak, nbytes / bw)
    else:
        draft = 0.0
    return verify + k * draft / tp


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


@lru_cache(maxsize=256)
def _one_request_flops(card, prompt: int, engine, cached: int = 0) -> int:
    """The FLOPs of one request's prefill alone (the roofline's time_to_first_token_one_request_s); with ``cached``
    tokens of its prompt already in the cache, those of the rest attending them: every term but the LM head's one
    logits row is a sum over positions, so prefill(prompt) - prefill(cached) + that row."""
    basis = engine.flops_basis
    whole = prefill_flops(card, prompt_len=prompt, batch=1, engine=engine)
    if not cached:
        return whole.executed(basis)
    head = prefill_flops(card, prompt_len=cached, batch=1, engine=engine)
    return whole.executed(basis) - head.executed(basis) + head.lm_head


def _cached_prefix(s: Setup, prompt: int) -> int:
    """Prompt tokens a request finds in the cache with --shared-prefix-len: the prefix's whole blocks, never the
    whole prompt (the last token is computed for its logits)."""
    prefix = getattr(s.opts, "shared_prefix_len", 0) or 0
    block = max(1, s.block_size)
    return min(prefix // block * block, prompt - 1) if prefix else 0
