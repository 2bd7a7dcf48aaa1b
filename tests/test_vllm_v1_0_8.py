"""vLLM 0.8.0 - 0.9.0's V1 engine, the default of `vllm serve` in those releases (kvplan/cost/runtimes/vllm.py
V1_0_8_RANGES), against arithmetic from the cited source: v1/worker/gpu_worker.py determine_available_memory,
v1/core/kv_cache_utils.py _get_kv_cache_config_uniform_type, engine/arg_utils.py _set_default_args_v1 and
_is_v1_supported_oracle, read in the 0.8.0, 0.8.1, 0.8.2, 0.8.3, 0.8.4, 0.8.5, 0.8.5.post1 and 0.9.0 wheels."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvplan.cost import serving_vllm as vl
from kvplan.cost.runtimes import get_engine
from kvplan.errors import KvplanError
from kvplan.planning.capacity import plan

GIB, MIB = 2**30, 2**20
H100_TOTAL = 85_030_322_176  # the catalog's torch-visible H100-SXM total (gpus.yaml)
LLAMA_BLOCK = 16 * 32 * 2 * 8 * 128 * 2  # 16 tokens x 32 layers x K,V x 8 KV heads x 128 x bf16: 2 MiB
ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("engine, rules", [
    ("vllm==0.7.3", "vLLM 0.7.1-0.7.3 (V0"), ("vllm==0.8.0", "vLLM 0.8.0-0.8.1 (V1"),
    ("vllm==0.8.1", "vLLM 0.8.0-0.8.1 (V1"), ("vllm==0.8.2", "vLLM 0.8.2 (V1"), ("vllm==0.8.3", "vLLM 0.8.3 (V1"),
    ("vllm==0.8.4", "vLLM 0.8.4 (V1"), ("vllm==0.8.5.post1", "vLLM 0.8.5 (V1"), ("vllm==0.9.0", "vLLM 0.9.0 (V1"),
    ("vllm==0.9.1", "vLLM 0.9.1-0.9.2 (V1"), ("vllm==0.8.0:v0", "vLLM 0.8.0-0.9.0 (V0"),
    ("vllm==0.9.0:v0", "vLLM 0.8.0-0.9.0 (V0"), ("vllm==0.9.0:v1", "vLLM 0.9.0 (V1"),
    ("vllm==0.6.5:v0", "vLLM 0.6.5-0.6.6 (V0")])
def test_the_ranges_and_their_boundaries(engine, rules):
    assert get_engine(engine).rules.startswith(rules)


@pytest.mark.parametrize("engine, match", [
    ("vllm==0.9.1:v0", "V0 engine is modelled through 0.9.0"), ("vllm==0.7.3:v1", "opt-in alpha"),
    ("vllm==0.8.5:v2", "is v0 .VLLM_USE_V1=0. or v1")])
def test_the_engine_suffix_is_checked_once_naming_the_flag(engine, match):
    with pytest.raises(KvplanError, match=f"^--engine: .*{match}"):
        get_engine(engine)


# (release, GPU) -> (max_num_batched_tokens, max_num_seqs): _set_default_args_v1, UsageContext.OPENAI_API_SERVER.
# 0.8.0 - 0.8.3: 8192 where "h100"/"h200" is in the device name, else 2048; 1024 sequences everywhere.
# 0.8.4: the same name test, 1024 / 256 sequences. 0.8.5: total >= 70 GiB. 0.9.0: >= 70 GiB and not an A100.
@pytest.mark.parametrize("engine, gpu, mnbt, seqs", [
    ("vllm==0.8.0", "H100-SXM", 8192, 1024), ("vllm==0.8.3", "L40S", 2048, 1024), ("vllm==0.8.3", "H20", 2048, 1024),
    ("vllm==0.8.4", "L40S", 2048, 256), ("vllm==0.8.4", "H200", 8192, 1024), ("vllm==0.8.4", "H20", 2048, 256),
    ("vllm==0.8.5", "H20", 8192, 1024), ("vllm==0.8.5", "A100-80GB", 8192, 1024), ("vllm==0.8.5", "L40S", 2048, 256),
    ("vllm==0.9.0", "A100-80GB", 2048, 256), ("vllm==0.9.0", "H20", 8192, 1024),
    ("vllm==0.8.5:v0", "H100-SXM", 8192, 256)])  # V0: max(max_model_len, 2048) tokens, 256 sequences
def test_batch_defaults_by_release(engine, gpu, mnbt, seqs):
    r = plan("llama-3.1-8b", gpu=gpu, max_model_len=8192, engine=engine)
    assert (r.inputs.max_num_batched_tokens, r.inputs.max_num_seqs) == (mnbt, seqs)


def test_the_budget_charges_what_is_in_use_at_start():
    """determine_available_memory: int(total x 0.9 - (torch's allocated peak + non-torch in use)). With the
    activation, non-torch and context given, the pool is that arithmetic on the plan's weights: the context comes off
    the pool (0.9.1 leaves it outside), and the blocks, tokens and concurrency follow num_blocks x block_size."""
    given = dict(gpu="H100-SXM", max_model_len=8192, activation_memory="1GiB", non_torch_memory="100MiB",
                 context_memory="600MiB")
    r = plan("llama-3.1-8b", engine="vllm==0.8.5", **given)
    g = r.per_gpu
    peak = g.weights_bytes + GIB + 100 * MIB + 600 * MIB
    assert g.weights_bytes == 8_030_261_248 * 2 + 32 * MIB  # bf16 parameters + the rotary cache
    # 85,030,322,176 x 0.9 = 76,527,289,958.4; less 17,901,821,952 = 58,625,468,006.4
    assert g.available_kv_bytes == int(H100_TOTAL * 0.9 - peak) == 58_625_468_006
    assert g.context_in_budget and g.requested_bytes == int(H100_TOTAL * 0.9) - 600 * MIB  # the rows add up
    blocks = g.available_kv_bytes // LLAMA_BLOCK
    assert r.kv_cache.num_blocks == blocks and r.kv_cache.tokens == blocks * 16
    assert r.max_concurrency == pytest.approx(blocks * 16 / 8192)
    later = plan("llama-3.1-8b", engine="vllm==0.9.1", **given).per_gpu  # 0.9.1: the context outside the budget
    assert later.available_kv_bytes - g.available_kv_bytes in (600 * MIB, 600 * MIB + 1)


def test_the_float_product_is_truncated_as_vllm_does():
    assert vl.available_kv_bytes_0_8(H100_TOTAL, 0.9, 0) == int(H100_TOTAL * 0.9) == 76_527_289_958
    assert vl.requested_memory(H100_TOTAL, 0.9) == 76_527_289_959  # 0.9.1+: ceil


def test_no_start_up_free_memory_check():
    """0.9.1's init_device refuses free < requested; 0.8's keeps init_gpu_memory for an assert only: a 0.99
    utilization with 1 GiB in use at start is planned (the context then leaves the pool)."""
    kw = dict(gpu="H100-SXM", max_model_len=8192, gpu_memory_utilization=0.99, context_memory="1GiB")
    assert plan("llama-3.1-8b", engine="vllm==0.8.5", **kw).per_gpu.available_kv_bytes > 0
    from kvplan.errors import Refused

    with pytest.raises(Refused, match="free memory on startup"):
        plan("llama-3.1-8b", engine="vllm==0.9.1", **kw)


def test_a_uniform_sliding_window_from_0_8_3():
    """Mistral-7B-v0.1 (every layer a 4,096 window) on an L40S (2,048 batched tokens): 0.8.0 - 0.8.2 give every layer a
    FullAttentionSpec (cdiv(16384, 16) = 1024 blocks a request); 0.8.3+ a SlidingWindowSpec, cdiv(min(4095 + 2048,
    16384), 16) + 1 = 385. The printed concurrency is tokens / max_model_len either way."""
    kw = dict(gpu="L40S", max_model_len=16384)
    early, late = (plan("mistral-7b-v0.1", engine=e, **kw).kv_cache for e in ("vllm==0.8.2", "vllm==0.8.3"))
    assert early.blocks_per_request == 1024 and late.blocks_per_request == 385
    assert late.tokens == late.num_blocks * 16


def test_mixed_windows_are_full_attention():
    """Gemma-2 (sliding and global layers): unify_hybrid_kv_cache_specs (0.8.3+) makes every layer full, one group of
    cdiv(8192, 16) = 512 blocks a request, as 0.8.0 - 0.8.2 do; 0.9.1's hybrid manager keeps two groups."""
    for engine in ("vllm==0.8.2", "vllm==0.8.3", "vllm==0.9.0"):
        pool = plan("gemma-2-9b", gpu="H100-SXM", max_model_len=8192, engine=engine).kv_cache
        assert pool.groups == 1 and pool.blocks_per_request == 512
    assert plan("gemma-2-9b", gpu="H100-SXM", max_model_len=8192, engine="vllm==0.9.1").kv_cache.groups == 2


@pytest.mark.parametrize("engine, kw, clause", [
    ("vllm==0.8.5", dict(gpu="T4"), "Compute Capability < 8.0"),
    ("vllm==0.8.5", dict(gpu="MI300X"), "not a CUDA GPU"),
    ("vllm==0.8.5", dict(gpu="L40S", kv_dtype="fp8_e4m3"), "--kv-cache-dtype"),
    ("vllm==0.8.1", dict(gpu="H100-SXM", kv_dtype="fp8_e4m3"), "any but auto"),
    ("vllm==0.8.5", dict(gpu="H100-SXM", pp=2), "pipeline parallelism"),
    ("vllm==0.8.2", dict(gpu="H100-SXM", enable_lora=True), "LoRA"),
    ("vllm==0.8.5", dict(gpu="H100-SXM", weight_dtype="fp32"), "float32"),
    ("vllm==0.8.5", dict(gpu="H100-SXM", weight_dtype="float32"), "float32"),  # an alias is the same dtype
    ("vllm==0.8.5", dict(gpu="L40S", kv_dtype="e4m3"), "--kv-cache-dtype")])
def test_the_oracle_falls_back_to_v0(engine, kw, clause):
    r = plan(str(ROOT / "tests/data/configs/qwen2.5-0.5b"), max_model_len=8192, engine=engine, **kw)
    assert "(V0 engine" in r.inputs.engine_rules
    assert any("_is_v1_supported_oracle" in n and clause in n for n in r.notes)


@pytest.mark.parametrize("engine, kw", [
    ("vllm==0.8.2", dict(gpu="H100-SXM", kv_dtype="fp8_e4m3")),  # FlashAttention 3 on SM 9.x takes fp8
    ("vllm==0.9.0", dict(gpu="H100-SXM", pp=2)),  # 0.9.0: the mp executor runs PP on V1
    ("vllm==0.8.3", dict(gpu="H100-SXM", enable_lora=True)),
    ("vllm==0.8.5", dict(gpu="H100-SXM", kv_dtype="e4m3")),  # aliases of fp8_e4m3 are fp8 K/V too
    ("vllm==0.8.5", dict(gpu="H100-SXM", kv_dtype="float8_e4m3fn")),
    ("vllm==0.8.5", dict(gpu="H100-SXM", kv_dtype="bfloat16"))])
def test_v1_where_the_oracle_keeps_it(engine, kw):
    assert "(V1 engine" in plan("llama-3.1-8b", max_model_len=8192, engine=engine, **kw).inputs.engine_rules


def test_v1_forced_does_not_fall_back():
    """`:v1` is VLLM_USE_V1=1: its line says so, and a clause that would fall back is refused naming --engine."""
    r = plan("llama-3.1-8b", gpu="H100-SXM", max_model_len=8192, engine="vllm==0.8.5:v1")
    assert r.launch_command.startswith("VLLM_USE_V1=1 vllm serve ") and "(V1 engine" in r.inputs.engine_rules
    with pytest.raises(KvplanError, match=r"^--engine: vllm==0.8.5:v1 \(VLLM_USE_V1=1\) with pipeline parallelism"):
        plan("llama-3.1-8b", gpu="H100-SXM", max_model_len=8192, engine="vllm==0.8.5:v1", pp=2)


def test_the_v0_line_sets_vllm_use_v1():
    v0 = plan("llama-3.1-8b", gpu="H100-SXM", max_model_len=8192, engine="vllm==0.8.5:v0")
    assert v0.launch_command.startswith("VLLM_USE_V1=0 vllm serve ")
    v1 = plan("llama-3.1-8b", gpu="H100-SXM", max_model_len=8192, engine="vllm==0.8.5")
    assert v1.launch_command.startswith("vllm serve ")


def test_a_0_8_v1_log_plans_as_v1_and_a_v0_log_as_v0():
    from kvplan.planning.capacity.fromlog import from_log

    v1 = from_log(str(ROOT / "docs/logs/vllm-qwenvl1057-qwen2.5-vl-7b.log"))
    v0 = from_log(str(ROOT / "docs/logs/vllm-code13068150713-qwen3-8b-tp4-v0.log"))
    assert v1.engine == "vllm==0.8.2" and v1.plan.inputs.engine_rules.startswith("vLLM 0.8.2 (V1")
    assert v0.engine == "vllm==0.8.5:v0" and v0.plan.inputs.engine_rules.startswith("vLLM 0.8.0-0.9.0 (V0")
    assert any("V0 engine: planned as --engine vllm==0.8.5:v0" in n for n in v0.notes)
    assert v0.log.v0_line == 7 and v1.log.v0_line is None  # "the current vLLM instance can use total_gpu_memory"


@pytest.mark.parametrize("engine, gpu, block", [("vllm==0.8.5", "H200", 64), ("vllm==0.8.5", "B200", 16),
                                               ("vllm==0.8.5:v0", "B200", 16), ("vllm==0.9.1", "B200", 128)])
def test_the_mla_block_is_forced_on_hopper_only(engine, gpu, block):
    """platforms/cuda.py 0.8.0 - 0.9.0 forces FlashMLA's 64 where is_flashmla_supported ("only supported on Hopper
    devices", capability major 9); a B200 keeps the config's 16 (the 0.9.1 range's rule takes CUTLASS MLA's 128)."""
    assert plan("deepseek-v3-fp8", gpu=gpu, tp=8, max_model_len=8192, engine=engine).inputs.block_size == block


def test_a_search_with_v1_forced_leaves_out_what_the_oracle_sends_to_v0():
    """`:v1` where the oracle would fall back refuses that layout or GPU (errors.Refused), so a search lists the rest:
    a T4 (compute capability 7.5) and pipeline-parallel layouts are left out, not the whole search refused."""
    from kvplan.planning.capacity.search import search

    r = search("llama-3.1-8b", max_model_len=8192, concurrency=8, engine="vllm==0.8.5:v1", gpus=["T4", "L4", "H100-SXM"])
    assert {o.gpu for o in r.options} == {"L4", "H100-SXM"} and all(o.pp == 1 for o in r.options)


def test_sglang_says_when_the_load_is_not_replayed():
    """SGLang's load rests are replayed for 16-bit weights only: an fp8 load charges none and the note says so."""
    fp8 = plan("qwen3-8b", gpu="H100-SXM", max_model_len=8192, engine="sglang", weight_dtype="fp8_e4m3")
    assert fp8.per_gpu.non_torch_bytes == 0
    assert any("none charged, as the load of quantized or 8-bit weights is not replayed" in n for n in fp8.notes)
    bf16 = plan("qwen3-8b", gpu="H100-SXM", max_model_len=8192, engine="sglang")
    assert any("an ESTIMATE of a replay" in n for n in bf16.notes)
    assert not any("not replayed" in n for n in bf16.notes)


def test_the_budget_rows_add_up_to_the_pool_to_the_byte():
    """The table's requested row is int(total x util) less the context: with the non-KV rows it gives the pool vLLM's
    int(total x util - peak) gives (85,030,322,176 x 0.9 = 76,527,289,958.4: a ceil'd row had been 1 B over)."""
    g = plan("llama-3.1-8b", gpu="H100-SXM", max_model_len=8192, engine="vllm==0.8.5").per_gpu
    assert g.requested_bytes == 76_527_289_958 - g.context_bytes
    assert (g.requested_bytes - g.weights_bytes - g.activation_bytes - g.non_torch_bytes - g.cuda_graph_bytes
            == g.available_kv_bytes)
