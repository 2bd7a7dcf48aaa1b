"""llama.cpp's memory, to the byte: context padding, K/V and recurrent caches, SWA cells, -ngl placement, per-device
buffers, and the log lines llama.cpp prints for them.

Rules read from llama.cpp's sources (file and function named at each rule); three versions differ:

- ``2025-02`` (c392e509, ~b4750): ``n_ctx = GGML_PAD(n_ctx, flash_attn ? 256 : 32)`` (``llama_kv_cache_get_padding``),
  one unified cache, sliding layers cached in full, ``-ngl N`` offloads the last N repeating layers then the output.
- ``2025-12`` (ec98e2002, vendored by Ollama 2025-12-17): ``n_ctx = GGML_PAD(n_ctx, 256)`` (llama-context.cpp, PR
  #17046); streams per sequence unless ``kv_unified`` (``n_ctx_seq = GGML_PAD(n_ctx / n_seq_max, 256)``); iSWA
  (``llama-kv-cache-iswa.cpp``): ``size_swa = GGML_PAD(min(size_base, n_swa * (unified ? n_seq_max : 1) + n_ubatch),
  256)``; MLA caches K (rope + latent) and V (latent); a hybrid's attention cache has ``n_ctx`` cells per stream.
- ``2026-08`` (b10488, what Ollama ships): MLA caches K only (PR #19067, V-less); a hybrid's attention cache has
  ``n_ctx_seq`` cells; ``-ngl`` offloads the output layer first (``i_gpu_start = n_layer + 1 - n_gpu_layers``).

llama-server's ``-np`` is auto since Nov 2025: without ``-np``, 4 slots and a unified cache (tools/server/server.cpp).
Compute buffers are measured by llama.cpp's scheduler at start-up; kvplan estimates them (``compute_estimate``) and
says so (``estimated``).
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, replace

from pydantic import BaseModel, ConfigDict

from kvplan.cost.llamacpp_results import Buffer, Cache, LlamaContext, LlamaFit, LlamaMemory, QuantFit  # noqa: F401
from kvplan.errors import KvplanError, Refused
from kvplan.model.llama_hparams import LlamaHparams

MIB = 2**20
RULES = ("2025-02", "2025-12", "2026-08")
LATEST = "2026-08"
# (block elements, bytes per block) of the K/V cache types llama.cpp accepts (common/arg.cpp kv_cache_types;
# ggml/src/ggml-common.h static_asserts on the block structs)
KV_TYPES: dict[str, tuple[int, int]] = {
    "f32": (1, 4), "f16": (1, 2), "bf16": (1, 2), "q8_0": (32, 34), "q4_0": (32, 18), "q4_1": (32, 20),
    "iq4_nl": (32, 18), "q5_0": (32, 22), "q5_1": (32, 24),
}
FLASH_ATTN = ("on", "off", "auto")


def pad(x: int, n: int) -> int:
    """GGML_PAD(x, n): x rounded up to a multiple of n."""
    return (x + n - 1) // n * n


def row_size(type_name: str, ne: int) -> int:
    """ggml_row_size(type, ne) = type_size * ne / blck_size (ggml.c)."""
    blck, size = KV_TYPES[type_name]
    return size * ne // blck


@dataclass(frozen=True)
class LlamaFlags:
    """llama-server's memory flags (None: its default). ``n_gpus`` GPUs of backend ``backend`` (0: CPU only)."""

    n_ctx: int | None = None  # -c/--ctx-size; None or 0: the model's training context
    n_parallel: int | None = None  # -np; None: auto (4 slots, unified) from 2025-12 on, 1 before
    kv_unified: bool | None = None  # -kvu; None: on with auto -np, off with an explicit -np
    type_k: str = "f16"  # -ctk
    type_v: str = "f16"  # -ctv
    flash_attn: str = "auto"  # -fa on|off|auto
    n_batch: int = 2048  # -b
    n_ubatch: int = 512  # -ub
    n_gpu_layers: int | None = None  # -ngl; None: all (llama_model_default_params().n_gpu_layers = 999)
    swa_full: bool = False  # --swa-full
    tensor_split: tuple[float, ...] | None = None  # -ts; None: equal shares (identical GPUs' free memory)
    no_kv_offload: bool = False  # -nkvo
    n_gpus: int = 1
    backend: str = "CUDA"
    rules: str = LATEST
    embeddings: bool = False  # an output buffer of n_embd floats per output beside the logits (old Ollama runner)
    gguf_quant: str | None = None  # a card without a GGUF: its weights at this llama-quantize type (Q4_K_M, ...)


def llama_flags(**given) -> LlamaFlags | None:
    """LlamaFlags from the flags given (None: not given; llama-server's defaults fill the rest); None when none is."""
    given = {k: v for k, v in given.items() if v is not None}
    return LlamaFlags(**given) if given else None


@dataclass(frozen=True)
class Context:
    """What llama_context logs: n_seq_max, n_ctx, n_ctx_seq, n_batch, n_ubatch, flash_attn, kv_unified."""

    n_ctx: int
    n_ctx_seq: int
    n_seq_max: int
    n_stream: int
    kv_unified: bool
    n_batch: int
    n_ubatch: int
    flash_attn: bool


def resolve_context(hp: LlamaHparams, f: LlamaFlags) -> Context:
    """n_ctx, n_ctx_seq and streams as llama_context's constructor (and llama-server's -np auto) set them."""
    if f.rules not in RULES:
        raise KvplanError(f"--llamacpp-rules: {f.rules!r}; allowed: {', '.join(RULES)}")
    if f.flash_attn not in FLASH_ATTN:
        raise KvplanError(f"-fa/--flash-attn: {f.flash_attn!r}; allowed: on, off, auto")
    fa = f.flash_attn != "off"  # auto resolves to on where the backend has FA kernels (CPU, CUDA, Metal, Vulkan)
    n_ctx = f.n_ctx or hp.n_ctx_train
    if n_ctx <= 0:
        raise KvplanError("-c/--ctx-size: the GGUF names no context_length; give -c N")
    old = f.rules == "2025-02"
    n_par, unified = f.n_parallel, f.kv_unified
    if n_par is None:  # server.cpp: n_parallel == 1 (auto) -> 4 slots with a unified cache (PR #17997)
        n_par, unified = (1, True) if old else (4, True if unified is None else unified)
    if n_par < 1:
        raise KvplanError(f"-np/--parallel: {n_par}; allowed: a positive number of slots")
    unified = bool(unified) or old  # before streams (2025-02) every sequence shared one cache
    if old:
        n_ctx = pad(n_ctx, 256 if fa else 32)
        n_ctx_seq = n_ctx // n_par
    elif unified:
        n_ctx = pad(n_ctx, 256)
        n_ctx_seq = n_ctx
    else:  # llama-context.cpp: n_ctx_seq = GGML_PAD(n_ctx / n_seq_max, 256); n_ctx = n_ctx_seq * n_seq_max
        n_ctx_seq = pad(pad(n_ctx, 256) // n_par, 256)
        n_ctx = n_ctx_seq * n_par
    n_batch = min(n_ctx, f.n_batch)
    return Context(n_ctx, n_ctx_seq, n_par, 1 if unified else n_par, unified, n_batch, min(n_batch, f.n_ubatch), fa)


def check_types(hp: LlamaHparams, f: LlamaFlags, fa: bool) -> None:
    """What llama_init_from_model refuses (llama-context.cpp): unknown types, a quantized V cache without flash
    attention, a block size that does not divide the head width."""
    for flag, t in (("-ctk/--cache-type-k", f.type_k), ("-ctv/--cache-type-v", f.type_v)):
        if t not in KV_TYPES:
            raise KvplanError(f"{flag}: unsupported cache type {t!r}; allowed: {', '.join(KV_TYPES)}")
    if KV_TYPES[f.type_v][0] > 1 and not fa and not (hp.mla and f.rules == LATEST):
        raise Refused(f"-ctv/--cache-type-v: llama.cpp refuses: quantized V cache was requested, but this requires "
                      f"Flash Attention (V {f.type_v} with -fa off)")
    for flag, t, widths in (("-ctk/--cache-type-k", f.type_k, hp.n_embd_k), ("-ctv/--cache-type-v", f.type_v,
                                                                              hp.n_embd_v)):
        blck = KV_TYPES[t][0]
        heads = [w // hp.n_head_kv[il] for il, w in enumerate(widths) if w and hp.n_head_kv[il]]
        if any(h % blck for h in heads):
            raise Refused(f"{flag}: llama.cpp refuses: {t} cache type with block size {blck} does not divide the "
                          f"head size {min(h for h in heads if h % blck)}")


def placement(hp: LlamaHparams, f: LlamaFlags) -> tuple[list[str], int]:
    """The device of layers 0..n_layer (index n_layer: the output layer) and how many are offloaded.

    llama-model.cpp ``load_tensors``: ``act_gpu_layers = min(n_gpu_layers, n_layer + 1)``; layer il is on a GPU iff
    ``il >= i_gpu_start && il - i_gpu_start < act_gpu_layers`` with ``i_gpu_start = max(n_layer - n_gpu_layers, 0)``
    (2025) or ``max(n_layer + 1 - n_gpu_layers, 0)`` (2026: the output layer first). GPU of an offloaded layer:
    ``upper_bound(splits, (il - i_gpu_start) / act_gpu_layers)`` over the cumulative normalized --tensor-split."""
    n = hp.n_layer
    if f.n_gpus == 0:
        return ["CPU"] * (n + 1), 0
    ngl = 999 if f.n_gpu_layers is None else f.n_gpu_layers
    if ngl < 0:
        raise KvplanError(f"-ngl/--n-gpu-layers: {ngl}; allowed: 0 or more")
    start = max((n + 1 if f.rules == LATEST else n) - ngl, 0)
    act = min(ngl, n + 1)
    shares = list(f.tensor_split) if f.tensor_split else [1.0] * f.n_gpus
    if len(shares) != f.n_gpus or any(s < 0 for s in shares) or not sum(shares):
        raise KvplanError(f"-ts/--tensor-split: {len(shares)} non-negative shares for {f.n_gpus} GPU(s) expected")
    total, acc, splits = sum(shares), 0.0, []
    for s in shares:
        acc += s / total
        splits.append(acc)
    devs = []
    for il in range(n + 1):
        if il >= start and il - start < act:
            devs.append(f"{f.backend}{min(bisect_right(splits, (il - start) / act), f.n_gpus - 1)}")
        else:
            devs.append("CPU")
    return devs, sum(d != "CPU" for d in devs)


def swa_cells(hp: LlamaHparams, f: LlamaFlags, c: Context) -> int:
    """Cells per stream of the sliding layers' cache (llama_kv_cache_iswa ctor)."""
    if f.swa_full or f.rules == "2025-02":
        return c.n_ctx_seq
    return pad(min(c.n_ctx_seq, hp.n_swa * (c.n_seq_max if c.kv_unified else 1) + c.n_ubatch), 256)


def memory(hp: LlamaHparams, f: LlamaFlags, weights: tuple[tuple[int, ...], int, int] | None = None) -> LlamaMemory:
    """Every buffer llama.cpp allocates for ``hp`` under ``f``. ``weights``: (per-layer, input, output) bytes when the
    hparams carry no tensor table (a card's weights at a dtype); the GGUF's own tensor table otherwise."""
    c = resolve_context(hp, f)
    check_types(hp, f, c.flash_attn)
    devs, offloaded = placement(hp, f)
    layer_w, inp_w, out_w = (hp.layer_bytes, hp.input_bytes, hp.output_bytes) if hp.layer_bytes else weights or (
        (0,) * hp.n_layer, 0, 0)
    host = f"{f.backend}_Host" if f.n_gpus else "CPU"
    # (device, kind, cache): each cache allocates its own buffer per device (llama_kv_cache ctor), logged apart
    buffers: dict[tuple[str, str, str], int] = {("CPU", "model", ""): inp_w}

    def add(key: tuple[str, str, str], n: int) -> None:
        buffers[key] = buffers.get(key, 0) + n

    for il in range(hp.n_layer):
        add((devs[il], "model", ""), layer_w[il])
    if devs[hp.n_layer] == "CPU" and hp.layer_bytes:  # mmap: a tied output on the CPU is the file's token_embd
        out_w -= hp.output_dup_bytes
    add((devs[hp.n_layer], "model", ""), out_w)
    caches = []
    notes = []
    kv_dev = lambda il: "CPU" if f.no_kv_offload else devs[il]  # noqa: E731 - offload_kqv = false: K/V on the CPU
    hybrid = any(hp.recurrent) and any(hp.has_kv(il) for il in range(hp.n_layer))
    base_cells = c.n_ctx_seq
    if f.rules == "2025-02" or (hybrid and f.rules == "2025-12" and not c.kv_unified):
        base_cells = c.n_ctx  # one cache of n_ctx cells (2025-02); create_memory passed cparams.n_ctx (ec98e2002)
    iswa = f.rules != "2025-02" and any(hp.swa[il] for il in hp.kv_layers)  # before iSWA: sliding layers in full
    groups = [("kv", [il for il in hp.kv_layers if not (iswa and hp.swa[il])], base_cells)]
    if iswa:
        groups.append(("kv_swa", [il for il in hp.kv_layers if hp.swa[il]], swa_cells(hp, f, c)))
    v_less = hp.mla and f.rules == LATEST  # PR #19067: MLA keeps the latent in K only
    v_type = f.type_k if v_less else f.type_v
    fa_width = max((hp.n_embd_v[il] for il in hp.kv_layers), default=0)
    for kind, layers, cells in groups:
        if not layers and kind == "kv_swa":
            continue
        k = v = 0
        for il in layers:
            kb = row_size(f.type_k, hp.n_embd_k[il]) * cells * c.n_stream
            width = hp.n_embd_v[il] if c.flash_attn else fa_width  # v_trans pads V to the widest layer
            vb = 0 if v_less else row_size(f.type_v, width) * cells * c.n_stream
            k, v = k + kb, v + vb
            add((kv_dev(il), "kv", kind), kb + vb)
        if layers or not any(hp.recurrent):
            caches.append(Cache(kind=kind, cells=cells, layers=len(layers), seqs=c.n_seq_max, streams=c.n_stream,
                                k_type=f.type_k, v_type=v_type, k_bytes=k, v_bytes=v))
    if v_less:
        notes.append("MLA: llama.cpp keeps the latent in K only since PR #19067 (2026-01); -ctv does not apply.")
    rec = [il for il in range(hp.n_layer) if hp.recurrent[il]]
    if rec:  # llama-memory-recurrent.cpp: mem_size = max(1, n_seq_max); R and S always f32
        cells = max(1, c.n_seq_max)
        r = s = 0
        for il in rec:
            rb, sb = hp.n_embd_r * cells * 4, hp.n_embd_s * cells * 4
            r, s = r + rb, s + sb
            dev = "CPU" if f.no_kv_offload else devs[il]
            add((dev, "recurrent", ""), rb + sb)
        caches.append(Cache(kind="recurrent", cells=cells, layers=hp.n_layer, seqs=c.n_seq_max, streams=1,
                            k_type="f32", v_type="f32", k_bytes=r, v_bytes=s))
    # llama_context::output_reserve: n_outputs_max = n_seq_max; logits (+ embeddings) in f32, in host memory
    out = (hp.n_vocab + (hp.n_embd if f.embeddings else 0)) * c.n_seq_max * 4
    buffers[(host, "output", "")] = out
    gpu0 = f"{f.backend}0" if offloaded else "CPU"
    buffers[(gpu0, "compute", "")] = compute_estimate(hp, c, f)
    rows = [Buffer(device=d, kind=k, bytes=b, estimated=k == "compute") for (d, k, _), b in buffers.items()
            if b or k in ("model", "compute")]
    ctx = LlamaContext(n_ctx=c.n_ctx, n_ctx_seq=c.n_ctx_seq, n_seq_max=c.n_seq_max, kv_unified=c.kv_unified,
                       flash_attn=c.flash_attn, n_gpu_layers=offloaded, n_layer=hp.n_layer, rules=f.rules)
    return LlamaMemory(context=ctx, caches=caches, buffers=rows, notes=notes)


def compute_estimate(hp: LlamaHparams, c: Context, f: LlamaFlags) -> int:
    """The compute buffer of the first device, ESTIMATED: llama.cpp measures it (ggml-alloc over the reserved graph).
    The dominant term of the worst-case pp graph (n_ubatch tokens, every one an output in builds to 2025-12): the f32
    logits, n_vocab x n_ubatch x 4, or without flash attention the f32 KQ scores, n_ctx x n_ubatch x n_head x 4,
    whichever is larger. Error on the public logs (docs/llamacpp.md): -7 to -48 MiB to 2025-12; 2026 builds reserve
    one output per sequence and measure less (Llama-3-8B on Metal: 124 MiB logged, 250.5 estimated)."""
    logits = hp.n_vocab * c.n_ubatch * 4
    kq = 0 if c.flash_attn else c.n_ctx * c.n_ubatch * max(hp.n_head, default=0) * 4
    return max(logits, kq)


FIT_TARGET = 2**30  # common/common.h fit_params_target: --fit leaves 1 GiB free per device


def gpu_bytes(m: LlamaMemory, backend: str = "CUDA") -> int:
    """What the first GPU holds: its model, KV, recurrent and (estimated) compute buffers."""
    return sum(b.bytes for b in m.buffers if b.device == f"{backend}0")


def fit(hp: LlamaHparams, f: LlamaFlags, budget: int, weights=None) -> LlamaFit:
    """The largest context and the most offloaded layers that fit ``budget`` bytes on the first GPU: what llama.cpp's
    --fit steps 2 (context) and 3 (layers) look for (src/llama.cpp llama_params_fit_impl), over kvplan's byte
    model (compute buffer estimated)."""
    ok = lambda **kw: gpu_bytes(memory(hp, replace(f, **kw), weights), f.backend) <= budget  # noqa: E731
    lo, hi = 0, max(1, (hp.n_ctx_train or f.n_ctx or 256) // 256)
    while lo < hi:  # n_ctx in units of 256 cells
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if ok(n_ctx=mid * 256) else (lo, mid - 1)
    layers = 0
    for ngl in range(hp.n_layer + 2):
        if not ok(n_gpu_layers=ngl):
            break
        layers = ngl
    return LlamaFit(budget_bytes=budget, max_n_ctx=lo * 256, max_gpu_layers=min(layers, hp.n_layer + 1))
