"""vLLM 0.26 - 0.27's Mamba cache mode "all": `--enable-prefix-caching` on a hybrid that declares
SupportsMambaPrefixCaching (Mamba, Mamba-2, Jamba, Zamba2, Falcon-H1, GraniteMoeHybrid, Nemotron-H). Every figure is
derived by hand from vLLM's source, read in 0.26.0, 0.27.0 and 0.27.1 (the three agree on each function below):

- model_executor/models/config.py MambaModelConfig.verify_and_update_config: prefix caching on and mode "none" ->
  ``"all" if model_config.supports_mamba_prefix_caching else "align"`` (0.28.0 - 0.31.0: "align" for every model,
  "all" only by --mamba-cache-mode all; 0.32.0 drops "all" from config/cache.py MambaCacheMode).
- platforms/interface.py _align_hybrid_block_size, mode "all": base_chunk_size = model_config.get_mamba_chunk_size()
  (the HF config's mamba_chunk_size, else chunk_size, else 2048 for Mamba-1); chunk_size = lcm(base_chunk_size,
  max(16, block_size)); attn_block_size = chunk_size x cdiv(cdiv(mamba page, attention page of 1 token), chunk_size);
  cache_config.mamba_block_size = attn_block_size; block_size raised to it; the mamba page padded to the attention
  page.
- v1/kv_cache_interface.py MambaSpec.max_memory_usage_bytes, mode "all": (cdiv(max_model_len, block_size) +
  num_speculative_blocks) x page_size_bytes: one state page per block of the request.
- v1/core/kv_cache_utils.py: num_blocks = available // (group_size x page); max concurrency = num_blocks / the sum
  over groups of each group's pages per request; group_size = min layers per type (28 >= 1.5 x 4: 4 for Jamba).
  get_num_blocks: ``available_memory // page_size // num_layers``; get_max_concurrency_for_kv_cache_config:
  ``num_blocks / num_blocks_per_request``; get_kv_cache_capacity: tokens = int(max_concurrency x max_model_len).

The pool itself (vLLM's profiled budget) is no hand figure, so the block and concurrency counts are pinned on a pool
given by --kv-cache-memory (kv_cache_memory_bytes, the available_memory of every worker, 0.10.2+).
"""

from pathlib import Path

import pytest

from helpers import one_line_error
from kvplan import estimate
from kvplan.cost import serving_vllm as vl
from kvplan.model.catalog import load_card
from kvplan.planning.capacity import plan
from kvplan.planning.capacity.fromlog import from_log


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


# Jamba-1.5-Mini at TP 1 (32 layers: attention every 8th from layer 4, so 4 attention + 28 Mamba-1 layers), bf16.
# Attention: 8 KV heads x 128 x (K, V) x 2 B = 4,096 B a token and layer. A Mamba-1 layer's states
# (MambaStateShapeCalculator.mamba1_state_shape, the model dtype): conv 8,192 x (4 - 1) x 2 B = 49,152 + SSM 8,192 x
# 16 x 2 B = 262,144 -> 311,296 B = 76 attention tokens (cdiv(311,296, 4,096)).
# Mode "none" (0.27's default): block 16 x cdiv(311,296, 16 x 4,096) = 80, one page per state group.
# Mode "all": JambaConfig has no chunk size -> 2,048; lcm(2,048, 16) = 2,048; block 2,048 x cdiv(76, 2,048) = 2,048;
# page 2,048 x 4,096 = 8,388,608 B (the states padded by 8,077,312 B); a block of group_size 4 slots = 33,554,432 B.
# Groups: 1 attention group (4 layers), 28 / 4 = 7 state groups. At 4,096 tokens a request holds
# cdiv(4,096, 2,048) = 2 attention pages + 7 x cdiv(4,096, 2,048) = 16 blocks (mode "none": cdiv(4,096, 80) + 7 = 59).
# A given pool of 32 GiB: 34,359,738,368 // 8,388,608 // 4 = 1,024 blocks; 1,024 / 16 = 64 requests of 4,096 tokens,
# int(64 x 4,096) = 262,144 tokens (mode "none": 34,359,738,368 // (80 x 4,096) // 4 = 26,214 blocks, / 59).
JAMBA = dict(gpu="H200", max_model_len=4096)
JAMBA_ALL_BLOCK, JAMBA_ALL_BLOCK_BYTES = 2048, 4 * 2048 * 4096
JAMBA_ALL_PER_REQUEST = 2 + 7 * 2
POOL_32G = 32 * 2**30


@pytest.mark.parametrize("engine", ["vllm==0.26", "vllm==0.27", "vllm==0.27.1"])
def test_jamba_takes_a_state_page_per_2048_token_block(engine):
    on = plan("jamba-1.5-mini", engine=engine, enable_prefix_caching=True, **JAMBA)
    off = plan("jamba-1.5-mini", engine=engine, **JAMBA)
    k = on.kv_cache
    assert JAMBA_ALL_BLOCK_BYTES == 33_554_432
    assert (k.block_size, k.bytes_per_block, k.groups) == (JAMBA_ALL_BLOCK, JAMBA_ALL_BLOCK_BYTES, 8)
    assert k.state_page_padded_bytes == 2048 * 4096 == 8_388_608
    assert k.blocks_per_request == JAMBA_ALL_PER_REQUEST == 16
    assert on.request_kv_bytes == 16 * JAMBA_ALL_BLOCK_BYTES
    given = plan("jamba-1.5-mini", engine=engine, enable_prefix_caching=True, kv_cache_memory=POOL_32G, **JAMBA)
    assert (given.kv_cache.num_blocks, given.max_concurrency, given.kv_cache.tokens) == (1024, 64.0, 262_144)
    given_off = plan("jamba-1.5-mini", engine=engine, kv_cache_memory=POOL_32G, **JAMBA)
    assert given_off.kv_cache.num_blocks == POOL_32G // (80 * 4096) // 4 == 26_214
    assert given_off.max_concurrency == 26_214 / 59
    assert (off.kv_cache.block_size, off.kv_cache.blocks_per_request) == (80, cdiv(4096, 80) + 7) == (80, 59)
    assert off.kv_cache.available_bytes == k.available_bytes  # the budget does not move, only its pages
    assert any("mamba_cache_mode 'all'" in n for n in on.notes)
    assert "--enable-prefix-caching" in on.launch_command


def test_nemotron_h_aligns_its_block_to_the_128_token_chunk():
    """Nemotron-H-56B at TP 2, 8,192 tokens (10 attention, 54 Mamba-2 layers: group_size 10, 6 state groups).
    Per rank: attention 4 KV heads x 128 x 2 x 2 B = 2,048 B a token; states (float32 SSM, the card's
    mamba_ssm_cache_dtype) 128 heads x 64 x 256 x 4 B = 8,388,608 + conv (16,384 + 2 x 8 x 256) / 2 x 3 x 2 B =
    61,440 -> 8,450,048 B = 4,126 attention tokens exactly. Mode "none": 16 x cdiv(4,126, 16) = 4,128; mode "all"
    (chunk_size 128): 128 x cdiv(4,126, 128) = 4,224. A request: none cdiv(8,192, 4,128) + 6 = 8 blocks; all
    cdiv(8,192, 4,224) + 6 x 2 = 14, of 10 x 4,224 x 2,048 = 86,507,520 B each. A given pool of 16 GiB a GPU:
    17,179,869,184 // 86,507,520 = 198 blocks (4,224 x 2,048 B pages, 10 a block), 198 / 14 requests."""
    on = plan("nemotron-h-56b", gpu="H200", tp=2, max_model_len=8192, engine="vllm==0.27", enable_prefix_caching=True)
    off = plan("nemotron-h-56b", gpu="H200", tp=2, max_model_len=8192, engine="vllm==0.27")
    assert (off.kv_cache.block_size, off.kv_cache.blocks_per_request) == (4128, 8)
    assert (on.kv_cache.block_size, on.kv_cache.blocks_per_request) == (4224, 14)
    assert on.kv_cache.bytes_per_block == 10 * 4224 * 2048 == 86_507_520
    given = plan("nemotron-h-56b", gpu="H200", tp=2, max_model_len=8192, engine="vllm==0.27",
                 enable_prefix_caching=True, kv_cache_memory=16 * 2**30)
    assert given.kv_cache.num_blocks == 16 * 2**30 // (4224 * 2048) // 10 == 198
    assert given.max_concurrency == 198 / 14


def test_speculative_tokens_add_to_the_per_block_pages():
    """MambaSpec.max_memory_usage_bytes in mode "all": cdiv(L, block) + num_speculative_blocks (= 2 ngram tokens)
    per state group: 2 + 7 x (2 + 2) = 30 for Jamba at 4,096 tokens."""
    spec = '{"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_max": 4}'
    r = plan("jamba-1.5-mini", engine="vllm==0.27", enable_prefix_caching=True, speculative_config=spec, **JAMBA)
    assert r.kv_cache.blocks_per_request == 2 + 7 * (2 + 2) == 30


def test_the_automatic_modes_are_unchanged():
    """Where vLLM picks the mode itself: 0.26 - 0.27 without the flag 'none' (1 page per state group), 0.28 with or
    without it 'align' (2 pages, the 80-token block): Jamba declares SupportsMambaPrefixCaching, yet 0.28's
    verify_and_update_config turns 'none' into 'align' for every model. Qwen3-Next (no SupportsMambaPrefixCaching)
    takes 'align' on 0.27 with the flag (tests/test_vllm_prefix_flag.py)."""
    for engine in ("vllm==0.26", "vllm==0.27"):
        assert plan("jamba-1.5-mini", engine=engine, **JAMBA).kv_cache.blocks_per_request == cdiv(4096, 80) + 7
    for flag in (None, True):
        r = plan("jamba-1.5-mini", engine="vllm==0.28", enable_prefix_caching=flag, **JAMBA)
        assert (r.kv_cache.block_size, r.kv_cache.blocks_per_request) == (80, cdiv(4096, 80) + 7 * 2)
        assert any("mamba_cache_mode 'align'" in n for n in r.notes)


def test_estimate_takes_the_flag_and_equals_the_plans_request(cli):
    """estimate --enable-prefix-caching folds the same groups as plan: Jamba at 4,096 tokens on 0.27 holds 16 pages
    of 33,554,432 B = 536,870,912 B (mode 'none', the default: 59 x 4 x 80 x 4,096 = 77,332,480 B)."""
    on = estimate("jamba-1.5-mini", seq_len=4096, engine="vllm==0.27", gpu="H200", enable_prefix_caching=True)
    off = estimate("jamba-1.5-mini", seq_len=4096, engine="vllm==0.27", gpu="H200")
    assert on.kv_cache.bytes_per_sequence == 16 * JAMBA_ALL_BLOCK_BYTES == 536_870_912
    assert off.kv_cache.bytes_per_sequence == 59 * 4 * 80 * 4096 == 77_332_480
    assert plan("jamba-1.5-mini", engine="vllm==0.27", enable_prefix_caching=True,
                **JAMBA).request_kv_bytes == 536_870_912
    assert sum(g.bytes_per_sequence for g in on.kv_cache.groups) == 536_870_912
    assert on.inputs.enable_prefix_caching is True and off.inputs.enable_prefix_caching is None  # echoed as given
    code, out, err = cli("estimate", "-m", "jamba-1.5-mini", "--seq-len", "4096", "--engine", "vllm==0.27",
                         "--enable-prefix-caching", "--json")
    assert code == 0, err
    assert '"bytes_per_sequence": 536870912' in out


def test_estimate_refuses_the_flag_where_plan_does(cli):
    for engine in ("sglang", "ideal"):
        err = one_line_error(cli, "estimate", "-m", "jamba-1.5-mini", "--seq-len", "4096", "--engine", engine,
                             "--no-enable-prefix-caching")
        assert "--enable-prefix-caching" in err and "vllm" in err and engine in err
    err = one_line_error(cli, "estimate", "-m", "mamba-codestral-7b", "--seq-len", "4096", "--engine", "vllm==0.27",
                         "--enable-prefix-caching")
    assert "attention-free" in err
    err = one_line_error(cli, "estimate", "-m", "jamba-1.5-mini", "--seq-len", "4096", "--engine", "vllm==0.19",
                         "--enable-prefix-caching")
    assert "--enable-prefix-caching" in err


def test_from_log_plans_a_logged_enable_prefix_caching_in_mode_all(tmp_path):
    """A 0.27 launch line with --enable-prefix-caching for Jamba and a logged pool of 32 GiB: 32 GiB // 33,554,432 B
    = 1,024 blocks, / 16 = 64 concurrent 4,096-token requests, int(64 x 4,096) = 262,144 tokens."""
    log = tmp_path / "jamba.log"
    log.write_text("# model: jamba-1.5-mini\n# gpu: H200\n# engine: vllm==0.27\n# command: vllm serve "
                   "ai21labs/AI21-Jamba-1.5-Mini --max-model-len 4096 --enable-prefix-caching\n"
                   "Available KV cache memory: 32.0 GiB\n")
    r = from_log(log)
    assert r.plan.kv_cache.blocks_per_request == 16 and "--enable-prefix-caching" in r.plan.launch_command
    k = r.pooled.kv_cache
    assert (k.block_size, k.num_blocks, k.tokens) == (2048, 1024, 262144) and r.pooled.max_concurrency == 64.0


def test_rules():
    """serving_vllm's pieces against the source: get_mamba_chunk_size's 2,048 for Mamba-1 (Jamba) and the card's
    chunk_size otherwise (Nemotron-H 128); _align_hybrid_block_size's "all" branch, chunk x cdiv(cdiv(page, attn),
    chunk), equals hybrid_block_size with the chunk as alignment; MambaSpec's pages in mode 'all'."""
    assert vl.mamba_chunk_size(load_card("jamba-1.5-mini").ssm) == 2048
    assert vl.mamba_chunk_size(load_card("nemotron-h-56b").ssm) == 128
    # expected by hand: alignment = lcm(chunk, max(16, block)); block = alignment x cdiv(cdiv(page, attn), alignment)
    for page, attn, block, chunk, expected in (
            (311_296, 4096, 16, 2048, 2048),  # cdiv = 76 tokens -> one 2,048 chunk
            (8_450_048, 2048, 16, 128, 4224),  # 4,126 tokens -> 33 x 128
            (8_450_048, 2048, 64, 128, 4224),  # lcm(128, 64) = 128
            (1_000_000, 1024, 16, 256, 1024),  # 977 tokens -> 4 x 256
            (1, 4096, 16, 128, 128)):
        assert vl.hybrid_block_size(attn, page, block, 16, chunk)[0] == expected
    assert vl.hybrid_alignment_tokens(16, 64, 128) == 128 and vl.hybrid_alignment_tokens(16, 48, 128) == 384
    assert vl.all_mode_pages(4096, 2048) == 2 and vl.all_mode_pages(4097, 2048, 3) == 6


def test_check_carries_the_flag(tmp_path, monkeypatch, cli):
    """kvplan.toml's enable_prefix_caching goes to estimate and plan as the flag: kv_bytes 2 x 536,870,912 B, the
    plan's concurrency on a 32 GiB kv_cache_memory 1,024 blocks / 16 = 64 (without the flag, mode 'none', 26,214 /
    59); on another engine it is bad input naming the key's line."""
    import json

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    config = ('[[scenarios]]\nname = "jamba"\nmodel = "jamba-1.5-mini"\nbatch = 2\nseq_len = 4096\n'
              'engine = "{engine}"\nenable_prefix_caching = true\n\n'
              '[[scenarios]]\nname = "jamba-plan"\nmodel = "jamba-1.5-mini"\nengine = "vllm==0.27"\n'
              'enable_prefix_caching = true\ngpu = "H200"\nmax_model_len = 4096\nkv_cache_memory = "32GiB"\n')
    Path("kvplan.toml").write_text(config.format(engine="vllm==0.27"))
    code, out, err = cli("check", "--json")
    assert code == 0, err
    figures = json.loads(out)["figures"]
    assert figures["jamba"]["kv_bytes"] == 2 * 536_870_912
    assert figures["jamba-plan"]["concurrency"] == 1024 / 16 == 64.0
    Path("kvplan.toml").write_text(config.format(engine="sglang"))
    code, out, err = cli("check")
    assert code == 2 and "kvplan.toml:7:" in err and "enable_prefix_caching" in err


def test_report_sizes_its_estimate_and_curves_with_the_flag():
    """kvplan report --enable-prefix-caching: the plans take it (kvplan plan's flags), and the model's estimate and
    KV curves hold the same state pages: 536,870,912 B at 4,096 tokens (mode 'all'), every length up to 2,048 one
    2,048-token block in each of the 8 groups (8 x 33,554,432 B); without it 77,332,480 B (mode 'none')."""
    from kvplan.cost.hardware import load_gpu
    from kvplan.planning.report_data import _model_report

    card, h200 = load_card("jamba-1.5-mini"), [load_gpu("H200")]
    on = _model_report(card, h200, 4096, 1, "vllm==0.27", (1,), None, None, {"enable_prefix_caching": True})
    off = _model_report(card, h200, 4096, 1, "vllm==0.27", (1,), None, None, {})
    assert on.estimate.kv_cache.bytes_per_sequence == on.layouts[0].plan.request_kv_bytes == 536_870_912
    assert off.estimate.kv_cache.bytes_per_sequence == off.layouts[0].plan.request_kv_bytes == 77_332_480
    at = on.kv_lengths.index(4096)
    assert on.kv_curve["bf16"][at] == 536_870_912 and on.kv_curve["bf16"][0] == 8 * JAMBA_ALL_BLOCK_BYTES
    assert sum(part[at] for part in on.kv_parts.values()) == 536_870_912
