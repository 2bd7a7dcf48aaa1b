"""Notes an estimate carries: what the engine's memory holds beyond its tensors, and inputs outside the model's
trained range."""

from __future__ import annotations

from kvplan.model.card import ModelCard
from kvplan.planning.results import KVCacheResult
from kvplan.units import fmt_bytes


def input_notes(card: ModelCard, seq_len: int) -> list[str]:
    notes = []
    if not card.has_kv_cache:
        notes.append(f"{card.name} is encoder-only: it reads its whole input in one bidirectional pass and holds "
                     "no KV cache at inference, so the KV cache is 0 B.")
    if seq_len > card.max_position_embeddings:
        notes.append(f"--seq-len {seq_len} exceeds the model's max_position_embeddings "
                     f"({card.max_position_embeddings}); the model was not trained for this length.")
    return notes


def engine_notes(kv: KVCacheResult, batch: int) -> list[str]:
    """What the engine's memory holds beyond its tensors' own sizes."""
    from kvplan.cost.runtimes import get_engine

    notes, rt = [], get_engine(kv.engine)
    for g in kv.groups:
        if rt.sliding_view and g.kind == "sliding" and g.positions_held == g.window - 1:
            # transformers slices [-W+1:] as a view of the step's cat() result: the storage of W positions stays
            extra = batch * g.layers * g.bytes_per_token_per_layer
            notes.append(f"{rt.name}: each sliding layer's {g.positions_held} positions are a view of a "
                         f"{g.window}-position tensor, so the allocator holds {fmt_bytes(extra)} ({extra} B) more "
                         "than the cache tensors (and a whole prompt's worth right after a long prefill).")
    return notes
