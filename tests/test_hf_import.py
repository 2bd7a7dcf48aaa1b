"""config.json import, proven against transformers: exact parameters, and the exact bytes its caches hold."""

from __future__ import annotations

import warnings

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
warnings.filterwarnings("ignore")

from kvplan import count_params, estimate  # noqa: E402
from kvplan.errors import KvplanError  # noqa: E402
from kvplan.model.hf.config import card_from_hf_config  # noqa: E402
from kvplan.model.hf.families.dense import DEFAULTS  # noqa: E402
from tiny_models import KV_BATCH as BATCH, build_kv_model, kv_layer_bytes, predicted_kv_layer_bytes  # noqa: E402

DEC = dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4, vocab_size=128)
# (id, model_type, config kwargs): tiny configs covering MHA, GQA, MQA, sliding, alternating, explicit head_dim, MLA.
CASES = [
    ("llama-gqa", "llama", dict(DEC, num_key_value_heads=2)),
    ("llama-mqa-bias", "llama", dict(DEC, num_key_value_heads=1, attention_bias=True, mlp_bias=True)),
    ("mistral-sliding", "mistral", dict(DEC, num_key_value_heads=2, sliding_window=8)),
    ("mixtral", "mixtral", dict(DEC, num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2,
                                sliding_window=None)),
    ("qwen2-window-off", "qwen2", dict(DEC, num_key_value_heads=2, sliding_window=8, use_sliding_window=False)),
    ("qwen2-moe", "qwen2_moe", dict(DEC, num_key_value_heads=2, num_experts=4, num_experts_per_tok=2,
                                    moe_intermediate_size=32, shared_expert_intermediate_size=48)),
    ("qwen3-head-dim", "qwen3", dict(DEC, num_key_value_heads=2, head_dim=32)),
    ("qwen3-moe", "qwen3_moe", dict(DEC, num_key_value_heads=2, head_dim=32, num_experts=4, num_experts_per_tok=2,
                                    moe_intermediate_size=32)),
    ("gemma", "gemma", dict(DEC, num_key_value_heads=1, head_dim=32)),
    ("gemma2-alternating", "gemma2", dict(DEC, num_hidden_layers=4, num_key_value_heads=2, head_dim=32,
                                          sliding_window=8)),
    ("gemma3-5to1", "gemma3_text", dict(DEC, num_hidden_layers=7, num_key_value_heads=2, head_dim=32,
                                        sliding_window=8)),
    ("phi3-sliding", "phi3", dict(DEC, num_key_value_heads=4, sliding_window=8, pad_token_id=0)),
    ("deepseek-v2-mla", "deepseek_v2", dict(DEC, num_key_value_heads=4, kv_lora_rank=32, q_lora_rank=None, qk_rope_head_dim=8,
                                            qk_nope_head_dim=16, v_head_dim=16, n_routed_experts=4,
                                            num_experts_per_tok=2, moe_intermediate_size=32, n_shared_experts=1,
                                            first_k_dense_replace=1, n_group=1, topk_group=1)),
    ("deepseek-v3-mla", "deepseek_v3", dict(DEC, num_key_value_heads=4, kv_lora_rank=32, q_lora_rank=24, qk_rope_head_dim=8,
                                            qk_nope_head_dim=16, v_head_dim=16, n_routed_experts=4,
                                            num_experts_per_tok=2, moe_intermediate_size=32, n_shared_experts=1,
                                            first_k_dense_replace=1, n_group=1, topk_group=1)),
    ("falcon-7b-mqa", "falcon", dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, vocab_size=128,
                                     multi_query=True, parallel_attn=True)),
    ("falcon-40b-newarch", "falcon", dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, vocab_size=128,
                                          new_decoder_architecture=True, num_kv_heads=2)),
    ("falcon-rw-mha", "falcon", dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, vocab_size=128,
                                     multi_query=False, parallel_attn=False, bias=True, alibi=True)),
    ("gpt2", "gpt2", dict(n_embd=64, n_layer=2, n_head=4, vocab_size=128, n_positions=64)),
    ("gpt-neox", "gpt_neox", dict(DEC)),
    ("gptj", "gptj", dict(n_embd=64, n_layer=2, n_head=4, vocab_size=128, n_positions=64, rotary_dim=8)),
    ("opt", "opt", dict(hidden_size=64, ffn_dim=96, num_hidden_layers=2, num_attention_heads=4, vocab_size=128,
                        max_position_embeddings=64, word_embed_proj_dim=64)),
    ("bloom", "bloom", dict(hidden_size=64, n_layer=2, n_head=4, vocab_size=128)),
    ("mpt", "mpt", dict(d_model=64, n_layers=2, n_heads=4, vocab_size=128, max_seq_len=64)),
]
PROMPT, STEPS = 12, 3  # a 12-token prompt passes the 8-token windows; 3 decode steps follow


def _run(model, cache, ids):
    with torch.no_grad():
        out = model(ids, past_key_values=cache, use_cache=True)
        for step in range(STEPS):
            nxt = out.logits[:, -1:].argmax(-1)
            out = model(nxt, past_key_values=out.past_key_values, use_cache=True)
    return out.past_key_values


@pytest.mark.parametrize(("model_type", "kwargs"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_params_and_dynamic_cache_match_transformers(model_type, kwargs):
    cfg, model = build_kv_model(model_type, kwargs)
    card = card_from_hf_config(cfg.to_dict())
    assert count_params(card).total == sum(p.numel() for p in model.parameters())
    ids = torch.randint(0, 128, (BATCH, PROMPT))
    cache = _run(model, transformers.DynamicCache(config=cfg), ids)
    measured = kv_layer_bytes(cache)
    assert measured == predicted_kv_layer_bytes(card, "hf-dynamic", PROMPT + STEPS)
    total = estimate(card, batch=BATCH, seq_len=PROMPT + STEPS, engine="hf-dynamic", kv_dtype="fp32")
    assert total.kv_cache.total_bytes == sum(measured)


@pytest.mark.parametrize("case", ["llama-gqa", "mistral-sliding", "gemma2-alternating", "deepseek-v3-mla"])
def test_static_cache_matches_transformers(case):
    model_type, kwargs = next(c[1:] for c in CASES if c[0] == case)
    cfg, model = build_kv_model(model_type, kwargs)
    card = card_from_hf_config(cfg.to_dict())
    cache = transformers.StaticCache(config=cfg, max_cache_len=32)
    ids = torch.randint(0, 128, (BATCH, PROMPT))
    with torch.no_grad():
        model(ids, past_key_values=cache, use_cache=True, cache_position=torch.arange(PROMPT))
    assert kv_layer_bytes(cache) == predicted_kv_layer_bytes(card, "hf-static", PROMPT, max_cache_len=32)


@pytest.mark.parametrize("proj", ["relu", "gated-gelu"])
def test_t5_self_and_cross_attention_caches(proj):
    kwargs = dict(d_model=64, d_kv=32, d_ff=96, num_layers=2, num_decoder_layers=3, num_heads=4, vocab_size=128,
                  feed_forward_proj=proj, tie_word_embeddings=proj == "relu", decoder_start_token_id=0)
    cfg, model = build_kv_model("t5", kwargs)
    card = card_from_hf_config(cfg.to_dict())
    assert count_params(card).total == sum(p.numel() for p in model.parameters())
    enc = torch.randint(0, 128, (BATCH, 10))
    cache = transformers.EncoderDecoderCache(transformers.DynamicCache(), transformers.DynamicCache())
    dec = torch.zeros((BATCH, 1), dtype=torch.long)
    with torch.no_grad():
        encoded = model.get_encoder()(enc)
        for _ in range(4):
            out = model(encoder_outputs=encoded, decoder_input_ids=dec[:, -1:], past_key_values=cache, use_cache=True)
            cache = out.past_key_values
            dec = torch.cat([dec, out.logits[:, -1:].argmax(-1)], dim=1)
    assert kv_layer_bytes(cache) == predicted_kv_layer_bytes(card, "hf-dynamic", 4, encoder_len=10)


def test_bert_params_match_bert_model():
    cfg = transformers.BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=96,
                                  vocab_size=128, max_position_embeddings=64)
    card = card_from_hf_config(cfg.to_dict())
    assert card.architecture == "encoder-only" and not card.has_kv_cache
    assert count_params(card).total == sum(p.numel() for p in transformers.BertModel(cfg).parameters())


def test_kimi_k2_is_deepseek_v3_as_built():
    """Kimi-K2 (model_type kimi_k2, architecture DeepseekV3ForCausalLM): the card of its config is DeepSeek-V3's, and
    transformers' DeepseekV3ForCausalLM built from that config holds exactly the card's parameters and cache."""
    model_type, kwargs = next(c[1:] for c in CASES if c[0] == "deepseek-v3-mla")
    cfg, model = build_kv_model(model_type, {**kwargs, "first_k_dense_replace": 1, "n_shared_experts": 1})
    kimi = {**cfg.to_dict(), "model_type": "kimi_k2", "architectures": ["DeepseekV3ForCausalLM"]}
    card = card_from_hf_config(kimi)
    assert card.hf_architecture == "DeepseekV3ForCausalLM"  # config.json architectures[0]
    assert card.model_dump(exclude={"name", "source", "hf_architecture"}) == card_from_hf_config(
        cfg.to_dict()).model_dump(exclude={"name", "source", "hf_architecture"})
    assert count_params(card).total == sum(p.numel() for p in model.parameters())
    cache = _run(model, transformers.DynamicCache(config=cfg), torch.randint(0, 128, (BATCH, PROMPT)))
    assert kv_layer_bytes(cache) == predicted_kv_layer_bytes(card, "hf-dynamic", PROMPT + STEPS)
    with pytest.raises(KvplanError, match="missing key 'first_k_dense_replace'"):  # no transformers defaults
        card_from_hf_config({k: v for k, v in kimi.items() if k != "first_k_dense_replace"})


def test_defaults_are_transformers_defaults():
    for model_type, defaults in DEFAULTS.items():
        cfg = transformers.CONFIG_MAPPING[model_type]()
        for key, value in defaults.items():
            assert getattr(cfg, key) == value, (model_type, key)


def test_sliding_dynamic_view_keeps_window_storage():
    """transformers slices W-1 positions as a view of the step's W-position tensor: the storage holds W."""
    cfg, model = build_kv_model("mistral", dict(DEC, num_key_value_heads=2, sliding_window=8))
    cache = _run(model, transformers.DynamicCache(config=cfg), torch.randint(0, 128, (BATCH, PROMPT)))
    keys = cache.layers[0].keys
    assert keys.shape[2] == 7 and keys.untyped_storage().nbytes() == BATCH * 2 * 8 * 16 * 4
