"""vLLM's chunked local attention (Llama 4) by release: from 0.14 its layers keep the hybrid KV cache manager and a
request holds cdiv(min(chunk + in-flight tokens, L), block) pages of each chunked group
(v1/kv_cache_interface.py ChunkedLocalAttentionSpec, read in 0.14.0 and 0.33.0); before 0.14 the manager is off
(envs.py VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE "0") and unify_hybrid_kv_cache_specs makes them full
attention in one group (kv_cache_utils.py, read in 0.10.0 and 0.13.0). The figures are derived by hand from those
readings (QA F1 finding 2)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kvplan.cli.app import app

SCOUT = ["-m", "llama-4-scout-17b-16e", "--gpu", "H200", "--tp", "4"]
# one TP-4 rank: 8 / 4 = 2 KV heads x 128 x 2 (K, V) x 2 B = 1,024 B per token and layer; a page of 16 tokens 16 KiB
PAGE = 16 * 1024


def _plan(*args: str) -> dict:
    r = CliRunner().invoke(app, ["plan", *SCOUT, *args, "--json"])
    assert r.exit_code == 0, r.stderr
    return json.loads(r.stdout)


def test_0_33_bounds_chunked_layers_at_chunk_plus_in_flight_tokens():
    """0.33 on an H200: 8,192 batched tokens, 2 batches in flight (async scheduling, PP 1). A 32,768-token request:
    the full group 2,048 pages, each of the 3 chunked groups cdiv(8,192 + 16,384, 16) = 1,536: 6,656 (not 8,192)."""
    d = _plan("--engine", "vllm==0.33", "--max-model-len", "32768")
    kv = d["kv_cache"]
    assert (kv["groups"], kv["bytes_per_block"]) == (4, 12 * PAGE)
    assert kv["blocks_per_request"] == 2048 + 3 * 1536
    assert d["max_concurrency"] == pytest.approx(kv["num_blocks"] / 6656)


def test_0_14_to_0_25_take_one_batch_in_flight():
    """0.14 - 0.25: chunk + max_num_batched_tokens, cdiv(min(8,192 + 8,192, 32,768), 16) = 1,024 a chunked group."""
    for engine in ("vllm==0.14", "vllm==0.25"):
        assert _plan("--engine", engine, "--max-model-len", "32768")["kv_cache"]["blocks_per_request"] == 2048 + 3 * 1024


def test_before_0_14_the_chunked_layers_are_full_attention_in_one_group():
    """0.13 (and 0.10): one group of all 48 layers, cdiv(32,768, 16) = 2,048 pages of 48 x 16 KiB a request."""
    for engine in ("vllm==0.13", "vllm==0.10"):
        kv = _plan("--engine", engine, "--max-model-len", "32768")["kv_cache"]
        assert (kv["groups"], kv["bytes_per_block"], kv["blocks_per_request"]) == (1, 48 * PAGE, 2048)


def test_longest_length_that_fits_counts_the_bounded_chunked_pages():
    """A pool of 8,609 blocks keeps one for the null block: 8,608 = cdiv(L, 16) + 3 x 1,536 at L = 64,000 (the
    chunked groups' 1,536 pages once L passes 24,576 tokens); the closed form for full attention alone would give
    8,608 // 4 x 16 = 34,432."""
    d = _plan("--engine", "vllm==0.33", "--max-model-len", "131072", "--kv-cache-memory", str(8609 * 12 * PAGE))
    assert d["kv_cache"]["num_blocks"] == 8609
    assert d["max_model_len_fit"] == 64000


def test_estimate_holds_every_position_of_a_chunked_layer_before_0_14():
    """estimate at 10,000 tokens, 8 KV heads x 128 x 2 x 2 B = 4,096 B a token and layer: 0.14+ frees the chunks
    before the current one (36 layers x 1,808 positions + 12 x 10,000); 0.13's full attention holds 48 x 10,000."""
    def per_seq(engine: str) -> int:
        r = CliRunner().invoke(app, ["estimate", "-m", "llama-4-scout-17b-16e", "--seq-len", "10000", "--engine",
                                     engine, "--json"])
        assert r.exit_code == 0, r.stderr
        return json.loads(r.stdout)["kv_cache"]["bytes_per_sequence"]

    assert per_seq("vllm==0.14") == (36 * 1808 + 12 * 10000) * 4096
    assert per_seq("vllm==0.13") == 48 * 10000 * 4096
