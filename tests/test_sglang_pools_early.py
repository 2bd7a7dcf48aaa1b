"""SGLang's hybrid sliding-window pool before 0.5.10, release by release (read in the PyPI wheels 0.4.8 - 0.5.9;
kvplan.cost.serving_sglang's comment above SWA_LAYER_KINDS), and the trtllm_mha backend's pages on Blackwell before
0.5.10. Each split is recomputed here from the formula as SGLang writes it, from the memory kvplan leaves for the
cache (the same in every 0.5.x release at a given --mem-fraction-static), and pinned."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kvplan.cli.app import app
from kvplan.cost import serving_sglang as sg

H100 = ("--gpu", "H100-SXM", "--max-model-len", "8192", "--mem-fraction-static", "0.85")
# The load's rests held at the figures these pools are worked from (217 MiB with more than one GPU, none on one):
# these tests pin SGLang's pool rules apart from the allocator replay that estimates the rests by default
# (kvplan.cost.allocator.reserved_rest_bytes, pinned against the logs in tests/test_logs_v0_sglang.py)
TWO_GPUS_LOAD, ONE_GPU_LOAD = ("--non-torch-memory", "217MiB"), ("--non-torch-memory", "0")


def _plan(*args: str) -> dict:
    r = CliRunner().invoke(app, ["plan", *args, "--json"])
    assert r.exit_code == 0, r.stderr
    return json.loads(r.stdout)


def _layers_split(capacity: int, n_full: int, n_swa: int, ratio: float = 0.8) -> tuple[int, int]:
    """0.4.10 - 0.5.6 model_runner.py set_num_token_hybrid, 0.5.7 - 0.5.8 model_runner_kv_cache_mixin.py
    set_num_tokens_hybrid_swa: total_tokens = max_total_num_tokens x num_hidden_layers; full = int(total_tokens /
    (swa_full_tokens_ratio x swa_layers_num + full_layers_num)); swa = int(full x ratio) (page size 1)."""
    full = int(capacity * (n_full + n_swa) / (ratio * n_swa + n_full))
    return full, int(full * ratio)


def _bytes_split(capacity: int, full_per_layer: int, n_full: int, swa_per_layer: int, n_swa: int,
                 ratio: float = 0.8) -> tuple[int, int]:
    """0.5.9 set_num_tokens_hybrid_swa ("unified memory-based allocation"): total_memory = max_total_num_tokens x
    (full_per_token x n_full + swa_per_token x n_swa); full = int(total_memory / (full_per_token x n_full +
    swa_full_tokens_ratio x swa_per_token x n_swa))."""
    total_memory = capacity * (full_per_layer * n_full + swa_per_layer * n_swa)
    full = int(total_memory / (full_per_layer * n_full + ratio * swa_per_layer * n_swa))
    return full, int(full * ratio)


# gpt-oss-20b on one H100 at --mem-fraction-static 0.85: 12 sliding + 12 full layers of 8 KV heads x 64 x (K, V) x
# 2 B = 2,048 B a layer; 57,107,143,142 B for the cache, one pool of 57,107,143,142 // 49,152 = 1,161,847 tokens
GPT_OSS_REST, GPT_OSS_CELL = 57_107_143_142, 24 * 2048


@pytest.mark.parametrize(("engine", "full", "swa"), [
    ("sglang==0.5.1", 1_161_847, None),  # server_args.py model_specific_adjustments: disable_hybrid_swa_memory
    ("sglang==0.5.4", 1_161_847, None),
    ("sglang==0.5.6", 1_161_847, None),
    ("sglang==0.5.7", 1_161_847, None),  # model_config.py is_hybrid_model lists MiMo-V2-Flash only
    ("sglang==0.5.8", 1_290_941, 1_032_752),  # is_hybrid_swa_model; split by layers
    ("sglang==0.5.9", 1_290_941, 1_032_752),  # split by bytes: the same for layers of one size
])
def test_gpt_oss_20b_on_h100_release_by_release(engine, full, swa):
    d = _plan("-m", "gpt-oss-20b", *H100, "--engine", engine)
    kv = d["kv_cache"]
    assert kv["available_bytes"] == GPT_OSS_REST
    capacity = GPT_OSS_REST // GPT_OSS_CELL
    assert capacity == 1_161_847
    assert (kv["tokens"], kv["swa_tokens"]) == (full, swa)
    if swa is None:
        assert d["max_concurrency"] == pytest.approx(capacity / 8192)
        return
    split = _layers_split(capacity, 12, 12) if engine.endswith("0.5.8") else _bytes_split(capacity, 2048, 12, 2048, 12)
    assert split == (full, swa)
    # before 0.5.11 a request is admitted against the smaller pool's free tokens and charged its whole length in both
    # (schedule_policy.py PrefillAdder.rem_total_tokens): the sliding pool (0.8 x full) sets the concurrency
    assert d["max_concurrency"] == pytest.approx(swa / 8192)
    assert d["request_kv_bytes"] == 8192 * GPT_OSS_CELL
    assert any("all 8,192 in the sliding one too" in n and "full_layer_tokens=1290941" in n for n in d["notes"])


def test_llama_4_scout_becomes_hybrid_in_0_5_8():
    """Llama 4 Scout on 4 H100s: 48 layers of 2 KV heads per GPU x 128 x (K, V) x 2 B = 1,024 B, 36 chunked (SGLang's
    SWA layers, (i + 1) % 4 != 0) and 12 global. 0.5.7 gives it one pool (is_hybrid_model: Llama 4 only with
    --hybrid-kvcache-ratio); 0.5.8 splits by layers, 0.5.9 by bytes."""
    one = _plan("-m", "llama-4-scout-17b-16e", *H100, "--tp", "4", "--engine", "sglang==0.5.7", *TWO_GPUS_LOAD)["kv_cache"]
    rest = one["available_bytes"]
    assert rest == 10_861_873_152 and one["tokens"] == rest // (48 * 1024) == 220_985 and one["swa_tokens"] is None
    for engine in ("sglang==0.5.8", "sglang==0.5.9"):
        d = _plan("-m", "llama-4-scout-17b-16e", *H100, "--tp", "4", "--engine", engine, *TWO_GPUS_LOAD)
        kv = d["kv_cache"]
        assert kv["available_bytes"] == rest
        assert (kv["tokens"], kv["swa_tokens"]) == _layers_split(220_985, 12, 36) == (259_982, 207_985)
        assert _bytes_split(220_985, 1024, 12, 1024, 36) == (259_982, 207_985)
        assert d["max_concurrency"] == pytest.approx(207_985 / 8192)


@pytest.mark.parametrize(("model", "rest", "n_full", "n_swa", "single", "full", "swa"), [
    # 62 layers, 5 sliding : 1 global (10 global), 16 KV heads x 128 x (K, V) x 2 B = 8,192 B a layer
    ("gemma-3-27b-it", 16_350_640_518, 10, 52, 32_192, 38_680, 30_944),
    # 42 layers alternating (models/gemma2.py: layer_id % 2 == 0 slides), 8 KV heads x 256 x 2 x 2 = 8,192 B
    ("gemma-2-9b", 53_327_632_998, 21, 21, 154_993, 172_214, 137_771),
])
def test_gemma_is_hybrid_in_0_4_10_only(model, rest, n_full, n_swa, single, full, swa):
    """0.4.10 (model_runner.py ModelRunner.__init__): a model class with get_attention_sliding_window_size, Llama 4
    aside, gets the hybrid pool: Gemma 2 and 3. 0.4.9 has no such rule; 0.5.1 (server_args.py
    model_specific_adjustments: "Disable hybrid SWA memory for ... as it is not yet supported") turns it off."""
    assert rest // ((n_full + n_swa) * 8192) == single
    for engine in ("sglang==0.4.9", "sglang==0.5.1"):
        kv = _plan("-m", model, *H100, "--engine", engine, *ONE_GPU_LOAD)["kv_cache"]
        assert (kv["available_bytes"], kv["tokens"], kv["swa_tokens"]) == (rest, single, None)
    d = _plan("-m", model, *H100, "--engine", "sglang==0.4.10", *ONE_GPU_LOAD)
    kv = d["kv_cache"]
    assert kv["available_bytes"] == rest
    assert (kv["tokens"], kv["swa_tokens"]) == _layers_split(single, n_full, n_swa) == (full, swa)
    assert d["max_concurrency"] == pytest.approx(swa / 8192)
    off = _plan("-m", model, *H100, "--engine", "sglang==0.4.10", "--disable-hybrid-swa-memory", *ONE_GPU_LOAD)["kv_cache"]
    assert (off["tokens"], off["swa_tokens"]) == (single, None)


def test_gpt_oss_under_trtllm_mha_keeps_one_pool_in_0_5_8_and_0_5_9():
    """B200 (SM100): gpt-oss runs trtllm_mha (page size 64); 0.5.8 - 0.5.9 then keep one pool ("Disable hybrid SWA
    memory for GPT-OSS model with trtllm_mha attention backend"), 0.5.10 splits it."""
    args = ("-m", "gpt-oss-20b", "--gpu", "B200", "--max-model-len", "8192", "--mem-fraction-static", "0.85")
    for engine in ("sglang==0.5.8", "sglang==0.5.9"):
        d = _plan(*args, "--engine", engine)
        kv = d["kv_cache"]
        assert kv["block_size"] == 64 and kv["swa_tokens"] is None
        assert kv["tokens"] == kv["available_bytes"] // GPT_OSS_CELL // 64 * 64 == 3_003_072
        assert any("one pool: GptOssForCausalLM under the trtllm_mha attention backend" in n for n in d["notes"])
        assert "--page-size 64" in d["launch_command"]
    kv = _plan(*args, "--engine", "sglang==0.5.10")["kv_cache"]
    assert kv["block_size"] == 64 and kv["swa_tokens"] is not None and kv["tokens"] % 64 == 0


def test_gpt_oss_with_a_draft_keeps_one_pool_in_0_5_8_only():
    """0.5.8 also keeps gpt-oss single under speculative decoding (server_args.py: "Disable hybrid SWA memory for
    GPT-OSS model with speculative decoding"); 0.5.9 does not, and a draft in the hybrid pool is not modelled."""
    spec = ("--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "lmsys/EAGLE3-gpt-oss-20b")
    d = _plan("-m", "gpt-oss-20b", *H100, "--engine", "sglang==0.5.8", *spec)
    assert d["kv_cache"]["swa_tokens"] is None
    assert any("one pool: GptOssForCausalLM with speculative decoding" in n for n in d["notes"])
    r = CliRunner().invoke(app, ["plan", "-m", "gpt-oss-20b", *H100, "--engine", "sglang==0.5.9", *spec])
    assert r.exit_code == 2 and "a draft in SGLang's hybrid SWA pool is not modelled" in r.stderr


def test_a_small_sliding_pool_is_not_refused_before_0_5_11_but_holds_no_request():
    """validate_swa_pool_size (0.5.20) refuses a sliding pool below the window + a page; before 0.5.11 SGLang starts
    and admits no request longer than the sliding pool (PrefillAdder.rem_total_tokens)."""
    d = _plan("-m", "gpt-oss-20b", *H100, "--engine", "sglang==0.5.8", "--swa-full-tokens-ratio", "0.001")
    kv = d["kv_cache"]
    assert (kv["tokens"], kv["swa_tokens"]) == _layers_split(1_161_847, 12, 12, 0.001) == (2_321_372, 2_321)
    assert d["fits"] is False and d["max_model_len_fit"] == 2_321
    assert d["max_concurrency"] == pytest.approx(2_321 / 8192)
    assert "--swa-full-tokens-ratio 0.001" in d["launch_command"]


def test_the_layer_split_ignores_the_layers_sizes():
    """The "layers" split (0.4.10 - 0.5.8) divides the single pool's tokens by layer counts, the "capacity" split
    (0.5.9 - 0.5.10) by bytes: they differ where a sliding layer is smaller than a full one (a MiMo-V2 shape)."""
    pool, full_b, swa_b = 10_000_000_000, 4 * 4096, 12 * 2048  # 4 full layers of 4,096 B, 12 sliding of 2,048 B
    capacity = pool // (full_b + swa_b)
    assert sg.hybrid_swa_tokens(pool, full_b, swa_b, 0.8, 1, "layers", (4, 12)) == _layers_split(capacity, 4, 12)
    assert sg.hybrid_swa_tokens(pool, full_b, swa_b, 0.8, 1, "capacity") == _bytes_split(capacity, 4096, 4, 2048, 12)
    assert (sg.hybrid_swa_tokens(pool, full_b, swa_b, 0.8, 1, "layers", (4, 12))
            != sg.hybrid_swa_tokens(pool, full_b, swa_b, 0.8, 1, "capacity"))
    # the capacity is rounded down to a page before either split (init_memory_pool / _resolve_token_capacity)
    full, swa = sg.hybrid_swa_tokens(pool, full_b, swa_b, 0.8, 64, "capacity")
    assert full == _bytes_split(capacity // 64 * 64, 4096, 4, 2048, 12)[0] // 64 * 64 and swa % 64 == 0
    with pytest.raises(ValueError, match="split 'x'"):
        sg.hybrid_swa_tokens(pool, full_b, swa_b, 0.8, 1, "x")


@pytest.mark.parametrize(("model", "engine", "page"), [
    ("qwen3-8b", "sglang==0.4.10", 1),  # no trtllm_mha in 0.4.10 (which loads no gpt-oss: GptOssForCausalLM 0.5.0rc0)
    ("gpt-oss-20b", "sglang==0.5.1", 64),  # model_specific_adjustments: trtllm_mha on SM100 for GptOssForCausalLM
    ("olmo-2-13b", "sglang==0.5.2", 1),
    ("olmo-2-13b", "sglang==0.5.4", 64),  # _handle_model_specific_adjustments: Olmo2ForCausalLM too
    ("llama-4-scout-17b-16e", "sglang==0.5.4", 1),
    ("llama-4-scout-17b-16e", "sglang==0.5.5", 64),  # and Llama 4
    ("qwen3-8b", "sglang==0.5.6", 1),  # any other model: FlashInfer, page size 1
    ("qwen3-8b", "sglang==0.5.7", 64),  # _handle_attention_backend_compatibility: every model without MLA
    ("deepseek-v2-lite", "sglang==0.5.7", 1),  # MLA: FlashInfer
    ("qwen3-next-80b-a3b", "sglang==0.5.7", 1),  # triton on SM100 (_handle_model_specific_adjustments)
    ("qwen3-next-80b-a3b", "sglang==0.5.9", 1),  # _handle_mamba_radix_cache's sm100_default_attention_backend
    ("qwen3.5-27b", "sglang==0.5.9", 1),  # the first release with Qwen3_5ForConditionalGeneration: triton
    ("nemotron-h-56b", "sglang==0.5.8", 1),  # flashinfer on SM100 with the radix cache on
    ("granite-4.0-micro", "sglang==0.5.9", 64),  # GraniteMoeHybridForCausalLM without mamba layers keeps trtllm_mha
])
def test_trtllm_mha_pages_on_blackwell_before_0_5_10(model, engine, page):
    tp = "2" if model == "llama-4-scout-17b-16e" else "4" if model == "nemotron-h-56b" else "1"
    d = _plan("-m", model, "--gpu", "B200", "--tp", tp, "--max-model-len", "4096", "--engine", engine)
    assert d["kv_cache"]["block_size"] == page
    assert any("trtllm_mha" in n for n in d["notes"]) == (page == 64)
