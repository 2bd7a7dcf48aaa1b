"""A compact decoder built from any ModelCard with seeded random weights, in the spirit of gpt-fast's model.py.

Module shapes follow kvplan/params.py exactly, so ``sum(p.numel())`` equals ``count_params(card).total``.
What it computes (the matmuls torch's FlopCounterMode sees; elementwise ops count 0):

- Q/K/V/O projections of every new token; attention is dense: ``q @ k^T`` and ``p @ v`` over every key the step
  attends (prefill: the P prompt keys, or hf-static's whole buffer when the prompt fits it; decode: the whole ring
  buffer of ideal/hf-static, or exactly the attended tokens of the vLLM paged cache). GQA/MQA run grouped: the
  query heads of one KV head form one batched matmul, so K/V are never repeated (FLOPs still count per query head).
- MLA ``expand`` (prefill; every hf-static step): kv_b_proj up-projects the latent of every attended position.
  MLA ``absorb`` (decode with the ideal and vllm latent caches): W_UK on the query, attention over the latent and
  rope key (kv_lora_rank + qk_rope wide, values kv_lora_rank wide), W_UV on the output (arXiv:2405.04434 2.1.2).
- MoE: the router on every token, then each expert only on the tokens routed to it (index_select / index_add_), so
  routed-expert FLOPs are experts_per_token worth per token; shared experts (and Qwen's shared gate) on every token.
- LM head on all prompt positions for hf-* engines (transformers), on the last one for ideal and vllm.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from kvplan.cost.runtimes import get_engine
from kvplan.model.card import ModelCard
from kvplan.verify.reference.ssm import SSMixer

_ACT = {"silu": F.silu, "relu": F.relu, "gelu": F.gelu, "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
        "relu2": lambda x: F.relu(x) ** 2}


@dataclass
class Step:
    """One forward: ``mode`` full (no cache), prefill or decode; query positions start..start+T-1."""

    mode: str
    start: int
    pos: Tensor  # (T,) query positions
    last_only: bool = False  # LM head on the last position only
    enc: Tensor | None = None  # encoder output (B, E, h), encoder-decoder prefill/full


def make_norm(card: ModelCard, width: int, dtype, device) -> nn.Module:
    """RMSNorm (weight) or LayerNorm (weight and bias), params.norm_params."""
    if card.norm in ("layernorm", "layernorm_nobias"):  # layernorm_nobias: MPT's LayerNorm without a bias
        return nn.LayerNorm(width, eps=1e-5, bias=card.norm == "layernorm", dtype=dtype, device=device)
    return nn.RMSNorm(width, eps=1e-6, dtype=dtype, device=device)


def rope(x: Tensor, pos: Tensor) -> Tensor:
    """Rotary embedding (RoFormer, arXiv:2104.09864), rotate-half layout; x (B, heads, T, D), pos (T,)."""
    half = x.shape[-1] // 2
    inv = 10000.0 ** (-torch.arange(half, device=x.device, dtype=torch.float32) / half)  # (D/2,)
    ang = pos.to(torch.float32)[:, None] * inv[None]  # (T, D/2)
    cos, sin = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


def allowed(qpos: Tensor, kpos: Tensor, causal: bool, window: int | None, chunk: int | None = None) -> Tensor:
    """(T, S) bool: key slot holds a token (kpos >= 0), not in the future, inside the window (last W incl. self),
    inside the query's own C-aligned chunk (Llama-4 chunked local attention: key // C == query // C)."""
    ok = (kpos >= 0)[None, :].expand(qpos.shape[0], -1)
    if causal:
        ok = ok & (kpos[None, :] <= qpos[:, None])
    if window:
        ok = ok & (qpos[:, None] - kpos[None, :] < window)
    if chunk:
        ok = ok & (kpos[None, :].div(chunk, rounding_mode="floor") == qpos[:, None].div(chunk, rounding_mode="floor"))
    return ok


def attend(q: Tensor, k: Tensor, v: Tensor, ok: Tensor, bias: Tensor | None, scale: float,
           sinks: Tensor | None = None) -> Tensor:
    """Dense attention. q (B,H,T,D), k (B,KV,S,D), v (B,KV,S,Dv), ok (T,S), bias (H,T,S) -> (B,H,T,Dv).
    ``sinks`` (H,): gpt-oss's per-head sink logit joins each softmax denominator and is then dropped."""
    (B, H, T, D), KV, S = q.shape, k.shape[1], k.shape[2]
    G = H // KV  # query heads per KV head: one batched matmul per KV head, no repeat_kv copy
    s = (q.reshape(B, KV, G * T, D) @ k.transpose(-1, -2)).view(B, KV, G, T, S).mul_(scale)  # B x H x T x S
    if bias is not None:
        s.add_(bias.view(1, KV, G, T, S))
    s.masked_fill_(~ok, float("-inf"))
    if sinks is None:
        p = s.softmax(dim=-1)
    else:  # softmax over [scores, sink] without the sink column: exp in place, one extra term in the sum
        sink = sinks.view(1, KV, G, 1, 1)
        m = torch.maximum(s.amax(dim=-1, keepdim=True), sink)
        p = s.sub_(m).exp_()
        p.div_(p.sum(dim=-1, keepdim=True) + (sink - m).exp())
    del s
    return (p.view(B, KV, G * T, S) @ v).view(B, H, T, v.shape[-1])


class Attention(nn.Module):
    """Self- or cross-attention with num_kv_heads K/V heads (MHA/GQA/MQA), optional qk_norm, RoPE, window."""

    def __init__(self, card: ModelCard, window: int | None, *, causal: bool, cross: bool, engine: str, dtype,
                 device, chunk: int | None = None) -> None:
        super().__init__()
        self.chunk = chunk
        h, H, KV, D = card.hidden_size, card.num_heads, card.num_kv_heads, card.head_dim
        kw = dict(dtype=dtype, device=device)
        self.wq = nn.Linear(h, H * D, bias=card.qkv_bias, **kw)
        self.wk = nn.Linear(h, KV * D, bias=card.qkv_bias, **kw)
        self.wv = nn.Linear(h, KV * D, bias=card.qkv_bias, **kw)
        self.wo = nn.Linear(H * D, h, bias=card.out_bias, **kw)
        wide = card.qk_norm_width == "all_heads"  # OLMo-2: over all heads' width; else shared by all heads (Qwen3)
        self.q_norm = nn.RMSNorm(H * D if wide else D, eps=1e-6, **kw) if card.qk_norm else None
        self.k_norm = nn.RMSNorm(KV * D if wide else D, eps=1e-6, **kw) if card.qk_norm else None
        self.sinks = nn.Parameter(torch.zeros(H, **kw)) if card.attention_sinks else None
        self.H, self.KV, self.D, self.window, self.causal, self.cross = H, KV, D, window, causal, cross
        self.use_rope = card.position == "rope" and not cross
        # transformers' Falcon (new_decoder_architecture) broadcasts K/V to hf_kv_heads heads before caching
        self.cached_heads = card.cached_kv_heads(get_engine(engine).transformers)

    def heads(self, proj: nn.Linear, x: Tensor, n: int, norm: nn.Module | None) -> Tensor:
        B, T, _ = x.shape
        wide = norm is not None and norm.normalized_shape[0] != self.D  # OLMo-2's all-heads norm: before the split
        y = (norm(proj(x)) if wide else proj(x)).view(B, T, n, self.D).transpose(1, 2)  # (B, n, T, D)
        return norm(y) if norm is not None and not wide else y

    def forward(self, x: Tensor, step: Step, cache, bias_fn) -> Tensor:
        B, T, _ = x.shape
        q = self.heads(self.wq, x, self.H, self.q_norm)
        if self.use_rope:
            q = rope(q, step.pos)
        if self.cross and step.mode == "decode":  # encoder K/V were cached once, at prefill
            k, v, kpos = cache.read(cache.written - 1)
        else:
            k, v, kpos = self.new_kv(step.enc if self.cross else x, step, cache)
        ok = allowed(step.pos, kpos, self.causal, self.window, self.chunk)
        bias = bias_fn(step.pos, kpos) if bias_fn is not None else None
        o = attend(q, k, v, ok, bias, 1.0 / math.sqrt(self.D), self.sinks)
        return self.wo(o.transpose(1, 2).reshape(B, T, self.H * self.D))

    def new_kv(self, src: Tensor, step: Step, cache) -> tuple[Tensor, Tensor, Tensor]:
        k = self.heads(self.wk, src, self.KV, self.k_norm)
        v = self.heads(self.wv, src, self.KV, None)
        kpos = torch.arange(src.shape[1], device=src.device) + (0 if self.cross else step.start)
        if self.use_rope:
            k = rope(k, kpos)
        if cache is None:
            return k, v, kpos
        if self.cached_heads != self.KV:
            rep = self.cached_heads // self.KV
            k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        cache.write(0 if self.cross else step.start, k, v)
        if step.mode == "decode" or getattr(cache, "prefill_reads", False) and src.shape[1] <= cache.size:
            return cache.read(step.start + src.shape[1] - 1)
        return k, v, kpos


class MLAttention(nn.Module):
    """DeepSeek multi-head latent attention (arXiv:2405.04434 eq. 9-19); the cache holds latent + rope key."""

    def __init__(self, card: ModelCard, *, absorb: bool, dtype, device) -> None:
        super().__init__()
        m, h, H = card.mla, card.hidden_size, card.num_heads
        kw = dict(dtype=dtype, device=device)
        qk = m.qk_nope_head_dim + m.qk_rope_head_dim
        if m.q_lora_rank:  # q_a_proj, q_a_layernorm, q_b_proj
            self.q = nn.Sequential(nn.Linear(h, m.q_lora_rank, bias=card.qkv_bias, **kw),
                                   nn.RMSNorm(m.q_lora_rank, eps=1e-6, **kw),
                                   nn.Linear(m.q_lora_rank, H * qk, bias=False, **kw))
        else:
            self.q = nn.Linear(h, H * qk, bias=False, **kw)
        self.kv_a = nn.Linear(h, m.kv_lora_rank + m.qk_rope_head_dim, bias=card.qkv_bias, **kw)  # kv_a_proj_with_mqa
        self.kv_norm = nn.RMSNorm(m.kv_lora_rank, eps=1e-6, **kw)  # kv_a_layernorm
        self.kv_b = nn.Linear(m.kv_lora_rank, H * (m.qk_nope_head_dim + m.v_head_dim), bias=False, **kw)
        self.o = nn.Linear(H * m.v_head_dim, h, bias=card.out_bias, **kw)
        self.m, self.H, self.scale = m, H, 1.0 / math.sqrt(qk)
        self.absorb = absorb

    def forward(self, x: Tensor, step: Step, cache, bias_fn) -> Tensor:
        B, T, _ = x.shape
        m = self.m
        q = self.q(x).view(B, T, self.H, -1).transpose(1, 2)  # (B, H, T, nope + rope)
        q_nope, q_pe = q.split([m.qk_nope_head_dim, m.qk_rope_head_dim], dim=-1)
        q = torch.cat([q_nope, rope(q_pe, step.pos)], dim=-1)
        c, k_pe = self.kv_a(x).split([m.kv_lora_rank, m.qk_rope_head_dim], dim=-1)
        latent = torch.cat([self.kv_norm(c)[:, None], rope(k_pe[:, None], step.pos)], dim=-1)  # (B,1,T,r+dr)
        kpos = step.pos
        if cache is not None:
            cache.write(step.start, latent, None)
            if step.mode == "decode" or getattr(cache, "prefill_reads", False) and T <= cache.size:
                latent, _, kpos = cache.read(step.start + T - 1)
                if self.absorb and step.mode == "decode":
                    return self.absorbed(q, latent, kpos, step)
        k, v = self.expand(latent)  # every attended position, every step
        o = attend(q, k, v, allowed(step.pos, kpos, True, None), None, self.scale)  # (B, H, T, v)
        return self.o(o.transpose(1, 2).reshape(B, T, -1))

    def expand(self, latent: Tensor) -> tuple[Tensor, Tensor]:
        """kv_b_proj on every position: latent (B,1,S,r+dr) -> K (B,H,S,nope+rope), V (B,H,S,v)."""
        m = self.m
        B, _, S, _ = latent.shape
        c, k_pe = latent[:, 0].split([m.kv_lora_rank, m.qk_rope_head_dim], dim=-1)
        kv = self.kv_b(c).view(B, S, self.H, -1).transpose(1, 2)  # (B, H, S, nope + v)
        k_nope, v = kv.split([m.qk_nope_head_dim, m.v_head_dim], dim=-1)
        k = torch.cat([k_nope, k_pe[:, None].expand(B, self.H, S, -1)], dim=-1)
        return k, v

    def absorbed(self, q: Tensor, latent: Tensor, kpos: Tensor, step: Step) -> Tensor:
        """Decode without expanding: q_nope @ W_UK per head, attention over the latent, then @ W_UV per head."""
        m, H = self.m, self.H
        B, _, T, _ = q.shape
        w = self.kv_b.weight.view(H, m.qk_nope_head_dim + m.v_head_dim, m.kv_lora_rank)
        w_uk, w_uv = w[:, :m.qk_nope_head_dim], w[:, m.qk_nope_head_dim:]  # (H, nope, r), (H, v, r)
        q_nope, q_pe = q.split([m.qk_nope_head_dim, m.qk_rope_head_dim], dim=-1)
        q_lat = (q_nope.transpose(0, 1).reshape(H, B * T, -1) @ w_uk).view(H, B, T, -1).transpose(0, 1)
        q = torch.cat([q_lat, q_pe], dim=-1)  # (B, H, T, r + dr)
        ok = allowed(step.pos, kpos, True, None)
        o = attend(q, latent, latent[..., :m.kv_lora_rank], ok, None, self.scale)  # (B, H, T, r)
        o = o.transpose(0, 1).reshape(H, B * T, -1) @ w_uv.transpose(1, 2)  # (H, B*T, v)
        return self.o(o.view(H, B, T, -1).permute(1, 2, 0, 3).reshape(B, T, -1))


class FFN(nn.Module):
    """Gated (act(gate(x)) * up(x) -> down: SwiGLU/GeGLU) or plain (act(up(x)) -> down), params.ffn_params."""

    def __init__(self, card: ModelCard, inner: int, dtype, device) -> None:
        super().__init__()
        kw = dict(bias=card.mlp_bias, dtype=dtype, device=device)
        self.gate = nn.Linear(card.hidden_size, inner, **kw) if card.gated_ffn else None
        self.up = nn.Linear(card.hidden_size, inner, **kw)
        self.down = nn.Linear(inner, card.hidden_size, **kw)
        self.act = _ACT[card.activation]

    def forward(self, x: Tensor) -> Tensor:
        h = self.act(self.up(x)) if self.gate is None else self.act(self.gate(x)).mul_(self.up(x))  # (N, inner)
        return self.down(h.to(self.down.weight.dtype)).to(x.dtype)  # T5's wo may be float32 (reference.build)


class MoE(nn.Module):
    """Top-k routed experts plus always-on shared experts (Mixtral, Qwen-MoE, DeepSeek), params.mlp_params."""

    def __init__(self, card: ModelCard, dtype, device) -> None:
        super().__init__()
        moe, h = card.moe, card.hidden_size
        self.router = nn.Linear(h, moe.num_experts, bias=moe.router_bias, dtype=dtype, device=device)
        self.experts = nn.ModuleList(FFN(card, moe.expert_ffn_size, dtype, device) for _ in range(moe.num_experts))
        self.shared = nn.ModuleList(FFN(card, moe.shared_ffn, dtype, device) for _ in range(moe.num_shared_experts))
        self.shared_gate = nn.Linear(h, 1, bias=False, dtype=dtype, device=device) if moe.shared_expert_gate else None
        self.k = moe.experts_per_token

    def forward(self, x: Tensor) -> Tensor:
        shape = x.shape
        x = x.reshape(-1, shape[-1])  # (N, h)
        # the router may be float32 (reference.build): transformers' F.linear(x.float(), weight.float())
        top_w, top_i = self.router(x.to(self.router.weight.dtype)).softmax(dim=-1).topk(self.k, dim=-1)  # (N, k)
        top_w = top_w.to(x.dtype)
        out = torch.zeros_like(x)
        for e, expert in enumerate(self.experts):
            rows, slot = (top_i == e).nonzero(as_tuple=True)  # only the tokens routed to expert e
            if rows.numel():
                y = expert(x.index_select(0, rows)) * top_w[rows, slot, None]
                out.index_add_(0, rows, y)
        for expert in self.shared:
            y = expert(x)
            if self.shared_gate is not None:
                y = y * torch.sigmoid(self.shared_gate(x))
            out += y
        return out.view(shape)


class Block(nn.Module):
    """One transformer block. norms_per_layer: 1 parallel (Falcon-7B), 2 pre-norm, 3 + post-attention, 4 Gemma-2
    sandwich (pre/post attention, pre/post FFN). Decoder blocks of encoder-decoder models add cross-attention."""

    def __init__(self, card: ModelCard, layer: int, *, encoder: bool, cross: bool, engine: str, dtype, device):
        super().__init__()
        window = None if encoder else card.window(layer)
        self.norms = nn.ModuleList(make_norm(card, card.hidden_size, dtype, device)
                                   for _ in range(card.norms_per_layer))
        mixer = "attention" if encoder else card.mixer(layer)
        self.solo = not card.mixer_mlp  # one module per block: the mixer, or (an mlp layer) the FFN
        self.attn = None  # an mlp layer (Nemotron-H) has no mixer
        if mixer == "mamba":
            self.attn = SSMixer(card, engine=engine, dtype=dtype, device=device)
        elif mixer and card.mla:
            absorb = get_engine(engine).mla_mode("decode") == "absorb"
            self.attn = MLAttention(card, absorb=absorb, dtype=dtype, device=device)
        elif mixer:
            self.attn = Attention(card, window, causal=not encoder, cross=False, engine=engine, dtype=dtype,
                                  device=device, chunk=None if encoder else card.chunk(layer))
        self.cross = Attention(card, None, causal=False, cross=True, engine=engine, dtype=dtype,
                               device=device) if cross else None
        self.cross_norm = make_norm(card, card.hidden_size, dtype, device) if cross else None
        moe, ffn = card.is_moe_layer(layer), encoder or card.has_mlp(layer)
        self.mlp = MoE(card, dtype, device) if moe else FFN(card, card.ffn_size, dtype, device) if ffn else None

    def forward(self, x: Tensor, step: Step, cache, cross_cache, bias_fn) -> Tensor:
        n = self.norms
        if self.solo:  # Mamba / Nemotron-H: norm, then the block's one module (mixer or FFN), residual
            h = n[0](x)
            y = self.attn(h, step, cache, bias_fn) if self.attn is not None else self.mlp(h)
            return x + (n[1](y) if len(n) >= 2 else y)
        if len(n) == 1:  # parallel attention and FFN on one norm (Falcon-7B)
            h = n[0](x)
            return x + self.attn(h, step, cache, bias_fn) + self.mlp(h)
        a = self.attn(n[0](x), step, cache, bias_fn)
        x = x + (n[1](a) if len(n) >= 3 else a)
        if self.cross is not None:
            x = x + self.cross(self.cross_norm(x), step, cross_cache, None)
        f = self.mlp(n[2 if len(n) >= 3 else 1](x))
        return x + (n[3](f) if len(n) == 4 else f)


class RelativeBias(nn.Module):
    """T5-style relative position bias, one (buckets x heads) table per stack. Buckets here are clamped distances
    (T5 uses log-spaced ones beyond buckets/2); the parameter shape, what kvplan counts, is T5's."""

    def __init__(self, card: ModelCard, bidirectional: bool, dtype, device) -> None:
        super().__init__()
        self.table = nn.Embedding(card.relative_attention_num_buckets, card.num_heads, dtype=dtype, device=device)
        self.bidirectional, self.n = bidirectional, card.relative_attention_num_buckets

    def forward(self, qpos: Tensor, kpos: Tensor) -> Tensor:
        rel = kpos[None, :] - qpos[:, None]  # (T, S)
        if self.bidirectional:
            half = self.n // 2
            bucket = (rel > 0).long() * half + rel.abs().clamp(max=half - 1)
        else:
            bucket = (-rel).clamp(0, self.n - 1)
        return self.table(bucket).permute(2, 0, 1)  # (H, T, S)


class Stack(nn.Module):
    """The blocks of one stack (decoder, or the encoder of an encoder-decoder), its relative bias and final norm."""

    def __init__(self, card: ModelCard, n: int, *, encoder: bool, cross: bool, engine: str, dtype, device):
        super().__init__()
        self.blocks = nn.ModuleList(Block(card, i, encoder=encoder, cross=cross, engine=engine, dtype=dtype,
                                          device=device) for i in range(n))
        self.rel = RelativeBias(card, encoder, dtype, device) if card.relative_attention_num_buckets else None
        self.norm = make_norm(card, card.hidden_size, dtype, device) if card.final_norm else None

    def forward(self, x: Tensor, step: Step, caches=None) -> Tensor:
        for i, block in enumerate(self.blocks):
            cache = caches.self_attn[i] if caches is not None else None
            cross = caches.cross[i] if caches is not None and caches.cross else None
            x = block(x, step, cache, cross, self.rel)
        return self.norm(x) if self.norm is not None else x


class Reference(nn.Module):
    """The whole model: embeddings (+ learned positions, token types, embedding norm), stacks, pooler, LM head."""

    def __init__(self, card: ModelCard, *, engine: str = "ideal", dtype=torch.float32, device="cpu") -> None:
        super().__init__()
        kw = dict(dtype=dtype, device=device)
        h, encdec = card.hidden_size, card.architecture == "encoder-decoder"
        self.card = card
        self.embed = nn.Embedding(card.vocab_size, h, **kw)
        rows = card.max_position_embeddings + card.learned_position_offset  # OPT: 2 extra rows
        self.pos_embed = nn.Embedding(rows, h, **kw) if card.position == "learned" else None
        self.type_embed = nn.Embedding(card.type_vocab_size, h, **kw) if card.type_vocab_size else None
        self.embed_norm = make_norm(card, h, dtype, device) if card.embedding_norm else None
        self.encoder = Stack(card, card.num_encoder_layers, encoder=True, cross=False, engine=engine,
                             **kw) if encdec else None
        self.decoder = Stack(card, card.num_layers, encoder=card.architecture == "encoder-only", cross=encdec,
                             engine=engine, **kw)
        self.pooler = nn.Linear(h, h, bias=True, **kw) if card.pooler else None  # BERT; unused by the LM head
        self.lm_head = None if card.tie_embeddings else nn.Linear(h, card.vocab_size, bias=False, **kw)
        self.lm_bias = nn.Parameter(torch.zeros(card.vocab_size, **kw)) if card.lm_head_bias else None

    def embed_tokens(self, tokens: Tensor, pos: Tensor) -> Tensor:
        x = self.embed(tokens)  # (B, T, h)
        if self.pos_embed is not None:
            x = x + self.pos_embed(pos)
        if self.type_embed is not None:  # token type 0 for every token
            x = x + self.type_embed.weight[0]
        return self.embed_norm(x) if self.embed_norm is not None else x

    def encode(self, tokens: Tensor) -> Tensor:
        pos = torch.arange(tokens.shape[1], device=tokens.device)
        return self.encoder(self.embed_tokens(tokens, pos), Step("full", 0, pos))

    def forward(self, tokens: Tensor, step: Step, caches=None) -> Tensor:
        """Logits (B, T, vocab), or (B, 1, vocab) when ``step.last_only``."""
        x = self.decoder(self.embed_tokens(tokens, step.pos), step, caches)
        if step.last_only:
            x = x[:, -1:]
        w = self.embed.weight if self.lm_head is None else self.lm_head.weight
        return F.linear(x, w, self.lm_bias)

