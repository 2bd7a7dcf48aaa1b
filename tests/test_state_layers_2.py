"""Hybrids of attention, state-space mixers and MoE (Granite-MoE-Hybrid, Jamba, Falcon-H1), proven against
transformers 5.x like tests/test_state_layers.py: exact parameter counts, and every tensor the real caches hold (the
whole cache object graph), layer by layer, for several batch / prompt / decode combinations."""

from __future__ import annotations

import dataclasses
import warnings

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
warnings.filterwarnings("ignore")

from kvplan import count_params, estimate  # noqa: E402
from kvplan.cost.engines import CacheRun, get_engine  # noqa: E402
from kvplan.cost.kvspec import layer_specs  # noqa: E402
from kvplan.errors import KvplanError  # noqa: E402
from kvplan.model.dtypes import parse_dtype  # noqa: E402
from kvplan.model.hf.config import card_from_hf_config  # noqa: E402
from kvplan.model.hf.defaults_hybrid import DEFAULTS_HYBRID  # noqa: E402
from test_state_layers import BASE, _measured  # noqa: E402

ATTN = dict(num_attention_heads=4, num_key_value_heads=2, intermediate_size=96)
MAMBA2 = dict(mamba_n_heads=8, mamba_d_state=8, mamba_n_groups=2)
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
]
LENGTHS = [(1, 2, 1), (2, 3, 1), (1, 5, 4), (2, 2, 6)]  # (batch, prompt, decode steps): shorter and longer than d_conv
_SPECS = {"attention": 1, "mamba": 2, "hybrid": 3, None: 0}  # per decoder layer: K/V; conv + SSM state; both


def _model(model_type: str, kwargs: dict, dtype=torch.float32):
    torch.manual_seed(0)
    cfg = transformers.AutoConfig.for_model(model_type, **kwargs)
    cfg._attn_implementation = "eager"
    return cfg, transformers.AutoModelForCausalLM.from_config(cfg, dtype=dtype).eval()


def _generate(model, cache, batch: int, prompt: int, steps: int):
    ids = torch.randint(0, 128, (batch, prompt))
    with torch.no_grad():
        out = model(ids, past_key_values=cache, use_cache=True)
        for _ in range(steps - 1):
            out = model(out.logits[:, -1:].argmax(-1), past_key_values=cache, use_cache=True)
    return cache


def _predicted(card, engine: str, kv: str, batch: int, seq_len: int, max_cache_len: int | None = None) -> list[int]:
    eng, run = get_engine(engine), CacheRun(seq_len, 0, max_cache_len)
    specs = iter(layer_specs(card, parse_dtype(kv), eng))
    per_layer = []
    for i in range(card.num_layers):
        layer = [next(specs) for _ in range(_SPECS[card.mixer(i)])]
        per_layer.append(sum(batch * s.positions_held(eng, run) * s.bytes_per_token for s in layer))
    assert next(specs, None) is None
    return per_layer


@pytest.mark.parametrize(("model_type", "kwargs"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_params_and_dynamic_cache_match_transformers(model_type, kwargs):
    cfg, model = _model(model_type, kwargs)
    card = card_from_hf_config(cfg.to_dict())
    assert count_params(card).total == sum(p.numel() for p in model.parameters())
    for batch, prompt, steps in LENGTHS:
        cache = _generate(model, transformers.DynamicCache(config=cfg), batch, prompt, steps)
        layers, whole = _measured(cache)
        seq_len = prompt + steps - 1
        assert layers == _predicted(card, "hf-dynamic", "fp32", batch, seq_len), (batch, prompt, steps)
        est = estimate(card, batch=batch, seq_len=seq_len, engine="hf-dynamic", kv_dtype="fp32")
        assert est.kv_cache.total_bytes == whole == sum(layers)


def _case(name: str):
    return next(c[1:] for c in CASES if c[0] == name)


def _card(name: str):
    model_type, kwargs = _case(name)
    return card_from_hf_config(transformers.AutoConfig.for_model(model_type, **kwargs).to_dict())


@pytest.mark.parametrize("name", ["falcon-h1", "granite-moe-hybrid"])
def test_bf16_model_keeps_the_ssm_state_in_float32(name):
    model_type, kwargs = _case(name)
    cfg, model = _model(model_type, kwargs, torch.bfloat16)
    card = card_from_hf_config({**cfg.to_dict(), "dtype": "bfloat16"})
    cache = _generate(model, transformers.DynamicCache(config=cfg), 2, 4, 2)
    layers, whole = _measured(cache)
    assert layers == _predicted(card, "hf-dynamic", "bf16", 2, 5)
    assert estimate(card, batch=2, seq_len=5, engine="hf-dynamic").kv_cache.total_bytes == whole


@pytest.mark.parametrize("name", ["falcon-h1", "jamba"])
def test_static_cache_holds_states_beside_preallocated_kv(name):
    model_type, kwargs = _case(name)
    cfg, model = _model(model_type, kwargs)
    card = card_from_hf_config(cfg.to_dict())
    cache = transformers.StaticCache(config=cfg, max_cache_len=16)
    with torch.no_grad():
        model(torch.randint(0, 128, (2, 5)), past_key_values=cache, use_cache=True, cache_position=torch.arange(5))
    layers, whole = _measured(cache)
    # each static attention layer also keeps an int64 scalar, its cumulative_length counter: bookkeeping, not cache
    counters = [8 * (card.mixer(i) in ("attention", "hybrid")) for i in range(card.num_layers)]
    predicted = _predicted(card, "hf-static", "fp32", 2, 5, max_cache_len=16)
    assert layers == [p + c for p, c in zip(predicted, counters)]
    est = estimate(card, batch=2, seq_len=5, engine="hf-static", max_cache_len=16, kv_dtype="fp32")
    assert est.kv_cache.total_bytes == whole - sum(counters)


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


def test_defaults_hybrid_are_transformers_defaults():
    for model_type, defaults in DEFAULTS_HYBRID.items():
        fields = {f.name: f.default for f in dataclasses.fields(transformers.CONFIG_MAPPING[model_type])}
        for key, value in defaults.items():
            assert fields[key] == value, (model_type, key)


@pytest.mark.parametrize(("model_type", "kwargs", "match"), [
    ("granitemoehybrid", dict(layer_types=["mamba", "moe"]), r"layer_types: \['mamba', 'moe'\] is not a list"),
    ("granitemoehybrid", dict(layer_types=["mamba"]), r"not a list of num_hidden_layers \(2\)"),
    ("jamba", dict(attn_layer_period=2, attn_layer_offset=2), r"attn_layer_offset \(2\) must be smaller"),
    ("jamba", dict(expert_layer_period=4, expert_layer_offset=1), "expert_layer_offset 1 .* not modelled"),
    ("falcon_h1", dict(mamba_d_ssm=100), r"ssm.num_heads: 8 does not divide ssm.intermediate_size 100"),
])
def test_inconsistent_configs_name_the_keys(model_type, kwargs, match):
    data = {**ATTN, **MAMBA2, "hidden_size": 64, "vocab_size": 128, "num_hidden_layers": 2,
            "shared_intermediate_size": 80, "num_local_experts": 4, "num_experts": 4, **kwargs,
            "model_type": model_type}
    with pytest.raises(KvplanError, match=match):
        card_from_hf_config(data)
