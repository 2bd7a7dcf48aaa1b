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

llama-server's ``-np`` is auto since Nov 2025: without ``-np``, 4 slots and a unified cache, even with --no-kv-unified
(tools/server/server.cpp, ``AUTO_SLOTS``).
Compute buffers are measured by llama.cpp's scheduler at start-up; kvplan estimates them (``compute_estimate``) and
says so (``estimated``).
"""

from __future__ import annotations

import math
import re
from bisect import bisect_right
from dataclasses import dataclass, replace
from functools import lru_cache
from operator import attrgetter

from pydantic import BaseModel, ConfigDict

from kvplan.cost.llamacpp_results import Buffer, Cache, LlamaContext, LlamaFit, LlamaMemory, QuantFit  # noqa: F401
from kvplan.errors import KvplanError, Refused
from kvplan.model.llama_hparams import INPUT_TENSORS, LlamaHparams
from kvplan.units import f32

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
MAX_SEQ = 256  # src/llama-cparams.h LLAMA_MAX_SEQ: llama_init_from_model refuses n_seq_max above it


def pad(x: int, n: int) -> int:
    """GGML_PAD(x, n): x rounded up to a multiple of n."""
    return (x + n - 1) // n * n


def row_size(type_name: str, ne: int) -> int:
    """ggml_row_size(type, ne) = type_size * ne / blck_size (ggml.c)."""
    blck, size = KV_TYPES[type_name]
    return size * ne // blck


class Weights(tuple):
    """A card's weight bytes as ``memory`` takes them (per-layer, input, output[, per-layer expert tensors]): a tuple
    whose hash is computed once (the caches of this module key on it, a few thousand look-ups a search; a tuple
    hashes its hundreds of items again each time). Equal to, and hashed as, the plain tuple."""

    def __hash__(self) -> int:
        h = self.__dict__.get("_hash")
        if h is None:
            h = self.__dict__["_hash"] = tuple.__hash__(self)
        return h


@dataclass(frozen=True)
class LlamaFlags:
    """llama-server's memory flags (None: its default). ``n_gpus`` GPUs of backend ``backend`` (0: CPU only)."""

    n_ctx: int | None = None  # -c/--ctx-size; None or 0: the model's training context
    n_parallel: int | None = None  # -np; None: auto (4 slots, unified) from 2025-12 on, 1 before
    kv_unified: bool | None = None  # -kvu; None: off with an explicit -np; auto -np forces it on (AUTO_SLOTS)
    type_k: str = "f16"  # -ctk
    type_v: str = "f16"  # -ctv
    flash_attn: str = "auto"  # -fa on|off|auto
    n_batch: int = 2048  # -b
    n_ubatch: int = 512  # -ub
    n_gpu_layers: int | None = None  # -ngl; None: all (llama_model_default_params().n_gpu_layers = 999)
    swa_full: bool = False  # --swa-full
    tensor_split: tuple[float, ...] | None = None  # -ts; None: equal shares (identical GPUs' free memory)
    overrides: tuple[tuple[str, str], ...] = ()  # -ot/--override-tensor PATTERN=BUFFER_TYPE, in order
    cpu_moe: bool = False  # --cpu-moe: every layer's expert tensors in host memory
    n_cpu_moe: int = 0  # --n-cpu-moe N: the expert tensors of the first N layers in host memory
    lora: tuple[str, ...] = ()  # --lora FILE: adapter GGUFs loaded at start-up
    lora_rank: int = 0  # no adapter file: an adapter of this rank (f16, convert_lora_to_gguf.py's default type)
    lora_targets: tuple[str, ...] = ("attn_q", "attn_v")  # ... on these tensors of every layer (PEFT's llama default)
    no_kv_offload: bool = False  # -nkvo
    n_gpus: int = 1
    backend: str = "CUDA"
    rules: str = LATEST
    embeddings: bool = False  # an output buffer of n_embd floats per output beside the logits (old Ollama runner)
    gguf_quant: str | None = None  # a card without a GGUF: its weights at this llama-quantize type (Q4_K_M, ...)
    given: frozenset[str] = frozenset()  # the flags the user gave (llama_flags): a plan searches only the others

    def replaced(self, **changes) -> LlamaFlags:
        """``dataclasses.replace(self, **changes)`` without its walk over the fields and ``__init__`` (the -c, -np and
        -ngl searches build thousands); TypeError for a name that is no field."""
        if not changes.keys() <= self.__dataclass_fields__.keys():
            raise TypeError(f"LlamaFlags has no field {sorted(changes.keys() - self.__dataclass_fields__.keys())[0]!r}")
        new = object.__new__(LlamaFlags)
        state = {**self.__dict__, **changes}
        state.pop("_hash", None)
        if not changes.keys() <= _CONTEXT_FIELDS:  # a change of the context's size keeps the flags less it
            state.pop("_without_context", None)
        object.__setattr__(new, "__dict__", state)
        return new

    def __hash__(self) -> int:
        """The fields' hash, computed once: the searches look the same flags up in several caches. Flags with a
        context (-c, -np, -kvu) hash as their ``without_context`` twin's hash and those three values (equal flags
        have equal twins): the -c and -np searches' flags, which share the twin, hash in three values, not all."""
        d = self.__dict__
        h = d.get("_hash")
        if h is None:
            if d["n_ctx"] is None and d["n_parallel"] is None and d["kv_unified"] is None:
                h = hash(_flag_values(self))
            else:
                h = hash((hash(self.without_context()), d["n_ctx"], d["n_parallel"], d["kv_unified"]))
            d["_hash"] = h
        return h

    def without_context(self) -> LlamaFlags:
        """These flags less the context's size (-c, -np, -kvu), which neither the model's buffers nor a step's reads
        depend on (``loaded``). Built once, and kept by the flags ``replaced`` makes from these by changing the
        context alone (the -c and -np searches' flags share it, and its cached hash)."""
        out = self.__dict__.get("_without_context")
        if out is None:
            out = self.__dict__["_without_context"] = self.replaced(n_ctx=None, n_parallel=None, kv_unified=None)
        return out

    def is_given(self, name: str) -> bool:
        """Whether the flag ``name`` (a field) was given: named by ``llama_flags``, or set to other than its default
        (flags built in Python)."""
        return name in self.given or getattr(self, name) != self.__dataclass_fields__[name].default


_flag_values = attrgetter(*LlamaFlags.__dataclass_fields__)  # the fields' values, in order
_CONTEXT_FIELDS = frozenset({"n_ctx", "n_parallel", "kv_unified"})  # what ``without_context`` drops


def llama_flags(**given) -> LlamaFlags | None:
    """LlamaFlags from the flags given (None: not given; llama-server's defaults fill the rest); None when none is.
    ``tensor_split`` may be llama.cpp's text ("3,1"), ``overrides`` its -ot values ("exps=CPU,attn=CUDA0")."""
    # not given: None, an unset switch (False) or an empty list; a 0 is a value (-ngl 0: every layer on the CPU)
    given = {k: v for k, v in given.items()  # --kv-unified/--no-kv-unified is three-state: its False is a value
             if v is not None and (v is not False or k == "kv_unified")
             and not (isinstance(v, (list, tuple)) and not v)}
    for key, flag in (("n_ctx", "-c/--ctx-size"), ("n_ubatch", "-ub/--ubatch-size"), ("n_parallel", "-np/--parallel")):
        value = given.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0
                                  or (key == "n_parallel" and value == 0) or value > 2**31 - 1):
            raise KvplanError(f"{flag}: {value!r}; allowed: an integer from {1 if key == 'n_parallel' else 0} to "
                              f"{2**31 - 1:,}" + (" (0: the model's training context)" if key == "n_ctx" else
                                                  " (0: -b's n_batch)" if key == "n_ubatch" else ""))
    if isinstance(given.get("tensor_split"), str):
        given["tensor_split"] = parse_split(given["tensor_split"])
    if given.get("overrides") and not isinstance(given["overrides"][0], tuple):
        given["overrides"] = parse_overrides(given["overrides"])
    if isinstance(given.get("lora_targets"), str):
        given["lora_targets"] = tuple(t.strip() for t in given["lora_targets"].split(",") if t.strip())
    if given.get("lora"):
        given["lora"] = tuple(given["lora"])
    if given.get("tensor_split") and "n_gpus" not in given:  # one share per GPU
        given["n_gpus"] = len(given["tensor_split"])
    return LlamaFlags(**given, given=frozenset(given)) if given else None


# --kv-dtype -> the -ctk/-ctv type of the same bytes (common/arg.cpp kv_cache_types: f32, f16, bf16, q8_0, ...)
KV_DTYPE_TYPES = {"fp32": "f32", "fp16": "f16", "bf16": "bf16"}


def cache_types(kv_dtype: str | None, f: LlamaFlags | None) -> tuple[str | None, LlamaFlags | None]:
    """--kv-dtype and -ctk/-ctv as one choice: a given --kv-dtype (fp32, fp16, bf16) is -ctk and -ctv of that type
    (given, so a plan searches no other); -ctk and -ctv given alike in one of those types, without --kv-dtype, are
    that --kv-dtype. KvplanError where both are given and differ; a --kv-dtype llama.cpp has no cache type for is
    left for the runtime's dtype check."""
    from kvplan.model.dtypes import parse_dtype

    if kv_dtype is None:
        if f is not None and f.is_given("type_k") and f.is_given("type_v") and f.type_k == f.type_v:
            kv_dtype = next((d for d, t in KV_DTYPE_TYPES.items() if t == f.type_k), None)
        return kv_dtype, f
    t = KV_DTYPE_TYPES.get(parse_dtype(kv_dtype, what="--kv-dtype").name)
    if t is None:
        return kv_dtype, f
    f = f or LlamaFlags()
    for name, flag in (("type_k", "-ctk"), ("type_v", "-ctv")):
        if f.is_given(name) and getattr(f, name) != t:
            raise KvplanError(f"--kv-dtype: {kv_dtype} is llama.cpp's {flag} {t}, but {flag} {getattr(f, name)} "
                              f"was given; allowed: one of them, or both naming the same type")
    return kv_dtype, replace(f, type_k=t, type_v=t, given=f.given | {"type_k", "type_v"})


def parse_split(text: str) -> tuple[float, ...]:
    """-ts/--tensor-split "3,1" (common/arg.cpp: split on , or /, each a float)."""
    try:
        shares = tuple(float(x) for x in re.split(r"[,/]", text.strip()))
    except ValueError:
        shares = ()
    if not shares or any(not 0 <= s < math.inf for s in shares) or not sum(shares):
        raise KvplanError(f"-ts/--tensor-split: {text[:40]!r}; allowed: non-negative shares per GPU, e.g. 3,1")
    return shares


def parse_overrides(values) -> tuple[tuple[str, str], ...]:
    """-ot/--override-tensor values: "PATTERN=BUFFER_TYPE[,PATTERN=BUFFER_TYPE...]" (common/arg.cpp)."""
    out = []
    for value in values:
        for item in str(value).split(","):
            pattern, sep, buft = item.partition("=")
            if not sep or not pattern or not buft:
                raise KvplanError(f"-ot/--override-tensor: {item[:40]!r}; allowed: PATTERN=BUFFER_TYPE, e.g. "
                                  "exps=CPU")
            out.append((pattern, buft))
    return tuple(out)


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


def ctx_padding(f: LlamaFlags) -> int:
    """What llama_context pads -c to (``resolve_context``): 256 cells, or 32 without flash attention in 2025-02
    builds (``llama_kv_cache_get_padding``; flash attention off unless -fa was given then, ``flash_on``). Every
    buffer depends on -c through the padded figure only."""
    return 32 if f.rules == "2025-02" and not flash_on(f) else 256


def flash_on(f: LlamaFlags) -> bool:
    """Whether llama.cpp runs flash attention. 2025-02 (c392e509): only with the bare switch -fa (common/arg.cpp
    ``{"-fa", "--flash-attn"}`` sets ``params.flash_attn = true``; common.h default false), which kvplan holds as
    "on". From PR #15434 (2025-08, "llama: use FA + max. GPU layers by default") -fa takes on|off|auto, default
    auto, which resolves to on where the backend has FA kernels (CPU, CUDA, Metal, Vulkan)."""
    return f.flash_attn == "on" if f.rules == "2025-02" else f.flash_attn != "off"


def fa_flag(f: LlamaFlags) -> str | None:
    """-fa on the launch line in the form of ``f.rules``' llama.cpp: 2025-02 the bare switch for on and nothing for
    off (its default); later ``-fa on|off``, nothing for auto (the default). ``flash_on`` has the sources."""
    if f.rules == "2025-02":
        return "-fa" if f.flash_attn == "on" else None
    return None if f.flash_attn == "auto" else f"-fa {f.flash_attn}"


# Flags the 2025-02 rules' llama.cpp (c392e509, 2025-02-20, ~b4750) does not have, each with the llama.cpp PR that
# added its option to common/arg.cpp: kvplan refuses them by name under those rules (llama.cpp's parser would reject
# the line: "error: invalid argument"). All five are in the 2025-12 (ec98e2002) and 2026-08 (b10488) builds.
NOT_IN_2025_02 = (
    ("kv_unified", "-kvu/--kv-unified, --no-kv-unified", "PR #14363 (2025-07, per-sequence KV streams; before it "
     "every slot had n_ctx / -np cells of one shared cache)"),
    ("swa_full", "--swa-full", "PR #13194 (2025-05, SWA cache; before it sliding layers were cached in full)"),
    ("overrides", "-ot/--override-tensor", "PR #11397 (2025-04)"),
    ("cpu_moe", "--cpu-moe", "PR #15077 (2025-08)"),
    ("n_cpu_moe", "--n-cpu-moe", "PR #15077 (2025-08)"),
)


def check_era(f: LlamaFlags) -> None:
    """KvplanError naming a flag given that the llama.cpp of ``f.rules`` does not have (``NOT_IN_2025_02``), or a
    value it does not take (-fa auto before PR #15434, ``flash_on``)."""
    if f.rules != "2025-02":
        return
    for field, flag, added in NOT_IN_2025_02:
        if field in f.given:
            raise KvplanError(f"{flag}: not an option of llama.cpp under --llamacpp-rules 2025-02 (c392e509, ~b4750): "
                              f"added by {added}; allowed: leave it out, or --llamacpp-rules 2025-12 or later")
    if "flash_attn" in f.given and f.flash_attn == "auto":
        raise KvplanError("-fa/--flash-attn: 'auto' is not a value under --llamacpp-rules 2025-02 (c392e509: -fa is "
                          "a switch, off unless given; on/off/auto came with PR #15434, 2025-08); allowed: on, off")


# llama-server without -np: 4 slots and one unified cache, forced over -kvu/--no-kv-unified. tools/server/server.cpp
# ``llama_server()`` at b10644 (d7a207411) and master 00dd0816: ``if (params.n_parallel < 0) { params.n_parallel = 4;
# params.kv_unified = true; }`` with -np's server default -1 (common/arg.cpp, PR #17997, 2025-12); --no-kv-unified
# only sets ``params.kv_unified = false`` before it (arg.cpp ``{"-no-kvu", "--no-kv-unified"}``). From PR #16736
# (2025-11) to #17997 ``main()`` tested ``n_parallel == 1 && kv_unified == false``, which --no-kv-unified meets too.
# The 2025-12 and 2026-08 rules (ec98e2002, b10488) take it; 2025-02 had no auto slots (-np 1, one cache). ec98e2002
# (2025-12-16) has #17997 (release b7433): Ollama's copy of it (49a9c9ba6, FETCH_HEAD=ec98e2002) has the flat
# LLM_TENSOR_NAMES of PR #18051 (b7434), so an explicit -np 1 is one slot there, not #16736's 4 (issue #17300, b7079).
AUTO_SLOTS = (4, True)


def resolve_context(hp: LlamaHparams, f: LlamaFlags) -> Context:
    """n_ctx, n_ctx_seq and streams as llama_context's constructor (and llama-server's -np auto) set them."""
    if f.rules not in RULES:
        raise KvplanError(f"--llamacpp-rules: {f.rules!r}; allowed: {', '.join(RULES)}")
    if f.flash_attn not in FLASH_ATTN:
        raise KvplanError(f"-fa/--flash-attn: {f.flash_attn!r}; allowed: on, off, auto")
    check_era(f)
    fa = flash_on(f)
    n_ctx = f.n_ctx or hp.n_ctx_train
    if n_ctx <= 0:
        raise KvplanError("-c/--ctx-size: the GGUF names no context_length; give -c N")
    old = f.rules == "2025-02"
    n_par, unified = f.n_parallel, f.kv_unified
    if n_par is None:  # -np not given: llama-server's auto slots (AUTO_SLOTS), whatever --no-kv-unified said
        n_par, unified = (1, True) if old else AUTO_SLOTS
    if not 1 <= n_par <= MAX_SEQ:
        raise KvplanError(f"-np/--parallel: {n_par}; allowed: 1 to {MAX_SEQ} slots (llama.cpp: n_seq_max must be "
                          f"<= {MAX_SEQ})")
    unified = bool(unified) or old  # before streams (2025-02) every sequence shared one cache
    n_ctx = pad(n_ctx, ctx_padding(f))
    if old:
        n_ctx_seq = n_ctx // n_par
    elif unified:
        n_ctx_seq = n_ctx
    else:  # llama-context.cpp: n_ctx_seq = GGML_PAD(n_ctx / n_seq_max, 256); n_ctx = n_ctx_seq * n_seq_max
        n_ctx_seq = pad(n_ctx // n_par, 256)
        n_ctx = n_ctx_seq * n_par
    n_batch = min(n_ctx, f.n_batch)
    # llama-context.cpp: cparams.n_ubatch = min(n_batch, params.n_ubatch == 0 ? params.n_batch : params.n_ubatch)
    ubatch = n_batch if f.n_ubatch == 0 else min(n_batch, f.n_ubatch)
    return Context(n_ctx, n_ctx_seq, n_par, 1 if unified else n_par, unified, n_batch, ubatch, fa)


def check_types(hp: LlamaHparams, f: LlamaFlags, fa: bool) -> None:
    """What llama_init_from_model refuses (llama-context.cpp): unknown types, a quantized V cache without flash
    attention, a block size that does not divide the head width."""
    for flag, t in (("-ctk/--cache-type-k", f.type_k), ("-ctv/--cache-type-v", f.type_v)):
        if t not in KV_TYPES:
            raise KvplanError(f"{flag}: unsupported cache type {t!r}; allowed: {', '.join(KV_TYPES)}")
    if KV_TYPES[f.type_v][0] > 1 and not fa and not (hp.mla and f.rules == LATEST):
        raise Refused(f"-ctv/--cache-type-v: llama.cpp refuses: quantized V cache was requested, but this requires "
                      f"Flash Attention (V {f.type_v} with -fa off)")
    for flag, t, kv in (("-ctk/--cache-type-k", f.type_k, "k"), ("-ctv/--cache-type-v", f.type_v, "v")):
        bad = _undivided_head(hp, kv, KV_TYPES[t][0])
        if bad is not None:
            raise Refused(f"{flag}: llama.cpp refuses: {t} cache type with block size {KV_TYPES[t][0]} does not divide "
                          f"the head size {bad}")


@lru_cache(maxsize=256)
def _undivided_head(hp: LlamaHparams, kv: str, blck: int) -> int | None:
    """The smallest K (``kv`` "k") or V head width of the layers that cache one that ``blck`` does not divide."""
    widths = hp.n_embd_k if kv == "k" else hp.n_embd_v
    heads = [w // hp.n_head_kv[il] for il, w in enumerate(widths) if w and hp.n_head_kv[il]]
    return min((h for h in heads if h % blck), default=None)


def split_points(shares: list[float]) -> list[float]:
    """llama-model.cpp ``load_tensors``: the running sums of the --tensor-split shares (given as floats), each divided
    by their total, in float: ``splits[i] = (s_0 + ... + s_i) / sum``."""
    acc, sums = 0.0, []
    for s in shares:
        acc = f32(acc + f32(s))
        sums.append(acc)
    return [f32(x / acc) for x in sums]


def placement(hp: LlamaHparams, f: LlamaFlags) -> tuple[list[str], int]:
    """The device of layers 0..n_layer (index n_layer: the output layer) and how many are offloaded.

    llama-model.cpp ``load_tensors``: ``act_gpu_layers = min(n_gpu_layers, n_layer + 1)``; layer il is on a GPU iff
    ``il >= i_gpu_start && il - i_gpu_start < act_gpu_layers`` with ``i_gpu_start = max(n_layer - n_gpu_layers, 0)``
    (2025) or ``max(n_layer + 1 - n_gpu_layers, 0)`` (2026: the output layer first). GPU of an offloaded layer
    (``get_layer_buft_list``): ``upper_bound(splits, float(il - i_gpu_start) / act_gpu_layers)`` over the split
    points of --tensor-split (``split_points``; without -ts each device's free memory: equal shares here, identical
    GPUs). So an even split of 33 offloaded layers puts 17 on the first GPU."""
    devs, offloaded = _placement(hp.n_layer, f.n_gpus, f.n_gpu_layers, f.tensor_split, f.rules, f.backend)
    return list(devs), offloaded


@lru_cache(maxsize=4096)
def _placement(n: int, n_gpus: int, n_gpu_layers: int | None, tensor_split: tuple[float, ...] | None, rules: str,
               backend: str) -> tuple[tuple[str, ...], int]:
    """``placement`` of what it depends on (the -ngl, -ts and device flags), once per value: the -ngl and -c searches
    ask for the same placement for every quant and context."""
    if n_gpus == 0:
        return ("CPU",) * (n + 1), 0
    ngl = 999 if n_gpu_layers is None else n_gpu_layers
    if ngl < 0:
        raise KvplanError(f"-ngl/--n-gpu-layers: {ngl}; allowed: 0 or more")
    start = max((n + 1 if rules == LATEST else n) - ngl, 0)
    act = min(ngl, n + 1)
    shares = list(tensor_split) if tensor_split else [1.0] * n_gpus
    if len(shares) != n_gpus or any(s < 0 for s in shares) or not sum(shares):
        raise KvplanError(f"-ts/--tensor-split: {len(shares)} non-negative shares for {n_gpus} GPU(s) expected "
                          "(one per GPU of the server, not all zero)")
    splits = split_points(shares)
    devs = []
    for il in range(n + 1):
        if il >= start and il - start < act:
            devs.append(f"{backend}{min(bisect_right(splits, f32((il - start) / act)), n_gpus - 1)}")
        else:
            devs.append("CPU")
    return tuple(devs), sum(d != "CPU" for d in devs)


# common/common.h (ggml-org/llama.cpp 001d906a): LLM_FFN_EXPS_REGEX, what --cpu-moe overrides to the CPU buffer type,
# and llm_ffn_block_regex(i, ...) = "blk\\.%d" + it, what --n-cpu-moe N adds for each of the first N layers
EXPS_REGEX = r"\.ffn_(up|down|gate|gate_up)_(ch|)exps"


def tensor_overrides(f: LlamaFlags) -> list[tuple[re.Pattern, str]]:
    """The buffer-type overrides in llama.cpp's order (common/arg.cpp pushes each flag's overrides onto
    ``tensor_buft_overrides`` as parsed; kvplan takes -ot first, then --cpu-moe, then --n-cpu-moe, so an -ot pattern
    keeps priority as PR #15077 documents). Buffer types: CPU or one of the server's GPUs."""
    allowed = ["CPU"] + [f"{f.backend}{i}" for i in range(f.n_gpus)]
    out = []
    if f.n_cpu_moe < 0:
        raise KvplanError(f"--n-cpu-moe: {f.n_cpu_moe}; allowed: 0 or more layers")
    pairs = list(f.overrides) + ([(EXPS_REGEX, "CPU")] if f.cpu_moe else []) + [
        (rf"blk\.{i}{EXPS_REGEX}", "CPU") for i in range(f.n_cpu_moe)]
    for pattern, buft in pairs:
        if buft not in allowed:
            raise KvplanError(f"-ot/--override-tensor: buffer type {buft!r} for {pattern!r}; allowed: "
                              f"{', '.join(allowed)}")
        try:
            out.append((re.compile(pattern), buft))
        except re.error as e:
            raise KvplanError(f"-ot/--override-tensor: {pattern!r} is not a regular expression ({e.msg})") from e
    return out


def lora_device(base: str, devs: list[str], rules: list[tuple[re.Pattern, str]]) -> str:
    """The device of the model tensor ``base`` (llama_adapter_lora_init_impl: ``ggml_backend_buffer_get_type(
    model_tensor->buffer)``; a CPU repack buffer falls back to the CPU): the input layer on the CPU, a block's tensor
    on its override's or its layer's device, the rest with the output layer. Tensor alignment padding (32 B CPU,
    128 B CUDA) is not added, as for the model buffers."""
    if base.startswith(INPUT_TENSORS):
        return "CPU"
    m = re.match(r"blk\.(\d+)\.", base)
    if m and int(m.group(1)) < len(devs) - 1:
        return override_device(base, rules) or devs[int(m.group(1))]
    return devs[-1]


def override_device(name: str, rules: list[tuple[re.Pattern, str]]) -> str | None:
    """llama-model.cpp ``create_tensor``: the first override whose pattern ``std::regex_search``es the tensor's name
    sets its buffer type (then ``break``); None: the layer's device."""
    for pattern, buft in rules:
        if pattern.search(name):
            return buft
    return None


def swa_cells(hp: LlamaHparams, f: LlamaFlags, c: Context) -> int:
    """Cells per stream of the sliding layers' cache (llama_kv_cache_iswa ctor)."""
    if f.swa_full or f.rules == "2025-02":
        return c.n_ctx_seq
    return pad(min(c.n_ctx_seq, hp.n_swa * (c.n_seq_max if c.kv_unified else 1) + c.n_ubatch), 256)


def layer_tensors(hp: LlamaHparams, weights) -> list[tuple[tuple[str, int], ...]]:
    """Each layer's weights as (tensor name, bytes): the GGUF's tensor table, or for a card its routed experts named
    as the converter names them (``blk.N.ffn_{gate,up,down}_exps.weight``) and the rest of the layer as ``blk.N``."""
    if hp.layer_tensors:
        return list(hp.layer_tensors)
    layer_w = weights[0] if weights else (0,) * hp.n_layer
    experts = weights[3] if weights and len(weights) > 3 else ((),) * hp.n_layer
    return [tuple(experts[il]) + ((f"blk.{il}", layer_w[il] - sum(b for _, b in experts[il])),)
            for il in range(hp.n_layer)]


@lru_cache(maxsize=1024)
def _model_buffers(hp: LlamaHparams, weights, devs: tuple[str, ...], rules: tuple) -> tuple[tuple[str, int], ...]:
    """The layers' model bytes per device, in the order llama.cpp first meets each device (its buffers' order): each
    tensor on its override's device (``override_device``) or its layer's."""
    out: dict[str, int] = {}
    if not rules:  # each layer's tensors on its device: its total
        for dev, total in zip(devs, _layer_totals(hp, weights)):
            if total is not None:
                out[dev] = out.get(dev, 0) + total
        return tuple(out.items())
    for il, tensors in enumerate(layer_tensors(hp, weights)):
        for name, nbytes in tensors:
            dev = override_device(name, rules) or devs[il]
            out[dev] = out.get(dev, 0) + nbytes
    return tuple(out.items())


@lru_cache(maxsize=256)
def _layer_totals(hp: LlamaHparams, weights) -> tuple[int | None, ...]:
    """Each layer's tensor bytes (None: a layer without tensors, which no buffer meets): a card's per-layer weights
    as given (``layer_tensors`` splits them into tensors that sum to them)."""
    if not hp.layer_tensors:
        return tuple(weights[0][:hp.n_layer]) if weights else (0,) * hp.n_layer
    return tuple(sum(b for _, b in tensors) if tensors else None for tensors in layer_tensors(hp, weights))


@dataclass(frozen=True)
class CacheLayers:
    """Which layers hold which cache (``memory``): a hybrid (recurrent layers beside K/V ones), iSWA (sliding layers
    in a cache of their own, from 2025-12), the full and sliding K/V layers, the recurrent layers."""

    hybrid: bool
    iswa: bool
    full: tuple[int, ...]
    swa: tuple[int, ...]
    recurrent: tuple[int, ...]
    empty: int = 0  # full-cache layers of 0 K/V heads (deci's attention-free layers): 0-byte K/V, yet counted


@lru_cache(maxsize=256)
def _cache_layers(hp: LlamaHparams, rules: str) -> CacheLayers:
    recurrent = tuple(il for il in range(hp.n_layer) if hp.recurrent[il])
    hybrid = bool(recurrent) and any(hp.has_kv(il) for il in range(hp.n_layer))
    iswa = rules != "2025-02" and any(hp.swa[il] for il in hp.kv_layers)  # before iSWA: sliding layers in full
    # llama_kv_cache lists every layer its filter keeps, a layer of 0 K/V heads too (its K and V 0 elements wide: the
    # deci Nemotron GGUFs' attention-free layers; llama.cpp logs "4 layers" for head_count_kv [4, 0, 1, 2])
    empty = sum((hp.attention[il] if hp.attention else not hp.recurrent[il]) and not hp.n_head_kv[il]
                and not (iswa and hp.swa[il]) for il in range(hp.n_layer))
    return CacheLayers(hybrid, iswa, tuple(il for il in hp.kv_layers if not (iswa and hp.swa[il])),
                       tuple(il for il in hp.kv_layers if hp.swa[il]) if iswa else (), recurrent,
                       empty)


@lru_cache(maxsize=1024)
def _gpus(devs: tuple[str, ...], backend: str) -> tuple[str, ...]:
    """The GPUs that hold layers, in device order; the CPU alone where none does."""
    return tuple(sorted({d for d in devs if d != "CPU"}, key=lambda d: int(d[len(backend):]))) or ("CPU",)


@lru_cache(maxsize=1024)
def _attending(hp: LlamaHparams, devs: tuple[str, ...]) -> frozenset[str]:
    """The devices that run a K/V layer's attention."""
    return frozenset(devs[il] for il in hp.kv_layers)


@lru_cache(maxsize=1024)
def _kv_rows(hp: LlamaHparams, type_k: str, type_v: str | None, fa: bool, layers: tuple[int, ...],
             devs: tuple[str, ...], no_kv_offload: bool) -> tuple[tuple[tuple[str, int], ...], int, int]:
    """One cell's K and V rows of ``layers`` (V-less MLA: ``type_v`` None; without flash attention V is padded to
    the widest layer, v_trans), summed per device (each layer's, the CPU with -nkvo) in the order of the layers, and
    in all: (rows per device, K, V). A cache of n cells in s streams holds n x s of each (``memory``)."""
    fa_width = max((hp.n_embd_v[il] for il in hp.kv_layers), default=0)
    per_dev: dict[str, int] = {}
    k = v = 0
    for il, dev in ((il, "CPU" if no_kv_offload else devs[il]) for il in layers):
        kb = row_size(type_k, hp.n_embd_k[il])
        vb = 0 if type_v is None else row_size(type_v, hp.n_embd_v[il] if fa else fa_width)
        k, v = k + kb, v + vb
        per_dev[dev] = per_dev.get(dev, 0) + kb + vb
    return tuple(per_dev.items()), k, v


def memory(hp: LlamaHparams, f: LlamaFlags, weights=None, lora: tuple[tuple[str, int], ...] = ()) -> LlamaMemory:
    """Every buffer llama.cpp allocates for ``hp`` under ``f``. ``weights``: (per-layer, input, output[, per-layer
    expert tensors]) bytes when the hparams carry no tensor table (a card's weights at a dtype); the GGUF's own tensor
    table otherwise. A tensor an override (-ot, --cpu-moe, --n-cpu-moe) names is on that buffer's device, whatever
    its layer's. ``lora``: the adapters' tensors as (base tensor name, bytes), each on its base tensor's device.

    Computed once per (hparams, flags, weights, adapters): a plan's pool, stages, launch line and notes and a layout
    search over every GPU type ask for the same buffers again (no GPU figure enters them); the -c, -np and -ngl
    searches compare ``sizes`` instead. The result is frozen; weights given as lists (unhashable) are computed every
    time."""
    try:
        return _memory(hp, f, weights, lora)
    except TypeError as exc:  # an unhashable argument (weights as lists): no cache
        if "unhashable" not in str(exc):
            raise
        return _memory.__wrapped__(hp, f, weights, lora)


@lru_cache(maxsize=4096)
def _memory(hp: LlamaHparams, f: LlamaFlags, weights, lora: tuple[tuple[str, int], ...]) -> LlamaMemory:
    c, buffers, caches, ld = _buffers(hp, f, weights, lora)
    rows = [Buffer(device=d, kind=k, bytes=b, estimated=k == "compute") for (d, k, _), b in buffers.items()
            if b or k in ("model", "compute")]
    ctx = LlamaContext(n_ctx=c.n_ctx, n_ctx_seq=c.n_ctx_seq, n_seq_max=c.n_seq_max, kv_unified=c.kv_unified,
                       flash_attn=c.flash_attn, n_gpu_layers=ld.offloaded, n_layer=hp.n_layer, rules=f.rules)
    return LlamaMemory(context=ctx, caches=[Cache(**x) for x in caches], buffers=rows, notes=list(ld.notes))


@dataclass(frozen=True, eq=False)
class Sizes:
    """``memory`` in figures: its context, every buffer's bytes keyed (device, kind, cache), how many caches, and
    what the fullest GPU holds (its model, KV, recurrent and estimated compute buffers). Read only."""

    context: Context
    buffers: dict[tuple[str, str, str], int]
    caches: int
    gpu: int

    def on(self, device: str, *kinds: str) -> int:
        """The bytes of ``device``'s buffers of ``kinds`` (model, lora, kv, recurrent, output, compute)."""
        by_kind = self.__dict__.get("_by_kind")
        if by_kind is None:  # summed once per (device, kind): a plan's stages and pool ask for each GPU's
            by_kind = {}
            for (d, k, _), b in self.buffers.items():
                by_kind[d, k] = by_kind.get((d, k), 0) + b
            self.__dict__["_by_kind"] = by_kind
        total = 0
        for k in kinds:
            total += by_kind.get((device, k), 0)
        return total


@lru_cache(maxsize=4096)
def sizes(hp: LlamaHparams, f: LlamaFlags, weights=None, lora: tuple[tuple[str, int], ...] = ()) -> Sizes:
    """``memory``'s figures without its result objects: what a plan's stages and pool and the slot, -c, -ngl and
    quant searches read."""
    c, buffers, caches, _ = _buffers(hp, f, weights, lora)
    per_device: dict[str, int] = {}
    for (device, _, _), nbytes in buffers.items():
        per_device[device] = per_device.get(device, 0) + nbytes
    n = len(f.backend)
    gpu = max((b for d, b in per_device.items() if d.startswith(f.backend) and d[n:].isdigit()), default=0)
    return Sizes(c, buffers, len(caches), gpu)


@dataclass(frozen=True)
class Loaded:
    """What ``memory`` allocates whatever the context's size (-c, -np, -kvu): the model and LoRA buffers, in
    llama.cpp's order, keyed (device, kind, cache); each layer's device (the output layer last) and how many are
    offloaded; per K/V cache (kv, kv_swa) its layers and one cell's rows (``_kv_rows``); the devices that hold a
    compute buffer, each with whether the logits and attention run there; the notes."""

    buffers: tuple[tuple[tuple[str, str, str], int], ...]
    devs: tuple[str, ...]
    offloaded: int
    facts: CacheLayers
    kv: tuple[tuple[str, tuple[int, ...], tuple[tuple[str, int], ...], int, int], ...]
    v_type: str
    host: str
    compute: tuple[tuple[str, bool, bool], ...]
    notes: tuple[str, ...]


def _buffers(hp: LlamaHparams, f: LlamaFlags, weights, lora: tuple[tuple[str, int], ...]):
    """(context, every buffer's bytes keyed (device, kind, cache) in llama.cpp's order, each cache's ``Cache``
    fields, ``Loaded``): ``memory`` before its result objects. The context's size sizes the caches, the output and
    the compute buffers; the rest (``loaded``) is computed once for every -c and -np."""
    c = resolve_context(hp, f)
    ld = loaded(hp, f.without_context(), weights, lora, c.flash_attn)
    # (device, kind, cache): each cache allocates its own buffer per device (llama_kv_cache ctor), logged apart
    buffers = dict(ld.buffers)
    caches = []
    base_cells = c.n_ctx_seq
    if f.rules == "2025-02" or (ld.facts.hybrid and f.rules == "2025-12" and not c.kv_unified):
        base_cells = c.n_ctx  # one cache of n_ctx cells (2025-02); create_memory passed cparams.n_ctx (ec98e2002)
    for kind, layers, rows, k, v in ld.kv:
        cells = base_cells if kind == "kv" else swa_cells(hp, f, c)
        scale = cells * c.n_stream  # every row of a layer's K and V once per cell of each stream
        for dev, n in rows:
            buffers[dev, "kv", kind] = buffers.get((dev, "kv", kind), 0) + n * scale
        if layers or not ld.facts.recurrent:
            n_layers = len(layers) + (ld.facts.empty if kind == "kv" else 0)  # 0-head layers are listed too
            caches.append(dict(kind=kind, cells=cells, layers=n_layers, seqs=c.n_seq_max, streams=c.n_stream,
                               k_type=f.type_k, v_type=ld.v_type, k_bytes=k * scale, v_bytes=v * scale))
    rec = ld.facts.recurrent
    if rec:  # llama-memory-recurrent.cpp: mem_size = max(1, n_seq_max); R and S always f32
        cells = max(1, c.n_seq_max)
        r = s = 0
        for il in rec:
            rb, sb = hp.n_embd_r * cells * 4, hp.n_embd_s * cells * 4
            r, s = r + rb, s + sb
            dev = "CPU" if f.no_kv_offload else ld.devs[il]
            buffers[dev, "recurrent", ""] = buffers.get((dev, "recurrent", ""), 0) + rb + sb
        caches.append(dict(kind="recurrent", cells=cells, layers=hp.n_layer, seqs=c.n_seq_max, streams=1,
                           k_type="f32", v_type="f32", k_bytes=r, v_bytes=s))
    # llama_context::output_reserve: n_outputs_max = n_seq_max; logits (+ embeddings) in f32, in host memory
    buffers[ld.host, "output", ""] = (hp.n_vocab + (hp.n_embd if f.embeddings else 0)) * c.n_seq_max * 4
    for d, logits, attention in ld.compute:
        buffers[d, "compute", ""] = compute_estimate(hp, c, f, logits=logits, attention=attention)
    return c, buffers, caches, ld


def input_output_bytes(hp: LlamaHparams, weights) -> tuple[int, int]:
    """(the input layer's bytes, kept on the CPU: token_embd and type/position embeddings; the output layer's): the
    GGUF's own tensors, else the card's (``weights``)."""
    return (hp.input_bytes, hp.output_bytes) if hp.layer_bytes else tuple((weights or ((), 0, 0))[1:3])


@lru_cache(maxsize=1024)
def loaded(hp: LlamaHparams, f: LlamaFlags, weights, lora: tuple[tuple[str, int], ...], fa: bool) -> Loaded:
    """``Loaded`` for flags ``f`` (its -c, -np and -kvu are not read) with flash attention ``fa`` (``Context``)."""
    check_types(hp, f, fa)
    devs, offloaded = _placement(hp.n_layer, f.n_gpus, f.n_gpu_layers, f.tensor_split, f.rules, f.backend)
    inp_w, out_w = input_output_bytes(hp, weights)
    rules = tensor_overrides(f)
    buffers: dict[tuple[str, str, str], int] = {("CPU", "model", ""): inp_w}

    def add(key: tuple[str, str, str], n: int) -> None:
        buffers[key] = buffers.get(key, 0) + n

    for dev, nbytes in _model_buffers(hp, weights, devs, tuple(rules)):
        add((dev, "model", ""), nbytes)
    if devs[hp.n_layer] == "CPU" and hp.layer_bytes:  # mmap: a tied output on the CPU is the file's token_embd
        out_w -= hp.output_dup_bytes
    add((devs[hp.n_layer], "model", ""), out_w)
    for base, nbytes in lora:  # llama-adapter.cpp: lora_a/lora_b in the buffer type of the tensor they modify
        add((lora_device(base, devs, rules), "lora", ""), nbytes)
    notes = []
    facts = _cache_layers(hp, f.rules)
    groups = [("kv", facts.full)] + ([("kv_swa", facts.swa)] if facts.iswa and facts.swa else [])
    v_less = hp.mla and f.rules == LATEST  # PR #19067: MLA keeps the latent in K only
    kv = tuple((kind, layers) + _kv_rows(hp, f.type_k, None if v_less else f.type_v, fa, layers, devs,
                                         f.no_kv_offload) for kind, layers in groups)
    if v_less:
        notes.append("MLA: llama.cpp keeps the latent in K only since PR #19067 (2026-01); -ctv does not apply.")
    # one compute buffer per device that runs layers (the scheduler reserves each backend's part of the graph); the
    # logits go with the output layer, or to the first GPU when it stays on the CPU (ggml-backend's op offload runs
    # a large batch's matmul on the GPU)
    gpus = _gpus(devs, f.backend)
    out_dev = devs[hp.n_layer] if devs[hp.n_layer] != "CPU" else gpus[0]
    attending = _attending(hp, devs)
    compute = tuple((d, d == out_dev, d == "CPU" or d in attending) for d in gpus)
    if len(gpus) > 1:
        notes.append(f"{len(gpus)} GPUs, layers split by -ts {'/'.join(map(str, f.tensor_split or [1] * f.n_gpus))}: "
                     "with every layer offloaded llama.cpp enables pipeline parallelism (n_copies 4), which enlarges "
                     "its measured compute buffers beyond kvplan's estimate.")
    return Loaded(tuple(buffers.items()), devs, offloaded, facts, kv, f.type_k if v_less else f.type_v,
                  f"{f.backend}_Host" if f.n_gpus else "CPU", compute, tuple(notes))


def step_views(hp: LlamaHparams, f: LlamaFlags, weights, lora: tuple[tuple[str, int], ...], dtype) -> tuple:
    """``_step_view`` of each GPU of the server (``f.backend`` 0 .. n_gpus - 1), computed once for every context's
    size (a step reads none of it)."""
    fa = sizes(hp, f, weights, lora).context.flash_attn  # the flags' checks first, as memory makes them
    return _step_views(hp, f.without_context(), weights, lora, dtype, fa)


@lru_cache(maxsize=1024)
def _step_views(hp: LlamaHparams, f: LlamaFlags, weights, lora: tuple[tuple[str, int], ...], dtype, fa: bool):
    return tuple(_step_view(hp, f, weights, lora, f"{f.backend}{i}", dtype, fa) for i in range(f.n_gpus))


def _step_view(hp: LlamaHparams, f: LlamaFlags, weights, lora: tuple[tuple[str, int], ...], device: str, dtype,
               fa: bool):
    """What GPU ``device`` reads in one step, for kvplan.cost.traffic.path_traffic: its model and LoRA buffers
    (``memory``'s, GGUF tensors as stored) streamed, less the routed experts (``EXPS_REGEX`` tensors, [n_expert, ...]
    each) a step's tokens leave idle; the token embedding stays on the CPU (``INPUT_TENSORS``). Its caches: each
    attention layer's K and V rows at -ctk/-ctv (``row_size``; V-less MLA, V padded to the widest layer without
    flash attention, as ``memory`` sizes them), a sliding layer attending its n_swa keys; each recurrent layer's
    R and S states in f32, per sequence; ``fa``: flash attention as resolved (``Context``)."""
    from collections import Counter

    from kvplan.cost.traffic import CacheSpec, HeldWeights

    ld = loaded(hp, f, weights, lora, fa)
    stored = sum(b for (d, kind, _), b in ld.buffers if d == device and kind in ("model", "lora"))
    devs, rules = ld.devs, tensor_overrides(f)
    moe = []
    if hp.n_expert and hp.n_expert_used:
        exps = re.compile(EXPS_REGEX)
        for il, tensors in enumerate(layer_tensors(hp, weights)):
            held = sum(b for name, b in tensors if exps.search(name) and (override_device(name, rules) or devs[il])
                       == device)
            if held:
                moe.append((1, 0, held // hp.n_expert))
    kv_dev = "CPU" if f.no_kv_offload else None
    v_less = hp.mla and f.rules == LATEST
    fa_width = max((hp.n_embd_v[il] for il in hp.kv_layers), default=0)
    rows: Counter = Counter()  # (bytes per token, window) of each K/V layer here, in layer order
    for il in hp.kv_layers:
        if (kv_dev or devs[il]) == device:
            v = 0 if v_less else row_size(f.type_v, hp.n_embd_v[il] if fa else fa_width)
            rows[row_size(f.type_k, hp.n_embd_k[il]) + v, hp.n_swa if hp.swa[il] else None] += 1
    specs: Counter = Counter({CacheSpec(nbytes, window): n for (nbytes, window), n in rows.items()})
    for il in range(hp.n_layer):
        if hp.recurrent[il] and (kv_dev or devs[il]) == device:
            specs[CacheSpec((hp.n_embd_r + hp.n_embd_s) * 4, per_sequence=True, kind="state")] += 1
    held = HeldWeights(dtype, 0, stored, 0, tuple(moe), hp.n_expert, hp.n_expert, hp.n_expert_used)
    return held, tuple(specs.items())


def compute_estimate(hp: LlamaHparams, c: Context, f: LlamaFlags, logits: bool = True, attention: bool = True) -> int:
    """A device's compute buffer, ESTIMATED: llama.cpp measures it (ggml-alloc over the reserved graph). The dominant
    term of the worst-case pp graph (n_ubatch tokens, every one an output in builds to 2025-12): the f32 logits,
    n_vocab x n_ubatch x 4, on the output layer's device, or without flash attention the f32 KQ scores, n_ctx x
    n_ubatch x n_head x 4, on a device that runs attention, whichever is larger. Error on the public logs
    (docs/llamacpp.md): -7 to -48 MiB to 2025-12; 2026 builds reserve one output per sequence and measure less
    (Llama-3-8B on Metal: 124 MiB logged, 250.5 estimated)."""
    lg = hp.n_vocab * c.n_ubatch * 4 if logits else 0
    kq = 0 if c.flash_attn or not attention else c.n_ctx * c.n_ubatch * max(hp.n_head, default=0) * 4
    return max(lg, kq)


FIT_TARGET = 2**30  # common/common.h fit_params_target: --fit leaves 1 GiB free per device


def fit(hp: LlamaHparams, f: LlamaFlags, budget: int, weights=None, lora: tuple = ()) -> LlamaFit:
    """The largest context, the most offloaded layers and (MoE) the fewest layers whose experts stay in host memory
    that fit ``budget`` bytes on every GPU: what llama.cpp's --fit steps 2 (context) and 3 (layers; for MoE, expert
    tensors to system memory first) look for (src/llama.cpp llama_params_fit_impl), over kvplan's byte model
    (compute buffer estimated)."""
    ok = lambda **kw: sizes(hp, f.replaced(**kw), weights, lora).gpu <= budget  # noqa: E731
    lo, hi = 0, max(1, -(-max(hp.n_ctx_train * (f.n_parallel or 1), f.n_ctx or 256) // 256))  # -c padded up
    while lo < hi:  # n_ctx in units of 256 cells
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if ok(n_ctx=mid * 256) else (lo, mid - 1)
    layers = 0
    for ngl in range(hp.n_layer + 2):
        if not ok(n_gpu_layers=ngl):
            break
        layers = ngl
    cpu_moe = None
    if hp.n_expert and ok(cpu_moe=False, n_cpu_moe=hp.n_layer):  # the first N layers' experts on the CPU
        a, b = 0, hp.n_layer
        while a < b:
            mid = (a + b) // 2
            a, b = (a, mid) if ok(cpu_moe=False, n_cpu_moe=mid) else (mid + 1, b)
        cpu_moe = a
    return LlamaFit(budget_bytes=budget, max_n_ctx=lo * 256, max_gpu_layers=min(layers, hp.n_layer + 1),
                    min_n_cpu_moe=cpu_moe)
