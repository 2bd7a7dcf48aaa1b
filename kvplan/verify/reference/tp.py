"""Tensor and pipeline parallelism as a transform of the built reference model (gpt-fast's tp.py style).

``shard(full, ...)`` takes the seeded single-device model and returns the ``Stage`` one rank runs, holding only its
shards (every tensor cloned, so an allocation tracker active during ``shard`` sees exactly the rank's weights):

- attention: Q column-parallel (num_heads / tp heads), K/V column-parallel with max(1, kv / tp) heads; when tp > kv
  each rank keeps the one KV head its query heads use (vLLM QKVParallelLinear replication); O row-parallel, followed
  by an all-reduce. qk_norm weights replicated; gpt-oss's per-head sink logits split like the query heads.
- MLA: q_a_proj, kv_a_proj_with_mqa and their norms replicated (the latent is cached in full on every rank);
  q_b_proj / q_proj and kv_b_proj column-parallel by heads; o_proj row-parallel.
- FFN: gate/up column-parallel, down row-parallel + all-reduce. MoE: router (and Qwen's shared gate) replicated,
  every expert's intermediate split over TP, ONE all-reduce of the combined output (vLLM FusedMoE reduce_results).
- row-parallel biases are held in full on every rank and added by TP rank 0 only (the sum then adds them once).
- vocabulary: padded to a multiple of 64 and split by rows; the embedding zeroes out-of-shard tokens then
  all-reduces; the LM head computes its rows' logits, all-gathers them and cuts the padding.
- pipeline: the stage holds the layers of vLLM's partition (kvplan.cost.parallel.pp_partition), the embedding on the
  first stage, final norm and LM head on the last (tied: the last stage keeps its own embedding shard).

``Comm`` wraps every collective and point-to-point op and counts the payload bytes it moved, per phase.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import Tensor, nn

from kvplan.cost.parallel import kv_heads_per_rank, pad_vocab
from kvplan.verify.reference.model import FFN, Attention, MLAttention, MoE, Reference, Step

OPS = ("all_reduce", "all_gather", "send", "recv")


class Comm:
    """One rank's collectives over its TP group and its pipeline neighbours; bytes counted per phase and op."""

    def __init__(self, tp: int, tp_rank: int, rank: int, group=None) -> None:
        self.tp, self.tp_rank, self.rank, self.group = tp, tp_rank, rank, group
        self.phase = "setup"
        self.bytes: dict[str, dict[str, int]] = {}

    def _count(self, op: str, t: Tensor) -> None:
        per = self.bytes.setdefault(self.phase, dict.fromkeys(OPS, 0))
        per[op] += t.numel() * t.element_size()

    def all_reduce(self, t: Tensor) -> Tensor:
        if self.tp > 1:
            self._count("all_reduce", t)
            dist.all_reduce(t, group=self.group)
        return t

    def all_gather(self, t: Tensor) -> list[Tensor]:
        if self.tp == 1:
            return [t]
        self._count("all_gather", t)
        out = [torch.empty_like(t) for _ in range(self.tp)]
        dist.all_gather(out, t.contiguous(), group=self.group)
        return out

    def send(self, t: Tensor, dst: int) -> None:
        self._count("send", t)
        dist.send(t.contiguous(), dst)

    def recv(self, t: Tensor, src: int) -> Tensor:
        self._count("recv", t)
        dist.recv(t, src)
        return t


class _Cloner:
    """Makes every tensor the stage keeps a fresh allocation (a slice's clone, or a replicated tensor's clone)."""

    def __init__(self) -> None:
        self.fresh: set[int] = set()

    def param(self, t: Tensor) -> nn.Parameter:
        p = nn.Parameter(t.detach().clone(), requires_grad=False)
        self.fresh.add(id(p))
        return p

    def column(self, lin: nn.Linear, lo: int, hi: int) -> None:
        """Keep output rows lo..hi-1 (and their bias)."""
        lin.weight = self.param(lin.weight[lo:hi])
        if lin.bias is not None:
            lin.bias = self.param(lin.bias[lo:hi])
        lin.out_features = hi - lo

    def replicate_rest(self, module: nn.Module) -> None:
        for mod in module.modules():
            for name, p in list(mod._parameters.items()):
                if p is not None and id(p) not in self.fresh:
                    setattr(mod, name, self.param(p))


class RowParallel(nn.Module):
    """Row-parallel linear: input columns lo..hi-1, full bias added on TP rank 0 only, then (optionally) all-reduce."""

    def __init__(self, lin: nn.Linear, lo: int, hi: int, comm: Comm, cl: _Cloner, reduce: bool = True) -> None:
        super().__init__()
        self.weight = cl.param(lin.weight[:, lo:hi])
        self.bias = cl.param(lin.bias) if lin.bias is not None else None
        self.comm, self.reduce = comm, reduce

    def forward(self, x: Tensor) -> Tensor:
        y = F.linear(x, self.weight, self.bias if self.comm.tp_rank == 0 else None)
        return self.comm.all_reduce(y) if self.reduce else y


class ReducedMoE(nn.Module):
    """The MoE block with its experts' partial sums reduced once."""

    def __init__(self, moe: MoE, comm: Comm) -> None:
        super().__init__()
        self.moe, self.comm = moe, comm

    def forward(self, x: Tensor) -> Tensor:
        return self.comm.all_reduce(self.moe(x))


class VocabEmbedding(nn.Module):
    """Rows lo..hi-1 of the padded vocabulary; tokens outside the shard give zeros, then the all-reduce sums."""

    def __init__(self, full: Tensor, lo: int, hi: int, comm: Comm, cl: _Cloner) -> None:
        super().__init__()
        w = torch.zeros(hi - lo, full.shape[1], dtype=full.dtype, device=full.device)  # padding rows stay zero
        real = max(0, min(hi, full.shape[0]) - lo)
        w[:real].copy_(full[lo:lo + real])
        self.weight = nn.Parameter(w, requires_grad=False)
        cl.fresh.add(id(self.weight))
        self.lo, self.hi, self.comm = lo, hi, comm

    def forward(self, tokens: Tensor) -> Tensor:
        inside = (tokens >= self.lo) & (tokens < self.hi)
        x = F.embedding((tokens - self.lo).masked_fill(~inside, 0), self.weight)
        x.masked_fill_(~inside[..., None], 0.0)
        return self.comm.all_reduce(x)


class VocabHead(nn.Module):
    """LM head over this rank's padded-vocabulary rows; logits all-gathered and the padding cut."""

    def __init__(self, weight: nn.Parameter, bias: nn.Parameter | None, vocab: int, comm: Comm) -> None:
        super().__init__()
        self.weight, self.bias, self.vocab, self.comm = weight, bias, vocab, comm

    def forward(self, x: Tensor) -> Tensor:
        local = F.linear(x, self.weight, self.bias)
        parts = self.comm.all_gather(local)
        del local
        return torch.cat(parts, dim=-1)[..., :self.vocab] if len(parts) > 1 else parts[0][..., :self.vocab]


def _padded_rows(t: Tensor, lo: int, hi: int, cl: _Cloner) -> nn.Parameter:
    """Rows lo..hi-1 of ``t`` (rows past its end: zero padding) as one fresh parameter."""
    shape = (hi - lo, *t.shape[1:])
    w = torch.zeros(shape, dtype=t.dtype, device=t.device)
    real = max(0, min(hi, t.shape[0]) - lo)
    w[:real].copy_(t[lo:lo + real])
    p = nn.Parameter(w, requires_grad=False)
    cl.fresh.add(id(p))
    return p


def _shard_attention(a: Attention, tp: int, r: int, comm: Comm, cl: _Cloner) -> None:
    H, KV, D = a.H, a.KV, a.D
    hl, kvl = H // tp, kv_heads_per_rank(KV, tp)
    first_kv = r * kvl if tp <= KV else r * KV // tp  # tp > kv: the KV head of this rank's query heads
    cl.column(a.wq, r * hl * D, (r + 1) * hl * D)
    cl.column(a.wk, first_kv * D, (first_kv + kvl) * D)
    cl.column(a.wv, first_kv * D, (first_kv + kvl) * D)
    a.wo = RowParallel(a.wo, r * hl * D, (r + 1) * hl * D, comm, cl)
    if a.sinks is not None:  # gpt-oss: one sink logit per query head, split with the heads (vLLM's sinks[head_slice])
        a.sinks = cl.param(a.sinks[r * hl:(r + 1) * hl])
    a.H, a.KV, a.cached_heads = hl, kvl, kvl


def _shard_mla(m: MLAttention, tp: int, r: int, comm: Comm, cl: _Cloner) -> None:
    c = m.m
    hl, qk, kvw = m.H // tp, c.qk_nope_head_dim + c.qk_rope_head_dim, c.qk_nope_head_dim + c.v_head_dim
    q_up = m.q[2] if isinstance(m.q, nn.Sequential) else m.q  # q_b_proj (or q_proj); q_a_proj stays replicated
    cl.column(q_up, r * hl * qk, (r + 1) * hl * qk)
    cl.column(m.kv_b, r * hl * kvw, (r + 1) * hl * kvw)
    m.o = RowParallel(m.o, r * hl * c.v_head_dim, (r + 1) * hl * c.v_head_dim, comm, cl)
    m.H = hl


def _shard_ffn(f: FFN, tp: int, r: int, comm: Comm, cl: _Cloner, reduce: bool) -> None:
    n = f.up.out_features // tp
    for lin in (f.gate, f.up):
        if lin is not None:
            cl.column(lin, r * n, (r + 1) * n)
    f.down = RowParallel(f.down, r * n, (r + 1) * n, comm, cl, reduce=reduce)


class Stage(nn.Module):
    """What one rank runs: its stage's blocks (sharded), the embedding on the first stage, norm + head on the last."""

    def __init__(self, full: Reference, layers: range, *, first: bool, last: bool, tp: int, tp_rank: int,
                 comm: Comm) -> None:
        super().__init__()
        card, cl, r = full.card, _Cloner(), tp_rank
        self.card, self.layers, self.first, self.last, self.comm = card, layers, first, last, comm
        self.dtype = full.embed.weight.dtype
        rows = pad_vocab(card.vocab_size) // tp
        lo, hi = r * rows, (r + 1) * rows
        self.embed = VocabEmbedding(full.embed.weight, lo, hi, comm, cl) if first else None
        self.pos_embed = full.pos_embed if first else None
        self.type_embed = full.type_embed if first else None
        self.embed_norm = full.embed_norm if first else None
        self.blocks = nn.ModuleList(full.decoder.blocks[i] for i in layers)
        for block in self.blocks:
            if isinstance(block.attn, MLAttention):
                _shard_mla(block.attn, tp, r, comm, cl)
            else:
                _shard_attention(block.attn, tp, r, comm, cl)
            if isinstance(block.mlp, MoE):
                for ffn in [*block.mlp.experts, *block.mlp.shared]:
                    _shard_ffn(ffn, tp, r, comm, cl, reduce=False)
                block.mlp = ReducedMoE(block.mlp, comm)
            else:
                _shard_ffn(block.mlp, tp, r, comm, cl, reduce=True)
        self.norm = full.decoder.norm if last else None
        self.head = None
        if last:
            bias = _padded_rows(full.lm_bias, lo, hi, cl) if full.lm_bias is not None else None
            if full.lm_head is not None:
                weight = _padded_rows(full.lm_head.weight, lo, hi, cl)
            elif self.embed is not None:  # tied, one stage: the head reads the embedding shard
                weight = self.embed.weight
            else:  # tied, last of several stages: its own copy of the embedding shard (vLLM llama.py)
                self.tied_embed = VocabEmbedding(full.embed.weight, lo, hi, comm, cl)
                weight = self.tied_embed.weight
            self.head = VocabHead(weight, bias, card.vocab_size, comm)
        cl.replicate_rest(self)

    def embed_tokens(self, tokens: Tensor, pos: Tensor) -> Tensor:
        x = self.embed(tokens)
        if self.pos_embed is not None:
            x = x + self.pos_embed(pos)
        if self.type_embed is not None:
            x = x + self.type_embed.weight[0]
        return self.embed_norm(x) if self.embed_norm is not None else x

    def forward(self, tokens: Tensor, step: Step, caches: list, prev: int | None, nxt: int | None) -> Tensor | None:
        """One step of this stage: embed (first) or receive the hidden states from rank ``prev``; run the blocks;
        send them to rank ``nxt``, or (last) return the full logits."""
        B, T = tokens.shape
        if self.first:
            x = self.embed_tokens(tokens, step.pos)
        else:
            x = self.comm.recv(torch.empty(B, T, self.card.hidden_size, dtype=self.dtype, device=tokens.device),
                               prev)
        for block, cache in zip(self.blocks, caches):
            x = block(x, step, cache, None, None)
        if not self.last:
            self.comm.send(x, nxt)
            return None
        x = self.norm(x) if self.norm is not None else x
        if step.last_only:
            x = x[:, -1:]
        return self.head(x)


def shard(full: Reference, layers: range, *, first: bool, last: bool, tp: int, tp_rank: int, comm: Comm) -> Stage:
    """The rank's stage; ``full`` is consumed (its blocks are sharded in place)."""
    return Stage(full, layers, first=first, last=last, tp=tp, tp_rank=tp_rank, comm=comm).eval()
