"""``kvplan compare``: the same model under several K/V-head layouts (MHA, GQA, MQA), side by side.

One row per layout, the card's own first: KV bytes per token and for batch x seq_len, bytes one decode step moves,
attention FLOPs of that step (the same for every layout: query heads and head_dim do not change), the parameter
change of the K/V projections and, on a GPU, each layout's capacity plan (``kvplan.planning.capacity.plan`` on ``tp``
GPUs, the same figure ``kvplan plan`` and ``kvplan report`` give): the most requests of ``seq_len`` tokens its KV
pool holds and the latency bounds at ``batch`` (each GPU's FLOPs / tp and its own rank's bytes, plus the TP
all-reduce).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from kvplan.cost.runtimes import get_engine
from kvplan.cost.flops import decode_step_flops
from kvplan.cost.hardware import GPU, load_gpu
from kvplan.cost.traffic import decode_traffic
from kvplan.errors import KvplanError
from kvplan.units import require_positive
from kvplan.model.card import ModelCard
from kvplan.model.catalog import load_card
from kvplan.cost.params import count_params
from kvplan.model.layouts import with_layout
from kvplan.planning.estimate import estimate, resolve

_RESULT = ConfigDict(frozen=True, extra="forbid")
MLA_SUMMARY = (" MLA (mla:R) caches one latent of rank R plus a shared rope key per token instead of per-head K/V: "
               "the smallest cache for its quality class, paid for with up-projection weights and, in decode, "
               "attention over the wider latent (DeepSeek-V2, arXiv:2405.04434).")
SUMMARY = ("Grouping K/V heads (MHA -> GQA -> MQA) shrinks the KV cache and the bytes each decode step reads, so "
           "more sequences fit next to the weights and decode runs faster while it is memory-bound. It costs K/V "
           "parameters (less attention capacity) and can cost quality unless the model is trained or uptrained "
           "that way; attention FLOPs do not change, because every query head still scores every cached token.")


class LayoutRow(BaseModel):
    model_config = _RESULT
    layout: str  # "card" for the card's own layout, else the --attention spec (mha, gqa:8, mqa)
    attention: str  # e.g. "GQA (8 KV heads, 8 query heads per KV head)"
    num_kv_heads: int | None  # None for MLA
    kv_bytes_per_token: int
    kv_total_bytes: int  # batch x seq_len
    decode_bytes_per_step: int  # weights + attended KV read + new K/V written
    decode_attention_flops: int  # QK^T + AV of one decode step (causal), whole batch
    params: int
    params_delta_vs_card: int  # from the K/V projections
    max_batch: int | None  # sequences of seq_len the plan's KV pool holds on `tp` GPUs (0: none; None: no GPU)
    time_per_output_token_s: float | None  # lower bound at `batch` (kvplan plan's latency); None when nothing fits
    time_to_first_token_s: float | None  # lower bound of one request's prefill; None when nothing fits


class CompareResult(BaseModel):
    model_config = _RESULT
    model: str
    gpu: str | None
    tp: int  # GPUs of `gpu` each layout is planned on (tensor parallel)
    engine: str
    batch: int
    seq_len: int
    kv_dtype: str
    weight_dtype: str
    rows: list[LayoutRow]
    summary: str
    notes: list[str]

    def _repr_html_(self) -> str:
        """A notebook shows the comparison as a table (stdlib HTML, kvplan.planning.htmlrepr)."""
        from kvplan.planning.htmlrepr import compare_html

        return compare_html(self)


def compare(model: ModelCard | str, *, attention: str | list[str], seq_len: int = 4096, batch: int = 1,
            gpu: str | GPU | None = None, engine: str = "ideal", kv_dtype: str | None = None,
            weight_dtype: str | None = None, gpu_file: str | None = None, **plan_kw) -> CompareResult:
    """Compare the card's own layout with each layout in ``attention`` ("mha,gqa:8,mqa" or a list); on ``gpu``,
    each one planned on ``tp`` GPUs (a keyword of ``plan_kw``, default 1; its others: the plan's keywords, pp, dp,
    gpu_memory_utilization ..., which ``kvplan report`` passes; ``enable_prefix_caching`` (vLLM only), which each row's
    estimate takes too, as ``estimate`` does: its check refuses it elsewhere, and it needs no --gpu)."""
    tp = plan_kw.pop("tp", 1)
    enable_prefix_caching = plan_kw.pop("enable_prefix_caching", None)
    require_positive("--tp", tp, maximum=1024)
    if tp > 1 and gpu is None:
        raise KvplanError("--tp: plans the layouts on tp GPUs of --gpu NAME; give --gpu")
    card = model if isinstance(model, ModelCard) else load_card(model)
    if isinstance(attention, str):
        attention = attention.split(",")
    if not isinstance(attention, (list, tuple)) or not all(isinstance(s, str) for s in attention):
        raise KvplanError("--attention: give layouts as a comma-separated string or a list of strings, e.g. "
                          "mha,gqa:8,mqa")
    specs = [s.strip() for s in attention if s.strip()]
    if not specs:
        raise KvplanError("--attention: give one or more layouts, e.g. mha,gqa:8,mqa")
    if get_engine(engine).static:
        from kvplan.cost.runtimes import dynamic_names

        raise KvplanError(f"--engine: {engine}: compare and report take engines without a preallocated static cache; "
                          f"allowed: {', '.join(dynamic_names())}; {engine} sizes its cache by --max-cache-len: use "
                          "kvplan estimate for it")
    dev = gpu if isinstance(gpu, GPU) or gpu is None else load_gpu(gpu, gpu_file)
    variants = [("card", card)] + [(s, with_layout(card, attention=s)) for s in specs]
    base_params = count_params(card).total
    opts = dict(seq_len=seq_len, batch=batch, engine=engine, kv_dtype=kv_dtype, weight_dtype=weight_dtype)
    if plan_kw and dev is None:
        raise KvplanError(f"--{sorted(plan_kw)[0].replace('_', '-')}: plans the layouts on --gpu NAME; give --gpu")
    # the KV columns on a catalog GPU: its block and state pages, as plan's (vLLM's MLA block, 0.33's GDN checkpoints)
    on = dict(gpu=gpu, gpu_file=gpu_file) if isinstance(gpu, str) else {}
    if enable_prefix_caching is not None:  # estimate's own check (check_prefix_caching) refuses it by name elsewhere
        on = dict(on, enable_prefix_caching=enable_prefix_caching)
        plan_kw = dict(plan_kw, enable_prefix_caching=enable_prefix_caching)
    rows = [_row(label, v, base_params, dev, tp, opts, plan_kw, on) for label, v in variants]
    first = estimate(card, **opts, enable_prefix_caching=enable_prefix_caching)
    return CompareResult(model=card.name, gpu=dev.name if dev else None, tp=tp, engine=engine, batch=batch,
                         seq_len=seq_len, kv_dtype=first.kv_cache.dtype, weight_dtype=first.weights.dtype,
                         rows=rows, summary=SUMMARY + (MLA_SUMMARY if any(r.num_kv_heads is None for r in rows) else ""),
                         notes=_notes(dev, tp, any(r.num_kv_heads is None for r in rows)))


def _row(label: str, card: ModelCard, base_params: int, dev: GPU | None, tp: int, opts: dict,
         plan_kw: dict | None = None, on: dict | None = None) -> LayoutRow:
    est = estimate(card, **opts, **(on or {}))
    # the decode column at the block the cache column resolved (vLLM's on --gpu: MLA's by release), the same run;
    # its K/V read does not depend on it (the paged kernels read the attended tokens: traffic._decode_positions)
    r = resolve(card, encoder_len=None, max_cache_len=None, block_size=est.inputs.block_size or 16, **opts)
    traffic = decode_traffic(card, r.w_t, r.kv_t, r.engine, r.run, r.batch)
    flops = decode_step_flops(card, batch=r.batch, cache_len=r.run.seq_len - 1, engine=r.engine)
    fit, tpot, ttft = planned(card, dev, tp, opts, plan_kw) if dev is not None else (None, None, None)
    return LayoutRow(
        layout=label, attention=card.attention_label, num_kv_heads=None if card.mla else card.num_kv_heads,
        kv_bytes_per_token=est.kv_cache.bytes_per_token, kv_total_bytes=est.kv_cache.total_bytes,
        decode_bytes_per_step=traffic.total_bytes, decode_attention_flops=flops.causal_attention_core,
        params=est.weights.params, params_delta_vs_card=est.weights.params - base_params,
        max_batch=fit, time_per_output_token_s=tpot, time_to_first_token_s=ttft)


def planned(card: ModelCard, dev: GPU, tp: int, opts: dict,
            plan_kw: dict | None = None) -> tuple[int, float | None, float | None]:
    """(requests of seq_len the engine's plan on ``tp`` GPUs holds, TPOT and TTFT bounds at ``batch``): 0 and no
    latency where the plan holds none or the engine refuses the layout (the weights leave no room, the heads do not
    divide)."""
    from kvplan.planning.capacity import plan

    if not card.has_kv_cache:
        return 0, None, None
    try:
        p = plan(card, gpu=dev, tp=tp, max_model_len=opts["seq_len"], engine=opts["engine"],
                 kv_dtype=opts["kv_dtype"], weight_dtype=opts["weight_dtype"], concurrency=opts["batch"],
                 **(plan_kw or {}))
    except KvplanError:
        return 0, None, None
    fit = int(p.max_concurrency) if p.fits else 0
    if not fit or p.latency is None:
        return 0, None, None
    return fit, p.latency.tpot_ms / 1e3, p.latency.ttft_ms / 1e3


def _notes(dev: GPU | None, tp: int, mla: bool) -> list[str]:
    notes = ["Decode attention FLOPs are identical across MHA/GQA/MQA layouts: they share K/V heads, but each query "
             "head still computes its own scores and output."]
    if mla:
        notes.append("MLA rows decode with absorbed weights (vLLM's MLA decode path): each query head scores the "
                     "kv_lora_rank + rope latent, so attention FLOPs grow with the rank while the cache shrinks.")
    if dev is not None:
        where = dev.name if tp == 1 else f"{tp}x {dev.name} (TP {tp})"
        notes.append(f"max_batch: requests of seq_len the engine's KV pool holds on {where} (kvplan plan: the "
                     "weights, and for a serving engine its activation peak and overheads, subtracted).")
        notes.append("time_per_output_token_s / time_to_first_token_s: kvplan plan's lower bounds at the given batch "
                     "(max(FLOPs / tp / peak, one GPU's own bytes / bandwidth) at mfu = mbu = 1, plus the TP "
                     "all-reduce).")
    return notes
