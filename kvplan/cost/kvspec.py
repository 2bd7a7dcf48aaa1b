"""The KV cache as per-layer specs, after vLLM's ``kv_cache_interface.py``.

Each layer spec knows its bytes per cached token (``bytes_per_token``; one page of a paged cache is ``block_size``
of them) and, given an engine (kvplan.cost.engines), how many token positions it holds. Totals are sums over layers,
so hybrid models (Gemma-2's alternating local/global layers, Gemma-3's 5:1) and encoder-decoder models (self- plus
cross-attention in every decoder layer) need no special case.

The textbook formula, batch x layers x kv_heads x head_dim x tokens x 2 (K and V) x bytes, is what a ``full``
layer gives; the other kinds are where that formula is wrong.

State-space (Mamba) layers hold no per-token K/V: each sequence keeps a convolution state and an SSM state of fixed
size (``conv_state`` and ``ssm_state`` specs, ``per_sequence``): their "positions held" is 1 whatever the length, and
``bytes_per_token`` is then the bytes of the whole state.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from collections import Counter
from functools import cached_property, lru_cache
from typing import Literal

from kvplan.cost.engines import CacheRun, Engine, as_rules
from kvplan.cost.ssm import conv_channels
from kvplan.errors import KvplanError
from kvplan.model.card import ModelCard
from kvplan.model.dtypes import DType, parse_dtype

LayerKind = Literal["full", "sliding", "chunked", "mla", "cross", "conv_state", "ssm_state"]
STATE_DTYPES = ("fp32", "fp16", "bf16")


@dataclass(frozen=True)
class KVLayerSpec:
    """The cache of one attention layer for one sequence.

    ``vectors`` lists (count, elems) groups stored per token: K and V of each KV head are two groups of
    ``(kv_heads, head_dim)``; an MLA latent is one group of ``(1, kv_lora_rank + qk_rope_head_dim)``.
    """

    kind: LayerKind
    vectors: tuple[tuple[int, int], ...]
    dtype: DType
    shape: str  # the per-token shape as the formula prints it, e.g. "8 kv_heads x 128 head_dim"
    factor: str = ""  # what follows the token count in the formula: "2 (K,V)" for separate K and V
    window: int | None = None
    chunk: int | None = None  # chunked local attention (Llama-4): the C-aligned chunk a token attends
    per_sequence: bool = False  # a state layer: one fixed-size state per sequence, ``bytes_per_token`` its bytes

    @cached_property
    def bytes_per_token(self) -> int:
        """Bytes one cached token takes in this layer: each vector packed, plus its quantization scales."""
        return sum(count * self.dtype.vector_bytes(elems) for count, elems in self.vectors)

    @property
    def scale_bytes_per_token(self) -> int:
        """The per-group quantization scales inside ``bytes_per_token`` (int8/int4)."""
        return sum(count * self.dtype.scale_bytes(elems) for count, elems in self.vectors)

    def page_size_bytes(self, block_size: int) -> int:
        """One page of a paged cache: ``block_size`` tokens (vLLM ``AttentionSpec.page_size_bytes``)."""
        return block_size * self.bytes_per_token

    def positions_held(self, engine: Engine, run: CacheRun) -> int:
        """Token positions one sequence holds in this layer under ``engine``; a state layer holds its one state
        (transformers LinearAttentionLayer; vLLM one MambaSpec block per request without prefix caching)."""
        if self.per_sequence:
            return 1
        if self.kind == "cross":  # the encoder output's K/V, computed once per request
            return engine.cross_positions(run)
        if self.kind == "chunked":
            return engine.chunk_positions(self.chunk, run)
        return engine.positions_held(self.window, run)


def layer_specs(card: ModelCard, kv_dtype: DType, engine: Engine) -> tuple[KVLayerSpec, ...]:
    """One spec per cached attention: each decoder layer's self-attention, then (encoder-decoder) its cross-attention."""
    return _layer_specs(card, kv_dtype, as_rules(engine).transformers)


def layer_spec_counts(card: ModelCard, kv_dtype: DType, engine: Engine) -> tuple[tuple[KVLayerSpec, int], ...]:
    """``layer_specs`` with equal specs merged: (spec, how many), in order of first appearance. Sums over layers run
    over these (Llama-2-7B: one spec x 32, not 32 specs)."""
    return _spec_counts(card, kv_dtype, as_rules(engine).transformers)


@lru_cache(maxsize=4096)
def _spec_counts(card: ModelCard, kv_dtype: DType, transformers: bool) -> tuple[tuple[KVLayerSpec, int], ...]:
    return tuple(Counter(_layer_specs(card, kv_dtype, transformers)).items())


@lru_cache(maxsize=4096)  # cards and dtypes are frozen: the specs are built once per (card, dtype, runtime family)
def _layer_specs(card: ModelCard, kv_dtype: DType, transformers: bool) -> tuple[KVLayerSpec, ...]:
    if not card.has_kv_cache:
        return ()
    states = state_specs(card, states_dtype(card, kv_dtype), transformers) if card.ssm else ()
    per_layer = decoder_layer_specs(card, kv_dtype, card.cached_kv_heads(transformers), states, range(card.num_layers))
    self_attn = tuple(spec for _, specs in per_layer for spec in specs)
    if card.architecture != "encoder-decoder":
        return self_attn
    cross = _standard_spec(card, kv_dtype, "cross", None, card.num_kv_heads)
    return self_attn + (cross,) * card.num_layers


def decoder_layer_specs(card: ModelCard, kv_dtype: DType, kv_heads: int, states: tuple[KVLayerSpec, ...],
                        layers: range) -> list[tuple[int, tuple[KVLayerSpec, ...]]]:
    """(decoder layer, its specs) for ``layers``: attention and hybrid layers their K/V (``kv_heads`` per layer, on
    one rank), then state and hybrid layers ``states``; an mlp layer (no mixer) caches nothing."""
    by_window = {w: self_attention_spec(card, kv_dtype, kv_heads, w) for w in {card.windows[i] for i in layers}}
    out = []
    for i in layers:
        mixer = card.mixer(i)
        attention = (chunked(by_window[card.windows[i]], card.chunk(i)),) if mixer in ("attention", "hybrid") else ()
        out.append((i, attention + (states if mixer in ("mamba", "hybrid") else ())))
    return out


def states_dtype(card: ModelCard, kv_dtype: DType) -> DType:
    """The dtype conv and recurrent states are held in beside a ``kv_dtype`` K/V cache: the K/V dtype when it is a
    float one, else (fp8/int8/int4 K/V) the model dtype, as vLLM's mamba_cache_dtype "auto" keeps them
    (MambaStateDtypeCalculator); the state rules of ``state_specs`` then apply (e.g. float32 recurrent states)."""
    return kv_dtype if kv_dtype.name in STATE_DTYPES else parse_dtype(card.dtype)


def state_specs(card: ModelCard, kv_dtype: DType, transformers: bool, tp: int = 1) -> tuple[KVLayerSpec, ...]:
    """The conv state and the SSM (recurrent) state of one state layer for one sequence (kvplan.model.ssm); a short
    conv (LFM2) holds the conv state only, lightning attention (MiniMax) the recurrent state only. The same rules
    hold for Mamba-1/2 and Gated DeltaNet (measured).

    Conv state: transformers keeps the last d_conv inputs (LinearAttentionLayer.update_conv_state, conv_kernel_size
    = d_conv), vLLM and an ideal cache the d_conv - 1 the next step needs (MambaStateShapeCalculator: conv_kernel -
    1); in the cache dtype. SSM state: transformers' torch scan returns it in float32 and the cache keeps that dtype
    even in a bf16 model (measured, tests/test_state_layers.py); vLLM keeps it in mamba_ssm_cache_dtype ("auto": the
    conv state's dtype; MambaStateDtypeCalculator._mamba_state_dtype), the card's ssm.state_dtype when it names one
    (KDA derives float32: kda_state_dtype keeps it there whatever the cache dtype).

    ``tp``: the shapes one tensor-parallel rank holds (vLLM MambaStateShapeCalculator): conv channels split (Mamba-2's
    groups extended, kvplan.cost.ssm.conv_channels), the recurrent state split by heads (Mamba-1 and RG-LRU: by
    channels).
    """
    ssm = card.ssm
    if kv_dtype.name not in STATE_DTYPES:
        raise KvplanError(f"--kv-dtype: {kv_dtype.name} quantizes K/V only; {card.name}'s conv and SSM states stay in "
                          f"the model dtype, which kvplan does not model beside it; allowed: {', '.join(STATE_DTYPES)}")
    # transformers' LinearAttentionLayer keeps d_conv inputs; RecurrentGemma's module-held conv1d_state, d_conv - 1
    # wide, is from the first decode step a view of the d_conv-wide concatenation, whose storage it keeps (measured)
    width = ssm.d_conv if transformers else ssm.d_conv - 1
    channels = (conv_channels(card, tp) if tp > 1 else ssm.conv_dim) if ssm.has_conv else 0
    conv = (KVLayerSpec("conv_state", ((width, channels),), kv_dtype,
                        f"({channels} conv channels x {width} inputs)", per_sequence=True),) if ssm.has_conv else ()
    if ssm.state_shape is None:
        return conv
    if transformers:  # the lightning kernel accumulates in the model dtype (MiniMaxCache.linear_cache, measured)
        state_t = kv_dtype if ssm.kind == "lightning" else parse_dtype("fp32")
    else:
        state_t = parse_dtype(ssm.state_dtype) if ssm.state_dtype else kv_dtype
    first, *rest = ssm.state_shape  # heads (Mamba-1, RG-LRU: channels) are split over the TP ranks
    dims = (first // tp, *rest)
    *lead, d_state = dims
    shape = " x ".join(f"{n} {what}" for n, what in zip(dims, _STATE_AXES[ssm.kind]))
    ssm_spec = KVLayerSpec("ssm_state", ((math.prod(lead), d_state),), state_t, f"({shape})", per_sequence=True)
    return conv + (ssm_spec,)


_STATE_AXES = {"mamba": ("channels", "d_state"), "mamba2": ("heads", "head_dim", "d_state"),
               "gated_deltanet": ("heads", "key_dim", "value_dim"), "lightning": ("heads", "key_dim", "value_dim"),
               "rglru": ("channels",), "kda": ("heads", "key_dim", "value_dim")}


def chunked(spec: KVLayerSpec, chunk: int | None) -> KVLayerSpec:
    """A chunked layer caches K/V like a full layer; only the positions it holds differ."""
    return spec if chunk is None else replace(spec, kind="chunked", chunk=chunk)


def self_attention_spec(card: ModelCard, kv_dtype: DType, kv_heads: int, window: int | None) -> KVLayerSpec:
    if card.mla is None:
        return _standard_spec(card, kv_dtype, "sliding" if window else "full", window, kv_heads)
    m = card.mla
    # DeepSeek-V2 paper section 2.1.3 and vLLM MLAAttentionSpec: one vector of kv_lora_rank + qk_rope_head_dim per
    # token and layer, shared by all heads; no separate V, so no factor 2. transformers 5.x caches the same: the
    # normed latent as a 1-head "key" and the rope key as a 1-head "value" (modeling_deepseek_v3.py,
    # past_key_values.update(kv_nope, k_rot)), and expands per-head K/V after the cache read. (transformers 4.x
    # cached the expanded per-head K and V instead.)
    elems = m.kv_lora_rank + m.qk_rope_head_dim
    shape = f"({m.kv_lora_rank} latent + {m.qk_rope_head_dim} rope key)"
    return KVLayerSpec("mla", ((1, elems),), kv_dtype, shape)


def _standard_spec(card: ModelCard, kv_dtype: DType, kind: LayerKind, window: int | None,
                   kv_heads: int) -> KVLayerSpec:
    shape = f"{kv_heads} kv_heads x {card.head_dim} head_dim"
    group = (kv_heads, card.head_dim)
    return KVLayerSpec(kind, (group, group), kv_dtype, shape, "2 (K,V)", window)


def has_full_layer(card: ModelCard) -> bool:
    """Some self-attention layer keeps every position (full attention or MLA)."""
    return any(window is None for (window, _chunk), _layers in card.attention_spans)


def kv_bytes_per_token(specs: tuple[KVLayerSpec, ...]) -> int:
    """Self-attention bytes one more cached token adds to one sequence while no window is full (a state layer's
    bytes do not grow with tokens)."""
    return sum(s.bytes_per_token for s in specs if s.kind != "cross" and not s.per_sequence)
