"""GPU catalog, bytes moved per step, and roofline bounds, against figures worked out by hand."""

import pytest

from kvplan import KvplanError
from kvplan.model.catalog import load_card
from kvplan.model.dtypes import parse_dtype
from kvplan.cost.flops import decode_step_flops, prefill_flops
from kvplan.cost.hardware import COMPUTE_TYPES, load_gpu, load_gpus
from kvplan.cost.params import count_params
from kvplan.planning.estimate import estimate
from kvplan.cost.traffic import moe_weights_read_bytes_min, weights_read_bytes
from kvplan.cost.runtimes import get_engine  # noqa: E402

FP16 = parse_dtype("fp16")


def roofline(card, **kw):
    """The roofline block of an estimate with --gpu: the same inputs a user gives."""
    return estimate(card, **kw).roofline
EXPECTED_GPUS = {"A100-40GB", "A100-80GB", "H100-SXM", "H100-PCIe", "H200", "B200", "L4", "L40S", "A10G",
                 "RTX-4090", "MI300X", "A40", "T4"}


def test_catalog_entries_are_sourced_and_dense():
    gpus = load_gpus()
    assert set(gpus) == EXPECTED_GPUS
    for gpu in gpus.values():
        assert gpu.source.startswith("https://") and isinstance(gpu.memory_bytes, int)
        half = "bf16" if gpu.peak_flops.bf16 is not None else "fp16"  # Turing (T4): fp16 tensor units only
        assert gpu.peak_flops.fp32 < gpu.peak(half)  # tensor units beat plain FP32 everywhere
    h100 = load_gpu("h100-sxm")  # names are case-insensitive
    assert h100.peak("bf16") == 1979e12 / 2  # datasheet 1,979 TFLOPS is with 2:4 sparsity
    assert (h100.memory_bytes, h100.memory_bandwidth_bytes_per_s) == (80 * 10**9, 3_350 * 10**9)


def test_gpu_errors_and_gpu_file(tmp_path):
    with pytest.raises(KvplanError, match="known: A100-40GB, A100-80GB"):
        load_gpu("V100")
    with pytest.raises(KvplanError, match="no fp8 peak; allowed: fp32, tf32, bf16, fp16, int8"):
        load_gpu("A100-80GB").peak("fp8")
    extra = tmp_path / "gpus.yaml"
    extra.write_text("gpus:\n  H100-SXM:\n    vendor: NVIDIA\n    memory_bytes: 85520809984\n"
                     "    memory_bandwidth_bytes_per_s: 3350000000000\n    peak_flops: {fp32: 6.7e+13}\n"
                     "    source: https://example.org/measured\n")
    assert load_gpu("H100-SXM", extra).memory_bytes == 85_520_809_984  # the file overrides the bundled entry
    assert len(load_gpus(extra)) == len(EXPECTED_GPUS)
    extra.write_text(extra.read_text().replace("    source:", "    sparse: true\n    source:"))
    with pytest.raises(KvplanError, match="sparse: unknown field"):
        load_gpus(extra)


def test_decode_batch_1_is_memory_bound_llama_2_7b():
    card, seq = load_card("llama-2-7b"), 2048
    r = roofline(card, batch=1, prompt_len=1024, seq_len=seq, gpu="H100-SXM")
    p = count_params(card)
    weights = 2 * (p.total - p.embedding + 4096)  # untied: the embedding table is gathered, one row read
    kv = 32 * 32 * 128 * 2 * 2  # bytes per token
    assert r.decode_step.weights_read_bytes == weights
    assert (r.decode_step.kv_read_bytes, r.decode_step.kv_write_bytes) == (seq * kv, kv)
    assert r.decode_step.bound == "memory"
    assert r.time_per_output_token_s == pytest.approx((weights + (seq + 1) * kv) / 3.35e12, rel=1e-12)
    assert r.decode_tokens_per_s == pytest.approx(1 / r.time_per_output_token_s)
    assert r.decode_step.arithmetic_intensity_flops_per_byte == pytest.approx(1.0, rel=0.05)  # 2 FLOP / 2 B


def test_prefill_is_compute_bound_and_efficiencies_scale():
    card = load_card("llama-2-7b")
    r = roofline(card, batch=4, prompt_len=4096, seq_len=4096, gpu="H100-SXM", mfu=0.5, mbu=0.8)
    flops = prefill_flops(card, batch=4, prompt_len=4096).causal_total
    assert (r.prefill.bound, r.prefill.flops, r.prefill.flops_basis) == ("compute", flops, "causal")
    assert r.time_to_first_token_s == pytest.approx(flops / (989.5e12 * 0.5))
    assert r.prefill.memory_time_s == pytest.approx(r.prefill.bytes_moved / (3.35e12 * 0.8))
    assert r.ridge_point_flops_per_byte == pytest.approx(989.5e12 * 0.5 / (3.35e12 * 0.8))


def test_hf_engine_counts_dense_flops():
    card = load_card("llama-2-7b")
    r = roofline(card, batch=1, prompt_len=512, seq_len=1024, gpu="A100-80GB", engine=get_engine("hf-dynamic"))
    assert r.prefill.flops_basis == "dense"
    assert r.prefill.flops == prefill_flops(card, batch=1, prompt_len=512, engine=get_engine("hf-dynamic")).total
    assert r.decode_step.flops == decode_step_flops(card, batch=1, cache_len=1023, engine=get_engine("hf-dynamic")).total


def test_moe_reads_only_routed_experts():
    card = load_card("mixtral-8x7b")  # 8 experts, top-2, untied
    p = count_params(card)
    assert weights_read_bytes(card, FP16, 1) == 2 * (p.active - p.embedding + card.hidden_size)
    assert weights_read_bytes(card, FP16, 4) == 2 * (p.total - p.embedding + 4 * card.hidden_size)  # 4 x 2 >= 8
    assert moe_weights_read_bytes_min(card, FP16, 4) == 2 * (p.active - p.embedding + 4 * card.hidden_size)


def test_fit_and_errors():
    card = load_card("llama-2-70b")
    assert not roofline(card, batch=1, prompt_len=8, seq_len=16, gpu="L4").fits_in_memory
    assert roofline(card, batch=1, prompt_len=8, seq_len=16, gpu="MI300X").fits_in_memory
    r = roofline(card, batch=1, prompt_len=8, seq_len=16, gpu="H100-SXM", weight_dtype="fp8")
    assert r.compute_dtype == "fp8" and r.peak_flops_per_s == 1979e12
    with pytest.raises(KvplanError, match="--prompt-len"):
        roofline(card, batch=1, prompt_len=32, seq_len=16, gpu="H100-SXM")
    with pytest.raises(KvplanError, match="--mfu"):
        roofline(card, batch=1, prompt_len=8, seq_len=16, gpu="H100-SXM", mfu=1.5)
    with pytest.raises(KvplanError, match="no fp8 peak"):
        roofline(card, batch=1, prompt_len=8, seq_len=16, gpu="A10G", weight_dtype="fp8")
    assert set(COMPUTE_TYPES) == {"fp32", "tf32", "bf16", "fp16", "fp8", "int8"}


def test_cli_compare_time_per_token_is_the_roofline(cli_json):
    res = cli_json("compare", "-m", "mistral-7b-v0.1", "--attention", "mha", "--gpu", "L40S", "--batch", "8",
                   "--seq-len", "8192")
    expected = roofline(load_card("mistral-7b-v0.1"), batch=8, prompt_len=8192, seq_len=8192, gpu="L40S")
    assert res["rows"][0]["time_per_output_token_s"] == expected.time_per_output_token_s
    assert res["gpu"] == "L40S" and res["rows"][0]["max_batch"] >= 1
