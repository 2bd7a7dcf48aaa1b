"""Bytes one step moves between GPU memory and the chip, as exact ints: the memory side of the roofline.

Counted: every weight read once per step; the KV cache the step attends read once; the new tokens' K/V written once.
State layers (conv and SSM / recurrent states, kvplan.cost.kvspec.state_specs): a decode step reads each sequence's
states once and writes them back once (vLLM ``causal_conv1d_update`` and ``selective_state_update`` update them in
place; transformers copies them into the cache), whatever the length; a prefill from an empty cache writes them once.
``kv_read_bytes`` and ``kv_write_bytes`` hold these state bytes beside K/V, as ``kv_cache.total_bytes`` does.
Not counted (state it wherever these are used): activations, logits, re-reads of K/V tiles inside a prefill's
attention kernel, fp8 per-layer K/V scales, allocator padding.

Choices, explicit:

- A multimodal card's vision tower and projector (kvplan.cost.vision) are not read by a decoder step: the encoder
  runs once per image, before the prefill that consumes its tokens.
- Embedding tables are gathered, not streamed: a step reads only its tokens' rows (tokens x hidden, and the same
  for a learned position table). A tied LM head streams the whole embedding matrix.
- MoE: a step reads the weights of the experts its tokens are routed to. Per MoE layer that is
  min(num_experts, tokens x experts_per_token) experts: exact for one token, and the usual assumption when a batch
  spreads over all experts. Routing can concentrate tokens on fewer experts, so for batch > 1 this is an upper
  bound on the experts touched; ``moe_weights_read_bytes_min`` gives the k-experts lower bound.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.cost.engines import CacheRun, Engine
from kvplan.cost.kvspec import KVLayerSpec, layer_spec_counts
from kvplan.cost.params import count_params, ffn_params
from kvplan.model.card import ModelCard
from kvplan.model.dtypes import DType


@dataclass(frozen=True)
class StepTraffic:
    weights_read_bytes: int
    kv_read_bytes: int
    kv_write_bytes: int

    @property
    def total_bytes(self) -> int:
        return self.weights_read_bytes + self.kv_read_bytes + self.kv_write_bytes


def weights_read_bytes(card: ModelCard, w_t: DType, tokens: int, *, experts_touched: int | None = None) -> int:
    """Weight bytes one step over ``tokens`` tokens (whole batch) reads; see the module docstring for MoE."""
    p = count_params(card)
    elems = p.total - p.vision - p.embedding - p.positions + tokens * card.hidden_size
    if card.tie_embeddings:
        elems += p.embedding  # the LM head streams the tied matrix
    if card.position == "learned":
        elems += tokens * card.hidden_size
    moe = card.moe
    if moe is not None:
        touched = experts_touched or min(moe.num_experts, tokens * moe.experts_per_token)
        elems -= card.ffn_layers[1] * (moe.num_experts - touched) * ffn_params(card, moe.expert_ffn_size)
    return w_t.data_bytes(elems)


def moe_weights_read_bytes_min(card: ModelCard, w_t: DType, tokens: int) -> int:
    """Lower bound for MoE: every token routed to the same experts_per_token experts."""
    k = card.moe.experts_per_token if card.moe else None
    return weights_read_bytes(card, w_t, tokens, experts_touched=k)


def decode_traffic(card: ModelCard, w_t: DType, kv_t: DType, eng: Engine, run: CacheRun, batch: int) -> StepTraffic:
    """The decode step that brings each of ``batch`` sequences to ``run.seq_len`` tokens: it reads every cached
    position it attends (the new token's entry included, written first as paged kernels do) and writes one token; a
    state layer reads and writes its whole fixed-size states (``bytes_per_token`` of a per-sequence spec)."""
    specs = [(s, n) for s, n in layer_spec_counts(card, kv_t, eng) if s.kind != "cross"]  # n equal layers
    read = sum(n * _decode_positions(s, eng, run) * s.bytes_per_token for s, n in specs)
    write = sum(n * s.bytes_per_token for s, n in specs)
    return StepTraffic(weights_read_bytes(card, w_t, batch), batch * read, batch * write)


def _decode_positions(s: KVLayerSpec, eng: Engine, run: CacheRun) -> int:
    """Cached positions a decode step reads in the layer of ``s``: its one state, its chunk, or its keys."""
    if s.per_sequence:
        return 1
    if s.chunk:
        return eng.chunk_decode_keys(run.seq_len, s.chunk, run)
    return eng.decode_keys(run.seq_len, s.window, run)


def prefill_traffic(card: ModelCard, w_t: DType, kv_t: DType, eng: Engine, run: CacheRun, batch: int) -> StepTraffic:
    """A prefill of ``run.seq_len`` prompt tokens: weights once, K/V written for the positions the engine keeps."""
    specs = [(s, n) for s, n in layer_spec_counts(card, kv_t, eng) if s.kind != "cross"]  # n equal layers
    write = sum(n * min(run.seq_len, s.positions_held(eng, run)) * s.bytes_per_token for s, n in specs)
    return StepTraffic(weights_read_bytes(card, w_t, batch * run.seq_len), 0, batch * write)
