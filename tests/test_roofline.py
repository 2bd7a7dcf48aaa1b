"""GPU catalog, bytes moved per step, and roofline bounds, against figures worked out by hand."""

import pytest

from kvplan import KvplanError
from kvplan.model.catalog import bundled_names, load_card
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
                 "RTX-4090", "RTX-3090", "MI300X", "A40", "T4", "RTX-4080", "RTX-5090", "RTX-6000-Ada", "RTX-PRO-6000", "A10",
                 "L20", "H20", "H100-NVL", "GH200", "MI250X", "MI325X", "Gaudi-3", "RTX-A6000", "RTX-A5000",
                 "V100-32GB", "V100-16GB", "B300", "RX-7900-XTX", "L40", "RTX-3060", "A30", "RTX-A4000",
                 "RTX-4000-Ada", "RTX-4060-Ti", "RTX-4070-Ti-Super", "RTX-3080"}


def test_catalog_entries_are_sourced_and_dense():
    gpus = load_gpus()
    assert set(gpus) == EXPECTED_GPUS
    for gpu in gpus.values():
        assert gpu.source.startswith(("https://", "http://")) and isinstance(gpu.memory_bytes, int)
        half = "bf16" if gpu.peak_flops.bf16 is not None else "fp16"  # Turing (T4): fp16 tensor units only
        if gpu.peak_flops.fp32 is not None:  # Gaudi 3 states no FP32 matrix rate
            assert gpu.peak_flops.fp32 < gpu.peak(half)  # tensor units beat plain FP32 everywhere
    h100 = load_gpu("h100-sxm")  # names are case-insensitive
    assert h100.peak("bf16") == 1979e12 / 2  # datasheet 1,979 TFLOPS is with 2:4 sparsity
    assert (h100.memory_bytes, h100.memory_bandwidth_bytes_per_s) == (80 * 10**9, 3_350 * 10**9)


def test_gpu_errors_and_gpu_file(tmp_path):
    with pytest.raises(KvplanError, match="known: A10, A100-40GB, A100-80GB"):
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


def test_fit_is_against_what_torch_sees():
    """An H100 holds 85,030,322,176 B as torch sees it (the catalog's visible total), not the datasheet's 80e9: a
    need between the two fits, as it does in vLLM's budget."""
    from kvplan.cost.hardware import load_gpu

    h100, card = load_gpu("H100-SXM"), load_card("llama-2-13b")
    assert h100.memory_bytes == 80_000_000_000 < h100.visible_memory_bytes == 85_030_322_176
    # at 17,000 tokens (800 KiB per token): batch 4 needs 81.7 GB, between the two; batch 5 95.6 GB, neither
    need = {b: roofline(card, batch=b, prompt_len=8, seq_len=17_000, gpu="H100-SXM") for b in (3, 4, 5)}
    assert all(r.gpu_memory_bytes == 85_030_322_176 for r in need.values())
    assert 80_000_000_000 < need[4].memory_needed_bytes <= 85_030_322_176 and need[4].fits_in_memory
    assert need[3].fits_in_memory and not need[5].fits_in_memory
    r = roofline(card, batch=1, prompt_len=8, seq_len=16, gpu="H100-SXM", weight_dtype="fp8")
    assert r.compute_dtype == "fp8" and r.peak_flops_per_s == 1979e12
    with pytest.raises(KvplanError, match="--prompt-len"):
        roofline(card, batch=1, prompt_len=32, seq_len=16, gpu="H100-SXM")
    with pytest.raises(KvplanError, match="--mfu"):
        roofline(card, batch=1, prompt_len=8, seq_len=16, gpu="H100-SXM", mfu=1.5)
    a10g = roofline(card, batch=1, prompt_len=8, seq_len=16, gpu="A10G", weight_dtype="fp8")  # FP8 Marlin
    assert a10g.compute_dtype == "bf16" and a10g.peak_flops_per_s == load_gpu("A10G").peak_flops.bf16
    assert set(COMPUTE_TYPES) == {"fp32", "tf32", "bf16", "fp16", "fp8", "int8"}


def test_cli_compare_time_per_token_is_the_roofline(cli_json):
    res = cli_json("compare", "-m", "mistral-7b-v0.1", "--attention", "mha", "--gpu", "L40S", "--batch", "8",
                   "--seq-len", "8192")
    expected = roofline(load_card("mistral-7b-v0.1"), batch=8, prompt_len=8192, seq_len=8192, gpu="L40S")
    assert res["rows"][0]["time_per_output_token_s"] == expected.time_per_output_token_s
    assert res["gpu"] == "L40S" and res["rows"][0]["max_batch"] >= 1


# --- float32 checkpoints: the roofline runs at the dtype the engine serves ---------------------------------------
FP32_DECODERS = tuple(n for n in bundled_names() if load_card(n).dtype == "float32"
                      and load_card(n).architecture == "decoder-only")
H100_BF16 = 989.5e12  # H100 SXM datasheet: 1,979 TFLOPS bf16 with 2:4 sparsity, half of it dense


def test_every_fp32_decoder_card_is_covered():
    assert {"gemma-2-9b", "gemma-2-27b", "gpt2", "gpt2-xl", "olmo-2-13b"} <= set(FP32_DECODERS)


@pytest.mark.parametrize("name", FP32_DECODERS)
def test_fp32_checkpoint_served_in_bf16_computes_at_the_bf16_peak(name):
    """vLLM and SGLang serve a float32 checkpoint in bf16 (dtype=auto): its prefill runs on the bf16 tensor cores,
    not at the card's fp32 peak (~15x slower on an H100)."""
    card = load_card(name)
    for engine in ("vllm", "sglang"):
        r = roofline(card, batch=1, prompt_len=2048, seq_len=2048, gpu="H100-SXM", engine=engine)
        assert (r.compute_dtype, r.peak_flops_per_s) == ("bf16", H100_BF16)
        assert r.prefill.compute_time_s == pytest.approx(r.prefill.flops / H100_BF16, rel=1e-12)
    kept = roofline(card, batch=1, prompt_len=2048, seq_len=2048, gpu="H100-SXM", engine="hf-dynamic")
    assert (kept.compute_dtype, kept.peak_flops_per_s) == ("fp32", 67e12)  # transformers keeps float32
    asked = roofline(card, batch=1, prompt_len=2048, seq_len=2048, gpu="H100-SXM", engine="vllm", weight_dtype="fp32")
    assert asked.compute_dtype == "fp32"  # --weight-dtype fp32 is served (and computed) in float32


def test_gemma_2_9b_ttft_of_an_8k_prompt_on_h100_is_the_bf16_bound():
    """The issue's figure: one 8,192-token prompt of Gemma-2-9B under vLLM on one H100 is ~0.16 s, compute-bound.
    Independent bound (Kaplan et al. 2020): 2 FLOPs per non-embedding parameter per token, plus attention, which
    at 8k tokens (half the layers sliding over 4,096) adds under a quarter of that."""
    card = load_card("gemma-2-9b")
    r = roofline(card, batch=1, prompt_len=8192, seq_len=8192, gpu="H100-SXM", engine="vllm")
    p = count_params(card)
    dense_s = 2 * (p.total - p.embedding) * 8192 / H100_BF16  # 0.138 s
    assert r.prefill.bound == "compute"
    assert dense_s < r.time_to_first_token_one_request_s < 1.25 * dense_s
    assert 0.14 < r.time_to_first_token_one_request_s < 0.17


def test_weight_only_int8_of_an_fp32_checkpoint_computes_in_the_served_activation_dtype():
    card = load_card("gemma-2-9b")
    r = roofline(card, batch=1, prompt_len=512, seq_len=512, gpu="H100-SXM", engine="vllm", weight_dtype="int8")
    assert r.compute_dtype == "bf16"  # dequantized to the activations, which vLLM serves in bf16


def test_an_fp8_checkpoint_multiplies_on_the_fp8_units():
    """DeepSeek-V3's FP8 checkpoint (its card's quantization block, bf16 dtype) runs fp8 GEMMs on Hopper, and the
    weight-only FP8 Marlin kernel in bf16 on Ampere; the bf16 checkpoint runs in bf16."""
    fp8 = estimate("deepseek-v3-fp8", seq_len=4096, batch=1, gpu="H100-SXM", engine="vllm").roofline
    assert fp8.compute_dtype == "fp8" and fp8.peak_flops_per_s == load_gpu("H100-SXM").peak_flops.fp8
    a100 = estimate("deepseek-v3-fp8", seq_len=4096, batch=1, gpu="A100-80GB", engine="vllm").roofline
    assert a100.compute_dtype == "bf16"
    bf16 = estimate("deepseek-v3", seq_len=4096, batch=1, gpu="H100-SXM", engine="vllm").roofline
    assert bf16.compute_dtype == "bf16"


def test_an_fp16_checkpoint_on_a_gpu_without_fp16_runs_in_bf16():
    """Gaudi 3 states bf16 and fp8 rates alone: Llama-2-7B (float16) is planned in bf16 there, not refused (the
    search over the catalog used to stop on it)."""
    r = estimate("llama-2-7b", seq_len=1024, batch=1, gpu="Gaudi-3", engine="vllm").roofline
    assert r.compute_dtype == "bf16" and r.peak_flops_per_s == load_gpu("Gaudi-3").peak_flops.bf16


def test_hybrid_decode_reads_its_tokens_not_the_raised_blocks_last_page():
    """A vLLM hybrid's decode step reads the K/V of the tokens it attends and each state once, whatever block the
    plan raised the attention page to (Qwen3-Next on H200: 576 tokens at TP 2): the paged kernels load a page's rows
    below the sequence length only (vLLM 0.33.0 v1/attention/ops/triton_unified_attention.py
    kernel_unified_attention, tile_mask = seq_offset < max_seq_prefix_len on the K and V loads; FlashAttention 3
    hopper/paged_kv.h PagedKVManager.load_K / load_V, rows < seqlen_k). From config.json: 12 full-attention
    layers of 2 KV heads x 256 (1 per GPU at TP 2) and 36 Gated DeltaNet layers, conv state 3 x (2 x 16 x 128 +
    32 x 128) and recurrent state 32 heads x 128 x 128, all bf16, heads split over TP. A guard: kvplan already
    reads this; whole 576-token pages would read 786,432 B more per request (64 slots x 12 layers x 1,024 B)."""
    from kvplan.planning.capacity import plan

    L, batch = 32768, 8
    attention = 12 * 1 * 256 * 2 * 2 * L  # layers x heads per GPU x head_dim x (K, V) x 2 B x tokens
    states = 36 * (3 * (2 * 16 * 128 + 32 * 128) // 2 * 2 + 32 * 128 * 128 // 2 * 2)  # per GPU at TP 2, bf16
    p = plan("qwen3-next-80b-a3b", gpu="H200", tp=2, max_model_len=L, concurrency=batch)
    assert p.inputs.block_size == 576  # raised from 16 to hold a state page
    assert p.latency.decode_kv_read_bytes == batch * (attention + states) == 3_379_298_304
    for block in (16, 576):  # estimate --gpu: the same read at the plan's block as at vLLM's default
        r = roofline("qwen3-next-80b-a3b", engine="vllm", gpu="H200", seq_len=L, batch=batch, block_size=block)
        assert r.decode_step.kv_read_bytes == 2 * batch * (attention + states)  # TP 1: every head


def test_the_figures_derived_for_the_cards_added_2026_11_29():
    """What the 2026-11-29 entries derive, re-derived from the figures their notes quote."""
    g = load_gpus()
    rel = lambda a, b: abs(a - b) / b  # noqa: E731
    # RTX 3060: the GA102 whitepaper's RTX 3080 (68 SMs, 1,710 MHz, 59.5 dense FP16/FP32-accumulate TFLOPS, 238
    # INT8 TOPS) is 512 FLOPs and 2,048 ops per SM per clock; at 28 SMs x 1,777 MHz
    assert round(59.5e12 / (68 * 1.71e9)) == 512 and round(238e12 / (68 * 1.71e9) / 512) == 4  # 2,047: rounding
    assert rel(g["RTX-3060"].peak("fp16"), 28 * 1.777e9 * 512) < 1e-3
    assert rel(g["RTX-3060"].peak("int8"), 28 * 1.777e9 * 2048) < 1e-3
    assert rel(g["RTX-3060"].peak("fp32"), 3584 * 2 * 1.777e9) < 1e-3
    # GeForce Ada "AI TOPS" is FP8 with FP16 accumulate and sparsity: the RTX 4090's 1,321.2 is 8x its 165.2
    assert rel(1321.2e12 / 8, g["RTX-4090"].peak("bf16")) < 1e-3
    for name, tops, sms, mhz in (("RTX-4060-Ti", 353, 34, 2535), ("RTX-4070-Ti-Super", 706, 66, 2610)):
        assert rel(g[name].peak("bf16"), tops * 1e12 / 8) < 1e-3 and rel(g[name].peak("int8"), tops * 1e12 / 2) < 1e-3
        assert rel(g[name].peak("bf16"), sms * mhz * 1e6 * 512) < 2e-3
    # professional cards: the datasheet's one tensor figure is with 2:4 sparsity
    assert g["RTX-A4000"].peak("bf16") == 153.4e12 / 2 and g["RTX-4000-Ada"].peak("fp8") == 327.6e12 / 2
    assert g["L40"].peak("bf16") == 362.1e12 / 2 and g["A30"].peak("bf16") == 330e12 / 2
    # SM counts from CUDA cores at 128 per GA10x / Ada SM
    assert [g[n].sm_count for n in ("L40", "RTX-A4000", "RTX-4000-Ada", "RTX-4060-Ti")] == [
        18176 // 128, 6144 // 128, 6144 // 128, 4352 // 128]
    # the L40's visible total is what vLLM printed on one (docs/logs/vllm-code60430572081-...-l40.log)
    assert f"{g['L40'].visible_memory_bytes / 2**30:.2f}" == "44.39"
