"""Bytes one step moves between GPU memory and the chip, as exact ints: the memory side of the roofline.

Counted: every weight read once per step, as the engine holds it (a quantized linear's stored values, scales, zero
points and g_idx: kvplan.cost.quant; every other tensor in the weight dtype), so the bytes a step reads are the
weights row's; the KV cache the step attends read once; the new tokens' K/V written once. State layers (conv and
SSM / recurrent states, kvplan.cost.kvspec.state_specs): a decode step reads each sequence's states once and writes
them back once (vLLM ``causal_conv1d_update`` and ``selective_state_update`` update them in place; transformers
copies them into the cache), whatever the length; a prefill from an empty cache writes them once.
``kv_read_bytes`` and ``kv_write_bytes`` hold these state bytes beside K/V, as ``kv_cache.total_bytes`` does.
Not counted (state it wherever these are used): activations, logits, re-reads of K/V tiles inside a prefill's
attention kernel, fp8 per-layer K/V scales, allocator padding, the rotary cos/sin cache (a step gathers its
positions' rows), vLLM's bf16 W_UK / W_UV copies of a quantized MLA kv_b_proj (a decode step reads them in its
place: the quantized bytes are counted, a lower bound).

Choices, explicit:

- A multimodal card's vision tower and projector (kvplan.cost.vision) are not read by a decoder step: the encoder
  runs once per image, before the prefill that consumes its tokens.
- Embedding tables are gathered, not streamed: a step reads only its tokens' rows (tokens x hidden, and the same
  for a learned position table). A tied LM head streams the whole embedding matrix.
- MoE: a step reads the weights of the experts its tokens are routed to. Per MoE layer that is
  min(num_experts, tokens x experts_per_token) experts: exact for one token, and the usual assumption when a batch
  spreads over all experts. Routing can concentrate tokens on fewer experts, so for batch > 1 this is an upper
  bound on the experts touched; ``moe_weights_read_bytes_min`` gives the k-experts lower bound.

One GPU of a layout (``rank_held_weights``, ``path_traffic``): what its rank holds (kvplan.cost.parallel
``rank_weights``: its shards, the tensors it replicates) and caches (its KV specs: kv_heads_per_rank heads, the MLA
latent whole on every rank), summed over the pipeline stages a token passes. A replicated tensor or K/V head is read
in full by every rank that holds it. Routed experts held as slices (TP, vLLM's DP x TP group) are read as slices
of the experts the tokens touch; under expert parallelism a rank holds whole experts and reads its share of those
touched, the touched experts spread evenly over the ranks. vLLM's DP replicas route every replica's tokens through
the experts they split (``routed_scale``: fused_moe/layer.py ``FusedMoE`` with dp_size > 1 dispatches the DP
group's tokens to the experts, e.g. the naive prepare/finalize's all-gather over the DP ranks, before they run).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable

from kvplan.cost.engines import CacheRun, Engine
from kvplan.cost.kvspec import layer_spec_counts
from kvplan.cost.params import count_params
from kvplan.model.card import ModelCard
from kvplan.model.dtypes import DType
from kvplan.units import cdiv

if TYPE_CHECKING:
    from kvplan.cost.parallel import Layout, RankWeights


@dataclass(frozen=True)
class StepTraffic:
    weights_read_bytes: int
    kv_read_bytes: int
    kv_write_bytes: int

    @property
    def total_bytes(self) -> int:
        return self.weights_read_bytes + self.kv_read_bytes + self.kv_write_bytes

    def __add__(self, other: StepTraffic) -> StepTraffic:
        return StepTraffic(self.weights_read_bytes + other.weights_read_bytes, self.kv_read_bytes + other.kv_read_bytes,
                           self.kv_write_bytes + other.kv_write_bytes)


@dataclass(frozen=True)
class HeldWeights:
    """The weights one GPU (or the whole model) holds, as a step reads them: ``elems`` elements in ``dtype`` and
    ``stored`` bytes of quantized tensors, streamed whole, every held routed expert among them; ``gather`` elements
    per token of the embedding lookups it runs; per MoE layer ``experts`` routed experts held (all ``num_experts``
    as slices without expert parallelism), each ``expert_elems`` elements and ``expert_stored`` quantized bytes
    (``moe``: (layers, expert_elems, expert_stored) groups). ``routed_scale``: tokens the experts see per token of
    the replica's batch (vLLM's DP replicas: dp)."""

    dtype: DType
    elems: int
    stored: int = 0
    gather: int = 0
    moe: tuple[tuple[int, int, int], ...] = ()
    experts: int = 0
    num_experts: int = 0
    top_k: int = 0
    routed_scale: int = 1

    def touched(self, tokens: int, experts_touched: int | None = None) -> int:
        """Routed experts of one MoE layer a step over ``tokens`` tokens reads on this GPU (module docstring)."""
        touched = experts_touched or min(self.num_experts, tokens * self.routed_scale * self.top_k)
        if self.experts == self.num_experts:
            return touched
        return min(self.experts, cdiv(touched * self.experts, self.num_experts))  # EP: an even share of them

    def read_bytes(self, tokens: int, experts_touched: int | None = None) -> int:
        """Bytes a step over ``tokens`` tokens reads: everything streamed, the touched experts, the gathered rows."""
        idle = self.experts - self.touched(tokens, experts_touched) if self.moe else 0
        elems = self.elems + tokens * self.gather - idle * sum(n * e for n, e, _ in self.moe)
        return self.stored - idle * sum(n * b for n, _, b in self.moe) + self.dtype.data_bytes(elems)


def model_weights(card: ModelCard, w_t: DType, engine: Engine | None = None, gpu=None) -> HeldWeights:
    """The whole model as the estimate's weights row holds it (kvplan.planning.estimate.weights_result): a quantized
    checkpoint's linears as stored (kvplan.cost.quant, one rank holding all; MXFP4 experts in ``engine``'s kernel
    layout on ``gpu``, ``held_card``: vLLM picks its MXFP4 backend by GPU), every other parameter in ``w_t``."""
    if card.quantization is not None and engine is not None:
        from kvplan.cost.quant import held_card

        card = held_card(card, engine, gpu)
    p = count_params(card)
    elems = p.total - p.vision - p.embedding - p.positions
    if card.tie_embeddings:
        elems += p.embedding  # the LM head streams the tied matrix
    gather = card.hidden_size * (2 if card.position == "learned" else 1)
    stored, moe, q = 0, (), card.quantization
    if q is not None:
        from kvplan.cost.parallel import Layout, rank_quant  # only for a quantized checkpoint

        quant = rank_quant(card, Layout(), 0)
        elems, stored = elems - quant.quantized_elems, quant.stored
    if card.moe is not None:
        e_elems, e_stored = expert_slice(card, 1)
        moe = ((card.ffn_layers[1], e_elems, e_stored),)
    return HeldWeights(w_t, elems, stored, gather, moe, *_routing(card, None))


def expert_slice(card: ModelCard, tp: int) -> tuple[int, int]:
    """(unquantized elements, quantized stored bytes) of one routed expert's slice on one of ``tp`` ranks."""
    from kvplan.cost.shapes import ffn_matrices

    mats = ffn_matrices(card, card.moe.expert_ffn_size)
    elems = sum(m.shard(tp).params for m in mats)  # tp 1: ffn_params(card, expert_ffn_size)
    q = card.quantization
    if q is None:
        return elems, 0
    from kvplan.cost.quant import matrix_bytes

    quant = sum(matrix_bytes(q, m, tp) for m in mats)
    return elems - quant.quantized_elems, quant.stored


def _routing(card: ModelCard, layout: Layout | None, tp_rank: int = 0) -> tuple[int, int, int, int]:
    """(experts held per MoE layer, num_experts, experts_per_token, routed_scale) on ``layout``'s rank."""
    moe = card.moe
    if moe is None:
        return 0, 0, 0, 1
    if layout is None:
        return moe.num_experts, moe.num_experts, moe.experts_per_token, 1
    from kvplan.cost.parallel import local_experts

    held = local_experts(moe.num_experts, layout.tp * layout.dp, tp_rank) if layout.expert_parallel else moe.num_experts
    return held, moe.num_experts, moe.experts_per_token, layout.dp


def rank_held_weights(card: ModelCard, w_t: DType, layout: Layout, w: RankWeights) -> HeldWeights:
    """What rank ``w`` (kvplan.cost.parallel.rank_weights of ``layout``: the replica's weight layout) holds, as a
    step reads it: its weights row without the vision tower, the embedding tables it only gathers from (the first
    stage's lookups; a copy another stage holds is not read), an LM head held before the last stage, and the idle
    experts. ``layout.dp``: the replicas whose tokens the routed experts see (vLLM: dp; a whole copy: 1)."""
    from kvplan.cost.parallel import _positions, moe_tp

    b, first, last = w.breakdown, w.pp_rank == 0, w.pp_rank == layout.pp - 1
    elems = w.params - w.quant.quantized_elems - b.get("vision", 0)
    if not (card.tie_embeddings and last):
        elems -= b.get("embedding", 0)  # gathered (a tied head on the last stage streams it)
    if not last:
        elems -= b.get("lm_head", 0)
    gather = 0
    if first:
        elems -= _positions(card)
        gather = card.hidden_size * (2 if card.position == "learned" else 1)
    moe = ()
    if card.moe is not None:
        layers = sum(1 for i in w.layers if card.is_moe_layer(i))
        if layers:
            moe = ((layers, *expert_slice(card, moe_tp(layout))),)
    return HeldWeights(w_t, elems, w.quant.stored, gather, moe, *_routing(card, layout, w.tp_rank))


def weights_read_bytes(card: ModelCard, w_t: DType, tokens: int, *, experts_touched: int | None = None,
                       engine: Engine | None = None) -> int:
    """Weight bytes one step over ``tokens`` tokens (whole batch) reads; see the module docstring for MoE."""
    return model_weights(card, w_t, engine).read_bytes(tokens, experts_touched)


def moe_weights_read_bytes_min(card: ModelCard, w_t: DType, tokens: int, engine: Engine | None = None) -> int:
    """Lower bound for MoE: every token routed to the same experts_per_token experts."""
    k = card.moe.experts_per_token if card.moe else None
    return weights_read_bytes(card, w_t, tokens, experts_touched=k, engine=engine)


Specs = Iterable[tuple[object, int]]  # (a layer's cache spec, how many such layers): KVLayerSpec or CacheSpec


@dataclass(frozen=True)
class CacheSpec:
    """A layer's cache where no KVLayerSpec describes it (llama.cpp's quantized -ctk/-ctv types): the bytes one
    cached token takes (a state layer: the whole state, ``per_sequence``), and its window or chunk."""

    bytes_per_token: int
    window: int | None = None
    chunk: int | None = None
    per_sequence: bool = False
    kind: str = "full"


def kv_decode_bytes(specs: Specs, eng: Engine, run: CacheRun) -> tuple[int, int]:
    """(read, written) K/V and state bytes of one sequence's decode step to ``run.seq_len`` tokens."""
    specs = [(s, n) for s, n in specs if s.kind != "cross"]
    return (sum(n * _decode_positions(s, eng, run) * s.bytes_per_token for s, n in specs),
            sum(n * s.bytes_per_token for s, n in specs))


def kv_prefill_bytes(specs: Specs, eng: Engine, run: CacheRun) -> int:
    """K/V and state bytes one sequence's prefill of ``run.seq_len`` tokens writes (the positions the engine keeps)."""
    return sum(n * min(run.seq_len, _held(s, eng, run)) * s.bytes_per_token for s, n in specs if s.kind != "cross")


def _held(s, eng: Engine, run: CacheRun) -> int:
    if isinstance(s, CacheSpec):  # positions_held of KVLayerSpec, by the same rules
        return 1 if s.per_sequence else eng.chunk_positions(s.chunk, run) if s.chunk else eng.positions_held(s.window,
                                                                                                            run)
    return s.positions_held(eng, run)


def decode_traffic(card: ModelCard, w_t: DType, kv_t: DType, eng: Engine, run: CacheRun, batch: int) -> StepTraffic:
    """The decode step that brings each of ``batch`` sequences to ``run.seq_len`` tokens: it reads every cached
    position it attends (the new token's entry included, written first as paged kernels do) and writes one token; a
    state layer reads and writes its whole fixed-size states (``bytes_per_token`` of a per-sequence spec)."""
    return path_traffic(((model_weights(card, w_t, eng), layer_spec_counts(card, kv_t, eng)),), eng, run, batch,
                        decode=True)


def _decode_positions(s, eng: Engine, run: CacheRun) -> int:
    """Cached positions a decode step reads in the layer of ``s``: its one state, its chunk, or its keys; on a paged
    cache the attended tokens, not the whole pages that hold them (the last page's empty slots are not loaded: vLLM
    0.33.0 v1/attention/ops/triton_unified_attention.py kernel_unified_attention masks its K/V loads by
    seq_offset < max_seq_prefix_len; FlashAttention 3 hopper/paged_kv.h PagedKVManager.load_K / load_V load rows
    below seqlen_k), so a vLLM hybrid's raised block changes the pages it holds, not the bytes a step reads."""
    if s.per_sequence:
        return 1
    if s.chunk:
        return eng.chunk_decode_keys(run.seq_len, s.chunk, run)
    return eng.decode_keys(run.seq_len, s.window, run)


def prefill_traffic(card: ModelCard, w_t: DType, kv_t: DType, eng: Engine, run: CacheRun, batch: int) -> StepTraffic:
    """A prefill of ``run.seq_len`` prompt tokens: weights once, K/V written for the positions the engine keeps."""
    return path_traffic(((model_weights(card, w_t, eng), layer_spec_counts(card, kv_t, eng)),), eng, run, batch,
                        decode=False)


def path_traffic(stages: Iterable[tuple[HeldWeights, Specs]], eng: Engine, run: CacheRun, batch: int, *,
                 decode: bool) -> StepTraffic:
    """The bytes one GPU of each stage moves in a step of ``batch`` sequences, summed over the stages a token passes
    (``stages``: each one's held weights and its cache specs on that GPU): a decode step (one new token each, the
    cache read to ``run.seq_len``) or a prefill of ``run.seq_len`` tokens (weights once, K/V written)."""
    out = StepTraffic(0, 0, 0)
    for held, specs in stages:
        if decode:
            read, write = kv_decode_bytes(specs, eng, run)
            out += StepTraffic(held.read_bytes(batch), batch * read, batch * write)
        else:
            out += StepTraffic(held.read_bytes(batch * run.seq_len), 0, batch * kv_prefill_bytes(specs, eng, run))
    return out
