"""Hybrids of attention, state-space mixers and MoE (Granite-MoE-Hybrid, Jamba, Falcon-H1) and linear-attention
hybrids (Qwen3-Next Gated DeltaNet, LFM2 short convs), proven against
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
from kvplan.cost.kvspec import layer_specs, state_specs  # noqa: E402
from kvplan.errors import KvplanError  # noqa: E402
from kvplan.model.dtypes import parse_dtype  # noqa: E402
from kvplan.model.hf.config import card_from_hf_config  # noqa: E402
from kvplan.model.hf.defaults_hybrid import DEFAULTS_HYBRID  # noqa: E402
from test_state_layers import BASE, _measured, _tensors  # noqa: E402
from transformers.models.minimax.modeling_minimax import MiniMaxCache  # noqa: E402

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
# (batch, prompt, decode steps): shorter and longer than d_conv; RecurrentGemma's window 3 at W-1, W, W+1 and beyond
LENGTHS = [(1, 2, 1), (2, 3, 1), (2, 4, 1), (1, 5, 4), (2, 2, 6)]



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
    states = len(state_specs(card, parse_dtype(kv), eng.transformers)) if card.ssm else 0  # 2; 1 for a short conv
    per_layer = []
    for i in range(card.num_layers):  # per decoder layer: K/V; the states; both (hybrid); nothing (mlp)
        count = {"attention": 1, "mamba": states, "hybrid": 1 + states, None: 0}[card.mixer(i)]
        layer = [next(specs) for _ in range(count)]
        per_layer.append(sum(batch * s.positions_held(eng, run) * s.bytes_per_token for s in layer))
    assert next(specs, None) is None
    return per_layer


def _new_cache(cfg):
    """The cache the model runs with: MiniMax refuses any but its own MiniMaxCache."""
    return MiniMaxCache() if cfg.model_type == "minimax" else transformers.DynamicCache(config=cfg)


def _measured_layers(cache, layers: int, model=None) -> tuple[list[int], int]:
    """(bytes per decoder layer, bytes of the whole cache object and of the states held outside it). MiniMaxCache
    keeps each lightning layer's state in ``linear_cache[i]``, beside ``layers`` (which then holds only the attention
    layers' K/V, lazily); RecurrentGemma keeps its RG-LRU states on the model's modules."""
    if model is not None and model.config.model_type == "recurrent_gemma":
        # its local-attention layers as the project counts a sliding DynamicCache layer (tests/test_hf_import.py):
        # the W-1 positions kept, not the W-position storage their view pins, nor the int64 window scalar
        held = [sum(t.numel() * t.element_size() for t in (layer.keys, layer.values))
                if hasattr(layer, "_sliding_window_tensor") else _tensors(layer, set()) for layer in cache.layers]
        on_model = [_tensors([getattr(b, "conv1d_state", None), getattr(getattr(b, "rg_lru", None), "recurrent_states",
                                                                        None)], set())
                    for b in (layer.temporal_block for layer in model.model.layers)]
        per_layer = [a + b for a, b in zip(held, on_model)]
        return per_layer, sum(per_layer)
    if not hasattr(cache, "linear_cache"):
        return _measured(cache)
    per_layer = [(_tensors(cache.layers[i], set()) if i < len(cache.layers) else 0)
                 + (_tensors(cache.linear_cache[i], set()) if i < len(cache.linear_cache) else 0)
                 for i in range(layers)]
    return per_layer, _tensors(cache, set())


@pytest.mark.parametrize(("model_type", "kwargs"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_params_and_dynamic_cache_match_transformers(model_type, kwargs):
    cfg, model = _model(model_type, kwargs)
    card = card_from_hf_config(cfg.to_dict())
    assert count_params(card).total == sum(p.numel() for p in model.parameters())
    for batch, prompt, steps in LENGTHS:
        cache = _generate(model, _new_cache(cfg), batch, prompt, steps)
        layers, whole = _measured_layers(cache, card.num_layers, model)
        seq_len = prompt + steps - 1
        if model_type == "recurrent_gemma" and steps == 1:  # before the first decode step its conv state is a
            short = [batch * card.ssm.conv_dim * 4 * (card.mixer(i) == "mamba") for i in range(card.num_layers)]
            layers, whole = [n + s for n, s in zip(layers, short)], whole + sum(short)  # tensor of d_conv - 1
        assert layers == _predicted(card, "hf-dynamic", "fp32", batch, seq_len), (batch, prompt, steps)
        est = estimate(card, batch=batch, seq_len=seq_len, engine="hf-dynamic", kv_dtype="fp32")
        assert est.kv_cache.total_bytes == whole == sum(layers)


def _case(name: str):
    return next(c[1:] for c in CASES if c[0] == name)


def _card(name: str):
    model_type, kwargs = _case(name)
    return card_from_hf_config(transformers.AutoConfig.for_model(model_type, **kwargs).to_dict())


@pytest.mark.parametrize("name", ["falcon-h1", "granite-moe-hybrid", "qwen3-next", "lfm2", "minimax",
                                  "recurrent-gemma"])
def test_bf16_model_state_dtypes(name):
    """transformers keeps Mamba-2, Gated DeltaNet and RG-LRU states in float32 in a bf16 model, the conv states and
    MiniMax's lightning state in bf16."""
    model_type, kwargs = _case(name)
    cfg, model = _model(model_type, kwargs, torch.bfloat16)
    card = card_from_hf_config({**cfg.to_dict(), "dtype": "bfloat16"})
    cache = _generate(model, _new_cache(cfg), 2, 4, 2)
    layers, whole = _measured_layers(cache, card.num_layers, model)
    assert layers == _predicted(card, "hf-dynamic", "bf16", 2, 5)
    assert estimate(card, batch=2, seq_len=5, engine="hf-dynamic").kv_cache.total_bytes == whole


@pytest.mark.parametrize("name", ["falcon-h1", "jamba", "qwen3-next", "lfm2"])
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
    card = card_from_hf_config(config)
    built = transformers.AutoConfig.for_model(**{k: v for k, v in config.items() if k != "_name_or_path"}).to_dict()
    skip = {"name", "source"}
    assert card_from_hf_config(built).model_dump(exclude=skip) == card.model_dump(exclude=skip)
    p = count_params(card)
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
    for model_type, defaults in DEFAULTS_HYBRID.items():
        cls = transformers.CONFIG_MAPPING[model_type]
        fields, built = {f.name: f.default for f in dataclasses.fields(cls)}, cls()
        for key, value in defaults.items():
            assert value in (fields[key], getattr(built, key)), (model_type, key)


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
