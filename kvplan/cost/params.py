"""Exact parameter counts, component by component, for what a card describes.

Every count is the sum of the weight (and bias) shapes of the modules transformers builds for the architecture
(``modeling_llama.py``, ``modeling_deepseek_v3.py``, ``modeling_t5.py``, ...). Check: llama-2-7b gives
6,738,415,616 and mistral-7b-v0.1 7,241,732,096, the totals of their published safetensors checkpoints.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from functools import cached_property, lru_cache

from kvplan.cost.shapes import attention_matrices, ffn_matrices, router_matrices, total
from kvplan.cost.ssm import ssm_params
from kvplan.model.card import ModelCard


@dataclass(frozen=True)
class ParamBreakdown:
    """Parameters by component; ``active`` counts only the experts one token uses (MoE)."""

    embedding: int
    positions: int
    attention: int
    mlp: int
    norms: int
    lm_head: int
    other: int
    mlp_active: int
    ssm: int = 0  # the state-space mixers of mamba layers (kvplan.cost.ssm)
    vision: int = 0  # a multimodal checkpoint's vision tower and projector, as transformers builds them (cost.vision)

    @cached_property  # frozen: summed once
    def total(self) -> int:
        return sum(getattr(self, f.name) for f in fields(self) if f.name != "mlp_active")

    @property
    def active(self) -> int:
        return self.total - self.mlp + self.mlp_active


def linear(n_in: int, n_out: int, bias: bool) -> int:
    """nn.Linear(n_in, n_out): weight n_in x n_out, plus n_out when biased."""
    return n_in * n_out + (n_out if bias else 0)


def norm_params(card: ModelCard, width: int) -> int:
    """RMSNorm (and MPT's bias-free LayerNorm) has a weight; LayerNorm a weight and a bias."""
    return width * (2 if card.norm == "layernorm" else 1)


def attention_params(card: ModelCard) -> int:
    """One self-attention layer: its projections (kvplan.cost.shapes) and its own norms and sinks."""
    return total(attention_matrices(card)) + attention_extras(card)


def attention_extras(card: ModelCard, tp: int = 1) -> int:
    """The parameters of one attention layer that are not projections, as one of ``tp`` ranks holds them: norms
    are replicated (vLLM gathers OLMo-2's all-head q/k before its norm), gpt-oss's sink logits split by head."""
    extras = 0
    if card.mla:  # q_a_layernorm (with query compression) and kv_a_layernorm, both RMSNorm
        extras += (card.mla.q_lora_rank or 0) + card.mla.kv_lora_rank
    elif card.qk_norm_width == "all_heads":  # OLMo-2: q_norm over all query heads, k_norm over all K/V heads
        extras += norm_params(card, (card.num_heads + card.num_kv_heads) * card.head_dim)
    elif card.qk_norm:  # one norm of head_dim for queries and one for keys, shared by all heads
        extras += 2 * norm_params(card, card.head_dim)
    return extras + (card.num_heads // tp if card.attention_sinks else 0)  # gpt-oss: one sink logit per head


def ffn_params(card: ModelCard, inner: int) -> int:
    """One feed-forward block: gated (gate, up, down) or plain (up, down)."""
    return total(ffn_matrices(card, inner))


def router_params(card: ModelCard) -> int:
    """The MoE router plus Qwen2-MoE's shared-expert gate."""
    return total(router_matrices(card))


def mlp_params(card: ModelCard, layer: int) -> tuple[int, int]:
    """(all, active-per-token) feed-forward parameters of decoder layer ``layer``."""
    if not card.is_moe_layer(layer):
        dense = ffn_params(card, card.ffn_size)
        return dense, dense
    moe = card.moe
    router = router_params(card)
    expert, shared = ffn_params(card, moe.expert_ffn_size), moe.num_shared_experts * ffn_params(card, moe.shared_ffn)
    return router + moe.num_experts * expert + shared, router + moe.experts_per_token * expert + shared


@lru_cache(maxsize=4096)
def count_params(card: ModelCard) -> ParamBreakdown:
    """The exact parameter count of the card, by component."""
    h = card.hidden_size
    decoder_only = card.architecture != "encoder-decoder"
    stacks = 1 if decoder_only else 2
    blocks = card.num_layers + (card.num_encoder_layers or 0)
    # mamba and mlp layers do not attend; hybrid layers that invoke a shared block (Zamba) hold no attention of their own
    own_attention = 0 if card.shared_blocks else card.attention_layers
    attention_blocks = own_attention + (card.num_encoder_layers or 0)
    shared_attention, shared_mlp, shared_norms, shared_other = _shared_params(card)
    cross = 0 if decoder_only else card.num_layers  # one cross-attention (and its norm) per decoder block
    mlp = [mlp_params(card, i) for i in range(card.num_layers) if card.has_mlp(i)]
    if card.num_encoder_layers:
        mlp += [mlp_params(card, 0)] * card.num_encoder_layers
    norms = (blocks * card.norms_per_layer + cross + stacks * card.final_norm + card.embedding_norm)
    other = (linear(h, h, True) if card.pooler else 0) + card.type_vocab_size * h
    if card.relative_attention_num_buckets:  # T5: one bias table (buckets x heads) in the first block of each stack
        other += stacks * card.relative_attention_num_buckets * card.num_heads
    lm_head = (0 if card.tie_embeddings else card.vocab_size * h) + (card.vocab_size if card.lm_head_bias else 0)
    return ParamBreakdown(
        embedding=card.vocab_size * h,
        positions=(card.max_position_embeddings + card.learned_position_offset) * h if card.position == "learned" else 0,
        attention=(attention_blocks + cross) * attention_params(card) + shared_attention,
        mlp=sum(m[0] for m in mlp) + shared_mlp,
        norms=norms * norm_params(card, h) + shared_norms,
        lm_head=lm_head,
        other=other + shared_other,
        mlp_active=sum(m[1] for m in mlp) + shared_mlp,
        ssm=card.state_layers * ssm_params(card) if card.ssm else 0,
        vision=_vision_params(card) if card.vision else 0,
    )


def _shared_params(card: ModelCard) -> tuple[int, int, int, int]:
    """The shared blocks' (attention, mlp, norms, other) parameters (cost.shared, loaded only for a card with them)."""
    if card.shared_blocks is None:
        return 0, 0, 0, 0
    from kvplan.cost.shared import shared_params

    p = shared_params(card)
    return p.attention, p.mlp, p.norms, p.other


def _vision_params(card: ModelCard) -> int:
    """The vision tower's and projector's parameters (cost.vision, loaded only for a multimodal card)."""
    from kvplan.cost.vision import vision_params

    return vision_params(card).total
