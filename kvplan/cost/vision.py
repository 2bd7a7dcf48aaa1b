"""A multimodal checkpoint's vision tower and projector (card.vision, kvplan.model.vision): parameters as
transformers and vLLM build them, what one tensor-parallel rank holds, and the encoder's part of vLLM's profile run.

Parameters: the weight matrices of one encoder block and of the projector are ``shapes.Matrix`` objects (their TP
rule as vLLM builds them), the rest (patch convolution, position table, class embedding, norms, LLaVA-NeXT's
image newline) are vectors held whole on every rank. vLLM (``vllm/model_executor/models/``): ``clip.py`` /
``siglip.py`` ``*Attention`` use ``QKVParallelLinear`` + ``RowParallelLinear`` and ``*MLP`` ``ColumnParallelLinear``
fc1 + ``RowParallelLinear`` fc2; ``pixtral.py`` ``PixtralHFAttention`` / ``PixtralHFMLP`` (``QKVParallelLinear``,
``MergedColumnParallelLinear`` gate_up, ``RowParallelLinear`` o / down); ``qwen2_5_vl.py`` ``Qwen2_5_VisionAttention``
/ ``Qwen2_5_VisionMLP`` / ``Qwen2_5_VisionPatchMerger`` (column then row); ``llava.py`` / ``mistral3.py``
``*MultiModalProjector`` (ColumnParallelLinear linear_1, RowParallelLinear linear_2); ``gemma3_mm.py``
``Gemma3MultiModalProjector`` (a plain ``nn.Parameter`` and a norm: replicated); ``siglip.py`` keeps its position
table in a ``VocabParallelEmbedding`` (rows padded to 64, split over TP). Every multimodal model builds its tower and
projector in ``__init__`` on every rank (``llava.py`` ``LlavaForConditionalGeneration.__init__``, ...), so
"Model loading took" counts them on every GPU. ``--mm-encoder-tp-mode data`` (models with
``supports_encoder_tp_data``, Qwen2.5-VL here) builds the tower with TP disabled: whole on every rank.

The profile run (``gpu_model_runner.py`` ``profile_run``, ``v1/core/encoder_cache_manager.py``
``compute_mm_encoder_budget``, ``multimodal/encoder_budget.py``): see ``encoder_budget``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from kvplan.cost.shapes import Matrix
from kvplan.model.card import ModelCard
from kvplan.model.vision import VisionTower
from kvplan.units import cdiv

POSITION_PADDING = 64  # vocab_parallel_embedding.py DEFAULT_VOCAB_PADDING_SIZE (SigLIP's position table)
# vLLM multimodal_config limit_per_prompt: items of each modality one prompt may carry when not given (V1: 999)
DEFAULT_LIMIT_PER_PROMPT = 999


def block_matrices(v: VisionTower) -> tuple[Matrix, ...]:
    """The linear layers of one encoder block with their TP rules."""
    h, f = v.hidden_size, v.ffn_size
    if v.kind in ("clip", "siglip"):
        return (Matrix("q_proj", h, h, True, "column"), Matrix("k_proj", h, h, True, "column"),
                Matrix("v_proj", h, h, True, "column"), Matrix("out_proj", h, h, True, "row"),
                Matrix("fc1", h, f, True, "column"), Matrix("fc2", f, h, True, "row"))
    if v.kind == "pixtral":
        return (Matrix("q_proj", h, h, False, "column"), Matrix("k_proj", h, h, False, "column"),
                Matrix("v_proj", h, h, False, "column"), Matrix("o_proj", h, h, False, "row"),
                Matrix("gate_proj", h, f, False, "column"), Matrix("up_proj", h, f, False, "column"),
                Matrix("down_proj", f, h, False, "row"))
    if v.kind == "llama4":  # mllama4.py Llama4VisionAttention (QKVParallelLinear, RowParallelLinear), Llama4VisionMLP
        return (Matrix("q_proj", h, h, True, "column"), Matrix("k_proj", h, h, True, "column"),
                Matrix("v_proj", h, h, True, "column"), Matrix("o_proj", h, h, True, "row"),
                Matrix("fc1", h, f, True, "column"), Matrix("fc2", f, h, True, "row"))
    if v.kind == "qwen3_vl":
        return (Matrix("qkv", h, 3 * h, True, "column"), Matrix("proj", h, h, True, "row"),
                Matrix("linear_fc1", h, f, True, "column"), Matrix("linear_fc2", f, h, True, "row"))
    return (Matrix("qkv", h, 3 * h, True, "column"), Matrix("proj", h, h, True, "row"),  # qwen2_5_vl
            Matrix("gate_proj", h, f, True, "column"), Matrix("up_proj", h, f, True, "column"),
            Matrix("down_proj", f, h, True, "row"))


def block_vectors(v: VisionTower) -> int:
    """The norms of one block: two LayerNorms (weight and bias) for CLIP, SigLIP and Qwen3-VL, two RMSNorms
    otherwise."""
    return 2 * v.hidden_size * (2 if v.kind in ("clip", "siglip", "qwen3_vl", "llama4") else 1)


def patches_per_side(v: VisionTower) -> int:
    return v.image_size // v.patch_size


def _embeddings(v: VisionTower, hf: bool, split_positions: bool = False) -> tuple[int, int]:
    """(parameters held whole, the position table split like a vocabulary: SigLIP's in vLLM, Qwen3-VL's with
    ``split_positions``) of the embeddings and the tower's own norms; ``hf``: as transformers builds it (every block,
    always the post-norm)."""
    h, c, p = v.hidden_size, v.num_channels, v.patch_size
    post = 2 * h if hf or not v.truncated else 0  # vLLM drops the post-LayerNorm of a truncated tower
    if v.kind == "clip":  # class_embedding, patch conv (no bias), positions (patches + CLS), pre- and post-LayerNorm
        return h + c * p * p * h + (patches_per_side(v) ** 2 + 1) * h + 2 * h + post, 0
    if v.kind == "siglip":  # patch conv with bias, position table (VocabParallelEmbedding in vLLM), post-LayerNorm
        return c * p * p * h + h + post, patches_per_side(v) ** 2 * h
    if v.kind == "llama4":  # class_embedding, positions (patches + CLS), layernorm_pre / _post; the patch Linear is
        return h + (patches_per_side(v) ** 2 + 1) * h + 4 * h, 0  # a column-parallel matrix (extra_matrices)
    if v.kind == "pixtral":  # patch_conv (no bias), ln_pre RMSNorm; 2-D RoPE, no table
        return c * p * p * h + h, 0
    if v.kind == "qwen3_vl":  # Conv3d with bias; pos_embed an nn.Embedding, whole on every rank (vLLM qwen3_vl.py)
        conv, table = c * v.temporal_patch_size * p * p * h + h, (v.num_position_embeddings or 0) * h
        return (conv, table) if split_positions else (conv + table, 0)
    return c * v.temporal_patch_size * p * p * h, 0  # qwen2_5_vl: Conv3d patch embedding without bias


def extra_matrices(v: VisionTower) -> tuple[Matrix, ...]:
    """Tower matrices outside the blocks: SigLIP's attention-pooling head (``vision_use_head``), its MLP (vLLM
    ``siglip.py`` ``SiglipMLP``, column fc1, row fc2; its ``nn.MultiheadAttention`` is in ``_head_vectors``), and
    Llama 4's patch embedding (``Llama4UnfoldConvolution.linear``, a ColumnParallelLinear in vLLM ``mllama4.py``)."""
    h, f = v.hidden_size, v.ffn_size
    if v.kind == "llama4":
        return (Matrix("patch_embedding", v.num_channels * v.patch_size ** 2, h, False, "column"),)
    if not v.pooling_head:
        return ()
    return Matrix("head.fc1", h, f, True, "column"), Matrix("head.fc2", f, h, True, "row")


def _head_vectors(v: VisionTower) -> int:
    """The head's probe (h), ``nn.MultiheadAttention`` (in_proj 3h x h + 3h, out_proj h x h + h: a torch module,
    whole on every rank in vLLM) and LayerNorm (2h)."""
    h = v.hidden_size
    return h + 3 * h * h + 3 * h + h * h + h + 2 * h if v.pooling_head else 0


def projector_matrices(v: VisionTower, text_hidden: int) -> tuple[Matrix, ...]:
    """The projector's linear layers with their TP rules (a Qwen merger into out_hidden_size where the card sets
    it)."""
    vh, b, m2 = v.hidden_size, v.projector_bias, v.spatial_merge_size ** 2
    if v.projector == "llava":
        return Matrix("linear_1", vh, text_hidden, b, "column"), Matrix("linear_2", text_hidden, text_hidden, b, "row")
    if v.projector == "mistral3":
        return (Matrix("patch_merger", vh * m2, vh, False, "replicated"),
                Matrix("linear_1", vh, text_hidden, b, "column"),
                Matrix("linear_2", text_hidden, text_hidden, b, "row"))
    if v.projector == "llama4":  # vision_adapter.mlp (Llama4VisionMLP2), multi_modal_projector.linear_1: no biases
        return (Matrix("adapter.fc1", v.ffn_size, v.projector_input_dim, False, "column"),
                Matrix("adapter.fc2", v.projector_output_dim, v.projector_output_dim, False, "row"),
                Matrix("linear_1", v.vision_output_dim, text_hidden, False, "column"))
    if v.projector == "gemma3":  # mm_input_projection_weight: an nn.Parameter, whole on every rank
        return (Matrix("mm_input_projection", vh, text_hidden, False, "replicated"),)
    out = v.out_hidden_size or text_hidden
    merger = (Matrix("fc1", vh * m2, vh * m2, True, "column"), Matrix("fc2", vh * m2, out, True, "row"))
    return merger * (1 + v.deepstack_mergers)  # qwen_merger; qwen3_merger: one more per DeepStack layer


def projector_vectors(v: VisionTower, text_hidden: int) -> int:
    """The projector's norm (RMSNorm of the vision width: gemma3 mm_soft_emb_norm, mistral3 norm, Qwen ln_q) and
    LLaVA-NeXT's image_newline."""
    norm = v.hidden_size if v.projector in ("gemma3", "mistral3", "qwen_merger") else 0
    if v.projector == "qwen3_merger":  # LayerNorms: the merger's of the vision width, each DeepStack merger's v m^2
        norm = 2 * v.hidden_size + v.deepstack_mergers * 2 * v.hidden_size * v.spatial_merge_size ** 2
    return norm + (text_hidden if v.image_newline else 0)


@dataclass(frozen=True)
class VisionParams:
    """Parameters of the tower and the projector."""

    tower: int
    projector: int

    @property
    def total(self) -> int:
        return self.tower + self.projector


@lru_cache(maxsize=1024)
def vision_params(card: ModelCard, *, hf: bool = True, tp: int = 1, data_parallel: bool = False,
                  split_positions: bool = False) -> VisionParams:
    """The tower and projector of ``card`` on one rank of ``tp``: as transformers builds them (``hf``: every block
    of vision_config, the post-norm; tp 1), else as vLLM does (the feature layers only), split by TP unless the
    encoder runs data-parallel (``--mm-encoder-tp-mode data``: everything whole). ``split_positions``: Qwen3-VL's
    position table in a VocabParallelEmbedding, as SGLang builds it (srt/models/qwen3_vl.py
    ``Qwen3VLMoeVisionModel.__init__``: ``VocabParallelEmbedding(num_position_embeddings, hidden_size,
    enable_tp=not use_data_parallel)``, 0.5.10 - 0.5.23; --mm-enable-dp-encoder off by default; 0.5.8 - 0.5.9 split
    it too without DP attention; 0.5.3 - 0.5.7 an nn.Embedding, whole: SglangVersion.qwen3_vl_split_positions)."""
    v = card.vision
    if v is None:
        return VisionParams(0, 0)
    split = 1 if data_parallel else tp
    layers = v.num_layers if hf else v.built_layers
    whole, table = _embeddings(v, hf, split_positions)
    if table and split > 1:  # VocabParallelEmbedding: rows padded to 64, then split evenly
        table = cdiv(table // v.hidden_size, POSITION_PADDING) * POSITION_PADDING // split * v.hidden_size
    block = sum(m.shard(split).params for m in block_matrices(v)) + block_vectors(v)
    whole += sum(m.shard(split).params for m in extra_matrices(v)) + _head_vectors(v)
    projector = (sum(m.shard(split).params for m in projector_matrices(v, card.hidden_size))
                 + projector_vectors(v, card.hidden_size))
    return VisionParams(whole + table + layers * block, projector)


# vllm/model_executor/layers/rotary_embedding/mrope.py MRotaryEmbedding.__init__: "In Qwen2.5-VL, the maximum index
# value is related to the duration of the input video. We enlarge max_position_embeddings to 4 times":
# cache_max_position_num = max_position_embeddings * 4 (the decoders of Qwen2.5-VL and Qwen3-VL use M-RoPE)
MROPE_CACHE_FACTOR = 4
MROPE_KINDS = ("qwen2_5_vl", "qwen3_vl")


def rope_cache_positions(card: ModelCard, mrope_factor: int = MROPE_CACHE_FACTOR) -> int:
    """Positions of the rotary cos/sin cache: max_position_embeddings, ``mrope_factor`` times that for an M-RoPE
    decoder (vLLM's four; SGLang's one: kvplan.cost.parallel.rope_caches)."""
    mrope = card.vision is not None and card.vision.kind in MROPE_KINDS
    return card.max_position_embeddings * (mrope_factor if mrope else 1)


def tp_reason(card: ModelCard, tp: int) -> str | None:
    """Why vLLM cannot split this tower over ``tp`` ranks (its heads and widths must divide), else None."""
    v = card.vision
    if v is None or tp == 1:
        return None
    for what, size in (("vision num_heads", v.num_heads), ("vision intermediate_size", v.ffn_size)):
        if size % tp:
            return f"{what} {size} is not divisible by tensor parallel size {tp} (vLLM divide())"
    return None


# ---- the profile run --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class EncoderBudget:
    """vLLM's encoder budget and the dummy batch its profile run encodes."""

    tokens_per_item: int  # decoder tokens of the largest item
    budget_tokens: int  # "Encoder cache will be initialized with a budget of N tokens"
    items: int  # "... and profiled with N image items of the maximum feature size"
    patches_per_item: int  # encoder tokens (patches) of one item, before merging

    @property
    def encoder_tokens(self) -> int:
        return self.items * self.patches_per_item


def encoder_budget(v: VisionTower, mnbt: int, max_num_seqs: int, max_model_len: int,
                   limit: int = DEFAULT_LIMIT_PER_PROMPT) -> EncoderBudget | None:
    """The dummy multimodal batch of vLLM's profile run; None where the prompt may carry no image (limit 0).

    ``v1/core/encoder_cache_manager.py`` ``compute_mm_encoder_budget`` (vLLM 0.10-0.33)::

        T = max tokens per item;  budget = min(max(max_num_encoder_input_tokens, T), max(encoder_cache_size, T))
        (both are max_num_batched_tokens, scheduler config)
        items per prompt = max(1, min(limit_mm_per_prompt, max_model_len // T))
        items = max(1, min(budget // T, max_num_seqs x items per prompt))   (multimodal/encoder_budget.py)
    """
    if limit == 0:
        return None
    t = v.max_tokens_per_item
    budget = max(mnbt, t)  # compute and cache budgets are both max(max_num_batched_tokens, T): their min is that
    per_prompt = max(1, min(limit, max_model_len // t))
    items = max(1, min(budget // t, max_num_seqs * per_prompt))
    return EncoderBudget(t, budget, items, encoder_patches(v))


def encoder_patches(v: VisionTower) -> int:
    """Encoder tokens of the largest item: its tokens before the spatial merge (Qwen2.5-VL, Pixtral-in-Mistral3:
    merge^2 patches per token; CLIP and SigLIP: every patch of every tile, the CLS token too)."""
    if v.kind in ("qwen2_5_vl", "qwen3_vl", "pixtral"):
        return v.max_tokens_per_item * v.spatial_merge_size ** 2
    if v.kind == "llama4":  # every tile's patches and CLS; a tile's tokens after the pixel shuffle: side^2 / merge^2
        side = patches_per_side(v)
        return cdiv(v.max_tokens_per_item, side * side // v.spatial_merge_size ** 2) * (side * side + 1)
    side = patches_per_side(v)
    per_tile = side * side + (1 if v.kind == "clip" else 0)
    return cdiv(v.max_tokens_per_item, side * side) * per_tile  # LLaVA-NeXT: base image + anyres tiles


def encoder_peak_bytes(v: VisionTower, b: EncoderBudget, text_hidden: int, act_bytes: int) -> tuple[int, int]:
    """(the encoder outputs the profile keeps, the encoder's own transient peak) in bytes: an ESTIMATE.

    Kept: ``items x T x text_hidden`` embeddings stay in the encoder cache while the text dummy pass runs
    (profile_run). Transient: the largest of one block's live tensors over all encoder tokens: the attention half
    (residual, normed input, fused q/k/v, rotated q/k, output: 8 x hidden) or the MLP half (residual, normed input,
    the intermediate 2x (plain) or 3x (gated: gate, up, product)); attention itself is memory-efficient (no
    tokens^2 matrix in vLLM's vision backends)."""
    kept = b.items * b.tokens_per_item * text_hidden * act_bytes
    gated = v.kind in ("pixtral", "qwen2_5_vl")  # Qwen3-VL, CLIP, SigLIP: plain fc1 / fc2
    per_token = max(8 * v.hidden_size, 2 * v.hidden_size + (3 if gated else 2) * v.ffn_size)
    return kept, b.encoder_tokens * per_token * act_bytes
