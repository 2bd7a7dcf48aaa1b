r"""Matmul FLOPs of one state-space / linear-attention mixer (a card's ``ssm`` block), per step, whole batch.

The convention of kvplan.cost.flops: 2 x m x n x k for every matmul (mm, addmm, bmm, baddbmm: einsums run as bmm)
and, for the depthwise conv1d, 2 x outputs x channels x d_conv (torch's ``conv_flop_count`` with one input channel
per group); elementwise work (the discretization exp(dt A), the state decay and update, gates, norms, activations,
``torch.linalg.solve_triangular``) counts 0, as softmax does for attention. Three parts per mixer:

- projections: the mixer's nn.Linear weights (kvplan.cost.ssm.ssm_matrices) once per new token; RG-LRU adds its two
  block-diagonal gates (``torch.baddbmm``, heads x (I/H)^2 per token).
- conv: the causal depthwise conv1d over conv_dim channels. transformers' torch fallbacks (``causal_conv1d_fn``,
  modeling_mamba.py / modeling_mamba2.py / Qwen3-Next / LFM2 / Kimi-Linear / RecurrentGemma) pad by d_conv - 1 and
  slice, so a prefill of L tokens computes L + d_conv - 1 outputs; the cache's ``update_conv_state`` first left-pads
  a prompt shorter than d_conv to d_conv inputs (every family but RecurrentGemma, whose states live on its modules),
  so those compute max(L, d_conv) + d_conv - 1; a decode step (``causal_conv1d_update``) convolves its
  d_conv cached inputs plus the new one: 2 outputs, of which it keeps the last; RecurrentGemma decodes, and prefills
  a 1-token prompt (its block branches on ``position_ids.shape[1] != 1``), with an elementwise multiply-sum (0). The ``causal_conv1d`` kernels vLLM and an ideal engine run compute the L (decode: 1)
  outputs needed.
- scan: the recurrence's contractions, as the reference torch paths run them (the same products the mamba_ssm, FLA
  and vLLM Triton kernels tile):

  - Mamba-1 (``mamba_selective_scan`` / ``selective_state_update``): y_t = C_t h_t, one (I x N)(N) product per token:
    2 I N (arXiv:2312.00752 alg. 2).
  - Mamba-2 SSD (``mamba2_chunk_scan``, arXiv:2405.21060 section 6, "ssd_minimal"): the prompt padded to c = ceil(L/Q)
    chunks of Q = chunk_size; per chunk and head C B^T (2 Q^2 N), its masked product with X (2 Q^2 P), the chunk state
    B^T X (2 Q P N) and the state's output C S (2 Q P N); between chunks transformers contracts the (c+1)^2 decay
    matrix with every chunk state (2 (c+1)^2 P N per head), where the kernels pass states on elementwise
    (``_state_passing_fwd``: 0). Decode (``selective_state_update``): C h, 2 P N per head.
  - Gated DeltaNet (``torch_chunk_gated_delta_rule``, arXiv:2412.06464; chunks of 64, FLA's BT): per chunk and value
    head K_beta K^T and Q K^T (2 x 2 Q^2 N), the old state read by the decayed keys and by the queries (2 x 2 Q N P),
    the intra-chunk attention on the new values (2 Q^2 P) and the state update K^T V (2 N Q P). Decode
    (``torch_recurrent_gated_delta_rule``) is elementwise: 0.
  - lightning (``MiniMaxLightningAttention``, arXiv:2501.08313): blocks of chunk_size (MiniMax's block_size, the last
    one partial, not padded); per block of s tokens and head Q K^T and its product with V (2 x 2 s^2 D), the inter
    block Q (K^T V) (2 s D^2) and the state update K^T V (2 s D^2). Decode: K^T V and Q S, 2 x 2 D^2 per head.
  - KDA (Kimi Delta Attention, ``chunk_kimi_delta_attention``, modeling_kimi_linear.py; FLA ``chunk_kda``): the
    prompt padded to chunks of 64; per chunk and head of width D the ``@`` products attn @ v_beta and
    attn @ (k_beta e^g) (2 x 2 Q^2 D), the old state read by the decayed queries and by k_cumdecay (2 x 2 Q D^2), the
    intra-chunk attention on the new values (2 Q^2 D) and the state update (2 Q D^2): 6 Q^2 D + 6 Q D^2. Its
    per-channel decay makes the K K^T and Q K^T scores elementwise multiply-sums (``(a * b * decay).sum(-1)``,
    uncounted), as is the triangular solve loop. Decode (``recurrent_kimi_delta_attention``): elementwise, 0.
  - short conv (LFM2) and RG-LRU (RecurrentGemma ``_rnn_scan``): elementwise recurrences, 0.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.cost.shapes import total
from kvplan.cost.ssm import ssm_matrices
from kvplan.model.card import ModelCard
from kvplan.model.ssm import SSM

GDN_CHUNK = 64  # torch_chunk_gated_delta_rule(chunk_size=64); FLA chunk_gated_delta_rule's BT = 64
KDA_CHUNK = 64  # chunk_kimi_delta_attention(chunk_size=64); FLA chunk_kda's BT = 64


@dataclass(frozen=True)
class MixerFlops:
    """FLOPs of one state mixer for one step of the whole batch."""

    projections: int
    conv: int
    scan: int

    @property
    def total(self) -> int:
        return self.projections + self.conv + self.scan


def mixer_flops(card: ModelCard, *, batch: int, tokens: int, decode: bool, transformers: bool) -> MixerFlops:
    """One state mixer: a prefill of ``tokens`` new tokens per sequence from an empty state (``decode`` False) or one
    decode step (``tokens`` 1) on a held state; ``transformers``: transformers' torch paths, else the kernels."""
    s = card.ssm
    return MixerFlops(projections=projection_flops(card, batch * tokens),
                      conv=conv_flops(s, batch, tokens, decode, transformers),
                      scan=decode_scan_flops(s, batch) if decode else prefill_scan_flops(s, batch, tokens, transformers))


def projection_flops(card: ModelCard, tokens: int) -> int:
    """The mixer's linears on ``tokens`` tokens (biases: 0, as addmm counts); RG-LRU's input and recurrent gates are
    per-head (I/H x I/H) blocks (``torch.baddbmm``, modeling_recurrent_gemma.py RecurrentGemmaRglru)."""
    s = card.ssm
    gates = 2 * s.intermediate_size * (s.intermediate_size // s.num_heads) if s.kind == "rglru" else 0
    return 2 * tokens * (total(ssm_matrices(card), "elems") + gates)


def conv_flops(s: SSM, batch: int, tokens: int, decode: bool, transformers: bool) -> int:
    """The depthwise causal conv1d: 2 x outputs x conv_dim x d_conv per sequence (module docstring: which outputs)."""
    if not s.has_conv:
        return 0
    if not transformers:
        outputs = tokens
    elif s.kind == "rglru":  # RecurrentGemmaRecurrentBlock: position_ids of length 1 (a decode step or a 1-token
        # prefill) take torch.sum(conv_state * weight), elementwise; longer prefills the padded nn.Conv1d
        outputs = 0 if decode or tokens == 1 else tokens + s.d_conv - 1
    elif decode:
        outputs = 2  # causal_conv1d_update's F.conv1d over the d_conv cached inputs plus the new one
    else:  # the cache's update_conv_state left-pads a prompt shorter than d_conv to d_conv inputs
        outputs = max(tokens, s.d_conv) + s.d_conv - 1
    return 2 * batch * outputs * s.conv_dim * s.d_conv


def prefill_scan_flops(s: SSM, batch: int, tokens: int, transformers: bool) -> int:
    """The scan over a prompt of ``tokens`` tokens per sequence from an empty state (module docstring)."""
    if s.kind == "mamba":
        return 2 * batch * tokens * s.intermediate_size * s.d_state
    if s.kind == "mamba2":
        return batch * s.num_heads * ssd_flops(tokens, s.chunk_size, s.head_dim, s.d_state, transformers)
    if s.kind == "gated_deltanet":
        return batch * s.num_heads * gated_delta_flops(tokens, GDN_CHUNK, s.d_state, s.head_dim)
    if s.kind == "lightning":
        return batch * s.num_heads * lightning_flops(tokens, s.chunk_size, s.head_dim)
    if s.kind == "kda":
        return batch * s.num_heads * kda_flops(tokens, KDA_CHUNK, s.head_dim)
    return 0  # short_conv, rglru: elementwise


def decode_scan_flops(s: SSM, batch: int) -> int:
    """One recurrent step per sequence (module docstring)."""
    if s.kind == "mamba":
        return 2 * batch * s.intermediate_size * s.d_state
    if s.kind == "mamba2":
        return 2 * batch * s.num_heads * s.head_dim * s.d_state
    if s.kind == "lightning":
        return 4 * batch * s.num_heads * s.head_dim * s.head_dim
    return 0  # gated_deltanet, kda, short_conv, rglru: elementwise


def ssd_flops(tokens: int, chunk: int, p: int, n: int, transformers: bool) -> int:
    """Mamba-2 SSD over ``tokens`` per head, padded to whole chunks (transformers mamba2_chunk_scan's einsums)."""
    c = -(-tokens // chunk)
    intra = c * (2 * chunk * chunk * n + 2 * chunk * chunk * p + 2 * 2 * chunk * p * n)
    passing = 2 * (c + 1) * (c + 1) * p * n if transformers else 0
    return intra + passing


def gated_delta_flops(tokens: int, chunk: int, n: int, p: int) -> int:
    """Gated DeltaNet chunked over whole chunks per value head (key width n, value width p)."""
    c = -(-tokens // chunk)
    return c * (2 * 2 * chunk * chunk * n + 3 * 2 * chunk * n * p + 2 * chunk * chunk * p)


def kda_flops(tokens: int, chunk: int, d: int) -> int:
    """KDA chunked over whole chunks per head of width d (keys and values alike): the ``@`` products only."""
    c = -(-tokens // chunk)
    return c * (3 * 2 * chunk * chunk * d + 3 * 2 * chunk * d * d)


def lightning_flops(tokens: int, block: int, d: int) -> int:
    """Lightning attention per head over blocks of ``block`` tokens, the last one partial."""
    full, rest = divmod(tokens, block)
    return sum(n * (4 * s * s * d + 4 * s * d * d) for s, n in ((block, full), (rest, 1)))
