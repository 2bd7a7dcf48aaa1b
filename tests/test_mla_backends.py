"""MLA attention backends and the pages they force.

SGLang: the architectures whose MLA models get trtllm_mla (32- or 64-token pages) on Blackwell when no attention backend
is given, release by release: the DeepSeek-family branch of server_args.py _handle_model_specific_adjustments (0.5.4 -
0.5.14), arg_groups/overrides.py _deepseek_family_overrides (0.5.15 - 0.5.18), arg_groups/model_overrides/deepseek_v2.py
(0.5.19 - 0.5.23) and Kimi-K3's own _kimi_k3_overrides (0.5.17+), read in every wheel 0.5.4 - 0.5.23.

vLLM 0.18+: the MLA backend platforms/cuda.py get_attn_backend_cls takes (the first of _get_backend_priorities whose
validate_configuration passes: compute capability, supported_kv_cache_dtypes, a given --block-size a multiple of one of
get_supported_kernel_block_sizes, supports_combination), or its ValueError "No valid attention backend found"; read in
0.18.0, 0.19.0, 0.24.0, 0.31.0 and 0.33.0.
"""

from __future__ import annotations

import pytest

from kvplan.errors import KvplanError, Refused
from kvplan.model.catalog import load_card
from kvplan.planning.capacity import plan


def _kimi_as(architecture: str):
    """kimi-k2-instruct (MLA: kv_lora_rank 512, qk_rope 64, qk_nope 128) under another architecture name, as a card
    of a checkpoint that names it (Kimi-K2.5, Mistral Large 3, ...) would carry it."""
    card = load_card("kimi-k2-instruct")
    return card.model_copy(update={"name": f"mla-as-{architecture}", "hf_architecture": architecture})


# (architecture, the last release without it in the trtllm_mla branch, the first with it), each read in the wheels
@pytest.mark.parametrize(("architecture", "before", "first"), [
    ("MistralLarge3ForCausalLM", "0.5.6", "0.5.7"),
    ("PixtralForConditionalGeneration", "0.5.6", "0.5.7"),
    ("KimiK25ForConditionalGeneration", "0.5.8", "0.5.9"),
    ("GlmMoeDsaForCausalLM", "0.5.8", "0.5.9"),
    ("DeepseekV32ForCausalLM", "0.5.10", "0.5.12"),
    ("LongcatFlashForCausalLM", "0.5.15", "0.5.16"),
    ("KimiK3ForConditionalGeneration", "0.5.16", "0.5.17"),
    ("Dots3NoteForCausalLM", "0.5.18", "0.5.19"),
    ("Glm5NextForConditionalGeneration", "0.5.19", "0.5.20"),
    ("HYV4ForCausalLM", "0.5.19", "0.5.20"),
])
def test_sglang_trtllm_mla_architectures_by_release(architecture, before, first):
    card = _kimi_as(architecture)
    args = dict(gpu="B200", tp=8, max_model_len=10_000)
    old = plan(card, engine=f"sglang=={before}", **args)
    assert old.inputs.block_size == 1 and not any("trtllm_mla" in n for n in old.notes)
    for release in (first, "0.5.23"):
        r = plan(card, engine=f"sglang=={release}", **args)
        assert r.inputs.block_size == 64, release
        # a page of 64 MLA cells: (kv_lora_rank 512 + qk_rope 64) x 61 layers x 2 B = 70,272 B each (TP-replicated)
        assert r.kv_cache.bytes_per_block == 64 * 70_272 and r.kv_cache.tokens % 64 == 0
        assert any("trtllm_mla" in n and f"from {first}" in n for n in r.notes), release
    # Hopper keeps SGLang's MLA default (fa3, page size 1); a given 32 stays, 16 becomes 64
    assert plan(card, engine="sglang==0.5.23", **{**args, "gpu": "H200"}).inputs.block_size == 1
    assert plan(card, engine="sglang==0.5.23", block_size=32, **args).inputs.block_size == 32
    assert plan(card, engine="sglang==0.5.23", block_size=16, **args).inputs.block_size == 64


def test_sglang_kimi_k25_pages_before_and_after_0_5_9():
    """A Kimi-K2.5-architecture MLA model on 8x B200: page size 1 in 0.5.8, 64-token pages from 0.5.9 (the same pool,
    cut into whole pages; a 10,000-token request holds cdiv(10000, 64) = 157 of them).

    By hand: SGLang's MLATokenToKVPool keeps one latent of kv_lora_rank + qk_rope_head_dim = 512 + 64 = 576 values a
    token and layer, unsharded by TP, bf16: 576 x 61 layers x 2 B = 70,272 B a cell (a 64-token page 4,497,408 B);
    max_total_num_tokens = pool // cell, rounded down to a multiple of page_size (model_runner.py /
    pool_configurator.py). The pool is SGLang's mem_fraction_static budget, the same in both releases."""
    card = _kimi_as("KimiK25ForConditionalGeneration")
    args = dict(gpu="B200", tp=8, max_model_len=10_000)
    old, new = plan(card, engine="sglang==0.5.8", **args), plan(card, engine="sglang==0.5.9", **args)
    pool = old.kv_cache.available_bytes
    assert new.kv_cache.available_bytes == pool  # the same mem_fraction_static rule
    assert (old.kv_cache.bytes_per_block, new.kv_cache.bytes_per_block) == (70_272, 64 * 70_272) == (70_272, 4_497_408)
    assert old.kv_cache.tokens == pool // 70_272  # page size 1: one cell per token
    assert new.kv_cache.tokens == pool // 70_272 // 64 * 64
    assert new.max_concurrency == pytest.approx(pool // 70_272 // 64 / 157)
    assert old.max_concurrency == pytest.approx(pool // 70_272 / 10_000)


def test_sglang_trtllm_mla_goes_to_mla_models_only():
    """The branch names architectures (Pixtral-12B's among them); kvplan gives trtllm_mla to an MLA model of them
    only, and DeepseekV2ForCausalLM is never in the branch (SGLang's MLA default on SM100, flashinfer, keeps page
    size 1)."""
    args = dict(gpu="B200", max_model_len=10_000, engine="sglang==0.5.23")
    mla = plan(_kimi_as("PixtralForConditionalGeneration"), tp=8, **args)
    assert any("trtllm_mla" in n for n in mla.notes)
    gqa = load_card("qwen3-8b").model_copy(update={"hf_architecture": "PixtralForConditionalGeneration"})
    assert not any("trtllm_mla" in n for n in plan(gqa, **args).notes)
    assert plan("deepseek-v2-lite", **args).inputs.block_size == 1


# --- vLLM 0.18+ ---

B200 = dict(gpu="B200", tp=8, max_model_len=10_000)


@pytest.mark.parametrize("engine", ["vllm", "vllm==0.18", "vllm==0.25"])
def test_vllm_block_16_runs_triton_mla_on_blackwell(engine):
    """--block-size 16 on SM 10.x: FLASHINFER_MLA ([32, 64]) and CUTLASS_MLA ([128]) do not take it, FLASH_ATTN_MLA
    and dense FlashMLA do not run there, so vLLM serves TRITON_MLA ([MultipleOf(16)]) in blocks of 16 and warns
    "--block-size 16 precluded higher-priority backend(s) FLASHINFER_MLA, CUTLASS_MLA"."""
    r = plan("deepseek-v3-fp8", engine=engine, block_size=16, **B200)
    assert r.inputs.block_size == 16
    note = next(n for n in r.notes if "TRITON_MLA" in n)
    assert "FLASHINFER_MLA (32 or 64)" in note and "CUTLASS_MLA (128)" in note
    assert "--block-size 16" in r.launch_command
    default = plan("deepseek-v3-fp8", engine=engine, **B200)
    assert default.inputs.block_size == 32  # FLASHINFER_MLA's get_preferred_block_size(16)
    assert not any("TRITON_MLA" in n for n in default.notes)
    for block in (32, 64, 96, 128):  # multiples of 32 or 64: FLASHINFER_MLA, no note
        assert not any("TRITON_MLA" in n for n in plan("deepseek-v3-fp8", engine=engine, block_size=block,
                                                       **B200).notes)


@pytest.mark.parametrize(("gpu", "kv_dtype", "block"), [
    ("B200", None, 8), ("B200", None, 24), ("H200", None, 8), ("H200", "fp8_e4m3", 40), ("A100-80GB", None, 8),
])
def test_vllm_refuses_an_mla_block_no_backend_takes(gpu, kv_dtype, block):
    """Every MLA backend's kernel blocks are multiples of 16 (TRITON_MLA and FLASH_ATTN_MLA MultipleOf(16),
    FLASHINFER_MLA 32/64, FLASHMLA 64, CUTLASS_MLA 128): any other block finds none, as vLLM does."""
    extra = {} if kv_dtype is None else {"kv_dtype": kv_dtype}
    with pytest.raises(KvplanError, match="--block-size") as caught:
        plan("deepseek-v3-fp8", gpu=gpu, tp=8, max_model_len=10_000, engine="vllm", block_size=block, **extra)
    assert not isinstance(caught.value, Refused)
    assert "a multiple of 16" in str(caught.value)


@pytest.mark.parametrize("gpu", ["B200", "H200"])
def test_vllm_refuses_fp8_e5m2_mla_cache(gpu):
    """No MLA backend lists fp8_e5m2 in supported_kv_cache_dtypes (auto, float16, bfloat16, fp8, fp8_e4m3)."""
    with pytest.raises(Refused, match="--kv-dtype"):
        plan("deepseek-v3-fp8", gpu=gpu, tp=8, max_model_len=10_000, engine="vllm", kv_dtype="fp8_e5m2")
    assert plan("deepseek-v3-fp8", gpu=gpu, tp=8, max_model_len=10_000, engine="vllm", kv_dtype="fp8_e4m3").fits


def test_vllm_hopper_fp8_block_16_runs_triton_mla():
    """SM 9.x: FLASH_ATTN_MLA takes no fp8 K/V, FLASHMLA only blocks of 64, so fp8 at --block-size 16 runs
    TRITON_MLA; 16-bit K/V at 16 is FLASH_ATTN_MLA's own default (no note)."""
    args = dict(gpu="H200", tp=8, max_model_len=10_000, engine="vllm", block_size=16)
    r = plan("deepseek-v3-fp8", kv_dtype="fp8_e4m3", **args)
    assert r.inputs.block_size == 16
    assert any("TRITON_MLA" in n and "FLASHMLA (64)" in n for n in r.notes)
    assert not any("TRITON_MLA" in n for n in plan("deepseek-v3-fp8", **args).notes)


def test_vllm_flashinfer_mla_needs_its_qk_nope_dims():
    """FlashInfer MLA's supports_combination takes qk_nope_head_dim 64, 128 or 192 (0.19+): a model with 256 gets
    CUTLASS_MLA's 128-token blocks by default, and --block-size 64 (not a multiple of 128) TRITON_MLA."""
    card = load_card("deepseek-v3-fp8")
    card = card.model_copy(update={"name": "mla-qk-nope-256",
                                   "mla": card.mla.model_copy(update={"qk_nope_head_dim": 256})})
    assert plan(card, engine="vllm", **B200).inputs.block_size == 128
    r = plan(card, engine="vllm", block_size=64, **B200)
    assert r.inputs.block_size == 64
    assert any("TRITON_MLA" in n and "not CUTLASS_MLA" in n and "CUTLASS_MLA (128)" in n for n in r.notes)
