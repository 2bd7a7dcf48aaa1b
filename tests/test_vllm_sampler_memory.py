"""vLLM's dummy sampler by release: the Triton top-k/top-p kernel's per-SM buffer (0.17+ V1 runner), Model Runner V2's
logits-only sampler and its persistent state (0.25-0.28 dense models), the SM counts of the GPU catalog, and the
resolved max_num_batched_tokens a log prints."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kvplan.cost import serving_vllm as vl
from kvplan.cost.hardware import load_gpu, load_gpus
from kvplan.planning.capacity import plan
from kvplan.planning.capacity.logparse import parse_log

GIB, MIB = 2**30, 2**20
LOGS = Path(__file__).resolve().parents[1] / "docs" / "logs"
LLAMA_VOCAB, QWEN25_VOCAB = 128_256, 152_064


@pytest.mark.parametrize(("sms", "rows", "buffer_rows"), [
    (82, 256, 82),  # min(next_power_of_2(min(82, 256)) = 128, 82)
    (82, 8, 8),  # 8 programs, next_power_of_2(8) = 8
    (132, 20, 32),  # next_power_of_2(20) = 32 <= 132
    (128, 100, 128),  # next_power_of_2(100) = 128 = num_sm
    (82, 7, 0),  # below 8 rows vLLM sorts in PyTorch (apply_top_k_top_p): no Triton buffer
])
def test_the_triton_buffer_is_sized_as_apply_top_k_top_p_triton_allocates_it(sms, rows, buffer_rows):
    # ops/topk_topp_triton.py: NUM_PROGRAMS = min(num_sm, batch); new_empty((min(next_power_of_2(NUM_PROGRAMS),
    # num_sm), vocab_size)) of the float32 logits
    assert vl.triton_topk_topp_buffer_bytes(sms, rows, LLAMA_VOCAB) == buffer_rows * LLAMA_VOCAB * 4


def _plan(engine: str, gpu: str = "RTX-3090", model: str = "llama-3.1-8b", **kw):
    return plan(model, gpu=gpu, engine=engine, max_model_len=8192, **kw)


def test_0_17_charges_the_buffer_beside_the_unsorted_sampler_on_a_gpu_with_an_sm_count():
    # 256 rows x (bf16 logits + 12 B of float32 copies), the 2,048-token forward's output and its last rows twice
    # (hidden_states[logit_indices], _dummy_sampler_run's rand_like), still held by profile_run, + 82 float32 rows
    sampler = 256 * LLAMA_VOCAB * (2 + 12) + (2048 + 2 * 256) * 4096 * 2
    assert _plan("vllm==0.17").per_gpu.activation_bytes == sampler + 82 * LLAMA_VOCAB * 4
    assert _plan("vllm==0.17", flashinfer_sampler=True).per_gpu.activation_bytes == sampler
    # a GPU the catalog gives no SM count charges none, and says so
    r = plan("llama-3.1-8b", gpu="L20", engine="vllm==0.17", max_model_len=8192)
    assert r.per_gpu.activation_bytes == sampler
    assert any("no SM count for L20" in n for n in r.notes)
    # 0.16 sorts (serving_vllm.sorting_sampler_bytes): no Triton kernel, no buffer
    assert _plan("vllm==0.16").per_gpu.activation_bytes == (vl.sorting_sampler_bytes(256, LLAMA_VOCAB, LLAMA_VOCAB, 2)
                                                            + (2048 + 2 * 256) * 4096 * 2)


def test_the_buffer_brings_the_0_17_rtx_3090_log_within_a_percent():
    # TheBuccaneer/vllm-offload-profiles, vLLM 0.17.1, Qwen2.5-7B at 0.90: "Available KV cache memory: 6.32 GiB";
    # the 82-SM buffer is 46.4 MiB of the ~0.19 GiB kvplan missed before (FlashInfer's sampler has no such buffer),
    # the RTX 3090's total as today's drivers report it (23.58 GiB, not an old driver's 23.70) the rest
    r = plan("qwen2.5-7b", gpu="RTX-3090", engine="vllm==0.17", max_model_len=8192)
    without = plan("qwen2.5-7b", gpu="RTX-3090", engine="vllm==0.17", max_model_len=8192, flashinfer_sampler=True)
    assert without.per_gpu.available_kv_bytes - r.per_gpu.available_kv_bytes == 82 * QWEN25_VOCAB * 4
    assert r.per_gpu.available_kv_bytes < without.per_gpu.available_kv_bytes
    assert abs(r.per_gpu.available_kv_bytes / GIB - 6.32) < 0.01 * 6.32


def test_model_runner_v2_samples_the_logits_alone_and_0_27_counts_its_persistent_state():
    v = 151_936  # Qwen3
    r28 = plan("qwen3-8b", gpu="L40S", engine="vllm==0.28", max_model_len=8192)
    sampler = 256 * v * 2 + 256 * -(-v // 1024) * 12  # bf16 logits + gumbel_sample's partial maxima
    forward = r28.per_gpu.activation_bytes
    assert forward > sampler  # the forward of 2,048 tokens is the peak: the sampler sorts nothing, copies nothing
    state = 4 * (256 * v + 2 * 256 * -(-v // 32))  # output_bin_counts + prompt_bin_mask + grammar_bitmask
    assert r28.per_gpu.non_torch_bytes == 64 * MIB + state
    r26 = plan("qwen3-8b", gpu="L40S", engine="vllm==0.26", max_model_len=8192)
    assert r26.per_gpu.non_torch_bytes == 64 * MIB  # 0.26's non-KV figure leaves torch state before the profile out
    assert r26.per_gpu.activation_bytes == forward
    # a MoE model stays on the V1 runner: the unsorted sampler and the Triton buffer (132 SMs)
    moe = plan("qwen3-30b-a3b", gpu="H200", engine="vllm==0.28", max_model_len=8192)
    assert moe.per_gpu.non_torch_bytes == 64 * MIB
    assert moe.per_gpu.activation_bytes == 1024 * v * 14 + (8192 + 2 * 1024) * 2048 * 2 + 132 * v * 4
    # --non-torch-memory replaces the whole figure (a calibration passes the log's residual)
    given = plan("qwen3-8b", gpu="L40S", engine="vllm==0.28", max_model_len=8192, non_torch_memory=100 * MIB)
    assert given.per_gpu.non_torch_bytes == 100 * MIB


def test_the_v2_profile_peak_of_the_0_27_log_is_the_forward():
    # vLLM 0.27.1, Qwen2.5-0.5B, the LLM class (8,192 batched tokens): "0.31 GiB for peak activation"
    log = LOGS / "vllm-code61815222665-qwen2.5-0.5b-rtx4090-v2runner.log"
    assert parse_log(log).flags["max_num_batched_tokens"] == 8192  # its "Chunked prefill is enabled with" line
    config = Path(__file__).resolve().parent / "data" / "configs" / "qwen2.5-0.5b"
    r = plan(str(config), gpu="RTX-4090", gpu_memory="23.99GiB", engine="vllm==0.27", max_model_len=32768,
             max_num_batched_tokens=8192)
    assert "0.31 GiB for peak activation" in log.read_text()
    assert abs(r.per_gpu.activation_bytes / (0.31 * GIB) - 1) < 0.06


def test_a_logged_chunked_prefill_line_gives_the_batched_tokens(tmp_path):
    p = tmp_path / "x.log"
    p.write_text("# gpu: H100-SXM\n# model: qwen3-8b\n# engine: vllm==0.19\n"
                 "INFO [scheduler.py:242] Chunked prefill is enabled with max_num_batched_tokens=4096.\n"
                 "INFO [gpu_worker.py:424] Available KV cache memory: 50.00 GiB\n")
    lg = parse_log(p)
    assert lg.flags["max_num_batched_tokens"] == 4096 and lg.flag_sources["max_num_batched_tokens"]


@pytest.mark.parametrize("name", sorted(load_gpus()))
def test_every_sm_count_reproduces_the_output_it_cites(name):
    """torch's `multi_processor_count=N` (what vLLM's num_compute_units reads), else the whitepaper or data sheet's
    "N SMs" / "N compute units"."""
    gpu = load_gpu(name)
    if gpu.sm_count is None:
        assert not gpu.sm_count_source
        return
    src = gpu.sm_count_source
    m = (re.search(r"multi_processor_count=(\d+)", src) or re.search(r"multiProcessorCount: (\d+)", src)
         or re.search(r"(\d+) (?:SMs|compute units)", src))
    assert m, f"{name}: no count quoted in {src!r}"
    assert gpu.sm_count == int(m.group(1))


def test_an_sm_count_without_its_source_is_refused(tmp_path):
    from kvplan.errors import KvplanError

    p = tmp_path / "gpus.yaml"
    p.write_text("gpus:\n  X:\n    vendor: NVIDIA\n    memory_bytes: 24000000000\n"
                 "    memory_bandwidth_bytes_per_s: 900000000000\n    peak_flops: {bf16: 1.0e+14}\n"
                 "    source: https://example.invalid/x\n    sm_count: 80\n")
    with pytest.raises(KvplanError, match="sm_count_source"):
        load_gpus(p)


def test_0_29_counts_model_runner_v2_state_for_every_model_and_samples_the_logits_alone():
    # 0.29 - 0.33 run V2 for every model (config/vllm.py use_v2_model_runner) and their memory_profiling counts
    # total_consumed since init_device's snapshot, which the state V2's load_model allocates after "Model loading
    # took" joins (utils/mem_utils.py, read in 0.29.0 - 0.33.0): penalties.py PenaltiesState output_bin_counts
    # (max_num_reqs x vocab int32) + prompt_bin_mask (max_num_reqs x cdiv(vocab, 32) int32), structured_outputs.py
    # grammar_bitmask (max_num_reqs x decode_query_len x cdiv(vocab, 32) int32)
    v = 151_936  # Qwen3
    state = 4 * (256 * v + 256 * 4748 + 256 * 4748)  # cdiv(151,936, 32) = 4,748
    assert vl.v2_sampler_state_bytes(256, v) == state == 165_306_368
    assert vl.v2_sampler_state_bytes(256, v, 3) == state + 4 * 256 * 2 * 4748  # EAGLE k = 2: 3 logits per request
    for engine in ("vllm==0.29", "vllm==0.31", "vllm==0.32", "vllm==0.33"):
        for model in ("qwen3-8b", "qwen3-30b-a3b"):  # MoE too from 0.29 (0.25 - 0.28 kept it on V1)
            r = plan(model, gpu="H200", engine=engine, max_model_len=8192)
            assert r.per_gpu.non_torch_bytes == 64 * MIB + vl.v2_sampler_state_bytes(1024, v), (engine, model)
    # the dummy sampler: V2's model-dtype logits alone through 0.32 (one pass, no request added), below the forward
    r = plan("qwen3-30b-a3b", gpu="H200", engine="vllm==0.31", max_model_len=8192)
    v1 = plan("qwen3-30b-a3b", gpu="H200", engine="vllm==0.28", max_model_len=8192)
    assert r.per_gpu.activation_bytes < v1.per_gpu.activation_bytes
    # 0.33's second, warmup-param pass: FlashInfer on an H200 (test_0_33_warmup_param_pass_* below)
    r33 = plan("qwen3-30b-a3b", gpu="H200", engine="vllm==0.33", max_model_len=8192)
    assert r33.per_gpu.activation_bytes >= vl.v2_warmup_sampler_bytes(1024, 151_936, 151_936, 2, True)
    # ngram speculation sends the model back to V1 (_get_v2_model_runner_unsupported_features, 0.29.0): no state
    ng = plan("qwen3-8b", gpu="H200", engine="vllm==0.29", max_model_len=8192, speculative_config={"method": "ngram", "num_speculative_tokens": 3})
    assert ng.per_gpu.non_torch_bytes == 64 * MIB


@pytest.mark.parametrize(("log", "pool_pct"), [
    ("vllm-samilazrak-qwen3-14b-l40s-base.log", -0.29),  # +1.10% without the state
    ("vllm-samilazrak-qwen3-14b-awq-l40s.log", +0.31),  # +0.84%
    ("vllm-samilazrak-qwen3-14b-awq-l40s-tuned.log", +0.64),  # +1.66%
    ("vllm-code70682754770-llama-3.1-8b-a100.log", +0.93),  # +0.84%: the smaller V2 sampler peak outweighs the state
])
def test_the_0_29_and_0_31_logs_with_the_v2_state(log, pool_pct):
    from kvplan.planning.capacity.fromlog import from_log

    rows = {x.figure: x for x in from_log(LOGS / log).rows}
    assert rows["available"].flags_error_pct == pytest.approx(pool_pct, abs=0.006)


def test_0_33_warmup_param_pass_is_the_float32_pipeline_as_the_source_allocates_it():
    # v1/worker/gpu/sample/sampler.py 0.33.0 apply_sampling_params: torch.empty_like(logits, dtype=float32), rows x
    # vocab_size (logits[..., :org_vocab_size] of compute_logits, not dense where the LM head pads); flashinfer-python
    # 0.7.2.post1 top_k_top_p_sampling_from_logits: top_k_mask_logits' torch.empty_like + torch.softmax (float32), and
    # the 1 MiB row_states buffer (buffer_bytes = 1024 * 1024)
    rows, v = 256, 151_936  # Qwen3, already a multiple of the LM head's padding
    logits, fp32 = rows * v * 2, rows * v * 4  # 77,791,232 and 155,582,464, multiples of 512 B
    assert vl.v2_warmup_sampler_bytes(rows, v, v, 2, True) == logits + 3 * fp32 + MIB == 545_587_200
    # without FlashInfer (a T4: compute capability 7.5): the copy, Triton's buffer for 40 SMs (min(next_power_of_2(
    # min(40, 256)), 40) = 40 float32 rows) and gumbel_sample's int64 + float32 partial maxima (cdiv(151,936, 1,024)
    # = 149 blocks a row)
    buf = vl.triton_topk_topp_buffer_bytes(40, rows, v, min_rows=1)
    assert buf == 40 * v * 4 == 24_309_760
    assert vl.v2_warmup_sampler_bytes(rows, v, v, 2, False, buf) == logits + fp32 + buf + rows * 149 * 12 == 258_141_184
    # any row count runs Triton in 0.33.0 (apply_top_k_top_p: "if HAS_TRITON"): 3 rows, 3 programs,
    # next_power_of_2(3) = 4 buffer rows
    assert vl.triton_topk_topp_buffer_bytes(40, 3, v, min_rows=1) == 4 * v * 4
    # each tensor rounds to 512 B (kvplan.cost.allocator.round_size): 3 rows of Qwen2.5-0.5B's 151,655 entries in
    # float32 are 1,819,860 B -> 1,820,160; its LM head pads to 151,936: bf16 logits 911,616 B -> 911,872
    assert vl.v2_warmup_sampler_bytes(3, 151_936, 151_655, 2, True) == 911_872 + 3 * 1_820_160 + MIB


@pytest.mark.parametrize(("cc", "sms", "flashinfer"), [
    (9.0, 132, True), (8.9, 142, True), (8.0, 108, True), (12.0, 170, True), (10.0, None, True),
    (7.5, 40, False),  # FlashInferBackend.supports_compute_capability: 8.0 <= capability <= 12.1
    (8.6, 16, False),  # "top-k masking requires more than 16 SMs"
    (None, 304, False),  # ROCm: not current_platform.is_cuda()
])
def test_0_33_samples_in_flashinfer_where_flashinfer_sampler_supported_says_so(cc, sms, flashinfer):
    assert vl.flashinfer_samples(cc, sms) is flashinfer


def test_0_33_warmup_param_pass_moves_llama_8b_on_h100_by_the_derived_terms():
    # Llama-3.1-8B, H100: 1,024 rows (get_batch_defaults), max_num_batched_tokens 8,192. 0.32's sampler (logits alone)
    # is below the forward: 8,192 x (3 x 14,336 + 6,144 + 4 x 4,096) x 2 B = 1 GiB
    r32 = plan("llama-3.1-8b", gpu="H100-SXM", engine="vllm==0.32", max_model_len=8192)
    r33 = plan("llama-3.1-8b", gpu="H100-SXM", engine="vllm==0.33", max_model_len=8192)
    assert r32.per_gpu.activation_bytes == 8192 * (3 * 14_336 + 6_144 + 4 * 4_096) * 2 == GIB
    # 0.33: logits 1,024 x 128,256 x 2 + three float32 copies x 4 + FlashInfer's 1 MiB, beside the forward's output
    # and its last rows that profile_run holds, (8,192 + 1,024) x 4,096 x 2 B
    warmup = 1024 * LLAMA_VOCAB * (2 + 3 * 4) + MIB
    held = (8192 + 1024) * 4096 * 2
    assert r33.per_gpu.activation_bytes == warmup + held == 1_915_224_064
    assert r32.per_gpu.non_torch_bytes == r33.per_gpu.non_torch_bytes
    assert r32.per_gpu.cuda_graph_bytes == r33.per_gpu.cuda_graph_bytes
    assert r32.per_gpu.activation_bytes - r33.per_gpu.activation_bytes == GIB - warmup - held
