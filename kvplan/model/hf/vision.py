"""Multimodal config.json files read whole: the text decoder (``text_config``, or the top level for Qwen2.5-VL's
flat files) for the card's decoder fields, and ``vision_config`` plus the top-level projector keys for its
``vision`` block (kvplan.model.vision), as transformers' config classes read them.

Each vision config falls back to its transformers class's defaults (recorded as assumed): ``CLIPVisionConfig``,
``SiglipVisionConfig``, ``PixtralVisionConfig``, ``Qwen2_5_VLVisionConfig``, ``Qwen3VLVisionConfig``
(transformers 5.24, checked in tests/test_multimodal_hf.py). The decoder tokens of the largest image follow vLLM's
processors (``vllm/model_executor/models/llava_next.py`` ``get_num_image_tokens`` /
``get_image_size_with_most_features``, ``gemma3_mm.py``, ``mistral3.py``, ``qwen2_vl.py`` / ``qwen3_vl.py``
``get_max_image_tokens``).
"""

from __future__ import annotations

from typing import Any

from kvplan.errors import KvplanError, clip
from kvplan.model.hf.reader import Config

# the multimodal model_type -> (the text decoder's model_type when text_config names none, the tower kind, projector)
MULTIMODAL = {
    "llava": ("llama", "clip", "llava"),
    "llava_next": ("llama", "clip", "llava"),
    "mistral3": ("mistral", "pixtral", "mistral3"),
    "gemma3": ("gemma3_text", "siglip", "gemma3"),
    "qwen2_5_vl": ("qwen2", "qwen2_5_vl", "qwen_merger"),
    "qwen3_vl": ("qwen3", "qwen3_vl", "qwen3_merger"),
    "qwen3_vl_moe": ("qwen3_moe", "qwen3_vl", "qwen3_merger"),
    "qwen3_5": ("qwen3_5_text", "qwen3_vl", "qwen3_merger"),  # Qwen3.5: Qwen3-VL's tower without DeepStack
    "qwen3_5_moe": ("qwen3_5_moe_text", "qwen3_vl", "qwen3_merger"),
    "llama4": ("llama4_text", "llama4", "llama4"),  # Llama4ForConditionalGeneration: text_config is llama4_text
}
# text decoders read by another reader: Gemma 3's text model is gemma3_text; Qwen2.5-VL's decoder is Qwen2's
_TEXT_TYPES = {"gemma3": "gemma3_text", "qwen2_5_vl_text": "qwen2", "qwen2_5_vl": "qwen2", "qwen3_vl_text": "qwen3",
               "qwen3_vl_moe_text": "qwen3_moe"}

# transformers 5.24 vision config classes' defaults (configuration_<type>.py)
VISION_DEFAULTS: dict[str, dict[str, Any]] = {
    "clip_vision_model": {"hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12,
                          "num_attention_heads": 12, "num_channels": 3, "image_size": 224, "patch_size": 32},
    "siglip_vision_model": {"hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12,
                            "num_attention_heads": 12, "num_channels": 3, "image_size": 224, "patch_size": 16,
                            "vision_use_head": True},
    "pixtral": {"hidden_size": 1024, "intermediate_size": 4096, "num_hidden_layers": 24, "num_attention_heads": 16,
                "num_channels": 3, "image_size": 1024, "patch_size": 16},
    "qwen2_5_vl": {"depth": 32, "hidden_size": 3584, "intermediate_size": 3420, "num_heads": 16, "in_channels": 3,
                   "patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2, "out_hidden_size": 3584},
    "qwen3_vl": {"depth": 27, "hidden_size": 1152, "intermediate_size": 4304, "num_heads": 16, "in_channels": 3,
                 "patch_size": 16, "spatial_merge_size": 2, "temporal_patch_size": 2, "num_position_embeddings": 2304,
                 "deepstack_visual_indexes": [8, 16, 24], "out_hidden_size": 3584},
}
VISION_DEFAULTS["llama4_vision_model"] = {  # Llama4VisionConfig
    "hidden_size": 768, "intermediate_size": 5632, "num_hidden_layers": 34, "num_attention_heads": 16,
    "num_channels": 3, "image_size": 448, "patch_size": 14, "vision_output_dim": 7680, "pixel_shuffle_ratio": 0.5,
    "projector_input_dim": 4096, "projector_output_dim": 4096}
VISION_DEFAULTS["qwen3_5"] = {**VISION_DEFAULTS["qwen3_vl"], "deepstack_visual_indexes": []}  # no DeepStack
# the tower kind of each vision config class (Qwen3.5's Qwen3_5VisionModel is Qwen3-VL's without DeepStack mergers)
VISION_KIND = {"llama4_vision_model": "llama4", "clip_vision_model": "clip", "siglip_vision_model": "siglip", "pixtral": "pixtral",
               "qwen2_5_vl": "qwen2_5_vl", "qwen3_vl": "qwen3_vl", "qwen3_5": "qwen3_vl"}
# the vision_config a multimodal class builds when the file gives none (LlavaConfig: CLIP ViT-L/14-336)
_VISION_TYPE = {"llava": "clip_vision_model", "llava_next": "clip_vision_model", "mistral3": "pixtral",
                "gemma3": "siglip_vision_model", "qwen2_5_vl": "qwen2_5_vl", "qwen3_vl": "qwen3_vl",
                "qwen3_vl_moe": "qwen3_vl", "qwen3_5": "qwen3_5", "qwen3_5_moe": "qwen3_5",
                "llama4": "llama4_vision_model"}
# vision_config model_type spellings of the same class (transformers 5 renames what older files wrote)
_VISION_ALIASES = {"qwen2_5_vl_vision": "qwen2_5_vl", "qwen3_vl_vision": "qwen3_vl", "qwen3_vl_moe": "qwen3_vl",
                   "qwen3_vl_moe_vision": "qwen3_vl", "qwen3_5_vision": "qwen3_5", "qwen3_5_moe": "qwen3_5",
                   "qwen3_5_moe_vision": "qwen3_5"}
# top-level keys with the multimodal class's defaults (LlavaConfig, LlavaNextConfig, Mistral3Config, Gemma3Config)
TOP_DEFAULTS: dict[str, dict[str, Any]] = {
    "llava": {"vision_feature_layer": -2, "vision_feature_select_strategy": "default",
              "multimodal_projector_bias": True},
    "llava_next": {"vision_feature_layer": -2, "vision_feature_select_strategy": "default",
                   "multimodal_projector_bias": True,
                   "image_grid_pinpoints": [[336, 672], [672, 336], [672, 672], [1008, 336], [336, 1008]]},
    "mistral3": {"vision_feature_layer": -1, "multimodal_projector_bias": False, "spatial_merge_size": 2},
    "gemma3": {"mm_tokens_per_image": 256},
    "qwen2_5_vl": {}, "qwen3_vl": {}, "qwen3_vl_moe": {}, "qwen3_5": {}, "qwen3_5_moe": {}, "llama4": {},
}
# the text_config of a multimodal file names only what differs from its class (LLaVA-NeXT's Mistral-7B-v0.2 decoder):
# the defaults of MistralConfig / LlamaConfig (transformers 5.24) that kvplan's text readers have no table for
TEXT_DEFAULTS: dict[str, dict[str, Any]] = {
    "mistral": {"hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
                "num_key_value_heads": 8, "vocab_size": 32000},
    "gemma3_text": {"vocab_size": 262208, "max_position_embeddings": 131072},
    "llama": {"hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32, "num_attention_heads": 32,
              "vocab_size": 32000, "max_position_embeddings": 2048},
}
# the largest image vLLM's processor takes, from the checkpoints' preprocessor_config.json (config.json does not
# carry it): Qwen2.5-VL "max_pixels": 12845056 (28 x 28 x 16384), Qwen3-VL "size": {"longest_edge": 16777216}
# (32 x 32 x 16384)
MAX_PIXELS = {"qwen2_5_vl": 12_845_056, "qwen3_vl": 16_777_216}
# Llama 4: the most tiles of one image, Llama4ImageProcessor max_patches (transformers 5.24 default 16, the
# checkpoints' preprocessor_config.json); vLLM mllama4.py get_image_size_with_most_features: a 16:1 image, 16 tiles
# and the global one
LLAMA4_MAX_TILES = 16


class _Keys(Config):
    """A Config over a vision_config (or the top level of a multimodal file) with its own class's defaults."""

    def __init__(self, data: dict, model_type: str, origin: str, defaults: dict[str, Any]):
        super().__init__(data, model_type, origin)
        self.defaults = defaults

    def find(self, key: str, *fallback_keys: str) -> tuple[str, Any]:
        for k in (key, *fallback_keys):
            if self.data.get(k) is not None:
                return k, self.data[k]
        for k in (key, *fallback_keys):
            if k in self.defaults:
                self.assumed.append(f"{k}={self.defaults[k]!r} (transformers default for {self.model_type})")
                return k, self.defaults[k]
        raise KvplanError(f"{self.origin}: missing key {key!r}, which a {self.model_type} vision tower needs "
                          "(and transformers has no default for)")


def text_part(data: dict, model_type: str, origin: str) -> tuple[dict, str, dict | None, list[str]]:
    """(the decoder's config dict, its model_type, the whole multimodal config or None, the decoder defaults
    assumed): a multimodal model_type with a vision_config object is read whole; anything else (a text config, or
    a multimodal file trimmed to its decoder) is returned as it is."""
    if model_type not in MULTIMODAL or not isinstance(data.get("vision_config"), dict):
        return data, model_type, None, []
    text = data.get("text_config")
    if not isinstance(text, dict):  # Qwen2.5-VL's original flat file: the decoder's keys at the top level
        text = {k: v for k, v in data.items() if k != "vision_config"}
    text_type = text.get("model_type") or MULTIMODAL[model_type][0]
    if not isinstance(text_type, str):
        raise KvplanError(f"{origin}: text_config.model_type: {clip(text_type)} is not a string")
    text_type = _TEXT_TYPES.get(text_type, text_type)
    merged = {**text, "torch_dtype": data.get("torch_dtype") or data.get("dtype") or text.get("torch_dtype"),
              "_name_or_path": data.get("_name_or_path"), "model_type": text_type,
              "quantization_config": data.get("quantization_config")}
    if "tie_word_embeddings" in data and "tie_word_embeddings" not in text:  # else text_config's, else its class's
        merged["tie_word_embeddings"] = data["tie_word_embeddings"]  # (vLLM builds the decoder from text_config)
    missing = {k: v for k, v in TEXT_DEFAULTS.get(text_type, {}).items() if merged.get(k) is None}
    return ({**merged, **missing}, text_type, data,
            [f"text_config.{k}={v!r} (transformers default for {text_type})" for k, v in missing.items()])


def vision_fields(data: dict, text_hidden: int, origin: str, assumed: list[str]) -> dict:
    """The card's ``vision`` block from a multimodal config.json; defaults assumed are appended to ``assumed``."""
    model_type = data["model_type"]
    _, kind, projector = MULTIMODAL[model_type]
    raw = data.get("vision_config") or {}
    if not isinstance(raw, dict):
        raise KvplanError(f"{origin}: vision_config: {clip(raw)} is not an object")
    vtype = raw.get("model_type") or _VISION_TYPE[model_type]
    vtype = _VISION_ALIASES.get(vtype, vtype) if isinstance(vtype, str) else vtype
    if vtype not in VISION_DEFAULTS:
        raise KvplanError(f"{origin}: vision_config.model_type {clip(vtype)} unsupported; allowed: "
                          f"{', '.join(VISION_DEFAULTS)}")
    own = ("qwen2_5_vl", "qwen3_vl", "llama4")  # these towers belong to their own models only; LLaVA-style anywhere
    if (kind in own or VISION_KIND[vtype] in own) and VISION_KIND[vtype] != kind:
        raise KvplanError(f"{origin}: vision_config.model_type {vtype} does not belong to a {model_type} model")
    kind = VISION_KIND[vtype]
    vis = _Keys(raw, vtype, f"{origin}: vision_config", VISION_DEFAULTS[vtype])
    top = _Keys(data, model_type, origin, TOP_DEFAULTS[model_type])
    try:
        fields = _tower(kind, vis) | _projector(model_type, top, vis)
        if kind in ("qwen2_5_vl", "qwen3_vl"):  # the merger's output width (Qwen2_5_VLPatchMerger dim), kept where
            out = vis.integer("out_hidden_size")  # it differs from the decoder's (every published checkpoint: equal)
            fields["out_hidden_size"] = None if out == text_hidden else out
        fields["max_tokens_per_item"] = _tokens_per_item(model_type, kind, top, vis, fields)
    finally:
        assumed += [f"vision_config.{a}" for a in vis.assumed] + top.assumed
    return {"kind": kind, "projector": projector, **fields}


def _tower(kind: str, vis: Config) -> dict:
    if kind in ("qwen2_5_vl", "qwen3_vl"):
        out = dict(num_layers=vis.layers("depth"), hidden_size=vis.integer("hidden_size"),
                   ffn_size=vis.integer("intermediate_size"), num_heads=vis.integer("num_heads"),
                   patch_size=vis.integer("patch_size"), num_channels=vis.integer("in_channels", "in_chans"),
                   temporal_patch_size=vis.integer("temporal_patch_size"),
                   spatial_merge_size=vis.integer("spatial_merge_size"))
        if kind == "qwen3_vl":
            found, deep = vis.find("deepstack_visual_indexes")
            if not isinstance(deep, list) or any(type(i) is not int or not 0 <= i < out["num_layers"] for i in deep):
                raise KvplanError(f"{vis.origin}: {found}: {clip(deep)} is not a list of block indexes; allowed: "
                                  f"integers 0..{out['num_layers'] - 1}")
            out |= {"num_position_embeddings": vis.integer("num_position_embeddings"), "deepstack_mergers": len(deep)}
        return out
    out = dict(num_layers=vis.layers("num_hidden_layers"), hidden_size=vis.integer("hidden_size"),
               ffn_size=vis.integer("intermediate_size"), num_heads=vis.integer("num_attention_heads"),
               patch_size=vis.integer("patch_size"), image_size=vis.integer("image_size"),
               num_channels=vis.integer("num_channels"))
    if kind == "llama4":
        found, ratio = vis.find("pixel_shuffle_ratio")
        merge = round(1 / ratio) if isinstance(ratio, (int, float)) and not isinstance(ratio, bool) and ratio > 0 else 0
        if not merge or merge * ratio != 1:
            raise KvplanError(f"{vis.origin}: {found}: {clip(ratio)} is not 1 / an integer; allowed: 0.5, 0.25, ...")
        out |= {"spatial_merge_size": merge, "projector_input_dim": vis.integer("projector_input_dim"),
                "projector_output_dim": vis.integer("projector_output_dim"),
                "vision_output_dim": vis.integer("vision_output_dim")}
    if kind == "siglip":  # SiglipVisionTransformer builds the attention-pooling head unless vision_use_head is false
        out["pooling_head"] = vis.flag("vision_use_head")
    return out


def _projector(model_type: str, top: Config, vis: Config) -> dict:
    if model_type == "llama4":  # Llama4VisionMLP2 and Llama4MultiModalProjector build no biases
        return {"projector_bias": False}
    if model_type in ("llava", "llava_next", "mistral3"):
        out = {"projector_bias": top.flag("multimodal_projector_bias"),
               "feature_layers": _feature_layers(top, vis.layers("num_hidden_layers"))}
        if model_type == "mistral3":
            out["spatial_merge_size"] = top.integer("spatial_merge_size")
        if model_type == "llava_next":
            out["image_newline"] = True
        return out
    return {}


def _feature_layers(top: Config, layers: int) -> int | None:
    """vLLM llava.py ``_get_num_hidden_layers``: a negative vision_feature_layer n runs layers + n + 1 blocks, a
    positive one n blocks; a list: its deepest entry."""
    found, value = top.find("vision_feature_layer")
    picks = value if isinstance(value, list) else [value]
    if not picks or any(type(p) is not int or not -layers <= p <= layers for p in picks):
        raise KvplanError(f"{top.origin}: {found}: {clip(value)} is not a layer index; allowed: an integer "
                          f"{-layers}..{layers} or a list of them")
    deepest = max(p if p >= 0 else layers + p + 1 for p in picks)
    return None if deepest == layers else max(1, deepest)


def _tokens_per_item(model_type: str, kind: str, top: Config, vis: Config, fields: dict) -> int:
    if model_type == "gemma3":
        return top.integer("mm_tokens_per_image")
    if kind == "llama4":  # mllama4.py get_patch_per_chunk x (tiles + the global tile)
        top.assumed.append(f"max_patches={LLAMA4_MAX_TILES} (Llama4ImageProcessor's default and the checkpoints' "
                           "preprocessor_config.json, which kvplan does not read)")
        side = fields["image_size"] // fields["patch_size"]
        return (LLAMA4_MAX_TILES + 1) * (side * side // fields["spatial_merge_size"] ** 2)
    if kind in MAX_PIXELS:  # qwen2_vl.py / qwen3_vl.py get_max_image_tokens: the largest image, merged
        top.assumed.append(f"max_pixels={MAX_PIXELS[kind]} (the {kind} checkpoints' preprocessor_config.json, which "
                           "kvplan does not read)")
        unit = fields["patch_size"] * fields["spatial_merge_size"]
        return MAX_PIXELS[kind] // (unit * unit)
    side = fields["image_size"] // fields["patch_size"]
    if model_type == "mistral3":  # mistral3.py get_num_image_tokens: ncols x nrows merged patches
        merged = side // fields["spatial_merge_size"]
        return merged * merged
    select = top.text("vision_feature_select_strategy")
    base = side * side + (1 if select == "full" else 0)  # "default" drops the CLS token
    if model_type == "llava":
        return base
    return base + max(_anyres_tokens(h, w, fields["image_size"], side) for h, w in _pinpoints(top))


def _pinpoints(top: Config) -> list[tuple[int, int]]:
    found, value = top.find("image_grid_pinpoints")
    if (not isinstance(value, list) or not value
            or any(not isinstance(p, list) or len(p) != 2 or any(type(x) is not int or x < 1 for x in p)
                   for p in value)):
        raise KvplanError(f"{top.origin}: {found}: {clip(value)} is not a list of [height, width] pairs")
    return [(p[0], p[1]) for p in value]


def _anyres_tokens(height: int, width: int, image_size: int, side: int) -> int:
    """llava_next.py ``_get_num_unpadded_features`` for an image of exactly a grid pinpoint's size (the image that
    ``get_image_size_with_most_features`` tries): its tiles' features, unpadded, plus one newline per row."""
    cur_h, cur_w = side * (height // image_size), side * (width // image_size)
    if width / height > cur_w / cur_h:
        new_h = int(round(height * (cur_w / width), 7))
        cur_h -= 2 * ((cur_h - new_h) // 2)
    else:
        new_w = int(round(width * (cur_h / height), 7))
        cur_w -= 2 * ((cur_w - new_w) // 2)
    return cur_h * cur_w + cur_h
