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

FLOPs: every invocation runs its block's matrices, its adapters and its Linear(h, h) on every new token (the
block's weights are shared, the work is not). Tensor parallelism (vLLM ``models/zamba2.py``): q/k/v one
``QKVParallelLinear(2h, head_dim, num_heads)`` -- built without num_kv_heads, so K and V are num_heads wide on vLLM
whatever num_key_value_heads says --, o_proj ``RowParallelLinear``, gate_up ``MergedColumnParallelLinear``, down
``RowParallelLinear``, the Linear(h, h) ``ReplicatedLinear``; an adapter (``Zamba2LoRA``) is a
``ColumnParallelLinear(in, r, gather_output=True)`` then a column-parallel ``r -> out``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from kvplan.cost.shapes import Matrix, ffn_matrices, total
from kvplan.model.card import ModelCard


@dataclass(frozen=True)
class SharedParams:
    """Parameters of all shared blocks and their invocations, by the components of kvplan.cost.params."""

    attention: int = 0  # the blocks' q/k/v/o projections and the q/k/v adapters
    mlp: int = 0  # the blocks' MLPs and the gate_up adapters
    norms: int = 0  # each block's two RMSNorms (2h and h)
    other: int = 0  # the per-invocation Linear(h, h)


@lru_cache(maxsize=4096)  # cards are frozen and hashable
def block_attention_matrices(card: ModelCard, kv_heads: int | None = None) -> tuple[Matrix, ...]:
    """q/k/v over the 2h-wide [hidden; embeddings] input and o_proj back to h, no biases; ``kv_heads``: the K/V
    heads an engine builds (vLLM's Zamba2: num_heads), default the card's."""
    h, q = card.hidden_size, card.num_heads * card.head_dim
    kv = (card.num_kv_heads if kv_heads is None else kv_heads) * card.head_dim
    return (Matrix("q_proj", 2 * h, q, False, "column"), Matrix("k_proj", 2 * h, kv, False, "column"),
            Matrix("v_proj", 2 * h, kv, False, "column"), Matrix("o_proj", q, h, False, "row"))


def _adapter(name: str, n_in: int, rank: int, n_out: int) -> tuple[Matrix, Matrix]:
    return Matrix(f"{name}.A", n_in, rank, False, "column"), Matrix(f"{name}.B", rank, n_out, False, "column")


@lru_cache(maxsize=4096)  # cards are frozen and hashable
def invocation_matrices(card: ModelCard) -> tuple[tuple[Matrix, ...], tuple[Matrix, ...]]:
    """(attention side, MLP side) of what each invocation owns: the Linear(h, h) and the q/k/v adapters, then the
    gate_up adapter (module docstring)."""
    shared, h = card.shared_blocks, card.hidden_size
    r = shared.adapter_rank or 0
    attention = (Matrix("linear", h, h, False, "replicated"),)
    if shared.attention_adapters:
        attention += tuple(m for name in ("q", "k", "v") for m in _adapter(f"{name}_adapter", 2 * h, r, 2 * h))
    ffn_out = card.ffn_size * (2 if card.gated_ffn else 1)  # gate and up; one up when not gated
    mlp = _adapter("gate_up_adapter", h, r, ffn_out) if shared.mlp_adapters else ()
    return attention, mlp


def invocation_flop_elems(card: ModelCard) -> tuple[int, int]:
    """(attention side, MLP side) multiply-accumulates per token of one invocation: its block's q/k/v/o plus its
    Linear(h, h) and q/k/v adapters; its block's MLP plus its gate_up adapter."""
    attention, mlp = invocation_matrices(card)
    return (total(block_attention_matrices(card), "elems") + total(attention, "elems"),
            total(ffn_matrices(card, card.ffn_size), "elems") + total(mlp, "elems"))


def shared_params(card: ModelCard) -> SharedParams:
    """The shared blocks' parameters, counted once per block and once per invocation for what is not shared."""
    shared = card.shared_blocks
    if shared is None:
        return SharedParams()
    h, calls = card.hidden_size, card.attention_layers  # every hybrid layer invokes a block
    blocks = min(shared.num_blocks, calls)
    (linear, *attention_adapters), mlp_adapters = invocation_matrices(card)
    return SharedParams(
        attention=blocks * total(block_attention_matrices(card)) + calls * total(tuple(attention_adapters)),
        mlp=blocks * total(ffn_matrices(card, card.ffn_size)) + calls * total(mlp_adapters),
        norms=blocks * 3 * h * (2 if card.norm == "layernorm" else 1), other=calls * linear.params)


def shared_tp_reason(card: ModelCard, tp: int, pp: int) -> str | None:
    """Why per-rank planning refuses this shared-block layout (vLLM's Zamba2 rules), or None."""
    if pp > 1:  # Zamba2ForCausalLM implements HasInnerState and IsHybrid, not SupportsPP
        return ("--pp: vLLM's Zamba2ForCausalLM does not support pipeline parallelism (no SupportsPP); shared "
                "blocks are planned on one stage")
    if tp == 1:
        return None
    if card.ssm.kind != "mamba2":
        return (f"--tp: {card.name} invokes shared blocks over {card.ssm.kind} layers (Zamba v1); no engine modelled "
                "here shards it (vLLM and SGLang serve no Zamba v1 model); allowed: --tp 1")
    sizes = [("num_attention_heads", card.num_heads),  # Zamba2Attention: assert num_attention_heads % tp == 0
             ("intermediate_size", card.ffn_size)]  # gate_up / down_proj divide()
    if card.shared_blocks.adapter_rank:  # Zamba2LoRA.A: ColumnParallelLinear(in, adapter_rank) divide()
        sizes.append(("adapter_rank", card.shared_blocks.adapter_rank))
    for what, size in sizes:
        if size % tp:
            return f"--tp: {what} {size} is not divisible by tensor parallel size {tp} (vLLM models/zamba2.py)"
    return None


def shared_rank_params(card: ModelCard, tp: int, kv_heads: int | None = None) -> SharedParams:
    """What one of ``tp`` ranks holds of the shared blocks and their invocations (vLLM models/zamba2.py; module
    docstring): the blocks' q/k/v split by heads (``kv_heads`` per rank: K/V as the engine builds them), o_proj and
    down by their inputs, gate_up and the adapters by their outputs (an adapter's A: rank / tp), the Linear(h, h)
    and the norms replicated."""
    shared = card.shared_blocks
    if shared is None:
        return SharedParams()
    h, calls = card.hidden_size, card.attention_layers
    blocks = min(shared.num_blocks, calls)
    heads = card.num_kv_heads if kv_heads is None else kv_heads
    rank = lambda ms: sum(m.shard(tp, heads, card.head_dim).params for m in ms)  # noqa: E731
    (linear, *attention_adapters), mlp_adapters = invocation_matrices(card)
    return SharedParams(
        attention=blocks * rank(block_attention_matrices(card, kv_heads)) + calls * rank(tuple(attention_adapters)),
        mlp=blocks * rank(ffn_matrices(card, card.ffn_size)) + calls * rank(mlp_adapters),
        norms=blocks * 3 * h * (2 if card.norm == "layernorm" else 1), other=calls * linear.params)


def adapter_gathers(card: ModelCard) -> int:
    """Adapters per invocation whose A output is all-gathered under TP (``ColumnParallelLinear(gather_output=True)``):
    q, k, v with attention adapters, and gate_up."""
    shared = card.shared_blocks
    if shared is None:
        return 0
    return 3 * shared.attention_adapters + shared.mlp_adapters
