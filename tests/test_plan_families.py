"""The families of issue 20 plan on vLLM and SGLang at TP 8 (`kvplan plan --model CARD --gpu H100-SXM --tp 8
--max-model-len 32768`): the K/V (and state) bytes each GPU holds per token, derived here by hand from the published
configs, and the weights per GPU from the card's total with the replicated parameters kept whole."""

from __future__ import annotations

import pytest

import kvplan

# (card, GPU, extra plan arguments, K/V bytes per token on one GPU)
CASES = [
    # 46 layers x 8 KV heads / TP 8 x head_dim 128 x (K, V) x bf16
    ("glm-4.5-air", "H100-SXM", {}, 46 * 1 * 128 * 2 * 2),
    # GLM-4.6 in bf16 (705 GB) exceeds 8 x 80 GB: served with fp8 weights; 92 layers, one KV head per GPU
    ("glm-4.6", "H100-SXM", {"weight_dtype": "fp8_e4m3"}, 92 * 1 * 128 * 2 * 2),
    # Kimi-K2's FP8 checkpoint (about 121 GiB per GPU at TP 8) needs more than an H100: 8 x H200. MLA: one 512-wide
    # latent + 64-wide RoPE key per token and layer, on every GPU (not sharded)
    ("kimi-k2-instruct", "H200", {}, 61 * (512 + 64) * 2),
    # 40 attention layers x 8 KV heads / 8 x head_dim 64 x (K, V) x bf16; no state (no Mamba layer)
    ("granite-4.0-micro", "H100-SXM", {}, 40 * 1 * 64 * 2 * 2),
    # 6 attention layers x 2 KV heads (replicated: one per GPU at TP 8) x 128 x (K, V) x bf16
    ("nemotron-3-nano-30b-a3b", "H100-SXM", {}, 6 * 1 * 128 * 2 * 2),
]


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
@pytest.mark.parametrize(("card", "gpu", "extra", "kv_per_token"), CASES, ids=[c[0] for c in CASES])
def test_new_families_plan_at_tp8(card, gpu, extra, kv_per_token, engine):
    r = kvplan.plan(card, gpu=gpu, tp=8, max_model_len=32768, engine=engine, **extra)
    # every family leaves a pool of at least 8K tokens a GPU (Kimi-K2 on SGLang's default 0.886 of an H200 keeps about
    # 14K once NCCL's NVLink buffers are charged: serving_sglang.NCCL_NVLINK_BYTES)
    assert r.per_gpu.available_kv_bytes >= 8192 * kv_per_token
    assert r.per_gpu.kv_bytes_per_token == kv_per_token


def test_nemotron_3_nano_states_per_request():
    """23 Mamba-2 layers, each on one GPU of 8: SSM state 64 / 8 heads x 64 x d_state 128 in float32, conv state
    (intermediate 4096 + 2 x 8 groups x 128) / 8 channels x (d_conv 4 - 1) in bf16."""
    r = kvplan.plan("nemotron-3-nano-30b-a3b", gpu="H100-SXM", tp=8, max_model_len=32768)
    per_layer = 8 * 64 * 128 * 4 + (4096 + 2 * 8 * 128) // 8 * 3 * 2
    assert r.kv_cache.state_bytes_per_request == 23 * per_layer == 6_135_296


def test_glm_4_5_air_weights_per_gpu():
    """vLLM TP 8 shards every linear, expert and the vocabulary 8 ways; the routers (45 MoE layers x 128 experts x
    4096) and the RMSNorm weights (46 x 2 + 1 of 4096) stay whole on each GPU."""
    total = kvplan.count_params(kvplan.load_card("glm-4.5-air")).total
    replicated = 45 * 128 * 4096 + (46 * 2 + 1) * 4096
    r = kvplan.plan("glm-4.5-air", gpu="H100-SXM", tp=8, max_model_len=32768)
    assert r.per_gpu.params == (total - replicated) // 8 + replicated == 13_377_507_840
