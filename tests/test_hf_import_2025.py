"""The 2024-2026 families (families_2025), proven against transformers 5.x: exact parameter counts, and the bytes
its Dynamic and Static caches hold layer by layer, at the window / chunk edges."""

from __future__ import annotations

import warnings

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
warnings.filterwarnings("ignore")

from kvplan import count_params, estimate  # noqa: E402
from kvplan.errors import KvplanError  # noqa: E402
from kvplan.model.hf.config import card_from_hf_config  # noqa: E402
from kvplan.model.hf.families.mla import DEFAULTS as DEFAULTS_2025  # noqa: E402
from kvplan.cost.runtimes import get_engine  # noqa: E402
from tiny_models import KV_BATCH as BATCH, build_kv_model, count_flops, kv_layer_bytes  # noqa: E402
from tiny_models import predicted_kv_layer_bytes  # noqa: E402

IDS = dict(pad_token_id=0, bos_token_id=0, eos_token_id=0)
DEC = dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4, vocab_size=128, **IDS)
W = 6  # sliding window / attention chunk of the tiny configs; runs end at W-1, W, W+1 and past 2W
CASES = [
    ("olmo2", "olmo2", dict(DEC, num_key_value_heads=2)),
    ("olmo3-sliding", "olmo3", dict(DEC, num_hidden_layers=4, num_key_value_heads=2, sliding_window=W)),
    ("granite-bias", "granite", dict(DEC, num_key_value_heads=2, attention_bias=True, mlp_bias=True)),
    ("granitemoe", "granitemoe", dict(DEC, num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2)),
    ("glm", "glm", dict(DEC, num_key_value_heads=2, head_dim=32)),
    ("glm4", "glm4", dict(DEC, num_key_value_heads=2, head_dim=32)),
    ("exaone4", "exaone4", dict(DEC, num_hidden_layers=4, num_key_value_heads=2, sliding_window=W)),
    ("smollm3-nope", "smollm3", dict(DEC, num_hidden_layers=4, num_key_value_heads=2)),
    ("ernie4_5-bias", "ernie4_5", dict(DEC, num_key_value_heads=2, head_dim=32, use_bias=True)),
    ("cohere2", "cohere2", dict(DEC, num_hidden_layers=4, num_key_value_heads=2, sliding_window=W)),
    ("starcoder2-sliding", "starcoder2", dict(DEC, num_key_value_heads=2, sliding_window=W)),
    ("phi-qk-layernorm", "phi", dict(DEC, qk_layernorm=True)),
    ("stablelm-parallel", "stablelm", dict(DEC, num_key_value_heads=2, use_qkv_bias=True,
                                           use_parallel_residual=True)),
    ("persimmon", "persimmon", dict(DEC)),
    ("nemotron", "nemotron", dict(DEC, num_key_value_heads=2, head_dim=16)),
    # GLM-4.5: a dense first layer, then routed experts plus a shared MLP of 2 x moe_intermediate_size; q/k norms
    ("glm4-moe-qk-norm", "glm4_moe", dict(DEC, num_hidden_layers=3, num_key_value_heads=2, head_dim=32,
                                          attention_bias=True, use_qk_norm=True, n_routed_experts=4,
                                          num_experts_per_tok=2, moe_intermediate_size=32, n_shared_experts=2,
                                          n_group=2, topk_group=1)),
    ("glm4-moe-air", "glm4_moe", dict(DEC, num_hidden_layers=2, num_key_value_heads=1, head_dim=16,
                                      n_routed_experts=4, num_experts_per_tok=1, moe_intermediate_size=24,
                                      num_nextn_predict_layers=1)),
    ("gpt-oss", "gpt_oss", dict(DEC, num_hidden_layers=3, num_key_value_heads=2, head_dim=16, sliding_window=W,
                                num_local_experts=4, num_experts_per_tok=2)),
    ("llama4-chunked", "llama4_text", dict(DEC, num_hidden_layers=4, num_key_value_heads=2, head_dim=16,
                                           intermediate_size_mlp=80, num_local_experts=4, num_experts_per_tok=1,
                                           interleave_moe_layer_step=2, attention_chunk_size=W)),
]
LENGTHS = [(4, 1), (3, 3), (5, 2), (W, 1), (4, 10)]  # (prompt, decode steps): W-1, W, W+1 tokens, and 14


def _generate(model, cache, prompt: int, steps: int):
    ids = torch.randint(0, 128, (BATCH, prompt))
    with torch.no_grad():
        out = model(ids, past_key_values=cache, use_cache=True)
        for _ in range(steps - 1):
            out = model(out.logits[:, -1:].argmax(-1), past_key_values=out.past_key_values, use_cache=True)
    return out.past_key_values


@pytest.mark.parametrize(("model_type", "kwargs"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_params_and_dynamic_cache_match_transformers(model_type, kwargs):
    cfg, model = build_kv_model(model_type, kwargs)
    card = card_from_hf_config(cfg.to_dict())
    assert count_params(card).total == sum(p.numel() for p in model.parameters())
    for prompt, steps in LENGTHS:
        cache = _generate(model, transformers.DynamicCache(config=cfg), prompt, steps)
        measured = kv_layer_bytes(cache)
        assert measured == predicted_kv_layer_bytes(card, "hf-dynamic", prompt + steps - 1), (prompt, steps)
    total = estimate(card, batch=BATCH, seq_len=prompt + steps - 1, engine="hf-dynamic", kv_dtype="fp32")
    assert total.kv_cache.total_bytes == sum(measured)


@pytest.mark.parametrize("case", ["olmo3-sliding", "gpt-oss", "llama4-chunked"])
def test_static_cache_matches_transformers(case):
    model_type, kwargs = next(c[1:] for c in CASES if c[0] == case)
    cfg, model = build_kv_model(model_type, kwargs)
    card = card_from_hf_config(cfg.to_dict())
    cache = transformers.StaticCache(config=cfg, max_cache_len=16)
    with torch.no_grad():
        model(torch.randint(0, 128, (BATCH, 5)), past_key_values=cache, use_cache=True, cache_position=torch.arange(5))
    assert kv_layer_bytes(cache) == predicted_kv_layer_bytes(card, "hf-static", 5, max_cache_len=16)


def test_layer_kinds_read_from_the_config_classes():
    """The per-layer rules each config class falls back to when config.json lists no layer_types."""
    def kinds(model_type: str, **kw) -> tuple[str, ...]:
        data = {**transformers.CONFIG_MAPPING[model_type](**{**DEC, "num_key_value_heads": 2, **kw}).to_dict(), "layer_types": None}
        return card_from_hf_config(data).layer_types

    assert kinds("olmo3", num_hidden_layers=4, sliding_window=W) == ("sliding",) * 3 + ("global",)
    assert kinds("gpt_oss", head_dim=16, num_local_experts=2, num_experts_per_tok=1) == ("sliding", "global")
    assert kinds("llama4_text", num_hidden_layers=4, head_dim=16) == ("chunked",) * 3 + ("global",)
    assert kinds("smollm3", num_hidden_layers=4) == ("global",) * 4


def test_chunked_engines_hold_the_chunk():
    """ideal: the tokens of the current chunk; transformers: its sliding layer of W = chunk (W-1 positions);
    vLLM: the blocks from the current chunk's start (ChunkedLocalAttentionManager)."""
    cfg, _ = build_kv_model("llama4_text", dict(CASES[-1][2]))
    card = card_from_hf_config(cfg.to_dict())
    chunked = [g for g in estimate(card, seq_len=13, engine="ideal").kv_cache.groups if g.kind == "chunked"][0]
    assert (chunked.layers, chunked.positions_held) == (3, 1)  # 13 = 2 x 6 + 1: one token into the third chunk
    held = {e: [g.positions_held for g in estimate(card, seq_len=23, engine=e, block_size=4).kv_cache.groups]
            for e in ("ideal", "hf-dynamic", "vllm")}
    assert held == {"ideal": [5, 23], "hf-dynamic": [5, 23], "vllm": [8, 24]}  # chunk start 18: blocks 4..5


def test_defaults_2025_are_transformers_defaults():
    for model_type, defaults in DEFAULTS_2025.items():
        cfg = transformers.CONFIG_MAPPING[model_type]()
        for key, value in defaults.items():
            assert getattr(cfg, key) == value, (model_type, key)


@pytest.mark.parametrize(("model_type", "kwargs", "match"), [
    ("stablelm", dict(qk_layernorm=True), "qk_layernorm true"),
    ("exaone4", dict(sliding_window_pattern="LLLG"), "sliding_window_pattern 'LLLG'"),
    ("llama4_text", dict(head_dim=16, intermediate_size_mlp=80, num_local_experts=2, moe_layers=[0]),
     "moe_layers \\[0\\] unsupported"),
])
def test_unsupported_variants_are_named(model_type, kwargs, match):
    data = {**DEC, "num_key_value_heads": 2, "model_type": model_type, **kwargs}
    with pytest.raises(KvplanError, match=match):
        card_from_hf_config({k: v for k, v in data.items() if v is not None})


@pytest.mark.parametrize("case", ["llama4-chunked", "gpt-oss", "olmo3-sliding", "phi-qk-layernorm", "glm4", "glm4-moe-qk-norm"])
def test_flops_match_flop_counter(case):
    """Prefill of 11 tokens and the decode step after 9 (past the chunk/window of 6) against FlopCounterMode."""
    from kvplan.cost.flops import decode_step_flops, prefill_flops

    model_type, kwargs = next(c[1:] for c in CASES if c[0] == case)
    cfg = transformers.AutoConfig.for_model(model_type, **kwargs)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="eager",
                                                          experts_implementation="eager").eval()
    card = card_from_hf_config(cfg.to_dict())
    ids = torch.randint(0, 128, (BATCH, 11))
    prefill = count_flops(lambda: model(ids, use_cache=False))
    with torch.no_grad():
        cache = model(ids[:, :9], past_key_values=transformers.DynamicCache(config=cfg), use_cache=True).past_key_values
    decode = count_flops(lambda: model(ids[:, 9:10], past_key_values=cache, use_cache=True))
    pre = prefill_flops(card, batch=BATCH, prompt_len=11, engine=get_engine("hf-dynamic"))
    dec = decode_step_flops(card, batch=BATCH, cache_len=9, engine=get_engine("hf-dynamic"))
    assert (pre.total, pre.attention_core, pre.lm_head) == _routed(card, prefill, BATCH * 11)
    assert (dec.total, dec.attention_core, dec.lm_head) == _routed(card, decode, BATCH)


def _routed(card, counted: tuple[int, int, int], tokens: int) -> tuple[int, int, int]:
    """transformers' Llama4TextMoe runs every expert on every token (routed_in = hidden.repeat(num_experts)) in
    torch.bmm; kvplan counts the experts_per_token a token is routed to. Take the unrouted experts' FLOPs out of
    the total, and every expert's out of the bmm (attention-core) count."""
    if card.moe is None or card.moe.layer_interval == 1:
        return counted
    moe_layers = sum(card.is_moe_layer(i) for i in range(card.num_layers))
    per_expert = 2 * 3 * card.hidden_size * card.moe.expert_ffn_size * tokens * moe_layers  # gate, up, down
    unrouted = (card.moe.num_experts - card.moe.experts_per_token) * per_expert
    return counted[0] - unrouted, counted[1] - card.moe.num_experts * per_expert, counted[2]


def test_chunked_causal_flops_count_only_the_chunk():
    from kvplan.cost.flops import decode_step_flops, prefill_flops

    cfg = transformers.AutoConfig.for_model("llama4_text", **CASES[-1][2])
    card = card_from_hf_config(cfg.to_dict())  # layers 0-2 chunked (C = 6), layer 3 global; 4 heads x 16
    per_entry = 2 * 2 * 4 * 16  # QK + AV, 2 FLOPs per MAC, heads x head_dim
    pre = prefill_flops(card, batch=1, prompt_len=14)  # chunks of 6, 6, 2 tokens
    assert pre.causal_attention_core == per_entry * (3 * (21 + 21 + 3) + 14 * 15 // 2)
    dec = decode_step_flops(card, batch=1, cache_len=13)  # token 14 is the 2nd of its chunk
    assert dec.causal_attention_core == per_entry * (3 * 2 + 14)


@pytest.mark.parametrize(("model_type", "nearest"), [("olmo4", "olmo3, olmo2, glm4"), ("gpt-oss", "gpt_oss, gptj, gpt2"),
                                                     ("qwen2_vl", "qwen2_5_vl, qwen3_vl, qwen2")])
def test_unknown_model_type_names_the_nearest(model_type, nearest, cli, tmp_path):
    with pytest.raises(KvplanError, match=f"unsupported model_type '{model_type}'; supported: .*; nearest: {nearest}$"):
        card_from_hf_config({"model_type": model_type})
    (tmp_path / "config.json").write_text(f'{{"model_type": "{model_type}"}}')
    code, _, err = cli("cards", "import", str(tmp_path / "config.json"))
    assert code == 2 and f"nearest: {nearest}" in err


def test_multimodal_type_without_text_config_says_what_it_reads():
    """QA D6: llama4 is supported (text_config + vision_config); a file with neither is told so, not 'unsupported'."""
    with pytest.raises(KvplanError, match="model_type llama4 is read from its text_config \\(llama4_text\\) and "
                                          "vision_config; this file has no text_config object$"):
        card_from_hf_config({"model_type": "llama4"})


@pytest.mark.parametrize("name", ["gpt-oss-20b", "gpt-oss-120b", "smollm3-3b"])
def test_bundled_2025_cards_are_their_configs(name):
    from hf_configs_2025 import CONFIGS

    from kvplan import load_card

    skip = {"name", "source", "published_params"}
    if "architectures" not in CONFIGS[name]:  # the copy here leaves it out: the card's own source says it
        skip.add("hf_architecture")
    bundled = load_card(name)
    assert card_from_hf_config(CONFIGS[name], name=name).model_dump(exclude=skip) == bundled.model_dump(exclude=skip)
    # gpt-oss: OpenAI's model card gives 20.91B / 116.83B total and 3.61B / 5.13B active (without the embedding)
    published = {"gpt-oss-20b": (20.91, 3.61), "gpt-oss-120b": (116.83, 5.13)}
    if name in published:
        p = count_params(bundled)
        assert (round(p.total / 1e9, 2), round((p.active - p.embedding) / 1e9, 2)) == published[name]
