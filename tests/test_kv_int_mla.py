"""vLLM's int8/int4 K/V caches (int8_per_token_head from 0.20.0, int4_per_token_head from 0.25.0: config/cache.py
CacheDType) and SGLang's trtllm_mla pages for DeepSeek-V3-architecture models on Blackwell (QA F1 5 and 6).

The bytes are derived by hand from vLLM's sizing (v1/kv_cache_interface.py AttentionSpec.page_size_bytes 0.20.0 -
0.27.1, TritonAttentionBackend.customize_spec 0.28.0 - 0.33.0): per token, layer and KV head, K and V each hold
head_size values of 1 B (int4: head_size // 2 bytes) plus one fp32 scale. Llama-3.1-8B (32 layers, 8 KV heads,
head_dim 128): int8 32 x 8 x (2 x 128 + 2 x 4) = 67,584 B per token; int4 32 x 8 x (2 x 64 + 2 x 4) = 34,816 B
(kvplan's ideal int4, fp16 scale + zero per 64 elements, gives 32 x 8 x 2 x (64 + 2 x 4) = 36,864).
"""

from __future__ import annotations

import pytest

from kvplan.errors import KvplanError
from kvplan.planning.capacity import plan
from kvplan.planning.estimate import estimate
from kvplan.units import cdiv

LLAMA_INT8_PER_TOKEN = 32 * 8 * (2 * 128 + 2 * 4)
LLAMA_INT4_PER_TOKEN = 32 * 8 * (2 * 128 // 2 + 2 * 4)


@pytest.mark.parametrize(("kv_dtype", "engine", "per_token"), [
    ("int8", "vllm", LLAMA_INT8_PER_TOKEN),
    ("int8", "vllm==0.20.0", LLAMA_INT8_PER_TOKEN),
    ("int4", "vllm", LLAMA_INT4_PER_TOKEN),
    ("int4", "vllm==0.25", LLAMA_INT4_PER_TOKEN),
])
def test_vllm_int_kv_per_token_head_bytes(kv_dtype, engine, per_token):
    assert (LLAMA_INT8_PER_TOKEN, LLAMA_INT4_PER_TOKEN) == (67_584, 34_816)
    r = estimate("llama-3.1-8b", seq_len=1000, kv_dtype=kv_dtype, engine=engine)
    blocks = cdiv(1000, 16)  # the Triton backend keeps vLLM's default 16-token blocks
    assert r.kv_cache.total_bytes == blocks * 16 * per_token
    assert any(f"{kv_dtype}_per_token_head" in n for n in r.notes)


def test_ideal_int4_keeps_its_own_layout():
    r = estimate("llama-3.1-8b", seq_len=1000, kv_dtype="int4", engine="ideal")
    assert r.kv_cache.total_bytes == 1000 * 32 * 8 * 2 * (64 + 2 * 4)


@pytest.mark.parametrize(("kv_dtype", "engine", "first"), [
    ("int8", "vllm==0.19", "0.20"), ("int4", "vllm==0.24", "0.25"), ("int4", "vllm==0.20.0", "0.25")])
def test_vllm_release_without_the_int_cache_refuses(kv_dtype, engine, first):
    with pytest.raises(KvplanError) as e:
        estimate("llama-3.1-8b", seq_len=1000, kv_dtype=kv_dtype, engine=engine)
    assert str(e.value).startswith("--kv-dtype:") and f"vLLM {first}" in str(e.value)


def test_vllm_int_cache_refused_for_mla():
    with pytest.raises(KvplanError, match="^--kv-dtype:.*Triton"):
        estimate("deepseek-v2-lite", seq_len=1000, kv_dtype="int8", engine="vllm")


def test_vllm_int8_plan_pages_and_launch_line():
    r = plan("llama-3.1-8b", gpu="H100-SXM", max_model_len=8192, engine="vllm", kv_dtype="int8")
    assert r.inputs.block_size == 16
    assert r.kv_cache.tokens % 16 == 0
    assert "--kv-cache-dtype int8_per_token_head" in r.launch_command
    assert r.inputs.kv_dtype == "int8_per_token_head"
    assert r.kv_cache.bytes_per_block == 16 * LLAMA_INT8_PER_TOKEN  # 1,081,344 B: one 16-token page of every layer
    assert r.kv_cache.num_blocks == r.kv_cache.available_bytes // r.kv_cache.bytes_per_block


# SGLang 0.5.4+ on SM100: DeepseekV3ForCausalLM gets trtllm_mla ("Use trtllm_mla as attention backend on sm100 for
# DeepseekV3ForCausalLM"), whose pages hold 32 or 64 tokens ("changing page_size from None to 64")
@pytest.mark.parametrize(("model", "gpu", "engine", "given", "page"), [
    ("deepseek-v3-fp8", "B200", "sglang", None, 64),
    ("deepseek-v3-fp8", "B200", "sglang==0.5.4", None, 64),
    ("deepseek-v3-fp8", "B200", "sglang==0.5.13", None, 64),
    ("deepseek-v3-fp8", "B200", "sglang", 32, 32),
    ("deepseek-v3-fp8", "B200", "sglang", 16, 64),
    ("kimi-k2-instruct", "B300", "sglang", None, 64),
    ("deepseek-v3-fp8", "B200", "sglang==0.5.1", None, 1),  # no such branch in 0.5.1
    ("deepseek-v3-fp8", "H200", "sglang", None, 1),
    ("deepseek-v2-lite", "B200", "sglang", None, 1),  # DeepseekV2ForCausalLM: not in the branch
])
def test_sglang_trtllm_mla_pages_on_blackwell(model, gpu, engine, given, page):
    extra = {} if given is None else {"block_size": given}
    tp = 1 if model == "deepseek-v2-lite" else 8
    r = plan(model, gpu=gpu, tp=tp, max_model_len=10_000, engine=engine, **extra)
    assert r.inputs.block_size == page
    assert r.kv_cache.tokens % page == 0
    assert any("trtllm_mla" in n for n in r.notes) == (page > 1)


def test_sglang_deepseek_v3_b200_concurrency_in_64_token_pages():
    r = plan("deepseek-v3-fp8", gpu="B200", tp=8, max_model_len=10_000, engine="sglang",
             non_torch_memory="217MiB")  # the load's rests held as the QA's pool was worked
    cells = r.kv_cache.available_bytes // (r.kv_cache.bytes_per_block // 64)  # a cell: one token, every layer
    assert cells == 1_057_406  # the QA's page-1 pool (kvplan before this change: 105.74 = 1,057,406 / 10,000)
    # the pool in whole pages of 64 tokens; a 10,000-token request takes cdiv(10000, 64) = 157 pages
    assert r.kv_cache.tokens == cells // 64 * 64 == 16_521 * 64
    assert r.max_concurrency == pytest.approx(16_521 / 157)
    assert round(r.max_concurrency, 2) == 105.23


def test_vllms_own_spelling_of_its_int8_cache_is_read_as_int8():
    """A log's ``kv_cache_dtype='int8_per_token_head'`` (vLLM's flag value) plans as --kv-dtype int8 on vLLM, whose
    layout it names; another engine does not take vLLM's spelling."""
    from kvplan.errors import KvplanError
    from kvplan.planning.capacity import plan

    args = dict(gpu="H100-SXM", max_model_len=8192)
    spelled = plan("llama-3.1-8b", kv_dtype="int8_per_token_head", **args)
    assert spelled.kv_cache.num_blocks == plan("llama-3.1-8b", kv_dtype="int8", **args).kv_cache.num_blocks
    assert spelled.inputs.kv_dtype == "int8_per_token_head"
    with pytest.raises(KvplanError, match="--kv-dtype"):
        plan("llama-3.1-8b", kv_dtype="int8_per_token_head", engine="sglang", **args)


def test_sglang_trtllm_mla_refuses_fp8_e5m2_kv_on_blackwell_only():
    """SGLang 0.5.4 - 0.5.23: "TensorRT-LLM MLA backend only supports kv-cache-dtype of fp8_e4m3, [fp4_e2m1, bf16,]
    or auto" (server_args.py; arg_groups/overrides.py _mla_kv_cache_dtype_checks from 0.5.15): on a B200, where
    SGLang picks trtllm_mla for DeepSeek-V3, fp8_e5m2 K/V is refused; on an H200 (flashinfer/fa3 MLA) it is not, and a
    search skips the B200 layouts instead of stopping."""
    from kvplan.planning.capacity.search import search

    args = dict(tp=8, engine="sglang", max_model_len=10000, kv_dtype="fp8_e5m2")
    with pytest.raises(KvplanError, match="trtllm_mla"):
        plan("deepseek-v3-fp8", gpu="B200", **args)
    assert plan("deepseek-v3-fp8", gpu="H200", **args).fits
    found = search("deepseek-v3-fp8", concurrency=16, gpus=["B200", "H200"], max_gpus=16, engine="sglang",
                   max_model_len=10000, kv_dtype="fp8_e5m2")
    assert found.options and all(o.gpu != "B200" for o in found.options)
