"""What ``torch.cuda.memory_allocated`` reports for a set of tensors: the CUDA caching allocator's rounding.

PyTorch c10/cuda/CUDACachingAllocator.cpp, ``round_size``: a request below kMinBlockSize (512 B) becomes 512 B,
anything larger is rounded up to a multiple of 512 B; ``memory_allocated`` (stat ``allocated_bytes``) sums the rounded
block sizes. A zero-byte tensor allocates nothing (``malloc`` returns nullptr for size 0). No torch import here.
"""

from __future__ import annotations

from collections.abc import Iterable

from kvplan.model.card import ModelCard
from kvplan.model.dtypes import DType
from kvplan.cost.engines import CacheRun, Engine
from kvplan.cost.kvspec import layer_specs
from kvplan.cost.allocator import round_size as _round_block


def round_size(nbytes: int) -> int:
    """Bytes the caching allocator hands out for a request of ``nbytes`` (CUDACachingAllocator round_size, the
    allocator model of kvplan.cost.allocator); nothing for an empty tensor."""
    return 0 if nbytes <= 0 else _round_block(nbytes)


def memory_allocated(tensor_bytes: Iterable[int]) -> int:
    """``torch.cuda.memory_allocated`` for live tensors of these byte sizes (one allocation each)."""
    return sum(round_size(n) for n in tensor_bytes)


def kv_tensor_bytes(card: ModelCard, kv_dtype: DType, engine: Engine, run: CacheRun, batch: int) -> list[int]:
    """The allocations of the reference caches, from kvplan's layer specs: one tensor per (layer, K or V group)
    holding ``positions_held`` tokens of the batch; vllm: one tensor per block (page) per sequence and layer."""
    sizes: list[int] = []
    for spec in layer_specs(card, kv_dtype, engine):
        if spec.per_sequence:  # a state layer: one (batch, ...) buffer per state, in the state's own dtype
            sizes.append(batch * spec.bytes_per_token)
        elif engine.paged:
            held = spec.positions_held(engine, run) // run.block_size
            sizes += [spec.page_size_bytes(run.block_size)] * (batch * held)
        else:
            held = spec.positions_held(engine, run)
            sizes += [batch * held * count * kv_dtype.vector_bytes(elems) for count, elems in spec.vectors]
    return sizes
