"""The KV cache as per-layer specs, after vLLM's ``kv_cache_interface.py``.

Each layer spec knows its bytes per cached token (``bytes_per_token``, one page of a paged cache is
``block_size`` of them) and, given an engine, how many token positions it holds. Totals are sums over layers, so
hybrid models (Gemma-2's alternating local/global layers, Gemma-3's 5:1) and encoder-decoder models (self- plus
cross-attention in every decoder layer) need no special case.

The textbook formula, batch x layers x kv_heads x head_dim x tokens x 2 (K and V) x bytes, is what a ``full``
layer gives; the other kinds are where that formula is wrong.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from kvplan.model.card import ModelCard
from kvplan.model.dtypes import DType
from kvplan.errors import KvplanError

LayerKind = Literal["full", "sliding", "mla", "cross"]
Engine = Literal["ideal", "hf-dynamic", "hf-static", "vllm"]
ENGINES: tuple[str, ...] = ("ideal", "hf-dynamic", "hf-static", "vllm")

ENGINE_DESCRIPTIONS = {
    "ideal": "exactly the tokens attention needs: all tokens, or the last W of a sliding-window layer",
    "hf-dynamic": "transformers DynamicCache: grows per token; sliding layers keep the last W-1 positions",  # 5.x
    "hf-static": "transformers StaticCache: preallocated to max_cache_len positions (sliding layers min(max_cache_len, W))",
    "vllm": "vLLM v1 paged cache: whole blocks of block_size tokens; sliding layers free blocks that left the window",
}


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

    @property
    def bytes_per_token(self) -> int:
        """Bytes one cached token takes in this layer: each vector packed, plus its quantization scales."""
        return sum(count * self.dtype.vector_bytes(elems) for count, elems in self.vectors)

    def page_size_bytes(self, block_size: int) -> int:
        """One page of a paged cache: ``block_size`` tokens (vLLM ``AttentionSpec.page_size_bytes``)."""
        return block_size * self.bytes_per_token


@dataclass(frozen=True)
class EngineParams:
    name: str
    seq_len: int
    encoder_len: int = 0
    max_cache_len: int = 0
    block_size: int = 16


def cdiv(a: int, b: int) -> int:
    """Ceiling division on integers."""
    return -(-a // b)


def positions_held(spec: KVLayerSpec, e: EngineParams) -> int:
    """Token positions one sequence holds in this layer under engine ``e``."""
    if spec.kind == "cross":  # the encoder output's K/V, computed once per request
        tokens = e.encoder_len
        return cdiv(tokens, e.block_size) * e.block_size if e.name == "vllm" else tokens
    if e.name == "ideal":
        return min(e.seq_len, spec.window) if spec.window else e.seq_len
    if e.name == "hf-dynamic":
        # transformers DynamicSlidingWindowLayer.update keeps keys[:, :, -sliding_window + 1:, :] (W-1 positions):
        # the token being processed is appended before attention, making W.
        return min(e.seq_len, spec.window - 1) if spec.window else e.seq_len
    if e.name == "hf-static":
        # StaticCache allocates max_cache_len positions per layer; StaticSlidingWindowLayer min(max_cache_len, W).
        return min(e.max_cache_len, spec.window) if spec.window else e.max_cache_len
    return vllm_blocks_held(spec, e) * e.block_size


def vllm_blocks_held(spec: KVLayerSpec, e: EngineParams) -> int:
    """Blocks vLLM v1 holds for one sequence during the decode step that brings it to ``seq_len`` tokens.

    Full attention and MLA: cdiv(L, block_size) (``FullAttentionManager``, nothing is freed before the request
    ends). Sliding window: before allocating a step, ``SlidingWindowManager.remove_skipped_blocks(C)`` frees the
    blocks wholly before token C - W + 1 (C computed tokens), so a step from C = L - 1 to L holds
    cdiv(L, bs) - max(0, L - W) // bs blocks (vllm/v1/core/single_type_kv_cache_manager.py). A prefill chunk of n
    tokens frees nothing while it runs and can briefly hold more; this is the steady decode state.
    """
    held = cdiv(e.seq_len, e.block_size)
    if spec.window:
        held -= max(0, e.seq_len - spec.window) // e.block_size
    return held


def layer_specs(card: ModelCard, kv_dtype: DType, engine: str) -> list[KVLayerSpec]:
    """One spec per cached attention: each decoder layer's self-attention, then (encoder-decoder) its cross-attention."""
    if not card.has_kv_cache:
        return []
    self_attn = [_self_attention_spec(card, kv_dtype, engine, t) for t in card.layer_types]
    if card.architecture != "encoder-decoder":
        return self_attn
    cross = _standard_spec(card, kv_dtype, "cross", None)
    return self_attn + [cross] * card.num_layers


def _self_attention_spec(card: ModelCard, kv_dtype: DType, engine: str, layer_type: str) -> KVLayerSpec:
    if card.mla is None:
        window = card.sliding_window if layer_type == "sliding" else None
        kv_heads = card.hf_kv_heads if engine.startswith("hf-") and card.hf_kv_heads else card.num_kv_heads
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
                   kv_heads: int | None = None) -> KVLayerSpec:
    kv_heads = kv_heads or card.num_kv_heads
    shape = f"{kv_heads} kv_heads x {card.head_dim} head_dim"
    group = (kv_heads, card.head_dim)
    return KVLayerSpec(kind, (group, group), kv_dtype, shape, "2 (K,V)", window)


def check_engine(engine: str, kv_dtype: DType) -> None:
    """Reject combinations the named runtime cannot run, instead of reporting bytes it would never hold."""
    if engine not in ENGINES:
        raise KvplanError(f"--engine: unknown engine {engine!r}; allowed: {', '.join(ENGINES)}")
    if engine.startswith("hf-") and kv_dtype.name not in ("fp32", "fp16", "bf16"):
        raise KvplanError(f"--kv-dtype: {kv_dtype.name} is not stored by {engine} (transformers' Dynamic/StaticCache "
                          "keep K/V in the model dtype); allowed: fp32, fp16, bf16, or use --engine ideal")
    if engine == "vllm" and kv_dtype.name in ("int8", "int4"):
        raise KvplanError(f"--kv-dtype: vLLM has no {kv_dtype.name} KV cache (kv_cache_dtype auto, fp8, fp8_e4m3, "
                          "fp8_e5m2); allowed: fp32, fp16, bf16, fp8_e4m3, fp8_e5m2")
