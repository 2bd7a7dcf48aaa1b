"""vLLM --enable-prefix-caching / --no-enable-prefix-caching: a hybrid's Mamba cache mode follows it. Read in vLLM's
source: engine/arg_utils.py _set_default_chunked_prefill_and_prefix_caching_args (0.26.0 - 0.27.1: hybrids opt-in,
``not model_config.is_hybrid``; 0.28.0 - 0.33.0: on), model_executor/models/config.py
MambaModelConfig.verify_and_update_config (prefix caching on: mode "none" becomes "align" on 0.28.0 - 0.33.0, and
``"all" if model_config.supports_mamba_prefix_caching else "align"`` on 0.26.0 - 0.27.1; off: "none"), and
v1/kv_cache_interface.py MambaSpec.max_memory_usage_bytes (1 page per state group and request in "none", 2 in
"align", one per block in "all": tests/test_vllm_mamba_all_mode.py)."""

from pathlib import Path

import pytest

from helpers import one_line_error
from kvplan.planning.capacity import plan
from kvplan.planning.capacity.fromlog import from_log
from kvplan.planning.capacity.logparse import _command, parse_log

QWEN = dict(gpu="H200", tp=2, max_model_len=4096)  # Qwen3-Next: 1 attention group of block 544, 3 state groups
QWEN_LOG = Path(__file__).parent.parent / "docs" / "logs" / "vllm-codeindex7292846353-qwen3-next-80b-tp2.log"


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def test_no_enable_prefix_caching_keeps_one_page_per_state_group_on_0_28():
    """0.28 default: align, 8 attention pages + 3 x 2 = 14 blocks per request, 8,160 / 14 = 582.857 concurrent;
    --no-enable-prefix-caching: mode 'none', 8 + 3 x 1 = 11, 8,160 / 11 = 741.818 (the same pool)."""
    on = plan("qwen3-next-80b-a3b", engine="vllm==0.28", **QWEN)
    off = plan("qwen3-next-80b-a3b", engine="vllm==0.28", enable_prefix_caching=False, **QWEN)
    given = plan("qwen3-next-80b-a3b", engine="vllm==0.28", enable_prefix_caching=True, **QWEN)
    assert on.kv_cache.num_blocks == off.kv_cache.num_blocks == given.kv_cache.num_blocks == 8160
    assert on.kv_cache.blocks_per_request == given.kv_cache.blocks_per_request == cdiv(4096, 544) + 3 * 2 == 14
    assert off.kv_cache.blocks_per_request == cdiv(4096, 544) + 3 * 1 == 11
    assert round(on.max_concurrency, 3) == round(8160 / 14, 3) == 582.857
    assert round(off.max_concurrency, 3) == round(8160 / 11, 3) == 741.818
    assert "--no-enable-prefix-caching" in off.launch_command
    assert "--enable-prefix-caching" in given.launch_command and "prefix-caching" not in on.launch_command
    assert any("mamba_cache_mode 'none'" in n and "--no-enable-prefix-caching" in n for n in off.notes)


@pytest.mark.parametrize("engine", ["vllm==0.26", "vllm==0.27.1"])
def test_enable_prefix_caching_puts_qwen3_next_in_align_on_0_26_and_0_27(engine):
    """0.26 - 0.27 keep prefix caching off for hybrids by default (11 blocks); given, Qwen3NextForCausalLM (no
    SupportsMambaPrefixCaching) goes to 'align': 14 blocks, as 0.28's default."""
    base = plan("qwen3-next-80b-a3b", engine=engine, **QWEN)
    on = plan("qwen3-next-80b-a3b", engine=engine, enable_prefix_caching=True, **QWEN)
    assert base.kv_cache.blocks_per_request == 11 and on.kv_cache.blocks_per_request == 14
    assert on.kv_cache.num_blocks == base.kv_cache.num_blocks
    assert any("mamba_cache_mode 'align'" in n for n in on.notes)


def test_unverified_modes_are_refused_by_flag(cli):
    """A hybrid before 0.20, an attention-free model: one line naming the flag (0.20 - 0.27's 'all' mode is planned:
    tests/test_vllm_mamba_all_mode.py). Jamba on 0.28 takes 'align' (2 pages per state group), as by default."""
    common = ("--gpu", "H200", "--max-model-len", "4096", "--enable-prefix-caching")
    assert "--enable-prefix-caching" in one_line_error(cli, "plan", "-m", "qwen3-next-80b-a3b", "--tp", "2",
                                                       "--engine", "vllm==0.19", *common)
    assert "--enable-prefix-caching" in one_line_error(cli, "plan", "-m", "mamba-codestral-7b", "--engine",
                                                       "vllm==0.28", *common)
    # 0.28 'align': the 80-token block, cdiv(4,096, 80) = 52 attention pages + 7 state groups x 2 = 66 (mode 'all'
    # would be 2,048-token blocks, 16 a request: tests/test_vllm_mamba_all_mode.py)
    j = plan("jamba-1.5-mini", gpu="H200", max_model_len=4096, engine="vllm==0.28", enable_prefix_caching=True)
    assert (j.kv_cache.block_size, j.kv_cache.blocks_per_request) == (80, 52 + 7 * 2)


def test_other_engines_refuse_it_and_shared_prefix_needs_it(cli):
    err = one_line_error(cli, "plan", "-m", "llama-3-8b", "--gpu", "H100-SXM", "--max-model-len", "4096", "--engine",
                         "sglang", "--no-enable-prefix-caching")
    assert "--no-enable-prefix-caching" in err and "vllm" in err
    err = one_line_error(cli, "plan", "-m", "llama-3-8b", "--gpu", "H100-SXM", "--max-model-len", "4096", "--engine",
                         "trtllm", "--enable-prefix-caching")
    assert "--enable-prefix-caching" in err and "vllm" in err
    err = one_line_error(cli, "plan", "-m", "llama-3-8b", "--gpu", "H100-SXM", "--max-model-len", "4096",
                         "--no-enable-prefix-caching", "--shared-prefix-len", "1024")
    assert "--shared-prefix-len" in err


def test_a_model_without_state_layers_changes_nothing():
    base = plan("llama-3-8b", gpu="H100-SXM", max_model_len=4096)
    off = plan("llama-3-8b", gpu="H100-SXM", max_model_len=4096, enable_prefix_caching=False)
    assert off.max_concurrency == base.max_concurrency and off.kv_cache.num_blocks == base.kv_cache.num_blocks
    assert "--no-enable-prefix-caching" in off.launch_command
    assert any("no memory changes" in n for n in off.notes)


def test_from_log_reads_the_flag():
    """The Qwen3-Next log's V1 config line says enable_prefix_caching=False; planned on 0.28 it keeps mode 'none':
    cdiv(262,144, 544) + 3 = 485 blocks per request (0.28's default would be 482 + 6 = 488)."""
    assert parse_log(QWEN_LOG).flags["enable_prefix_caching"] is False
    r = from_log(QWEN_LOG, engine="vllm==0.28")
    assert r.plan.kv_cache.blocks_per_request == cdiv(262144, 544) + 3 == 485
    assert "--no-enable-prefix-caching" in r.plan.launch_command
    assert _command("vllm serve m --no-enable-prefix-caching")["enable_prefix_caching"] == "False"
    assert _command("vllm serve m --enable-prefix-caching")["enable_prefix_caching"] == "True"
