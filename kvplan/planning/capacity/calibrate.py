"""``kvplan plan --from-log FILE --calibrate``: the log's measured budget reused, so what-ifs on the user's own
deployment are exact where nothing measured changes, and say what is rescaled where something does.

vLLM sizes the pool as requested - weights - profile peak - non-torch growth (- CUDA graphs from 0.20)
(v1/worker/gpu_worker.py determine_available_memory). The log states the pool and, depending on the version, some of
those terms; calibration charges, through the plan's overrides (activation_memory, non_torch_memory,
cuda_graph_memory), exactly what the log measured beyond kvplan's weights: with no what-if the plan's pool is the
logged pool to the byte. SGLang's pool is free memory at start x mem_fraction_static less what the load took
(srt/model_executor/model_runner.py profile_max_num_token): both are logged, and are reused as they are.
"""

from __future__ import annotations

from pydantic import BaseModel

from kvplan.errors import KvplanError, Refused
from kvplan.planning.capacity.results import PlanResult
from kvplan.planning.capacity.logparse import GIB, Figure, ParsedLog
from kvplan.planning.capacity.verdicts import judge, value_of
from kvplan.planning.results import RESULT
from kvplan.units import fmt_bytes

# what-ifs calibration answers (a plan keyword each); anything else (model, engine version, GPU) changes what the
# log measured and is refused
WHAT_IFS = ("max_model_len", "kv_dtype", "gpu_memory_utilization", "mem_fraction_static", "max_num_seqs",
            "max_num_batched_tokens", "tp", "pp", "dp", "block_size", "expert_parallel")
# the log's lines a calibrated plan without what-ifs must give back, besides the pool
_REPRODUCED = ("blocks", "tokens", "concurrency")


class Calibration(BaseModel):
    """``--calibrate``: the plan with the log's measured overheads, and what was measured, kept or scaled."""

    model_config = RESULT
    what_ifs: dict[str, int | float | str | bool]  # the flags changed from the log's
    measured: list[str]  # figures taken from the log
    scaled: list[str]  # figures rescaled (or kept though a what-if changes them) for a what-if, and how
    notes: list[str] = []  # what the engine says of the what-if (a length past the model's positions)
    activation_bytes: int
    non_torch_bytes: int
    cuda_graph_bytes: int
    activation_measured: bool = True  # the log states its profile peak; False: kvplan's estimate stands in for it
    reproduces_log: bool  # no what-if, and the plan gives back the log: the pool (vLLM: to the byte), and its blocks,
    # tokens and concurrency lines (SGLang: its token count, within its free memory and load's rounding); a failed
    # start-up's budget: the refusal
    reproduction: str = ""  # how the plan without what-if compares with the log, in words ("" with what-ifs)
    refused: str | None = None  # the calibrated plan leaves no memory for the cache: why (a failed start-up's budget)
    plan: PlanResult | None  # None: refused


def summary_peak_holds_graphs(f: Figure | None, engine: str) -> bool:
    """Whether ``f``, a logged profile peak, is the start-up summary's and ``engine``'s release sums it with the
    charged CUDA-graph estimate (Runtime.peak_line_holds_graphs; vLLM 0.27+): --from-log then compares it with
    kvplan's peak + graphs, and --calibrate takes the estimate out of it."""
    from kvplan.cost.runtimes import get_engine

    return f is not None and f.name == "activation" and f.kind == "summary" and get_engine(
        engine).peak_line_holds_graphs()


def calibrated(log: ParsedLog, card, kw: dict, flat: PlanResult, pool_bytes: int | None, what_ifs: dict,
               modelled: bool = True, rows: list | None = None):
    from kvplan.planning.capacity import plan

    bad = sorted(set(what_ifs) - set(WHAT_IFS))
    if bad:
        raise KvplanError(f"--calibrate: {', '.join('--' + b.replace('_', '-') for b in bad)} changes what the log "
                          f"measured; calibration answers {', '.join('--' + w.replace('_', '-') for w in WHAT_IFS)}")
    ranks = lambda a: a.get("tp", 1) * a.get("pp", 1)  # noqa: E731 - GPUs one replica spans
    new = {**kw, **what_ifs}
    if (ranks(kw) == 1) != (ranks(new) == 1):
        raise KvplanError(f"--calibrate: the log ran on {ranks(kw)} GPU(s) per replica and the what-if on "
                          f"{ranks(new)}: non-torch memory measured without NCCL buffers (or with them) does not carry "
                          "over; plan it without --calibrate, or calibrate with a log of a multi-GPU run")
    if log.free_at_start_gib is not None and log.figure("load_usage") is not None:
        return _sglang(log, card, new, flat, what_ifs, rows or [])
    if pool_bytes is None:
        raise KvplanError(f"--calibrate: {log.path} states no memory left for the KV cache (Available KV cache "
                          "memory / the rest of the memory reserved for KV Cache): nothing to calibrate against")
    new = _resolved_again(card, kw, new, what_ifs, log)
    g = flat.per_gpu
    measured, scaled = [], []
    # everything non-KV the log measured beyond kvplan's weights: requested - kvplan's weights - the logged pool
    # (a failed start-up's negative pool is a measured budget too: what-ifs say what would have fit)
    residual = g.requested_bytes - g.weights_bytes - pool_bytes
    # the charged graph estimate where the log states it, else the capture (kvplan's estimate stands for both)
    cg_name = "cuda_graph" if log.figure("cuda_graph") else "cuda_graph_capture"
    act_f, cg_f = log.figure("activation"), log.figure(cg_name)
    graphs = cg_f.bytes if cg_f and g.cuda_graph_bytes else g.cuda_graph_bytes  # before 0.20: outside (0 charged)
    act = act_f.bytes if act_f else g.activation_bytes
    summed = summary_peak_holds_graphs(act_f, kw["engine"])
    if summed:  # vLLM 0.27+'s summary peak holds the charged graph estimate (VllmVersion.peak_line_holds_graph_estimate)
        act = max(0, act - graphs)
    peak = "the logged" if act_f else "kvplan's estimated"  # the peak's origin, as every line below names it
    exact = pool_bytes == log.exact_available_bytes
    measured.append(f"the pool: {fmt_bytes(pool_bytes)} "
                    f"({'logged to the byte: kv cache memory in use' if exact else _where(log, 'available')})")
    measured.append(f"profile peak {fmt_bytes(act)} ({_where(log, 'activation')}"
                    + (", less the CUDA-graph estimate the line includes" if summed else "") + ")" if act_f else
                    f"profile peak: not logged; kvplan's estimate {fmt_bytes(act)} is kept and the rest of the "
                    "measured budget goes to non-torch")
    if cg_f and g.cuda_graph_bytes:  # 0.20+: the graphs are inside the budget
        measured.append(f"CUDA graphs {fmt_bytes(graphs)} ({_where(log, cg_name)})")
    non_torch = residual - act - graphs
    w_f = log.figure("weights")
    w_delta = w_f.bytes - g.weights_bytes if w_f else 0
    if ranks(new) != ranks(kw) and w_delta:
        moved = w_delta * ranks(kw) // ranks(new) - w_delta
        non_torch += moved
        scaled.append(f"weights: kvplan's at TP {new.get('tp', 1)} x PP {new.get('pp', 1)}; the logged load's "
                      f"difference from kvplan's ({fmt_bytes(w_delta)} per GPU) spread over "
                      f"{ranks(new)} GPUs instead of {ranks(kw)}")
    if what_ifs:
        probe = plan(card, **new)
        est = probe.per_gpu.activation_bytes
        if est != g.activation_bytes:
            scaled.append(f"profile peak: {peak} {fmt_bytes(act)} moved by kvplan's estimate's change "
                          f"({fmt_bytes(g.activation_bytes)} -> {fmt_bytes(est)}: the dummy sampler over "
                          "max_num_seqs rows, the forward over max_num_batched_tokens)")
            act = max(0, act + est - g.activation_bytes)
        elif (probe.inputs.max_num_batched_tokens or 0) > (flat.inputs.max_num_batched_tokens or 0):
            scaled.append(f"profile peak: {peak} {fmt_bytes(act)} kept, though the profile's forward runs over "
                          f"{probe.inputs.max_num_batched_tokens:,} tokens instead of "
                          f"{flat.inputs.max_num_batched_tokens:,} (max_num_batched_tokens follows max_model_len "
                          "without chunked prefill) and kvplan's estimate for this release does not grow with it: "
                          "the peak may be larger and the pool smaller than shown")
        if graphs and ("max_num_seqs" in what_ifs or "tp" in what_ifs):
            scaled.append("CUDA graphs: kept as measured although the capture sizes (max_num_seqs) or shards changed")
    if what_ifs and not modelled:
        scaled.append(f"the log's release ({log.version or 'not printed'}) is not one kvplan models: a what-if is "
                      "scaled by the rules of the range used, and a rule that differs in that release (V0 profiles "
                      "max_model_len tokens, so its peak grows with --max-model-len) is not followed")
    if non_torch < 0:  # kvplan's weights (or its peak estimate) above what the log spent: the peak takes the rest
        act, non_torch = act + non_torch, 0
        if not act_f:
            measured[1] = (f"profile peak: not logged; kvplan's estimate exceeds what the log spent outside the pool "
                           f"beyond the weights{' and graphs' if graphs else ''}, so the peak is taken as all of it: "
                           f"{fmt_bytes(act)}")
        if act < 0:
            raise KvplanError(f"--calibrate: kvplan's weights exceed everything {log.path} spent outside the pool; "
                              "the log and kvplan's model of it disagree too much to calibrate")
    measured.append(f"non-torch + the load beyond kvplan's weights + the rounding of the printed figures: "
                    f"{fmt_bytes(non_torch)} (requested {fmt_bytes(g.requested_bytes)} - kvplan's weights "
                    f"{fmt_bytes(g.weights_bytes)} - pool - peak - graphs)")
    p, refused = _planned(card, {**new, "activation_memory": act, "non_torch_memory": non_torch,
                                 "cuda_graph_memory": graphs}, act_f, log)
    out = Calibration(what_ifs=what_ifs, measured=measured, scaled=scaled, notes=_notes(p), activation_bytes=act,
                      non_torch_bytes=non_torch, cuda_graph_bytes=graphs, activation_measured=act_f is not None,
                      reproduces_log=False, refused=refused, plan=p)
    if what_ifs:
        return out
    if p is None:
        ok, how = pool_bytes <= 0, (f"the engine's refusal is reproduced: the measured budget leaves "
                                    f"{fmt_bytes(pool_bytes)} for the cache ({_where(log, 'available')})")
    else:
        pool_ok = p.kv_cache.available_bytes == pool_bytes
        off = ([] if pool_ok else [f"the pool {p.kv_cache.available_bytes:,} B against {pool_bytes:,} B "
                                   "logged"]) + _differs(p, rows or [])
        ok = not off
        how = (f"the calibrated plan reproduces the log: the pool {'to the byte' if exact else 'as logged'}"
               + "".join(f", its {f.replace('concurrency', 'maximum concurrency')}" for f in _stated(rows or []))
               if ok else "the calibrated plan differs from the log: " + "; ".join(off))
    return out.model_copy(update=dict(reproduces_log=ok, reproduction=how))


def _resolved_again(card, kw: dict, new: dict, what_ifs: dict, log: ParsedLog) -> dict:
    """``new`` without max_num_batched_tokens where the log's is the engine's own resolution (its "Chunked prefill
    is enabled with max_num_batched_tokens=N" line, kvplan's default at the log's length) and a what-if changes
    what it was resolved from: kvplan resolves it again, as the engine would (V0 at a length below 32K: no chunked
    prefill, the forward over max_model_len tokens)."""
    from kvplan.planning.capacity import plan

    key = "max_num_batched_tokens"
    if key in what_ifs or key not in kw or log.flag_sources.get(key) != "Chunked prefill line":
        return new
    if set(what_ifs) & {"max_model_len", "max_num_seqs"} and plan(card, **{k: v for k, v in kw.items()
                                                                          if k != key}).inputs.max_num_batched_tokens \
            == kw[key]:
        return {k: v for k, v in new.items() if k != key}
    return new


def _planned(card, args: dict, act_f, log: ParsedLog) -> tuple[PlanResult | None, str | None]:
    """The calibrated plan (None and why, where its budget leaves nothing for the cache), its peak said to be the
    log's or kvplan's estimate (the plan sees it as given: --activation-memory)."""
    from kvplan.planning.capacity import plan

    try:
        p = plan(card, **args)
    except Refused as exc:
        return None, str(exc)
    rule = (f"measured: the log's profile peak ({_where(log, 'activation')}), kept by --calibrate" if act_f else
            "ESTIMATED: kvplan's estimate (the log states no profile peak), kept by --calibrate")
    per_gpu = p.per_gpu.model_copy(update=dict(activation_estimated=act_f is None, activation_rule=rule))
    return p.model_copy(update=dict(per_gpu=per_gpu)), None


def _notes(p: PlanResult | None) -> list[str]:
    """The plan's notes on the what-if itself: a length past the model's positions, which the engine refuses."""
    return [] if p is None else [n for n in p.notes if n.startswith("--max-model-len ") and "max_position" in n]


def _stated(rows: list) -> list[str]:
    return [r.figure for r in rows if r.figure in _REPRODUCED]


def _differs(p: PlanResult, rows: list) -> list[str]:
    """The log's blocks, tokens and concurrency lines the calibrated plan does not give back (within the rounding
    of the logged pool, as the logged-pool column judges them)."""
    out = []
    for r in rows:
        if r.figure not in _REPRODUCED:
            continue
        ours = value_of(r.figure, p)
        if judge(r.logged, ours, r.pool_low, r.pool_high)[0] not in ("exact", "within rounding"):
            out.append(f"{r.what} {ours:,.{2 if r.figure == 'concurrency' else 0}f} against {r.logged.text} logged "
                       f"(line {r.logged.line})")
    return out


def _sglang(log: ParsedLog, card, new: dict, flat: PlanResult, what_ifs: dict, rows: list) -> Calibration:
    from kvplan.planning.capacity import plan

    if {"tp", "pp"} & set(what_ifs):
        raise KvplanError("--calibrate: SGLang's free memory and load usage are measured at the log's layout; a "
                          "TP/PP what-if changes both: plan it without --calibrate")
    usage = log.figure("load_usage").bytes
    beyond = usage - flat.per_gpu.weights_bytes
    if beyond < 0:
        raise KvplanError(f"--calibrate: kvplan's weights exceed the load usage {log.path} logs; cannot calibrate")
    start = log.free_at_start_gib.bytes
    # the default fraction is the GPU's (its nvidia-smi total), not one of the free memory handed over as the total
    mfs = new.get("mem_fraction_static") or flat.inputs.mem_fraction_static
    p = plan(card, **{**new, "gpu_memory": start, "context_memory": 0, "non_torch_memory": beyond,
                      "mem_fraction_static": mfs})
    measured = [f"free memory at start {fmt_bytes(start)} (line {log.free_at_start_gib.line}: the pool's base)",
                f"load usage {fmt_bytes(usage)} ({_where(log, 'load_usage')}): kvplan's weights + "
                f"{fmt_bytes(beyond)} the load allocated beyond them"]
    out = Calibration(what_ifs=what_ifs, measured=measured, scaled=[], notes=_notes(p), activation_bytes=0,
                      non_torch_bytes=beyond, cuda_graph_bytes=0, reproduces_log=False, plan=p)
    tokens = log.figure("tokens")
    if what_ifs or tokens is None:
        return out
    # free memory and usage are printed to 0.01 GB each: the pool they give is good to their sum, so the token count
    # to that many bytes' worth of tokens (and the one token a page boundary can add)
    spread = round((log.free_at_start_gib.rounding + log.figure("load_usage").rounding) * GIB)
    slack = -(-spread // max(1, p.per_gpu.kv_bytes_per_token)) + 1
    ok = abs(p.kv_cache.tokens - tokens.value) <= slack
    how = (f"the calibrated plan reproduces the log's token count ({p.kv_cache.tokens:,} against {tokens.text}, line "
           f"{tokens.line}) within the rounding of its free memory and load usage ({slack:,} tokens)" if ok else
           f"the calibrated plan differs from the log: tokens {p.kv_cache.tokens:,} against {tokens.text} logged (line "
           f"{tokens.line}), beyond the rounding of its free memory and load usage ({slack:,} tokens)")
    return out.model_copy(update=dict(reproduces_log=ok, reproduction=how))


def _where(log: ParsedLog, name: str) -> str:
    f = log.figure(name)
    return f"logged {f.text} GiB, line {f.line}" if f else "not logged"
