"""Hybrids of attention, state-space mixers and MoE (Granite-MoE-Hybrid, Jamba, Falcon-H1) and linear-attention
hybrids (Qwen3-Next Gated DeltaNet, LFM2 short convs), proven against
transformers 5.x like tests/test_state_layers.py: exact parameter counts, and every tensor the real caches hold (the
whole cache object graph), layer by layer, for several batch / prompt / decode combinations."""

from __future__ import annotations

import functools
import warnings

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
warnings.filterwarnings("ignore")

from kvplan import count_params, estimate  # noqa: E402
from kvplan.errors import KvplanError  # noqa: E402
from kvplan.model.hf.config import card_from_hf_config  # noqa: E402
from kvplan.model.hf.families.hybrid import DEFAULTS as DEFAULTS_HYBRID  # noqa: E402
from cases import ATTN, GDN, HYBRID_CASES as CASES, JAMBA_V01, MAMBA2, QWEN3_NEXT_80B  # noqa: E402
from tiny_models import HYBRID_LENGTHS, case, case_card, dynamic_cache_test  # noqa: E402
from tiny_models import check_bf16_cache, check_config_defaults, check_static_cache, full_size_card  # noqa: E402

_case = functools.partial(case, CASES)
_card = functools.partial(case_card, CASES)


test_params_and_dynamic_cache_match_transformers = dynamic_cache_test(CASES, HYBRID_LENGTHS)


@pytest.mark.parametrize("name", ["falcon-h1", "granite-moe-hybrid", "qwen3-next", "lfm2", "minimax",
                                  "recurrent-gemma"])
def test_bf16_model_state_dtypes(name):
    """transformers keeps Mamba-2, Gated DeltaNet and RG-LRU states in float32 in a bf16 model, the conv states and
    MiniMax's lightning state in bf16."""
    check_bf16_cache(*_case(name), 4, 2)


@pytest.mark.parametrize("name", ["falcon-h1", "jamba", "qwen3-next", "lfm2"])
def test_static_cache_holds_states_beside_preallocated_kv(name):
    check_static_cache(*_case(name))


def test_falcon_h1_layers_hold_kv_and_both_states():
    """Falcon-H1 tiny (2 hybrid layers; 2 KV heads x 16; Mamba-2 of 8 heads x 16, 2 groups, d_state 8) in bf16 on
    vLLM, batch 3 at 40 tokens, block 16: conv_dim = 128 + 2 x 2 x 8 = 160."""
    card = _card("falcon-h1")
    assert (card.attention_layers, card.state_layers, card.mixer(0)) == (2, 2, "hybrid")
    est = estimate(card, batch=3, seq_len=40, engine="vllm", kv_dtype="bf16", block_size=16,
                   engine_groups=False)
    groups = {g.kind: g.total_bytes for g in est.kv_cache.groups}
    assert groups == {"full": 3 * 2 * 48 * 2 * 2 * 16 * 2, "conv_state": 3 * 2 * 160 * 3 * 2,
                      "ssm_state": 3 * 2 * 8 * 16 * 8 * 2}


def test_jamba_moe_every_other_layer():
    card = _card("jamba")
    assert [card.mixer(i) for i in range(4)] == ["mamba", "attention"] * 2
    assert [card.is_moe_layer(i) for i in range(4)] == [False, True] * 2
    assert (card.ssm.kind, card.ssm.dt_rank, card.ssm.dt_bc_norms) == ("mamba", 4, True)


def test_gated_deltanet_and_short_conv_states_by_hand():
    """Qwen3-Next tiny: Gated DeltaNet of 4 value heads x 8 and 2 key heads x 16, kernel 4: conv over q, k, v
    (2 x 2 x 16 + 4 x 8 = 96 channels), recurrent state 4 x 16 x 8 per layer (3 of 4 layers; every 4th attends).
    LFM2 tiny: a short conv over the 64 hidden channels, kernel 3, no recurrent state. bf16 on vLLM, batch 3."""
    est = estimate(_card("qwen3-next"), batch=3, seq_len=40, engine="vllm", kv_dtype="bf16", block_size=16,
                   engine_groups=False)
    groups = {g.kind: g.total_bytes for g in est.kv_cache.groups}
    assert groups == {"conv_state": 3 * 3 * 96 * 3 * 2, "ssm_state": 3 * 3 * 4 * 16 * 8 * 2,
                      "full": 3 * 1 * 48 * 2 * 2 * 16 * 2}
    lfm2 = estimate(_card("lfm2"), batch=3, seq_len=40, engine="hf-dynamic", kv_dtype="bf16")
    assert {g.kind: g.total_bytes for g in lfm2.kv_cache.groups} == {"conv_state": 3 * 2 * 64 * 3 * 2,
                                                                     "full": 3 * 1 * 40 * 2 * 2 * 16 * 2}
    # in_proj_qkvz 64 x (96 + 32), in_proj_ba 64 x 8, conv1d 96 x 4, dt_bias and A_log 4 each, norm 8, out_proj 32 x 64
    assert count_params(_card("qwen3-next")).ssm == 3 * (64 * 128 + 64 * 8 + 96 * 4 + 8 + 8 + 32 * 64)


@pytest.mark.parametrize("name", ["qwen3-next", "lfm2-bias-ffn"])
def test_layer_rule_without_layer_types_is_the_config_class_rule(name):
    """The config class derives layer_types (full_attention_interval; full_attn_idxs) when a file lists none."""
    model_type, kwargs = _case(name)
    data = transformers.AutoConfig.for_model(model_type, **kwargs).to_dict()
    rule = {k: v for k, v in data.items() if k != "layer_types"}
    assert card_from_hf_config(rule) == card_from_hf_config(data)


@pytest.mark.parametrize(("config", "total", "active"), [
    (JAMBA_V01, 52e9, 12e9),  # Jamba model card and paper (arXiv:2403.19887): 52B total, 12B active
    (QWEN3_NEXT_80B, 80e9, 3e9),  # Qwen3-Next-80B-A3B model card: 80B total, 3B activated (without embeddings)
])
def test_full_size_configs_match_published_totals(config, total, active):
    p = count_params(full_size_card(config))
    assert p.total == pytest.approx(total, rel=0.01)  # 51.57B; 79.67B
    # the active counts are rounded to whole billions: 12.11B; 3.25B without the embedding and LM head
    assert round((p.active - (p.embedding + p.lm_head) * (config is QWEN3_NEXT_80B)) / 1e9) * 1e9 == active


@pytest.mark.parametrize(("model_type", "name"), [("qwen3_5", "qwen3.5"), ("qwen3_5_moe", "qwen3.5-moe")])
def test_multimodal_qwen3_5_imports_its_text_decoder(model_type, name):
    text_type, kwargs = _case(name)
    text = transformers.AutoConfig.for_model(text_type, **kwargs).to_dict()
    full = transformers.AutoConfig.for_model(model_type, text_config=text).to_dict()
    skip = {"name", "source", "vision"}  # the whole file also brings its vision tower (tests/test_multimodal_hf.py)
    assert card_from_hf_config(full).model_dump(exclude=skip) == card_from_hf_config(text).model_dump(exclude=skip)


def test_defaults_hybrid_are_transformers_defaults():
    check_config_defaults(DEFAULTS_HYBRID)


@pytest.mark.parametrize(("model_type", "kwargs", "match"), [
    ("granitemoehybrid", dict(layer_types=["mamba", "moe"]), r"layer_types: \['mamba', 'moe'\] is not a list"),
    ("granitemoehybrid", dict(layer_types=["mamba"]), r"not a list of num_hidden_layers \(2\)"),
    ("jamba", dict(attn_layer_period=2, attn_layer_offset=2), r"attn_layer_offset \(2\) must be smaller"),
    ("jamba", dict(expert_layer_period=4, expert_layer_offset=1), "expert_layer_offset 1 .* not modelled"),
    ("falcon_h1", dict(mamba_d_ssm=100), r"ssm.num_heads: 8 does not divide ssm.intermediate_size 100"),
    ("qwen3_next", dict(**GDN, head_dim=16, num_experts=0, layer_types=["linear_attention"]),
     r"layer_types: .* num_hidden_layers \(2\)"),
    ("qwen3_next", dict(GDN, head_dim=16, linear_num_key_heads=3, num_experts=0),
     "ssm.n_groups: 3 does not divide ssm.num_heads 4"),
    ("lfm2", dict(layer_types=["conv", "mamba"]), r"layer_types: \['conv', 'mamba'\] is not a list"),
    ("lfm2_moe", dict(moe_intermediate_size=32), "missing key 'layer_types'"),
    ("minimax", dict(attn_type_list=[0, 1]), "attn_type_list .* ignored by transformers"),
    ("minimax", dict(sliding_window=8), "sliding_window: 8 is not modelled for minimax"),
    ("recurrent_gemma", dict(block_types=["recurrent", "mlp"]), r"block_types: \['recurrent', 'mlp'\] is not a list"),
    ("recurrent_gemma", dict(lru_width=90), "ssm.num_heads: 4 must divide ssm.intermediate_size 90"),
])
def test_inconsistent_configs_name_the_keys(model_type, kwargs, match):
    data = {**ATTN, **MAMBA2, "hidden_size": 64, "vocab_size": 128, "num_hidden_layers": 2,
            "shared_intermediate_size": 80, "num_local_experts": 4, "num_experts": 4, **kwargs,
            "model_type": model_type}
    with pytest.raises(KvplanError, match=match):
        card_from_hf_config(data)
