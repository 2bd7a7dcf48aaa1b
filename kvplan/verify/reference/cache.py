"""KV caches matching kvplan's engines, sized by their own rules (never by kvplan's arithmetic).

Every cache stores, per layer, ``vec`` vectors per token and KV head (2: K and V; 1: an MLA latent) and answers:

- ``write(start, k, v)``: store positions start..start+n-1 of k (B, KV, n, Dk) and v (B, KV, n, Dv)
- ``read(pos)``: the keys, values and their positions (S,) (-1: empty slot) that the token at ``pos`` may attend.

Engines (kvplan.cost.engines):
- ideal: ``RingCache`` of seq_len slots (global, MLA latent) or W slots (sliding): static buffers, gpt-fast style.
- hf-static: ``RingCache`` of max_cache_len slots (sliding: min(max_cache_len, W)); K/V broadcast to
  ``hf_kv_heads`` where the card sets it (transformers' Falcon); MLA the latent, as transformers 5.x.
- vllm: ``PagedCache``: one tensor per block of block_size tokens, allocated when first written and, in sliding
  layers, freed once wholly outside the window (vllm/v1/core/single_type_kv_cache_manager.py).

Chunked local-attention layers (Llama-4: a token attends its own C-aligned chunk) hold, per engine:
- ideal: ``ChunkCache``, the current chunk's positions only ((L-1) % C + 1 after L tokens);
- hf-static: a ``RingCache`` of min(max_cache_len, C) slots (transformers caches a chunked layer as a sliding
  layer of W = C: cache_utils LAYER_TYPE_MAPPING);
- vllm: ``PagedCache`` freeing the blocks wholly before the current chunk (ChunkedLocalAttentionManager).

State-space (Mamba) layers hold a ``StateCache`` per layer: the last conv inputs and the SSM state, constant in the
number of tokens (``state_layout``).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from kvplan.cost.engines import Engine
from kvplan.cost.runtimes import get_engine

_TORCH = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def state_layout(card, engine: str | Engine, dtype) -> tuple[int, torch.dtype]:
    """(conv inputs kept, SSM state dtype) of a mamba layer under ``engine`` for a model running in ``dtype``.

    transformers (hf-*) keeps the last d_conv inputs (LinearAttentionLayer.update_conv_state) and the SSM state its
    torch scan returns, float32 whatever the model dtype; vLLM (MambaStateShapeCalculator) and an ideal cache keep
    the d_conv - 1 inputs the next step needs, and the state in mamba_ssm_cache_dtype (the card's ssm.state_dtype,
    "auto": the cache dtype).
    """
    eng, s = get_engine(engine), card.ssm
    if eng.transformers:
        return s.d_conv, torch.float32
    return s.d_conv - 1, _TORCH[s.state_dtype] if s.state_dtype else dtype


class StateCache(nn.Module):
    """One mamba layer's per-sequence states: ``conv`` (B, conv_dim, width) and ``ssm`` (B, *state_shape)."""

    def __init__(self, card, engine: str | Engine, batch: int, dtype, device) -> None:
        super().__init__()
        s = card.ssm
        width, state_t = state_layout(card, engine, dtype)
        shape = (s.intermediate_size, s.d_state) if s.kind == "mamba" else (s.num_heads, s.head_dim, s.d_state)
        self.register_buffer("conv", torch.zeros(batch, s.conv_dim, width, dtype=dtype, device=device))
        self.register_buffer("ssm", torch.zeros(batch, *shape, dtype=state_t, device=device))

    def bytes_held(self) -> int:
        return sum(b.numel() * b.element_size() for b in (self.conv, self.ssm))


class ChunkCache(nn.Module):
    """An ideal chunked layer: K/V of the current C-aligned chunk only, positions (L-1) // C * C .. L-1. A new
    chunk drops the old one; each write allocates the kept positions afresh (no view of a larger tensor)."""

    def __init__(self, chunk: int) -> None:
        super().__init__()
        self.chunk, self.first, self.written = chunk, 0, 0
        self.k: Tensor | None = None
        self.v: Tensor | None = None

    def write(self, start: int, k: Tensor, v: Tensor) -> None:
        end = start + k.shape[2]
        first = (end - 1) // self.chunk * self.chunk
        lo = max(first, start) - start  # the new positions inside the last chunk
        nk, nv = k[:, :, lo:], v[:, :, lo:]
        if self.k is not None and self.first == first and start > first:  # same chunk: append
            nk, nv = torch.cat([self.k, nk], dim=2), torch.cat([self.v, nv], dim=2)
        else:
            nk, nv = nk.clone(), nv.clone()
        self.k = self.v = None  # free the old chunk before holding the new one
        self.k, self.v, self.first, self.written = nk, nv, first, end

    def read(self, pos: int) -> tuple[Tensor, Tensor, Tensor]:
        return self.k, self.v, torch.arange(self.first, self.written, device=self.k.device)


class RingCache(nn.Module):
    """Static K/V buffers of ``size`` slots; position p lives in slot p % size (a ring once the window is full)."""

    def __init__(self, batch: int, heads: int, size: int, k_dim: int, v_dim: int | None, dtype, device) -> None:
        super().__init__()
        self.size = size
        self.register_buffer("k", torch.zeros(batch, heads, size, k_dim, dtype=dtype, device=device))  # (B,KV,S,Dk)
        v = torch.zeros(batch, heads, size, v_dim, dtype=dtype, device=device) if v_dim is not None else None
        self.register_buffer("v", v)  # (B,KV,S,Dv); None for an MLA latent (no separate V)
        self.written = 0  # positions 0..written-1 have been written

    def write(self, start: int, k: Tensor, v: Tensor | None) -> None:
        n = k.shape[2]
        keep = min(n, self.size)  # a prompt longer than the ring: only its last `size` positions survive
        slots = torch.arange(start + n - keep, start + n, device=k.device) % self.size
        self.k.index_copy_(2, slots, k[:, :, n - keep:])
        if self.v is not None:
            self.v.index_copy_(2, slots, v[:, :, n - keep:])
        self.written = start + n

    def positions(self) -> Tensor:
        """(S,) the position held in each slot: the latest p < written with p % size == slot, or -1."""
        slot = torch.arange(self.size, device=self.k.device)
        last = self.written - 1
        pos = last - (last - slot) % self.size
        return torch.where(slot <= last, pos, -1)

    def read(self, pos: int) -> tuple[Tensor, Tensor | None, Tensor]:
        return self.k, self.v, self.positions()


class PagedCache:
    """vLLM-style paged cache of one layer: block tables of per-block tensors (vec, block_size, KV, D) per sequence.

    Pages are separate allocations so the allocator sees exactly the blocks held: a page is allocated when its first
    token is written and, with a window W, freed before the step that computes token C when it lies wholly before
    C - W + 1 (vLLM SlidingWindowManager.remove_skipped_blocks).
    """

    def __init__(self, batch: int, heads: int, k_dim: int, v_dim: int | None, block_size: int,
                 window: int | None, dtype, device, chunk: int | None = None) -> None:
        self.batch, self.heads, self.k_dim, self.v_dim = batch, heads, k_dim, v_dim
        self.bs, self.window, self.dtype, self.device = block_size, window, dtype, device
        self.chunk = chunk
        self.tables: list[dict[int, Tensor]] = [{} for _ in range(batch)]  # logical block -> page, per sequence
        self.written = 0

    def page_shape(self) -> tuple[int, ...]:
        # K and V share one page when equally wide (vLLM (2, block_size, KV, D)); an MLA latent is one vector
        return (1 if self.v_dim is None else 2, self.bs, self.heads, self.k_dim)

    def free_skipped(self, computed: int) -> None:
        """Chunked: ChunkedLocalAttentionManager skips the (computed // C) * C tokens before the current chunk."""
        if self.chunk:
            first_needed = computed // self.chunk * self.chunk
        elif self.window:
            first_needed = computed - self.window + 1
        else:
            return
        for table in self.tables:
            for block in [b for b in table if (b + 1) * self.bs <= first_needed]:
                del table[block]

    def write(self, start: int, k: Tensor, v: Tensor | None) -> None:
        self.free_skipped(start)
        n = k.shape[2]
        for b, table in enumerate(self.tables):
            for p0 in range(start, start + n, 1):
                block, off = divmod(p0, self.bs)
                if block not in table:
                    table[block] = torch.zeros(self.page_shape(), dtype=self.dtype, device=self.device)
                page = table[block]
                page[0, off] = k[b, :, p0 - start]
                if v is not None:
                    page[1, off] = v[b, :, p0 - start]
        self.written = start + n

    def read(self, pos: int) -> tuple[Tensor, Tensor | None, Tensor]:
        """Keys/values of the attended positions only (FlashAttention over the sequence's own tokens)."""
        lo = pos // self.chunk * self.chunk if self.chunk else max(0, pos - self.window + 1) if self.window else 0
        blocks = sorted(self.tables[0])
        pages = torch.stack([torch.cat([t[b] for b in blocks], dim=1) for t in self.tables])  # (B,vec,n*bs,KV,D)
        first = blocks[0] * self.bs
        kv = pages[:, :, lo - first:pos + 1 - first].transpose(2, 3)  # (B,vec,KV,L,D)
        keys = kv[:, 0]
        values = kv[:, 1] if self.v_dim is not None else None
        return keys, values, torch.arange(lo, pos + 1, device=self.device)

    def bytes_held(self) -> int:
        return sum(p.numel() * p.element_size() for t in self.tables for p in t.values())


class Caches:
    """All caches of a model: one per decoder self-attention, plus one per cross-attention (encoder-decoder)."""

    def __init__(self, self_attn: list, cross: list | None) -> None:
        self.self_attn, self.cross = self_attn, cross


def make_caches(card, *, engine: str, batch: int, seq_len: int, encoder_len: int = 0, max_cache_len: int = 0,
                block_size: int = 16, dtype=torch.float32, device="cpu") -> Caches:
    """The caches engine ``engine`` keeps for ``batch`` sequences of up to ``seq_len`` tokens."""
    eng = get_engine(engine)
    kw = dict(dtype=dtype, device=device)
    layers = []
    for i in range(card.num_layers):
        mixer = card.mixer(i) if card.architecture != "encoder-only" else "attention"
        if mixer == "mamba":
            layers.append(StateCache(card, eng, batch, **kw))
        elif mixer is None:  # an mlp layer: nothing to cache
            layers.append(None)
        else:
            layers.append(_self_cache(card, card.window(i), eng, batch, seq_len, max_cache_len, block_size, kw,
                                      card.chunk(i)))
    cross = None
    if card.architecture == "encoder-decoder":  # encoder K/V, written once at prefill
        KV, D = card.num_kv_heads, card.head_dim
        if eng.paged:
            cross = [PagedCache(batch, KV, D, D, block_size, None, **kw) for _ in range(card.num_layers)]
        else:
            cross = [RingCache(batch, KV, encoder_len, D, D, **kw) for _ in range(card.num_layers)]
    return Caches(layers, cross)


def _self_cache(card, window: int | None, eng: Engine, batch: int, seq_len: int, max_cache_len: int,
                block_size: int, kw: dict, chunk: int | None = None):
    KV, k_dim, v_dim = card.cached_kv_heads(eng.transformers), card.head_dim, card.head_dim
    if card.mla:  # latent + rope key as one vector of one "head" (vLLM MLAAttentionSpec; transformers 5.x too)
        KV, k_dim, v_dim = 1, card.mla.kv_lora_rank + card.mla.qk_rope_head_dim, None
    if eng.paged:
        return PagedCache(batch, KV, k_dim, v_dim, block_size, window, chunk=chunk, **kw)
    if chunk and not eng.static:
        return ChunkCache(chunk)
    size = max_cache_len if eng.static else seq_len
    window = window or chunk  # transformers: a chunked layer is a sliding layer of W = C
    cache = RingCache(batch, KV, min(size, window) if window else size, k_dim, v_dim, **kw)
    cache.prefill_reads = eng.static  # transformers attends the static buffer when the prompt fits it
    return cache
