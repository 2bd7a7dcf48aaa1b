"""The weight matrices of one block, written once: parameter counts (kvplan.cost.params) sum their elements and
biases, FLOPs (kvplan.cost.flops) multiply their elements by the tokens that pass through them, and tensor
parallelism splits them by their ``tp`` rule (Megatron-LM, arXiv:1909.08053: column-parallel inputs, row-parallel
outputs; vLLM ``ColumnParallelLinear`` / ``RowParallelLinear`` / ``ReplicatedLinear``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from kvplan.model.card import ModelCard

TPRule = Literal["column", "row", "replicated"]


@dataclass(frozen=True)
class Matrix:
    """One nn.Linear(n_in, n_out): ``n_in x n_out`` weights, plus ``n_out`` when biased."""

    name: str
    n_in: int
    n_out: int
    bias: bool
    tp: TPRule

    @property
    def elems(self) -> int:
        """Multiply-accumulates per token: the weight elements (a bias add costs no matmul FLOPs)."""
        return self.n_in * self.n_out

    @property
    def params(self) -> int:
        return self.elems + (self.n_out if self.bias else 0)

    def shard(self, tp: int, kv_heads: int | None = None, head_dim: int = 0) -> Matrix:
        """The part one of ``tp`` ranks holds (vLLM linear.py): column ``n_out / tp`` (K/V: kv_heads_per_rank x
        head_dim), row ``n_in / tp`` with the bias in full, replicated all of it."""
        if self.tp == "replicated" or tp == 1:
            return self
        if self.tp == "row":
            return Matrix(self.name, self.n_in // tp, self.n_out, self.bias, self.tp)
        kv = self.name in ("k_proj", "v_proj") and kv_heads is not None
        out = kv_heads_per_rank(kv_heads, tp) * head_dim if kv else self.n_out // tp
        return Matrix(self.name, self.n_in, out, self.bias, self.tp)


def kv_heads_per_rank(num_kv_heads: int, tp: int) -> int:
    """vllm/config/model.py get_num_kv_heads: max(1, kv // tp); each head replicated tp // kv times when tp > kv."""
    return max(1, num_kv_heads // tp)


@lru_cache(maxsize=4096)  # cards are frozen and hashable: shapes are computed once per card
def attention_matrices(card: ModelCard) -> tuple[Matrix, ...]:
    """Q, K, V and output projections of one self-attention layer (GQA/MQA: K and V are num_kv_heads wide; an
    output gate doubles q_proj)."""
    if card.mla:
        return mla_matrices(card)
    h, q_width, kv_width = card.hidden_size, card.num_heads * card.head_dim, card.num_kv_heads * card.head_dim
    q_out = q_width * (2 if card.attention_output_gate else 1)  # Qwen3-Next: queries and their output gate
    return (Matrix("q_proj", h, q_out, card.qkv_bias, "column"), Matrix("k_proj", h, kv_width, card.qkv_bias, "column"),
            Matrix("v_proj", h, kv_width, card.qkv_bias, "column"), Matrix("o_proj", q_width, h, card.out_bias, "row"))


@lru_cache(maxsize=4096)  # cards are frozen and hashable: shapes are computed once per card
def mla_matrices(card: ModelCard) -> tuple[Matrix, ...]:
    """DeepSeek MLA (arXiv:2405.04434 eq. 9-19): low-rank query path, KV down-projection, up-projection ``kv_b_proj``
    (= [W_UK; W_UV]), output. The down-projections are replicated under TP (vLLM ``ReplicatedLinear``). transformers
    biases q_a_proj and kv_a_proj_with_mqa (qkv_bias) and o_proj (out_bias) with attention_bias, never q_proj,
    q_b_proj or kv_b_proj (modeling_deepseek_v3.py, modeling_kimi_linear.py)."""
    m, h, heads = card.mla, card.hidden_size, card.num_heads
    qk_head, bias = m.qk_nope_head_dim + m.qk_rope_head_dim, card.qkv_bias
    if m.q_lora_rank:
        q = [Matrix("q_a_proj", h, m.q_lora_rank, bias, "replicated"),
             Matrix("q_b_proj", m.q_lora_rank, heads * qk_head, False, "column")]
    else:
        q = [Matrix("q_proj", h, heads * qk_head, False, "column")]
    return tuple(q) + (Matrix("kv_a_proj_with_mqa", h, m.kv_lora_rank + m.qk_rope_head_dim, bias, "replicated"),
                       Matrix("kv_b_proj", m.kv_lora_rank, heads * (m.qk_nope_head_dim + m.v_head_dim), False, "column"),
                       Matrix("o_proj", heads * m.v_head_dim, h, card.out_bias, "row"))


@lru_cache(maxsize=4096)  # cards are frozen and hashable: shapes are computed once per card
def ffn_matrices(card: ModelCard, inner: int) -> tuple[Matrix, ...]:
    """One feed-forward block: gated (gate, up, down: SwiGLU/GeGLU) or plain (up, down)."""
    h, bias = card.hidden_size, card.mlp_bias
    gate = [Matrix("gate_proj", h, inner, bias, "column")] if card.gated_ffn else []
    return (*gate, Matrix("up_proj", h, inner, bias, "column"), Matrix("down_proj", inner, h, bias, "row"))


@lru_cache(maxsize=4096)  # cards are frozen and hashable: shapes are computed once per card
def router_matrices(card: ModelCard) -> tuple[Matrix, ...]:
    """The MoE router, Linear(hidden, num_experts) without bias, plus Qwen2-MoE's shared-expert gate (hidden x 1);
    replicated on every TP rank."""
    moe = card.moe
    gate = [Matrix("shared_expert_gate", card.hidden_size, 1, False, "replicated")] if moe.shared_expert_gate else []
    return (Matrix("router", card.hidden_size, moe.num_experts, moe.router_bias, "replicated"), *gate)


def fused_groups(matrices: tuple[Matrix, ...]) -> list[list[Matrix]]:
    """The linears vLLM allocates as one parameter: q/k/v as one QKVParallelLinear, gate/up as one
    MergedColumnParallelLinear (linear.py), every other linear alone."""
    out: list[list[Matrix]] = []
    fuse = {"q_proj": "qkv", "k_proj": "qkv", "v_proj": "qkv", "gate_proj": "gate_up", "up_proj": "gate_up"}
    last = None
    for m in matrices:
        group = fuse.get(m.name)
        if group is not None and group == last:
            out[-1].append(m)
        else:
            out.append([m])
        last = group
    return out


def fused(matrices: tuple[Matrix, ...], size) -> list[tuple[int, int]]:
    """(weight bytes, bias bytes) per parameter vLLM allocates (fused_groups; linear.py create_weights: the weight,
    then the bias); ``size(m)`` gives one matrix's."""
    return [tuple(map(sum, zip(*(size(m) for m in group)))) for group in fused_groups(matrices)]


def total(matrices: tuple[Matrix, ...], what: str = "params") -> int:
    return sum(getattr(m, what) for m in matrices)
