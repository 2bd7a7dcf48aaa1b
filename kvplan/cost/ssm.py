"""The weights of one state-space (Mamba) mixer, after transformers' ``MambaMixer`` (modeling_mamba.py) and
``Mamba2Mixer`` (modeling_mamba2.py; Bamba, Nemotron-H and Granite-MoE-Hybrid build the same module).

Mamba-1 (I = intermediate_size, N = d_state, R = dt_rank, K = d_conv):
in_proj h x 2I (x and the gate z), depthwise conv1d I x K (+ I bias), x_proj I x (R + 2N) (dt, B, C), dt_proj R x I
+ I bias, A_log I x N, D I, out_proj I x h.

Mamba-2 (H heads, G groups, conv_dim = I + 2GN): in_proj h x (2I + 2GN + H) (z, x, B, C, dt), conv1d conv_dim x K
(+ conv_dim bias), dt_bias, A_log and D (H each), a gated RMSNorm of I, out_proj I x h.

Gated DeltaNet (``Qwen3NextGatedDeltaNet``; H value heads of width P, G key heads of width N, I = HP): in_proj_qkvz
h x (2GN + 2I) (q, k, v, the output gate z), in_proj_ba h x 2H (beta, the decay a), conv1d conv_dim x K (no bias),
dt_bias and A_log (H each), a gated RMSNorm of P shared by the heads, out_proj I x h; no biases.

Short conv (``Lfm2ShortConv``, I = h): in_proj h x 3h (B, C, x), conv1d h x K, out_proj h x h; biases with conv_bias.

Lightning attention (``MiniMaxLightningAttention``, I = heads x head_dim): qkv_proj h x 3I, output_gate h x I, an
RMSNorm of I, out_proj I x h; no biases, no conv.

RG-LRU block (``RecurrentGemmaRecurrentBlock``, I = lru_width, H blocks): linear_y, linear_x h x I and linear_out
I x h, all biased; conv1d I x K + I bias; recurrent_param I; input and recurrent gates H x (I/H)^2 + I bias each.

KDA (``KimiLinearDeltaAttention``, H heads of width P, I = HP): q_proj, k_proj, v_proj h x I; the forget gate's
low-rank f_a_proj h x P and f_b_proj P x I, with dt_bias I and A_log H (``KimiLinearForgetGate``); b_proj h x H (beta);
the output gate's g_a_proj h x P and g_b_proj P x I; conv1d 3I x K (no bias); a gated RMSNorm of P; o_proj I x h; no
biases.
"""

from __future__ import annotations

from functools import lru_cache

from kvplan.cost.shapes import Matrix, total
from kvplan.model.card import ModelCard


@lru_cache(maxsize=4096)  # cards are frozen and hashable
def ssm_matrices(card: ModelCard) -> tuple[Matrix, ...]:
    """The nn.Linear projections of one mixer (the conv1d and the per-channel vectors are in ``ssm_extras``)."""
    s, h = card.ssm, card.hidden_size
    inner, bias = s.intermediate_size, s.proj_bias
    out = Matrix("out_proj", inner, h, s.out_proj_bias, "row")
    if s.kind == "mamba":
        return (Matrix("in_proj", h, 2 * inner, bias, "column"),
                Matrix("x_proj", inner, s.dt_rank + 2 * s.d_state, False, "row"),
                Matrix("dt_proj", s.dt_rank, inner, True, "column"), out)
    if s.kind == "gated_deltanet":
        return (Matrix("in_proj_qkvz", h, s.conv_dim + inner, bias, "column"),
                Matrix("in_proj_ba", h, 2 * s.num_heads, bias, "column"), out)
    if s.kind == "short_conv":
        return Matrix("in_proj", h, 3 * inner, bias, "column"), out
    if s.kind == "lightning":
        return (Matrix("qkv_proj", h, 3 * inner, bias, "column"), Matrix("output_gate", h, inner, bias, "column"), out)
    if s.kind == "rglru":
        return (Matrix("linear_y", h, inner, bias, "column"), Matrix("linear_x", h, inner, bias, "column"), out)
    if s.kind == "kda":
        # the forget and output gates' low rank (transformers f_a_proj / g_a_proj); TP rules after vLLM's
        # KimiDeltaAttention (layers/kda.py): f_a / g_a ReplicatedLinear, the rest column-parallel, o_proj row
        rank = s.head_dim
        return (*(Matrix(name, h, inner, bias, "column") for name in ("q_proj", "k_proj", "v_proj")),
                Matrix("f_a_proj", h, rank, bias, "replicated"), Matrix("f_b_proj", rank, inner, bias, "column"),
                Matrix("b_proj", h, s.num_heads, bias, "column"), Matrix("g_a_proj", h, rank, bias, "replicated"),
                Matrix("g_b_proj", rank, inner, bias, "column"), out)
    in_width = inner + s.conv_dim + s.num_heads  # z, (x, B, C), dt
    return Matrix("in_proj", h, in_width, bias, "column"), out


def ssm_extras(card: ModelCard) -> int:
    """Parameters of one mixer outside its projections: the depthwise conv1d (conv_dim x d_conv, + conv_dim bias),
    A_log and D (Mamba-1: I x N and I, Jamba's dt/B/C norms; Mamba-2: one per head, plus dt_bias), Mamba-2's gated
    RMSNorm of I (unless Falcon-H1 turns it off); Gated DeltaNet's dt_bias, A_log and norm of P; KDA's dt_bias (I),
    A_log (H) and norm of P; short conv: none."""
    s = card.ssm
    if s.kind == "lightning":  # its RMSNorm of I; no conv
        return s.intermediate_size
    conv = s.conv_dim * s.d_conv + (s.conv_dim if s.conv_bias else 0)
    if s.kind == "mamba":
        norms = s.dt_rank + 2 * s.d_state if s.dt_bc_norms else 0
        return conv + s.intermediate_size * s.d_state + s.intermediate_size + norms
    if s.kind == "gated_deltanet":
        return conv + 2 * s.num_heads + s.head_dim
    if s.kind == "kda":  # dt_bias per channel, A_log per head, the gated norm of P
        return conv + s.intermediate_size + s.num_heads + s.head_dim
    if s.kind == "short_conv":
        return conv
    if s.kind == "rglru":  # recurrent_param, and the input and recurrent gates: block-diagonal weights plus biases
        return conv + s.intermediate_size + 2 * (s.intermediate_size ** 2 // s.num_heads + s.intermediate_size)
    return conv + 3 * s.num_heads + (s.intermediate_size if s.gated_norm else 0)


def ssm_params(card: ModelCard) -> int:
    """All parameters of one state-space mixer."""
    return total(ssm_matrices(card)) + ssm_extras(card)


def extra_groups(n_groups: int, tp: int) -> int:
    """vLLM MambaStateShapeCalculator.extra_groups_for_head_shards (SGLang mamba_utils.py the same): 0 when tp divides
    the groups, else tp - n_groups (the one group is replicated so every head shard keeps its B and C)."""
    return 0 if n_groups % tp == 0 else tp - n_groups


def conv_channels(card: ModelCard, tp: int) -> int:
    """Conv-state channels one TP rank holds: the conv1d is ColumnParallelLinear over its channels (vLLM MambaMixer,
    MambaMixer2, GatedDeltaNet, ShortConv); Mamba-2's groups are first extended by ``extra_groups``
    (mamba_utils.py mamba2_state_shape: divide(intermediate + 2 (G + extra) N, tp))."""
    s = card.ssm
    if s.kind in ("mamba2", "gated_deltanet"):
        return (s.intermediate_size + 2 * (s.n_groups + extra_groups(s.n_groups, tp)) * s.d_state) // tp
    return s.conv_dim // tp


def check_state_tp(card: ModelCard, tp: int) -> str | None:
    """vLLM's reason to refuse tensor parallelism ``tp`` for the card's state mixer, or None (the divide() asserts of
    mamba_mixer.py, mamba_mixer2.py, qwen3_next.py GatedDeltaNet, lfm2.py ShortConv, minimax_text_01.py; KDA:
    layers/kda.py KimiDeltaAttention ``assert self.num_heads % self.tp_size == 0`` and kda_state_shape's
    divide(num_heads, tp), which also makes every heads x head_dim projection and conv divisible)."""
    s = card.ssm
    if tp == 1:
        return None
    if s.kind == "rglru":
        return "RecurrentGemma's RG-LRU block: vLLM V1 has no RecurrentGemma model; tensor parallelism is not modelled"
    if s.kind in ("mamba2", "gated_deltanet", "lightning", "kda") and s.num_heads % tp:
        return f"ssm num_heads {s.num_heads} is not divisible by tensor parallel size {tp} (Tensor parallel world " \
               "size must divide num heads)"
    if s.kind == "mamba2" and s.n_groups % tp and s.n_groups != 1:
        return f"ssm n_groups {s.n_groups}: if tensor parallel world size {tp} does not divide num_groups, then " \
               "num_groups must equal 1 (MambaMixer2)"
    if s.kind == "gated_deltanet" and s.n_groups % tp:
        return f"linear_num_key_heads {s.n_groups} is not divisible by tensor parallel size {tp} (GatedDeltaNet divide())"
    if s.kind in ("mamba", "short_conv") and s.intermediate_size % tp:
        return f"ssm intermediate_size {s.intermediate_size} is not divisible by tensor parallel size {tp} (divide())"
    return None


def ssm_rank_params(card: ModelCard, tp: int) -> int:
    """Parameters of one state mixer on one of ``tp`` ranks, as vLLM builds it: in/x/dt projections column- or
    row-parallel by their Matrix rule (MambaMixer: in_proj and dt_proj column, x_proj and out_proj row; MambaMixer2:
    in_proj column with the groups extended; GatedDeltaNet in_proj_qkvz / in_proj_ba column; ShortConv in_proj
    column), the conv1d split by channels (ColumnParallelLinear), A_log / D / dt_bias split with the heads or channels
    (sharded weight loaders), Mamba-2's gated norm sharded (Mixer2RMSNormGated, intermediate / tp), MiniMax's norm
    sharded (MiniMaxText01RMSNormTP); replicated: Jamba's dt/B/C norms and Gated DeltaNet's per-head norm (head_dim).
    KDA (vLLM layers/kda.py KimiDeltaAttention): q/k/v_proj, f_b_proj, g_b_proj and b_proj ColumnParallelLinear,
    f_a_proj and g_a_proj ReplicatedLinear, o_proj RowParallelLinear (the Matrix rules of ssm_matrices); the q, k
    and v conv1d ColumnParallelLinear over their channels (3 x I / tp, no bias); dt_bias sharded_weight_loader(0)
    (I / tp), A_log sharded_weight_loader(2) (H / tp); the o_norm FusedRMSNormGated(head_dim) replicated."""
    s = card.ssm
    if tp == 1:
        return ssm_params(card)
    h, inner, heads = card.hidden_size, s.intermediate_size, s.num_heads or 0
    shards = sum(m.shard(tp).params for m in ssm_matrices(card) if not (s.kind == "mamba2" and m.name == "in_proj"))
    conv = conv_channels(card, tp)
    conv_params = conv * s.d_conv + (conv if s.conv_bias else 0) if s.has_conv else 0
    if s.kind == "mamba2":  # z, x (I), B, C (extended groups), dt (H): every part split over tp
        width = (2 * inner + 2 * (s.n_groups + extra_groups(s.n_groups, tp)) * s.d_state + heads) // tp
        shards += h * width + (width if s.proj_bias else 0)
        return shards + conv_params + 3 * heads // tp + (inner // tp if s.gated_norm else 0)
    if s.kind == "mamba":
        norms = s.dt_rank + 2 * s.d_state if s.dt_bc_norms else 0
        return shards + conv_params + (inner * s.d_state + inner) // tp + norms
    if s.kind == "gated_deltanet":
        return shards + conv_params + 2 * heads // tp + s.head_dim
    if s.kind == "lightning":
        return shards + inner // tp
    if s.kind == "kda":
        return shards + conv_params + inner // tp + heads // tp + s.head_dim
    return shards + conv_params  # short_conv (rglru is refused above tp 1)
