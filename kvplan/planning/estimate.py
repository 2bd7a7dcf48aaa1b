"""``kvplan.estimate``: KV cache and weight memory of a model, as a typed, JSON-ready result.

>>> from kvplan import estimate
>>> r = estimate("llama-2-7b", batch=16, seq_len=4096)
>>> r.kv_cache.bytes_per_token, r.kv_cache.total_bytes
(524288, 34359738368)
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from kvplan.cost.engines import IDEAL_RULES, CacheRun, Engine
from kvplan.cost.runtimes import get_engine
from kvplan.cost.runtimes.base import Runtime
from kvplan.cost.flops import FlopsBreakdown, StepFlops, step_breakdowns
from kvplan.cost.kvspec import KVLayerSpec, has_full_layer, kv_bytes_per_token, layer_spec_counts, layer_specs
from kvplan.cost.params import count_params
from kvplan.errors import KvplanError, clip_text
from kvplan.model.card import ModelCard
from kvplan.model.catalog import checkpoint_of, load_card
from kvplan.model.dtypes import DType, parse_dtype
from kvplan.model.layouts import with_layout
from kvplan.planning.notes import engine_notes, input_notes
from kvplan.planning.results import (CheckpointCheck, Estimate, EstimateInputs, KVCacheResult, KVGroup,
                                     ModelSummary, QuantizedWeights, WeightsResult)
from kvplan.units import MAX_BLOCK_TOKENS, fmt_bytes, require_positive, require_text

if TYPE_CHECKING:
    from kvplan.cost.llamacpp import LlamaFlags


@dataclass(frozen=True)
class Resolved:
    """An estimate's inputs after defaults and checks: the card to size, its engine, dtypes and lengths."""

    card: ModelCard
    engine: Engine
    kv_t: DType
    w_t: DType
    run: CacheRun
    batch: int
    notes: tuple[str, ...]


@dataclass(frozen=True)
class EstimateRequest:
    """What ``kvplan estimate`` is asked, validated once on construction (``build``): sizes positive, names one
    printable line; what depends on the card (the engine's dtypes, the encoder length) is resolved with it
    (``resolve``). The CLI and the keyword API build it; ``estimate_request(card, request)`` answers it."""

    seq_len: int
    batch: int = 1
    encoder_len: int | None = None
    kv_dtype: str | None = None
    weight_dtype: str | None = None
    engine: str = "ideal"
    max_cache_len: int | None = None
    block_size: int | None = None  # None: the engine's on --gpu (vLLM's MLA: 64 on Hopper), else 16
    kv_heads: int | None = None
    attention: str | None = None
    prompt_len: int | None = None
    gpu: str | None = None
    gpu_file: str | None = None
    mfu: float | None = None
    mbu: float | None = None
    llama: LlamaFlags | None = None
    # vLLM --enable-prefix-caching (True) / --no-enable-prefix-caching (False); None: the release's default. On a
    # hybrid it sets the Mamba cache mode, so the state pages a request holds, as plan takes it
    enable_prefix_caching: bool | None = None
    # False: every layer by itself, without the runtime's KV cache groups (vLLM's unified pages and padding slots);
    # kvplan verify's reference cache pages layer by layer
    engine_groups: bool = True

    @classmethod
    def build(cls, **kw) -> EstimateRequest:
        req = cls(**kw)
        for flag, text in (("--kv-dtype", req.kv_dtype), ("--weight-dtype", req.weight_dtype),
                           ("--attention", req.attention), ("--gpu", req.gpu), ("--gpu-file", req.gpu_file)):
            require_text(flag, text)
        require_positive("--batch", req.batch)
        require_positive("--seq-len", req.seq_len)
        for flag, value in (("--kv-heads", req.kv_heads), ("--max-cache-len", req.max_cache_len)):
            if value is not None:
                require_positive(flag, value)
        if req.block_size is not None:
            require_positive("--block-size", req.block_size, maximum=MAX_BLOCK_TOKENS)
        require_prefix_flag(req.enable_prefix_caching)
        return req


def require_prefix_flag(value) -> None:
    """--enable-prefix-caching given to the Python API: True, False or None (the release's default)."""
    if not isinstance(value, (bool, type(None))):
        raise KvplanError(f"--enable-prefix-caching: {clip_text(repr(value), 60)}; allowed: True, False or None")


def estimate(model: ModelCard | str | Path, *, batch: int = 1, seq_len: int, encoder_len: int | None = None,
             kv_dtype: str | None = None, weight_dtype: str | None = None, engine: str = "ideal",
             max_cache_len: int | None = None, block_size: int | None = None, kv_heads: int | None = None,
             attention: str | None = None, prompt_len: int | None = None, gpu: str | None = None,
             gpu_file: str | None = None, mfu: float | None = None, mbu: float | None = None,
             llama: LlamaFlags | None = None, engine_groups: bool = True,
             enable_prefix_caching: bool | None = None) -> Estimate:
    """Estimate KV cache and weight bytes of ``model`` (a card, a bundled name, a card path or a Hub id ORG/NAME).

    ``seq_len`` is the tokens each of ``batch`` sequences holds; ``encoder_len`` the encoder tokens that
    cross-attention caches (encoder-decoder models). Dtypes default to what the engine serves the checkpoint in.
    ``engine_groups`` False: every layer by itself, without vLLM's KV cache groups (unified pages, padding slots).
    ``prompt_len`` (default ``seq_len``) sizes the prefill FLOPs; ``gpu`` adds roofline bounds.
    ``enable_prefix_caching`` (vLLM only): --enable-prefix-caching / --no-enable-prefix-caching, a hybrid's state
    pages as ``plan`` takes them. Raises KvplanError on bad input.
    """
    req = EstimateRequest.build(
        batch=batch, seq_len=seq_len, encoder_len=encoder_len, kv_dtype=kv_dtype, weight_dtype=weight_dtype,
        engine=engine, max_cache_len=max_cache_len, block_size=block_size, kv_heads=kv_heads, attention=attention,
        prompt_len=prompt_len, gpu=gpu, gpu_file=gpu_file, mfu=mfu, mbu=mbu, llama=llama, engine_groups=engine_groups,
        enable_prefix_caching=enable_prefix_caching)
    return estimate_request(model if isinstance(model, ModelCard) else load_card(model), req)


def estimate_request(base: ModelCard, q: EstimateRequest) -> Estimate:
    """The orchestrator: the card in the asked layout, the runtime's resolution, KV, weights, FLOPs, roofline."""
    card = with_layout(base, kv_heads=q.kv_heads, attention=q.attention)
    dev = _gpu(q)  # --gpu, read once
    q = q if q.block_size is not None else replace(q, block_size=block_on(get_engine(q.engine), card, dev, q.kv_dtype))
    kv_dtype, llama = get_engine(q.engine).cache_type_flags(q.kv_dtype, q.llama)  # llama.cpp: -ctk/-ctv
    q = replace(q, kv_dtype=kv_dtype, llama=llama)
    r = resolve(card, batch=q.batch, seq_len=q.seq_len, encoder_len=q.encoder_len, kv_dtype=q.kv_dtype,
                weight_dtype=q.weight_dtype, engine=q.engine, max_cache_len=q.max_cache_len, block_size=q.block_size)
    prompt = q.seq_len if q.prompt_len is None else q.prompt_len
    _check_compute_flags(card, prompt, q.seq_len, gpu=q.gpu, gpu_file=q.gpu_file, mfu=q.mfu, mbu=q.mbu)
    inputs = EstimateInputs.model_construct(model=card.name, batch=q.batch, seq_len=q.seq_len, encoder_len=q.encoder_len,
                            kv_dtype=r.kv_t.name, weight_dtype=r.w_t.name, engine=r.engine.name,
                            max_cache_len=r.run.max_cache_len,
                            block_size=q.block_size if r.engine.takes_estimate_block else None,
                            kv_heads=q.kv_heads,
                            attention=q.attention, prompt_len=prompt, gpu=q.gpu,
                            enable_prefix_caching=q.enable_prefix_caching)
    check_prefix_caching(r, q.enable_prefix_caching)
    kv = kv_cache(r, q.engine_groups, dev, q.enable_prefix_caching)
    weights = _with_checkpoint(served_weights(card, r, dev), base)
    notes = list(r.notes) + engine_notes(kv, q.batch)
    if weights.fp32_params:
        from kvplan.cost.fp32 import fp32_note  # only for a model the runtime keeps partly in float32

        notes.append(fp32_note(card, r.w_t, weights.fp32_params))
    steps = _flops(r, prompt, notes)  # the roofline reuses them: computed once
    flops = None if steps is None else StepFlops.model_construct(prefill=steps[0].result(), decode_step=steps[1].result())
    if q.llama is not None:  # llama.cpp's flags: refused by every runtime but llama.cpp's
        from kvplan.cost.runtimes.setup import ServingFlags

        r.engine.refuse_flags(ServingFlags(llama=q.llama))
    lcpp = r.engine.estimate_memory(card, r.w_t.bits, q.seq_len, q.batch, q.llama)
    if lcpp is not None:  # the KV rows are the cache llama-server allocates (its caches block), not a second count
        table = kv
        kv = llama_kv(kv, lcpp)
        if kv.total_bytes != table.total_bytes:  # -c/-np/-ctk/-ctv, unified SWA, MLA: the rows say whose they are
            c = lcpp.context
            notes.append(f"The KV rows above are llama.cpp's cache for these flags ({fmt_bytes(kv.total_bytes)}, "
                         f"{kv.total_bytes:,} B): n_ctx {c.n_ctx:,} cells, {c.n_ctx_seq:,} per slot, {c.n_seq_max} "
                         f"slot(s){', one unified cache' if c.kv_unified else ''}, K/V {kv.dtype} (the "
                         f"{' and '.join(dict.fromkeys(x.log_name for x in lcpp.caches))} "
                         f"lines below). The engine line's rule for --batch {q.batch} x --seq-len {q.seq_len:,} at "
                         f"{r.kv_t.name}, a stream per sequence, gives {fmt_bytes(table.total_bytes)} "
                         f"({table.total_bytes:,} B).")
        notes += [n for n in lcpp.notes if n not in notes] + lcpp.log_lines()  # its own (placement, MLA, -ts) first
    roof = None if dev is None else _roofline(r, q, dev, prompt, steps, kv.total_bytes + weights.bytes)
    return Estimate.model_construct(inputs=inputs, model=summarize(card, base), kv_cache=kv, weights=weights,
                    total_bytes=kv.total_bytes + weights.bytes, flops=flops, roofline=roof, notes=notes,
                    llamacpp=lcpp)


def check_prefix_caching(r: Resolved, enabled: bool | None) -> None:
    """--enable-prefix-caching / --no-enable-prefix-caching: refused by name where the engine lacks it (plan's
    refusal, Runtime.refuse_flags), and where the runtime does not model it for the card (vLLM: a hybrid before 0.20,
    an attention-free state model: ``check_prefix_caching``), as plan refuses them. ``sweep`` and ``compare``
    take the flag through this check too."""
    if enabled is None:
        return
    from kvplan.cost.runtimes.setup import EXTRA_FLAGS, ServingFlags

    refuse = getattr(r.engine, "refuse_flags", None)  # bare cache rules (ideal, hf-*) are no runtime: none take it
    if refuse is None:
        flag, owner = EXTRA_FLAGS["enable_prefix_caching"]
        raise KvplanError(f"{flag}: only for --engine {owner} (got --engine {r.engine.name})")
    refuse(ServingFlags(enable_prefix_caching=enabled))
    check = getattr(r.engine, "check_prefix_caching", None)
    if check is not None:
        check(r.card, enabled)


def check_block_flag(q: EstimateRequest) -> None:
    """``estimate --block-size`` where the engine's estimate has no use for it: refused by name (plan takes each
    engine's own block or page: SGLang's page size, TensorRT-LLM's tokens_per_block). The CLI asks; the keyword
    API, whose callers pass one block for every engine (report, verify), echoes None there instead."""
    check_engine_block(q.engine, q.block_size)


def check_engine_block(engine: str, block_size: int | None) -> None:
    """--block-size for an estimate's KV sizes on ``engine`` (estimate, a sweep without plan columns, verify):
    checked against the release's choices where the engine's estimate rounds to it, refused by name where it does
    not (it would change nothing)."""
    eng = get_engine(engine)
    if block_size is not None and eng.takes_estimate_block:
        check = getattr(eng, "check_block_choice", None)  # a release's --block-size choices
        if check is not None:
            check(block_size)
    if block_size is None or eng.takes_estimate_block:
        return
    from kvplan.cost.runtimes import names

    takes = [name for name in names() if get_engine(name).takes_estimate_block]
    raise KvplanError(f"--block-size: the block of a paged cache whose estimate rounds to it; only for --engine "
                      f"{' or '.join(takes)} (got --engine {engine}, whose estimate holds positions in pages of its "
                      f"own or none; `kvplan plan --block-size` and a sweep's plan columns (--tp/--pp/"
                      f"--max-model-len) take SGLang's page size and TensorRT-LLM's tokens_per_block)")


def _gpu(q: EstimateRequest):
    """--gpu as a catalog GPU (its compute capability picks vLLM's MXFP4 backend), None without one."""
    if q.gpu is None:
        return None
    from kvplan.cost.hardware import load_gpu

    return load_gpu(q.gpu, q.gpu_file)


def default_block(engine: Engine, card: ModelCard, gpu: str | None, gpu_file: str | None,
                  kv_dtype: str | None = None) -> int:
    """``block_on`` the catalog GPU named ``gpu`` (or none)."""
    if gpu is None:
        return block_on(engine, card, None, kv_dtype)
    from kvplan.cost.hardware import load_gpu

    return block_on(engine, card, load_gpu(gpu, gpu_file), kv_dtype)


def block_on(engine: Engine, card: ModelCard, gpu, kv_dtype: str | None = None) -> int:
    """The block an estimate (or a sweep's KV columns) takes without --block-size: the runtime's on ``gpu`` (a
    catalog GPU) for ``kv_dtype`` (``block_size_on``: vLLM pages MLA in its backend's blocks, by release), else
    vLLM's default 16."""
    on = getattr(engine, "block_size_on", None) if gpu is not None else None  # a runtime's; bare rules choose none
    return (on(card, gpu, kv_dtype) if on else None) or 16


def _roofline(r: Resolved, q: EstimateRequest, dev, prompt: int, steps, memory_needed_bytes: int):
    """The roofline bounds on ``q.gpu`` (only with --gpu), reusing the step FLOPs already computed; the bytes the
    engine's GPU reads where it holds the model otherwise than the rows count it (``Runtime.estimate_held``)."""
    from kvplan.cost.roofline import Workload, roofline  # only with --gpu: a plain estimate imports no roofline code

    work = Workload(r.card, r.engine, r.kv_t, r.w_t, q.batch, prompt, q.seq_len, r.run.max_cache_len, q.block_size)
    held = getattr(r.engine, "estimate_held", None)  # a runtime's: llama.cpp reads its GGUF buffers
    return roofline(work, dev, memory_needed_bytes=memory_needed_bytes, mfu=q.mfu or 1.0,
                    mbu=q.mbu or 1.0, steps=steps,
                    held=held and held(r.card, r.w_t, q.seq_len, q.batch, q.llama))


def resolve(card: ModelCard, *, batch: int, seq_len: int, encoder_len: int | None, kv_dtype: str | None,
            weight_dtype: str | None, engine: str | Engine, max_cache_len: int | None,
            block_size: int) -> Resolved:
    """Check the sizes and flags against the card and the engine; resolve the dtypes the engine serves in."""
    require_positive("--batch", batch)
    require_positive("--seq-len", seq_len)
    require_positive("--block-size", block_size, maximum=MAX_BLOCK_TOKENS)
    _check_encoder(card, encoder_len)
    eng = get_engine(engine)
    check_release = getattr(eng, "check_release", None)  # a runtime's: a pinned release that cannot load the card
    if check_release is not None:
        check_release(card)
    notes = input_notes(card, seq_len)
    kv_t, kv_why = _dtype(card, eng, kv_dtype, "--kv-dtype")
    w_t, w_why = _dtype(card, eng, weight_dtype, "--weight-dtype")
    notes += [why for why in {kv_why, w_why} if why]
    kv_t = auto_kv(eng, kv_t, w_t, kv_dtype is not None, weight_dtype is not None)
    eng.check_dtype(kv_t)
    kv_t = eng.kv_layout(kv_t, card)
    notes += [n for n in (eng.kv_layout_note(kv_t),) if n]
    if max_cache_len is not None:
        require_positive("--max-cache-len", max_cache_len)
    mcl = eng.default_max_cache_len(seq_len) if max_cache_len is None else max_cache_len
    run = CacheRun(seq_len, encoder_len or 0, mcl, block_size)
    eng.check_run(run, has_full_layer(card))
    return Resolved(card, eng, kv_t, w_t, run, batch, tuple(notes + _dtype_notes(kv_t, w_t)))


def auto_kv(eng: Engine, kv_t: DType, w_t: DType, kv_given: bool, weight_given: bool) -> DType:
    """The K/V dtype without --kv-dtype where the runtime keeps K/V in the model's dtype (``kv_follows_model_dtype``:
    vLLM and SGLang's --kv-cache-dtype auto; vLLM 0.11.0 v1/worker/gpu_model_runner.py GPUModelRunner.__init__:
    kv_cache_dtype = model_config.dtype, 0.33.0 utils/torch_utils.py kv_cache_dtype_str_to_dtype: "auto" ->
    model_config.dtype; SGLang 0.5.10 model_runner.py ModelRunner.configure_kv_cache_dtype: "auto" -> self.dtype):
    the 16/32-bit dtype --weight-dtype sets (fp32 weights hold fp32 K/V); else ``kv_t``."""
    if (getattr(eng, "kv_follows_model_dtype", False) and not kv_given and weight_given and kv_t.bits >= 16
            and w_t.bits >= 16):
        return w_t
    return kv_t


def _dtype(card: ModelCard, eng: Engine, given: str | None, flag: str) -> tuple[DType, str | None]:
    if given is not None:
        t = parse_dtype(given, what=flag)
        if flag == "--weight-dtype" and card.quantization and t.bits < 16:
            raise KvplanError(f"--weight-dtype: {card.name} ships {card.quantization.label} weights, sized as the "
                              f"checkpoint stores them; allowed: fp32, fp16, bf16 (its unquantized tensors), or "
                              "leave it out")
        return t, None
    name, why = (eng.default_kv_dtype if flag == "--kv-dtype" else eng.default_dtype)(card.dtype)
    return parse_dtype(name), why


def _check_encoder(card: ModelCard, encoder_len: int | None) -> None:
    if card.architecture == "encoder-decoder":
        if encoder_len is None:
            raise KvplanError(f"--encoder-len: {card.name} is encoder-decoder; give the encoder tokens its "
                              "cross-attention caches (a positive integer)")
        require_positive("--encoder-len", encoder_len)
    elif encoder_len is not None:
        raise KvplanError(f"--encoder-len: only for encoder-decoder models; {card.name} is {card.architecture}")


def _check_compute_flags(card: ModelCard, prompt_len: int, seq_len: int, *, gpu: str | None, gpu_file: str | None,
                         mfu: float | None, mbu: float | None) -> None:
    require_positive("--prompt-len", prompt_len)
    if prompt_len > seq_len:
        raise KvplanError(f"--prompt-len: {prompt_len} exceeds --seq-len {seq_len} (the tokens a sequence holds "
                          "when its last token is decoded: prompt + generated)")
    if gpu is None:
        for flag, value in (("--gpu-file", gpu_file), ("--mfu", mfu), ("--mbu", mbu)):
            if value is not None:
                raise KvplanError(f"{flag}: only used with --gpu NAME (roofline bounds); `kvplan gpus list` shows "
                                  "the catalog")
        return
    from kvplan.cost.roofline import check_efficiency

    check_efficiency(1.0 if mfu is None else mfu, 1.0 if mbu is None else mbu)
    if card.architecture != "decoder-only":
        raise KvplanError(f"--gpu: roofline bounds are modelled for decoder-only models; {card.name} is "
                          f"{card.architecture}")


def _flops(r: Resolved, prompt_len: int, notes: list[str]) -> tuple[FlopsBreakdown, ...] | None:
    """FLOPs of the prefill and one decode step (decoder-only and encoder-decoder), as ``step_flops`` counts them."""
    if r.card.architecture == "encoder-only":
        notes.append("FLOPs and roofline bounds are modelled for decoder-only and encoder-decoder models; none are "
                     "reported here.")
        return None
    if r.card.shared_blocks:
        notes.append(f"FLOPs of the shared transformer blocks: each of the {r.card.attention_layers} hybrid layers "
                     "runs its block's attention (over the 2 x hidden [hidden; embeddings] input) and MLP, its own "
                     "Linear(hidden, hidden) and adapters, and attends its own K/V; the weights are read once per "
                     "step (kvplan.cost.shared).")
    if r.card.ssm:
        notes.append(f"FLOPs of the {r.card.state_layers} {r.card.ssm.kind} state layers (flops.*.state_mixer): their "
                     "projections, depthwise conv and scan contractions; elementwise state updates count 0, as "
                     "softmax does (kvplan.cost.ssm_flops).")
    return step_breakdowns(r.card, batch=r.batch, prompt_len=prompt_len, seq_len=r.run.seq_len, engine=r.engine,
                           max_cache_len=r.run.max_cache_len, encoder_len=r.run.encoder_len)


def kv_cache(r: Resolved, engine_groups: bool = True, gpu=None, prefix_caching: bool | None = None) -> KVCacheResult:
    """Sum the per-layer specs; group identical layers for the breakdown. Where the runtime pages layers in groups
    (vLLM V1: ``Runtime.cache_groups``), a sequence's bytes are the plan's fold over them (``fold_bytes``: the
    unified block, padded state pages, padding layer slots), the rows taken at that block and the padding a row of
    its own. ``prefix_caching``: vLLM's --enable-prefix-caching as given (a hybrid's state pages)."""
    fold = paged_groups(r.engine, r.card, r.kv_t, r.run.block_size, gpu, prefix_caching) if engine_groups else None
    if fold is not None:
        r = replace(r, run=replace(r.run, block_size=fold[0]))
    counts = layer_spec_counts(r.card, r.kv_t, r.engine)  # (spec, layers): equal layers once
    groups: dict[tuple, list] = {}  # (kind, vectors, window) -> [its first spec, layers]
    for spec, n in counts:
        groups.setdefault((spec.kind, spec.vectors, spec.window), [spec, 0])[1] += n
    rows = [_group_row(spec, layers, r) for spec, layers in groups.values()]
    per_seq = sum(n * s.positions_held(r.engine, r.run) * s.bytes_per_token for s, n in counts)
    folded = per_seq if fold is None else fold_bytes(fold[1], r.engine, r.run)
    if folded != per_seq:
        rows.append(_padding_row(fold[1], r, folded - per_seq))
        per_seq = folded
    return KVCacheResult.model_construct(engine=r.engine.name, engine_rule=r.engine.description, dtype=r.kv_t.name,
                         bytes_per_token=kv_bytes_per_token(layer_specs(r.card, r.kv_t, r.engine)),
                         bytes_per_sequence=per_seq,
                         total_bytes=r.batch * per_seq, groups=rows)


def paged_groups(engine: Engine, card: ModelCard, kv_t: DType, block_size: int, gpu=None,
                 prefix_caching: bool | None = None) -> tuple[int, list] | None:
    """(block, KV cache groups) where ``engine`` pages layers in groups (``Runtime.cache_groups``); None for bare
    cache rules, runtimes without groups, and layers whose pages vLLM would pad or pack (not modelled: plan refuses
    them; the per-layer sum stands)."""
    hook = getattr(engine, "cache_groups", None)
    if hook is None:
        return None
    try:
        return hook(card, kv_t, block_size, gpu, prefix_caching)
    except KvplanError:
        return None


def fold_bytes(groups: list, engine: Engine, run: CacheRun) -> int:
    """One sequence's bytes over the KV cache groups (serving_vllm.bytes_per_block x blocks): each group its pages
    held (the runtime's ``held_pages``) x its layer slots, padding included, x the page. For full, MLA and state
    groups this is a plan's one request; sliding and chunked groups hold what a decoding sequence keeps (their freed
    blocks gone), where a plan reserves the admission bound (window or chunk + in-flight tokens)."""
    return sum(g.size * engine.held_pages(g.spec, run) * g.spec.page_size_bytes(run.block_size) for g in groups)


def _padding_row(groups: list, r: Resolved, pad: int) -> KVGroup:
    """The bytes the fold adds to the per-layer rows: state pages padded to the attention page
    (platforms/interface.py _align_hybrid_block_size) and padding layer slots (kv_cache_utils.py 'Add k padding
    layers')."""
    states = [g for g in groups if g.spec.per_sequence]
    pages = {r.engine.held_pages(g.spec, r.run) for g in states}
    page_pad = sum(len(g.layers) * (r.engine.held_pages(g.spec, r.run) * g.spec.page_size_bytes(r.run.block_size)
                                    - g.spec.state_bytes) for g in states)
    slots = sum(g.size - len(g.layers) for g in groups)
    parts = []
    if page_pad:
        page = states[0].spec
        n = sum(len(g.layers) for g in states)
        parts.append(f"{n} state layers x {'/'.join(map(str, sorted(pages)))} page(s) of "
                     f"{page.page_size_bytes(r.run.block_size):,} B (the {r.run.block_size}-token attention page: vLLM "
                     f"_align_hybrid_block_size pads the state page"
                     + ("; more than one: prefix caching's Mamba cache mode ('align', or 'all': one per block) holds "
                        "more pages a request" if max(pages) > 1 else "") + f") against their {page.state_bytes:,} B of states")
    if slots:
        held = sum((g.size - len(g.layers)) * r.engine.held_pages(g.spec, r.run) for g in groups)
        parts.append(f"{slots} padding layer slots of vLLM's KV cache groups ('Add {slots} padding layers', "
                     f"kv_cache_utils.py), each holding its group's pages: {held:,} pages of "
                     f"{groups[0].spec.page_size_bytes(r.run.block_size):,} B")
    formula = f"{r.batch} seq x ({'; '.join(parts)}) = {fmt_bytes(r.batch * pad)}"
    return KVGroup.model_construct(kind="padding", layers=slots, window=None, chunk=None, bytes_per_token_per_layer=0,
                                   positions_held=0, bytes_per_sequence=pad, total_bytes=r.batch * pad,
                                   formula=formula)


def llama_kv(kv: KVCacheResult, m) -> KVCacheResult:
    """``kv`` (the table's count) as llama.cpp allocates it: one row per cache of ``m.caches`` (llama_kv_cache: the
    full layers, kv_swa: the sliding ones, llama_memory_recurrent: the states), its bytes, cells and cache types as
    that block gives them; the kind and window of the table's rows of the same layers. Per token: one cell of each
    K/V cache (its bytes / cells x streams, exact); per sequence: a stream of each K/V cache (the whole cache when
    unified: a slot reaches every cell) and one state."""
    sliding = [g for g in kv.groups if g.kind in ("sliding", "chunked")]
    attention = [g for g in kv.groups if g.kind not in ("sliding", "chunked") and g.bytes_per_token_per_layer]
    states = [g for g in kv.groups if not g.bytes_per_token_per_layer]
    rows, per_token, per_seq = [], 0, 0
    for c in m.caches:
        if not c.layers or not c.bytes:  # an empty base cache beside the sliding one (every layer sliding)
            continue
        like = (sliding if c.kind == "kv_swa" else attention) or [None]
        layers = c.layers
        if c.kind == "recurrent":  # one state per sequence: R and S of every state layer, f32
            seq, cell, held, like = c.bytes // c.cells, 0, 1, [None]
            layers = states[0].layers if states else c.layers  # llama.cpp logs n_layer; the state layers hold them
            formula = (f"{c.cells} seq x the states of {layers} layers: R (f32) {c.k_bytes:,} B + S (f32) "
                       f"{c.v_bytes:,} B = {fmt_bytes(c.bytes)}")
        else:
            cell = c.bytes // (c.cells * c.streams)  # every layer's K and V rows of one cell (llama_kv_cache ctor)
            seq, held = cell * c.cells, c.cells
            per_token += cell
            v = f" + V ({c.v_type}) {c.v_bytes:,} B" if c.v_bytes else " (no V cache)"
            formula = (f"{c.streams} stream(s) x {c.cells} cells x {c.layers} layers ({c.seqs} seq): K ({c.k_type}) "
                       f"{c.k_bytes:,} B{v} = {fmt_bytes(c.bytes)}")
            if cell % layers:  # layers of unlike widths (0-head layers among them): B/token/layer is their mean
                formula += f" (layers of unlike widths: {cell:,} B per cell in all, {cell // layers:,} B the mean)"
        per_seq += seq
        rows.append(KVGroup.model_construct(
            kind=like[0].kind if like[0] else ("full" if c.kind == "kv" else c.kind), layers=layers,
            window=like[0].window if like[0] and c.kind == "kv_swa" else None,
            chunk=like[0].chunk if like[0] and c.kind == "kv_swa" else None,
            bytes_per_token_per_layer=cell // layers,
            positions_held=held, bytes_per_sequence=seq, total_bytes=c.bytes, formula=formula))
    types = {(c.k_type, c.v_type) for c in m.caches if c.kind != "recurrent" and c.bytes} or {
        (c.k_type, c.v_type) for c in m.caches}  # a state model's R and S (f32)
    k, v = types.pop() if len(types) == 1 else (kv.dtype, kv.dtype)
    from kvplan.cost.llamacpp import KV_DTYPE_TYPES  # loaded with the caches block: --kv-dtype's names

    named = {t: d for d, t in KV_DTYPE_TYPES.items()}
    dtype = named.get(k, k) if k == v else f"{k}/{v}"
    return kv.model_copy(update=dict(dtype=dtype, bytes_per_token=per_token, bytes_per_sequence=per_seq,
                                     total_bytes=sum(c.bytes for c in m.caches), groups=rows))


def _group_row(spec: KVLayerSpec, layers: int, r: Resolved) -> KVGroup:
    held = spec.positions_held(r.engine, r.run)
    if spec.per_sequence:  # a fixed-size state per sequence, whatever the length
        total = r.batch * layers * spec.bytes_per_token
        formula = (f"{r.batch} seq x {layers} layers x {spec.shape} x {spec.dtype.describe_element()} (one state per "
                   f"sequence, constant in tokens) = {fmt_bytes(total)}")
        return KVGroup.model_construct(kind=spec.kind, layers=layers, window=None, chunk=None,
                                       bytes_per_token_per_layer=0,
                                       positions_held=held, bytes_per_sequence=layers * spec.bytes_per_token,
                                       total_bytes=total, formula=formula)
    total = r.batch * layers * held * spec.bytes_per_token
    tokens = f"{held} tokens"
    block = r.engine.held_block(r.run)
    if block and block > 1 and (spec.kind != "cross" or r.engine.takes_estimate_block):
        tokens += f" ({held // block} blocks of {block})"
    factor = f" x {spec.factor}" if spec.factor else ""
    formula = f"{r.batch} seq x {layers} layers x {spec.shape} x {tokens}{factor} x {spec.dtype.describe_element()}"
    if spec.scale_bytes_per_token:
        formula += f" + scales {spec.scale_bytes_per_token} B per token and layer"
    return KVGroup.model_construct(kind=spec.kind, layers=layers, window=spec.window, chunk=spec.chunk,
                                   bytes_per_token_per_layer=spec.bytes_per_token, positions_held=held,
                                   bytes_per_sequence=layers * held * spec.bytes_per_token, total_bytes=total,
                                   formula=f"{formula} = {fmt_bytes(total)}")


def served_weights(card: ModelCard, r: Resolved, gpu=None) -> WeightsResult:
    """The weights as the resolved runtime loads them (the plan's figure): a 16-bit checkpoint at --weight-dtype
    fp8 quantized online with its embeddings, LM head, norms and routers kept in the model dtype (vLLM's and
    SGLang's --quantization fp8: Runtime.loaded_card), MXFP4 experts in the backend the runtime picks on ``gpu``
    (a GPU; None: its default)."""
    loaded, w_t = card, r.w_t
    if isinstance(r.engine, Runtime):  # a bare cache-rules Engine loads nothing
        try:
            loaded, w_t, _ = r.engine.loaded_card(card, r.w_t, _dtype(card, r.engine, None, "--weight-dtype")[0])
        except KvplanError:  # integer weights of a 16-bit card: a what-if the estimate sizes as asked (plan refuses)
            pass
    return weights_result(loaded, w_t, r.kv_t, r.engine, gpu)


def weights_result(card: ModelCard, w_t: DType, kv_t: DType, engine: Engine, gpu=None) -> WeightsResult:
    p = count_params(card)
    breakdown = {"embedding": p.embedding, "positions": p.positions, "attention": p.attention, "mlp": p.mlp,
                 "norms": p.norms, "lm_head": p.lm_head, "other": p.other}
    if card.ssm:
        breakdown["ssm"] = p.ssm
    if card.vision:  # the vision tower and projector of a multimodal checkpoint (kvplan.cost.vision)
        breakdown["vision"] = p.vision
    # vLLM holds fp8 k_scale / v_scale as per-layer fp32 parameters (vllm/attention/layer.py), not in the KV pool
    scales = kv_t.layer_scale_bytes and kv_t.layer_scale_bytes * sum(
        n for s, n in layer_spec_counts(card, kv_t, IDEAL_RULES) if not s.per_sequence)
    fp32 = engine.fp32_params(card, w_t)  # modules the runtime keeps in float32 in a half-precision model
    if card.quantization is not None:
        from kvplan.cost.quant import held_card  # MXFP4 experts as this runtime holds them

        card = held_card(card, engine, gpu)
    quant = _quantized(card, p.total, w_t, fp32)
    stored = _stored(w_t, p.total, fp32) if quant is None else quant.stored_bytes
    return WeightsResult.model_construct(params=p.total, active_params=p.active, dtype=w_t.name, bytes=stored + scales,
                         kv_scale_bytes=scales, fp32_params=fp32, breakdown=breakdown, quantization=quant)


def _with_checkpoint(weights: WeightsResult, base: ModelCard) -> WeightsResult:
    """``weights`` with the Hub checkpoint's bytes beside them (a card read from the Hub)."""
    check = checkpoint_of_card(base)
    if check is None:
        return weights
    return weights.model_copy(update={"checkpoint_bytes": check.bytes, "checkpoint": check})


def checkpoint_of_card(base: ModelCard) -> CheckpointCheck | None:
    """A Hub model's checkpoint bytes beside kvplan's count of ``base`` (the card before any what-if layout) as the
    checkpoint stores it: in the card's dtype, quantized as the card says; None for a card not read from the Hub."""
    ckpt = checkpoint_of(base)
    if ckpt is None:
        return None
    from kvplan.planning.checkpoint import checkpoint_check  # only for a model read from the Hub

    stored = parse_dtype(base.dtype)
    return checkpoint_check(base, ckpt, weights_result(base, stored, stored, IDEAL_RULES).bytes)


def _stored(w_t: DType, params: int, fp32: int) -> int:
    """``params`` in ``w_t``, ``fp32`` of them held in float32."""
    return w_t.data_bytes(params - fp32) + parse_dtype("fp32").data_bytes(fp32)


def _quantized(card: ModelCard, params: int, w_t: DType, fp32: int) -> QuantizedWeights | None:
    """The checkpoint's quantized linears (kvplan.cost.quant, one rank of tp 1 holding all) and the rest in w_t
    (``fp32`` of them in float32: never a quantized linear)."""
    if card.quantization is None:
        return None
    from kvplan.cost.parallel import Layout, rank_quant  # only for quantized checkpoints

    q = rank_quant(card, Layout(), 0)
    rest = params - q.quantized_elems
    return QuantizedWeights.model_construct(method=card.quantization.method, format=card.quantization.label,
                            quantized_params=q.quantized_elems, quantized_bytes=q.data, scale_bytes=q.scales,
                            zero_bytes=q.zeros, g_idx_bytes=q.g_idx, unquantized_params=rest,
                            unquantized_bytes=_stored(w_t, rest, fp32) + q.bias)  # + biases in a kernel's layout


def summarize(card: ModelCard, base: ModelCard) -> ModelSummary:
    """The cache's geometry as an engine allocates it: MLA caches one vector of latent + rope key per token and layer
    (vLLM MLAAttentionSpec: num_kv_heads 1, head_size kv_lora_rank + qk_rope_head_dim); a card without attention
    layers caches no K/V heads (0, 0), whatever its config's head fields say."""
    heads, dim = card.num_kv_heads, card.head_dim
    if card.attention_kind == "none" or not card.has_kv_cache:  # no attention layers; encoder-only: nothing cached
        heads, dim = 0, 0
    elif card.mla is not None:
        heads, dim = 1, card.mla.kv_lora_rank + card.mla.qk_rope_head_dim
    return ModelSummary.model_construct(name=card.name, source=card.source, architecture=card.architecture,
                        attention=card.attention_kind, attention_detail=card.attention_label,
                        num_layers=card.num_layers, num_kv_heads=heads, head_dim=dim,
                        layout_changed=card.num_kv_heads != base.num_kv_heads)


def _dtype_notes(kv_t: DType, w_t: DType) -> list[str]:
    notes = []
    if kv_t.layer_scale_bytes:
        notes.append(f"{kv_t.name} KV: vLLM keeps a per-tensor fp32 k_scale and v_scale per attention layer "
                     f"({kv_t.layer_scale_bytes} B each layer) as parameters; they are counted with the weights "
                     "(weights.kv_scale_bytes), not in the KV pool.")
    if w_t.name in ("int8", "int4"):
        notes.append(f"{w_t.name} weights: the bytes are the packed values only; per-group scales and zero-points of "
                     "a GPTQ/AWQ checkpoint add to this.")
    return notes
