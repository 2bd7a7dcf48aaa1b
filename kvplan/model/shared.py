"""Shared transformer blocks (Zamba, Zamba2): one attention + MLP block whose weights several layers reuse.

A card with ``shared_blocks`` has state-space layers only: every decoder layer runs its own mixer (``mamba``), and
each ``hybrid`` layer first *invokes* a shared transformer block, then a per-invocation ``Linear(hidden, hidden)``
(no bias) whose output is added to the mixer's input (Zamba paper arXiv:2405.16712, fig. 2 and eq. 6; transformers
``ZambaHybridLayer`` / ``Zamba2HybridLayer``). The block's input is the hidden state concatenated with the original
token embeddings, so its RMSNorm and its q/k/v projections are ``2 x hidden_size`` wide; o_proj maps
``num_heads x head_dim`` back to ``hidden_size``; then an RMSNorm of hidden_size and the card's (gated) MLP.

- Weights: ``num_blocks`` distinct blocks (Zamba: 1; Zamba2 ``num_mem_blocks``); the k-th invocation uses block
  k mod num_blocks, so min(num_blocks, invocations) blocks exist. Zamba2 adds untied LoRA-style adapters per
  invocation (arXiv:2411.15242 fig. 2): ``Linear(in, r) -> Linear(r, out)`` without biases on the MLP's gate/up
  projection (hidden -> r -> 2 x ffn_size) and, with ``use_shared_attention_adapter``, on q, k and v
  (2 x hidden -> r -> 2 x hidden each).
- Cache: every invocation is its own attention layer: it caches its own K/V (transformers
  ``LinearAttentionAndFullAttentionLayer``: K/V plus the mixer's states in one cache layer; vLLM one attention
  layer per hybrid layer), exactly as the card's ``hybrid`` layer type counts them.
"""

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt

_Size = Annotated[StrictInt, Field(gt=0, le=10_000_000)]


class SharedBlocks(BaseModel):
    """Transformer blocks shared by a card's hybrid layers (Zamba-style); see the module docstring."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)  # built on a card's first validation
    num_blocks: Annotated[StrictInt, Field(gt=0, le=10_000)] = Field(
        1, description="Distinct shared blocks (Zamba2 num_mem_blocks); the k-th hybrid layer uses block k mod n.")
    adapter_rank: _Size | None = Field(
        None, description="Rank r of the per-invocation adapters (Zamba2 adapter_rank); null: no adapters (Zamba).")
    attention_adapters: StrictBool = Field(
        False, description="Per-invocation q, k and v adapters, 2 x hidden -> r -> 2 x hidden each (Zamba2 "
                           "use_shared_attention_adapter).")
    mlp_adapters: StrictBool = Field(
        False, description="A per-invocation adapter on the MLP's gate/up projection, hidden -> r -> 2 x ffn_size "
                           "(Zamba2 builds it always).")


def check_shared_blocks(shared: SharedBlocks, *, pattern: tuple[str, ...], mixer_mlp: bool, has_moe: bool,
                        q_width: int, kv_width: int, hidden_size: int) -> None:
    """The invariants beside a card's ``shared_blocks``; ValueError names the keys that disagree."""
    if "hybrid" not in pattern or set(pattern) - {"mamba", "hybrid"}:
        raise ValueError(f"shared_blocks: needs layer_pattern of mamba and hybrid layers (the hybrid ones invoke a "
                         f"shared block), with at least one hybrid; got {list(pattern)}")
    if mixer_mlp or has_moe:
        raise ValueError("shared_blocks: the MLP lives in the shared block; needs mixer_mlp false and no moe")
    adapters = shared.attention_adapters or shared.mlp_adapters
    if adapters != (shared.adapter_rank is not None):
        raise ValueError("shared_blocks.adapter_rank: required with attention_adapters or mlp_adapters, and allowed "
                         "only with them")
    if shared.attention_adapters and not q_width == kv_width == 2 * hidden_size:
        raise ValueError(f"shared_blocks.attention_adapters: the q/k/v adapters are 2 x hidden_size "
                         f"({2 * hidden_size}) wide, but num_heads x head_dim is {q_width} and num_kv_heads x "
                         f"head_dim {kv_width}; allowed: both {2 * hidden_size}")

