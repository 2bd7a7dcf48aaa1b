r"""Exact matmul FLOPs of one prefill and one decode step of a decoder-only or
encoder-decoder card, per batch, as Python ints.

Convention (``dense``): 2*m*n*k for every matmul a dense implementation executes, nothing else -- exactly what
``torch.utils.flop_counter.FlopCounterMode`` counts (it registers mm, addmm, bmm, baddbmm and the SDPA kernels;
an addmm's bias add, softmax, norms, RoPE and activations count 0; SDPA counts the full score matrix, its causal
flag ignored: "NB: We aren't accounting for causal attention here", torch/utils/flop_counter.py).

``causal_*`` counts only the score entries a causal FlashAttention-style kernel needs: query i of a prefill sees
i + 1 keys, P(P+1)/2 per head, and a sliding-window layer min(i + 1, W) keys (Mistral paper, arXiv:2310.06825).

Per engine (kvplan.cost.runtimes, ``Engine.flops_rule``): which positions the LM head runs on, which keys a step
attends to, and how MLA runs (``mla_mode``):

- ``expand``: every step up-projects the latent of every attended position with kv_b_proj, then standard attention
  with qk_head = qk_nope + qk_rope and v_head per head (transformers 5.x DeepseekV3Attention.expand_kv after
  ``past_key_values.update`` of the latent; kvplan's reference model; vLLM's prefill path).
- ``absorb``: W_UK is absorbed into the query and W_UV into the output; attention runs per head over the latent of
  width kv_lora_rank + qk_rope (QK) and kv_lora_rank (AV) (DeepSeek-V2 paper, arXiv:2405.04434 section 2.1.2;
  vLLM's MLA decode path, ``forward_mqa``).

State layers (a card's ``ssm`` block: Mamba-1/2, Gated DeltaNet, short conv, lightning, RG-LRU): each mamba or
hybrid layer adds its mixer's linears, depthwise conv and scan contractions (kvplan.cost.ssm_flops, exact against
FlopCounterMode on transformers' torch paths); only attention and hybrid layers attend, only layers with an FFN run
one (Nemotron-H's mlp layers, a pure Mamba stack has none).

Shared blocks (Zamba, Zamba2; kvplan.cost.shared): every hybrid layer invokes a shared attention + MLP block, so the
block's matrices run once per invocation although its weights exist once: projections count its q/k/v over the 2h
input, o_proj, the invocation's Linear(h, h) and q/k/v adapters; mlp its MLP and gate_up adapter; each invocation
attends its own K/V; every layer also runs its own Mamba mixer (state_mixer). Exact against FlopCounterMode on
transformers' ZambaForCausalLM / Zamba2ForCausalLM (tests/test_flops_shared.py).

Encoder-decoder (T5): the prefill runs the encoder once over the E encoder tokens (bidirectional: E x E scores, no
mask to skip), then the decoder over the P prompt tokens; every decoder layer adds cross-attention, whose K/V
projections run on the encoder output once (at prefill) and are read from the cache afterwards
(transformers ``EncoderDecoderCache``), with P x E (prefill) or 1 x E (decode) scores.
"""

from collections.abc import Iterable
from dataclasses import dataclass, replace

from pydantic import BaseModel, ConfigDict

from kvplan.cost.engines import IDEAL_RULES, CacheRun, Engine, as_rules
from kvplan.cost.kvspec import has_full_layer
from kvplan.cost.shapes import attention_matrices, ffn_matrices, mla_matrices, router_matrices, total
from kvplan.errors import KvplanError
from kvplan.model.card import ModelCard


class PhaseFlops(BaseModel):
    """``flops.prefill`` / ``flops.decode_step`` in results: exact ints, whole batch."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)
    total: int
    projections: int
    attention_core: int
    mlp: int
    lm_head: int
    state_mixer: int  # the state-space / linear-attention mixers: projections, conv and scan (kvplan.cost.ssm_flops)
    causal_total: int
    causal_attention_core: int
    mla_mode: str | None


class StepFlops(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)
    prefill: PhaseFlops
    decode_step: PhaseFlops


@dataclass(frozen=True)
class FlopsBreakdown:
    """FLOPs of one step for the whole batch. ``total`` = projections + attention_core + mlp + lm_head +
    state_mixer."""

    engine: str
    phase: str  # prefill or decode
    mla_mode: str | None  # expand / absorb for MLA cards, None otherwise
    projections: int  # Q, K, V, O (MLA: q_a/q_b, kv_a, kv_b or the absorbed W_UK/W_UV, o)
    attention_core: int  # QK^T + AV over the score entries a dense implementation computes
    mlp: int  # dense MLP; MoE: router + routed experts x experts_per_token + shared experts
    lm_head: int
    causal_attention_core: int  # only the score entries a causal (and windowed) kernel needs
    # state layers' mixers (kvplan.cost.ssm_flops), the same under dense and causal: their linears, conv, scan
    state_projections: int = 0
    state_conv: int = 0
    state_scan: int = 0

    @property
    def state_mixer(self) -> int:
        return self.state_projections + self.state_conv + self.state_scan

    @property
    def total(self) -> int:
        return self.projections + self.attention_core + self.mlp + self.lm_head + self.state_mixer

    @property
    def causal_total(self) -> int:
        return self.total - self.attention_core + self.causal_attention_core

    def executed(self, basis: str) -> int:
        """FLOPs the engine runs: ``dense`` (every score entry) or ``causal`` (only those a mask keeps)."""
        return self.total if basis == "dense" else self.causal_total

    def plus(self, projections: int = 0, attention_core: int = 0, mlp: int = 0,
             causal_core: int = 0) -> "FlopsBreakdown":
        return replace(self, projections=self.projections + projections, mlp=self.mlp + mlp,
                       attention_core=self.attention_core + attention_core,
                       causal_attention_core=self.causal_attention_core + causal_core)

    def result(self) -> PhaseFlops:
        return PhaseFlops.model_construct(total=self.total, projections=self.projections, attention_core=self.attention_core,
                          mlp=self.mlp, lm_head=self.lm_head, state_mixer=self.state_mixer,
                          causal_total=self.causal_total,
                          causal_attention_core=self.causal_attention_core, mla_mode=self.mla_mode)


def prefill_flops(card: ModelCard, *, batch: int, prompt_len: int, engine: Engine = IDEAL_RULES,
                  max_cache_len: int | None = None, encoder_len: int = 0) -> FlopsBreakdown:
    """One forward over ``prompt_len`` new tokens per sequence from an empty cache (and, encoder-decoder, the
    encoder over ``encoder_len`` tokens)."""
    eng = _check(card, engine, batch=batch, tokens=prompt_len, encoder_len=encoder_len)
    run = CacheRun(prompt_len, encoder_len, max_cache_len)
    eng.check_run(run, has_full_layer(card))
    # Dense: every query row is scored against all keys the cache returns. transformers eager builds the full
    # P x P matrix in sliding layers too and masks it (DynamicSlidingWindowLayer.update returns the full states).
    # A chunked layer (Llama-4) is a sliding cache layer of W = chunk in transformers; causally a query attends its
    # own chunk so far.
    keys = _tally((eng.step_keys("prefill", prompt_len, w, c, run), n) for (w, c), n in card.attention_spans)
    causal = _tally((_scores_prefill_chunked(prompt_len, c) if c else _scores_prefill_causal(prompt_len, w), n)
                    for (w, c), n in card.attention_spans)
    logit_rows = prompt_len if eng.transformers else 1
    out = _breakdown(card, eng, "prefill", batch=batch, new=prompt_len, keys=keys, causal_scores=causal,
                     logit_rows=logit_rows)
    if card.architecture == "encoder-decoder":
        out = _with_encoder(out, card, batch, encoder_len)
        out = _with_cross(out, card, batch, prompt_len, encoder_len, project_kv=True)
    return out


def decode_step_flops(card: ModelCard, *, batch: int, cache_len: int, engine: Engine = IDEAL_RULES,
                      max_cache_len: int | None = None, encoder_len: int = 0) -> FlopsBreakdown:
    """One new token per sequence with ``cache_len`` tokens already cached: it attends cache_len + 1 keys."""
    eng = _check(card, engine, batch=batch, tokens=cache_len + 1, encoder_len=encoder_len)
    seen = cache_len + 1
    run = CacheRun(seen, encoder_len, max_cache_len)
    eng.check_run(run, has_full_layer(card))
    # Sliding layers hold only the window: hf-dynamic keeps W-1 positions and appends the new one
    # (DynamicSlidingWindowLayer.update), StaticSlidingWindowLayer min(max_cache_len, W) slots, vLLM/ideal W.
    keys = _tally((eng.step_keys("decode", seen, w, c, run), n) for (w, c), n in card.attention_spans)
    causal = _tally(((seen - 1) % c + 1 if c else min(seen, w or seen), n) for (w, c), n in card.attention_spans)
    out = _breakdown(card, eng, "decode", batch=batch, new=1, keys=keys, causal_scores=causal, logit_rows=1)
    if card.architecture == "encoder-decoder":
        out = _with_cross(out, card, batch, 1, encoder_len, project_kv=False)
    return out


def step_breakdowns(card: ModelCard, *, prompt_len: int, seq_len: int, **flops_kw) -> tuple[FlopsBreakdown, ...]:
    """FLOPs of the prefill of ``prompt_len`` tokens and of the decode step that brings each sequence to ``seq_len``
    (cache_len = seq_len - 1); ``flops_kw``: batch, engine, max_cache_len, encoder_len."""
    return (prefill_flops(card, prompt_len=prompt_len, **flops_kw),
            decode_step_flops(card, cache_len=seq_len - 1, **flops_kw))


def step_flops(card: ModelCard, *, batch: int, prompt_len: int, seq_len: int, engine: Engine = IDEAL_RULES,
               max_cache_len: int | None = None, encoder_len: int = 0) -> StepFlops:
    """The prefill of ``prompt_len`` tokens and the decode step that brings each sequence to ``seq_len``
    (cache_len = seq_len - 1): ``estimate``'s ``flops`` object."""
    pre, dec = step_breakdowns(card, prompt_len=prompt_len, seq_len=seq_len, batch=batch, engine=engine,
                               max_cache_len=max_cache_len, encoder_len=encoder_len)
    return StepFlops.model_construct(prefill=pre.result(), decode_step=dec.result())


# ---- score entries per (sequence, head) of each layer ----------------------------------------------------------

def _tally(pairs: Iterable[tuple[int, int]]) -> dict[int, int]:
    """{count: layers} from (count, layers) pairs of the attending layers' spans (``card.attention_spans``):
    layers with equal counts cost the same, so sums run over the distinct counts."""
    out: dict[int, int] = {}
    for value, layers in pairs:
        out[value] = out.get(value, 0) + layers
    return out


def _scores_prefill_chunked(p: int, chunk: int) -> int:
    """sum over query i of (i % C + 1): each whole chunk C(C+1)/2, then the partial one."""
    rest = p % chunk
    return p // chunk * chunk * (chunk + 1) // 2 + rest * (rest + 1) // 2


def _scores_prefill_causal(p: int, window: int | None) -> int:
    """sum over query i of min(i + 1, W): P(P+1)/2 without a window."""
    if window is None or window >= p:
        return p * (p + 1) // 2
    return window * (window + 1) // 2 + (p - window) * window


# ---- per-component FLOPs -----------------------------------------------------------------------------------------

def _breakdown(card: ModelCard, eng: Engine, phase: str, *, batch: int, new: int, keys: dict[int, int],
               causal_scores: dict[int, int], logit_rows: int) -> FlopsBreakdown:
    """Sum the layers. ``keys``: {keys each new token is scored against (dense), which are also the positions MLA
    ``expand`` up-projects per sequence: layers}; ``causal_scores``: {score entries per sequence: layers}."""
    tokens = batch * new
    mode = eng.mla_mode(phase) if card.mla else None
    dense_layers, moe_layers = card.ffn_layers
    n, state, shared_mlp = card.state_layers, (0, 0, 0), 0
    if card.ssm:  # state-space cards only: their mixers' module loads for them
        from kvplan.cost.ssm_flops import mixer_flops

        m = mixer_flops(card, batch=batch, tokens=new, decode=phase == "decode", transformers=eng.transformers)
        state = (m.projections, m.conv, m.scan)
    if card.shared_blocks:  # Zamba-style cards only, as below
        from kvplan.cost.shared import invocation_flop_elems

        shared_mlp = card.attention_layers * 2 * tokens * invocation_flop_elems(card)[1]
    return FlopsBreakdown(  # layers with equal key counts cost the same: sum over the distinct counts
        engine=eng.name, phase=phase, mla_mode=mode,
        projections=sum(n * _projection_flops(card, tokens, batch * k, mode) for k, n in keys.items()),
        attention_core=sum(n * _core_flops(card, tokens * k, mode) for k, n in keys.items()),
        mlp=(moe_layers and moe_layers * _mlp_flops(card, True, tokens))
        + dense_layers * _mlp_flops(card, False, tokens) + shared_mlp,
        lm_head=2 * batch * logit_rows * card.hidden_size * card.vocab_size,
        causal_attention_core=sum(n * _core_flops(card, batch * s, mode) for s, n in causal_scores.items()),
        state_projections=n * state[0], state_conv=n * state[1], state_scan=n * state[2],
    )


def layer_flops(card: ModelCard, layer: int, *, batch: int, new: int, keys: int, mode: str | None) -> int:
    """Dense matmul FLOPs of decoder layer ``layer`` for ``new`` tokens of each of ``batch`` sequences scored against
    ``keys`` keys: its projections, attention core and FFN (what one pipeline stage or TP shard sums over)."""
    tokens = batch * new
    return (_projection_flops(card, tokens, batch * keys, mode) + _core_flops(card, tokens * keys, mode)
            + _mlp_flops(card, card.is_moe_layer(layer), tokens))


def _with_encoder(out: FlopsBreakdown, card: ModelCard, batch: int, enc: int) -> FlopsBreakdown:
    """The encoder stack over ``enc`` tokens: bidirectional, so dense and causal scores are both E x E."""
    layers, tokens = card.num_encoder_layers, batch * enc
    core = layers * _core_flops(card, tokens * enc, None)
    return out.plus(projections=layers * 2 * tokens * total(attention_matrices(card), "elems"), attention_core=core,
                    mlp=layers * 2 * tokens * total(ffn_matrices(card, card.ffn_size), "elems"), causal_core=core)


def _with_cross(out: FlopsBreakdown, card: ModelCard, batch: int, new: int, enc: int, project_kv: bool) -> FlopsBreakdown:
    """Cross-attention of every decoder layer: Q and O on the new tokens, K and V on the encoder output once."""
    q, k, v, o = attention_matrices(card)
    proj = 2 * batch * new * (q.elems + o.elems) + (2 * batch * enc * (k.elems + v.elems) if project_kv else 0)
    core = _core_flops(card, batch * new * enc, None)
    return out.plus(projections=card.num_layers * proj, attention_core=card.num_layers * core,
                    causal_core=card.num_layers * core)


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
    """Q, K, V, O projections of one layer for ``tokens`` new tokens (biases: 0 FLOPs, as addmm counts).
    MLA expand: kv_b_proj on every attended position each step (transformers DeepseekV3Attention.expand_kv);
    absorb: q_nope x W_UK and latent-out x W_UV once per new token (arXiv:2405.04434 eq. 9-19)."""
    if card.shared_blocks is not None:  # the invoked block's q/k/v/o, the invocation's Linear(h, h) and adapters
        from kvplan.cost.shared import invocation_flop_elems  # loaded for such cards only

        return 2 * tokens * invocation_flop_elems(card)[0]
    if mode is None:
        return 2 * tokens * total(attention_matrices(card), "elems")
    mats = mla_matrices(card)
    up = next(m.elems for m in mats if m.name == "kv_b_proj")  # [W_UK; W_UV]
    per_token = total(mats, "elems") - up
    if mode == "absorb":
        return 2 * tokens * (per_token + up)
    return 2 * tokens * per_token + 2 * expanded * up


def _mlp_flops(card: ModelCard, moe_layer: bool, tokens: int) -> int:
    """Dense FFN; MoE: router (+ Qwen2-MoE shared gate) + top-k routed experts + shared experts, per token."""
    if not moe_layer:
        return 2 * tokens * total(ffn_matrices(card, card.ffn_size), "elems")
    moe = card.moe
    routed = moe.experts_per_token * total(ffn_matrices(card, moe.expert_ffn_size), "elems")
    shared = moe.num_shared_experts * total(ffn_matrices(card, moe.shared_ffn), "elems")
    return 2 * tokens * (total(router_matrices(card), "elems") + routed + shared)


def _check(card: ModelCard, engine: Engine, *, batch: int, tokens: int, encoder_len: int) -> Engine:
    eng = as_rules(engine)
    if card.architecture == "encoder-only":
        raise KvplanError(f"flops: {card.name} is encoder-only; FLOPs are modelled for decoder-only and "
                          "encoder-decoder cards")
    if card.architecture == "encoder-decoder" and encoder_len < 1:
        raise KvplanError(f"--encoder-len: {card.name} is encoder-decoder; FLOPs need the encoder tokens")
    if batch < 1 or tokens < 1:
        raise KvplanError(f"flops: batch and token counts must be positive, got batch {batch}, tokens {tokens}")
    return eng
