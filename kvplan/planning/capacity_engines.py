"""Per-engine pools for ``kvplan.plan``: each PP stage's budget, then blocks, concurrency and the longest length.

Orchestration only: every formula lives in kvplan.cost (serving_vllm, serving_sglang, parallel).
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.cost import serving_sglang as sg
from kvplan.cost import serving_vllm as vl
from kvplan.cost.engines import CacheRun, Engine
from kvplan.cost.hardware import GPU
from kvplan.cost.kvspec import KVLayerSpec
from kvplan.cost.parallel import (DEFAULT_VOCAB_PADDING, Layout, moe_tp, pad_vocab, pp_partition, rank_kv_specs,
                                  rank_layer_specs, rank_weights, stage_ranges)
from kvplan.errors import KvplanError
from kvplan.model.card import ModelCard
from kvplan.model.dtypes import DType
from kvplan.planning.capacity_results import KVCachePool, RankRow
from kvplan.units import cdiv


@dataclass(frozen=True)
class Setup:
    """A plan's inputs after defaults and checks."""

    card: ModelCard
    engine: Engine
    gpu: GPU
    total: int  # bytes per GPU
    layout: Layout
    max_model_len: int
    kv_t: DType
    w_t: DType
    util: float | None
    mfs: float | None
    kv_cache_memory: int | None
    mnbt: int | None
    max_num_seqs: int | None
    block_size: int
    activation: int | None  # given; None: estimate
    non_torch: int
    cuda_graph: int
    context: int
    state_page_padded: int | None = None  # vLLM hybrid: the mamba page padded to the attention page
    state_page_bytes: int = 0  # vLLM: one state layer's conv + SSM states of one request on one rank (unpadded)
    unified_block: bool = False  # vLLM hybrid: block_size was raised so an attention page holds a state page
    block_size_asked: int | None = None  # vLLM hybrid: the block size before that unification
    state_t: DType | None = None  # the states' dtype beside a quantized KV cache (mamba_cache_dtype auto: model dtype)
    card_notes: tuple[str, ...] = ()  # how the card differs as the engine builds it (capacity.served_card)


@dataclass(frozen=True)
class Stage:
    """One pipeline stage's budget (every TP rank of a stage holds the same shapes)."""

    pp_rank: int
    layers: range
    params: int
    weights: int  # incl. buffers
    buffers: int
    activation: int
    non_torch: int
    cuda_graph: int
    requested: int
    available: int
    specs: list[KVLayerSpec]

    @property
    def kv_bytes_per_token(self) -> int:
        """K/V bytes one more token adds to one request on this rank (state layers add none)."""
        return sum(s.bytes_per_token for s in self.specs if not s.per_sequence)

    @property
    def state_bytes(self) -> int:
        """The conv and SSM states of one request on this rank (all its state layers), unpadded."""
        return sum(s.bytes_per_token for s in self.specs if s.per_sequence)


@dataclass(frozen=True)
class Pool:
    """What an engine's pool gives: the limiting stage, the pool, concurrency, fit, and every stage's row."""

    limiting: Stage
    pool: KVCachePool
    concurrency: float
    request_bytes: int
    fits: bool
    max_model_len_fit: int
    ranks: list[RankRow]


def hybrid_block(card: ModelCard, kv_t: DType, engine: Engine, tp: int, block_size: int,
                 state_t: DType | None = None) -> tuple[int, int | None, int]:
    """vLLM hybrid (attention + state layers): (the block size raised so one attention page holds a state page, the
    state page padded to the attention page, the unpadded state page) by kvplan.cost.serving_vllm.hybrid_block_size,
    with one rank's shapes; other models and engines keep ``block_size``."""
    if engine.name != "vllm" or card.ssm is None:
        return block_size, None, 0
    per_layer = [specs for _, specs in rank_layer_specs(card, kv_t, engine, Layout(tp=tp), 0, state_t=state_t)]
    attn = next((sp.bytes_per_token for specs in per_layer for sp in specs if not sp.per_sequence), 0)
    mamba = next(sum(sp.bytes_per_token for sp in specs if sp.per_sequence) for specs in per_layer
                 if any(sp.per_sequence for sp in specs))
    if not card.attention_layers:  # attention-free: one MambaSpec group, nothing to unify
        return block_size, None, mamba
    return (*vl.hybrid_block_size(attn, mamba, block_size, hybrid_alignment(card)), mamba)


def hybrid_alignment(card: ModelCard) -> int:
    """The kernel block alignment vLLM's hybrid page unification starts from (before max with block_size): the
    attention backend's smallest kernel block, 16; MLA hybrids (Kimi-Linear) 128 (vl.MLA_HYBRID_ALIGNMENT)."""
    return vl.MLA_HYBRID_ALIGNMENT if card.mla else vl.DEFAULT_BLOCK_SIZE


def partition(s: Setup) -> list[range]:
    if s.engine.name == "sglang":
        return stage_ranges(sg.pp_partition_sizes(s.card.num_layers, s.layout.pp))
    return pp_partition(s.card.num_layers, s.layout.pp)


def stages(s: Setup) -> list[Stage]:
    parts = partition(s)
    return [_stage(s, i, parts) for i in range(s.layout.pp)]


def _stage(s: Setup, pp_rank: int, parts: list[range]) -> Stage:
    served = s.engine.name in ("vllm", "sglang")  # vocabulary padding and the cos/sin cache are the servers' own
    w = rank_weights(s.card, s.w_t, s.layout, 0, pp_rank, kv_t=s.kv_t, stages=parts, include_buffers=served,
                     vocab_padding=DEFAULT_VOCAB_PADDING if served else 1)
    specs = rank_kv_specs(s.card, s.kv_t, s.engine, s.layout, pp_rank, stages=parts, state_t=s.state_t)
    weights, act = w.bytes + w.buffers_bytes, _activation(s, pp_rank == s.layout.pp - 1)
    if s.engine.name == "sglang":  # no profiling: activations and graphs live in free x (1 - mfs)
        requested = int((s.total - s.context) * s.mfs)
        return Stage(pp_rank, w.layers, w.params, weights, w.buffers_bytes, 0, 0, 0, requested,
                     sg.pool_bytes(s.total - s.context, s.mfs, weights), specs)
    q = s.card.quantization  # a quantized kv_b_proj is dequantized into bf16 W_UK / W_UV copies
    w_bits = q.bits if q and q.quantizes("kv_b_proj") else s.w_t.bits
    weights += vl.mla_dequant_bytes(s.card, s.layout.tp, len(w.layers), w_bits)
    requested = vl.requested_memory(s.total, s.util)
    available = vl.available_kv_bytes(requested, weights, act, s.non_torch, s.cuda_graph)
    if s.kv_cache_memory is not None:  # gpu_worker.py: kv_cache_memory_bytes skips the profiling arithmetic
        available = s.kv_cache_memory
    return Stage(pp_rank, w.layers, w.params, weights, w.buffers_bytes, act, s.non_torch, s.cuda_graph, requested,
                 available, specs)


def _activation(s: Setup, last_stage: bool) -> int:
    if s.activation is not None:
        return s.activation
    if s.engine.name != "vllm":
        return 0
    mnbt = vl.scheduled_tokens(s.mnbt, s.max_num_seqs, s.max_model_len)
    act_bytes = 4 if s.w_t.bits == 32 else 2
    return vl.profile_activation_bytes(s.card, s.layout.tp, act_bytes, mnbt, min(s.max_num_seqs, mnbt),
                                       pad_vocab(s.card.vocab_size), last_stage, moe_tp(s.layout))


def vllm_pool(s: Setup, sts: list[Stage]) -> Pool:
    """vLLM: groups of the whole model, each stage's bytes per block and blocks, the min over ranks."""
    per_layer = rank_layer_specs(s.card, s.kv_t, s.engine, Layout(tp=s.layout.tp), 0, state_t=s.state_t)
    specs, layers = vl.vllm_layer_specs(per_layer, s.state_page_padded)
    groups = vl.kv_cache_groups(specs, s.block_size, layers)
    mnbt = vl.scheduled_tokens(s.mnbt, s.max_num_seqs, s.max_model_len)
    inflight = vl.max_in_flight_tokens(mnbt, s.layout.pp)
    per_req = vl.blocks_per_request(groups, s.max_model_len, s.block_size, inflight)
    rows = []
    for st in sts:
        bpb = vl.bytes_per_block(groups, s.block_size, st.layers if s.layout.pp > 1 else None)
        fit = vl.max_model_len_fit(groups, bpb, st.available, s.max_model_len, s.block_size, inflight)
        rows.append(_row(st, bpb, vl.num_blocks(st.available, bpb), fit))
    lim = min(range(len(sts)), key=lambda i: rows[i].num_blocks)
    blocks, bpb = rows[lim].num_blocks, rows[lim].bytes_per_block
    conc = vl.max_concurrency(blocks, per_req)
    pool = KVCachePool(available_bytes=sts[lim].available, block_size=s.block_size, bytes_per_block=bpb,
                       num_blocks=blocks, tokens=vl.kv_cache_tokens(conc, s.max_model_len), groups=len(groups),
                       padding_layers=vl.padding_layers(groups), blocks_per_request=per_req,
                       state_bytes_per_request=sts[lim].state_bytes, state_page_bytes=s.state_page_bytes,
                       state_page_padded_bytes=s.state_page_padded)
    fits = all(vl.fits(st.available, r.bytes_per_block, r.bytes_per_block * per_req) for st, r in zip(sts, rows))
    return Pool(sts[lim], pool, conc, bpb * per_req, fits, min(r.max_model_len_fit for r in rows), rows)


def sglang_pool(s: Setup, sts: list[Stage]) -> Pool:
    """SGLang: tokens per stage = pool // cell_size (page-rounded), MIN across ranks; a request takes its tokens. A
    hybrid first carves its state pool out of the pool (kvplan.cost.serving_sglang.mamba_split) and a running request
    also holds one state slot (HybridReqToTokenPool, MambaPool)."""
    page, L = s.block_size, s.max_model_len
    rows, slots, states = [], [], []
    for st in sts:
        state = _sglang_state_bytes(s.card, st)
        kv, n = sg.mamba_split(st.available, state) if s.card.ssm else (st.available, None)
        tokens = sg.max_total_tokens(kv, st.kv_bytes_per_token, page) if st.kv_bytes_per_token else 0
        rows.append(_row(st, st.kv_bytes_per_token * page, tokens // page, min(L, tokens) if tokens else L))
        slots.append(n)
        states.append(state)
    per_req = cdiv(L, page)
    concs = [_sglang_concurrency(st, r.num_blocks / per_req, n) for st, r, n in zip(sts, rows, slots)]
    lim = min(range(len(sts)), key=lambda i: concs[i])
    pages, tokens = rows[lim].num_blocks, rows[lim].num_blocks * page
    fits = all((r.num_blocks * page >= L or not st.kv_bytes_per_token) and (n is None or n >= 1)
               for st, r, n in zip(sts, rows, slots))
    pool = KVCachePool(available_bytes=sts[lim].available, block_size=page, bytes_per_block=rows[lim].bytes_per_block,
                       num_blocks=pages, tokens=tokens, groups=1, padding_layers=0, blocks_per_request=per_req,
                       state_bytes_per_request=states[lim],
                       state_slots=None if slots[lim] is None else min(slots))
    fit = min(r.max_model_len_fit for r in rows) if fits or not s.card.ssm else 0
    return Pool(sts[lim], pool, concs[lim], per_req * rows[lim].bytes_per_block + states[lim], fits, fit, rows)


def _sglang_state_bytes(card: ModelCard, st: Stage) -> int:
    """One request's states on this stage in SGLang's dtypes (0 without state layers)."""
    if card.ssm is None:
        return 0
    if card.ssm.kind not in sg.SSM_STATE_KINDS:
        raise KvplanError(f"--engine sglang: SGLang's state pool is modelled for Mamba-2 and Gated DeltaNet mixers "
                          f"(Mamba2StateShape); {card.name}'s is {card.ssm.kind}: use --engine vllm")
    conv = sum(c * e for sp in st.specs if sp.kind == "conv_state" for c, e in sp.vectors)  # elements, all layers
    ssm = sum(c * e for sp in st.specs if sp.kind == "ssm_state" for c, e in sp.vectors)
    return sg.state_bytes_per_request(conv, ssm)


def _sglang_concurrency(st: Stage, by_tokens: float, slots: int | None) -> float:
    """Requests of max_model_len the pools hold: the K/V tokens, and (hybrid) the state slots."""
    if slots is None:
        return by_tokens
    return float(slots) if not st.kv_bytes_per_token else min(by_tokens, float(slots))


def simple_pool(s: Setup, sts: list[Stage]) -> Pool:
    """ideal / transformers: a request holds what the engine's positions_held says, no pages (block_size 1)."""
    L = s.max_model_len

    def request(st: Stage, length: int) -> int:
        run = CacheRun(length, 0, length if s.engine.static else None, 1)
        return sum(sp.positions_held(s.engine, run) * sp.bytes_per_token for sp in st.specs)

    # positions of block size 1; an attention-free model (Mamba) caches no positions: 0 blocks, states only
    rows = [_row(st, st.kv_bytes_per_token, max(0, st.available) // st.kv_bytes_per_token if st.kv_bytes_per_token else 0,
                 _longest(lambda n, st=st: request(st, n) <= st.available, L)) for st in sts]
    lim = min(range(len(sts)), key=lambda i: max(0, sts[i].available) / request(sts[i], L))
    req = request(sts[lim], L)
    conc = max(0, sts[lim].available) / req
    pool = KVCachePool(available_bytes=sts[lim].available, block_size=1, bytes_per_block=sts[lim].kv_bytes_per_token,
                       num_blocks=rows[lim].num_blocks, tokens=int(conc * L), groups=1, padding_layers=0,
                       blocks_per_request=L if sts[lim].kv_bytes_per_token else 0,
                       state_bytes_per_request=sts[lim].state_bytes)
    return Pool(sts[lim], pool, conc, req, all(request(st, L) <= st.available for st in sts),
                min(r.max_model_len_fit for r in rows), rows)


def _longest(ok, hi: int) -> int:
    """Binary search for the largest n in [0, hi] with ok(n) (ok monotone; ok(0) assumed)."""
    lo = 0
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if ok(mid) else (lo, mid - 1)
    return lo


def _row(st: Stage, bpb: int, blocks: int, fit: int) -> RankRow:
    return RankRow(pp_rank=st.pp_rank, first_layer=st.layers.start, last_layer=st.layers.stop - 1, params=st.params,
                   weights_bytes=st.weights, activation_bytes=st.activation,
                   overhead_bytes=st.non_torch + st.cuda_graph, available_kv_bytes=st.available,
                   kv_bytes_per_token=st.kv_bytes_per_token, bytes_per_block=bpb, num_blocks=blocks,
                   max_model_len_fit=fit)


POOLS = {"vllm": vllm_pool, "sglang": sglang_pool}


def pool(s: Setup) -> tuple[list[Stage], Pool]:
    sts = stages(s)
    return sts, POOLS.get(s.engine.name, simple_pool)(s, sts)
