r"""Exact matmul FLOPs of one prefill and one decode step of a decoder-only card, per batch, as Python ints.

Convention (``dense``): 2*m*n*k for every matmul a dense implementation executes, nothing else -- exactly what
``torch.utils.flop_counter.FlopCounterMode`` counts (it registers mm, addmm, bmm, baddbmm and the SDPA kernels;
an addmm's bias add, softmax, norms, RoPE and activations count 0; SDPA counts the full score matrix, its causal
flag ignored: "NB: We aren't accounting for causal attention here", torch/utils/flop_counter.py).

``causal_*`` counts only the score entries a causal FlashAttention-style kernel needs: query i of a prefill sees
i + 1 keys, P(P+1)/2 per head, and a sliding-window layer min(i + 1, W) keys (Mistral paper, arXiv:2310.06825).

Per engine (``ENGINE_RULES``): which positions the LM head runs on, which keys a decode step attends to, and how MLA
runs (``mla_mode``):

- ``expand``: every step up-projects the latent of every attended position with kv_b_proj, then standard attention
  with qk_head = qk_nope + qk_rope and v_head per head (transformers 5.x DeepseekV3Attention.expand_kv after
  ``past_key_values.update`` of the latent; kvplan's reference model; vLLM's prefill path).
- ``absorb``: W_UK is absorbed into the query and W_UV into the output; attention runs per head over the latent of
  width kv_lora_rank + qk_rope (QK) and kv_lora_rank (AV) (DeepSeek-V2 paper, arXiv:2405.04434 section 2.1.2;
  vLLM's MLA decode path, ``forward_mqa``).
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.model.card import ModelCard
from kvplan.errors import KvplanError
from kvplan.cost.params import router_params
from kvplan.cost.kvspec import ENGINES

ENGINE_RULES = {
    "ideal": "LM head on the last position of each sequence; decode attends the cache (sliding: last W); "
             "MLA: expand in prefill, absorb in decode",
    "hf-dynamic": "transformers: LM head on all P prefill positions (logits_to_keep=0); decode attends L+1 keys "
                  "(sliding: DynamicSlidingWindowLayer's W-1 cached + the new one); MLA: expand every step",
    "hf-static": "transformers StaticCache: LM head on all P prefill positions; every step attends all "
                 "max_cache_len slots (sliding: min(max_cache_len, W)), masked; MLA: expand every step",
    "vllm": "vLLM: logits only for the last position of each sequence; FlashAttention over the sequence's own "
            "tokens (sliding: last W); MLA: expand in prefill, absorb in decode (MLACommonImpl)",
}


@dataclass(frozen=True)
class FlopsBreakdown:
    """FLOPs of one step for the whole batch. ``total`` = projections + attention_core + mlp + lm_head."""

    engine: str
    phase: str  # prefill or decode
    mla_mode: str | None  # expand / absorb for MLA cards, None otherwise
    projections: int  # Q, K, V, O (MLA: q_a/q_b, kv_a, kv_b or the absorbed W_UK/W_UV, o)
    attention_core: int  # QK^T + AV over the score entries a dense implementation computes
    mlp: int  # dense MLP; MoE: router + routed experts x experts_per_token + shared experts
    lm_head: int
    causal_attention_core: int  # only the score entries a causal (and windowed) kernel needs

    @property
    def total(self) -> int:
        return self.projections + self.attention_core + self.mlp + self.lm_head

    @property
    def causal_total(self) -> int:
        return self.total - self.attention_core + self.causal_attention_core

    def as_dict(self) -> dict[str, int | str | None]:
        """The JSON object ``flops.prefill`` / ``flops.decode_step``: ints plus mla_mode."""
        return {"total": self.total, "projections": self.projections, "attention_core": self.attention_core,
                "mlp": self.mlp, "lm_head": self.lm_head, "causal_total": self.causal_total,
                "causal_attention_core": self.causal_attention_core, "mla_mode": self.mla_mode}


def mla_mode(engine: str, phase: str) -> str:
    """How the engine runs MLA in this phase (see the module docstring)."""
    if engine.startswith("hf-"):
        return "expand"
    return "expand" if phase == "prefill" else "absorb"


def prefill_flops(card: ModelCard, *, batch: int, prompt_len: int, engine: str = "ideal",
                  max_cache_len: int | None = None) -> FlopsBreakdown:
    """One forward over ``prompt_len`` new tokens per sequence from an empty cache."""
    _check(card, engine, batch=batch, tokens=prompt_len)
    # Dense: every query row is scored against all keys the cache returns. transformers eager builds the full
    # P x P matrix in sliding layers too and masks it (DynamicSlidingWindowLayer.update returns the full states).
    n_keys = _static_len(engine, max_cache_len, prompt_len)
    keys = [_prefill_keys(prompt_len, n_keys, _window(card, t), engine) for t in card.layer_types]
    causal = [_scores_prefill_causal(prompt_len, _window(card, t)) for t in card.layer_types]
    logit_rows = prompt_len if engine.startswith("hf-") else 1
    return _breakdown(card, engine, "prefill", batch=batch, new=prompt_len, keys=keys, causal_scores=causal,
                      logit_rows=logit_rows)


def decode_step_flops(card: ModelCard, *, batch: int, cache_len: int, engine: str = "ideal",
                      max_cache_len: int | None = None) -> FlopsBreakdown:
    """One new token per sequence with ``cache_len`` tokens already cached: it attends cache_len + 1 keys."""
    _check(card, engine, batch=batch, tokens=cache_len + 1)
    seen = cache_len + 1
    n_keys = _static_len(engine, max_cache_len, seen)
    # Sliding layers hold only the window: hf-dynamic keeps W-1 positions and appends the new one
    # (DynamicSlidingWindowLayer.update), StaticSlidingWindowLayer min(max_cache_len, W) slots, vLLM/ideal W.
    keys = [min(n_keys, _window(card, t) or n_keys) for t in card.layer_types]
    causal = [min(seen, _window(card, t) or seen) for t in card.layer_types]
    return _breakdown(card, engine, "decode", batch=batch, new=1, keys=keys, causal_scores=causal, logit_rows=1)


def flops_result(card: ModelCard, *, batch: int, prompt_len: int, seq_len: int, engine: str = "ideal",
                 max_cache_len: int | None = None) -> dict[str, dict[str, int | str | None]]:
    """``{"prefill": {...}, "decode_step": {...}}`` for ``estimate --json``'s ``flops`` object: the prefill of
    ``prompt_len`` tokens and the decode step that brings each sequence to ``seq_len`` (cache_len = seq_len - 1)."""
    pre = prefill_flops(card, batch=batch, prompt_len=prompt_len, engine=engine, max_cache_len=max_cache_len)
    dec = decode_step_flops(card, batch=batch, cache_len=seq_len - 1, engine=engine, max_cache_len=max_cache_len)
    return {"prefill": pre.as_dict(), "decode_step": dec.as_dict()}


# ---- score entries per (sequence, head) of each layer ----------------------------------------------------------

def _window(card: ModelCard, layer_type: str) -> int | None:
    return card.sliding_window if layer_type == "sliding" else None


def _static_len(engine: str, max_cache_len: int | None, needed: int) -> int:
    """hf-static scores every preallocated slot (masked); the other engines only the tokens there are."""
    if engine != "hf-static":
        return needed
    if max_cache_len is None or max_cache_len < needed:
        raise KvplanError(f"--max-cache-len: hf-static needs max_cache_len >= {needed} tokens, got {max_cache_len}")
    return max_cache_len


def _prefill_keys(p: int, n_keys: int, window: int | None, engine: str) -> int:
    """Keys each prompt row is scored against. hf-static: a full layer returns all max_cache_len slots; a sliding
    layer (StaticSlidingWindowLayer, min(max_cache_len, W) slots) returns its slots, or the P new states when they
    overflow it. Everything else: the P prompt tokens."""
    if engine != "hf-static" or window is None:
        return n_keys
    slots = min(n_keys, window)
    return p if p > slots else slots


def _scores_prefill_causal(p: int, window: int | None) -> int:
    """sum over query i of min(i + 1, W): P(P+1)/2 without a window."""
    if window is None or window >= p:
        return p * (p + 1) // 2
    return window * (window + 1) // 2 + (p - window) * window


# ---- per-component FLOPs -----------------------------------------------------------------------------------------

def _breakdown(card: ModelCard, engine: str, phase: str, *, batch: int, new: int, keys: list[int],
               causal_scores: list[int], logit_rows: int) -> FlopsBreakdown:
    """Sum the layers. ``keys``: per layer, the keys each new token is scored against (dense), which are also the
    positions MLA ``expand`` up-projects per sequence; ``causal_scores``: per layer, score entries per sequence."""
    tokens = batch * new
    mode = mla_mode(engine, phase) if card.mla else None
    return FlopsBreakdown(
        engine=engine, phase=phase, mla_mode=mode,
        projections=sum(_projection_flops(card, tokens, batch * k, mode) for k in keys),
        attention_core=sum(_core_flops(card, tokens * k, mode) for k in keys),
        mlp=sum(_mlp_flops(card, layer, tokens) for layer in range(card.num_layers)),
        lm_head=2 * batch * logit_rows * card.hidden_size * card.vocab_size,
        causal_attention_core=sum(_core_flops(card, batch * s, mode) for s in causal_scores),
    )


def _core_flops(card: ModelCard, entries: int, mode: str | None) -> int:
    """QK^T (2 x entries x qk width) + AV (2 x entries x v width), per query head (GQA/MQA: K/V are repeated
    to every query head, transformers repeat_kv; torch sdpa_flop_count counts h_q heads too)."""
    if mode == "absorb":  # scores against the latent + rope key; AV produces the latent (arXiv:2405.04434 2.1.2)
        qk, v = card.mla.kv_lora_rank + card.mla.qk_rope_head_dim, card.mla.kv_lora_rank
    elif mode == "expand":
        qk, v = card.mla.qk_nope_head_dim + card.mla.qk_rope_head_dim, card.mla.v_head_dim
    else:
        qk = v = card.head_dim
    return 2 * entries * card.num_heads * (qk + v)


def _projection_flops(card: ModelCard, tokens: int, expanded: int, mode: str | None) -> int:
    """Q, K, V, O projections of one layer for ``tokens`` new tokens (biases: 0 FLOPs, as addmm counts)."""
    if mode is None:
        q_width, kv_width = card.num_heads * card.head_dim, card.num_kv_heads * card.head_dim
        return 2 * tokens * card.hidden_size * (2 * q_width + 2 * kv_width)
    return _mla_projection_flops(card, tokens, expanded, mode)


def _mla_projection_flops(card: ModelCard, tokens: int, expanded: int, mode: str) -> int:
    """DeepSeek MLA (arXiv:2405.04434 eq. 9-19). expand: kv_b_proj on every attended position each step
    (transformers DeepseekV3Attention.expand_kv). absorb: q_nope x W_UK and latent-out x W_UV per new token."""
    m, h, heads = card.mla, card.hidden_size, card.num_heads
    qk_head = m.qk_nope_head_dim + m.qk_rope_head_dim
    if m.q_lora_rank:
        q = h * m.q_lora_rank + m.q_lora_rank * heads * qk_head
    else:
        q = h * heads * qk_head
    per_token = q + h * (m.kv_lora_rank + m.qk_rope_head_dim) + heads * m.v_head_dim * h  # + kv_a, o_proj
    up = m.kv_lora_rank * heads * (m.qk_nope_head_dim + m.v_head_dim)  # kv_b_proj = [W_UK; W_UV]
    if mode == "absorb":
        return 2 * tokens * (per_token + up)  # W_UK on the query, W_UV on the output: each head once per token
    return 2 * tokens * per_token + 2 * expanded * up


def _mlp_flops(card: ModelCard, layer: int, tokens: int) -> int:
    """Dense FFN; MoE: router (+ Qwen2-MoE shared gate) + top-k routed experts + shared experts, per token."""
    moe = card.moe
    if moe is None or layer < moe.first_dense_layers:
        return 2 * tokens * _ffn_weights(card, card.ffn_size)
    router = router_params(card)
    routed = moe.experts_per_token * _ffn_weights(card, moe.expert_ffn_size)
    shared = moe.num_shared_experts * _ffn_weights(card, moe.shared_ffn)
    return 2 * tokens * (router + routed + shared)


def _ffn_weights(card: ModelCard, inner: int) -> int:
    """Weight elements of one FFN: gate, up, down (gated) or up, down; biases cost no matmul FLOPs."""
    return (3 if card.gated_ffn else 2) * card.hidden_size * inner


def _check(card: ModelCard, engine: str, *, batch: int, tokens: int) -> None:
    if engine not in ENGINES:
        raise KvplanError(f"--engine: unknown engine {engine!r}; allowed: {', '.join(ENGINES)}")
    if card.architecture != "decoder-only":
        raise KvplanError(f"flops: {card.name} is {card.architecture}; FLOPs are modelled for decoder-only cards")
    if batch < 1 or tokens < 1:
        raise KvplanError(f"flops: batch and token counts must be positive, got batch {batch}, tokens {tokens}")
