"""The weights of one vLLM rank as PyTorch's CUDA caching allocator holds them: allocated BLOCK bytes, not requested.

vLLM's ``Model loading took X GiB`` is ``torch.cuda.max_memory_allocated`` right after a peak reset, before and after
load_model (vllm/utils DeviceMemoryProfiler, platforms/cuda.py get_current_memory_usage, 0.8.x-0.10.x): the bytes of
the caching allocator's allocated blocks. A block is a tensor's size rounded up, and a tensor that does not fit a
free block gets a new segment, of which it keeps the whole when too little would remain to split off. This module
models that allocator (PyTorch 2.6-2.8 c10/cuda/CUDACachingAllocator.cpp, default settings: no expandable segments,
no max_split_size) and replays through it the tensors vLLM creates while building one rank, in construction order.

A second figure of the same replay: the free bytes the rank's segments keep after ``torch.cuda.empty_cache``
(``cached_free_bytes``), which vLLM V0 0.6.5-0.6.6 count as non-torch memory (serving_vllm_v0.py, "Non-torch memory
by release"); those releases ran PyTorch 2.5 (vLLM PR 9588 moved to 2.5 in October 2024; vllm#12719: 2.5.1 still
pinned in February 2025); the constants below are the same in the 1.x-era copies of CUDACachingAllocator.cpp,
and the 2.5 split, best-fit and merge rules are taken as 2.6's. For a GPTQ checkpoint
the replay follows vLLM 0.6.5's GPTQ-Marlin load (create_weights, then the repack after every weight is loaded).

Pure arithmetic, exact ints; no torch. An estimate of the mechanism (the tensor order is the generic decoder's:
vision tower, embedding, per layer qkv / o_proj / rotary cache / mlp, final norm, lm_head), not a measurement.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING

from kvplan.model.card import ModelCard
from kvplan.model.dtypes import DType
from kvplan.units import cdiv

if TYPE_CHECKING:
    from kvplan.cost.parallel import Layout

# c10/cuda/CUDACachingAllocator.cpp (PyTorch 2.6), the constants at the top of the file
MIN_BLOCK_BYTES = 512  # kMinBlockSize: every size is rounded up to a multiple of 512 B (round_size)
SMALL_SIZE_BYTES = 1 << 20  # kSmallSize: sizes up to 1 MiB come from the small pool
SMALL_BUFFER_BYTES = 2 << 20  # kSmallBuffer: a small-pool segment is 2 MiB
LARGE_BUFFER_BYTES = 20 << 20  # kLargeBuffer: a large-pool segment for sizes below kMinLargeAlloc is 20 MiB
MIN_LARGE_ALLOC_BYTES = 10 << 20  # kMinLargeAlloc
ROUND_LARGE_BYTES = 2 << 20  # kRoundLarge: larger segments are rounded up to 2 MiB
# How a replay builds the rotary cos/sin caches: (kept in float32, M-RoPE factor or None for the card's default);
# None in its place: none built. vLLM's: a copy in the model dtype (``rotary_cache``), its M-RoPE length
VLLM_ROPE: tuple[bool, int | None] = (False, None)


def round_size(nbytes: int) -> int:
    """``round_size`` (default roundup_power2_divisions off): a multiple of kMinBlockSize, at least one."""
    return MIN_BLOCK_BYTES * max(1, cdiv(nbytes, MIN_BLOCK_BYTES))


def segment_size(size: int) -> int:
    """``get_allocation_size``: the cudaMalloc a rounded ``size`` asks for when no free block fits."""
    if size <= SMALL_SIZE_BYTES:
        return SMALL_BUFFER_BYTES
    if size < MIN_LARGE_ALLOC_BYTES:
        return LARGE_BUFFER_BYTES
    return ROUND_LARGE_BYTES * cdiv(size, ROUND_LARGE_BYTES)


def should_split(small: bool, remaining: int) -> bool:
    """``should_split``: a small block splits when at least kMinBlockSize would remain, a large one only when more
    than kSmallSize would (max_split_size unset)."""
    return remaining >= MIN_BLOCK_BYTES if small else remaining > SMALL_SIZE_BYTES


@dataclass(eq=False)
class Block:
    size: int
    small: bool
    free: bool = True
    prev: Block | None = None
    next: Block | None = None


@dataclass
class CachingAllocator:
    """Blocks of the two pools; ``allocated`` is what torch.cuda.memory_allocated reports, ``requested`` the tensors'
    own bytes, ``reserved`` the segments (cudaMalloc'd)."""

    pools: dict[bool, list[Block]] = field(default_factory=lambda: {True: [], False: []})
    allocated: int = 0
    requested: int = 0
    reserved: int = 0
    segments: list[Block] = field(default_factory=list)  # the first block of each segment (merges keep it first)

    def malloc(self, nbytes: int) -> Block:
        """``malloc``: best fit among the pool's free blocks (``get_free_block``: the smallest that fits), else a new
        segment (``alloc_block``); then ``alloc_found_block`` splits off the remainder when should_split."""
        size = round_size(nbytes)
        small = size <= SMALL_SIZE_BYTES
        pool = self.pools[small]
        fits = [b for b in pool if b.size >= size]
        if fits:
            block = min(fits, key=lambda b: b.size)
            pool.remove(block)
        else:
            block = Block(segment_size(size), small)
            self.reserved += block.size
            self.segments.append(block)
        rest = block.size - size
        if should_split(small, rest):
            tail = Block(rest, small, prev=block, next=block.next)
            if block.next:
                block.next.prev = tail
            block.next, block.size = tail, size
            pool.append(tail)
        block.free = False
        self.allocated += block.size
        self.requested += nbytes
        return block

    def release(self, block: Block, nbytes: int) -> None:
        """``free_block``: back to its pool, merged with free neighbours of the same segment (``try_merge_blocks``);
        segments are kept (no empty_cache while a model loads)."""
        self.allocated -= block.size
        self.requested -= nbytes
        block.free, pool = True, self.pools[block.small]
        for other in (block.prev, block.next):
            if other is not None and other.free:
                pool.remove(other)
                first, second = (other, block) if other is block.prev else (block, other)
                first.size += second.size
                first.next = second.next
                if second.next:
                    second.next.prev = first
                block = first
        pool.append(block)

    def cached_free(self) -> int:
        """Free bytes inside segments that still hold an allocated block: what ``torch.cuda.empty_cache`` keeps
        (``release_cached_blocks`` -> ``release_blocks`` returns only segments whose blocks are all free), i.e.
        ``memory_reserved() - memory_allocated()`` right after it."""
        held = 0
        for head in self.segments:
            blocks = []
            b: Block | None = head
            while b is not None:
                blocks.append(b)
                b = b.next
            if not all(x.free for x in blocks):
                held += sum(x.size for x in blocks if x.free)
        return held


def rotary_cache(a: CachingAllocator, positions: int, rotary_dim: int, dtype_bytes: int, linear: bool,
                 keep_fp32: bool = False) -> None:
    """vLLM rotary_embedding.py ``RotaryEmbedding.__init__`` on the device (0.8.x-0.10.x): _compute_inv_freq (float32
    arange, its power and reciprocal; the first three freed), _compute_cos_sin_cache (float32 t, divided by the
    factor for linear scaling; freqs, cos, sin; their concatenation, copied again by
    ``LinearScalingRotaryEmbedding``'s torch.cat(cache_list)), then ``cache.to(dtype)`` kept as the buffer while the
    float32 temporaries are freed. ``keep_fp32``: SGLang on CUDA keeps the float32 concatenation itself (its
    rotary_embedding/base.py ``RotaryEmbedding.__init__``, 0.5.10.post1: the same _compute_inv_freq and
    _compute_cos_sin_cache, then ``if not _is_cuda: cache = cache.to(dtype)``): no copy."""
    half, f32 = rotary_dim // 2, 4
    inv = [a.malloc(half * f32) for _ in range(4)]
    for b in inv[:3]:
        a.release(b, half * f32)
    temps = [(inv[3], half * f32)]
    t = a.malloc(positions * f32)
    if linear:
        scaled_t = a.malloc(positions * f32)
        a.release(t, positions * f32)
        t = scaled_t
    temps.append((t, positions * f32))
    temps += [(a.malloc(positions * half * f32), positions * half * f32) for _ in range(3)]  # freqs, cos, sin
    cache = a.malloc(positions * rotary_dim * f32)
    out = a.malloc(positions * rotary_dim * f32) if linear else cache
    for b, n in temps:
        a.release(b, n)
    if keep_fp32:
        return
    if linear:
        a.release(cache, positions * rotary_dim * f32)
    a.malloc(positions * rotary_dim * dtype_bytes)
    a.release(out, positions * rotary_dim * f32)


def rounding_bytes(card: ModelCard, w_t: DType, layout: Layout, pp_rank: int, *, stages: list[range] | None = None,
                   vocab_every_stage: frozenset[str] = frozenset(), buffers: bool = True, offload: int = 0,
                   tower: bool = True) -> int:
    """What the allocator's blocks hold beyond the tensors of rank (0, ``pp_rank``) (``_replay``, computed once per
    card, dtype, layout and stage: the layout search asks for the same rank many times). An AWQ checkpoint
    (``_awq_replayed``) is replayed with its packed tensors as vLLM creates them (``_gptq_tensors``); the AWQ-Marlin
    repack is not: it replaces each tensor by one of the same bytes (kvplan.cost.quant), which the allocator places
    in the blocks the load left, the rests moving by at most 4.3 MiB in the four AWQ cards of docs/capacity.md
    ("Weights as the caching allocator holds them"). Other quantized weights and online fp8: 0 (not replayed;
    kvplan.cost.quant counts what the checkpoint stores). ``offload``: vLLM's
    --cpu-offload-gb budget in bytes; the blocks of the parameters it moves are freed as their layer is built
    (kvplan.cost.offload), and the requested bytes of those the replay holds leave ``requested`` with them.
    ``tower`` False: a multimodal card's vision tower and projector are not built (vLLM --limit-mm-per-prompt 0)."""
    q = card.quantization
    if (q is not None and not _awq_replayed(card)) or w_t.bits not in (16, 32):
        return 0
    a = _replay(card, w_t, layout, pp_rank, None if stages is None else tuple(stages), frozenset(vocab_every_stage),
                VLLM_ROPE if buffers else None, q is not None, offload, tower)
    return a.allocated - a.requested


def cached_free_bytes(card: ModelCard, w_t: DType, layout: Layout, pp_rank: int, *, marlin: bool,
                      stages: list[range] | None = None, vocab_every_stage: frozenset[str] = frozenset()) -> int | None:
    """The free bytes the loaded rank's segments keep after ``torch.cuda.empty_cache`` (CachingAllocator.cached_free):
    segment tails beside large tensors, the rest of the 20 MiB segments that tensors of 1-10 MiB share, and, for a
    GPTQ checkpoint served by vLLM's Marlin kernel (``marlin``: compute capability 8.0+), the holes its repacking
    leaves (``_gptq_marlin_repack``). None where the replay does not model the load (other quantizations, fp8, GPTQ
    with act-order or without Marlin, MoE or vision models with quantized weights)."""
    q = card.quantization
    if q is not None and not (marlin and _marlin_gptq(card)):
        return None
    if q is None and w_t.bits not in (16, 32):
        return None
    a = _replay(card, w_t, layout, pp_rank, None if stages is None else tuple(stages), frozenset(vocab_every_stage),
                VLLM_ROPE, q is not None, 0)
    return a.cached_free()


def reserved_rest_bytes(card: ModelCard, w_t: DType, layout: Layout, pp_rank: int, *, stages: list[range] | None = None,
                        tower: bool = True, rope_fp32: bool = True, mrope_factor: int | None = None) -> int:
    """What the loaded rank's segments hold beyond its tensors' own bytes once ``torch.cuda.empty_cache`` has run:
    the blocks' rounding (allocated - requested) and the free bytes of segments that still hold a block
    (CachingAllocator.cached_free), i.e. memory_reserved() less the tensors. SGLang's "Load weight end ... mem usage"
    is the drop of cudaMemGetInfo's free memory across ``load_model``, each side read right after
    ``torch.cuda.empty_cache`` (srt/model_executor/model_runner.py ``load_model`` and utils/common.py
    ``get_available_gpu_memory``, 0.5.10.post1; model_runner.py and utils.py of 0.4.4 the same): reserved memory,
    not allocated. The replay is ``_replay``'s (the generic decoder's construction order; ``rope_fp32`` /
    ``mrope_factor``: the rotary cache as the engine builds it); 0 for quantized weights or other than 16/32-bit
    (their loads are not replayed for this engine)."""
    if not rests_replayed(card, w_t):
        return 0
    return _reserved_rests(card, w_t, layout, pp_rank, None if stages is None else tuple(stages), tower, rope_fp32,
                           mrope_factor)


def rests_replayed(card: ModelCard, w_t: DType) -> bool:
    """Whether ``reserved_rest_bytes`` replays this load: 16- or 32-bit weights of an unquantized checkpoint."""
    return card.quantization is None and w_t.bits in (16, 32)


@lru_cache(maxsize=1024)
def _reserved_rests(card: ModelCard, w_t: DType, layout: Layout, pp_rank: int, stages: tuple[range, ...] | None,
                    tower: bool, rope_fp32: bool, mrope_factor: int | None) -> int:
    """``reserved_rest_bytes`` once per card, dtype, layout and stage (a search asks for the same rank per GPU type;
    cached_free walks every segment)."""
    a = _replay(card, w_t, layout, pp_rank, stages, frozenset(), (rope_fp32, mrope_factor), False, 0, tower)
    return a.allocated - a.requested + a.cached_free()


def _marlin_gptq(card: ModelCard) -> bool:
    """vLLM 0.6.5 gptq_marlin.py GPTQMarlinConfig.is_gptq_marlin_compatible: method gptq, (bits, sym) in TYPE_MAP
    ((4, True), (8, True)), a group size Marlin supports (marlin_utils.py MARLIN_SUPPORTED_GROUP_SIZES); act-order
    (desc_act: marlin_sort_g_idx's argsort) is not replayed, nor MoE or vision towers."""
    q = card.quantization
    return (q.method == "gptq" and q.sym is True and q.group_size in (-1, 32, 64, 128) and not q.desc_act
            and card.moe is None and card.vision is None)


def _awq_replayed(card: ModelCard) -> bool:
    """An AWQ checkpoint whose load the replay follows: vLLM awq.py AWQLinearMethod / awq_marlin.py
    AWQMarlinLinearMethod.create_weights (qweight, qzeros, scales; then LinearBase's bias), dense and text-only
    (fused AWQ experts and vision towers are not replayed)."""
    return card.quantization.method == "awq" and card.moe is None and card.vision is None


def _gptq_tensors(card: ModelCard, w_t: DType, matrices, tp: int) -> list[tuple[str, int]]:
    """One fused GPTQ linear's tensors in GPTQMarlinLinearMethod.create_weights order (vLLM 0.6.5 gptq_marlin.py):
    qweight int32 [k / pack, n], g_idx int32 [k] (one per fused module), qzeros int32 [G, n / pack], scales [G, n],
    then LinearBase's bias in the model dtype (kvplan.cost.quant.matrix_bytes gives each part's bytes). An AWQ
    linear has no g_idx: qweight int32 [k, n / pack], qzeros, scales, bias (awq.py / awq_marlin.py create_weights)."""
    from kvplan.cost.quant import matrix_bytes

    parts = [matrix_bytes(card.quantization, m, tp, card.num_kv_heads, card.head_dim) for m in matrices]
    shards = [m.shard(tp, card.num_kv_heads, card.head_dim) for m in matrices]
    bias = sum(w_t.data_bytes(s.n_out) for s in shards if s.bias)
    return [("qweight", sum(p.data for p in parts)), ("g_idx", parts[0].g_idx), ("qzeros", sum(p.zeros for p in parts)),
            ("scales", sum(p.scales for p in parts)), *([("bias", bias)] if bias else [])]


def _gptq_marlin_repack(a: CachingAllocator, modules: list[tuple[int, dict[str, tuple[Block, int]]]]) -> None:
    """vLLM 0.6.5 model_loader/loader.py: after every weight is loaded, process_weights_after_loading per module in
    named_modules order; model_executor/layers/quantization/kernels/marlin.py
    MarlinLinearKernel.process_weights_after_loading: a per-layer workspace
    (marlin_utils.py marlin_make_workspace: (n // GPTQ_MARLIN_MIN_THREAD_N 64) x GPTQ_MARLIN_MAX_PARALLEL 16 int32),
    g_idx and qzeros replaced by empty tensors (no desc_act; no zero points), gptq_marlin_repack's new qweight of the
    same size, then marlin_permute_scales' new scales, each old tensor freed as its replacement is set."""
    int32 = 4
    for n, t in modules:
        a.malloc((n // 64) * 16 * int32)
        for name in ("g_idx", "qzeros"):
            a.release(*t[name])
        for name in ("qweight", "scales"):
            a.malloc(t[name][1])
            a.release(*t[name])


@lru_cache(maxsize=1024)
def _replay(card: ModelCard, w_t: DType, layout: Layout, pp_rank: int, stages: tuple[range, ...] | None,
            vocab_every_stage: frozenset[str], rope: tuple[bool, int | None] | None, gptq: bool, offload: int,
            tower: bool = True) -> CachingAllocator:
    """The allocator after the rank is built: the large tensors replayed one by one in vLLM's
    construction order (vision tower and projector, embed_tokens, per decoder layer the fused qkv (bias), o_proj,
    the rotary cache with its float32 temporaries where the first layer asking for it builds it, the MoE router and
    fused experts w13 / w2 (fused_moe/layer.py FusedMoE.create_weights) and shared experts, or the fused gate_up and
    down; then lm_head); whatever kvplan counts beyond them (norms, scales, state mixers, learned positions) is
    charged at its requested bytes. ``gptq``: the quantized linears are packed AWQ or GPTQ modules (_gptq_tensors),
    GPTQ-Marlin's repacked once all are built (_gptq_marlin_repack). With ``offload`` each layer's offloaded linears
    (kvplan.cost.offload.moved_prefix) are released after the layer is built, as make_layers offloads a layer before
    building the next: later layers reuse the freed blocks. ``rope``: how the rotary caches are built (VLLM_ROPE;
    SGLang's: kept in float32, ``rotary_cache`` keep_fp32, an M-RoPE cache of max_position_embeddings positions,
    kvplan.cost.parallel.rope_caches), None: not built."""
    from kvplan.cost.offload import moved_prefix
    from kvplan.cost.parallel import (holds_vocab, layer_parameters, local_experts, moe_tp, pad_vocab,
                                      pp_partition, rope_caches, rotary_dim, shard_bytes)
    from kvplan.cost.shapes import attention_matrices, ffn_matrices, fused, fused_groups, router_matrices
    from kvplan.cost.vision import block_matrices, projector_matrices, vision_params

    a = CachingAllocator()
    repack: list[tuple[int, dict[str, tuple[Block, int]]]] = []
    tp, h = layout.tp, card.hidden_size
    made: list[tuple[Block, int]] = []  # the current layer's linears, in allocation order

    def size(m, split: int = tp) -> tuple[int, int]:
        return shard_bytes(card, w_t, m, split)

    def linears(matrices, split: int = tp, times: int = 1) -> None:
        for group in fused_groups(matrices):
            if gptq and card.quantization.quantizes(group[0].name):
                t = {name: (a.malloc(n), n) for name, n in _gptq_tensors(card, w_t, group, split) if n}
                repack.append((sum(m.shard(split, card.num_kv_heads, card.head_dim).n_out for m in group), t))
                continue
            w, b = fused(group, lambda m: size(m, split))[0]
            made.extend((a.malloc(times * x), times * x) for x in (w, b) if x)

    layers = (list(stages) if stages else pp_partition(card.num_layers, layout.pp))[pp_rank]
    embedding, lm_head = holds_vocab(card, layout.pp, pp_rank, vocab_every_stage)  # as kvplan counts the rank
    rows = pad_vocab(card.vocab_size) // tp
    if card.vision and tower:
        v = card.vision
        vp = vision_params(card, hf=False, tp=tp)
        per_block = sum(w + b for w, b in fused(block_matrices(v), size))
        projector = sum(w + b for w, b in fused(projector_matrices(v, h), size))
        a.malloc(w_t.data_bytes(vp.total) - v.built_layers * per_block - projector)  # embeddings and norms
        for _ in range(v.built_layers):
            linears(block_matrices(v))
        linears(projector_matrices(v, h))
    if embedding:
        a.malloc(w_t.data_bytes(rows * h))
    rope_fp32, mrope_factor = rope or VLLM_ROPE
    caches = (rope_caches(card, *(() if mrope_factor is None else (mrope_factor,)))
              if card.position == "rope" and rope is not None else ())
    built: set[int] = set()
    dim = rotary_dim(card)
    linear_rope = card.rope_scaling is not None and card.rope_scaling.rope_type == "linear"
    done = 0
    for i in layers:
        made.clear()
        if card.mixer(i) in ("attention", "hybrid") and not card.shared_blocks:
            linears(attention_matrices(card))  # llama.py LlamaAttention: qkv_proj, o_proj, then get_rope
            which = 1 if card.local_rope and card.layer_types[i] == "sliding" else 0
            if caches and which not in built:
                built.add(which)
                rotary_cache(a, caches[which], dim, w_t.activation_bytes, linear_rope and which == 0, rope_fp32)
        if card.has_mlp(i) and card.is_moe_layer(i):
            moe = card.moe
            n = local_experts(moe.num_experts, tp * layout.dp, 0) if layout.expert_parallel else moe.num_experts
            linears(router_matrices(card))
            etp = 1 if layout.expert_parallel else moe_tp(layout)
            expert = fused(ffn_matrices(card, moe.expert_ffn_size), lambda m: size(m, etp))
            for w, b in expert:  # w13 then w2, every local expert in one tensor
                made.extend((a.malloc(n * x), n * x) for x in (w, b) if x)
            if moe.num_shared_experts:
                linears(ffn_matrices(card, moe.shared_ffn), times=moe.num_shared_experts)
        elif card.has_mlp(i):
            linears(ffn_matrices(card, card.ffn_size))
        if offload and done < offload:
            moved = moved_prefix(layer_parameters(card, w_t, layout, i), done, offload)
            done += sum(nbytes for nbytes, _ in moved)
            for block, nbytes in made[:sum(1 for _, linear in moved if linear)]:
                a.release(block, nbytes)
    if lm_head and not card.tie_embeddings:
        a.malloc(w_t.data_bytes(rows * h))
    if gptq and card.quantization.method == "gptq":
        _gptq_marlin_repack(a, repack)
    return a
