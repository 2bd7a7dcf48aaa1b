"""Per-rank predictions for the sharded verify that kvplan.cost.parallel does not make: FLOPs, collective bytes and
peaks of one TP x PP rank. Weights and KV bytes come from kvplan.cost.parallel itself (rank_weights, rank_kv_specs).

The FLOPs and peaks of a TP rank are those of a "rank card": the card with num_heads / tp query heads,
kv_heads_per_rank K/V heads, ffn and expert intermediates / tp and the padded vocabulary / tp. Every matrix kvplan's
flops model sums then has exactly the rank's shape (column-parallel outputs and row-parallel inputs divided,
replicated matrices -- router, MLA down-projections -- unchanged), summed over the stage's layers only.

Collective bytes: kvplan.cost.comm (the same model the latency bounds of `kvplan plan` use).
"""

from __future__ import annotations

from kvplan.cost import flops as F
from kvplan.cost.engines import CacheRun
from kvplan.cost.runtimes import get_engine
from kvplan.cost.parallel import Layout, kv_heads_per_rank, pad_vocab, pp_partition, rank_kv_specs
from kvplan.model.card import ModelCard
from kvplan.model.dtypes import DType
from kvplan.units import cdiv


def rank_card(card: ModelCard, tp: int) -> ModelCard:
    """The shapes one TP rank computes with (see the module docstring); num_layers and windows unchanged."""
    update: dict = dict(num_heads=card.num_heads // tp, num_kv_heads=kv_heads_per_rank(card.num_kv_heads, tp),
                        head_dim=card.head_dim, ffn_size=card.ffn_size // tp, vocab_size=pad_vocab(card.vocab_size) // tp)
    if card.moe:
        update["moe"] = card.moe.model_copy(update=dict(expert_ffn_size=card.moe.expert_ffn_size // tp,
                                                        shared_expert_ffn_size=card.moe.shared_ffn // tp))
    return card.model_copy(update=update)


def rank_flops(card: ModelCard, layout: Layout, pp_rank: int, *, phase: str, batch: int, prompt_len: int,
               seq_len: int, engine: str, max_cache_len: int | None = None) -> int:
    """Matmul FLOPs (FlopCounterMode's convention, kvplan.cost.flops) of one prefill of ``prompt_len`` tokens, or of
    the decode step that brings each sequence to ``seq_len`` tokens, on any TP rank of stage ``pp_rank``."""
    eng = get_engine(engine)
    rc = rank_card(card, layout.tp)
    layers = pp_partition(card.num_layers, layout.pp)[pp_rank]
    mode = eng.mla_mode(phase) if card.mla else None
    tokens, new = (prompt_len, prompt_len) if phase == "prefill" else (seq_len, 1)
    run = CacheRun(tokens, 0, max_cache_len)
    keys = [eng.step_keys(phase, tokens, card.window(i), card.chunk(i), run) for i in layers]
    rows = prompt_len if phase == "prefill" and eng.transformers else 1
    total = sum(F.layer_flops(rc, i, batch=batch, new=new, keys=k, mode=mode) for i, k in zip(layers, keys))
    if pp_rank == layout.pp - 1:
        total += 2 * batch * rows * card.hidden_size * rc.vocab_size
    return total


def rank_kv_tensor_bytes(card: ModelCard, kv_t: DType, engine: str, layout: Layout, pp_rank: int, *, batch: int,
                         seq_len: int, block_size: int, max_cache_len: int | None = None) -> list[int]:
    """The rank's cache allocations (kvplan.verify.allocator.kv_tensor_bytes over its own specs), for CUDA rounding."""
    eng, run = get_engine(engine), CacheRun(seq_len, 0, max_cache_len, block_size)
    sizes: list[int] = []
    for spec in rank_kv_specs(card, kv_t, eng, layout, pp_rank):
        if eng.paged:
            sizes += [spec.page_size_bytes(block_size)] * (batch * spec.positions_held(eng, run) // block_size)
        else:
            held = spec.positions_held(eng, run)
            sizes += [batch * held * count * kv_t.vector_bytes(elems) for count, elems in spec.vectors]
    return sizes


def rank_kv_bytes(card: ModelCard, kv_t: DType, engine: str, layout: Layout, pp_rank: int, *, batch: int,
                  seq_len: int, block_size: int, max_cache_len: int | None = None, prefill_len: int | None = None
                  ) -> int:
    """KV bytes of one rank: positions held x bytes per token over its specs (kvplan.cost.parallel.rank_kv_specs).
    ``prefill_len``: the pages a paged cache holds right after a prefill of that many tokens (nothing freed yet)."""
    eng = get_engine(engine)
    specs = rank_kv_specs(card, kv_t, eng, layout, pp_rank)
    if prefill_len is not None and eng.paged:
        return sum(batch * s.bytes_per_token * block_size * cdiv(prefill_len, block_size) for s in specs)
    run = CacheRun(seq_len, 0, max_cache_len, block_size)
    return sum(batch * s.positions_held(eng, run) * s.bytes_per_token for s in specs)
