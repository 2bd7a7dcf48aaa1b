"""SGLang's pools from 0.5.10: the hybrid sliding-window pool (the sliding-window layers of the architectures
is_hybrid_swa_model lists keep their own pool, swa_full_tokens_ratio x the full-attention layers' tokens:
kvplan.cost.serving_sglang hybrid_swa_tokens) and the trtllm_mha backend's pages on Blackwell."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvplan.cli.app import app
from kvplan.cost import serving_sglang as sg
from kvplan.planning.capacity import plan

DATA = Path(__file__).parent / "data" / "fromlog"


@pytest.mark.parametrize(("full", "ratio", "swa"), [
    (213_761, 0.8, 171_008),  # Gemma-4-26B-A4B, DGX Spark: "SWAKVPool mem usage: 36.69 GB, swa size: 171008, full
    # size: 213761" (GitHub code index file 67060834076)
    # gpt-oss-120b, 4x A100-80GB: "full_layer_tokens=63987, swa_layer_tokens=51189" (63145571901)
    (63_987, 0.8, 51_189),
    (1_710, 0.8, 1_368),  # Gemma-4-12B: "full_layer_tokens=1710, swa_layer_tokens=1368" (55801756965)
    (181_760, 0.05, 9_088),  # "full_layer_tokens=181760, swa_layer_tokens=9088" at ratio 0.05 (65739849880)
])
def test_the_sliding_pool_is_the_ratio_of_the_full_one_as_public_logs_print_it(full, ratio, swa):
    # the full pool's tokens from a pool of exactly that many cells, then the sliding pool as SGLang splits it
    cell_full, cell_swa = 24_576, 24_576
    pool = int(full * (cell_full + ratio * cell_swa)) + 1
    assert sg.hybrid_swa_tokens(pool, cell_full, cell_swa, ratio, 1, "cell") == (full, swa)


def test_gpt_oss_20b_on_h100_splits_its_pool():
    """12 full + 12 sliding layers of 8 KV heads x 64 x (K, V) x 2 B = 24,576 B a token each: the full pool gets
    rest // (24,576 + 0.8 x 24,576) tokens (pool_configurator.py), 11.1% more than one pool of 49,152 B a token."""
    r = plan("gpt-oss-20b", gpu="H100-SXM", max_model_len=8192, engine="sglang")
    rest = r.kv_cache.available_bytes
    assert r.kv_cache.tokens == int(rest // (12 * 2048 + 0.8 * 12 * 2048))
    assert r.kv_cache.swa_tokens == int(r.kv_cache.tokens * 0.8)
    one = plan("gpt-oss-20b", gpu="H100-SXM", max_model_len=8192, engine="sglang", disable_hybrid_swa_memory=True)
    assert one.kv_cache.available_bytes == rest and one.kv_cache.swa_tokens is None
    assert one.kv_cache.tokens == rest // (24 * 2048)
    # the full layers' tokens, and in the sliding pool the admission charge (0.5.23 prefill_budget.py
    # estimate_swa_kv_tokens): the first chunk (8,192 on an H100) past the window, the window and a page, 8,193 tokens;
    # the sliding pool, 0.8 x the full one, runs out first (tests/test_sglang_pools_0_5_11.py has each range's charge)
    assert r.max_concurrency == pytest.approx(r.kv_cache.swa_tokens / 8193)
    assert r.request_kv_bytes == 8192 * 12 * 2048 + 8193 * 12 * 2048
    half = plan("gpt-oss-20b", gpu="H100-SXM", max_model_len=8192, engine="sglang", swa_full_tokens_ratio=0.5)
    assert half.kv_cache.tokens == int(rest // (12 * 2048 + 0.5 * 12 * 2048))
    assert "--swa-full-tokens-ratio 0.5" in half.launch_command
    assert "--disable-hybrid-swa-memory" in one.launch_command


def test_0_5_10_splits_the_single_pools_capacity():
    """0.5.10 (model_runner_kv_cache_mixin.py _resolve_hybrid_swa_tokens): capacity = rest // (F + S) first, then
    full = int(capacity x (F + S) / (F + r S)); 0.5.7 plans one pool for gpt-oss (tests/test_sglang_pools_early.py
    has the releases before 0.5.10)."""
    new = plan("gpt-oss-20b", gpu="H100-SXM", max_model_len=8192, engine="sglang==0.5.10")
    rest, cell = new.kv_cache.available_bytes, 24 * 2048
    assert new.kv_cache.tokens == int(rest // cell * cell / (12 * 2048 + 0.8 * 12 * 2048))
    old = plan("gpt-oss-20b", gpu="H100-SXM", max_model_len=8192, engine="sglang==0.5.7")
    assert old.kv_cache.swa_tokens is None and old.kv_cache.tokens == old.kv_cache.available_bytes // cell
    # 0.5.10's scheduler charges a request its whole length in both pools (PrefillAdder.rem_total_tokens, the min of
    # the two): the sliding pool, 0.8 x the full one, sets the concurrency; 0.5.11's _swa_budget_for_req charges the
    # first chunk (8,192) or the window, and a page
    assert new.max_concurrency == pytest.approx(new.kv_cache.swa_tokens / 8192)
    assert new.request_kv_bytes == 8192 * cell
    later = plan("gpt-oss-20b", gpu="H100-SXM", max_model_len=8192, engine="sglang==0.5.12")
    assert later.max_concurrency == pytest.approx(later.kv_cache.swa_tokens / 8193)


def test_only_listed_architectures_with_both_kinds_of_layer():
    for model in ("gemma-3-27b-it", "mistral-7b-v0.1", "llama-3.1-8b"):  # Gemma 3: SGLang forces one pool
        r = plan(model, gpu="H100-SXM", max_model_len=4096, engine="sglang")
        assert r.kv_cache.swa_tokens is None


def _refused(*args: str) -> str:
    r = CliRunner().invoke(app, ["plan", "--gpu", "H100-SXM", "--max-model-len", "8192", *args])
    lines = r.stderr.strip().splitlines()
    assert r.exit_code == 2 and len(lines) == 1, (r.exit_code, r.stderr)
    return lines[0]


def test_flags_refused_where_they_do_nothing():
    assert "(0, 1]" in _refused("-m", "gpt-oss-20b", "--engine", "sglang", "--swa-full-tokens-ratio", "1.5")
    assert "--engine sglang" in _refused("-m", "gpt-oss-20b", "--swa-full-tokens-ratio", "0.5")
    assert "--disable-hybrid-swa-memory" in _refused("-m", "gpt-oss-20b", "--disable-hybrid-swa-memory")
    assert "one request" in _refused("-m", "gpt-oss-20b", "--engine", "sglang", "--swa-full-tokens-ratio", "1e-9")


def test_a_ratio_sglang_ignores_is_said_to_be_ignored():
    """SGLang takes --swa-full-tokens-ratio for every model and uses it only for a hybrid SWA pool (its ServerArgs
    print it in every log): the plan is the one-pool plan, with a note."""
    for model, engine in (("llama-3.1-8b", "sglang"), ("gpt-oss-20b", "sglang==0.5.7")):
        plain = plan(model, gpu="H100-SXM", max_model_len=8192, engine=engine)
        given = plan(model, gpu="H100-SXM", max_model_len=8192, engine=engine, swa_full_tokens_ratio=0.5)
        assert given.kv_cache == plain.kv_cache and given.launch_command == plain.launch_command
        assert any("--swa-full-tokens-ratio 0.5: not used" in n for n in given.notes)


def test_the_sliding_pool_can_set_the_concurrency():
    """0.5.23 charges a request max(min(L, chunk) - window, 0) + min(L, window) + a page in the sliding pool (8,192 -
    128 + 128 + 1 for gpt-oss at 8,192 tokens on an H100; 100 + 1 at 100 tokens): with a small ratio, or requests
    shorter than the chunk / ratio, the sliding pool runs out first."""
    r = plan("gpt-oss-20b", gpu="H100-SXM", max_model_len=8192, engine="sglang", swa_full_tokens_ratio=0.01)
    assert r.max_concurrency == pytest.approx(r.kv_cache.swa_tokens / 8193)
    assert r.max_concurrency < r.kv_cache.tokens / 8192
    short = plan("gpt-oss-20b", gpu="H100-SXM", max_model_len=100, engine="sglang")
    assert short.max_concurrency == pytest.approx(short.kv_cache.swa_tokens / 101)
    scout = plan("llama-4-scout-17b-16e", gpu="H100-SXM", tp=4, max_model_len=4096, engine="sglang")
    assert scout.max_concurrency == pytest.approx(scout.kv_cache.swa_tokens / 4097)  # the chunk (8,192) > L


def test_from_log_reads_both_pools():
    """The two pools' K and V sizes add up to the memory left for the cache; max_total_num_tokens is the full pool's
    (a synthetic log in SGLang 0.5.23's wording)."""
    r = CliRunner().invoke(app, ["plan", "--from-log", str(DATA / "sglang-hybrid-swa-gpt-oss-20b-synthetic.log"),
                                 "--json"])
    assert r.exit_code == 0, r.stderr
    rows = {row["figure"]: row for row in json.loads(r.stdout)["rows"]}
    assert rows["available"]["logged"]["value"] == pytest.approx(14.34 * 2 + 11.47 * 2)
    assert rows["available"]["flags_verdict"] == "within rounding"
    assert rows["tokens"]["logged"]["value"] == 1_252_741 == rows["tokens"]["flags_alone"]


@pytest.mark.parametrize(("model", "gpu", "engine", "given", "page"), [
    ("qwen3-8b", "B200", "sglang", None, 64),  # trtllm_mha on SM100 changes the default 1 to 64
    ("qwen3-8b", "B300", "sglang", 8, 64),  # compute capability 10.3: SM100 too; 8 is no trtllm_mha page
    ("qwen3-8b", "B200", "sglang", 32, 32),
    ("qwen3-8b", "B200", "sglang", 128, 128),  # 0.5.18+
    ("qwen3-8b", "B200", "sglang==0.5.17", 128, 128),  # 128 joins in 0.5.17
    ("qwen3-8b", "B200", "sglang==0.5.16", 128, 64),
    ("qwen3-8b", "B200", "sglang==0.5.10", 128, 64),  # 0.5.10: 16, 32 or 64
    ("qwen3-8b", "B200", "sglang==0.5.9", None, 64),  # the default for every model without MLA from 0.5.7
    ("qwen3-8b", "B200", "sglang==0.5.6", None, 1),  # before 0.5.7 only a few families' default
    ("qwen3-8b", "H100-SXM", "sglang", None, 1),
    ("qwen3-8b", "RTX-PRO-6000", "sglang", None, 1),  # SM120 is not SM100
    ("deepseek-v2-lite", "B200", "sglang", None, 1),  # MLA: FlashInfer
])
def test_trtllm_mha_pages_on_blackwell(model, gpu, engine, given, page):
    extra = {} if given is None else {"block_size": given}
    r = plan(model, gpu=gpu, max_model_len=8192, engine=engine, **extra)
    assert r.inputs.block_size == page
    assert r.kv_cache.tokens % page == 0
    assert any("trtllm_mha" in n for n in r.notes) == (page == 64 or (given in (32, 128) and page == given))
