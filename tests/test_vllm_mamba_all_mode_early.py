"""vLLM 0.20 - 0.25 take --enable-prefix-caching on a hybrid as 0.26 does (Mamba cache mode "all" for a model that
declares SupportsMambaPrefixCaching, "align" otherwise; 0.20 - 0.21 "align" for those too under speculative
decoding); 0.19 and before stay refused. Read in vLLM 0.19.1, 0.20.0, 0.20.1, 0.20.2, 0.21.0, 0.22.0, 0.22.1, 0.23.0,
0.24.0, 0.25.0, 0.25.1 against 0.26.0:

- model_executor/models/config.py MambaModelConfig and HybridAttentionMambaModelConfig: the same text in 0.22.0 -
  0.25.1 as in 0.26.0 (``"all" if model_config.supports_mamba_prefix_caching else "align"`` when prefix caching is on
  and the mode is "none"). 0.20.0 - 0.21.0 (the same text in each) differ only there: a SupportsMambaPrefixCaching
  model with a speculative config takes "align" ("Mamba cache mode is set to 'align' ... when prefix caching and
  speculative decoding are enabled"). 0.19.1's differs more (not modelled, refused).
- platforms/interface.py _align_hybrid_block_size and config/model.py get_mamba_chunk_size: the same in 0.21.0 -
  0.26.0 (the chunk alignment of mode "all", 2,048 for Mamba-1); 0.20.x lack only 0.21's turboquant_ branch.
- v1/kv_cache_interface.py MambaSpec.max_memory_usage_bytes: 0.22.0 - 0.26.0 ``(cdiv(max_model_len, block_size) +
  num_speculative_blocks) x page_size_bytes`` in mode "all"; 0.20.0 - 0.21.0 ``cdiv(max_model_len, block_size) x
  page_size_bytes`` (no speculative term, which their mode "all" never meets: see above).
- engine/arg_utils.py _set_default_chunked_prefill_and_prefix_caching_args 0.20.0 - 0.25.1: default_prefix_caching =
  is_prefix_caching_supported (False for generative hybrids in config/model.py: "the feature is still experimental"),
  applied only when the flag is None; a given --enable-prefix-caching stays on (the warning is for pooling models).
- SupportsMambaPrefixCaching declared by mamba.py, mamba2.py, jamba.py, zamba2.py, falcon_h1.py, granitemoehybrid.py,
  nemotron_h.py in 0.20.0 - 0.26.0, and bamba.py in 0.20.0 - 0.23.0 (0.24.0 removes Bamba: registry.py
  _PREVIOUSLY_SUPPORTED_MODELS "BambaForCausalLM": "0.23.0").

Jamba-1.5-Mini at 4,096 tokens (the derivation in tests/test_vllm_mamba_all_mode.py): mode "all" block 2,048 tokens,
4 x 2,048 x 4,096 = 33,554,432 B a block, 2 attention + 7 state groups x 2 = 16 blocks a request; mode "none" (the
flag off, as these releases' default for hybrids) 80-token block, cdiv(4,096, 80) + 7 = 59.
"""

from types import SimpleNamespace

import pytest

from helpers import one_line_error
from kvplan.cost.runtimes import get_engine
from kvplan.model.catalog import load_card
from kvplan.planning.capacity import plan

JAMBA = dict(gpu="H200", max_model_len=4096)
EARLY = ["vllm==0.20", "vllm==0.20.2", "vllm==0.21", "vllm==0.22", "vllm==0.22.1", "vllm==0.23", "vllm==0.24", "vllm==0.25", "vllm==0.25.1"]


@pytest.mark.parametrize("engine", EARLY)
def test_jamba_takes_mode_all_from_0_20(engine):
    on = plan("jamba-1.5-mini", engine=engine, enable_prefix_caching=True, **JAMBA)
    off = plan("jamba-1.5-mini", engine=engine, **JAMBA)
    k = on.kv_cache
    assert (k.block_size, k.bytes_per_block, k.blocks_per_request) == (2048, 4 * 2048 * 4096, 2 + 7 * 2)
    assert k.bytes_per_block == 33_554_432 and k.state_page_padded_bytes == 8_388_608
    # a given pool of 32 GiB (kv_cache_memory_bytes): 34,359,738,368 // 8,388,608 // 4 = 1,024 blocks, / 16 = 64
    given = plan("jamba-1.5-mini", engine=engine, enable_prefix_caching=True, kv_cache_memory=32 * 2**30, **JAMBA)
    assert (given.kv_cache.num_blocks, given.max_concurrency) == (1024, 64.0)
    assert (off.kv_cache.block_size, off.kv_cache.blocks_per_request) == (80, 59)
    assert off.kv_cache.available_bytes == k.available_bytes
    assert any("mamba_cache_mode 'all'" in n for n in on.notes)


def test_speculative_pages_count_in_mode_all_from_0_22():
    """0.22.0's MambaSpec.max_memory_usage_bytes adds num_speculative_blocks (2 ngram tokens): 2 + 7 x (2 + 2)."""
    spec = '{"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_max": 4}'
    r = plan("jamba-1.5-mini", engine="vllm==0.22", enable_prefix_caching=True, speculative_config=spec, **JAMBA)
    assert r.kv_cache.blocks_per_request == 2 + 7 * (2 + 2) == 30


@pytest.mark.parametrize("engine", ["vllm==0.20", "vllm==0.21"])
def test_speculation_puts_jamba_in_align_on_0_20_and_0_21(engine):
    """0.20.0 - 0.21.0's verify_and_update_config: prefix caching and a speculative config -> 'align' for Jamba too:
    2 + 2 ngram pages per state group at its 80-token block, cdiv(4,096, 80) + 7 x 4 = 80 blocks (0.22: mode 'all',
    30 blocks, test_speculative_pages_count_in_mode_all_from_0_22)."""
    spec = '{"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_max": 4}'
    r = plan("jamba-1.5-mini", engine=engine, enable_prefix_caching=True, speculative_config=spec, **JAMBA)
    assert (r.kv_cache.block_size, r.kv_cache.blocks_per_request) == (80, 52 + 7 * 4) == (80, 80)
    assert any("mamba_cache_mode 'align'" in n and "speculative config" in n for n in r.notes)


@pytest.mark.parametrize("engine", ["vllm==0.20", "vllm==0.21", "vllm==0.22", "vllm==0.25.1"])
def test_qwen3_next_takes_align_from_0_20(engine):
    """Qwen3NextForCausalLM declares no SupportsMambaPrefixCaching: 'none' -> 'align', 2 pages per state group
    (11 blocks off, 14 on, as on 0.26: tests/test_vllm_prefix_flag.py)."""
    q = dict(gpu="H200", tp=2, max_model_len=4096)
    base = plan("qwen3-next-80b-a3b", engine=engine, **q)
    on = plan("qwen3-next-80b-a3b", engine=engine, enable_prefix_caching=True, **q)
    assert base.kv_cache.blocks_per_request == 11 and on.kv_cache.blocks_per_request == 14
    assert any("mamba_cache_mode 'align'" in n for n in on.notes)


def test_bamba_is_in_mode_all_on_0_20_to_0_23_only():
    """bamba.py declares SupportsMambaPrefixCaching in 0.20.0 - 0.23.0; 0.24.0 removes the model (and 0.26's list
    never had it), so a card of that architecture falls to 'align' there."""
    jamba = load_card("jamba-1.5-mini")  # a hybrid (Mamba and attention layers) under Bamba's architecture name
    card = SimpleNamespace(ssm=jamba.ssm, attention_layers=jamba.attention_layers, hf_architecture="BambaForCausalLM")
    modes = {e: get_engine(e).mamba_cache_mode(card, True) for e in ("vllm==0.20", "vllm==0.21", "vllm==0.22",
                                                                        "vllm==0.23", "vllm==0.24", "vllm==0.25",
                                                                        "vllm==0.26")}
    assert modes == {"vllm==0.20": "all", "vllm==0.21": "all", "vllm==0.22": "all", "vllm==0.23": "all", "vllm==0.24": "align", "vllm==0.25": "align",
                     "vllm==0.26": "align"}


@pytest.mark.parametrize("engine", ["vllm==0.19", "vllm==0.18", "vllm==0.15"])
def test_the_flag_stays_refused_before_0_20(cli, engine):
    err = one_line_error(cli, "plan", "-m", "jamba-1.5-mini", "--gpu", "H200", "--engine", engine,
                         "--max-model-len", "4096", "--enable-prefix-caching")
    assert "--enable-prefix-caching" in err and "0.20" in err
