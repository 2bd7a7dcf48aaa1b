"""llama.cpp (llama-server): one process, the model's layers on the GPU (-ngl) and the rest on the CPU, one K/V
cache of n_ctx cells shared by -np slots. The arithmetic, with its sources, is ``kvplan.cost.llamacpp``; this runtime
applies it to a plan: the flags and their defaults, the GPU's budget, the slots that fit, the launch line.

A card made from a GGUF (``--gguf``) is sized from the GGUF's per-layer metadata and tensor table (exact bytes of every
quantized tensor); a bundled card from its architecture, weights at the plan's --weight-dtype.
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

from kvplan.cost import llamacpp as lc
from kvplan.cost.engines import CacheRun
from kvplan.cost.runtimes.base import Runtime, longest, rank_row
from kvplan.cost.runtimes.setup import LayerSpecs, Options, Pool, ServingFlags, Setup, Stage
from kvplan.cost.runtimes.results import KVCachePool
from kvplan.errors import KvplanError, Refused
from kvplan.units import fmt_bytes, require_positive


@lru_cache(maxsize=32)
def hparams_and_weights(card, w_bits: int, quant: str | None = None):
    """(LlamaHparams, (per-layer, input, output, per-layer expert tensors) weight bytes or None) of a card: the
    GGUF's own when the card came from one; at a llama-quantize type (``quant``) by llama-quant.cpp's rules
    (kvplan.cost.gguf_quant); else the card's parameters at ``w_bits``: routed experts per MoE layer, the rest split
    evenly over its layers."""
    from kvplan.model.gguf import gguf_path_of

    path = gguf_path_of(card)
    if path is not None:
        if quant is not None:
            raise KvplanError("--gguf-quant: the GGUF's own tensor table gives its weights; only for a card")
        from kvplan.model.gguf import load_gguf

        return load_gguf(path).hparams, None
    if quant is not None:
        from kvplan.cost.gguf_quant import quant_tensors

        return card_hparams(card), lc.Weights(quant_tensors(card, quant))
    from kvplan.cost.params import count_params

    p = count_params(card)
    emb = p.embedding + p.positions
    out = p.lm_head + (0 if card.final_norm is False else card.hidden_size)
    to_bytes = lambda n: n * w_bits // 8  # noqa: E731
    elems = [_expert_tensors(card, i) for i in range(card.num_layers)]
    experts = [tuple((name, to_bytes(n)) for name, n in layer) for layer in elems]
    body = p.total - emb - p.lm_head - sum(n for layer in elems for _, n in layer)
    per = [body // card.num_layers] * card.num_layers
    per[0] += body - sum(per)
    tied_copy = p.embedding if card.tie_embeddings else 0  # llama.cpp loads a tied token_embd again as the output
    layers = tuple(to_bytes(x) + sum(b for _, b in e) for x, e in zip(per, experts))
    return card_hparams(card), lc.Weights((layers, to_bytes(emb), to_bytes(out + tied_copy), tuple(experts)))


@lru_cache(maxsize=32)
def card_hparams(card):
    """kvplan.model.llama_hparams.hparams_from_card, one object per card (cards are frozen): the memory model's
    caches, keyed by hparams, then find every quant type's and dtype's entries by identity."""
    from kvplan.model.llama_hparams import hparams_from_card

    return hparams_from_card(card)


# The 2025-02 llama-server without -ngl offloads no layer: common_params.n_gpu_layers = -1 ("use default") leaves
# llama_model_default_params().n_gpu_layers = 0 (common/common.cpp common_model_params_to_llama; src/llama-model.cpp,
# read in Ollama's vendored llama.cpp d7cfe1ff of 2025-02-26, days after c392e509; 999 only on Metal builds) until PR
# #15434 (2025-08, "llama: use FA + max. GPU layers by default"). ``plan`` pins -ngl on its 2025-02 lines; ``estimate``
# sizes what that build allocates: the model, K/V and compute on the CPU device (lc.placement at -ngl 0).
_OLD_NGL_NOTE = ("-ngl not given: the 2025-02 llama-server (c392e509) offloads no layer by default "
                 "(llama_model_default_params().n_gpu_layers = 0 until llama.cpp PR #15434, 2025-08), so the buffers "
                 "below are its CPU ones; give -ngl {every} (every layer) or -ngl N to size layers on the GPU.")


def _old_default_ngl(f: lc.LlamaFlags | None) -> bool:
    """Whether ``f`` is the 2025-02 rules' llama-server with a GPU and no -ngl (``_OLD_NGL_NOTE``)."""
    return f is not None and f.rules == "2025-02" and f.n_gpu_layers is None and f.n_gpus > 0


def _no_gpu_layers(hp, f, defaulted: bool = False) -> None:
    """KvplanError where llama.cpp offloads no layer (-ngl 0, or no -ngl under 2025-02: ``defaulted``): the GPU's
    roofline bounds nothing of the step."""
    if f.n_gpus and not lc.placement(hp, f)[1]:
        said = "-ngl not given (the 2025-02 llama-server's default is 0)" if defaulted else f"-ngl {f.n_gpu_layers}"
        raise KvplanError(f"{said}: llama.cpp runs every layer on the CPU, so the GPU's roofline "
                          "bounds nothing (kvplan does not model CPU speed); give -ngl N > 0 for latency bounds, or "
                          "leave out --gpu (estimate) / --concurrency (plan) for the memory alone")


def _gguf_params_by_device(card, devs: list[str], rules) -> dict[str, int]:
    """Elements of a GGUF card's tensors per device (lc.lora_device: the input layer on the CPU, a block's tensor on
    its override's or its layer's device, the rest with the output layer); {} for a card without a GGUF."""
    from kvplan.model.gguf import gguf_path_of, load_gguf

    path = gguf_path_of(card)
    out: dict[str, int] = {}
    if path is not None:
        for t in load_gguf(path).tensors:
            dev = lc.lora_device(t.name, devs, rules)
            out[dev] = out.get(dev, 0) + t.n_elements
    return out


@lru_cache(maxsize=256)
def _device_layers(devices: tuple[str, ...], gpus: tuple[str, ...]) -> tuple[range, ...]:
    """The decoder layers on each of ``gpus``, from each layer's device (``lc.placement``): contiguous, as the split
    points rise with the layer; an empty range for a GPU without one."""
    out = []
    for gpu in gpus:
        mine = [il for il, d in enumerate(devices) if d == gpu]
        out.append(range(mine[0], mine[-1] + 1) if mine else range(0))
    return tuple(out)


def _expert_tensors(card, i: int) -> tuple[tuple[str, int], ...]:
    """Layer i's routed experts in elements (gate, up and down: hidden x expert_ffn per expert each) as
    convert_hf_to_gguf.py names them; () for a dense layer."""
    if not card.is_moe_layer(i):
        return ()
    m = card.moe
    up = down = m.num_experts * card.hidden_size * m.expert_ffn_size
    gate = ((f"blk.{i}.ffn_gate_exps.weight", up),) if card.gated_ffn else ()
    return gate + ((f"blk.{i}.ffn_up_exps.weight", up), (f"blk.{i}.ffn_down_exps.weight", down))


@lru_cache(maxsize=32)
def adapters(card, f: lc.LlamaFlags) -> tuple[tuple[str, int], ...]:
    """The LoRA adapters' tensors as (base tensor, bytes): each --lora file's own tensor table
    (kvplan.model.gguf.load_lora); without a file, --lora-rank r on --lora-targets of every layer as
    convert_lora_to_gguf.py writes it: lora_a (ne0 x r) and lora_b (r x ne1) of the base tensor (ne0 x ne1), f16."""
    if f.lora:
        from kvplan.model.gguf import load_lora

        if f.lora_rank:
            raise KvplanError("--lora-rank: sizes an adapter without a file; not with --lora FILE")
        return tuple(t for path in f.lora for t in load_lora(path))
    if not f.lora_rank:
        return ()
    if f.lora_rank < 0:
        raise KvplanError(f"--lora-rank: {f.lora_rank}; allowed: a positive rank")
    shapes = _tensor_shapes(card)
    kinds = {name.split(".")[2] for name in shapes if name.startswith("blk.")}
    if not kinds:
        raise KvplanError(f"--lora-rank: kvplan lists no attention or MLP weights of {card.name}'s layers to size an "
                          "adapter on; give the adapter's GGUF (--lora FILE)")
    unknown = [t for t in f.lora_targets if t not in kinds]
    if unknown or not f.lora_targets:
        raise KvplanError(f"--lora-targets: {(unknown or [''])[0]!r} is not a tensor of every layer; allowed: "
                          f"{', '.join(sorted(kinds))}")
    # a rank above a target's smaller side adds nothing a full-rank update would not (and no adapter has one)
    narrowest = min(min(ne) for name, ne in shapes.items() if name.startswith("blk.") and name.split(".")[2] in
                 f.lora_targets)
    r = require_positive("--lora-rank", f.lora_rank, narrowest)
    return tuple((name, 2 * r * (ne0 + ne1)) for name, (ne0, ne1) in shapes.items()
                 if name.startswith("blk.") and name.split(".")[2] in f.lora_targets)


def _tensor_shapes(card) -> dict[str, tuple[int, int]]:
    """(ne0, ne1) of each 2-D layer weight: the GGUF's tensor table, or a dense card's projections as the converter
    writes them (attn_q h x heads*hd, attn_k/attn_v h x kv*hd, attn_output heads*hd x h, ffn_gate/ffn_up h x ffn,
    ffn_down ffn x h)."""
    from kvplan.model.gguf import gguf_path_of, load_gguf

    path = gguf_path_of(card)
    if path is not None:
        return {t.name: (t.shape[0], t.shape[1]) for t in load_gguf(path).tensors if len(t.shape) == 2}
    h, q, kv = card.hidden_size, card.num_heads * card.head_dim, card.num_kv_heads * card.head_dim
    q_rows = q * (2 if card.attention_output_gate else 1)  # a gated query carries its gate (gguf_quant's attn_q)
    out = {}
    for i in range(card.num_layers):
        b = f"blk.{i}."
        if card.mixer(i) in ("attention", "hybrid"):  # a state-space layer has no attention projections
            out.update({b + "attn_q.weight": (h, q_rows), b + "attn_k.weight": (h, kv), b + "attn_v.weight": (h, kv),
                        b + "attn_output.weight": (q, h)})
        if not card.is_moe_layer(i) and card.has_mlp(i):
            out.update({b + "ffn_up.weight": (h, card.ffn_size), b + "ffn_down.weight": (card.ffn_size, h)})
            if card.gated_ffn:
                out[b + "ffn_gate.weight"] = (h, card.ffn_size)
    return out


def _free(s: Setup) -> int:
    """What llama.cpp sizes from on each GPU: the free memory its backend reports at start (ggml-cuda.cu
    ggml_backend_cuda_device_get_memory, cudaMemGetInfo's free), the total less what is already in use there
    (--context-memory: none by default on Linux; under --platform windows the desktop's default share,
    hardware.in_use_at_start_bytes; another process)."""
    return s.total - s.context


def fits_whole(sized: lc.Sizes, total: int, max_model_len: int) -> bool:
    """The plan's fit, one rule for its verdict, its slots and its quant search: every GPU holds its buffers (model,
    LoRA, caches, compute; ``lc.sizes``) in ``total`` bytes, and a slot holds ``max_model_len`` tokens."""
    return sized.gpu <= total and sized.context.n_ctx_seq >= max_model_len


@lru_cache(maxsize=4096)  # one object per value: the slot search asks for the same flags again for every GPU type
def slots(f: lc.LlamaFlags, n: int, max_model_len: int) -> lc.LlamaFlags:
    """``f`` with -np n -c n x max_model_len: n streams of max_model_len cells, as an explicit -np gives; with
    --kv-unified given, one cache of n x max_model_len cells the n slots share (llama-context.cpp b10488,
    llama_context ctor: kv_unified -> n_ctx_seq = n_ctx, one stream), so n requests of max_model_len fit at once."""
    return f.replaced(n_parallel=n, n_ctx=n * max_model_len, kv_unified=f.kv_unified is True)


def at_context(f: lc.LlamaFlags, max_model_len: int) -> lc.LlamaFlags:
    """The flags at the plan's context: as given, or (neither -c nor -np) one slot of max_model_len, the least that
    ``most_slots`` sizes."""
    return f if f.n_ctx is not None else slots(f, 1, max_model_len)


@lru_cache(maxsize=256)
def most_slots(card, f: lc.LlamaFlags, total: int, max_model_len: int, w_bits: int) -> lc.LlamaFlags:
    """``f`` with -np N -c N x max_model_len for the largest N in 1..LLAMA_MAX_SEQ whose buffers fit every GPU of
    ``total`` bytes less --fit's 1 GiB margin (``LlamaCpp.flags``); 1 when none does."""
    hp, weights = hparams_and_weights(card, w_bits, f.gguf_quant)
    lora = adapters(card, f)
    sized = lambda n: lc.sizes(hp, slots(f, n, max_model_len), weights, lora)  # noqa: E731
    # each slot adds about the same bytes (its cells, its logits): the search starts where one and two slots point
    one, two = sized(1).gpu, sized(2).gpu
    guess = max(1, (total - lc.FIT_TARGET - one) // (two - one) + 1) if two > one else None
    # within the 1 GiB llama-server's --fit keeps free (lc.FIT_TARGET), which the Fit note measures against: the
    # printed -c and -ngl are explicit, so --fit leaves them (common/fit.cpp common_params_fit_impl, b10488: "context
    # size set by user ... -> no change"; "n_gpu_layers already set by user ..., abort"), and the margin is what
    # keeps the line starting as planned with the CUDA context and other memory kvplan does not count beside it
    budget = total - lc.FIT_TARGET
    fits = lambda n: n <= 1 or fits_whole(sized(n), budget, max_model_len)  # noqa: E731
    return slots(f, longest(fits, lc.MAX_SEQ, guess) or 1, max_model_len)


@lru_cache(maxsize=1024)  # a search asks once per GPU type and layout
def max_context(card, f: lc.LlamaFlags, total: int, w_bits: int, hi: int) -> int:
    """The most cells of -c, at most ``hi``, at which every GPU of ``f`` holds its buffers in ``total`` bytes
    (``LlamaCpp.pool``'s fit); 0 where one cell does not. The buffers grow with -c and depend on it through the
    padded figure only (``lc.ctx_padding``): the search runs over its multiples."""
    hp, weights = hparams_and_weights(card, w_bits, f.gguf_quant)
    lora = adapters(card, f)
    ok = lambda n_ctx: lc.sizes(hp, f if n_ctx == f.n_ctx else f.replaced(n_ctx=n_ctx), weights,  # noqa: E731
                                lora).gpu <= total
    if ok(hi):  # the plan's own context fits (most layouts a search sizes)
        return hi
    if not ok(1):
        return 0
    step = lc.ctx_padding(f)
    return step * longest(lambda k: ok(k * step), hi // step)


@lru_cache(maxsize=256)
def _fit(card, f: lc.LlamaFlags, total: int, w_bits: int, quant: str | None) -> lc.LlamaFit:
    hp, weights = hparams_and_weights(card, w_bits, quant or f.gguf_quant)
    return lc.fit(hp, f, total - lc.FIT_TARGET, weights, adapters(card, f))


# the K/V cache types a plan searches, best first (a quantized V cache with flash attention on: llama.cpp refuses it
# without)
KV_LADDER = ("f16", "q8_0", "q4_0")


def quantizable(card) -> bool:
    """A card llama-quantize's rules size (kvplan.cost.gguf_quant): no GGUF of its own, no MLA or state layers."""
    from kvplan.model.gguf import gguf_path_of

    return gguf_path_of(card) is None and not (card.mla or card.ssm or card.shared_blocks) and (
        card.architecture == "decoder-only")


def kv_ladder(f: lc.LlamaFlags) -> list[lc.LlamaFlags]:
    """``f`` at each K/V type pair of KV_LADDER, best first; a given -ctk or -ctv is kept, and a given -fa (a quantized
    V cache otherwise gets -fa on)."""
    out = []
    for t in KV_LADDER:
        k = f.type_k if f.is_given("type_k") else t
        v = f.type_v if f.is_given("type_v") else t
        fa = f.flash_attn if f.is_given("flash_attn") or lc.KV_TYPES[v][0] == 1 else "on"
        g = f.replaced(type_k=k, type_v=v, flash_attn=fa)
        if g not in out:
            out.append(g)
    return out


@lru_cache(maxsize=512)  # a search asks once per GPU type and pipeline size
def quant_search(card, f: lc.LlamaFlags, total: int, max_model_len: int, w_bits: int
                 ) -> tuple[tuple[str, lc.LlamaFlags, bool], ...]:
    """Every llama-quantize type of kvplan.cost.gguf_quant (largest first) as (type, flags, fits): the flags at the
    first K/V types of ``kv_ladder`` with which it fits at the plan's context (``fits_whole`` at ``at_context``, the
    plan's own rule), else at the last one llama.cpp accepts."""
    rows = []
    for q, rungs in _quant_rungs(card, f, max_model_len, w_bits):
        for g, sized in rungs:
            if fits_whole(sized, total, max_model_len):
                rows.append((q, g, True))
                break
        else:
            rows.append((q, rungs[-1][0], False))
    return tuple(rows)


@lru_cache(maxsize=128)
def _quant_rungs(card, f: lc.LlamaFlags, max_model_len: int, w_bits: int):
    """Per llama-quantize type of ``quant_search``, the flags of ``kv_ladder`` that llama.cpp accepts, each with its
    buffers at the plan's context (``lc.sizes``): no GPU figure enters them, so a search sizes them once per
    layout, not again for each GPU type."""
    from kvplan.cost.gguf_quant import FILE_TYPES

    lora, rows = adapters(card, f), []
    for q in FILE_TYPES:
        hp, weights = hparams_and_weights(card, w_bits, q)
        rungs = []
        for g in kv_ladder(f.replaced(gguf_quant=q)):
            # sized with -ngl pinned to every layer where none is given (the same placement: lc._placement takes
            # None as 999, at least n_layer + 1), as ``choose`` pins it: the slot search then finds these buffers
            sized_as = g if g.n_gpu_layers is not None else _every_layer(g, hp.n_layer + 1)
            try:
                rungs.append((g, lc.sizes(hp, at_context(sized_as, max_model_len), weights, lora)))
            except Refused:  # e.g. a quantized V cache with -fa off given, a block that does not divide the head
                continue
        if not rungs:  # every pair refused: llama.cpp's reason for the first
            lc.memory(hp, at_context(kv_ladder(f.replaced(gguf_quant=q))[0], max_model_len), weights, lora)
        rows.append((q, tuple(rungs)))
    return tuple(rows)


@lru_cache(maxsize=512)
def choose(card, f: lc.LlamaFlags, total: int, max_model_len: int, w_bits: int) -> lc.LlamaFlags:
    """The plan's flags from ``quant_search``: --gguf-quant as given, else the first type that fits with 8- or 16-bit
    K/V, else the first that fits at all (the checkpoint's own 16-bit type before the other), else the smallest;
    with the K/V types its row needs. Where it fits and -ngl was not given, -ngl pins every layer on the GPU:
    llama-server's --fit (on by default) keeps 1 GiB free and would move layers to the CPU."""
    rows = quant_search(card, f, total, max_model_len, w_bits)
    if f.gguf_quant is not None:
        q, g, ok = next(r for r in rows if r[0] == f.gguf_quant)
    else:
        other = "F16" if card.dtype == "bfloat16" else "BF16"  # same bytes: the checkpoint's own 16-bit type first
        order = [r for r in rows if r[0] != other]
        order.insert(next(i for i, r in enumerate(order) if r[0] in ("F16", "BF16")) + 1,
                     next(r for r in rows if r[0] == other))
        # a 4-bit K/V cache costs more quality than a smaller weight type: the largest type that fits with f16 or
        # q8_0 K/V first, then the largest with any K/V type the ladder tried
        coarse = ("q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1")
        q, g, ok = next((r for r in order if r[2] and r[1].type_k not in coarse and r[1].type_v not in coarse),
                        next((r for r in order if r[2]), order[-1]))
    if ok and not f.is_given("n_gpu_layers"):
        g = _every_layer(g, hparams_and_weights(card, w_bits, q)[0].n_layer + 1)
    return g


@lru_cache(maxsize=1024)  # one object per value: the GPU types that choose the same row share its flags (and hash)
def _every_layer(g: lc.LlamaFlags, n_gpu_layers: int) -> lc.LlamaFlags:
    """``g`` with -ngl ``n_gpu_layers`` (``choose``: every layer on the GPU)."""
    return g.replaced(n_gpu_layers=n_gpu_layers)


def _cells_per_slot(f: lc.LlamaFlags) -> int:
    """The cells one slot holds for -c/-np as llama-context.cpp pads them (llamacpp.resolve_context: a unified cache
    GGML_PAD(n_ctx, 256) for every slot; else GGML_PAD(GGML_PAD(n_ctx, 256) / n_seq_max, 256) each). 2025-02 builds:
    GGML_PAD(n_ctx, 256 with flash attention, else 32) / -np each, unpadded (one cache; lc.ctx_padding)."""
    if f.rules == "2025-02":
        return lc.pad(f.n_ctx, lc.ctx_padding(f)) // (f.n_parallel or 1)
    if f.kv_unified or f.n_parallel is None:
        return lc.pad(f.n_ctx, 256)
    return lc.pad(lc.pad(f.n_ctx, 256) // f.n_parallel, 256)


_NO_FLAGS = lc.LlamaFlags()  # llama-server's defaults: no llama.cpp flag given
_NO_SPECS = LayerSpecs()  # a stage's KV layer specs: llama.cpp's caches are sized by ``lc.memory``, not by specs


@lru_cache(maxsize=1024)  # one object per value: a search resolves the same flags for every GPU type
def _server_flags(f: lc.LlamaFlags, n_gpus: int, default_parallel: int | None, max_model_len: int) -> lc.LlamaFlags:
    """``f`` on ``n_gpus`` GPUs, with the runtime's default -np where none is given, and where -np is set but not
    -c, -c for a slot of ``max_model_len`` tokens each (``LlamaCpp.resolve``)."""
    f = f.replaced(n_gpus=n_gpus)
    if f.n_parallel is None and default_parallel is not None:
        f = f.replaced(n_parallel=default_parallel)
    if f.n_ctx is None and f.n_parallel is not None:  # each slot holds --max-model-len tokens
        f = f.replaced(n_ctx=max_model_len if f.kv_unified else max_model_len * f.n_parallel)
    return f


class LlamaCpp(Runtime):
    name = "llamacpp"
    reads_gguf_layers = True  # llama_hparams from the GGUF (kvplan.model.llama_hparams); Ollama inherits it
    display_name = "llama.cpp"
    rules = f"llama.cpp {lc.LATEST} rules (b10488; kvplan.cost.llamacpp)"
    description = "llama.cpp: n_ctx cells padded to 256, shared by -np slots; sliding layers keep n_swa + n_ubatch"
    single_process = True
    extra_flags = frozenset({"llama"})
    budget_flag = "-ngl/--n-gpu-layers"
    serves_fp32 = False
    default_parallel: int | None = None  # llama-server: auto (4 slots, unified)
    server_default_ngl = True  # no -ngl: llama-server's own default (under 2025-02 no layer: _OLD_NGL_NOTE)

    kv_dtypes = ("fp32", "fp16", "bf16")  # -ctk/-ctv f32, f16, bf16 (lc.KV_DTYPE_TYPES)
    _dtype_hint = " (llama.cpp's quantized caches: -ctk/-ctv q8_0, q4_0, ... on estimate and plan)"

    def decode_micro_batches(self, pp: int) -> int:
        """1: llama-server decodes all its slots in one llama_decode call per loop, and a layer split (-sm layer) runs
        the GPUs' layers in turn for it; the scheduler's copies ("pipeline parallelism enabled (n_copies=4)",
        GGML_SCHED_MAX_COPIES) overlap the ubatches of one call, and a decode batch of up to n_ubatch tokens is one
        (/work/shared/reference/llamacpp.md, llama_context)."""
        return 1

    def default_kv_dtype(self, card_dtype: str) -> tuple[str, str | None]:
        """-ctk/-ctv f16 whatever the weights' dtype (common/common.h cache_type_k, cache_type_v)."""
        return "fp16", None

    def cache_type_flags(self, kv_dtype, llama):
        """--kv-dtype is -ctk and -ctv of its type; -ctk/-ctv given alike are that --kv-dtype (lc.cache_types)."""
        return lc.cache_types(kv_dtype, llama)

    # -- cache rules: one sequence of seq_len tokens in its own stream (-np batch, no unified cache) --

    def positions_held(self, window: int | None, run: CacheRun) -> int:
        """Cells one sequence holds: n_ctx_seq = GGML_PAD(seq_len, 256); a sliding layer GGML_PAD(min(n_ctx_seq,
        n_swa + n_ubatch), 256) (llama_kv_cache_iswa, n_ubatch 512; kvplan.cost.llamacpp)."""
        cells = lc.pad(run.seq_len, 256)
        return lc.pad(min(cells, window + 512), 256) if window else cells

    def chunk_positions(self, chunk: int, run: CacheRun) -> int:
        """Chunked layers (Llama-4) use the sliding cache with n_swa = the chunk."""
        return self.positions_held(chunk, run)

    def estimate_memory(self, card, w_bits, seq_len, batch, flags):
        """``batch`` slots of ``seq_len`` cells each (-np batch, -c seq_len x batch) unless the flags say otherwise;
        under 2025-02 without -ngl, that build's default of no layer on the GPU (``_estimate_flags``), noted."""
        f = self._estimate_flags(seq_len, batch, flags)
        hp, weights = hparams_and_weights(card, w_bits, f.gguf_quant)
        m = lc.memory(hp, f, weights, adapters(card, f))
        if self.server_default_ngl and _old_default_ngl(flags):
            m = m.model_copy(update={"notes": [*m.notes, _OLD_NGL_NOTE.format(every=hp.n_layer + 1)]})
        return m

    def estimate_held(self, card, w_t, seq_len, batch, flags):
        """Each GPU of the estimate's llama-server (``estimate_memory``'s flags), as a step reads it: its GGUF
        tensors and caches (``lc.step_views``); None without a GPU backend; refused with no layer on a GPU."""
        f = self._estimate_flags(seq_len, batch, flags)
        hp, weights = hparams_and_weights(card, w_t.bits, f.gguf_quant)
        _no_gpu_layers(hp, f, self.server_default_ngl and _old_default_ngl(flags))
        lora = adapters(card, f)
        return list(lc.step_views(hp, f, weights, lora, w_t)) or None

    def weights_label(self, s: Setup) -> str | None:
        """The GGUF type the plan loads: --gguf-quant or the searched one; a GGUF file's own tensor types."""
        from kvplan.model.gguf import gguf_path_of

        q = self.flags(s).gguf_quant
        path = gguf_path_of(s.card)
        if q or path is None:
            return f"GGUF {q}" if q else None
        from kvplan.model.gguf import load_gguf

        return f"GGUF (the file's tensor types; {load_gguf(path).params:,} params in the file)"

    def _estimate_flags(self, seq_len: int, batch: int, flags: lc.LlamaFlags | None) -> lc.LlamaFlags:
        """``flags`` with llama-server's -np and -c for ``batch`` slots of ``seq_len`` cells where not given (a
        unified cache: ``batch`` x ``seq_len`` cells the slots share, each reaching all of them)."""
        f = flags or lc.LlamaFlags()
        lc.check_era(f)  # a flag the rules' llama.cpp lacks, before the slots' checks
        if self.server_default_ngl and _old_default_ngl(f):  # 2025-02 without -ngl: no layer offloaded (_OLD_NGL_NOTE)
            f = f.replaced(n_gpu_layers=0)
        if f.n_parallel is None:
            f = replace(f, n_parallel=batch)
        if f.n_ctx is None:
            f = replace(f, n_ctx=seq_len * (batch if f.kv_unified else f.n_parallel))
        per_slot = _cells_per_slot(f) if f.n_ctx else seq_len  # -c 0: the training context
        if per_slot < seq_len:
            raise KvplanError(f"-c/--ctx-size: {f.n_ctx:,} cells over {f.n_parallel} slot(s) hold {per_slot:,} tokens "
                              f"per sequence, fewer than --seq-len {seq_len:,}; allowed: -c of at least "
                              f"{seq_len * (1 if f.kv_unified else f.n_parallel):,}, or a shorter --seq-len")
        return f

    def check_servable(self, card, layout) -> None:
        """One llama-server: its layers split over --pp GPUs (-ts, --split-mode layer, the default); llama.cpp's
        row split (--split-mode row) is not modelled."""
        if layout.tp > 1:
            raise Refused("--tp: llama.cpp's --split-mode row is not modelled; its layers split over --pp GPUs "
                          "(-ts/--tensor-split, --split-mode layer)")
        super().check_servable(card, replace(layout, pp=1))

    def resolve(self, flags: ServingFlags, card, gpu, total, layout, max_model_len) -> Options:
        for flag, value in (("--gpu-memory-utilization", flags.gpu_memory_utilization),
                            ("--block-size", flags.block_size)):
            if value is not None:
                raise KvplanError(f"{flag}: not a {self.display_name} option (it sizes by -c, -np and -ngl)")
        self._refuse_sglang_only(flags)
        self._refuse_vllm_only(flags)
        given = flags.llama or _NO_FLAGS
        lc.check_era(given)  # a flag the rules' llama.cpp lacks, before the slots' checks
        if given.tensor_split and len(given.tensor_split) != layout.pp:
            raise KvplanError(f"-ts/--tensor-split: {len(given.tensor_split)} shares for --pp {layout.pp} GPU(s); "
                              "give one share per GPU of the server")
        f = _server_flags(given, layout.pp, self.default_parallel, max_model_len)
        if given.n_ctx:  # a slot holds its share of n_ctx cells as llama.cpp pads them (0: the training context)
            per_slot = _cells_per_slot(f)
            if per_slot < max_model_len:
                slots = "" if f.kv_unified or f.n_parallel is None else f" over -np {f.n_parallel} slots"
                raise KvplanError(f"-c/--ctx-size: {f.n_ctx:,} cells{slots} hold {per_slot:,} tokens per request, "
                                  f"fewer than --max-model-len {max_model_len:,}; allowed: -c of at least "
                                  f"{max_model_len * (1 if slots == '' else f.n_parallel):,}, or a smaller "
                                  "--max-model-len")
        return Options(util=1.0, llama=f)

    def flags(self, s: Setup) -> lc.LlamaFlags:
        """The plan's llama.cpp flags. A card without a GGUF (``searches``): its weights at the largest llama-quantize
        type that fits with every layer on the GPU, and the best K/V cache types it fits with (``choose``), each
        unless given. Neither -c nor -np given: -np N -c N x --max-model-len (a stream of max_model_len cells per
        slot, as an explicit -np gives) for the largest N (at most LLAMA_MAX_SEQ) whose buffers fit every GPU, so
        the plan's concurrency is llama-server's slots; 1 when none does (the plan then says it does not fit).
        llama-server alone would start 4 unified slots sharing the model's whole context. Resolved once per setup
        (its stages, pool, latency and launch line ask again; a setup is frozen)."""
        f = s.__dict__.get("_llama_flags")
        if f is None:
            f = s.opts.llama
            if self.searches(s):
                f = choose(s.card, f, _free(s), s.max_model_len, s.w_t.bits)
            if f.n_ctx is None:
                f = most_slots(s.card, f, _free(s), s.max_model_len, s.w_t.bits)
            s.__dict__["_llama_flags"] = f
        return f

    def searches(self, s: Setup) -> bool:
        """Whether the plan searches quant and K/V types: a card llama-quantize's rules size, its weights not set by
        --weight-dtype (unless --gguf-quant names them), and not both --gguf-quant and -ctk/-ctv given."""
        f = s.opts.llama
        if not quantizable(s.card):
            return False
        if f.gguf_quant is None and s.w_t.name != self.default_dtype(s.card.dtype)[0]:
            return False
        return not (f.gguf_quant is not None and f.is_given("type_k") and f.is_given("type_v"))

    def memory_inputs(self, s: Setup) -> tuple:
        """(hparams, flags, weights, adapters) of the plan's llama-server: what ``lc.memory`` sizes, and
        ``lc.sizes`` in figures for the stages and the pool. Resolved once per setup, as ``flags``."""
        out = s.__dict__.get("_llama_inputs")
        if out is None:
            f = self.flags(s)
            hp, weights = hparams_and_weights(s.card, s.w_t.bits, f.gguf_quant)
            out = s.__dict__["_llama_inputs"] = (hp, f, weights, adapters(s.card, f))
        return out

    def memory(self, s: Setup) -> lc.LlamaMemory:
        return lc.memory(*self.memory_inputs(s))

    def _gpus(self, s: Setup) -> list[str]:
        return [f"{s.opts.llama.backend}{i}" for i in range(s.opts.llama.n_gpus)]

    def stages(self, s: Setup) -> list[Stage]:
        """One stage per GPU of the server: the decoder layers load_tensors puts on it (lc.placement), its model
        and (estimated) compute buffers; the rest holds its caches."""
        server, out = self.memory_inputs(s), []
        hp, f = server[:2]
        every = lc.placement(hp, f)[0]
        m, gpus = lc.sizes(*server), tuple(self._gpus(s))
        params = _gguf_params_by_device(s.card, every, lc.tensor_overrides(f))
        for i, (gpu, layers) in enumerate(zip(gpus, _device_layers(tuple(every[:s.card.num_layers]), gpus))):
            weights, compute = m.on(gpu, "model", "lora"), m.on(gpu, "compute")
            out.append(Stage(i, layers, params.get(gpu, 0), weights, 0, compute, 0, 0, _free(s),
                             _free(s) - weights - compute, _NO_SPECS))
        return out

    def held_stages(self, s: Setup, sts: list[Stage]):
        """Per GPU of the server (its stages, in layer order), what a step reads there (``lc.step_views``): the
        GGUF tensors it holds and its caches at -ctk/-ctv. Layers left on the CPU (-ngl) are read there, at host
        memory bandwidth, which the GPU's bound does not count (``host_read_note``); with no layer on a GPU the GPU
        bounds nothing: refused."""
        server = self.memory_inputs(s)
        _no_gpu_layers(*server[:2])
        return list(lc.step_views(*server, s.w_t))

    def host_read_note(self, s: Setup) -> str | None:
        """The model and cache bytes llama.cpp keeps in host memory (-ngl below every layer, --cpu-moe, -ot ...=CPU,
        --no-kv-offload): a step's CPU part, which the GPU bounds leave out."""
        server = self.memory_inputs(s)
        m, (hp, weights) = lc.sizes(*server), (server[0], server[2])
        model, cache = m.on("CPU", "model", "lora"), m.on("CPU", "kv", "recurrent")
        if model <= lc.input_output_bytes(hp, weights)[0] and not cache:
            return None  # only the input layer, which a step gathers one row of per token
        return (f"llama.cpp keeps {fmt_bytes(model)} of the model (the token embedding among it) and "
                f"{fmt_bytes(cache)} of cache in host memory (load_tensors: CPU buffers): the CPU computes those "
                "layers (or their experts) from RAM each step, at a memory bandwidth kvplan does not model, so TTFT "
                "and TPOT are above these GPU bounds, and more so the more stays on the CPU.")

    def pool(self, s: Setup, sts: list[Stage]) -> Pool:
        """The cache llama.cpp allocates at start-up (n_ctx cells, whatever the requests): it fits every GPU or it
        does not; slots of --max-model-len that fit: -np (own cells each), or n_ctx // max_model_len of a unified
        cache."""
        server = self.memory_inputs(s)
        f, m = server[1], lc.sizes(*server)
        c = m.context
        caches = [m.on(gpu, "kv", "recurrent") for gpu in self._gpus(s)]
        lim = max(range(len(sts)), key=lambda i: caches[i] - sts[i].available)
        st, cache = sts[lim], caches[lim]
        fits = fits_whole(m, _free(s), s.max_model_len)  # caches <= available on every GPU
        slots = c.n_seq_max if not c.kv_unified else min(c.n_seq_max, c.n_ctx // s.max_model_len)
        conc = float(slots) if fits else 0.0
        fit = max_context(s.card, f, _free(s), s.w_t.bits, max(c.n_ctx, s.max_model_len))
        # the longest request that fits: a slot's cells at the largest -c that fits (a unified cache: all of them;
        # split slots: lc.resolve_context's share, n_ctx / n_seq_max, in 2026 builds whole multiples of 256)
        if c.n_ctx_seq != c.n_ctx:
            fit = fit // c.n_seq_max if f.rules == "2025-02" else fit // c.n_seq_max // 256 * 256
        per_cell = cache // max(1, c.n_ctx)
        rows = [rank_row(x, cb // max(1, c.n_ctx), c.n_ctx, fit) for x, cb in zip(sts, caches)]
        pool = KVCachePool(available_bytes=st.available, block_size=1, bytes_per_block=per_cell,
                           num_blocks=c.n_ctx, tokens=c.n_ctx, groups=m.caches, padding_layers=0,
                           blocks_per_request=c.n_ctx_seq, allocated_bytes=cache)
        # one request: its slot's share of the cache (-np slots of n_ctx_seq cells; a unified cache shares them)
        return Pool(st, pool, conc, cache // max(1, c.n_seq_max), fits, fit, rows)

    def kv_bytes_per_token(self, s: Setup, p: Pool) -> int:
        """A cell of the limiting GPU's caches: every layer's K and V rows there, at -ctk/-ctv (the rows of its
        KV buffers per cell; recurrent states are per sequence, not per cell)."""
        return p.pool.bytes_per_block

    def kv_dtype_name(self, s: Setup) -> str:
        f = self.flags(s)
        return f.type_k if f.type_k == f.type_v else f"{f.type_k}/{f.type_v}"

    def check_budget(self, s: Setup, sts: list[Stage]) -> None:
        """No refusal: weights that overflow the GPU are an answer (fits false) with the most -ngl that fit
        (``llamacpp_fit``), as llama.cpp's --fit would lower -ngl."""

    def fit(self, s: Setup, quant: str | None = None) -> lc.LlamaFit:
        return _fit(s.card, self.flags(s), _free(s), s.w_t.bits, quant)

    def quant_table(self, s: Setup) -> list[lc.QuantFit] | None:
        """A card without a GGUF: each llama-quantize type's weights, the K/V types it needs and what fits
        (``quant_search``, the rows the plan chooses from), the largest -c and most -ngl at those types (``fit``);
        the plan's own type marked chosen."""
        from kvplan.cost.gguf_quant import quant_weights

        if not quantizable(s.card):
            return None
        chosen, rows = self.flags(s).gguf_quant, []
        for q, g, ok in quant_search(s.card, s.opts.llama, _free(s), s.max_model_len, s.w_t.bits):
            layers, inp, out = quant_weights(s.card, q)
            ft = _fit(s.card, at_context(g, s.max_model_len), _free(s), s.w_t.bits, None)
            rows.append(lc.QuantFit(quant=q, model_bytes=sum(layers) + inp + out - (inp if s.card.tie_embeddings
                                                                                    else 0),
                                    max_n_ctx=ft.max_n_ctx, max_gpu_layers=ft.max_gpu_layers, fits=ok,
                                    type_k=g.type_k, type_v=g.type_v, chosen=q == chosen))
        return rows

    def plan_extras(self, s: Setup) -> dict:
        m = self.memory(s)
        return {"context": m.context, "buffers": m.buffers, "caches": m.caches, "llamacpp_fit": self.fit(s),
                "quants": self.quant_table(s)}

    def activation_estimated(self, s: Setup) -> bool:
        return True

    def requested_rule(self, s: Setup) -> str:
        return "the whole GPU (llama.cpp allocates its buffers directly; --fit keeps 1 GiB free)"

    def activation_rule(self, s: Setup) -> str:
        return "compute buffer, ESTIMATED (llama.cpp measures it at start-up)"

    def pool_summary(self, p: Pool, s: Setup) -> str:
        f = self.flags(s)
        if f.gguf_quant is None:
            return f" (n_ctx {p.pool.tokens:,} cells)"
        kv = f.type_k if f.type_k == f.type_v else f"{f.type_k}/{f.type_v}"
        return f" (n_ctx {p.pool.tokens:,} cells, K/V {kv}; weights GGUF {f.gguf_quant})"

    def search_note(self) -> str | None:
        return (f"{self.display_name}: where the plan picks the GGUF quant (a card without a GGUF, no --gguf-quant), "
                "each layout takes the largest llama-quantize type whose weights and cache fit its GPUs (the weights "
                "column), so layouts of the same GPU count can differ in quant: the order above does not weigh it, "
                "and a smaller quant (lower quality) can come first on price or the TPOT bound. To keep a quant, "
                "give --gguf-quant, or plan the layout with --gpu NAME --pp N.")

    def model_file(self, s: Setup, repo: str) -> str:
        """The GGUF the launch line loads: the card's own, else at a llama-quantize type the Hub repository's name and
        the type (a placeholder for the user's file, ``notes``), else the repository + .gguf."""
        from kvplan.model.gguf import gguf_path_of

        q = self.flags(s).gguf_quant
        return gguf_path_of(s.card) or (f"{repo.rsplit('/', 1)[-1]}-{q}.gguf" if q else repo + ".gguf")

    def launch_command(self, s: Setup, repo: str, revision: str | None = None) -> str:
        f, m = self.flags(s), self.memory(s)
        cmd = ["llama-server", f"-m {self.model_file(s, repo)}", f"-c {m.context.n_ctx}"]
        if f.n_parallel is not None:
            cmd.append(f"-np {f.n_parallel}")
        if f.kv_unified and f.n_parallel is not None:
            cmd.append("-kvu")
        cmd += [f"-ctk {f.type_k}"] if f.type_k != "f16" else []
        cmd += [f"-ctv {f.type_v}"] if f.type_v != "f16" else []
        fa = lc.fa_flag(f)
        cmd += [fa] if fa else []  # the rules' form: a bare switch in 2025-02
        ngl = f.n_gpu_layers
        if _old_default_ngl(f):
            # the 2025-02 llama-server offloads no layer without -ngl (llama_model_default_params().n_gpu_layers = 0
            # until PR #15434, 2025-08, made it 999): the plan sizes every layer on the GPU, so the line says so
            ngl = m.context.n_layer + 1
        cmd += [f"-ngl {ngl}"] if ngl is not None else []
        cmd += ["--swa-full"] if f.swa_full else []
        cmd += [f"-ub {f.n_ubatch}"] if f.n_ubatch != 512 else []
        cmd += [f"-ts {','.join(f'{x:g}' for x in f.tensor_split)}"] if f.tensor_split else []
        cmd += [f"-ot '{p}={b}'" for p, b in f.overrides]
        cmd += ["--cpu-moe"] if f.cpu_moe else []
        cmd += [f"--n-cpu-moe {f.n_cpu_moe}"] if f.n_cpu_moe else []
        cmd += [f"--lora {path}" for path in f.lora]
        return " ".join(cmd)

    def notes(self, s: Setup, p: Pool) -> list[str]:
        m = self.memory(s)
        c = m.context
        out = [f"{self.display_name} ({c.rules} rules): n_ctx {c.n_ctx:,} cells, {c.n_ctx_seq:,} per slot, "
               f"{c.n_seq_max} slot(s){', unified cache' if c.kv_unified else ''}; {c.n_gpu_layers}/{c.n_layer + 1} "
               f"layers on {s.opts.llama.n_gpus} GPU(s). Buffers per device in the JSON (buffers); the compute buffer "
               "is ESTIMATED "
               "(llama.cpp measures it; error on public logs in docs/llamacpp.md); the output buffer is in host "
               "memory."]
        if s.opts.llama.n_ctx is None:
            out.append(f"Slots: neither -c nor -np given, so the plan sizes llama-server for the most slots of "
                       f"--max-model-len that fit: -np {c.n_seq_max} -c {c.n_ctx:,}"
                       + (" -kvu (--kv-unified: one cache of -np x --max-model-len cells the slots share)"
                          if c.kv_unified else "") + " (llama-server alone starts 4 unified slots sharing -c).")
        if s.opts.llama.kv_unified is False and s.opts.llama.n_parallel is None:
            out.append(f"--no-kv-unified without -np: llama-server's auto slots force kv_unified on (tools/server/"
                       f"server.cpp llama_server(), b10644), so its {c.n_seq_max} slots share one cache of "
                       f"{c.n_ctx:,} cells; give -np N for N split slots.")
        ft, f = self.fit(s), self.flags(s)
        moe = "" if ft.min_n_cpu_moe is None else (f"; with every layer on the GPU(s), at least --n-cpu-moe "
                                                   f"{ft.min_n_cpu_moe} (experts of the first layers in host memory)")
        used = f" and the {fmt_bytes(s.context)} already in use (--context-memory)" if s.context else ""
        text = (f"Fit (GPU memory less --fit's 1 GiB margin{used}, {fmt_bytes(ft.budget_bytes)} per GPU): at most -c "
                f"{ft.max_n_ctx:,} with these layers; at most -ngl {ft.max_gpu_layers} at -c {c.n_ctx:,}{moe}.")
        if ft.max_n_ctx < c.n_ctx:  # the line's -c is explicit: common/fit.cpp common_params_fit_impl (b10488)
            # logs "context size set by user to N -> no change", and with -ngl given throws "n_gpu_layers already
            # set by user to N, abort", which common_fit_params reports and llama-server starts with the flags as given
            text += (" The line gives -c and -ngl, so --fit changes neither: llama-server allocates them as planned, "
                     "with less than its 1 GiB margin left free." if f.n_gpu_layers is not None else
                     f" The line gives -c, so --fit keeps it and moves layers to the CPU instead (at most -ngl "
                     f"{ft.max_gpu_layers}); give -ngl to keep them, or a smaller -c.")
        if f.rules == "2025-02":
            text += (" (--fit itself came with llama.cpp PR #16653, late 2025: the 2025-02 llama-server has none, and "
                     "takes -c and -ngl as given.)")
        out.append(text)
        quants = self.quant_table(s)
        if quants:
            out += self.quant_notes(s, quants)
        return out + list(m.notes) + [c.log_line() for c in m.caches]

    def quant_notes(self, s: Setup, quants: list[lc.QuantFit]) -> list[str]:
        """The quant search in words, from its rows (``quant_table``) and the plan's flags."""
        from kvplan.model.origin import hf_repo

        f, given = self.flags(s), s.opts.llama
        at = f"-c {given.n_ctx:,}" if given.n_ctx is not None else f"one slot of {s.max_model_len:,} tokens"
        kv = lambda q: q.type_k if q.type_k == q.type_v else f"{q.type_k}/{q.type_v}"  # noqa: E731
        ok = [f"{q.quant} (K/V {kv(q)})" for q in quants if q.fits]
        text = (f"GGUF quant types that fit with every layer on the GPU at {at} (llama-quantize rules, no imatrix "
                f"overrides), with the K/V cache types each needs: {', '.join(ok) or 'none'}.")
        c = next((q for q in quants if q.chosen), None)
        if c is None:
            return [text + " This plan: the card's weights at --weight-dtype; --gguf-quant sizes one of these."]
        flags = f"-ctk {c.type_k} -ctv {c.type_v}" + (f" {lc.fa_flag(f)}" if f.flash_attn == "on" else "")
        if given.gguf_quant is not None:
            what = f"{c.quant} as given (--gguf-quant)" + ("" if c.fits else ": it does NOT fit")
        elif c.fits:
            what = (f"{c.quant}, the largest that fits" + ("" if c.type_k == c.type_v == "q4_0" else
                                                           " with 8- or 16-bit K/V (a 4-bit cache costs more quality)"))
        else:
            what = f"none fits; sized at the smallest, {c.quant}"
        kv_how = ("as given" if given.is_given("type_k") and given.is_given("type_v") else
                  "searched: f16, then q8_0, then q4_0 with flash attention on")
        text += f" This plan: {what}, with {flags} (K/V {kv_how}; --gguf-quant and -ctk/-ctv choose others)."
        out = [text]
        if f.n_gpu_layers is not None and not given.is_given("n_gpu_layers"):
            out.append(f"-ngl {f.n_gpu_layers}: every layer on the GPU, as sized; without it " + (
                "the 2025-02 llama-server offloads no layer (-ngl 0 by default until PR #15434)." if f.rules == "2025-02"
                else "llama-server's --fit (on by default) keeps 1 GiB free and moves layers to the CPU when less is "
                     "left (the Fit line)."))
        name = self.model_file(s, hf_repo(s.card))
        out.append(f"launch: {name} stands for a GGUF of {hf_repo(s.card)} at {c.quant} (llama-quantize, or a "
                   "published one; an imatrix or --tensor-type file differs: size it with --gguf FILE); give its "
                   "path.")
        return out
