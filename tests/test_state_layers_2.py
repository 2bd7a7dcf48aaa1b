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
from kvplan.model.hf.defaults_hybrid import DEFAULTS_HYBRID  # noqa: E402
from tiny_models import BASE, HYBRID_LENGTHS, case, case_card, dynamic_cache_test  # noqa: E402
from tiny_models import check_bf16_cache, check_config_defaults, check_static_cache, full_size_card  # noqa: E402

ATTN = dict(num_attention_heads=4, num_key_value_heads=2, intermediate_size=96)
MAMBA2 = dict(mamba_n_heads=8, mamba_d_state=8, mamba_n_groups=2)
GDN = dict(linear_num_value_heads=4, linear_num_key_heads=2, linear_key_head_dim=16, linear_value_head_dim=8)
CASES = [
    ("granite-moe-hybrid", "granitemoehybrid", dict(
        BASE, **ATTN, **MAMBA2, num_hidden_layers=3, shared_intermediate_size=80, num_local_experts=4,
        num_experts_per_tok=2, layer_types=["mamba", "attention", "mamba"], position_embedding_type="rope",
        attention_bias=True, mamba_proj_bias=True)),
    ("granite-hybrid-dense-nope", "granitemoehybrid", dict(
        BASE, **ATTN, **MAMBA2, num_hidden_layers=4, shared_intermediate_size=80, num_local_experts=0,
        layer_types=["mamba", "mamba", "mamba", "attention"], mamba_d_conv=3)),
    ("jamba", "jamba", dict(BASE, **ATTN, num_hidden_layers=4, mamba_d_state=8, num_experts=4, num_experts_per_tok=2,
                            attn_layer_period=2, attn_layer_offset=1)),
    ("jamba-dense-rank", "jamba", dict(BASE, **ATTN, num_hidden_layers=3, mamba_d_state=8, num_experts=1,
                                       attn_layer_period=3, attn_layer_offset=0, mamba_dt_rank=6,
                                       mamba_proj_bias=True, mamba_conv_bias=False)),
    ("falcon-h1", "falcon_h1", dict(BASE, **ATTN, **MAMBA2, num_hidden_layers=2, head_dim=16, mamba_d_ssm=128,
                                    mamba_rms_norm=True, projectors_bias=True, attention_bias=True)),
    ("falcon-h1-no-norm", "falcon_h1", dict(BASE, **ATTN, **MAMBA2, num_hidden_layers=2, mamba_d_ssm=None,
                                            mlp_bias=True, mamba_proj_bias=True)),
    ("qwen3-next", "qwen3_next", dict(BASE, **ATTN, **GDN, num_hidden_layers=4, head_dim=16, num_experts=4,
                                      num_experts_per_tok=2, moe_intermediate_size=32,
                                      shared_expert_intermediate_size=48)),
    ("qwen3-next-dense-bias", "qwen3_next", dict(BASE, **ATTN, **GDN, num_hidden_layers=3, head_dim=8, num_experts=0,
                                                 attention_bias=True, linear_conv_kernel_dim=3,
                                                 layer_types=["full_attention", "linear_attention",
                                                              "linear_attention"])),
    ("qwen3.5", "qwen3_5_text", dict(BASE, **ATTN, **GDN, num_hidden_layers=4, head_dim=16)),
    ("qwen3.5-moe", "qwen3_5_moe_text", dict(BASE, **{k: v for k, v in ATTN.items() if k != "intermediate_size"},
                                             **GDN, num_hidden_layers=4, head_dim=16, num_experts=4,
                                             num_experts_per_tok=2, moe_intermediate_size=32,
                                             shared_expert_intermediate_size=48)),
    ("minimax", "minimax", dict(BASE, **ATTN, num_hidden_layers=3, head_dim=16, num_local_experts=4,
                                num_experts_per_tok=2)),
    ("minimax-linear-last", "minimax", dict(BASE, **ATTN, num_hidden_layers=4, num_local_experts=2,
                                            num_experts_per_tok=1, layer_types=["linear_attention"] * 3
                                            + ["full_attention"])),
    ("recurrent-gemma", "recurrent_gemma", dict(BASE, **{**ATTN, "num_key_value_heads": 1}, num_hidden_layers=3,
                                                attention_window_size=3)),
    ("recurrent-gemma-lru-bias", "recurrent_gemma", dict(BASE, **ATTN, num_hidden_layers=4, lru_width=96,
                                                         conv1d_width=3, attention_bias=True, attention_window_size=5,
                                                         block_types=["recurrent", "attention"])),
    ("lfm2", "lfm2", dict(BASE, **ATTN, num_hidden_layers=3, layer_types=["conv", "full_attention", "conv"])),
    ("lfm2-moe", "lfm2_moe", dict(BASE, **ATTN, num_hidden_layers=4, moe_intermediate_size=32, num_experts=4,
                                  num_experts_per_tok=2, num_dense_layers=1,
                                  layer_types=["conv", "full_attention", "conv", "conv"])),
    ("lfm2-bias-ffn", "lfm2", dict(BASE, **{**ATTN, "intermediate_size": 120}, num_hidden_layers=4,
                                   full_attn_idxs=[2], conv_bias=True, conv_L_cache=4, block_ffn_dim_multiplier=1.5,
                                   block_multiple_of=32)),
]
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
    est = estimate(card, batch=3, seq_len=40, engine="vllm", kv_dtype="bf16", block_size=16)
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
    est = estimate(_card("qwen3-next"), batch=3, seq_len=40, engine="vllm", kv_dtype="bf16", block_size=16)
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


# Full-size config.json values (sizes and layer rules; Jamba-v0.1's are the JambaConfig defaults). Not bundled as
# cards yet: report, sweep, verify and the vLLM/SGLang per-rank planners still refuse state layers.
JAMBA_V01 = {
    "model_type": "jamba", "_name_or_path": "ai21labs/Jamba-v0.1", "torch_dtype": "bfloat16",
    "vocab_size": 65536, "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
    "num_attention_heads": 32, "num_key_value_heads": 8, "hidden_act": "silu", "max_position_embeddings": 262144,
    "tie_word_embeddings": False, "num_experts": 16, "num_experts_per_tok": 2, "expert_layer_period": 2,
    "expert_layer_offset": 1, "attn_layer_period": 8, "attn_layer_offset": 4, "mamba_d_state": 16, "mamba_d_conv": 4,
    "mamba_expand": 2, "mamba_dt_rank": 256, "mamba_conv_bias": True, "mamba_proj_bias": False,
}
QWEN3_NEXT_80B = {
    "model_type": "qwen3_next", "_name_or_path": "Qwen/Qwen3-Next-80B-A3B-Instruct", "torch_dtype": "bfloat16",
    "vocab_size": 151936, "hidden_size": 2048, "intermediate_size": 5120, "num_hidden_layers": 48,
    "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 256, "hidden_act": "silu",
    "max_position_embeddings": 262144, "tie_word_embeddings": False, "attention_bias": False,
    "full_attention_interval": 4, "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128,
    "linear_value_head_dim": 128, "linear_num_key_heads": 16, "linear_num_value_heads": 32,
    "decoder_sparse_step": 1, "mlp_only_layers": [], "num_experts": 512, "num_experts_per_tok": 10,
    "moe_intermediate_size": 512, "shared_expert_intermediate_size": 512, "norm_topk_prob": True,
}


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
    skip = {"name", "source"}
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
