"""State-space (Mamba) layers, proven against transformers 5.x: exact parameter counts, and every tensor its caches
really hold (the whole cache object graph), layer by layer, for pure Mamba / Mamba-2 models and attention hybrids."""

from __future__ import annotations

import dataclasses
import warnings

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
warnings.filterwarnings("ignore")

from kvplan import count_params, estimate  # noqa: E402
from kvplan.errors import KvplanError  # noqa: E402
from kvplan.model.card import ModelCard  # noqa: E402
from kvplan.model.hf.config import card_from_hf_config  # noqa: E402
from kvplan.model.hf.families.state_space import DEFAULTS as DEFAULTS_SSM  # noqa: E402
from cases import ATTN, STATE_CASES as CASES  # noqa: E402
from tiny_models import check_bf16_cache, check_static_cache, dynamic_cache_test  # noqa: E402

LENGTHS = [(1, 2, 1), (2, 3, 1), (1, 5, 4), (2, 2, 6)]  # (batch, prompt, decode steps): shorter and longer than d_conv


test_params_and_dynamic_cache_match_transformers = dynamic_cache_test(CASES, LENGTHS)


@pytest.mark.parametrize("case", ["mamba2", "bamba"])
def test_bf16_model_keeps_the_ssm_state_in_float32(case):
    """transformers' torch scan hands the cache a float32 SSM state; the conv state follows the model dtype."""
    model_type, kwargs = next(c[1:] for c in CASES if c[0] == case)
    _, cache = check_bf16_cache(model_type, kwargs, 4, 2)
    layer = cache.layers[0]
    assert (layer.conv_states[0].dtype, layer.recurrent_states[0].dtype) == (torch.bfloat16, torch.float32)


def test_static_cache_holds_states_beside_preallocated_kv():
    check_static_cache(*next(c[1:] for c in CASES if c[0] == "bamba"))


def _bamba_card():
    return card_from_hf_config(transformers.AutoConfig.for_model("bamba", **CASES[4][2]).to_dict())


def test_estimate_numbers_by_hand():
    """Bamba tiny (3 layers: mamba, attention, mamba; Mamba-2 of 8 heads x 16, 2 groups, d_state 8, d_conv 4) in
    bf16 on vLLM, batch 3 at 40 tokens, block 16: conv_dim = 128 + 2 x 2 x 8 = 160."""
    est = estimate(_bamba_card(), batch=3, seq_len=40, engine="vllm", kv_dtype="bf16", block_size=16,
                   engine_groups=False)
    groups = {g.kind: g for g in est.kv_cache.groups}
    assert groups["conv_state"].total_bytes == 3 * 2 * (160 * 3) * 2  # d_conv - 1 inputs held by vLLM
    assert groups["ssm_state"].total_bytes == 3 * 2 * (8 * 16 * 8) * 2  # mamba_ssm_cache_dtype auto: bf16
    assert groups["full"].total_bytes == 3 * 1 * 48 * 2 * 2 * 16 * 2  # cdiv(40, 16) = 3 blocks of 16
    assert est.kv_cache.bytes_per_token == 2 * 2 * 16 * 2  # only the attention layer grows with tokens
    assert est.kv_cache.total_bytes == sum(groups[k].total_bytes for k in groups) == 5760 + 12288 + 18432
    assert "one state per sequence" in groups["ssm_state"].formula and groups["ssm_state"].positions_held == 1
    longer = estimate(_bamba_card(), batch=3, seq_len=400, engine="vllm", kv_dtype="bf16", engine_groups=False)
    assert [g.total_bytes for g in longer.kv_cache.groups][:2] == [5760, 12288]  # constant in tokens
    # one mixer: in_proj 64 x (128 z + 160 xBC + 8 dt) + 296 bias, conv1d 160 x 4 + 160, dt_bias/A_log/D 3 x 8,
    # gated norm 128, out_proj 128 x 64 + 64 bias
    assert est.weights.breakdown["ssm"] == 2 * (64 * 296 + 296 + 160 * 4 + 160 + 24 + 128 + 128 * 64 + 64)


def test_state_dtype_rule_and_ideal_width():
    """Nemotron-H asks for a float32 SSM state (mamba_ssm_cache_dtype); the ideal cache keeps d_conv - 1 inputs."""
    cfg = transformers.AutoConfig.for_model("nemotron_h", **CASES[5][2])
    card = card_from_hf_config(cfg.to_dict())
    assert card.ssm.state_dtype == "float32"
    groups = {g.kind: g.total_bytes for g in estimate(card, seq_len=9, engine="ideal", kv_dtype="bf16").kv_cache.groups}
    conv_dim = 64 + 2 * 2 * 8
    assert groups == {"conv_state": 2 * conv_dim * 2 * 2, "ssm_state": 2 * 4 * 16 * 8 * 4, "full": 9 * 2 * 2 * 16 * 2}


def test_accessors_express_the_blocks():
    cfg = transformers.AutoConfig.for_model("nemotron_h", **CASES[5][2])
    card = card_from_hf_config(cfg.to_dict())
    assert [card.mixer(i) for i in range(5)] == ["mamba", None, "mamba", "attention", None]
    assert [card.has_mlp(i) for i in range(5)] == [False, True, False, False, True]
    assert (card.attention_layers, card.state_layers) == (1, 2)
    pure = card_from_hf_config(transformers.AutoConfig.for_model("mamba2", **CASES[3][2]).to_dict())
    assert (pure.attention_kind, pure.attention_layers, pure.has_mlp(0)) == ("none", 0, False)
    assert count_params(pure).attention == count_params(pure).mlp == 0


def test_flops_and_roofline_for_state_cards():
    """FLOPs and roofline bounds are reported for state cards (proven in tests/test_flops_states.py)."""
    est = estimate(_bamba_card(), seq_len=8, gpu="h100-sxm")
    assert est.flops.prefill.state_mixer > 0 and est.flops.decode_step.total > est.flops.decode_step.state_mixer
    assert est.roofline.decode_step.bound == "memory" and est.roofline.time_per_output_token_s > 0


def test_defaults_ssm_are_transformers_defaults():
    for model_type, defaults in DEFAULTS_SSM.items():
        fields = {f.name: f.default for f in dataclasses.fields(transformers.CONFIG_MAPPING[model_type])}
        for key, value in defaults.items():
            assert fields[key] == value, (model_type, key)


@pytest.mark.parametrize(("model_type", "kwargs", "match"), [
    ("mamba2", dict(hidden_size=64, num_heads=8, head_dim=8, state_size=8),
     r"ssm.num_heads x ssm.head_dim \(8 x 8\) must equal ssm.intermediate_size \(128\)"),
    ("mamba2", dict(hidden_size=64, num_heads=8, head_dim=16, n_groups=3, state_size=8),
     "ssm.n_groups: 3 does not divide ssm.num_heads 8"),
    ("nemotron_h", dict(hidden_size=64, num_hidden_layers=3, layers_block_type=["mamba", "attention"]),
     r"num_hidden_layers \(3\) and layers_block_type \(2 entries\) disagree"),
    ("nemotron_h", dict(hidden_size=64, layers_block_type=["moe", "mlp"], n_routed_experts=4, moe_intermediate_size=8,
                        moe_shared_expert_intermediate_size=8), "an mlp block after the first moe block"),
    ("nemotron_h", dict(hidden_size=64, layers_block_type=["mamba", "moe"], n_routed_experts=4,
                        moe_intermediate_size=8, moe_shared_expert_intermediate_size=8, moe_latent_size=16),
     "moe_latent_size: 16 .* not modelled"),
    ("nemotron_h", dict(hidden_size=64, layers_block_type=["mamba", "moe"], n_routed_experts=4, n_shared_experts=2,
                        moe_intermediate_size=8, moe_shared_expert_intermediate_size=8), "n_shared_experts: 2: "),
    ("bamba", dict(hidden_size=64, num_hidden_layers=2, attn_layer_indices=[5]), "attn_layer_indices: \\[5\\]"),
])
def test_inconsistent_configs_name_the_keys(model_type, kwargs, match):
    data = {**ATTN, "vocab_size": 128, "num_hidden_layers": 2, "head_dim": 16, "mamba_num_heads": 8,
            "mamba_head_dim": 16, "ssm_state_size": 8, "mamba_n_heads": 8, "mamba_d_state": 8, **kwargs,
            "model_type": model_type}
    with pytest.raises(KvplanError, match=match):
        card_from_hf_config(data)


def test_card_layer_list_and_ssm_block_must_agree():
    base = dict(name="x", source="test", num_layers=2, hidden_size=64, num_heads=4, ffn_size=96, gated_ffn=True,
                activation="silu", vocab_size=128, tie_embeddings=False, norm="rmsnorm", position="rope",
                max_position_embeddings=64, dtype="float32")
    ssm = dict(kind="mamba2", d_state=8, num_heads=8)
    with pytest.raises(ValueError, match="ssm: required when layer_pattern has mamba or hybrid layers"):
        ModelCard(**base, layer_pattern=("mamba", "global"))
    with pytest.raises(ValueError, match="layer_pattern has no mamba or hybrid layers"):
        ModelCard(**base, ssm=ssm)
    with pytest.raises(ValueError, match="mlp layers .* need mixer_mlp false"):
        ModelCard(**base, layer_pattern=("mamba", "mlp"), ssm=ssm)
    with pytest.raises(ValueError, match="ssm.dt_rank: only for kind mamba"):
        ModelCard(**base, layer_pattern=("mamba", "global"), ssm={**ssm, "dt_rank": 4})
    card = ModelCard(**base, layer_pattern=("mamba", "global"), ssm=ssm)
    assert (card.ssm.intermediate_size, card.ssm.head_dim, card.ssm.conv_dim) == (128, 16, 144)
