"""The KV cache as per-layer specs, after vLLM's ``kv_cache_interface.py``.

Each layer spec knows its bytes per cached token (``bytes_per_token``; one page of a paged cache is ``block_size``
of them) and, given an engine (kvplan.cost.engines), how many token positions it holds. Totals are sums over layers,
so hybrid models (Gemma-2's alternating local/global layers, Gemma-3's 5:1) and encoder-decoder models (self- plus
cross-attention in every decoder layer) need no special case.

The textbook formula, batch x layers x kv_heads x head_dim x tokens x 2 (K and V) x bytes, is what a ``full``
layer gives; the other kinds are where that formula is wrong.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property, lru_cache
from typing import Literal

from kvplan.cost.engines import CacheRun, Engine, get_engine
from kvplan.model.card import ModelCard
from kvplan.model.dtypes import DType

LayerKind = Literal["full", "sliding", "chunked", "mla", "cross"]


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
        """Token positions one sequence holds in this layer under ``engine``."""
        if self.kind == "cross":  # the encoder output's K/V, computed once per request
            return engine.cross_positions(run)
        if self.kind == "chunked":
            return engine.chunk_positions(self.chunk, run)
        return engine.positions_held(self.window, run)


def layer_specs(card: ModelCard, kv_dtype: DType, engine: Engine | str) -> tuple[KVLayerSpec, ...]:
    """One spec per cached attention: each decoder layer's self-attention, then (encoder-decoder) its cross-attention."""
    return _layer_specs(card, kv_dtype, get_engine(engine).transformers)


@lru_cache(maxsize=4096)  # cards and dtypes are frozen: the specs are built once per (card, dtype, runtime family)
def _layer_specs(card: ModelCard, kv_dtype: DType, transformers: bool) -> tuple[KVLayerSpec, ...]:
    if not card.has_kv_cache:
        return ()
    heads = card.cached_kv_heads(transformers)
    by_window = {w: self_attention_spec(card, kv_dtype, heads, w) for w in set(card.windows)}
    self_attn = tuple(by_window[w] for w in card.windows)
    self_attn = tuple(chunked(s, card.chunk(i)) for i, s in enumerate(self_attn))
    if card.architecture != "encoder-decoder":
        return self_attn
    cross = _standard_spec(card, kv_dtype, "cross", None, card.num_kv_heads)
    return self_attn + (cross,) * card.num_layers


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
    return any(w is None for w in card.windows)


def kv_bytes_per_token(specs: tuple[KVLayerSpec, ...]) -> int:
    """Self-attention bytes one more cached token adds to one sequence while no window is full."""
    return sum(s.bytes_per_token for s in specs if s.kind != "cross")
