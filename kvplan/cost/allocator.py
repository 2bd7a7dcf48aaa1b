"""PyTorch's CUDA caching allocator, as far as the bytes it reports as allocated: what vLLM's "Model loading took"
figure measures (``DeviceMemoryProfiler``: ``torch.cuda.reset_peak_memory_stats`` then ``max_memory_allocated``, i.e.
the allocated bytes after the load minus before it; vllm/utils.py 0.6 - 0.9, platforms/cuda.py
get_current_memory_usage 0.8 - 0.33).

``allocated_bytes`` counts whole blocks, not the bytes asked for (c10/cuda/CUDACachingAllocator.cpp, PyTorch 2.x with
the default configuration: no max_split_size, no expandable segments, one stream):

- a request is rounded up to a multiple of 512 B (``round_size``, kMinBlockSize);
- up to 1 MiB (kSmallSize) it is served from the small pool, else from the large pool;
- with no cached free block large enough (best fit: the smallest free block of the pool that holds it,
  ``get_free_block``), a new segment is reserved (``get_allocation_size``): 2 MiB for the small pool (kSmallBuffer),
  20 MiB for a large request under 10 MiB (kLargeBuffer, kMinLargeAlloc), else the request rounded up to 2 MiB
  (kRoundLarge);
- the block is split and the rest returned to the pool only when the rest is at least 512 B (small pool) or MORE than
  1 MiB (large pool, ``should_split``); otherwise the whole block is the allocation and ``allocated_bytes`` grows by
  all of it;
- a freed block merges with free neighbours of its segment (``try_merge_blocks``).

So a weight of 259 MiB takes a 260 MiB segment whose 1 MiB rest stays in its block: 1 MiB more than the tensor. Which
blocks a load leaves unsplit depends on the order of the allocations and frees; the caller gives that order.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass, field

MIN_BLOCK = 512  # kMinBlockSize
SMALL_SIZE = 1 << 20  # kSmallSize: the largest request of the small pool
SMALL_BUFFER = 2 << 20  # kSmallBuffer: a small-pool segment
LARGE_BUFFER = 20 << 20  # kLargeBuffer: the segment of a large request under kMinLargeAlloc
MIN_LARGE_ALLOC = 10 << 20  # kMinLargeAlloc
ROUND_LARGE = 2 << 20  # kRoundLarge


def round_size(nbytes: int) -> int:
    """Bytes the allocator hands out for a request of ``nbytes`` (round_size); a zero-byte tensor allocates nothing
    (``malloc`` returns nullptr for size 0)."""
    if nbytes <= 0:
        return 0
    return MIN_BLOCK if nbytes < MIN_BLOCK else MIN_BLOCK * -(-nbytes // MIN_BLOCK)


def segment_size(size: int) -> int:
    """get_allocation_size: the cudaMalloc'd segment for a rounded request that no cached block holds."""
    if size <= SMALL_SIZE:
        return SMALL_BUFFER
    if size < MIN_LARGE_ALLOC:
        return LARGE_BUFFER
    return ROUND_LARGE * -(-size // ROUND_LARGE)


@dataclass(eq=False)
class _Block:
    addr: int
    size: int
    small: bool
    prev: _Block | None = None
    next: _Block | None = None
    allocated: bool = False


@dataclass
class CachingAllocator:
    """The allocated-bytes accounting of one device's caching allocator (module docstring)."""

    allocated: int = 0
    _free: dict = field(default_factory=lambda: {True: [], False: []})  # pool -> sorted [(size, addr, block)]
    _next_addr: int = 0

    def malloc(self, nbytes: int) -> _Block:
        size = round_size(nbytes)
        small = size <= SMALL_SIZE
        pool = self._free[small]
        i = bisect.bisect_left(pool, (size, -1))
        if i < len(pool):
            block = pool.pop(i)[2]
        else:
            seg = segment_size(size)
            block = _Block(self._next_addr, seg, small)
            self._next_addr += seg
        rest = block.size - size
        if (rest >= MIN_BLOCK) if small else (rest > SMALL_SIZE):
            tail = _Block(block.addr + size, rest, small, block, block.next)
            if block.next is not None:
                block.next.prev = tail
            block.next, block.size = tail, size
            self._insert(tail)
        block.allocated = True
        self.allocated += block.size
        return block

    def free(self, block: _Block) -> None:
        block.allocated = False
        self.allocated -= block.size
        for other in (block.prev, block.next):
            if other is None or other.allocated:
                continue
            self._remove(other)
            if other is block.prev:
                block.addr, block.prev = other.addr, other.prev
                if other.prev is not None:
                    other.prev.next = block
            else:
                block.next = other.next
                if other.next is not None:
                    other.next.prev = block
            block.size += other.size
        self._insert(block)

    def _insert(self, block: _Block) -> None:
        bisect.insort(self._free[block.small], (block.size, block.addr, block))

    def _remove(self, block: _Block) -> None:
        pool = self._free[block.small]
        pool.pop(bisect.bisect_left(pool, (block.size, block.addr)))


def allocated_bytes(events: Iterable[tuple[str, int]]) -> int:
    """The allocated bytes after ``events``, in order: ("alloc", nbytes) allocates a tensor that is kept until a
    ("free", i) names it by the index of its alloc event; the allocator starts with no cached blocks (vLLM 0.10+ calls
    torch.cuda.empty_cache() before measuring)."""
    a, blocks = CachingAllocator(), []
    for kind, n in events:
        if kind == "alloc":
            blocks.append(a.malloc(n) if n > 0 else None)
        elif blocks[n] is not None:
            a.free(blocks[n])
    return a.allocated
