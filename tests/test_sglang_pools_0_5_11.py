"""SGLang's pools from 0.5.10 on, release range by release range (read in the PyPI wheels 0.5.10 - 0.5.23): which
state-space hybrids keep page size 1 on Blackwell because their model-specific adjustments pick another attention
backend than trtllm_mha (kvplan.cost.serving_sglang TRTLLM_MHA_*EXCEPTIONS_*), and what the scheduler charges a
request in the hybrid sliding-window pool (serving_sglang.SWA_CHARGES), recomputed here from SGLang's code."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kvplan.cli.app import app

B200 = ("--gpu", "B200", "--max-model-len", "8192")


def _plan(*args: str) -> dict:
    r = CliRunner().invoke(app, ["plan", *args, "--json"])
    assert r.exit_code == 0, r.stderr
    return json.loads(r.stdout)


def _trtllm_noted(d: dict) -> bool:
    return any("trtllm_mha" in n for n in d["notes"])


# the releases (None: the newest) whose B200 plan has each page size. Qwen3-Next / Qwen3.5: triton on SM100 without
# speculative decoding (server_args.py _handle_model_specific_adjustments 0.5.10 - 0.5.14, arg_groups/overrides.py
# 0.5.15 - 0.5.18, arg_groups/model_overrides/qwen3_5.py from 0.5.19). Nemotron-H: flashinfer on SM100 through 0.5.18
# (nemotron_h_hook.py from 0.5.12, overrides.py 0.5.15 - 0.5.18), trtllm_mha from 0.5.19
# (model_overrides/nemotron_h.py: "elif get_platform().is_sm100"). Qwen3-8B, dense: trtllm_mha's 64-token pages
PAGES = {1: {"qwen3-next-80b-a3b": ("0.5.10", "0.5.13", "0.5.16", "0.5.18", "0.5.19", None),
             "qwen3.5-27b": ("0.5.11", None), "nemotron-3-nano-30b-a3b": ("0.5.10", "0.5.18"),
             "nemotron-h-56b": ("0.5.14",)},
         64: {"nemotron-3-nano-30b-a3b": ("0.5.19", None), "qwen3-8b": ("0.5.16",)}}


@pytest.mark.parametrize(("model", "engine", "page"), [
    (model, "sglang" if release is None else f"sglang=={release}", page)
    for page, models in PAGES.items() for model, releases in models.items() for release in releases])
def test_state_space_hybrids_keep_page_1_on_b200_where_the_release_picks_another_backend(model, engine, page):
    d = _plan("-m", model, *B200, "--engine", engine)
    assert d["inputs"]["block_size"] == page
    assert d["kv_cache"]["tokens"] % page == 0
    assert _trtllm_noted(d) == (page == 64)


@pytest.mark.parametrize(("engine", "topk", "page"), [
    ("sglang==0.5.9", "1", 1),  # 0.5.9's branch: triton whatever the draft
    ("sglang==0.5.10", "1", 64),  # 0.5.10+: with speculative decoding trtllm_mha stays where it is the default
    ("sglang==0.5.16", "1", 64),
    ("sglang", "1", 64),
    ("sglang", "4", 1),  # a draft tree (top-k > 1): trtllm_mha is no one's default (_get_default_attn_backend)
])
def test_qwen3_next_keeps_trtllm_mha_with_speculative_decoding_from_0_5_10(engine, topk, page):
    # a given --mem-fraction-static: 0.5.10's default keeps 4 GiB more for the draft (QA C 4), too little for 80B
    # SGLang takes a top-k only with the steps (and, above 1, the draft tokens): features.parse_sglang_speculative
    d = _plan("-m", "qwen3-next-80b-a3b", *B200, "--engine", engine, "--speculative-algorithm", "NEXTN",
              "--speculative-num-steps", "3", "--speculative-eagle-topk", topk, "--speculative-num-draft-tokens", "8",
              "--mem-fraction-static", "0.85",
              # 0.5.10 - 0.5.13 refuse speculative decoding on a hybrid with the radix cache under no_buffer
              # (_handle_mamba_radix_cache's ValueError: SglangVersion.mamba_spec_no_buffer)
              *(["--disable-radix-cache"] if engine == "sglang==0.5.10" else []))
    assert d["inputs"]["block_size"] == page
    assert _trtllm_noted(d) == (page == 64)


@pytest.mark.parametrize(("engine", "page"), [("sglang==0.5.16", 64), ("sglang==0.5.17", 128), ("sglang", 128)])
def test_trtllm_mha_takes_128_token_pages_from_0_5_17(engine, page):
    """0.5.16: "TensorRT-LLM MHA only supports page_size of 16, 32 or 64"; 0.5.17: "of 16, 32, 64 or 128"."""
    d = _plan("-m", "qwen3-8b", *B200, "--engine", engine, "--block-size", "128")
    assert d["inputs"]["block_size"] == page


# --- the sliding-window pool's admission charge ---------------------------------------------------------------------

H100 = ("--gpu", "H100-SXM", "--mem-fraction-static", "0.85")
# gpt-oss-20b on one H100 at --mem-fraction-static 0.85 (tests/test_sglang_pools_early.py): 12 full + 12 sliding
# layers of 2,048 B a token; window 128; chunked_prefill_size 8,192 (81,559 MiB: the 60 - 90 GiB tier)
GPT_OSS_REST, LAYERS_BYTES, WINDOW, H100_CHUNK = 57_107_143_142, 12 * 2048, 128, 8192


def _split(rest: int, full_bytes: int, swa_bytes: int, ratio: float = 0.8, page: int = 1) -> tuple[int, int]:
    """pool_configurator.py HybridSWAPoolConfigurator (0.5.11+): full = int(rest // (F + ratio x S)), swa =
    int(full x ratio), both rounded down to a page."""
    full = int(rest // (full_bytes + ratio * swa_bytes)) // page * page
    return full, int(full * ratio) // page * page


def _budget_0_5_11(extend: int, rem_chunk_tokens: int, window: int, page: int) -> int:
    """schedule_policy.py PrefillAdder._swa_budget_for_req, 0.5.11 - 0.5.15 (0.5.16 the same value)."""
    alloc = min(extend, rem_chunk_tokens)
    return max(alloc, window) + page


def _budget_0_5_17(extend: int, max_new_tokens: int, rem_chunk_tokens: int, window: int, page: int) -> int:
    """_swa_budget_for_req 0.5.17 - 0.5.20 (_swa_reserved_tokens: min(extend + max_new_tokens, window) + page), from
    0.5.21 mem_cache/prefill_budget.py estimate_swa_kv_tokens."""
    alloc = min(extend, rem_chunk_tokens)
    return max(alloc - window, 0) + min(extend + max_new_tokens, window) + page


@pytest.mark.parametrize(("engine", "max_len", "charge"), [
    # a prompt of max_model_len, nothing decoded yet: extend = L, max_new_tokens = 0
    ("sglang==0.5.11", 8192, _budget_0_5_11(8192, H100_CHUNK, WINDOW, 1)),  # 8,193: the first chunk and a page
    ("sglang==0.5.16", 8192, _budget_0_5_11(8192, H100_CHUNK, WINDOW, 1)),
    ("sglang==0.5.17", 8192, _budget_0_5_17(8192, 0, H100_CHUNK, WINDOW, 1)),  # 8,193: 8,064 + 128 + 1
    ("sglang", 8192, _budget_0_5_17(8192, 0, H100_CHUNK, WINDOW, 1)),
    ("sglang==0.5.12", 32768, _budget_0_5_11(32768, H100_CHUNK, WINDOW, 1)),  # one chunk, not the whole prompt
    ("sglang==0.5.12", 100, _budget_0_5_11(100, H100_CHUNK, WINDOW, 1)),  # 129: the window is a floor to 0.5.16
    ("sglang==0.5.19", 100, _budget_0_5_17(100, 0, H100_CHUNK, WINDOW, 1)),  # 101: no longer from 0.5.17
])
def test_gpt_oss_20b_sliding_charge_on_h100_release_by_release(engine, max_len, charge):
    assert {8192: 8193, 32768: 8193, 100: 129 if engine == "sglang==0.5.12" else 101}[max_len] == charge
    d = _plan("-m", "gpt-oss-20b", *H100, "--max-model-len", str(max_len), "--engine", engine)
    kv = d["kv_cache"]
    assert kv["available_bytes"] == GPT_OSS_REST
    full, swa = _split(GPT_OSS_REST, LAYERS_BYTES, LAYERS_BYTES)
    assert (kv["tokens"], kv["swa_tokens"]) == (full, swa) == (1_290_942, 1_032_753)
    assert d["max_concurrency"] == pytest.approx(min(full / max_len, swa / charge))
    assert d["request_kv_bytes"] == max_len * LAYERS_BYTES + charge * LAYERS_BYTES


def test_gpt_oss_20b_at_8192_tokens_is_held_by_its_sliding_pool_from_0_5_11():
    """1,032,753 / 8,193 = 126.05 requests of 8,192 tokens (the full pool: 1,290,942 / 8,192 = 157.6); 0.5.10 charges
    the whole 8,192 in its sliding pool (split from the single pool's capacity: 1,032,752 tokens)."""
    by = {e: _plan("-m", "gpt-oss-20b", *H100, "--max-model-len", "8192", "--engine", e)
          for e in ("sglang==0.5.10", "sglang==0.5.12", "sglang")}
    assert (by["sglang==0.5.12"]["max_concurrency"] == by["sglang"]["max_concurrency"]
            == pytest.approx(1_032_753 / 8193) == pytest.approx(126.05, abs=0.01))
    assert by["sglang==0.5.10"]["kv_cache"]["swa_tokens"] == 1_032_752
    assert by["sglang==0.5.10"]["max_concurrency"] == pytest.approx(1_032_752 / 8192)


@pytest.mark.parametrize(("engine", "charge", "concurrency"), [
    # Llama 4 Scout, TP 4: 12 full-attention (NoPE) + 36 chunked layers of 2 KV heads x 128 x (K, V) x 2 B = 1,024 B
    # a rank; the chunked layers' window is the attention chunk, 8,192 > max_model_len 4,096
    ("sglang==0.5.12", _budget_0_5_11(4096, H100_CHUNK, 8192, 1), 207_985 / 8193),  # the window floor: 8,193
    ("sglang==0.5.16", _budget_0_5_11(4096, H100_CHUNK, 8192, 1), 207_985 / 8193),
    ("sglang==0.5.17", _budget_0_5_17(4096, 0, H100_CHUNK, 8192, 1), 207_985 / 4097),  # the request itself: 4,097
    ("sglang", _budget_0_5_17(4096, 0, H100_CHUNK, 8192, 1), 207_985 / 4097),
])
def test_llama_4_scout_shorter_than_its_chunk(engine, charge, concurrency):
    d = _plan("-m", "llama-4-scout-17b-16e", *H100, "--tp", "4", "--max-model-len", "4096", "--engine", engine,
              "--non-torch-memory", "217MiB")  # the load's rests held as the pool was worked (test_sglang_pools_early)
    kv = d["kv_cache"]
    full, swa = _split(kv["available_bytes"], 12 * 1024, 36 * 1024)
    assert (kv["tokens"], kv["swa_tokens"]) == (full, swa) == (259_982, 207_985)
    assert d["max_concurrency"] == pytest.approx(swa / charge) == pytest.approx(concurrency)


@pytest.mark.parametrize("engine", ["sglang==0.5.12", "sglang==0.5.19", "sglang"])
def test_gpt_oss_20b_on_b200_charges_its_16384_token_chunk_in_64_token_pages(engine):
    """B200 (183 GiB, 160 GiB and over): chunked_prefill_size 16,384; trtllm_mha's 64-token pages: 16,384 - 128 + 128
    + 64 = 16,448 (0.5.11's max(16,384, 128) + 64 the same)."""
    d = _plan("-m", "gpt-oss-20b", "--gpu", "B200", "--mem-fraction-static", "0.85", "--max-model-len", "16384",
              "--engine", engine)
    kv = d["kv_cache"]
    assert d["inputs"]["block_size"] == 64
    charge = _budget_0_5_17(16384, 0, 16384, WINDOW, 64)
    assert charge == _budget_0_5_11(16384, 16384, WINDOW, 64) == 16448
    full, swa = _split(kv["available_bytes"], LAYERS_BYTES, LAYERS_BYTES, page=64)
    assert (kv["tokens"], kv["swa_tokens"]) == (full, swa) == (3_336_768, 2_669_376)
    assert d["max_concurrency"] == pytest.approx(swa / charge) == pytest.approx(162.29, abs=0.01)


def _ratio(engine: str, ratio: str):
    return CliRunner().invoke(app, ["plan", "-m", "gpt-oss-20b", *H100, "--max-model-len", "8192", "--engine", engine,
                                    "--swa-full-tokens-ratio", ratio, "--json"])


@pytest.mark.parametrize(("engine", "fits", "concurrency"), [
    ("sglang==0.5.12", False, 6950 / 8193),  # 0.5.11 - 0.5.15: the request waits for its 8,193 tokens for ever
    ("sglang==0.5.16", True, 1.0),  # 0.5.16+: _swa_chunk_cap admits it with a smaller chunk, one at a time
    ("sglang==0.5.19", True, 1.0),
    ("sglang", True, 1.0),
])
def test_a_sliding_pool_below_the_charge(engine, fits, concurrency):
    """Ratio 0.003: 2,316,745 full and 6,950 sliding tokens, more than the window + a page, less than the charge."""
    r = _ratio(engine, "0.003")
    assert r.exit_code == 0, r.stderr
    d = json.loads(r.stdout)
    full, swa = _split(GPT_OSS_REST, LAYERS_BYTES, LAYERS_BYTES, 0.003)
    assert (d["kv_cache"]["tokens"], d["kv_cache"]["swa_tokens"]) == (full, swa) == (2_316_745, 6950)
    assert d["fits"] is fits
    assert d["max_concurrency"] == pytest.approx(concurrency)


@pytest.mark.parametrize("engine", ["sglang==0.5.12", "sglang==0.5.16", "sglang==0.5.19"])
def test_a_sliding_pool_below_the_window_is_refused_at_start_up_only_from_0_5_20(engine):
    """Ratio 0.00004: 92 sliding tokens, under the window + a page (129). 0.5.20's pool_configurator.py
    validate_swa_pool_size refuses to start; before, SGLang starts and never admits the request."""
    r = _ratio(engine, "0.00004")
    assert r.exit_code == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["kv_cache"]["swa_tokens"] == 92 and d["fits"] is False
    refused = _ratio("sglang==0.5.20", "0.00004")
    lines = refused.stderr.strip().splitlines()
    assert refused.exit_code == 2 and len(lines) == 1 and "one request" in lines[0]
