"""The requests an engine runs at once: its pool's concurrency, capped by its scheduler (vLLM max_num_seqs, SGLang
resolve_max_num_reqs, TensorRT-LLM max_batch_size). A target above that cap is not met by one replica, and the
latency bounds are at the batch that runs, never at one that cannot."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvplan.cost.serving_sglang import max_running_requests
from kvplan.planning.capacity import plan
from kvplan.planning.capacity.search import search


def test_vllm_target_above_max_num_seqs_is_not_met_on_one_replica():
    r = plan("llama-3.1-8b", gpu="A100-80GB", max_model_len=512, concurrency=300)
    assert r.inputs.max_num_seqs == 256 < 300 < r.max_concurrency  # the pool holds 300, the scheduler runs 256
    assert "target 300: NOT met" in r.verdict and "--max-num-seqs 256" in r.verdict
    assert r.latency.batch_per_replica == 256
    assert "target 256: met" in plan("llama-3.1-8b", gpu="A100-80GB", max_model_len=512, concurrency=256).verdict


def test_sglang_runs_at_most_resolve_max_num_reqs():
    r = plan("gemma-3-1b", gpu="H100-SXM", engine="sglang", max_model_len=256, concurrency=9000)
    cap = max_running_requests(r.kv_cache.tokens, 256)
    assert cap == 4096 < 9000 < r.max_concurrency  # the pool holds 9,986 requests; SGLang admits 4,096
    assert "target 9,000: NOT met" in r.verdict and "--max-running-requests 4,096" in r.verdict
    assert r.latency.batch_per_replica == cap


def test_the_search_counts_what_runs_not_what_the_pool_holds():
    s = search("gemma-3-1b", gpus=["H100-SXM"], engine="sglang", max_model_len=256, concurrency=10000)
    best = s.options[0]
    assert best.dp == 3 and best.max_concurrency == 3 * 4096  # two replicas' pools would hold 10,000, not run them


def test_latency_is_at_the_batch_that_fits_not_the_target():
    r = plan("llama-3.1-8b", gpu="H100-SXM", max_model_len=131072, concurrency=256)
    assert 3 < r.max_concurrency < 4 and "NOT met" in r.verdict
    assert r.latency.batch_per_replica == 3
    assert any("the 3 requests this layout runs at once" in n for n in r.latency.notes)
    fitting = plan("llama-3.1-8b", gpu="H100-SXM", max_model_len=131072, concurrency=3).latency
    assert r.latency.tpot_ms == pytest.approx(fitting.tpot_ms)


@pytest.mark.parametrize("value, text", [(0.00314159, "0.003142"), (0.0123, "0.01"), (1234.5, "1,234.50"),
                                         (0.0, "0.00")])
def test_dollars_below_a_cent_keep_their_digits(value, text):
    from kvplan.units import fmt_usd

    assert fmt_usd(value) == text


def test_bad_layout_and_latency_flags_exit_2_naming_them(cli):
    base = ("plan", "-m", "llama-3-8b", "--max-model-len", "8192")
    for flag in ("--tp", "--pp", "--dp"):  # 0 was read as 1
        code, _, err = cli(*base, "--gpu", "H100-SXM", flag, "0")
        assert code == 2 and err.startswith(f"error: {flag}:")
    for value in ("nan", "0", "-5", "inf"):  # nan and 0 were ignored, -5 found no layout
        code, _, err = cli(*base, "--concurrency", "2", "--ttft-ms", value)
        assert code == 2 and err.startswith("error: --ttft-ms:")
    code, _, err = cli(*base, "--gpu", "H100-SXM", "--shared-prefix-len", "1000000")
    assert code == 2 and err.startswith("error: --shared-prefix-len:")


def test_disagg_efficiency_factors_are_fractions(cli):
    code, _, err = cli("disagg", "-m", "llama-3.1-70b", "--gpu", "H100-SXM", "--rate", "10", "--isl", "2048",
                       "--osl", "256", "--ttft-ms", "2000", "--tpot-ms", "50", "--prefill-factor", "5")
    assert code == 2 and err.startswith("error: --prefill-factor:")


def test_a_fixed_pool_larger_than_the_gpu_says_it_cannot_be_allocated():
    r = plan("llama-3-8b", gpu="H100-SXM", max_model_len=8192, kv_cache_memory="100GiB")
    assert any("would run out of memory" in n for n in r.notes)
    r = plan("llama-3-8b", gpu="H100-SXM", max_model_len=8192, kv_cache_memory="40GiB")
    assert not any("would run out of memory" in n for n in r.notes)


def test_integer_weights_need_a_quantized_checkpoint_and_fp8_is_echoed_as_asked(cli):
    """`--weight-dtype int4` planned every parameter at half a byte under a launch line that loads the bf16
    checkpoint; vLLM and SGLang quantize online only to fp8, which the plan now echoes as asked (it said bf16)."""
    for engine in ("vllm", "sglang"):
        code, _, err = cli("plan", "-m", "llama-3.1-8b", "--gpu", "H100-SXM", "--max-model-len", "8192",
                           "--engine", engine, "--weight-dtype", "int4")
        assert code == 2 and err.startswith("error: --weight-dtype: int4:") and "qwen3-8b-awq" in err
    r = plan("llama-3.1-8b", gpu="H100-SXM", max_model_len=8192, weight_dtype="fp8")
    assert r.inputs.weight_dtype == "fp8_e4m3" and "--quantization fp8" in r.launch_command


def test_review_fixes(cli, tmp_path):
    # -c 0 is llama.cpp's training context, and -c rounds up to 256 cells per slot: neither is refused
    for c in ("0", "8000"):
        code, out, err = cli("plan", "-m", "llama-3.1-8b", "--gpu", "H100-SXM", "--max-model-len", "8192", "--engine",
                             "llamacpp", "-c", c)
        assert code == 0, err
    # DP adds whole requests per replica: 3.77 runs 3, so two replicas run 6, not 7
    r = plan("llama-3.1-8b", gpu="H100-SXM", max_model_len=120000, dp=2, concurrency=7)
    assert 3 < r.max_concurrency < 4 and "target 7: NOT met" in r.verdict and r.latency.batch_per_replica == 3
    # a check scenario with disagg keys and a plan budget but no max_model_len: named, not an internal error
    cfg = tmp_path / "kvplan.toml"
    cfg.write_text('[[scenarios]]\nname = "a"\nmodel = "llama-3-8b"\ngpu = "H100-SXM"\nrate = 1.0\nisl = 512\n'
                   'osl = 64\nttft_ms = 2000.0\ntpot_ms = 50.0\nmin_concurrency = 2\n')
    code, _, err = cli("check", "--config", str(cfg))
    assert code == 2 and "max_model_len: required" in err
    # a flag the user typed is not blamed on the log
    log = Path(__file__).parents[1] / "docs" / "logs" / "vllm-codeindex7292846353-qwen3-next-80b-tp2.log"
    code, _, err = cli("plan", "--from-log", str(log), "--engine", "vllm==0.8")
    assert code == 2 and "from the log's launch flags" not in err
    # llama.cpp launches a GGUF: no note about the HF checkpoint's vision tower
    notes = plan("gemma-3-12b", gpu="H100-SXM", max_model_len=8192, engine="llamacpp").notes
    assert not any("multimodal checkpoint" in n for n in notes)
