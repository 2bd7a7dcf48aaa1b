"""A plan describes what its launch line runs: DP replicas as each engine builds them, the block size and KV dtype
the launch line passes, the engine's own long-context switch, a release newer than kvplan has read."""

from __future__ import annotations

import pytest

from kvplan import estimate
from kvplan.errors import KvplanError
from kvplan.planning.capacity import plan


@pytest.mark.parametrize("engine", ["sglang", "tgi", "trtllm"])
def test_dp_replicas_of_other_engines_hold_the_whole_moe(engine):
    """vLLM splits a MoE's routed experts over the flattened DP x TP group (FusedMoEParallelConfig); SGLang's
    --dp-size (without DP attention), TGI and TensorRT-LLM replicas are whole copies: DP 2 weighs what DP 1 does."""
    one = plan("qwen3-30b-a3b", gpu="H100-SXM", max_model_len=8192, engine=engine)
    two = plan("qwen3-30b-a3b", gpu="H100-SXM", max_model_len=8192, engine=engine, dp=2)
    assert two.per_gpu.weights_bytes == one.per_gpu.weights_bytes
    assert two.max_concurrency_total == pytest.approx(2 * one.max_concurrency)
    vllm = [plan("qwen3-30b-a3b", gpu="H100-SXM", max_model_len=8192, dp=dp).per_gpu for dp in (1, 2)]
    assert vllm[1].params < vllm[0].params  # the experts halved per rank


def test_a_launch_line_without_a_dp_flag_says_it_runs_per_replica():
    cmd = plan("qwen3-30b-a3b", gpu="H100-SXM", max_model_len=8192, engine="tgi", dp=2).launch_command
    assert cmd.endswith("# once per replica: 2 servers of 1 GPU(s) each")
    assert "--data-parallel-size 2" in plan("llama-3.1-8b", gpu="H100-SXM", max_model_len=8192, dp=2).launch_command


def test_a_hybrid_launch_line_keeps_the_block_size_it_was_planned_with():
    """vLLM's hybrid page unification takes the attention block as the smallest multiple of --block-size that holds
    a state page: without the flag the launch line would run the default 16's multiple."""
    given = plan("nemotron-h-56b", gpu="H100-SXM", tp=2, max_model_len=8192, block_size=64)
    default = plan("nemotron-h-56b", gpu="H100-SXM", tp=2, max_model_len=8192)
    assert "--block-size 64" in given.launch_command and "--block-size" not in default.launch_command
    assert given.inputs.block_size % 64 == 0 and given.inputs.block_size != default.inputs.block_size


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_a_16_or_32_bit_kv_cache_is_the_model_dtype(engine):
    with pytest.raises(KvplanError, match="--kv-dtype: .* model's dtype \\(bf16"):
        plan("llama-3.1-8b", gpu="H100-SXM", max_model_len=8192, engine=engine, kv_dtype="fp32")
    served = plan("llama-3.1-8b", gpu="H100-SXM", max_model_len=8192, engine=engine, kv_dtype="fp32",
                  weight_dtype="fp32")
    assert served.inputs.kv_dtype == "fp32" and "--dtype float32" in served.launch_command
    assert plan("llama-3.1-8b", gpu="H100-SXM", max_model_len=8192, engine=engine, kv_dtype="bf16").fits


def test_the_long_context_switch_is_the_engines_own():
    notes = {e: " ".join(plan("llama-3-8b", gpu="H100-SXM", max_model_len=16384, engine=e).notes)
             for e in ("vllm", "sglang", "tgi")}
    assert "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1" in notes["vllm"]
    assert "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1" in notes["sglang"]
    assert "VLLM_" not in notes["tgi"] and "trained for" in notes["tgi"]


def test_a_release_newer_than_kvplan_has_read_is_planned_with_a_note():
    newest = plan("llama-3.1-8b", gpu="H100-SXM", max_model_len=8192, engine="vllm==0.33")
    later = plan("llama-3.1-8b", gpu="H100-SXM", max_model_len=8192, engine="vllm==0.40")
    assert later.kv_cache == newest.kv_cache
    assert any("vllm==0.40: newer than the newest release kvplan has read (0.33.0)" in n for n in later.notes)
    assert not any("newer than" in n for n in newest.notes)


def test_encoder_only_models_cache_no_kv_heads():
    m = estimate("bert-base-uncased", seq_len=128).model
    assert (m.num_kv_heads, m.head_dim) == (0, 0)


def test_calibrate_refuses_another_gpu():
    from kvplan.planning.capacity.fromlog import from_log

    log = "docs/logs/vllm-myoceane-gpt-oss-20b-a100.log"
    with pytest.raises(KvplanError, match="--gpu: --calibrate reuses the overheads"):
        from_log(log, gpu="H100-SXM", calibrate=True)
    assert from_log(log, gpu="A100-80GB", calibrate=True).calibration.reproduces_log


def test_calibrate_says_when_the_peak_estimate_is_cut_to_the_log():
    from kvplan.planning.capacity.fromlog import from_log

    cal = from_log("docs/logs/vllm-code58522340114-qwen3-8b-rtx4090-cold-compile.log", calibrate=True).calibration
    assert cal.non_torch_bytes == 0 and not any("is kept" in m for m in cal.measured)
    assert any("the peak is taken as all of it" in m for m in cal.measured)


def test_tgi_note_adds_up():
    """The note's own terms give its block count: ((total - context - weights - warm-up peak - growth - the warm-up
    blocks) - (1 - fraction) x total) x 0.90 // block + warm-up blocks."""
    import re

    r = plan("llama-3.1-8b", gpu="L40S", max_model_len=32768, engine="tgi")
    note = next(n for n in r.notes if "KV-cache blocks =" in n)
    total, g = r.inputs.gpu_memory_bytes, r.per_gpu
    warm = int(re.search(r"\+ ([\d,]+) warm-up blocks", note).group(1).replace(",", ""))
    free = (total - g.context_bytes - g.weights_bytes - g.activation_bytes - g.non_torch_bytes
            - warm * r.kv_cache.bytes_per_block)
    assert int(free * 0.90) // r.kv_cache.bytes_per_block + warm == r.kv_cache.num_blocks
    assert "warm-up blocks' own" in note


def test_a_llamacpp_request_is_one_slots_share():
    r = plan("llama-3.1-8b", gpu="L40S", max_model_len=32768, engine="llamacpp")
    assert r.request_kv_bytes == 32768 * 32 * 8 * 128 * 2 * 2  # f16 K and V of one 32,768-cell slot
