"""The weights of a card's shared transformer blocks (Zamba, Zamba2; kvplan.model.shared), after transformers'
``ZambaAttentionDecoderLayer`` / ``Zamba2AttentionDecoderLayer`` and the hybrid layers that invoke them.

One block (h = hidden_size, q = num_heads x head_dim, kv = num_kv_heads x head_dim): q_proj 2h x q, k_proj and
v_proj 2h x kv, o_proj q x h (no biases), an RMSNorm of 2h (input_layernorm, over [hidden; embeddings]) and one of h
(pre_ff_layernorm), the card's MLP (Zamba: gate, up, down; Zamba2: the fused gate_up of the same size, biased with
add_bias_linear). min(num_blocks, invocations) blocks exist: transformers ties the rest
(``_tied_weights_keys``), so ``sum(p.numel() for p in model.parameters())`` counts each once.

Per invocation (one per hybrid layer): the Linear(h, h) after the block; Zamba2's adapters, each Linear(in, r) then
Linear(r, out) without biases: on gate_up h -> r -> 2 x ffn_size, and with attention adapters on q, k and v
2h -> r -> 2h.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.cost.shapes import ffn_matrices, total
from kvplan.model.card import ModelCard


@dataclass(frozen=True)
class SharedParams:
    """Parameters of all shared blocks and their invocations, by the components of kvplan.cost.params."""

    attention: int = 0  # the blocks' q/k/v/o projections and the q/k/v adapters
    mlp: int = 0  # the blocks' MLPs and the gate_up adapters
    norms: int = 0  # each block's two RMSNorms (2h and h)
    other: int = 0  # the per-invocation Linear(h, h)


def shared_params(card: ModelCard) -> SharedParams:
    """The shared blocks' parameters, counted once per block and once per invocation for what is not shared."""
    shared = card.shared_blocks
    if shared is None:
        return SharedParams()
    h, calls = card.hidden_size, card.attention_layers  # every hybrid layer invokes a block
    blocks = min(shared.num_blocks, calls)
    q, kv = card.num_heads * card.head_dim, card.num_kv_heads * card.head_dim
    attention = 2 * h * (q + 2 * kv) + q * h
    ffn_out = card.ffn_size * (2 if card.gated_ffn else 1)  # gate and up; one up when not gated
    adapter = shared.adapter_rank or 0
    attention_adapters = 3 * 2 * (2 * h * adapter) if shared.attention_adapters else 0  # q, k, v: in and out
    mlp_adapters = adapter * (h + ffn_out) if shared.mlp_adapters else 0
    return SharedParams(attention=blocks * attention + calls * attention_adapters,
                        mlp=blocks * total(ffn_matrices(card, card.ffn_size)) + calls * mlp_adapters,
                        norms=blocks * 3 * h * (2 if card.norm == "layernorm" else 1), other=calls * h * h)
