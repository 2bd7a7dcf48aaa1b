"""Kimi-Linear (Kimi Delta Attention + MLA + MoE) and OLMo-hybrid (Gated DeltaNet + OLMo-2 attention), proven against
transformers 5.x like tests/test_state_layers_2.py: exact parameter counts (tiny random-weight models, and the
full-size configs built on the meta device), and every tensor the real Dynamic/Static caches hold, layer by layer,
for several batch / prompt / decode combinations, in float32 and bfloat16."""

from __future__ import annotations

import dataclasses
import functools
import json
import warnings

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
warnings.filterwarnings("ignore")

from kvplan import count_params, estimate  # noqa: E402
from kvplan.cost.flops import step_flops  # noqa: E402
from kvplan.errors import KvplanError  # noqa: E402
from kvplan.model.catalog import card_from_dict  # noqa: E402
from kvplan.model.hf.config import card_from_hf_config, import_hf_config  # noqa: E402
from kvplan.model.hf.families.linear import DEFAULTS as DEFAULTS_KIMI  # noqa: E402
from cases import KIMI, KIMI_48B, KIMI_CASES as CASES  # noqa: E402
from tiny_models import HYBRID_LENGTHS, build_model, case, case_card, dynamic_cache_test  # noqa: E402
from tiny_models import check_bf16_cache, check_static_cache, full_size_card  # noqa: E402


_case = functools.partial(case, CASES)
_card = functools.partial(case_card, CASES)


test_params_and_dynamic_cache_match_transformers = dynamic_cache_test(CASES, HYBRID_LENGTHS)


@pytest.mark.parametrize("name", ["kimi-edges", "olmo-hybrid-gqa"])
def test_bf16_model_keeps_recurrent_states_in_float32(name):
    """KDA casts its recurrent state to float32 before the cache update; Gated DeltaNet's torch kernels return it in
    float32; the conv states and the K/V (MLA latents) stay bf16."""
    check_bf16_cache(*_case(name), 4, 3)


@pytest.mark.parametrize("name", ["kimi", "kimi-edges", "olmo-hybrid-gqa"])
def test_static_cache_holds_states_beside_preallocated_kv(name):
    check_static_cache(*_case(name), decode_steps=1)


def test_kimi_states_and_latents_by_hand():
    """Kimi tiny (5 layers: 4 KDA of 4 heads x 8, kernel 4; MLA at layer 4, latent 16 + key 8) in bf16 on vLLM, batch
    3 at 40 tokens, block 16: conv over q, k, v = 3 x 32 channels x 3 inputs in bf16; recurrent 4 x 8 x 8 in float32
    (vLLM kda_state_dtype) whatever the cache dtype; the MLA latent 24 per token, 48 positions (3 blocks)."""
    card = _card("kimi")
    assert [card.mixer(i) for i in range(5)] == ["mamba"] * 4 + ["attention"]
    assert [card.is_moe_layer(i) for i in range(5)] == [False] + [True] * 4
    est = estimate(card, batch=3, seq_len=40, engine="vllm", kv_dtype="bf16", block_size=16,
                   engine_groups=False)
    assert {g.kind: g.total_bytes for g in est.kv_cache.groups} == {
        "conv_state": 3 * 4 * 96 * 3 * 2, "ssm_state": 3 * 4 * 4 * 8 * 8 * 4, "mla": 3 * 1 * 48 * 24 * 2}
    # q/k/v 3 x 64 x 32, f_a 64 x 8, f_b 8 x 32, b 64 x 4, g_a 64 x 8, g_b 8 x 32, o 32 x 64; conv 96 x 4; dt_bias
    # 32, A_log 4, o_norm 8
    kda = 3 * 64 * 32 + 64 * 8 + 8 * 32 + 64 * 4 + 64 * 8 + 8 * 32 + 32 * 64 + 96 * 4 + 32 + 4 + 8
    assert count_params(card).ssm == 4 * kda
    assert card.ssm.state_dtype == "float32"


def test_olmo_hybrid_states_by_hand():
    """OLMo-hybrid tiny GQA: Gated DeltaNet of 4 value heads x 8 and 2 key heads x 16, kernel 3 (conv over q, k, v:
    2 x 2 x 16 + 4 x 8 = 96 channels); bf16 on vLLM, batch 2 at 20 tokens: recurrent 4 x 16 x 8 in the cache dtype
    (mamba_ssm_cache_dtype auto); the attention layer's K/V 2 heads x 16, 32 positions (2 blocks)."""
    est = estimate(_card("olmo-hybrid-gqa"), batch=2, seq_len=20, engine="vllm", kv_dtype="bf16", block_size=16,
                   engine_groups=False)
    assert {g.kind: g.total_bytes for g in est.kv_cache.groups} == {
        "conv_state": 2 * 2 * 96 * 2 * 2, "ssm_state": 2 * 2 * 4 * 16 * 8 * 2, "full": 2 * 1 * 32 * 2 * 2 * 16 * 2}


def test_olmo_hybrid_norms_per_block_are_two_for_both_mixers():
    """The attention blocks hold post_attention / post_feedforward norms, the linear ones input / post_attention:
    two per block either way, so norms_per_layer 2 holds for both mixers (counted against transformers)."""
    cfg, model = build_model("olmo_hybrid", _case("olmo-hybrid")[1])
    blocks = [sum(1 for n, _ in layer.named_parameters() if n.endswith("layernorm.weight")) for layer in model.model.layers]
    assert blocks == [2, 2, 2, 2] and card_from_hf_config(cfg.to_dict()).norms_per_layer == 2


def _meta_params(config: dict) -> int:
    """Parameters of the full-size transformers model, built on the meta device (no memory, no weights)."""
    cfg = transformers.AutoConfig.for_model(**{k: v for k, v in config.items() if k != "_name_or_path"})
    with torch.device("meta"):
        return sum(p.numel() for p in transformers.AutoModelForCausalLM.from_config(cfg).parameters())


def test_kimi_linear_48b_matches_transformers_and_its_published_size():
    card = full_size_card(KIMI_48B)
    p = count_params(card)
    assert p.total == _meta_params(KIMI_48B) == 49_122_675_072
    # the model card's "48B total, 3B activated" are rounded names: 49.12B; 2.73B active without the embeddings
    assert p.total == pytest.approx(48e9, rel=0.03)
    assert round((p.active - p.embedding - p.lm_head) / 1e9) == 3
    # vLLM, bf16, one 131,072-token request: 20 KDA layers (conv 3 x 4096 x 3 in bf16, state 32 x 128 x 128 fp32),
    # 7 MLA layers of 576 latent values per token
    est = estimate(card, batch=1, seq_len=131072, engine="vllm", engine_groups=False)
    assert {g.kind: g.total_bytes for g in est.kv_cache.groups} == {
        "conv_state": 20 * 3 * 4096 * 3 * 2, "ssm_state": 20 * 32 * 128 * 128 * 4, "mla": 7 * 131072 * 576 * 2}


def test_olmo_hybrid_config_class_defaults_match_transformers():
    """The OlmoHybridConfig defaults (its docstring's allenai/Olmo-Hybrid-7B): 32 layers, every 4th attends."""
    config = transformers.CONFIG_MAPPING["olmo_hybrid"]().to_dict()
    card = card_from_hf_config(config)
    assert count_params(card).total == _meta_params(config) == 7_430_870_688
    assert (card.attention_layers, card.state_layers, card.ssm.d_state, card.ssm.head_dim) == (8, 24, 96, 192)


@pytest.mark.parametrize("name", ["kimi", "kimi-edges", "olmo-hybrid", "olmo-hybrid-last"])
def test_layer_rule_without_layer_types_is_the_config_class_rule(name):
    """Without layer_types (and Kimi's mlp_layer_types) the card derives them as the config class does: from
    linear_attn_config's 1-based lists, first_k_dense_replace, or the every-4th rule."""
    model_type, kwargs = _case(name)
    data = transformers.AutoConfig.for_model(model_type, **kwargs).to_dict()
    rule = {k: v for k, v in data.items() if k not in ("layer_types", "mlp_layer_types")}
    assert card_from_hf_config(rule) == card_from_hf_config(data)


def test_defaults_kimi_are_transformers_defaults():
    for model_type, defaults in DEFAULTS_KIMI.items():
        cls = transformers.CONFIG_MAPPING[model_type]
        fields, built = {f.name: f.default for f in dataclasses.fields(cls)}, cls()
        for key, value in defaults.items():
            if key == "first_k_dense_replace":  # a __post_init__ kwarg: its default shows in mlp_layer_types
                assert built.mlp_layer_types.count("dense") == value
                continue
            if key == "partial_rotary_factor":  # transformers 5.x keeps it in the default rope_parameters
                assert built.rope_parameters["partial_rotary_factor"] == value, model_type
                continue
            assert value in (fields.get(key), getattr(built, key)), (model_type, key)


def test_defaults_are_named_when_assumed():
    _, assumed = import_hf_config({k: v for k, v in KIMI_48B.items() if k not in ("first_k_dense_replace",
                                                                                 "num_shared_experts")})
    assert any(a.startswith("first_k_dense_replace=1") for a in assumed)
    assert any(a.startswith("num_shared_experts=1") for a in assumed)


@pytest.mark.parametrize(("model_type", "kwargs", "match"), [
    ("kimi_linear", dict(num_key_value_heads=2), "num_key_value_heads: 2; .* allowed: num_attention_heads \\(4\\)"),
    ("kimi_linear", dict(linear_attn_config={"full_attn_layers": [1], "kda_layers": [1, 2]}),
     "linear_attn_config.full_attn_layers / kda_layers: .* exactly once"),
    ("kimi_linear", dict(linear_attn_config={"head_dim": "8"}), "linear_attn_config.head_dim: '8' .* not an integer"),
    ("kimi_linear", dict(linear_attn_config=[1]), "linear_attn_config: \\[1\\] is not a mapping"),
    ("kimi_linear", dict(mlp_layer_types=["sparse", "dense"]), "mlp_layer_types: .* dense layers first"),
    ("kimi_linear", dict(layer_types=["full_attention", "mamba"]), "layer_types: .* is not a list"),
    ("olmo_hybrid", dict(layer_types=["full_attention"] * 2), "at least one linear_attention and one full_attention"),
    ("olmo_hybrid", dict(linear_num_key_heads=3), "ssm.n_groups: 3 does not divide ssm.num_heads 4"),
    ("olmo_hybrid", dict(linear_key_head_dim=0), "linear_key_head_dim: 0 is out of range"),
])
def test_inconsistent_configs_name_the_keys(model_type, kwargs, match):
    data = {**KIMI, "num_hidden_layers": 2, "linear_num_value_heads": 4, **kwargs, "model_type": model_type}
    with pytest.raises(KvplanError, match=match):
        card_from_hf_config(data)


def test_kda_card_invariants_name_the_fields():
    data = _card("kimi").model_dump(mode="json")
    with pytest.raises(KvplanError, match="ssm.state_dtype: bfloat16; KDA keeps its recurrent state in float32"):
        card_from_dict({**data, "ssm": {**data["ssm"], "state_dtype": "bfloat16"}})
    with pytest.raises(KvplanError, match="ssm.d_state: only for kind"):
        card_from_dict({**data, "ssm": {**data["ssm"], "d_state": 8}})
    with pytest.raises(KvplanError, match=r"ssm.num_heads x ssm.head_dim \(4 x 8\) must equal"):
        card_from_dict({**data, "ssm": {**data["ssm"], "intermediate_size": 48}})


def test_verify_refuses_kda_and_deltanet_cards_plans_and_roofline_work(cli, tmp_path):
    """The reference model's mixers are mamba and mamba2 only: verify refuses in one line instead of treating the
    state layers as attention. KDA FLOPs, roofline and TP shards are modelled (tests/test_flops_kda.py): estimate
    --gpu reports them and plans work on one rank and on two."""
    card = _card("kimi")
    assert estimate(card, batch=1, seq_len=8, gpu="H100-SXM").roofline.time_per_output_token_s > 0
    assert step_flops(card, batch=1, prompt_len=4, seq_len=8).prefill.state_mixer > 0
    assert not any("not modelled" in n for n in estimate(card, batch=1, seq_len=8).notes)
    for name in ("kimi", "olmo-hybrid"):
        path = tmp_path / f"{name}.json"
        model_type, kwargs = _case(name)
        path.write_text(transformers.AutoConfig.for_model(model_type, **kwargs).to_json_string())
        code, _, err = cli("verify", "--hf-config", str(path), "--seq-len", "8")
        assert code == 2 and "ssm.kind: verify's reference model implements mamba and mamba2" in err, err
        for tp in ("1", "2"):
            code, out, err = cli("plan", "--hf-config", str(path), "--gpu", "H100-SXM", "--max-model-len", "64",
                                 "--tp", tp, "--json")
            assert code == 0 and json.loads(out)["kv_cache"]["state_page_bytes"] > 0, err


def test_deepseek_attention_bias_biases_the_mla_down_and_out_projections():
    """transformers' DeepSeek-V3 (like Kimi-Linear) biases q_a_proj, kv_a_proj_with_mqa and o_proj with
    attention_bias."""
    kwargs = dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4, vocab_size=128,
                  num_key_value_heads=4, kv_lora_rank=32, q_lora_rank=24, qk_rope_head_dim=8, qk_nope_head_dim=16,
                  v_head_dim=16, n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                  n_shared_experts=1, first_k_dense_replace=1, n_group=1, topk_group=1, attention_bias=True)
    cfg, model = build_model("deepseek_v3", kwargs)
    card = card_from_hf_config(cfg.to_dict())
    assert count_params(card).total == sum(p.numel() for p in model.parameters())
    assert count_params(card).attention - count_params(card_from_hf_config({**cfg.to_dict(), "attention_bias": False})
                                                       ).attention == 2 * (24 + 32 + 8 + 64)


@pytest.mark.parametrize("name", ["kimi-edges", "olmo-hybrid-gqa"])
def test_imported_card_yaml_round_trips(name):
    """`kvplan cards import` writes a card that loads back to the same architecture (derived KDA state dtype and
    widths included)."""
    import yaml

    from kvplan.model.hf.config import card_yaml

    model_type, kwargs = _case(name)
    card, assumed = import_hf_config(transformers.AutoConfig.for_model(model_type, **kwargs).to_dict())
    assert card_from_dict(yaml.safe_load(card_yaml(card, assumed))) == card
