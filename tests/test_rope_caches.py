"""The rotary cos/sin caches a serving engine builds: one per distinct rotary config, each as long as its scaling
makes it (kvplan.cost.parallel.rope_caches), read from config.json (kvplan.model.hf.rope).

Oracles: vLLM's own length expressions evaluated by torch (``torch.arange(max_position * factor)`` of
LinearScalingRotaryEmbedding / DynamicNTKScalingRotaryEmbedding, ``original_max_position * factor`` of
YaRNScalingRotaryEmbedding, the short + long caches of Phi3LongRoPEScaledRotaryEmbedding), Google's gemma-3-27b-it
config.json (vendored), and the two public vLLM 0.8 logs of it (tests/test_multimodal.py pins the weights)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvplan import KvplanError, load_card
from kvplan.cost import serving_sglang as sg
from kvplan.cost.parallel import rope_buffer_bytes, rope_caches
from kvplan.model.catalog import card_from_dict
from kvplan.model.hf.config import card_from_hf_config

DATA = Path(__file__).with_name("data")
CONFIGS = json.loads((DATA / "hf_configs.json").read_text())["configs"]
BASE = dict(name="tiny", source="test", num_layers=2, hidden_size=64, num_heads=4, ffn_size=128, gated_ffn=True,
            activation="silu", vocab_size=100, tie_embeddings=False, norm="rmsnorm", position="rope",
            max_position_embeddings=1001, dtype="bfloat16")
LLAMA = dict(model_type="llama", hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, vocab_size=128, max_position_embeddings=1001, torch_dtype="bfloat16")


def test_gemma3_27b_builds_a_scaled_global_cache_and_a_local_one():
    """google/gemma-3-27b-it: global layers linear x 8 over 131,072 positions, sliding layers their own unscaled
    cache (rope_local_base_freq): (1,048,576 + 131,072) x 128 x 2 B = 288 MiB, where one plain cache is 32 MiB."""
    card = card_from_hf_config(CONFIGS["google/gemma-3-27b-it"]["config"])
    assert (card.rope_scaling.rope_type, card.rope_scaling.factor, card.local_rope) == ("linear", 8.0, True)
    assert rope_caches(card) == (131_072 * 8, 131_072)
    assert rope_buffer_bytes(card, 2) == 288 * 2**20
    assert rope_buffer_bytes(load_card("gemma-3-27b-it"), 2) == rope_buffer_bytes(card, 2)
    # SGLang (same get_rope, gemma3_causal.py the same two ropes) keeps them in float32 on CUDA from 0.4.2
    assert sg.rope_cache_bytes(rope_buffer_bytes(card, 2), 2, True) == 576 * 2**20


def test_gemma3_1b_has_two_unscaled_caches():
    """Gemma 3 1B has no rope_scaling, yet its sliding layers' get_rope key (base 10,000, {"rope_type": "default"})
    differs from the global layers' (base 1e6, None): two caches of 32,768 positions."""
    assert rope_caches(load_card("gemma-3-1b")) == (32_768, 32_768)
    assert rope_caches(load_card("gemma-2-9b")) == (8_192,)  # one rope_theta for every Gemma 2 layer


@pytest.mark.parametrize(("kind", "max_pos", "factor", "original"), [
    ("linear", 1001, 1.5, None), ("linear", 131_072, 8.0, None), ("dynamic", 1001, 2.5, None),
    ("yarn", 1001, 4.0, 333), ("yarn", 163_840, 40.0, 4096), ("yarn", 1001, 2.75, 101),
])
def test_scaled_cache_lengths_match_vllms_arange(kind, max_pos, factor, original):
    torch = pytest.importorskip("torch")
    start = original if kind == "yarn" else max_pos  # get_rope hands YaRN original_max_position
    expected = torch.arange(start * factor, dtype=torch.float).shape[0]  # vLLM's _compute_cos_sin_cache
    scaling = {"rope_type": kind, "factor": factor, **({"original_max_position_embeddings": original} if original else {})}
    card = card_from_dict({**BASE, "max_position_embeddings": max_pos, "rope_scaling": scaling})
    assert rope_caches(card) == (expected,)


def test_longrope_holds_short_and_long_caches():
    torch = pytest.importorskip("torch")
    card = card_from_dict({**BASE, "rope_scaling": {"rope_type": "longrope", "original_max_position_embeddings": 64}})
    short, long = torch.zeros(64, 16), torch.zeros(1001, 16)  # Phi3LongRoPEScaledRotaryEmbedding: cat([short, long])
    assert rope_caches(card) == (torch.cat([short, long]).shape[0],)
    assert rope_buffer_bytes(card, 2) == (64 + 1001) * 16 * 2


@pytest.mark.parametrize(("rope", "expected"), [
    ({"rope_scaling": {"rope_type": "linear", "factor": 2}}, {"rope_type": "linear", "factor": 2.0}),
    ({"rope_scaling": {"type": "yarn", "factor": 40, "original_max_position_embeddings": 64, "mscale": 0.7}},
     {"rope_type": "yarn", "factor": 40.0, "original_max_position_embeddings": 64}),
    ({"rope_scaling": {"type": "su", "short_factor": [1.0], "long_factor": [2.0],
                       "original_max_position_embeddings": 64}},
     {"rope_type": "longrope", "original_max_position_embeddings": 64}),
    # transformers 5.x: rope_parameters, flat or per layer type (the full-attention layers' entry)
    ({"rope_parameters": {"rope_type": "dynamic", "factor": 3.0, "rope_theta": 1e4}}, {"rope_type": "dynamic", "factor": 3.0}),
    ({"rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
                          "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6}}},
     {"rope_type": "linear", "factor": 8.0}),
    # no original context: the top-level key (Phi-3), else max_position_embeddings, as transformers falls back
    ({"rope_scaling": {"rope_type": "yarn", "factor": 4.0}},
     {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 1001}),
    ({"original_max_position_embeddings": 64, "rope_scaling": {"type": "longrope", "short_factor": [1.0],
                                                                "long_factor": [2.0]}},
     {"rope_type": "longrope", "original_max_position_embeddings": 64}),
    # these leave the cache at max_position_embeddings: not carried
    ({"rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                       "original_max_position_embeddings": 64}}, None),
    ({"rope_scaling": {"rope_type": "dynamic", "alpha": 1000.0}}, None),
    ({"rope_scaling": {"factor": 2.0}}, None),  # no type: transformers only warns, vLLM builds the default rope
    ({"rope_parameters": {"rope_type": "default", "rope_theta": 1e4}}, None),
])
def test_reader_carries_the_scalings_that_size_the_cache(rope, expected):
    card = card_from_hf_config({**LLAMA, **rope})
    assert (card.rope_scaling.model_dump(exclude_none=True) if card.rope_scaling else None) == expected


@pytest.mark.parametrize(("rope", "field"), [
    ({"rope_scaling": {"rope_type": "linear", "factor": "8"}}, "rope_scaling.factor"),
    ({"rope_scaling": {"rope_type": "linear", "factor": -1}}, "rope_scaling.factor"),
    ({"rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 0}},
     "rope_scaling.original_max_position_embeddings"),
    ({"rope_scaling": [1, 2]}, "rope_scaling"),
])
def test_bad_rope_scaling_names_the_key(rope, field):
    with pytest.raises(KvplanError, match=field) as err:
        card_from_hf_config({**LLAMA, **rope})
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(("change", "field"), [
    ({"local_rope": True}, "local_rope"),  # no sliding layers
    ({"position": "learned", "rope_scaling": {"rope_type": "linear", "factor": 2.0}}, "rope_scaling"),
    ({"rope_scaling": {"rope_type": "yarn", "factor": 2.0}}, "original_max_position_embeddings"),
    ({"rope_scaling": {"rope_type": "linear"}}, "factor"),
    ({"rope_scaling": {"rope_type": "linear", "factor": "8"}}, "factor"),  # strict: a YAML string is not a number
])
def test_card_refuses_inconsistent_rope_fields(change, field):
    with pytest.raises(KvplanError, match=field):
        card_from_dict({**BASE, **change})


def test_gemma3_reader_marks_the_local_rope_only_with_sliding_layers():
    gemma3 = dict(LLAMA, model_type="gemma3_text", head_dim=16, sliding_window=8, hidden_activation="gelu_pytorch_tanh")
    assert card_from_hf_config(gemma3).local_rope
    assert not card_from_hf_config({**gemma3, "layer_types": ["full_attention"] * 2}).local_rope


def test_allocator_replay_accounts_for_the_rest_of_the_gemma3_logs():
    """benchmarks/allocator_replay.py (an investigation, not a kvplan rule): the tensors vLLM 0.8.2 creates on one TP
    rank of Gemma-3-27B-it, replayed through a model of PyTorch's caching allocator, request kvplan's weights per GPU
    (to the small Attention scalars and position_ids kvplan does not count) and hold the 13.1665 GiB vllm#15676
    logs: the 0.099 GiB kvplan still misses are the unsplit tails of segments rounded up to 2 MiB."""
    import importlib.util
    import sys

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "allocator_replay.py"
    spec = importlib.util.spec_from_file_location("allocator_replay", path)
    sim = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = sim  # its dataclasses look their module up
    spec.loader.exec_module(sim)
    a = sim.replay()
    card = load_card("gemma-3-27b-it")
    from kvplan.cost.parallel import Layout, rank_weights
    from kvplan.model.dtypes import parse_dtype

    w = rank_weights(card, parse_dtype("bfloat16"), Layout(tp=4), 0, 0)
    assert 0 < a.requested - (w.bytes + w.buffers_bytes) < 64 * 1024  # scalars and position_ids only
    assert round(a.allocated / 2**30, 4) == 13.1665
    assert 100 * 2**20 < a.allocated - a.requested < 103 * 2**20
    # the same allocator over vLLM 0.10.1's Qwen2-7B-Instruct: the dennislee22 logs' figures (TP 1 and TP 2)
    assert [round(sim.replay_qwen2(tp).allocated / 2**30, 4) for tp in (1, 2)] == [14.2488, 7.1217]
