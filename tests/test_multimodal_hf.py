"""Multimodal config.json files read whole, proven against transformers: a tiny model of each family built from a
shrunk config with random weights holds exactly the parameters kvplan counts, text decoder and vision tower."""

from __future__ import annotations

import warnings

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
warnings.filterwarnings("ignore")

from kvplan import count_params  # noqa: E402
from kvplan.cost.vision import vision_params  # noqa: E402
from kvplan.model.hf.config import card_from_hf_config  # noqa: E402
from kvplan.model.hf.vision import VISION_DEFAULTS  # noqa: E402

TEXT = dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            vocab_size=160, max_position_embeddings=256)
CLIP = dict(model_type="clip_vision_model", hidden_size=32, intermediate_size=48, num_hidden_layers=3,
            num_attention_heads=4, image_size=28, patch_size=7)
CASES = {
    "llava": dict(model_type="llava", text_config=dict(TEXT, model_type="llama"), vision_config=CLIP,
                  vision_feature_layer=-2, image_token_index=150),
    "llava_next": dict(model_type="llava_next", text_config=dict(TEXT, model_type="mistral", sliding_window=None),
                       vision_config=CLIP, vision_feature_layer=-2, image_grid_pinpoints=[[28, 56], [56, 56]],
                       image_token_index=150),
    "mistral3": dict(model_type="mistral3", text_config=dict(TEXT, model_type="mistral", head_dim=32),
                     vision_config=dict(model_type="pixtral", hidden_size=32, intermediate_size=48,
                                        num_hidden_layers=2, num_attention_heads=4, image_size=56, patch_size=7,
                                        head_dim=8),
                     spatial_merge_size=2, multimodal_projector_bias=False, image_token_index=150,
                     # transformers 5.24's Mistral3Config ties by default; vLLM builds the decoder from text_config
                     # (MistralConfig: untied) and the checkpoints store lm_head, as kvplan reads a file without it
                     tie_word_embeddings=False),
    "gemma3": dict(model_type="gemma3", text_config=dict(TEXT, model_type="gemma3_text", head_dim=32,
                                                          sliding_window=8),
                   vision_config=dict(model_type="siglip_vision_model", hidden_size=32, intermediate_size=48,
                                      num_hidden_layers=2, num_attention_heads=4, image_size=28, patch_size=7,
                                      vision_use_head=False),
                   mm_tokens_per_image=4, image_token_index=150),
    "qwen2_5_vl": dict(model_type="qwen2_5_vl", text_config=dict(TEXT, model_type="qwen2_5_vl_text",
                                                                 rope_scaling={"type": "mrope",
                                                                               "mrope_section": [2, 3, 3]}),
                       vision_config=dict(model_type="qwen2_5_vl", depth=2, hidden_size=32, intermediate_size=48,
                                          num_heads=4, out_hidden_size=64, patch_size=7, spatial_merge_size=2,
                                          temporal_patch_size=2, fullatt_block_indexes=[1]),
                       image_token_id=150, video_token_id=151),
    "qwen3_vl": dict(model_type="qwen3_vl", text_config=dict(TEXT, model_type="qwen3_vl_text", head_dim=16,
                                                             rope_scaling={"rope_type": "default",
                                                                           "mrope_section": [2, 3, 3]}),
                     vision_config=dict(model_type="qwen3_vl", depth=3, hidden_size=32, intermediate_size=48,
                                        num_heads=4, out_hidden_size=64, patch_size=4, spatial_merge_size=2,
                                        temporal_patch_size=2, num_position_embeddings=16,
                                        deepstack_visual_indexes=[0, 1]),
                     image_token_id=150, video_token_id=151),
    "qwen3_vl_moe": dict(model_type="qwen3_vl_moe",
                         text_config=dict(TEXT, model_type="qwen3_vl_moe_text", head_dim=16, num_experts=4,
                                          num_experts_per_tok=2, moe_intermediate_size=32, decoder_sparse_step=1,
                                          rope_scaling={"rope_type": "default", "mrope_section": [2, 3, 3]}),
                         vision_config=dict(model_type="qwen3_vl_moe", depth=2, hidden_size=32, intermediate_size=48,
                                            num_heads=4, out_hidden_size=64, patch_size=4, spatial_merge_size=2,
                                            temporal_patch_size=2, num_position_embeddings=16,
                                            deepstack_visual_indexes=[1]),
                         image_token_id=150, video_token_id=151),
}


def _qwen3_5(model_type: str, text_case: str) -> dict:
    """Qwen3.5 (hybrid Gated DeltaNet decoder) with Qwen3-VL's tower without DeepStack, text from tests/cases.py."""
    from cases import HYBRID_CASES as TEXT_CASES

    text_type, kwargs = next((t, k) for name, t, k in TEXT_CASES if name == text_case)
    return dict(model_type=model_type, text_config=dict(kwargs, model_type=text_type),
                vision_config=dict(depth=2, hidden_size=32, intermediate_size=48, num_heads=4, out_hidden_size=64,
                                   patch_size=4, spatial_merge_size=2, temporal_patch_size=2,
                                   num_position_embeddings=16),
                image_token_id=150, video_token_id=151)


CASES |= {"qwen3_5": _qwen3_5("qwen3_5", "qwen3.5"), "qwen3_5_moe": _qwen3_5("qwen3_5_moe", "qwen3.5-moe")}


def _model(cfg: dict):
    config = transformers.AutoConfig.for_model(**cfg)
    with torch.device("meta"):
        return transformers.AutoModelForImageTextToText.from_config(config)


@pytest.mark.parametrize("name", sorted(CASES))
def test_params_match_transformers(name):
    cfg = dict(CASES[name], torch_dtype="float32")
    card = card_from_hf_config(cfg)
    model = _model(cfg)
    assert card.vision is not None
    assert count_params(card).total == sum(p.numel() for p in model.parameters())
    tower = next(m for n, m in model.named_modules() if n.endswith(("vision_tower", "visual")))
    projector = sum(p.numel() for n, p in model.named_parameters()
                    if "projector" in n or "merger" in n or "image_newline" in n)
    # the vision line alone: the tower and the projector (Qwen's merger sits inside `visual`)
    assert count_params(card).vision == sum(p.numel() for p in tower.parameters()) + (
        0 if name.startswith("qwen") else projector)


def test_llava_vllm_builds_the_feature_layers_only():
    """vision_feature_layer -2: vLLM builds 2 of 3 CLIP blocks and no post-LayerNorm (llava.py
    init_vision_tower_for_llava); transformers' CLIPVisionModel with 2 blocks, less its post_layernorm, is that."""
    card = card_from_hf_config(dict(CASES["llava"], torch_dtype="float32"))
    short = transformers.CLIPVisionConfig(**{**CLIP, "num_hidden_layers": 2})
    with torch.device("meta"):
        tower = transformers.CLIPVisionModel(short)
    expected = sum(p.numel() for n, p in tower.named_parameters() if "post_layernorm" not in n)
    assert vision_params(card, hf=False).tower == expected
    assert vision_params(card, hf=False).tower < vision_params(card).tower


@pytest.mark.parametrize("vision_type", sorted(VISION_DEFAULTS))
def test_vision_defaults_are_transformers(vision_type):
    config = transformers.AutoConfig.for_model(vision_type)
    config = getattr(config, "vision_config", config)
    for key, value in VISION_DEFAULTS[vision_type].items():
        # a class without DeepStack mergers (Qwen3.5) has no deepstack_visual_indexes: none
        found = getattr(config, key) if key != "deepstack_visual_indexes" else getattr(config, key, [])
        assert (list(found) if isinstance(found, tuple) else found) == value, key


@pytest.mark.parametrize(("model_type", "expected"), [
    ("qwen2_5_vl", 3_083_025_152), ("qwen3_vl", 566_949_104), ("qwen3_vl_moe", 566_949_104),
    ("qwen3_5", 453_650_672), ("qwen3_5_moe", 453_650_672), ("gemma3", 94_654_464)])
def test_default_configs_vision_is_transformers(model_type, expected):
    """QA D8: transformers' default configs merge into out_hidden_size 3584 (not the decoder's 8192 / 4096 / 2048)
    and build SigLIP's attention-pooling head (vision_use_head true): the vision line is the tower plus projector
    transformers builds."""
    config = transformers.AutoConfig.for_model(model_type)
    with torch.device("meta"):
        model = transformers.AutoModelForImageTextToText.from_config(config)
    built = sum(p.numel() for n, p in model.named_parameters() if ".visual." in f".{n}" or "vision_tower" in n
                or "multi_modal_projector" in n)
    card = card_from_hf_config(config.to_dict())
    assert count_params(card).vision == built == expected
    v = card.vision
    if model_type == "gemma3":
        assert v.pooling_head and any("head" in n for n, _ in model.named_parameters() if "vision_tower" in n)
    else:
        assert v.out_hidden_size == config.vision_config.out_hidden_size == 3584 != card.hidden_size


@pytest.mark.parametrize(("name", "key", "value"), [
    ("qwen2_5_vl", "out_hidden_size", 48), ("qwen3_vl", "out_hidden_size", 48), ("qwen3_5", "out_hidden_size", 48),
    ("gemma3", "vision_use_head", True)])
def test_merger_width_and_pooling_head_follow_the_file(name, key, value):
    """The tiny cases with out_hidden_size other than the decoder's 64, or SigLIP's head on: the whole model is
    still exactly transformers' (and the key left out takes the class default, said in an '# assumed' line)."""
    from kvplan.model.hf.config import import_hf_config

    cfg = dict(CASES[name], torch_dtype="float32", vision_config={**CASES[name]["vision_config"], key: value})
    card = card_from_hf_config(cfg)
    assert count_params(card).total == sum(p.numel() for p in _model(cfg).parameters())
    assert (card.vision.out_hidden_size, card.vision.pooling_head) == ((48, False) if key == "out_hidden_size"
                                                                       else (None, True))
    left_out = dict(cfg, vision_config={k: v for k, v in cfg["vision_config"].items() if k != key})
    card, assumed = import_hf_config(left_out)
    assert f"vision_config.{key}={VISION_DEFAULTS['siglip_vision_model' if name == 'gemma3' else name][key]!r}" \
        in " ".join(assumed)
    assert count_params(card).total == sum(p.numel() for p in _model(left_out).parameters())


def _llama4_built(config) -> tuple[int, int]:
    """(all parameters, the vision model's and projector's) of transformers' Llama4ForConditionalGeneration."""
    with torch.device("meta"):
        model = transformers.Llama4ForConditionalGeneration(config)
    named = list(model.named_parameters())
    return (sum(p.numel() for _, p in named),
            sum(p.numel() for n, p in named if "vision_model" in n or "multi_modal_projector" in n))


def _scout_text() -> dict:
    import json
    from pathlib import Path

    data = json.loads((Path(__file__).parent / "data" / "hf_configs.json").read_text())
    return data["configs"]["meta-llama/Llama-4-Scout-17B-16E-Instruct"]["config"]


def test_llama4_default_config_is_transformers():
    """QA D6: Llama4Config() (model_type llama4, text_config + vision_config) imports whole: decoder, the 34-block
    vision model with its pixel-shuffle adapter, and the projector: 108,225,039,360 parameters, as built."""
    from kvplan.model.hf.config import import_hf_config

    config = transformers.Llama4Config()
    card, assumed = import_hf_config(config.to_dict())
    total, vision = _llama4_built(config)
    assert count_params(card).total == total == 108_225_039_360
    assert count_params(card).vision == vision == 455_178_240
    v = card.vision
    assert (v.kind, v.projector, v.spatial_merge_size, v.vision_output_dim) == ("llama4", "llama4", 2, 7680)
    side = v.image_size // v.patch_size  # vLLM mllama4.py: (16 tiles + the global one) x patches per chunk
    assert v.max_tokens_per_item == 17 * side * side // 4 and any(a.startswith("max_patches=16") for a in assumed)


def test_llama4_scout_source_config_is_transformers():
    """The bundled card's source (tests/data: Scout's text_config) inside a llama4 file: the decoder is the bundled
    card's, and decoder plus a Llama4VisionConfig tower count what transformers builds."""
    from kvplan import load_card

    text = _scout_text()
    cfg = dict(model_type="llama4", text_config=text, vision_config={"model_type": "llama4_vision_model"},
               torch_dtype="bfloat16")
    card = card_from_hf_config(cfg)
    total, vision = _llama4_built(transformers.Llama4Config(text_config=text, vision_config={}))
    assert count_params(card).total == total and count_params(card).vision == vision
    bundled = load_card("llama-4-scout-17b-16e")
    assert count_params(card).total - count_params(card).vision == count_params(bundled).total
    # the same file without its vision_config: the text decoder alone, the bundled card's count
    alone = card_from_hf_config(dict(model_type="llama4", text_config=text, torch_dtype="bfloat16"))
    assert alone.vision is None and count_params(alone).total == count_params(bundled).total


def test_unsupported_model_type_lists_the_multimodal_types():
    from kvplan.errors import KvplanError
    from kvplan.model.hf.vision import MULTIMODAL

    with pytest.raises(KvplanError, match="unsupported model_type 'qwen2_vl'") as err:
        card_from_hf_config({"model_type": "qwen2_vl"})
    listed = str(err.value).split("supported: ")[1].split(";")[0].split(", ")
    assert set(MULTIMODAL) <= set(listed) and {"llama4", "llama4_text", "qwen2_5_vl", "llama"} <= set(listed)
