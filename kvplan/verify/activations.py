"""Peak memory of one prefill and one decode step of kvplan's reference model: weights + KV cache + transients.

The peak is the largest of a few candidate moments, each a sum of the tensors live at that moment (no torch here):

- attention softmax of the last layer: scores and probabilities, B x H x T x S each in the compute dtype (both live
  while softmax runs; with gpt-oss's attention sinks the reference exponentiates the scores in place, so one, plus
  a few B x H x T row vectors: ``_softmax``), plus Q, K, V of the new tokens, the normed input, and two
  residual-stream copies held by the callers (the block input and the embedding output; Python keeps an argument
  alive until the callee returns);
- the MLP of the last layer: two B x T x ffn intermediates (gate/act and up, or up and act) plus three hidden-size
  copies; MoE: the routed-token batch of one expert, bounded by all T tokens, plus the output accumulator;
- the LM head: logits rows x vocab (rows: B x P for hf-* engines and encoder-only passes, B for ideal/vllm) plus
  the final hidden states.

Resident throughout: weights, token ids, the static caches (allocated before prefill), and for the paged cache the
pages a step holds. Decode also counts the paged cache's gathered copy of one layer's K/V (cat + stack: 2x).

- on the CPU, an RMSNorm: its float32 copies of the B x T x hidden input (``_norm``), the peak of a rank at a high
  TP degree, where the sharded MLP and attention transients are small.

Error: the model leaves out RoPE temporaries (a few B x T x head-width tensors that die before the candidate
moments, but can overlap them), bool masks (T x S bytes), and routing imbalance (an
expert's batch is taken as all tokens, an upper bound). These are O(B x T x hidden), so the error is largest when
the transients are small next to weights + KV; tests/test_activations.py pins the measured error. Sizes of kernel
scratch buffers (oneDNN, cuBLAS) are not in the CPU tracker's view at all.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.model.card import ModelCard
from kvplan.model.dtypes import parse_dtype
from kvplan.cost.engines import Engine
from kvplan.cost.runtimes import get_engine
from kvplan.planning.estimate import estimate
from kvplan.units import cdiv

TOKEN_ID_BYTES = 8  # int64 token ids


@dataclass(frozen=True)
class ActivationEstimate:
    weights_bytes: int
    kv_bytes: int
    inputs_bytes: int
    prefill_transient_bytes: int  # the largest prefill candidate, above the resident bytes
    decode_transient_bytes: int
    peak_prefill_bytes: int  # resident + transient
    peak_decode_bytes: int


def activation_peaks(card: ModelCard, *, batch: int, prompt_len: int, dtype: str, engine: str | Engine = "ideal",
                     decode_steps: int = 1, encoder_len: int | None = None, max_cache_len: int | None = None,
                     block_size: int = 16, device: str = "cpu") -> ActivationEstimate:
    """Predicted absolute peak bytes of prefill and of the last decode step (seq_len = prompt_len + decode_steps)."""
    e = parse_dtype(dtype).bits // 8
    eng = get_engine(engine)
    seq_len = prompt_len + decode_steps
    enc = encoder_len if card.architecture == "encoder-decoder" else None
    est = estimate(card, batch=batch, seq_len=seq_len, encoder_len=enc, kv_dtype=dtype, weight_dtype=dtype,
                   engine=eng.name, max_cache_len=max_cache_len if eng.static else None,
                   block_size=block_size if eng.takes_estimate_block else None,
                   engine_groups=False)  # the reference cache pages layer by layer
    mcl = est.inputs.max_cache_len
    weights, kv = est.weights.bytes, est.kv_cache.total_bytes
    inputs = TOKEN_ID_BYTES * batch * (prompt_len + (encoder_len if enc else 0))
    kv_prefill = kv
    if eng.paged:  # pages held right after prefill: cdiv(P, block_size) per layer, nothing freed yet
        kv_prefill = sum(batch * g.layers * g.bytes_per_token_per_layer * block_size
                         * cdiv(encoder_len if g.kind == "cross" else prompt_len, block_size)
                         for g in est.kv_cache.groups)
    keys, fresh = _prefill_keys(card, prompt_len, eng, mcl)
    # LM head rows: every prompt position for transformers engines and encoder-only passes, else the last one
    rows = batch * prompt_len if eng.transformers or not card.has_kv_cache else batch
    upcast = device.split(":")[0] == "cpu" and card.norm not in ("layernorm", "layernorm_nobias")
    pre = _transient(card, e, tokens=batch * prompt_len, queries=prompt_len, batch=batch, keys=keys, rows=rows,
                     fresh_kv=fresh, absorb=False, norm_upcast=upcast)
    if enc:  # the encoder output stays live through the decoder (cross-attention reads it at prefill)
        pre += e * batch * encoder_len * card.hidden_size
    dec = 0
    if decode_steps and card.has_kv_cache:
        dkeys = _decode_keys(card, seq_len, eng, mcl)
        dec = _transient(card, e, tokens=batch, queries=1, batch=batch, keys=dkeys, rows=batch, fresh_kv=False,
                         absorb=bool(card.mla) and eng.mla_mode("decode") == "absorb", norm_upcast=upcast)
        if eng.paged:  # read() gathers one layer's pages: per-sequence cat, then stack (both live at once)
            pages = max(g.total_bytes // g.layers for g in est.kv_cache.groups)
            gather = e * (3 * batch * card.hidden_size + 4 * batch * card.num_heads * card.head_dim) + 2 * pages
            dec = max(dec + pages, gather)
        dec += TOKEN_ID_BYTES * batch
    return ActivationEstimate(weights, kv, inputs, pre, dec, weights + inputs + kv_prefill + pre,
                              weights + inputs + kv + dec)


def _ring(card: ModelCard, size: int) -> int:
    """Slots of the largest layer's static buffer: a global layer's ``size``, else the window."""
    if card.sliding_window and "global" not in card.layer_types:
        return min(size, card.sliding_window)
    return size


def _prefill_keys(card: ModelCard, p: int, eng: Engine, mcl: int | None) -> tuple[int, bool]:
    """(keys each prompt token is scored against, whether the fresh K/V stay live): P fresh keys, or hf-static's
    static buffer when the prompt fits it (transformers StaticCache returns the buffer; the fresh K/V die)."""
    if eng.static and card.has_kv_cache and p <= _ring(card, mcl):
        return _ring(card, mcl), False
    return p, True


def _decode_keys(card: ModelCard, seq_len: int, eng: Engine, mcl: int | None) -> int:
    """Keys of the last decode step in the largest layer: the ring buffer (ideal: seq_len, hf-static:
    max_cache_len; sliding-only models: the window) or the attended tokens (vllm)."""
    return _ring(card, mcl if eng.static else seq_len)


def _transient(card: ModelCard, e: int, *, tokens: int, queries: int, batch: int, keys: int, rows: int,
               fresh_kv: bool, absorb: bool, norm_upcast: bool = False) -> int:
    """Largest of the attention, MLP, LM-head and (CPU RMSNorm) norm candidates, in bytes above the resident ones."""
    h, heads = card.hidden_size, card.num_heads
    if card.mla:
        m = card.mla
        qk = m.qk_nope_head_dim + m.qk_rope_head_dim
        new_kv = tokens * (m.kv_lora_rank + m.qk_rope_head_dim)  # the new latent
        if absorb:  # q_lat and [q_lat, q_pe]: heads x (kv_lora_rank + rope) twice
            new_kv += 2 * tokens * heads * (m.kv_lora_rank + m.qk_rope_head_dim)
        else:  # kv_b_proj output (nope + v per head, V a view of it) and the concatenated K (nope + rope)
            new_kv += batch * keys * heads * (m.qk_nope_head_dim + m.v_head_dim + qk)
    else:
        qk = card.head_dim
        new_kv = 2 * tokens * card.num_kv_heads * qk if fresh_kv else 0
    residual = 3 * tokens * h  # embedding output + block input + normed input
    if card.mla:  # the values: MLA's per-head v (expand), or the latent itself (absorb)
        v_dim = card.mla.kv_lora_rank if absorb else card.mla.v_head_dim
    else:
        v_dim = card.head_dim
    attention = residual + tokens * heads * qk + new_kv + _softmax(batch * heads * queries, keys, v_dim,
                                                                    card.attention_sinks)
    if card.relative_attention_num_buckets:  # T5 bias (H x T x S), live with the scores
        attention += heads * queries * keys
    inner = card.ffn_size
    if card.moe:
        inner = max(inner, card.moe.expert_ffn_size, card.moe.shared_ffn)
    mlp = 4 * tokens * h + 2 * tokens * inner
    if card.moe:
        mlp += tokens * (h + 2 * card.moe.num_experts)
    lm_head = tokens * h + rows * card.vocab_size
    return max(e * max(attention, mlp, lm_head), _norm(tokens, h, e) if norm_upcast else 0)


def _softmax(rows: int, keys: int, v_dim: int, sinks: bool) -> int:
    """Elements the reference ``attend`` (kvplan/verify/reference/model.py) holds beyond q, k, v: ``rows`` (B x H x T)
    score rows of ``keys`` each, at its largest moment. Without sinks, ``s.softmax`` returns a new tensor while the
    scores are live (2 x scores), then ``del s`` and ``p @ v`` writes the rows x v_dim output beside the
    probabilities. With gpt-oss's sinks the probabilities are the scores themselves (``s.sub_(m).exp_()`` and
    ``div_`` in place), so one score tensor is held, beside the row max ``m`` (live to the end) and either the
    denominator's three row vectors (sum, exp(sink - m), their sum) or the p @ v output. Measured per op with the
    StorageTracker (tests/test_activations.py). transformers 5.24's eager gpt-oss path (modeling_gpt_oss.py
    ``eager_attention_forward``) is not what this models: it concatenates the sink column and softmaxes out of place;
    kvplan's reference runs the equivalent in-place form."""
    scores = rows * keys
    if sinks:
        return scores + rows * max(4, 1 + v_dim)
    return scores + rows * max(keys, v_dim)


def _norm(tokens: int, h: int, e: int) -> int:
    """torch.nn.RMSNorm on the CPU (torch 2.13: F.rms_norm decomposed at float32 "opmath") holds float32 copies of its
    T x h input while it runs: the upcast, its square and the normalized product (2 when the input is already float32,
    the upcast then being the input itself), plus the T float32 reciprocal RMS; measured with the StorageTracker
    (tests/test_activations.py). Live beside them: the embedding output and the block input held by the callers and
    the residual sum being normed (3 x T x h in the compute dtype). CUDA's fused kernel keeps none of the copies, and
    LayerNorm (fused on both) none; this candidate sets the peak where the other transients are small, e.g. a rank of
    a high TP degree (verify --tp 16 of a shrunk llama-2-7b: the MLP holds 43 of 688 FFN columns)."""
    copies = 3 if e < 4 else 2
    return 3 * tokens * h * e + copies * tokens * h * 4 + tokens * 4
