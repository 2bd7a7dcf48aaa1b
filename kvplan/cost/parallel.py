"""What one GPU holds under tensor (x pipeline, x data) parallelism, as vLLM V1 shards a model.

Pure arithmetic over a card, exact ints. The rules (vLLM 0.33 paths, inside the ``vllm`` package):

- TP splits each weight matrix by its ``tp`` rule (kvplan.cost.shapes.Matrix): column-parallel ``n_out / tp``
  (bias split), row-parallel ``n_in / tp`` (bias full on every rank), replicated in full
  (``model_executor/layers/linear.py``). K/V projections hold ``max(1, kv_heads // tp)`` heads: when tp exceeds the
  KV heads each head is replicated ``tp / kv_heads`` times (``QKVParallelLinear``).
- The vocabulary is padded to a multiple of 64, then split evenly (``vocab_parallel_embedding.py: pad_vocab_size``).
- PP gives each stage ``L // pp`` layers; the remainder adds one each to the 2nd-last, 3rd-last, ... stage, never
  the last (``distributed/utils.py: get_pp_indices``). The embedding lives on the first stage (and on the last one
  too when tied), the LM head and final norm on the last stage (``llama.py``); the modules of
  ``serving_vllm.PP_VOCAB_EVERY_STAGE`` (Qwen3-MoE, Mixtral, ...) build the embedding and/or head on every stage.
- MLA latents are not split by TP: every rank caches the full ``kv_lora_rank + qk_rope_head_dim`` per token and layer
  (``ModelConfig.get_num_kv_heads`` returns 1 for MLA).
- State mixers (Mamba-1/2, Gated DeltaNet, short conv, lightning): their weights split as vLLM's MambaMixer /
  MambaMixer2 / GatedDeltaNet / ShortConv build them (kvplan.cost.ssm.ssm_rank_params), their per-sequence states
  with the shapes of one rank (``layers/mamba/mamba_utils.py MambaStateShapeCalculator``: heads and conv channels
  split, Mamba-2's single group replicated when tp does not divide it).
- Shared blocks (Zamba2, ``models/zamba2.py``): each block's weights once per rank, split as its layers are
  (kvplan.cost.shared.shared_rank_params); every hybrid layer's own Linear(h, h) replicated, its adapters split; one
  attention K/V per invocation; no pipeline parallelism (Zamba2ForCausalLM is not SupportsPP).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache, partial

from kvplan.cost.engines import IDEAL_RULES, Engine, as_rules
from kvplan.cost.kvspec import KVLayerSpec, decoder_layer_specs, layer_specs, state_specs, states_dtype
from kvplan.cost.params import attention_extras, norm_params
from kvplan.cost.quant import QuantBytes, matrix_bytes
from kvplan.cost.shared import shared_rank_params, shared_tp_reason
from kvplan.cost.ssm import check_state_tp, ssm_rank_params
from kvplan.cost.vision import MROPE_CACHE_FACTOR, rope_cache_positions, tp_reason as vision_tp_reason, vision_params
from kvplan.cost.shapes import (Matrix, attention_matrices, ffn_matrices, fused, kv_heads_per_rank,
                                router_matrices)
from kvplan.errors import KvplanError, Refused
from kvplan.model.card import ModelCard
from kvplan.model.dtypes import DType
from kvplan.units import cdiv

Sized = int | QuantBytes  # what a measure returns for a matrix: its parameters, or its quantized bytes
Measure = Callable[..., Sized]
DEFAULT_VOCAB_PADDING = 64  # vllm/model_executor/layers/vocab_parallel_embedding.py DEFAULT_VOCAB_PADDING_SIZE


@dataclass(frozen=True)
class Layout:
    """Tensor x pipeline (x data) parallel: tp x pp GPUs per replica, dp replicas; ``expert_parallel``: vLLM's
    --enable-expert-parallel (routed experts distributed over dp x tp ranks instead of split)."""

    tp: int = 1
    pp: int = 1
    dp: int = 1
    expert_parallel: bool = False

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.dp


def pp_partition(num_layers: int, pp: int) -> list[range]:
    """Decoder layers of each pipeline stage (vllm/distributed/utils.py get_pp_indices): [L//pp]*pp, then
    partitions[-i] += 1 for i in 2..r+1 (r = L % pp). 5 layers over 2 stages: [0..3), [3..5)."""
    if not 1 <= pp <= num_layers:
        raise Refused(f"--pp: {pp} pipeline stages need 1..{num_layers} (the model's layers)")
    sizes = [num_layers // pp] * pp
    for i in range(2, num_layers % pp + 2):
        sizes[-i] += 1
    return stage_ranges(sizes)


def custom_pp_partition(text: str | list[int] | tuple[int, ...], num_layers: int, pp: int) -> tuple[int, ...]:
    """A custom pipeline split, as vLLM reads ``VLLM_PP_LAYER_PARTITION`` (vllm/distributed/utils.py get_pp_indices,
    0.10 - 0.33): ``[int(x) for x in text.split(",")]``, one count per stage (``len(partitions) == pp_size``) summing
    to the model's decoder layers (``sum(partitions) == num_hidden_layers``); stage r holds layers
    [sum(p[:r]), sum(p[:r + 1])). Refused with vLLM's reason otherwise."""
    flag = "--pp-layer-partition"
    try:
        sizes = [int(x) for x in text.split(",")] if isinstance(text, str) else [int(x) for x in text]
    except (TypeError, ValueError):
        raise KvplanError(f"{flag}: comma-separated layer counts per stage (VLLM_PP_LAYER_PARTITION, e.g. 16,32), "
                          f"got {str(text)[:40]!r}") from None
    if len(sizes) != pp:
        raise KvplanError(f"{flag}: {len(sizes)} stage sizes for --pp {pp} (vLLM: len(partitions) does not match "
                          "pp_size)")
    if sum(sizes) != num_layers or min(sizes) < 1:
        raise KvplanError(f"{flag}: the stage sizes {','.join(map(str, sizes))} must be positive and sum to the "
                          f"model's {num_layers} layers (vLLM: sum(partitions) does not match num_hidden_layers)")
    return tuple(sizes)


def stage_ranges(sizes: list[int]) -> list[range]:
    """Consecutive layer ranges of the given stage sizes."""
    starts = [sum(sizes[:i]) for i in range(len(sizes))]
    return [range(s, s + n) for s, n in zip(starts, sizes)]


def pad_vocab(vocab_size: int, padding: int = DEFAULT_VOCAB_PADDING) -> int:
    """vocab_parallel_embedding.py pad_vocab_size: ceil(vocab / padding) * padding."""
    return cdiv(vocab_size, padding) * padding


def check_layout(card: ModelCard, layout: Layout, *, vocab_padding: int = DEFAULT_VOCAB_PADDING) -> None:
    """KvplanError naming --tp/--pp/--dp for a value that is no layout; Refused with vLLM's reason when vLLM would
    refuse the layout (the search skips those)."""
    for flag, value in (("--tp", layout.tp), ("--pp", layout.pp), ("--dp", layout.dp)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise KvplanError(f"{flag}: must be a positive integer, got {value!r}")
    tp = layout.tp
    if (tp > 1 or layout.pp > 1) and card.architecture != "decoder-only":
        raise Refused(f"--tp/--pp: tensor and pipeline parallelism are modelled for decoder-only models; "
                          f"{card.name} is {card.architecture}")
    pp_partition(card.num_layers, layout.pp)
    reason = shared_tp_reason(card, tp, layout.pp) if card.shared_blocks else None
    if reason:
        raise Refused(reason)
    reason = check_state_tp(card, tp) if card.ssm else vision_tp_reason(card, tp)
    if reason:
        raise Refused(f"--tp: {reason}")
    if card.attention_layers and card.num_heads % tp:  # vllm/config/model.py verify_with_parallel_config
        raise Refused(f"--tp: total number of attention heads ({card.num_heads}) must be divisible by tensor "
                      f"parallel size ({tp}): the serving engines shard heads evenly (vLLM "
                      "verify_with_parallel_config)")
    kv = card.num_kv_heads
    if card.attention_layers and card.mla is None and (kv % tp if tp < kv else tp % kv):  # linear.py QKVParallelLinear divide()
        a, b = (kv, tp) if tp < kv else (tp, kv)
        raise Refused(f"--tp: {a} is not divisible by {b}: vLLM splits {kv} KV heads over tp {tp} (tp < kv) or "
                          "replicates each head tp / kv times (tp >= kv) (QKVParallelLinear)")
    for what, size in _split_sizes(card, vocab_padding):
        if size % tp:  # linear.py / fused_moe divide(): AssertionError "{a} is not divisible by {b}"
            raise Refused(f"--tp: {what} {size} is not divisible by tensor parallel size {tp} (vLLM divide())")
    if card.moe and not layout.expert_parallel and card.moe.expert_ffn_size % moe_tp(layout):
        raise Refused(f"--dp: moe_intermediate_size {card.moe.expert_ffn_size} is not divisible by dp x tp = "
                          f"{moe_tp(layout)}, the MoE tensor-parallel group (vLLM fused_moe/config.py)")


def moe_tp(layout: Layout) -> int:
    """fused_moe/config.py FusedMoEParallelConfig.make: without expert parallelism the routed experts are split over
    the flattened dp x tp group (each DP replica holds a 1/dp slice of every expert)."""
    return 1 if layout.expert_parallel else layout.tp * layout.dp


def local_experts(num_experts: int, ep_size: int, ep_rank: int) -> int:
    """expert_map_manager.py determine_expert_map: E // ep, plus one on the first E % ep ranks."""
    return num_experts // ep_size + (1 if ep_rank < num_experts % ep_size else 0)


@lru_cache(maxsize=4096)  # cards are frozen and hashable: once per card, not once per layout a search checks
def _split_sizes(card: ModelCard, vocab_padding: int) -> tuple[tuple[str, int], ...]:
    sizes = [("padded vocabulary", pad_vocab(card.vocab_size, vocab_padding))]
    has_dense = any(card.has_mlp(i) and not card.is_moe_layer(i) for i in range(card.num_layers))
    if has_dense:
        sizes.append(("intermediate_size", card.ffn_size))
    if card.moe:
        sizes.append(("moe_intermediate_size", card.moe.expert_ffn_size))
        if card.moe.num_shared_experts:
            sizes.append(("shared_expert_intermediate_size", card.moe.shared_ffn))
    return tuple(sizes)


@dataclass(frozen=True)
class RankWeights:
    tp_rank: int
    pp_rank: int
    layers: range  # decoder layers on this pipeline stage
    params: int  # parameter elements held by this rank (shards + replicated tensors)
    bytes: int  # params in the weight dtype (+ fp8 KV scales of its layers)
    buffers_bytes: int  # rotary cos/sin cache (vLLM get_rope)
    breakdown: dict[str, int] = field(default_factory=dict)  # embedding, lm_head, attention, mlp, norms, other
    quant: QuantBytes = field(default_factory=QuantBytes)  # the quantized linears among params (card.quantization)


def shard_params(m: Matrix, tp: int, kv_heads: int | None = None, head_dim: int = 0) -> int:
    """Elements of ``m`` one TP rank holds (linear.py): column n_out/tp (K/V: kv_heads_per_rank x head_dim), row
    n_in/tp with the bias in full, replicated everything."""
    return m.shard(tp, kv_heads, head_dim).params


def _attention_rank(card: ModelCard, tp: int) -> int:
    """One attention layer on one rank: its sharded projections plus replicated MLA / QK norms."""
    return _projections_rank(card, tp) + attention_extras(card, tp)  # MLA/QK norms replicated (deepseek_v2.py)


def _projections_rank(card: ModelCard, tp: int, measure: Measure = shard_params) -> Sized:
    return sum(measure(m, tp, card.num_kv_heads, card.head_dim) for m in attention_matrices(card))


def _mlp_rank(card: ModelCard, layer: int, tp: int, expert_tp: int | None = None, experts: int | None = None,
              measure: Measure = shard_params) -> Sized:
    """One FFN on one rank; MoE without expert parallelism: every expert on every rank, its intermediate /
    ``expert_tp`` (moe_tp: dp x tp; fused_moe/config.py intermediate_size_per_partition), shared experts / tp,
    the router replicated. With expert parallelism: ``experts`` whole experts (expert_tp 1)."""
    if not card.is_moe_layer(layer):
        return sum(measure(m, tp) for m in ffn_matrices(card, card.ffn_size))
    moe = card.moe
    expert = sum(measure(m, expert_tp or tp) for m in ffn_matrices(card, moe.expert_ffn_size))
    # none: not measured (a shape check of absent shared experts must not refuse, e.g. fp8 blocks under EP)
    shared = sum(measure(m, tp) for m in ffn_matrices(card, moe.shared_ffn)) if moe.num_shared_experts else 0
    router = sum(measure(m, tp) for m in router_matrices(card))
    n = moe.num_experts if experts is None else experts
    return router + n * expert + moe.num_shared_experts * shared


def holds_vocab(card: ModelCard, pp: int, pp_rank: int, vocab_every_stage: frozenset[str] = frozenset()
                ) -> tuple[bool, bool]:
    """(the embedding, the LM head) on stage ``pp_rank``: llama.py builds embed_tokens on the first stage, and on the
    last too when tied (lm_head aliases it: no bytes of its own), lm_head on the last; ``vocab_every_stage`` names
    what the engine's module builds on every stage (Runtime.vocab_every_stage)."""
    first, last = pp_rank == 0, pp_rank == pp - 1
    return (first or (card.tie_embeddings and last) or "embedding" in vocab_every_stage,
            last or "lm_head" in vocab_every_stage)


def rank_breakdown(card: ModelCard, layout: Layout, pp_rank: int, *, vocab_padding: int = DEFAULT_VOCAB_PADDING,
                   stages: list[range] | None = None, tp_rank: int = 0,
                   vocab_every_stage: frozenset[str] = frozenset()) -> dict[str, int]:
    """Parameters by component on any TP rank of stage ``pp_rank`` (all TP ranks of a stage hold the same shapes).
    ``stages``: another engine's layer split (default vLLM's pp_partition). ``vocab_every_stage``: "embedding" and/or
    "lm_head" where the engine's module for this architecture builds them on every stage (Runtime.vocab_every_stage;
    vLLM: serving_vllm.PP_VOCAB_EVERY_STAGE)."""
    tp, h = layout.tp, card.hidden_size
    layers = (stages or pp_partition(card.num_layers, layout.pp))[pp_rank]
    first, last = pp_rank == 0, pp_rank == layout.pp - 1
    rows = pad_vocab(card.vocab_size, vocab_padding) // tp
    holds_embedding, holds_lm_head = holds_vocab(card, layout.pp, pp_rank, vocab_every_stage)
    lm_head = (0 if card.tie_embeddings else rows * h) + (rows if card.lm_head_bias else 0)
    norms = (len(layers) * card.norms_per_layer + (card.final_norm if last else 0)
             + (card.embedding_norm if first else 0))
    ssm = {"ssm": _state_layers(card, layers) * ssm_rank_params(card, tp)} if card.ssm else {}  # state mixers
    shared = shared_rank_params(card, tp)  # one stage only (check_layout): the blocks and every invocation
    own_attention = 0 if card.shared_blocks else _attention_layers(card, layers)  # hybrid layers invoke a block
    # the vision tower and projector: on every rank of every stage (llava.py & co. build them in __init__), split
    # by TP as vLLM builds them (kvplan.cost.vision; --mm-encoder-tp-mode data: runtimes/vllm_mm.py)
    vision = {"vision": vision_params(card, hf=False, tp=tp).total} if card.vision else {}
    return {
        **ssm, **vision,
        "embedding": rows * h if holds_embedding else 0,
        "attention": own_attention * _attention_rank(card, tp) + shared.attention,
        "mlp": _mlp_stage(card, layers, layout, tp_rank) + shared.mlp,
        "norms": norms * norm_params(card, h) + shared.norms,
        "lm_head": lm_head if holds_lm_head else 0,
        # learned position table (+ token types), replicated over TP; encoder extras are refused above
        "other": (_positions(card) + card.type_vocab_size * h if first else 0) + shared.other,
    }


def _positions(card: ModelCard) -> int:
    if card.position != "learned":
        return 0
    return (card.max_position_embeddings + card.learned_position_offset) * card.hidden_size


def _mlp_stage(card: ModelCard, layers: range, layout: Layout, tp_rank: int, measure: Measure = shard_params) -> Sized:
    """The FFNs of a stage: dense and MoE layers each sized once (EP: ep_rank = tp_rank on the first DP replica)."""
    tp, experts = layout.tp, None
    if card.moe and layout.expert_parallel:
        experts = local_experts(card.moe.num_experts, layout.tp * layout.dp, tp_rank)
    moe = sum(1 for i in layers if card.is_moe_layer(i))
    dense = sum(1 for i in layers if card.has_mlp(i)) - moe
    first_moe = next((i for i in layers if card.is_moe_layer(i)), None)
    first_dense = next((i for i in layers if card.has_mlp(i) and not card.is_moe_layer(i)), None)
    return ((dense * _mlp_rank(card, first_dense, tp, measure=measure) if dense else 0)
            + (moe * _mlp_rank(card, first_moe, tp, moe_tp(layout), experts, measure) if moe else 0))


def layer_parameters(card: ModelCard, w_t: DType, layout: Layout, layer: int) -> tuple[tuple[int, bool], ...]:
    """(bytes, is a linear's weight or bias) of each parameter of decoder layer ``layer`` on TP rank 0, in the order
    vLLM's decoder layer registers them, which is what ``named_parameters()`` walks (llama.py
    ``LlamaDecoderLayer.__init__``, qwen2.py ``Qwen2DecoderLayer``, 0.17-0.33): ``self_attn`` (the fused qkv_proj
    weight, its bias, o_proj, the q/k norms), ``mlp`` (the fused gate_up_proj and down_proj; MoE: the router, the
    experts' w13 and w2 (FusedMoE, every local expert in one tensor), the shared experts), then the layer's norms
    (weight, LayerNorm's bias). The linears are the tensors kvplan.cost.allocator replays, in the same order. A
    16-bit layer of an attention decoder; the MoE order is Mixtral's (mixtral.py: gate, then experts)."""
    tp = layout.tp
    out: list[tuple[int, bool]] = []

    def add(matrices: tuple[Matrix, ...], split: int = tp, times: int = 1) -> None:
        for w, b in fused(matrices, lambda m: shard_bytes(card, w_t, m, split)):
            out.extend((times * x, True) for x in (w, b) if x)

    if card.mixer(layer) == "attention":
        add(attention_matrices(card))
        if extras := attention_extras(card, tp):
            out.append((w_t.data_bytes(extras), False))
    if card.has_mlp(layer) and card.is_moe_layer(layer):
        moe = card.moe
        experts = local_experts(moe.num_experts, tp * layout.dp, 0) if layout.expert_parallel else moe.num_experts
        add(router_matrices(card))
        add(ffn_matrices(card, moe.expert_ffn_size), moe_tp(layout), experts)
        if moe.num_shared_experts:
            add(ffn_matrices(card, moe.shared_ffn), times=moe.num_shared_experts)
    elif card.has_mlp(layer):
        add(ffn_matrices(card, card.ffn_size))
    per_norm = [card.hidden_size] * (2 if card.norm == "layernorm" else 1)  # weight (and bias)
    out.extend((w_t.data_bytes(n), False) for n in per_norm * card.norms_per_layer)
    return tuple(out)


def shard_bytes(card: ModelCard, w_t: DType, m: Matrix, tp: int) -> tuple[int, int]:
    """(weight bytes, bias bytes) of ``m`` on one of ``tp`` ranks."""
    s = m.shard(tp, card.num_kv_heads, card.head_dim)
    return w_t.data_bytes(s.elems), w_t.data_bytes(s.n_out) if s.bias else 0


def rank_quant(card: ModelCard, layout: Layout, pp_rank: int, *, stages: list[range] | None = None,
               tp_rank: int = 0) -> QuantBytes:
    """The quantized linears of stage ``pp_rank`` on TP rank ``tp_rank``, as vLLM loads them (kvplan.cost.quant):
    every shard keeps its scales and zero points; empty for an unquantized card."""
    if card.quantization is None:
        return QuantBytes()
    if card.shared_blocks is not None:
        raise KvplanError(f"quantization: per-rank bytes of quantized shared blocks are not modelled; {card.name} "
                          f"ships {card.quantization.label} weights")
    if card.ssm is not None:  # vLLM's mixers pass quant_config to their in/out projections; kvplan has no rule yet
        raise KvplanError(f"quantization: {card.name} has {card.state_layers} state-space layers, whose quantized "
                          "mixer projections kvplan does not model yet (their weights would be counted unquantized); "
                          "remove the card's quantization block to size it unquantized")
    if card.quantization.method == "mxfp4" and (card.moe is None or card.moe.first_dense_layers
                                                 or card.moe.num_shared_experts):
        raise KvplanError(f"quantization: mxfp4 is modelled for MoE models whose every FFN is routed experts "
                          f"(gpt-oss); {card.name} has dense or shared-expert FFNs")
    measure = partial(matrix_bytes, card.quantization)
    layers = (stages or pp_partition(card.num_layers, layout.pp))[pp_rank]
    return (_attention_layers(card, layers) * _projections_rank(card, layout.tp, measure)
            + _mlp_stage(card, layers, layout, tp_rank, measure))


def rope_caches(card: ModelCard, mrope_factor: int = MROPE_CACHE_FACTOR) -> tuple[int, ...]:
    """Positions of each rotary cos/sin cache vLLM builds for ``card``: get_rope keeps one per distinct (head_size,
    rotary_dim, max_position, base, is_neox_style, rope_scaling, dtype), shared by every layer asking for it
    (model_executor/layers/rotary_embedding.py ``get_rope`` / ``_ROPE_DICT``, 0.8.x; rotary_embedding/__init__.py in
    0.10+, the key then holding rope_parameters with rope_theta). The global layers' cache:

    - none, default, llama3: max_position_embeddings (``RotaryEmbedding._compute_cos_sin_cache``; llama3 changes
      only inv_freq), 4x for an M-RoPE decoder (kvplan.cost.vision.rope_cache_positions);
    - linear: max_position_embeddings x factor (``LinearScalingRotaryEmbedding._compute_cos_sin_cache``: "the
      maximum length after applying the rope scaling is self.max_position_embeddings * self.scaling_factor";
      unchanged from 0.8.x to linear_scaling_rope.py of 0.11+); dynamic the same
      (``DynamicNTKScalingRotaryEmbedding``);
    - yarn (DeepSeek's deepseek_yarn too): original_max_position_embeddings x factor (get_rope passes
      original_max_position; ``YaRNScalingRotaryEmbedding`` / ``DeepseekScalingRotaryEmbedding``
      ``torch.arange(self.max_position_embeddings * self.scaling_factor)``);
    - longrope: original_max_position_embeddings + max_position_embeddings (``Phi3LongRoPEScaledRotaryEmbedding``:
      its short and long caches concatenated).

    ``torch.arange`` of a float end holds ceil(end) positions. ``local_rope`` (Gemma 3) adds the sliding layers'
    unscaled cache of max_position_embeddings (gemma3.py ``Gemma3Attention``: base rope_local_base_freq,
    rope_scaling {"rope_type": "default"}, a different key). SGLang's get_rope and gemma3_causal.py build the same
    caches (srt/layers/rotary_embedding.py, adapted from vLLM 0.6.6), but an M-RoPE cache of max_position_embeddings
    (``mrope_factor`` 1: SGLang's rotary_embedding/mrope.py ``MRotaryEmbedding.__init__`` passes it to
    ``RotaryEmbedding.__init__`` unenlarged, 0.5.10.post1)."""
    positions, scaling = rope_cache_positions(card, mrope_factor), card.rope_scaling  # M-RoPE: x mrope_factor
    if scaling is None:
        scaled = positions
    elif scaling.rope_type == "longrope":
        scaled = scaling.original_max_position_embeddings + card.max_position_embeddings
    else:
        start = scaling.original_max_position_embeddings if scaling.rope_type == "yarn" else card.max_position_embeddings
        scaled = math.ceil(start * scaling.factor)
    return (scaled, card.max_position_embeddings) if card.local_rope else (scaled,)


def rope_buffer_bytes(card: ModelCard, dtype_bytes: int, mrope_factor: int = MROPE_CACHE_FACTOR) -> int:
    """vLLM rotary_embedding/base.py ``RotaryEmbedding.__init__``: each cache (rope_caches) is positions x rotary_dim
    in the model dtype (``cache.to(dtype)``, a non-persistent buffer); MLA: rotary_dim = qk_rope_head_dim."""
    if card.position != "rope":
        return 0
    return sum(rope_caches(card, mrope_factor)) * rotary_dim(card) * dtype_bytes


def rotary_dim(card: ModelCard) -> int:
    """The width of a rotary cos/sin cache row: MLA's qk_rope_head_dim, else the head dimension times the card's
    partial_rotary_factor, floored (``get_rope``: "if partial_rotary_factor < 1.0: rotary_dim = int(rotary_dim *
    partial_rotary_factor)", vLLM rotary_embedding/__init__.py 0.10+ and SGLang layers/rotary_embedding/factory.py
    0.5.10.post1; Qwen3-Next / Qwen3.5 pass rotary_dim=head_dim and factor 0.25: 256 -> 64)."""
    if card.mla:
        return card.mla.qk_rope_head_dim
    return int(card.head_dim * card.partial_rotary_factor)


def rank_weights(card: ModelCard, w_t: DType, layout: Layout, tp_rank: int, pp_rank: int, *,
                 vocab_padding: int = DEFAULT_VOCAB_PADDING, include_buffers: bool = True,
                 kv_t: DType | None = None, stages: list[range] | None = None,
                 vocab_every_stage: frozenset[str] = frozenset()) -> RankWeights:
    """What GPU (tp_rank, pp_rank) holds after loading: its shards, replicated tensors, buffers, and (``kv_t`` fp8)
    the per-layer K/V scales of its layers. Computed once per (card, dtypes, layout, rank, stages): the layout
    search asks for the same rank from many layouts."""
    return _rank_weights(card, w_t, layout, tp_rank, pp_rank, vocab_padding, include_buffers, kv_t,
                         None if stages is None else tuple(stages), frozenset(vocab_every_stage))


@lru_cache(maxsize=2048)
def _rank_weights(card: ModelCard, w_t: DType, layout: Layout, tp_rank: int, pp_rank: int, vocab_padding: int,
                  include_buffers: bool, kv_t: DType | None, stages: tuple[range, ...] | None,
                  vocab_every_stage: frozenset[str]) -> RankWeights:
    check_layout(card, layout, vocab_padding=vocab_padding)
    if not (0 <= tp_rank < layout.tp and 0 <= pp_rank < layout.pp):
        raise KvplanError(f"rank ({tp_rank}, {pp_rank}) is outside tp {layout.tp} x pp {layout.pp}")
    breakdown = rank_breakdown(card, layout, pp_rank, vocab_padding=vocab_padding, stages=stages, tp_rank=tp_rank,
                               vocab_every_stage=vocab_every_stage)
    layers = (stages or pp_partition(card.num_layers, layout.pp))[pp_rank]
    params = sum(breakdown.values())
    # fp8 KV: a fp32 k_scale and v_scale parameter per attention layer (vllm attention/layer.py), on its stage
    scales = 0
    if kv_t is not None:
        if card.ssm:  # states are not quantized: the scales are the attention layers'
            scales = kv_t.layer_scale_bytes * _attention_layers(card, layers)
        else:
            specs = rank_kv_specs(card, kv_t, IDEAL_RULES, layout, pp_rank, stages=stages)
            scales = kv_t.layer_scale_bytes * len(specs)
    buffers = rope_buffer_bytes(card, w_t.activation_bytes) if include_buffers else 0
    quant = rank_quant(card, layout, pp_rank, stages=stages, tp_rank=tp_rank)
    # quantized linears as stored (values, scales, zeros, g_idx), every other parameter in the weight dtype
    stored = quant.stored + w_t.data_bytes(params - quant.quantized_elems)
    return RankWeights(tp_rank, pp_rank, layers, params, stored + scales, buffers, breakdown, quant)


def rank_kv_specs(card: ModelCard, kv_t: DType, engine: Engine, layout: Layout, pp_rank: int, *,
                  stages: list[range] | None = None, state_t: DType | None = None) -> list[KVLayerSpec]:
    """The KV specs of stage ``pp_rank``'s layers with kv_heads_per_rank heads (MLA: the full latent on every rank),
    and each state layer's conv and SSM states with the shapes of one TP rank (kvplan.cost.kvspec.state_specs);
    ``state_t``: the states' dtype when it is not the KV dtype (vLLM's mamba_cache_dtype "auto" beside an fp8 KV
    cache: the model dtype)."""
    eng = as_rules(engine)
    if layout.tp == 1 and layout.pp == 1 and state_t is None:
        return list(layer_specs(card, kv_t, eng))
    return [sp for _, specs in rank_layer_specs(card, kv_t, eng, layout, pp_rank, stages=stages, state_t=state_t)
            for sp in specs]


def rank_layer_specs(card: ModelCard, kv_t: DType, engine: Engine, layout: Layout, pp_rank: int, *,
                     stages: list[range] | None = None,
                     state_t: DType | None = None) -> list[tuple[int, tuple[KVLayerSpec, ...]]]:
    """(decoder layer, its specs on one rank) for each layer of stage ``pp_rank``: attention K/V, then (state and
    hybrid layers) the conv and SSM states; an mlp layer caches nothing. The per-layer table of a (card, dtypes,
    layout, stage): built once, every sum over it (KV bytes, pages, groups) folds the same rows."""
    return list(_rank_layer_specs(card, kv_t, as_rules(engine).transformers, layout, pp_rank,
                                  None if stages is None else tuple(stages), state_t))


@lru_cache(maxsize=2048)
def _rank_layer_specs(card: ModelCard, kv_t: DType, transformers: bool, layout: Layout, pp_rank: int,
                      stages: tuple[range, ...] | None, state_t: DType | None
                      ) -> tuple[tuple[int, tuple[KVLayerSpec, ...]], ...]:
    check_layout(card, layout)
    heads = kv_heads_per_rank(card.cached_kv_heads(transformers), layout.tp)
    states = state_specs(card, state_t or states_dtype(card, kv_t), transformers, layout.tp) if card.ssm else ()
    layers = (stages or pp_partition(card.num_layers, layout.pp))[pp_rank]
    return tuple(decoder_layer_specs(card, kv_t, heads, states, layers))


def _attention_layers(card: ModelCard, layers: range) -> int:
    return sum(card.mixer(i) in ("attention", "hybrid") for i in layers)


def _state_layers(card: ModelCard, layers: range) -> int:
    return sum(card.mixer(i) in ("mamba", "hybrid") for i in layers)
