"""vLLM V0 0.7.x's MLA and MoE rules: the 16-token MLA block before FlashMLA (serving_vllm.MLA_BLOCK_RULES "none"),
0.7.1-0.7.3's materialized MLA weights (serving_vllm.mla_absorbed_bytes) and fused MoE's three separate caches
through 0.7.3 (profile_activation_bytes ``moe_separate_caches``). Each is pinned to shapes from the model's
config.json (DeepSeek-V3: hidden 7168, 128 heads, q_lora_rank 1536, kv_lora_rank 512, rope 64, nope 128, v 128,
moe_intermediate_size 2048, 8 experts a token, fp8 weight_block_size [128, 128]; DeepSeek-V2-Lite: hidden 2048, 16
heads, no q_lora_rank) or to a logged line (docs/logs/vllm-code20903468563-deepseek-r1-h200-tp8.log, vLLM 0.7.3)."""

import pytest

from kvplan import load_card
from kvplan.cost import serving_vllm as vl
from kvplan.errors import KvplanError
from kvplan.planning.capacity import plan

GIB = 2**30
# the DeepSeek-R1 0.7.3 log's launch line: TP 8 on H200, util 0.85, 128,000 tokens, 32,000 batched, 1,024 sequences
R1_073 = dict(gpu="H200", tp=8, max_model_len=128_000, gpu_memory_utilization=0.85, max_num_batched_tokens=32_000,
              max_num_seqs=1024)


@pytest.mark.parametrize("engine, block", [("vllm==0.7.1", 16), ("vllm==0.7.3", 16), ("vllm==0.8.0:v0", 64),
                                           ("vllm==0.9.0:v0", 64), ("vllm==0.8.0", 64), ("vllm==0.9.0", 64)])
def test_mla_block_on_hopper_by_release(engine, block):
    """0.7.x has no FlashMLA (TRITON_MLA at the config's 16); 0.8.0-0.9.0 force FlashMLA's 64 on Hopper."""
    assert plan("deepseek-v3-fp8", engine=engine, **R1_073).inputs.block_size == block


def test_mla_block_given_is_kept_before_flashmla():
    """No check_and_update_config forcing in 0.7.x: a given --block-size stays."""
    assert plan("deepseek-v3-fp8", engine="vllm==0.7.3", block_size=32, **R1_073).inputs.block_size == 32


def test_the_0_7_3_log_counts_16_token_blocks():
    """`# cuda blocks: 18418` of 21.43 GiB: blocks of 16 tokens x 61 layers x 640 (576 aligned to 256 B) x 2 B, not
    FlashMLA's 64 (4,604 of them)."""
    pool = round(21.43 * GIB)
    planned = plan("deepseek-v3-fp8", engine="vllm==0.7.3", kv_cache_memory=pool, kv_cache_memory_what_if=True,
                   **R1_073)
    assert planned.kv_cache.num_blocks == pool // (16 * 61 * 640 * 2) == 18_418
    forced = plan("deepseek-v3-fp8", engine="vllm==0.8.0:v0", kv_cache_memory=pool, kv_cache_memory_what_if=True,
                  **R1_073)
    assert forced.kv_cache.num_blocks == pool // (64 * 61 * 640 * 2) == 4_604
    # V1 0.8.0 (the default engine): FullAttentionSpec(use_mla) pages of 64 x 576 x 2 B a layer, no 256-byte padding
    v1 = plan("deepseek-v3-fp8", engine="vllm==0.8.0", kv_cache_memory=pool, kv_cache_memory_what_if=True, **R1_073)
    assert v1.kv_cache.num_blocks == pool // (64 * 61 * 576 * 2) == 5_116


def test_absorbed_mla_weights_deepseek_v3_fp8_tp8():
    """W_Q_UK 1536 x (16 x 512) and W_UV_O (16 x 512) x 7168 in fp8 with 128 x 128 float32 block scales, W_QR
    1536 x (16 x 64) in bf16, and the float32 dequantized kv_b_proj, 512 x 16 x (128 + 128), that W_UK/W_UV view."""
    per_layer = (1536 * 8192 + 4 * (1536 // 128) * (8192 // 128)
                 + 8192 * 7168 + 4 * (8192 // 128) * (7168 // 128)
                 + 1536 * 16 * 64 * 2
                 + 512 * 16 * 256 * 4)
    assert per_layer == 82_854_912
    assert vl.mla_absorbed_bytes(load_card("deepseek-v3-fp8"), 8, 61, 2) == 61 * per_layer


def test_absorbed_mla_weights_bf16_without_q_lora():
    """A 16-bit checkpoint: both absorbed matrices in bf16, W_Q from q_proj (hidden 2048 wide, no q_lora_rank), and
    W_UK/W_UV views of the loaded kv_b_proj (0 B)."""
    per_layer = 2048 * 16 * 512 * 2 + 16 * 512 * 2048 * 2 + 2048 * 16 * 64 * 2
    assert vl.mla_absorbed_bytes(load_card("deepseek-v2-lite"), 1, 27, 2) == 27 * per_layer


def test_absorbed_weights_only_in_0_7_1_to_0_7_3():
    """0.8.0 (PR 14770) keeps only the dequantized W_UK_T/W_UV copies in bf16 (4 MiB a layer at TP 8); 0.7.3 holds
    the absorbed set; the checkpoint is the same."""
    def weights(engine):
        return plan("deepseek-v3-fp8", engine=engine, **R1_073).per_gpu.weights_bytes

    assert weights("vllm==0.7.3") - weights("vllm==0.8.0:v0") == 61 * (82_854_912 - 512 * 16 * 256 * 2)
    with pytest.raises(KvplanError, match="per-head K/V"):  # 0.7.0: no MLA yet (VllmVersion.mla_latent_cache)
        weights("vllm==0.7.0")


def test_fused_moe_three_caches_through_0_7_3():
    """32,000 tokens at TP 8: cache1 (N, 8, 2 x 256), cache2 (N x 8, 256), cache3 (N, 8, 7168) in bf16, the sum over
    the input (inplace), beside kvplan's four hidden-wide buffers; V0's q/k/v freed before the MLP."""
    card = load_card("deepseek-v3-fp8")
    expected = 32_000 * 2 * (8 * (512 + 256 + 7168) + 4 * 7168)
    assert vl.profile_activation_bytes(card, 8, 2, 32_000, 1024, 129_280, False, hold_qkv=False,
                                         moe_separate_caches=True) == expected
    r = plan("deepseek-v3-fp8", engine="vllm==0.7.3", **R1_073)
    assert r.per_gpu.activation_bytes == expected  # the forward beats the sampler (1,024 x 129,280 x 38 B)


def test_the_0_7_3_log_weights():
    """The log's 83.88 GiB of weights: kvplan within 0.5% (its logged-pool blocks, exact at 16 tokens, are
    tests/test_fromlog.py's)."""
    r = plan("deepseek-v3-fp8", engine="vllm==0.7.3", **R1_073)
    assert abs(r.per_gpu.weights_bytes / GIB / 83.88 - 1) < 0.005
