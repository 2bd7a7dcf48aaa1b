"""Bytes the collectives of one decode or prefill step move on one rank, and their lower-bound time: the one
communication model behind the latency bounds of ``kvplan plan`` and the sharded ``kvplan verify`` checks.

Per rank, per step of ``tokens`` = batch x new tokens, ``e`` bytes per element (Megatron-LM, arXiv:1909.08053;
vLLM's TP layers):
- all-reduce (TP > 1): one after each row-parallel output of a decoder layer (attention's O, a state mixer's
  out_proj, both in a Falcon-H1 hybrid layer, the MLP's down / the MoE combine: 2 in a plain decoder layer, 1 in a
  Nemotron-H mamba or mlp layer, 3 in a Zamba2 hybrid layer: o_proj, the shared MLP's down, the mixer's out_proj),
  plus 1 after the vocabulary-parallel embedding on the first stage, each tokens x hidden x e;
- all-gather (TP > 1, last stage): this rank's logits, logit rows x padded_vocab / tp x e; with shared blocks
  (Zamba2) also each adapter's low-rank output in every hybrid layer, tokens x adapter_rank / tp x e
  (``Zamba2LoRA.A``: ``ColumnParallelLinear(gather_output=True)``);
- send / recv (PP > 1): tokens x hidden x e to the next stage / from the previous one.
Ring collectives move 2 (tp - 1) / tp (all-reduce) and (tp - 1) / tp (all-gather, of the gathered total) of their
bytes over one direction of the link, half the both-way figure catalogs state.
"""

from __future__ import annotations

from functools import lru_cache

from kvplan.cost.parallel import Layout, pad_vocab, pp_partition
from kvplan.cost.shared import adapter_gathers
from kvplan.errors import KvplanError
from kvplan.model.card import ModelCard


def comm_bytes(card: ModelCard, layout: Layout, pp_rank: int, *, batch: int, new_tokens: int, logit_rows: int,
               e: int) -> dict[str, int]:
    """Payload bytes of each op one rank of stage ``pp_rank`` moves in one step (module docstring)."""
    layers = pp_partition(card.num_layers, layout.pp)[pp_rank]
    first, last = pp_rank == 0, pp_rank == layout.pp - 1
    hidden = batch * new_tokens * card.hidden_size * e
    tp = layout.tp
    calls = sum(card.mixer(i) == "hybrid" for i in layers) if card.shared_blocks else 0
    adapters = calls * adapter_gathers(card) * batch * new_tokens * (card.shared_blocks.adapter_rank or 0) // tp * e \
        if calls else 0
    return {
        "all_reduce": (_stage_reduces(card, layout.pp, pp_rank) + first) * hidden if tp > 1 else 0,
        "all_gather": (batch * logit_rows * pad_vocab(card.vocab_size) // tp * e if last else 0) + adapters
        if tp > 1 else 0,
        "send": hidden if layout.pp > 1 and not last else 0,
        "recv": hidden if layout.pp > 1 and not first else 0,
    }


@lru_cache(maxsize=256)
def _stage_reduces(card: ModelCard, pp: int, pp_rank: int) -> int:
    """The all-reduces of one pipeline stage's layers (a search asks each stage of each layout once per GPU type)."""
    return sum(_reduces(card, i) for i in pp_partition(card.num_layers, pp)[pp_rank])


def _reduces(card: ModelCard, layer: int) -> int:
    """Row-parallel outputs of one decoder layer, each followed by an all-reduce (module docstring)."""
    mixer = card.mixer(layer)
    shared_mlp = card.shared_blocks is not None and mixer == "hybrid"  # the invoked block's MLP down
    return {None: 0, "attention": 1, "mamba": 1, "hybrid": 2}[mixer] + card.has_mlp(layer) + shared_mlp


def comm_time_s(card: ModelCard, layout: Layout, *, batch: int, new_tokens: int, logit_rows: int, e: int,
                link_bytes_per_s: int | None) -> float:
    """Lower bound on one step's communication time: every stage's collectives in turn (a step crosses them all)."""
    return sum(stage_comm_times_s(card, layout, batch=batch, new_tokens=new_tokens, logit_rows=logit_rows, e=e,
                                  link_bytes_per_s=link_bytes_per_s))


def stage_comm_times_s(card: ModelCard, layout: Layout, *, batch: int, new_tokens: int, logit_rows: int, e: int,
                       link_bytes_per_s: int | None) -> list[float]:
    """Lower bound on each stage's collectives in one step of ``batch`` sequences (its ring all-reduces and
    all-gathers, its send to the next stage), per stage in pipeline order."""
    if layout.tp == 1 and layout.pp == 1:
        return [0.0]
    if not link_bytes_per_s:
        raise KvplanError("--gpu: the GPU states no interconnect_bandwidth_bytes_per_s; add it with --gpu-file")
    one_way, tp = link_bytes_per_s / 2, layout.tp
    return [(2 * (tp - 1) / tp * all_reduce + (tp - 1) * all_gather + send) / one_way
            for all_reduce, all_gather, send in _stage_payloads(card, layout, batch, new_tokens, logit_rows, e)]


@lru_cache(maxsize=1024)
def _stage_payloads(card: ModelCard, layout: Layout, batch: int, new_tokens: int, logit_rows: int,
                    e: int) -> tuple[tuple[int, int, int], ...]:
    """Each stage's (all-reduce, all-gather, send) payload bytes (``comm_bytes``), which no link figure enters:
    once per layout and step, not once per GPU type of a search."""
    out = []
    for pp_rank in range(layout.pp):
        b = comm_bytes(card, layout, pp_rank, batch=batch, new_tokens=new_tokens, logit_rows=logit_rows, e=e)
        out.append((b["all_reduce"], b["all_gather"], b["send"]))
    return tuple(out)
