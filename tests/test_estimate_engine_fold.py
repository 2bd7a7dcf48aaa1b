"""`kvplan estimate` sizes a request's cache as the engine pages it, the same figure `kvplan plan` charges (QA F1 3,
F1 7; QA F2 4).

vLLM V1 pages layers in KV cache groups: a hybrid's attention block raised until one attention page holds a layer's
states, the state page padded to it (platforms/interface.py _align_hybrid_block_size, read in 0.33.0) and each group
``group_size`` layer slots wide, padding included (v1/core/kv_cache_utils.py _get_kv_cache_groups_uniform_page_size).
The figures below are derived by hand from those rules and the cards' shapes, at vLLM 0.27 (one state page per
request and state group: prefix caching off by default for hybrids)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kvplan import estimate, sweep
from kvplan.planning.capacity import plan
from kvplan.cli.app import app


def _run(*args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(app, list(args))
    return r.exit_code, r.stdout, r.stderr


def _json(*args: str) -> dict:
    code, out, err = _run(*args, "--json")
    assert code == 0, err
    return json.loads(out)


# Qwen3-Next at TP 1, bf16: attention 2 KV heads x (256 + 256) x 2 B = 2,048 B a token and layer; a GDN state
# conv 8,192 x 3 x 2 B + recurrent 32 x 128 x 128 x 2 B = 1,097,728 B; block 16 x cdiv(1,097,728, 16 x 2,048) = 544,
# page 544 x 2,048 = 1,114,112 B. 10,000 tokens: 36 state pages + 12 layers x cdiv(10,000, 544) = 19 blocks.
QWEN3_NEXT_10K = (36 + 12 * 19) * 1_114_112


def test_qwen3_next_estimate_is_the_plans_one_request():
    e = _json("estimate", "-m", "qwen3-next-80b-a3b", "--seq-len", "10000", "--engine", "vllm==0.27",
              "--gpu", "H200")
    assert e["kv_cache"]["bytes_per_sequence"] == QWEN3_NEXT_10K == 294_125_568
    rows = {g["kind"]: g for g in e["kv_cache"]["groups"]}
    assert rows["full"]["positions_held"] == 19 * 544
    assert "(19 blocks of 544)" in rows["full"]["formula"]
    assert rows["padding"]["bytes_per_sequence"] == 36 * (1_114_112 - 1_097_728)
    assert sum(g["bytes_per_sequence"] for g in e["kv_cache"]["groups"]) == QWEN3_NEXT_10K
    p = _json("plan", "-m", "qwen3-next-80b-a3b", "--gpu", "H200", "--gpu-memory", "400GiB", "--engine", "vllm==0.27",
              "--max-model-len", "10000")
    assert p["request_kv_bytes"] == QWEN3_NEXT_10K


def test_nemotron_h_pays_its_padding_layer_slots():
    """54 state layers and 10 attention layers: group_size 10, the states in 6 groups of 10 (6 padding slots);
    attention 8 x 128 x 2 x 2 B = 4,096 B a token; states 20,480 x 3 x 2 B + 16,777,216 B = 16,900,096 B, so the
    block is 16 x cdiv(16,900,096, 65,536) = 4,128 and a page 4,128 x 4,096 = 16,908,288 B. 8,000 tokens: 6 state
    groups x 1 page + cdiv(8,000, 4,128) = 2 attention blocks, each block 10 slots wide."""
    e = estimate("nemotron-h-56b", seq_len=8000, engine="vllm==0.27")
    assert e.kv_cache.bytes_per_sequence == (6 + 2) * 10 * 16_908_288
    pad = next(g for g in e.kv_cache.groups if g.kind == "padding")
    assert pad.layers == 6


def test_sliding_groups_pad_too():
    """Gemma-3-27B: 52 sliding + 10 full layers, group_size 10, so 6 sliding groups (8 padding slots), each slot
    holding the 64 blocks a sliding layer keeps at 8,000 tokens (500 - (8,000 - 1,024) // 16) of 16 x 8,192 B."""
    e = estimate("gemma-3-27b", seq_len=8000, engine="vllm")
    per_layer = 16 * 128 * 2 * 2
    assert e.kv_cache.bytes_per_sequence == (52 * 1024 + 10 * 8000 + 8 * 1024) * per_layer


def test_sweep_rows_take_the_same_fold():
    rows = list(sweep("qwen3-next-80b-a3b", seq_len="10000", engine="vllm==0.27"))
    assert rows[0]["kv_cache.bytes_per_sequence"] == QWEN3_NEXT_10K


@pytest.mark.parametrize("engine", ["vllm", "sglang", "vllm==0.13"])
def test_engines_that_load_no_t5_refuse_it(engine):
    code, out, err = _run("estimate", "-m", "t5-base", "--seq-len", "50", "--encoder-len", "100", "--engine", engine)
    assert code == 2 and out == ""
    assert err.startswith("error: --engine: ") and "t5-base" in err and err.count("\n") == 1


def test_t5_is_still_sized_by_the_engines_that_hold_it():
    assert estimate("t5-base", seq_len=50, encoder_len=100, engine="ideal").kv_cache.bytes_per_sequence > 0


@pytest.mark.parametrize("engine", ["ideal", "hf-dynamic", "sglang", "tgi", "trtllm", "llamacpp"])
def test_block_size_refused_where_the_estimate_ignores_it(engine):
    code, _, err = _run("estimate", "-m", "llama-3-8b", "--seq-len", "100", "--engine", engine, "--block-size", "64")
    assert code == 2
    assert err.startswith("error: --block-size: ") and "vllm" in err and err.count("\n") == 1


def test_block_size_echoed_only_where_it_applies():
    ideal = _json("estimate", "-m", "llama-3-8b", "--seq-len", "100", "--engine", "ideal")
    assert ideal["inputs"]["block_size"] is None
    e = _json("estimate", "-m", "llama-3-8b", "--seq-len", "100", "--engine", "vllm", "--block-size", "64")
    assert e["inputs"]["block_size"] == 64
    assert e["kv_cache"]["bytes_per_sequence"] == 32 * 128 * 8 * 128 * 2 * 2  # 2 blocks of 64


def test_formula_names_the_engines_own_pages():
    """TensorRT-LLM holds 130 tokens in 5 blocks of 32 (tokens_per_block); TGI holds every slot (BLOCK_SIZE 1)."""
    trt = _json("estimate", "-m", "llama-3-8b", "--seq-len", "130", "--engine", "trtllm")["kv_cache"]["groups"][0]
    assert "160 tokens (5 blocks of 32)" in trt["formula"]
    tgi = _json("estimate", "-m", "llama-3-8b", "--seq-len", "129", "--engine", "tgi")["kv_cache"]["groups"][0]
    assert "129 tokens x" in tgi["formula"] and "blocks of" not in tgi["formula"]


@pytest.mark.parametrize("gpu", ["H200", "B200"])
def test_sweep_rows_on_a_gpu_take_its_state_pages(gpu):
    """vLLM 0.33 on SM 9.0: Qwen3-Next's Gated DeltaNet layers keep a prefill checkpoint page (one more page per state
    group, the block aligned to 64 tokens), which estimate and plan charge on an H200 and not on a B200; a sweep row
    on that GPU takes the same bytes (review 36 F2: it took the GPU-less fold)."""
    from kvplan.planning.estimate import estimate
    from kvplan.planning.sweep import sweep

    want = estimate("qwen3-next-80b-a3b", seq_len=10000, engine="vllm==0.33", gpu=gpu).kv_cache.bytes_per_sequence
    rows = list(sweep("qwen3-next-80b-a3b", seq_len=10000, engine="vllm==0.33", gpu=gpu))
    assert rows[0]["kv_cache.bytes_per_sequence"] == want
    assert (want == 382_205_952) is (gpu == "H200")


def test_compare_on_a_gpu_sizes_the_cache_as_estimate_there():
    """Review 36 F4: compare --gpu sized each layout's cache without the GPU (qwen3-next on vLLM 0.33 H200: 334,233,600
    B, without the Gated DeltaNet checkpoint page estimate and plan charge there)."""
    from kvplan.planning.compare import compare

    got = compare("qwen3-next-80b-a3b", attention="mha", seq_len=10000, gpu="H200", engine="vllm==0.33")
    want = estimate("qwen3-next-80b-a3b", seq_len=10000, engine="vllm==0.33", gpu="H200").kv_cache.total_bytes
    assert got.rows[0].kv_total_bytes == want == 382_205_952


def test_estimate_refuses_a_block_the_release_does_not_take():
    """Review 36 F3: `estimate --engine vllm==0.14 --block-size 24` was sized (42 blocks of 24) where plan refuses
    it as vLLM 0.14's --block-size choices do (1, 8, 16, 32, 64, 128, 256); 0.18+ takes any int."""
    got = CliRunner().invoke(app, ["estimate", "-m", "llama-3.1-8b", "--seq-len", "1000", "--engine", "vllm==0.14",
                                   "--block-size", "24"])
    assert got.exit_code == 2 and got.stderr.startswith("error: --block-size:")
    for engine, block in (("vllm==0.14", "32"), ("vllm", "24")):
        ok = CliRunner().invoke(app, ["estimate", "-m", "llama-3.1-8b", "--seq-len", "1000", "--engine", engine,
                                      "--block-size", block, "--json"])
        assert ok.exit_code == 0 and json.loads(ok.stdout)["inputs"]["block_size"] == int(block)


# Qwen3-Next at 10,000 tokens (block 544, 12 attention layers, 36 state layers in 3 groups of 12, page 1,114,112 B):
# 'align' 36 x 2 + 12 x 19 pages ('none' 36 x 1 + 12 x 19: QWEN3_NEXT_10K above).
QWEN3_NEXT_10K_ALIGN = (36 * 2 + 12 * 19) * 1_114_112
# Mode 'all' (MambaSpec.max_memory_usage_bytes: cdiv(L, block) pages in each state group, read in 0.26.0 - 0.27.1),
# at 10,000 tokens:
# - Jamba-1.5-Mini (tests/test_vllm_mamba_all_mode.py): block 2,048, group_size 4, page 2,048 x 4,096 B; 1 attention
#   + 7 state groups x cdiv(10,000, 2,048) = 5 pages = 40 blocks of 4 x 8,388,608 B = 1,342,177,280 B.
# - Nemotron-3-Nano-30B-A3B (6 attention, 23 Mamba-2 layers): attention 2 KV heads x 128 x 2 x 2 B = 1,024 B a
#   token; states (mamba2_state_shape) conv (4,096 + 2 x 8 x 128) x (4 - 1) x 2 B = 36,864 + SSM (float32,
#   mamba_ssm_cache_dtype) 64 x 64 x 128 x 4 B = 2,097,152 -> 2,134,016 B = 2,084 tokens; chunk 128: block
#   128 x cdiv(2,084, 128) = 2,176, page 2,176 x 1,024 = 2,228,224 B; group_size min(6, 23) = 6, cdiv(23, 6) = 4
#   state groups; (1 + 4) x cdiv(10,000, 2,176) = 25 blocks of 6 x 2,228,224 B = 334,233,600 B.
JAMBA_ALL_10K = 40 * 4 * 2048 * 4096
NEMOTRON_3_NANO_ALL_10K = 25 * 6 * 2176 * 1024


@pytest.mark.parametrize("model, engine, flag, expected", [
    ("qwen3-next-80b-a3b", "vllm==0.27", True, QWEN3_NEXT_10K_ALIGN),  # no SupportsMambaPrefixCaching: 'align'
    ("qwen3-next-80b-a3b", "vllm==0.28", False, QWEN3_NEXT_10K),  # 0.28's default 'align' turned off: 'none'
    ("qwen3-next-80b-a3b", "vllm==0.28", None, QWEN3_NEXT_10K_ALIGN),
    ("jamba-1.5-mini", "vllm==0.27", True, JAMBA_ALL_10K),  # 'all': a page per block
    ("nemotron-3-nano-30b-a3b", "vllm==0.26", True, NEMOTRON_3_NANO_ALL_10K),
])
def test_estimate_takes_the_prefix_caching_flag_as_plan_does(model, engine, flag, expected):
    """estimate --enable-prefix-caching / --no-enable-prefix-caching folds the groups plan sizes a request with (the
    Mamba cache mode's state pages), so a sequence of L tokens is plan's one request at --max-model-len L: both the
    bytes derived by hand above."""
    e = estimate(model, seq_len=10000, engine=engine, gpu="H200", enable_prefix_caching=flag)
    p = plan(model, gpu="H200", gpu_memory="400GiB", engine=engine, max_model_len=10000, enable_prefix_caching=flag)
    assert e.kv_cache.bytes_per_sequence == expected
    assert p.request_kv_bytes == expected


@pytest.mark.parametrize("args", [
    ("sweep", "-m", "llama-3-8b", "--seq-len", "100", "--engine", "sglang"),
    ("sweep", "-m", "llama-3-8b", "--seq-len", "100", "--engine", "vllm,ideal"),
    ("verify", "-m", "llama-3-8b", "--engine", "ideal"),
    ("verify", "-m", "llama-3-8b", "--engine", "hf-static"),
])
def test_block_size_refused_by_sweep_and_verify_where_it_changes_nothing(args):
    """`sweep --block-size` without plan columns on an engine whose estimate ignores it, and `verify --engine ideal
    --block-size`, were taken and changed nothing (the sweep's sglang/ideal rows and ideal's reference cache hold
    exactly seq_len positions): refused as estimate refuses them, one line naming --block-size and vllm, exit 2."""
    code, out, err = _run(*args, "--block-size", "64")
    assert code == 2 and out == ""
    assert err.startswith("error: --block-size: ") and "only for --engine vllm" in err and err.count("\n") == 1


def test_block_size_still_taken_by_sweep_where_it_applies():
    """vLLM's KV columns round to it (2 blocks of 64 for 100 tokens), and a sweep's plan columns take each engine's
    block or page (SGLang's page size, as plan does)."""
    rows = _run("sweep", "-m", "llama-3-8b", "--seq-len", "100", "--engine", "vllm", "--block-size", "64",
                "--format", "jsonl")
    assert rows[0] == 0 and json.loads(rows[1].splitlines()[0])["kv_cache.bytes_per_sequence"] == 32 * 128 * 8 * 128 * 4
    plan = _run("sweep", "-m", "llama-3-8b", "--seq-len", "4096", "--engine", "sglang", "--gpu", "H100-SXM", "--tp",
                "1", "--block-size", "64", "--format", "jsonl")
    assert plan[0] == 0, plan[2]
