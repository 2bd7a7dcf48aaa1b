"""vLLM's per-release rules for hybrid state pages (prefix caching on by default from 0.28: Mamba cache mode
"align") and for the default MLA block. Every figure below is derived by hand from vLLM's source (file, function,
release named beside it); the plans must reproduce it."""

import pytest

from kvplan.cost import serving_vllm as vl
from kvplan.cost.hardware import load_gpu
from kvplan.cost.runtimes import get_engine
from kvplan.model.catalog import load_card
from kvplan.planning.capacity import plan


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


# ---- F1-6: hybrid models, prefix caching and the Mamba cache mode -------------------------------------------------

def test_qwen3_next_takes_two_pages_per_state_group_from_0_28():
    """Qwen3-Next (12 attention + 36 Gated DeltaNet layers: 1 attention group, 3 state groups), 2x H200, 4,096
    tokens. engine/arg_utils.py _set_default_chunked_prefill_and_prefix_caching_args: 0.27.1 keeps prefix caching
    opt-in for hybrids, 0.28.0 turns it on; models/config.py MambaModelConfig.verify_and_update_config then sets
    mamba_cache_mode 'align', and v1/kv_cache_interface.py MambaSpec.max_memory_usage_bytes is page x 2 (0.28.0).
    The block (544) and the pool are unchanged: 8 attention pages + 3 x 1 on 0.27, 8 + 3 x 2 on 0.28."""
    old = plan("qwen3-next-80b-a3b", gpu="H200", tp=2, max_model_len=4096, engine="vllm==0.27.1")
    new = plan("qwen3-next-80b-a3b", gpu="H200", tp=2, max_model_len=4096, engine="vllm==0.28")
    assert old.kv_cache.block_size == new.kv_cache.block_size == 544
    assert old.kv_cache.num_blocks == new.kv_cache.num_blocks
    assert old.kv_cache.blocks_per_request == cdiv(4096, 544) + 3 * 1 == 11
    assert new.kv_cache.blocks_per_request == cdiv(4096, 544) + 3 * 2 == 14
    assert new.max_concurrency == new.kv_cache.num_blocks / 14
    assert any("mamba_cache_mode 'align'" in n for n in new.notes)
    assert any("mamba_cache_mode 'none'" in n for n in old.notes)
    # the launch line names no prefix-caching flag: vLLM's own default, which the plan follows, reproduces it
    assert "prefix-caching" not in new.launch_command


def test_gated_deltanet_on_hopper_adds_a_checkpoint_page_and_aligns_the_block_from_0_33():
    """vLLM 0.33.0, align mode: gdn/qwen_gdn_linear_attn.py takes FlashInfer's prefill on SM 9.0 ("Hopper (SM90) - no
    further constraints") and declares num_prefill_checkpoint_blocks=1 with v1/attention/backends/gdn_attn.py's
    FLASHINFER_GDN_CHECKPOINT_ALIGNMENT 64, which platforms/interface.py _align_hybrid_block_size lcm's into the
    kernel alignment: block = 64 x cdiv(548,864 B of states, 64 x 1,024 B per attention token) = 576; the state page
    is padded to 576 x 1,024 = 589,824 B; a request holds 2 + 1 pages per state group: 8 + 3 x 3. 0.32.0 has neither
    (544, 2 pages); on Blackwell kvplan takes Triton/FLA (no checkpoint) and says so."""
    r = plan("qwen3-next-80b-a3b", gpu="H200", tp=2, max_model_len=4096, engine="vllm==0.33")
    assert r.kv_cache.block_size == 64 * cdiv(548_864, 64 * 1024) == 576
    assert r.kv_cache.state_page_padded_bytes == 576 * 1024
    assert r.kv_cache.bytes_per_block == 12 * 576 * 1024
    assert r.kv_cache.blocks_per_request == cdiv(4096, 576) + 3 * 3 == 17
    assert r.kv_cache.num_blocks == r.kv_cache.available_bytes // (12 * 576 * 1024)
    r32 = plan("qwen3-next-80b-a3b", gpu="H200", tp=2, max_model_len=4096, engine="vllm==0.32")
    assert (r32.kv_cache.block_size, r32.kv_cache.blocks_per_request) == (544, 8 + 3 * 2)
    b200 = plan("qwen3-next-80b-a3b", gpu="B200", tp=2, max_model_len=4096, engine="vllm==0.33")
    assert (b200.kv_cache.block_size, b200.kv_cache.blocks_per_request) == (544, 8 + 3 * 2)
    assert any("Gated DeltaNet prefill" in n and "not modelled" in n for n in b200.notes)


@pytest.mark.parametrize("engine, pages", [("vllm==0.27", 1), ("vllm==0.28", 2), ("vllm==0.31", 2),
                                           ("vllm==0.32", 3), ("vllm==0.33", 3)])
def test_mamba2_layers_add_a_checkpoint_page_from_0_32(engine, pages):
    """Nemotron-3-Nano (Mamba-2 + attention), H200, 4,096 tokens: 2 attention pages (block 2,096) and 4 state groups.
    mamba_mixer2.py MambaMixer2.get_kv_cache_spec: replace(spec, num_prefill_checkpoint_blocks=1) from 0.32.0 (absent
    in 0.31.0), counted by MambaSpec.max_memory_usage_bytes in align mode (2 + checkpoint)."""
    r = plan("nemotron-3-nano-30b-a3b", gpu="H200", max_model_len=4096, engine=engine)
    assert r.kv_cache.block_size == 2096 and r.kv_cache.groups == 1 + 4
    assert r.kv_cache.blocks_per_request == cdiv(4096, 2096) + 4 * pages


def test_mamba1_and_attention_free_models():
    """Jamba's Mamba-1 layers (mamba_mixer.py) declare no checkpoint: 2 pages from 0.28 on, 0.33 too. An
    attention-free Mamba-2 model keeps prefix caching off (config/model.py is_prefix_caching_supported: False for
    attention_free): 1 page on every release."""
    j28 = plan("jamba-1.5-mini", gpu="H200", max_model_len=4096, engine="vllm==0.28")
    j33 = plan("jamba-1.5-mini", gpu="H200", max_model_len=4096, engine="vllm==0.33")
    j27 = plan("jamba-1.5-mini", gpu="H200", max_model_len=4096, engine="vllm==0.27")
    state_groups = j27.kv_cache.groups - 1
    assert j27.kv_cache.blocks_per_request == cdiv(4096, 80) + state_groups
    assert j28.kv_cache.blocks_per_request == j33.kv_cache.blocks_per_request == cdiv(4096, 80) + 2 * state_groups
    for engine in ("vllm==0.27", "vllm==0.33"):
        assert plan("mamba-codestral-7b", gpu="H200", max_model_len=4096, engine=engine).kv_cache.blocks_per_request == 1


@pytest.mark.parametrize("engine, spec_pages", [("vllm==0.14", 0), ("vllm==0.15", 2), ("vllm==0.27", 2)])
def test_speculative_tokens_take_state_pages_from_0_15(engine, spec_pages):
    """MambaSpec.max_memory_usage_bytes: 1 + num_speculative_blocks (= num_speculative_tokens, mamba/abstract.py) per
    state group from 0.15.0; 0.12 - 0.14: cdiv(max_model_len, mamba_block_size = max_model_len) = 1. MTP with 2
    tokens on Qwen3-Next's 3 state groups."""
    mtp = '{"method": "mtp", "num_speculative_tokens": 2}'
    base = plan("qwen3-next-80b-a3b", gpu="H200", tp=2, max_model_len=4096, engine=engine)
    spec = plan("qwen3-next-80b-a3b", gpu="H200", tp=2, max_model_len=4096, engine=engine, speculative_config=mtp)
    assert spec.kv_cache.blocks_per_request - base.kv_cache.blocks_per_request == 3 * spec_pages


def test_state_pages_rule():
    """serving_vllm.state_pages against MambaSpec.max_memory_usage_bytes / page_size_bytes (0.33.0)."""
    assert vl.state_pages(False) == 1 and vl.state_pages(False, 3) == 4
    assert vl.state_pages(True) == 2 and vl.state_pages(True, 3, 1) == 6


# ---- F1-5: the default MLA block by release ------------------------------------------------------------------------

@pytest.mark.parametrize("engine, gpu, block", [
    ("vllm==0.14", "H200", 64), ("vllm==0.14", "B200", 128),  # FlashMLA / CUTLASS MLA forced (platforms/cuda.py)
    ("vllm==0.15", "H200", 64), ("vllm==0.17", "B200", 64),  # "Blackwell => Force FlashInfer MLA", block 64
    ("vllm==0.18", "H200", 16), ("vllm==0.33", "H200", 16),  # FLASH_ATTN_MLA: [MultipleOf(16)], keeps 16
    ("vllm==0.18", "B200", 32), ("vllm==0.33", "B200", 32),  # FLASHINFER_MLA: [32, 64], 16 not taken -> 32
    ("vllm==0.33", "A100-80GB", 16), ("vllm==0.14", "RTX-5090", 16), ("vllm==0.33", "RTX-5090", 16),
])
def test_mla_default_block_by_release(engine, gpu, block):
    """DeepSeek-V3 (qk_nope_head_dim 128): <= 0.17 platforms/cuda.py check_and_update_config forces the block (dense
    FlashMLA is Hopper's only: is_flashmla_dense_supported); 0.18+ platforms/interface.py
    update_block_size_for_backend takes the first backend of _get_backend_priorities' get_preferred_block_size(16)."""
    rt = get_engine(engine)
    assert rt.block_size_on(load_card("deepseek-v3"), load_gpu(gpu)) == block


def test_mla_fp8_kv_on_hopper_takes_flashmla_from_0_18():
    """FLASH_ATTN_MLA's supported_kv_cache_dtypes are auto/float16/bfloat16 (0.18.0 - 0.33.0): fp8 K/V falls to
    FLASHMLA, whose only kernel block is 64; the launch line then carries no --block-size (vLLM picks 64 itself)."""
    r = plan("deepseek-v3-fp8", gpu="H200", tp=8, max_model_len=10000, engine="vllm==0.33", kv_dtype="fp8")
    assert r.kv_cache.block_size == 64 and "--block-size" not in r.launch_command


def test_deepseek_v3_on_h200_pages_in_blocks_of_16():
    """vLLM 0.33, 8x H200, 10,000 tokens: 61 MLA layers x (512 + 64) x 2 B = 70,272 B per token, 1,124,352 B per
    16-token block; a request takes cdiv(10,000, 16) = 625 blocks (64-token blocks: 157). The --block-size 64 the
    old rule planned is now a flag the launch line carries."""
    r = plan("deepseek-v3-fp8", gpu="H200", tp=8, max_model_len=10000, engine="vllm==0.33")
    assert r.kv_cache.block_size == 16 and r.kv_cache.bytes_per_block == 61 * 16 * 1152
    assert r.kv_cache.num_blocks == r.kv_cache.available_bytes // (61 * 16 * 1152)
    assert r.kv_cache.blocks_per_request == 625
    assert "--block-size" not in r.launch_command
    given = plan("deepseek-v3-fp8", gpu="H200", tp=8, max_model_len=10000, engine="vllm==0.33", block_size=64)
    assert "--block-size 64" in given.launch_command
    old = plan("deepseek-v3-fp8", gpu="H200", tp=8, max_model_len=10000, engine="vllm==0.17")
    assert old.kv_cache.block_size == 64 and "--block-size" not in old.launch_command


def test_a_sweeps_kv_columns_take_the_fp8_mla_block_as_the_plan_does():
    """vLLM 0.18+ on Hopper: 16-token blocks for 16-bit K/V, FlashMLA's 64 for fp8 (the sweep's KV columns and the
    plan's request bytes agree on both)."""
    from kvplan.planning.sweep import sweep

    for kv, block in ((None, 16), ("fp8", 64)):
        kw = {} if kv is None else {"kv_dtype": kv}
        row = list(sweep("deepseek-v2-lite", batch="1", seq_len="5000", gpu="H100-SXM", tp="1", engine="vllm", **kw))[0]
        assert row["kv_cache.bytes_per_sequence"] == row["request_kv_bytes"]
        assert row["kv_cache.bytes_per_sequence"] == cdiv(5000, block) * block * row["kv_cache.bytes_per_token"]


@pytest.mark.parametrize("engine, gpu, block", [("vllm==0.14", "H200", 64), ("vllm==0.14", "B200", 128),
                                                ("vllm==0.16", "H200", 64), ("vllm==0.16", "B200", 64),
                                                ("vllm==0.18", "H200", 16)])
def test_a_given_mla_block_is_forced_as_vllm_forces_it_through_0_17(engine, gpu, block):
    """platforms/cuda.py check_and_update_config (0.14.1, 0.15.0): a --block-size 16 on DeepSeek-V3 is served in
    FlashMLA's 64 (Hopper), CUTLASS MLA's 128 (Blackwell, 0.14) or FlashInfer MLA's 64 (Blackwell, 0.15-0.17, its
    qk_nope_head_dim 128); from 0.18 the forcing code is gone (review 36 F1: the given 16 was taken as is)."""
    from kvplan.planning.capacity import plan

    r = plan("deepseek-v3-fp8", gpu=gpu, tp=8, max_model_len=10000, engine=engine, block_size=16)
    assert r.inputs.block_size == block
    assert (block != 16) is any(n.startswith("--block-size 16:") for n in r.notes)
