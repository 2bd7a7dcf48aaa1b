"""KV-cache bytes pinned to independently computed figures (issue #2 section 6, from the models' config.json)."""

import pytest

from kvplan import estimate

GiB = 1024**3


@pytest.mark.parametrize(
    ("model", "bytes_per_token"),
    [
        ("llama-2-7b", 524_288),  # 32 layers x 32 heads x 128 x 2 x 2 B = 512 KiB
        ("llama-2-13b", 819_200),  # 40 x 40 x 128 x 2 x 2 = 800 KiB
        ("llama-2-70b", 327_680),  # GQA: 80 x 8 x 128 x 2 x 2
        ("falcon-7b", 8_192),  # MQA: 32 x 1 x 64 x 2 x 2
        ("deepseek-v3", 70_272),  # MLA: 61 x (512 + 64) x 2 B, no factor 2 for K/V
    ],
)
def test_bytes_per_token(model, bytes_per_token):
    assert estimate(model, seq_len=1).kv_cache.bytes_per_token == bytes_per_token


def test_llama2_70b_as_mha():
    r = estimate("llama-2-70b", batch=16, seq_len=4096, kv_heads=64)
    assert r.kv_cache.bytes_per_token == 2_621_440  # 2.5 MiB
    assert r.kv_cache.total_bytes == 171_798_691_840 == 160 * GiB
    assert estimate("llama-2-70b", seq_len=1, attention="mha").kv_cache.bytes_per_token == 2_621_440
    assert estimate("llama-2-70b", seq_len=1, attention="mqa").kv_cache.bytes_per_token == 40_960
    assert estimate("llama-2-70b", seq_len=1, attention="gqa:8").kv_cache.bytes_per_token == 327_680


def test_llama2_13b_2048_tokens():
    assert estimate("llama-2-13b", seq_len=2048).kv_cache.total_bytes == 1_677_721_600  # 1600 MiB


def test_llama2_7b_main_job():
    r = estimate("llama-2-7b", batch=16, seq_len=4096)
    assert r.kv_cache.total_bytes == 32 * GiB
    assert r.kv_cache.groups[0].formula == (
        "16 seq x 32 layers x 32 kv_heads x 128 head_dim x 4096 tokens x 2 (K,V) x 2 B = 32.0 GiB")


def test_mistral_hf_dynamic_keeps_w_minus_1():
    r = estimate("mistral-7b-v0.1", seq_len=8192, engine="hf-dynamic")
    (group,) = r.kv_cache.groups
    assert group.positions_held == 4095 and group.layers == 32
    assert r.kv_cache.total_bytes == 32 * 4095 * 8 * 128 * 2 * 2


def test_sliding_window_engines():
    # ideal keeps the window itself; below the window every engine keeps every token
    assert estimate("mistral-7b-v0.1", seq_len=8192).kv_cache.groups[0].positions_held == 4096
    for engine in ("ideal", "hf-dynamic", "vllm"):
        assert estimate("mistral-7b-v0.1", seq_len=100, engine=engine, block_size=1).kv_cache.groups[0].positions_held == 100
    static = estimate("mistral-7b-v0.1", seq_len=100, engine="hf-static", max_cache_len=8192)
    assert static.kv_cache.groups[0].positions_held == 4096  # min(max_cache_len, W)


def test_vllm_blocks():
    # 4097 tokens in blocks of 16: cdiv = 257 blocks = 4112 slots per layer
    r = estimate("llama-2-7b", seq_len=4097, engine="vllm")
    assert r.kv_cache.groups[0].positions_held == 4112
    assert r.kv_cache.total_bytes == 4112 * 524_288
    # sliding: at 8192 tokens the 4096-token window spans exactly 256 blocks; at 8200 a partial block is added
    assert estimate("mistral-7b-v0.1", seq_len=8192, engine="vllm").kv_cache.groups[0].positions_held == 4096
    assert estimate("mistral-7b-v0.1", seq_len=8200, engine="vllm").kv_cache.groups[0].positions_held == 4096 + 16


def test_gemma2_alternating_layers():
    r = estimate("gemma-2-9b", seq_len=8192, kv_dtype="bf16")
    kinds = {g.kind: g for g in r.kv_cache.groups}
    assert kinds["sliding"].layers == kinds["full"].layers == 21
    assert kinds["sliding"].positions_held == 4096 and kinds["full"].positions_held == 8192
    per_layer = 8 * 256 * 2 * 2  # explicit head_dim 256, not 3584 / 16 = 224
    assert r.kv_cache.bytes_per_token == 42 * per_layer
    assert r.kv_cache.total_bytes == 21 * per_layer * (4096 + 8192)


def test_gemma3_five_local_one_global():
    r = estimate("gemma-3-27b", seq_len=32768)
    kinds = {g.kind: g for g in r.kv_cache.groups}
    assert (kinds["sliding"].layers, kinds["full"].layers) == (52, 10)
    assert kinds["sliding"].positions_held == 1024


def test_mla_latent_in_every_engine():
    # transformers 5.x, vLLM and the ideal cache all hold the latent + rope key, never per-head K/V
    for engine in ("ideal", "hf-dynamic", "vllm"):
        assert estimate("deepseek-v3", seq_len=1, engine=engine, block_size=1).kv_cache.bytes_per_token == 70_272


def test_t5_cross_attention():
    r = estimate("t5-base", batch=2, seq_len=100, encoder_len=512)
    kinds = {g.kind: g for g in r.kv_cache.groups}
    per_layer = 12 * 64 * 2 * 4  # 12 heads x d_kv 64 x (K,V) x fp32
    assert kinds["full"].positions_held == 100 and kinds["cross"].positions_held == 512
    assert r.kv_cache.bytes_per_token == 12 * per_layer  # cross-attention does not grow with decoder tokens
    assert r.kv_cache.total_bytes == 2 * 12 * per_layer * (100 + 512)


def test_encoder_only_holds_no_kv():
    r = estimate("bert-base-uncased", batch=8, seq_len=512)
    assert r.kv_cache.total_bytes == 0 and r.kv_cache.groups == []
    assert any("encoder-only" in n for n in r.notes)


def test_kv_dtypes_and_scales():
    base = estimate("llama-2-7b", seq_len=10, kv_dtype="fp16").kv_cache
    assert estimate("llama-2-7b", seq_len=10, kv_dtype="float32").kv_cache.total_bytes == 2 * base.total_bytes
    fp8 = estimate("llama-2-7b", seq_len=10, kv_dtype="fp8").kv_cache
    assert fp8.dtype == "fp8_e4m3"
    assert fp8.total_bytes == base.total_bytes // 2  # vLLM's per-layer k_scale/v_scale are parameters, not pool
    r = estimate("llama-2-7b", batch=16, seq_len=4096, kv_dtype="fp8")
    assert r.kv_cache.total_bytes == 17_179_869_184  # exactly half of bf16's 34,359,738,368
    assert r.weights.kv_scale_bytes == 32 * 2 * 4  # fp32 k_scale + v_scale per layer, with the weights
    assert r.weights.bytes == 2 * 6_738_415_616 + 256
    # int4: 128 values pack into 64 B, plus 2 groups of 64 x (fp16 scale + fp16 zero) = 8 B, per head vector
    int4 = estimate("llama-2-7b", seq_len=10, kv_dtype="int4").kv_cache
    assert int4.bytes_per_token == 32 * 32 * 2 * (64 + 8)
    int8 = estimate("llama-2-7b", seq_len=10, kv_dtype="int8").kv_cache
    assert int8.bytes_per_token == 32 * 32 * 2 * (128 + 4)


def test_sub_byte_vectors_round_up_per_vector():
    from kvplan.model.dtypes import parse_dtype

    int4 = parse_dtype("int4")
    assert int4.data_bytes(127) == 64 and int4.data_bytes(128) == 64 and int4.data_bytes(129) == 65
    assert int4.scale_bytes(65) == 8  # two groups


def test_hf_static_preallocates():
    r = estimate("llama-2-7b", seq_len=100, engine="hf-static", max_cache_len=4096)
    assert r.kv_cache.total_bytes == 4096 * 524_288
    assert estimate("llama-2-7b", seq_len=100, engine="hf-static").inputs.max_cache_len == 100


def test_group_fields_are_per_layer_and_per_sequence():
    """schema 3: a group's ``bytes_per_token_per_layer`` is one layer's (Gemma-3-27B: 16 KV heads x 128 x 2 x 2 B =
    8,192 B), its ``bytes_per_sequence`` all of its layers' at the held positions, and the groups add up to the
    cache's per-sequence and batch figures (52 sliding layers x 1,024 + 10 full layers x 8,192 positions)."""
    r = estimate("gemma-3-27b-it", batch=3, seq_len=8192)
    groups = {g.kind: g for g in r.kv_cache.groups}
    assert {g.bytes_per_token_per_layer for g in groups.values()} == {16 * 128 * 2 * 2}
    assert groups["sliding"].bytes_per_sequence == 52 * 1024 * 8192
    assert groups["full"].bytes_per_sequence == 10 * 8192 * 8192
    assert sum(g.bytes_per_sequence for g in groups.values()) == r.kv_cache.bytes_per_sequence
    assert all(g.total_bytes == 3 * g.bytes_per_sequence for g in groups.values())
    states = estimate("mamba-codestral-7b", batch=2, seq_len=100).kv_cache.groups
    assert all(g.bytes_per_token_per_layer == 0 and g.total_bytes == 2 * g.bytes_per_sequence > 0 for g in states)


def test_model_summary_gives_the_cached_geometry():
    """MLA caches one 576-wide vector per token and layer (DeepSeek-V3: kv_lora_rank 512 + qk_rope_head_dim 64, vLLM
    MLAAttentionSpec num_kv_heads 1, head_size 576); Mamba-2 caches no K/V heads; GQA keeps the config's."""
    mla = estimate("deepseek-v3", seq_len=1).model
    assert (mla.num_kv_heads, mla.head_dim) == (1, 576)
    per_token = estimate("deepseek-v3", seq_len=1).kv_cache.bytes_per_token
    assert mla.num_layers * mla.num_kv_heads * mla.head_dim * 2 == per_token
    ssm = estimate("mamba-codestral-7b", seq_len=1).model
    assert (ssm.num_kv_heads, ssm.head_dim) == (0, 0)
    gqa = estimate("llama-2-70b", seq_len=1).model
    assert (gqa.num_kv_heads, gqa.head_dim) == (8, 128)
