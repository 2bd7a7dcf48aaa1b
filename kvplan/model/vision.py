"""The vision tower (encoder) and projector of a multimodal checkpoint: enough to count their parameters exactly, as
transformers and vLLM build them, and the tokens one image becomes in the decoder.

A card's ``vision`` block describes the tower the whole config.json declares (``vision_config`` and the top-level
projector keys), beside the text decoder the rest of the card describes. Five tower kinds, each after its
transformers module (``models/<type>/modeling_<type>.py``) and vLLM's (``vllm/model_executor/models/<file>.py``):

- ``clip`` (LLaVA 1.5 / LLaVA-NeXT, ``CLIPVisionModel``): class embedding, patch Conv2d without bias, learned
  positions (patches + 1), pre-LayerNorm, blocks of LayerNorm + biased q/k/v/out + LayerNorm + biased fc1/fc2,
  post-LayerNorm. LLaVA runs the tower up to ``vision_feature_layer`` (-2: the last block is never used): vLLM
  builds only those blocks and drops the post-LayerNorm (``llava.py`` ``_get_num_hidden_layers``,
  ``init_vision_tower_for_llava``), transformers builds them all.
- ``siglip`` (Gemma 3, ``SiglipVisionModel``): patch Conv2d with bias, learned positions (patches), the same
  blocks, post-LayerNorm; with ``vision_use_head`` (SiglipVisionConfig's default, false in Gemma 3's files) the
  attention-pooling head too (``SiglipMultiheadAttentionPoolingHead``: probe, ``nn.MultiheadAttention``, LayerNorm,
  fc1 / fc2), which transformers and vLLM (``siglip.py`` ``SiglipVisionTransformer``) build though Gemma 3 never
  runs it.
- ``pixtral`` (Mistral 3 / Pixtral, ``PixtralVisionModel``): patch Conv2d without bias, RMSNorm ``ln_pre``, blocks
  of RMSNorm + q/k/v/o without bias + RMSNorm + gated SiLU MLP without bias; 2-D RoPE (no position table).
- ``qwen2_5_vl`` (``Qwen2_5_VisionTransformerPretrainedModel``): patch Conv3d (temporal x patch x patch) without
  bias, blocks of RMSNorm + fused biased qkv + biased proj + RMSNorm + gated biased MLP; 2-D RoPE.
- ``llama4`` (Llama 4, ``Llama4VisionModel``): patch "unfold convolution" (a Linear c p^2 -> h without bias), class
  embedding, learned positions (patches + 1), pre- and post-LayerNorm, blocks of LayerNorm + biased q/k/v/o +
  LayerNorm + biased fc1 / fc2; 2-D RoPE.
- ``qwen3_vl`` (``Qwen3VLVisionModel``): patch Conv3d with bias, a learned position table
  (``num_position_embeddings``), blocks of LayerNorm + biased qkv / proj + LayerNorm + biased fc1 / fc2 (GELU).

Projectors: ``llama4`` (the tower's ``vision_adapter``: pixel shuffle by ``pixel_shuffle_ratio``, then
``Llama4VisionMLP2`` fc1 intermediate_size -> projector_input_dim and fc2 projector_output_dim ->
projector_output_dim, both without bias; then ``multi_modal_projector.linear_1`` vision_output_dim -> text, no bias),
``llava`` (linear_1 vision -> text, GELU, linear_2 text -> text, biased unless
``multimodal_projector_bias`` is false), ``gemma3`` (RMSNorm of the vision width, then one vision x text matrix,
``mm_input_projection_weight``), ``mistral3`` (RMSNorm, ``patch_merger`` Linear(vision x merge^2, vision) without
bias, then the llava MLP), ``qwen_merger`` (RMSNorm, Linear(v m^2, v m^2) + GELU + Linear(v m^2, text), biased),
``qwen3_merger`` (the same with a LayerNorm, plus one more merger per DeepStack layer, its LayerNorm v m^2 wide).
The Qwen mergers' output width is ``vision_config.out_hidden_size`` (``Qwen2_5_VLPatchMerger(dim=out_hidden_size)``,
``Qwen3VLVisionPatchMerger``), the decoder's hidden size in every published checkpoint.
"""

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt

_Size = Annotated[StrictInt, Field(gt=0, le=10_000_000)]
_Small = Annotated[StrictInt, Field(gt=0, le=10_000)]

TowerKind = Literal["clip", "siglip", "pixtral", "qwen2_5_vl", "qwen3_vl", "llama4"]
ProjectorKind = Literal["llava", "gemma3", "mistral3", "qwen_merger", "qwen3_merger", "llama4"]


class VisionTower(BaseModel):
    """A multimodal checkpoint's vision encoder and projector (see the module docstring)."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)  # built on a card's first validation
    kind: TowerKind = Field(description="The tower's module family: clip, siglip, pixtral, qwen2_5_vl, qwen3_vl, "
                                           "llama4.")
    projector: ProjectorKind = Field(description="The projector into the decoder: llava, gemma3, mistral3, "
                                                 "qwen_merger, qwen3_merger, llama4.")
    num_layers: _Small = Field(description="Encoder blocks in vision_config (num_hidden_layers, Qwen depth).")
    feature_layers: _Small | None = Field(
        None, description="Blocks the model runs (LLaVA vision_feature_layer -2: num_layers - 1); vLLM builds only "
                          "these and drops the post-norm; null: all of them.")
    hidden_size: _Size
    ffn_size: _Size = Field(description="intermediate_size of one encoder block.")
    num_heads: _Small
    patch_size: _Small
    image_size: _Size | None = Field(None, description="The tower's image side in pixels, which sizes a learned "
                                                       "position table (CLIP, SigLIP, Pixtral); null: none (Qwen2.5-VL "
                                                       "takes any size).")
    num_channels: _Small = 3
    num_position_embeddings: _Size | None = Field(None, description="Rows of a learned position table sized apart "
                                                  "from image_size (Qwen3-VL); null: none, or from image_size.")
    deepstack_mergers: Annotated[StrictInt, Field(ge=0, le=10_000)] = Field(
        0, description="Extra patch mergers feeding intermediate blocks' features to the decoder (Qwen3-VL "
                       "deepstack_visual_indexes).")
    temporal_patch_size: _Small = Field(1, description="Frames per patch (Qwen2.5-VL Conv3d: 2).")
    spatial_merge_size: _Small = Field(1, description="Patches merged per side into one token (Pixtral-in-Mistral3, "
                                                      "Qwen2.5-VL: 2).")
    projector_bias: StrictBool = Field(True, description="The projector's linears have biases (Mistral3: "
                                                         "multimodal_projector_bias).")
    pooling_head: StrictBool = Field(False, description="SigLIP's attention-pooling head (vision_use_head), built "
                                                       "though unused.")
    out_hidden_size: _Size | None = Field(None, description="The Qwen merger's output width (vision_config "
                                                            "out_hidden_size) where it differs from the decoder's "
                                                            "hidden_size; null: the decoder's.")
    projector_input_dim: _Size | None = Field(None, description="Llama 4 vision_adapter fc1 output "
                                                                "(projector_input_dim).")
    projector_output_dim: _Size | None = Field(None, description="Llama 4 vision_adapter fc2 width "
                                                                 "(projector_output_dim).")
    vision_output_dim: _Size | None = Field(None, description="Llama 4 multi_modal_projector input "
                                                              "(vision_output_dim).")
    image_newline: StrictBool = Field(False, description="A learned newline embedding of the text width "
                                                         "(LLaVA-NeXT image_newline).")
    max_tokens_per_item: Annotated[StrictInt, Field(gt=0, le=2**31 - 1)] = Field(
        description="Decoder tokens of the largest image, as vLLM's processor counts them for the encoder budget "
                    "(kvplan.model.hf.vision: LLaVA-NeXT anyres, Gemma 3 mm_tokens_per_image, Qwen2.5-VL "
                    "max_pixels / (patch x merge)^2, Mistral 3 (side / spatial_merge_size)^2).")

    @property
    def built_layers(self) -> int:
        """Blocks vLLM builds (the feature layers)."""
        return self.feature_layers or self.num_layers

    @property
    def truncated(self) -> bool:
        """vLLM builds fewer blocks than the config declares, and then no post-norm."""
        return self.built_layers < self.num_layers
