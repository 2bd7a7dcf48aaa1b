"""SGLang --disable-radix-cache, --max-mamba-cache-size and --mamba-radix-cache-strategy, release by release (read in
the PyPI wheels; kvplan.cost.serving_sglang's comments above MAMBA_SIZE_RULES and MAMBA_STRATEGIES):

- the state pool by count (handle_max_mamba_cache: model_runner.py 0.5.4 - 0.5.6, model_runner_kv_cache_mixin.py
  0.5.7 - 0.5.15, mem_cache/kv_cache_configurator.py _handle_max_mamba_cache 0.5.16+): without the radix cache
  --max-mamba-cache-size, else --max-running-requests, else 512 (0.5.4 - 0.5.8; 0.5.7 - 0.5.8 also a given size with
  the radix cache on, which 0.5.4 - 0.5.6 overwrite with the ratio split); from 0.5.9 a given size, else without the
  radix cache a given --max-running-requests, else the ratio split. The K/V pool gets rest - slots x per_req (one slot
  more from 0.5.17: "(max_mamba_cache_size + 1) * stage_per_req");
- the running cap max_mamba_cache_size // ratio (resolve_max_num_reqs, _calculate_mamba_ratio: "if
  disable_radix_cache: return 1"; 3 + the extra_buffer track slots with the radix cache);
- the strategy: no_buffer holds no track slot (ratio 3), extra_buffer two with the overlap scheduler (ratio 5).

Every figure is derived here from SGLang's formulas, from the memory kvplan leaves for the cache at
--mem-fraction-static 0.85 on an H200 at TP 2 for Qwen3-Next-80B-A3B (the same in every 0.5.x release): rest
45,446,370,048 B, a slot 38,633,472 B, a token 12,288 B (tests/test_sglang_mamba_hybrids.py derives the three)."""

from __future__ import annotations

import pytest

from kvplan.errors import KvplanError
from kvplan.planning.capacity import plan

REST, STATE, CELL = 45_647_696_640, 38_633_472, 12_288
# the ratio split: budget = REST x 0.9 / 1.9; int(budget // STATE) = 559 slots before 0.5.17, int((budget - STATE) //
# STATE) = 558 beside the padding slot from 0.5.17; the K/V pool (REST - 559 x STATE) // CELL = 1,957,323 tokens
SPLIT_TOKENS = 1_957_323


def _qwen3_next(engine: str = "sglang", **flags):
    return plan("qwen3-next-80b-a3b", gpu="H200", tp=2, engine=engine, max_model_len=4096, mem_fraction_static=0.85,
                non_torch_memory="217MiB", **flags)  # the load's rests held as REST was worked (test_sglang_mamba_hybrids)


def _figures(p) -> tuple[int, int, int]:
    assert (p.kv_cache.available_bytes, p.kv_cache.state_bytes_per_request) == (REST, STATE)
    return p.kv_cache.state_slots, p.kv_cache.tokens, p.running_limit


def _tokens(slots: int) -> int:
    """The K/V pool's tokens where the state pool holds ``slots`` slots (the padding slot included)."""
    return (REST - slots * STATE) // CELL


def test_mamba_count_size_by_rule():
    """serving_sglang.mamba_count_size: (radix cache on?, N, --max-running-requests) -> the count, None: by memory."""
    from kvplan.cost import serving_sglang as sg

    cases = [(True, None, None), (False, None, None), (False, None, 64), (True, 1000, None), (False, 1000, 64),
             (True, None, 64)]
    assert [sg.mamba_count_size("radix_off", *c) for c in cases] == [None, 512, 64, None, 1000, None]
    assert [sg.mamba_count_size("radix_off_or_given", *c) for c in cases] == [None, 512, 64, 1000, 1000, None]
    assert [sg.mamba_count_size("given", *c) for c in cases] == [None, None, 64, 1000, 1000, None]
    assert sg.mamba_fixed(10_000, 10, 64, padding_slot=True) == (10_000 - 650, 64)


def test_the_hand_derived_token_pools():
    assert _tokens(559) == SPLIT_TOKENS
    assert (_tokens(65), _tokens(1001), _tokens(1000), _tokens(512)) == (3_510_459, 567_675, 570_819, 2_105_091)


def test_0_5_23_each_flag():
    """0.5.23 (extra_buffer by default for Qwen3NextForCausalLM: ratio 3 + 2):
    - default: 558 slots, 1,957,323 tokens, cap min(4,096, tokens // 2, 558 // 5) = 111;
    - --disable-radix-cache: the ratio split still (no --max-running-requests), cap 558 // 1 = 558;
    - with --max-running-requests 64: max_mamba_cache_size = 64, the K/V pool REST - 65 x STATE = 3,510,459 tokens,
      cap min(64, tokens // 2, 64 // 1) = 64;
    - --max-mamba-cache-size 1000: REST - 1001 x STATE = 567,675 tokens, cap 1000 // 5 = 200 (not capped by memory);
    - --mamba-radix-cache-strategy no_buffer: the split unchanged, cap 558 // 3 = 186; extra_buffer: the default."""
    assert _figures(_qwen3_next()) == (558, SPLIT_TOKENS, 111)
    assert _figures(_qwen3_next(disable_radix_cache=True)) == (558, SPLIT_TOKENS, 558)
    assert _figures(_qwen3_next(disable_radix_cache=True, max_running_requests=64)) == (64, 3_510_459, 64)
    sized = _qwen3_next(max_mamba_cache_size=1000)
    assert _figures(sized) == (1000, 567_675, 200)
    assert sized.max_concurrency == pytest.approx(567_675 / 4096)  # the K/V pool, not the 1000 // 3 slots, limits it
    assert _figures(_qwen3_next(mamba_radix_cache_strategy="no_buffer")) == (558, SPLIT_TOKENS, 186)
    assert _figures(_qwen3_next(mamba_radix_cache_strategy="extra_buffer")) == (558, SPLIT_TOKENS, 111)
    # no_buffer holds no track slot: the state pool holds 558 requests, not 558 // 3
    assert _qwen3_next(mamba_radix_cache_strategy="no_buffer").max_concurrency == pytest.approx(SPLIT_TOKENS / 4096)
    # without the radix cache but with --max-running-requests the state pool is small: more K/V tokens than the split
    assert _qwen3_next(max_running_requests=64).kv_cache.tokens == SPLIT_TOKENS


@pytest.mark.parametrize(("engine", "flags", "figures"), [
    # 0.5.9 - 0.5.16: a given size without the padding slot; 0.5.16 extra_buffer (ratio 5)
    ("sglang==0.5.16", {"max_mamba_cache_size": 1000}, (1000, 570_819, 200)),
    ("sglang==0.5.12", {"max_mamba_cache_size": 1000}, (1000, 570_819, 333)),  # no_buffer (auto): 1000 // 3
    # 0.5.9: --disable-radix-cache alone keeps the ratio split (sglang PR 18786); ratio 1
    ("sglang==0.5.9", {"disable_radix_cache": True}, (559, SPLIT_TOKENS, 559)),
    # 0.5.7 - 0.5.8: without the radix cache 512 slots (REST - 512 x STATE = 2,105,091 tokens), cap 512 // 1
    ("sglang==0.5.8", {"disable_radix_cache": True}, (512, 2_105_091, 512)),
    # 0.5.8 takes a given size with the radix cache on; ratio 3 (no_buffer); 0.5.7 adds 2 to it (1000 // 5)
    ("sglang==0.5.8", {"max_mamba_cache_size": 1000}, (1000, 570_819, 333)),
    ("sglang==0.5.7", {"max_mamba_cache_size": 1000}, (1000, 570_819, 200)),
    # 0.5.4 - 0.5.6: a given size only without the radix cache; with it the ratio split overwrites it
    ("sglang==0.5.6", {"max_mamba_cache_size": 1000}, (559, SPLIT_TOKENS, 186)),
    ("sglang==0.5.6", {"max_mamba_cache_size": 1000, "disable_radix_cache": True}, (1000, 570_819, 1000)),
    ("sglang==0.5.6", {"disable_radix_cache": True}, (512, 2_105_091, 512)),
    ("sglang==0.5.6", {"disable_radix_cache": True, "max_running_requests": 64}, (64, 3_513_603, 64)),
])
def test_each_release_sizes_the_state_pool_its_way(engine, flags, figures):
    """(REST - N x STATE) // CELL without the padding slot: N = 1000: 570,819; 512: 2,105,091; 64: 3,513,603."""
    assert (REST - 64 * STATE) // CELL == 3_513_603
    assert _figures(_qwen3_next(engine, **flags)) == figures


def test_a_given_size_is_not_capped_by_memory():
    """SGLang takes the count as given and leaves the K/V pool the rest; 1,200 slots leave none (start-up fails)."""
    p = _qwen3_next(max_mamba_cache_size=1200)
    assert REST - 1201 * STATE < 0 and p.kv_cache.state_slots == 1200 and not p.fits


def test_nemotron_h_radix_off_takes_max_running_requests():
    """0.5.6 turns the radix cache off for Nemotron-H itself: --max-running-requests 50 becomes max_mamba_cache_size
    (512 without it, which overflows: 512 x 228,151,296 B > the 104,668,397,312 B pool at TP 4). The K/V pool:
    (104,668,397,312 - 50 x 228,151,296) // 10,240 = 9,107,503 tokens (was refused)."""
    p = plan("nemotron-h-56b", gpu="H200", tp=4, engine="sglang==0.5.6", max_model_len=32768, max_running_requests=50,
             non_torch_memory="217MiB")  # the load's rests held as the pool was worked
    assert (p.kv_cache.available_bytes, p.kv_cache.state_bytes_per_request) == (104_668_397_312, 228_151_296)
    assert (p.kv_cache.state_slots, p.kv_cache.tokens, p.running_limit) == (50, 9_107_503, 50)
    assert (104_668_397_312 - 50 * 228_151_296) // 10_240 == 9_107_503


def test_plain_attention_model():
    """No state layers: --disable-radix-cache turns prefix caching off and leaves the pool; a size or strategy is not
    used (SGLang has no mambaish_config) and said so; an explicit extra_buffer is refused (0.5.23 model_hook.py
    handle_mamba_radix_cache: 'needs mamba state')."""
    base = plan("qwen3-8b", gpu="H100-SXM", engine="sglang", max_model_len=4096)
    off = plan("qwen3-8b", gpu="H100-SXM", engine="sglang", max_model_len=4096, disable_radix_cache=True,
               max_mamba_cache_size=100, mamba_radix_cache_strategy="no_buffer")
    assert (off.kv_cache.tokens, off.running_limit) == (base.kv_cache.tokens, base.running_limit)
    assert off.launch_command.endswith("--disable-radix-cache")
    notes = " ".join(off.notes)
    assert "no prefix caching" in notes and "--max-mamba-cache-size 100: not used" in notes
    assert "--mamba-radix-cache-strategy no_buffer: not used" in notes
    with pytest.raises(KvplanError, match="^--mamba-radix-cache-strategy extra_buffer: .*no state layers"):
        plan("qwen3-8b", gpu="H100-SXM", engine="sglang", max_model_len=4096, mamba_radix_cache_strategy="extra_buffer")
    # --shared-prefix-len stays refused for SGLang, whose prefix caching kvplan does not plan, radix cache or not
    with pytest.raises(KvplanError, match="^--shared-prefix-len: only for"):
        plan("qwen3-8b", gpu="H100-SXM", engine="sglang", max_model_len=4096, shared_prefix_len=1024)


def test_launch_lines():
    assert _qwen3_next(disable_radix_cache=True, max_running_requests=64).launch_command.endswith(
        "--max-running-requests 64 --disable-radix-cache")
    assert _qwen3_next(max_mamba_cache_size=1000).launch_command.endswith("--max-mamba-cache-size 1000")
    # 0.5.14+ asserts no_buffer with --disable-overlap-schedule (validate_mamba_no_buffer); 0.5.7 - 0.5.13 spell the
    # flag --mamba-scheduler-strategy and turn the overlap scheduler off themselves
    assert _qwen3_next(mamba_radix_cache_strategy="no_buffer").launch_command.endswith(
        "--mamba-radix-cache-strategy no_buffer --disable-overlap-schedule")
    assert _qwen3_next("sglang==0.5.12", mamba_radix_cache_strategy="no_buffer").launch_command.endswith(
        "--mamba-scheduler-strategy no_buffer")
    # a size SGLang overwrites is left off the line
    assert "--max-mamba-cache-size" not in _qwen3_next("sglang==0.5.6", max_mamba_cache_size=1000).launch_command


@pytest.mark.parametrize(("engine", "flags", "message"), [
    ("sglang==0.5.6", {"mamba_radix_cache_strategy": "no_buffer"},
     "^--mamba-radix-cache-strategy: SGLang 0.5.5-0.5.6 does not take it"),
    ("sglang", {"mamba_radix_cache_strategy": "extra_buffer_lazy"}, "^--mamba-radix-cache-strategy: one of auto, "),
    ("sglang", {"mamba_radix_cache_strategy": "extra_buffer", "disable_radix_cache": True},
     "^--mamba-radix-cache-strategy extra_buffer: it needs the radix cache"),
    ("sglang==0.5.12", {"mamba_radix_cache_strategy": "extra_buffer"},
     "^--mamba-radix-cache-strategy extra_buffer: which hybrids"),
    ("sglang", {"max_mamba_cache_size": 0}, "^--max-mamba-cache-size: must be"),
    ("sglang==0.5.2", {"disable_radix_cache": True}, "^--disable-radix-cache: how SGLang 0.5.0-0.5.2 sizes"),
])
def test_refusals(engine, flags, message):
    with pytest.raises(KvplanError, match=message):
        _qwen3_next(engine, **flags)


def test_refused_before_the_flags_exist():
    """server_args.py 0.4.8 - 0.5.1 has neither --max-mamba-cache-size nor a mamba strategy flag."""
    for engine, flags, message in (("sglang==0.4.8", {"max_mamba_cache_size": 100}, "SGLang 0.4.8-0.4.9 does not"),
                                   ("sglang==0.5.1", {"mamba_radix_cache_strategy": "auto"}, "SGLang 0.5.0-0.5.2 does not")):
        with pytest.raises(KvplanError, match=f"^--{next(iter(flags)).replace('_', '-')}: {message} take it"):
            plan("qwen3-8b", gpu="H100-SXM", engine=engine, max_model_len=4096, **flags)


def test_extra_buffer_refused_where_sglang_asserts():
    """An architecture outside the extra_buffer set (overrides.py _MAMBA_EXTRA_BUFFER_ARCHS, 0.5.23: LFM2 is not in
    it): mamba_hook.py validate_mamba_extra_buffer asserts at start-up."""
    from kvplan.cost.runtimes.setup import ServingFlags
    from kvplan.cost.runtimes.sglang import SGLang
    from kvplan.model.catalog import load_card

    card = load_card("qwen3-next-80b-a3b")
    lfm2 = card.model_copy(update={"hf_architecture": "Lfm2ForCausalLM"})
    flags = ServingFlags(mamba_radix_cache_strategy="extra_buffer")
    assert SGLang()._mamba_flags(flags, card)["mamba_strategy"] == "extra_buffer"
    with pytest.raises(KvplanError, match="^--mamba-radix-cache-strategy extra_buffer: SGLang asserts"):
        SGLang()._mamba_flags(flags, lfm2)


def test_only_sglang_takes_them():
    for flags in ({"disable_radix_cache": True}, {"max_mamba_cache_size": 8}, {"mamba_radix_cache_strategy": "auto"}):
        with pytest.raises(KvplanError, match="only for --engine sglang"):
            plan("qwen3-8b", gpu="H100-SXM", max_model_len=4096, **flags)


def test_cli_and_check(cli, tmp_path, monkeypatch):
    code, out, err = cli("plan", "-m", "qwen3-next-80b-a3b", "--gpu", "H200", "--tp", "2", "--engine", "sglang",
                         "--max-model-len", "4096", "--mem-fraction-static", "0.85", "--disable-radix-cache",
                         "--max-mamba-cache-size", "1000", "--mamba-radix-cache-strategy", "no_buffer")
    assert code == 0, err
    assert "--disable-radix-cache --max-mamba-cache-size 1000" in out and "1,000 requests" in out
    code, out, err = cli("plan", "-m", "qwen3-8b", "--gpu", "H100-SXM", "--engine", "sglang", "--max-model-len",
                         "4096", "--mamba-radix-cache-strategy", "bogus")
    assert code == 2 and "--mamba-radix-cache-strategy: one of auto, no_buffer, extra_buffer" in err
    monkeypatch.chdir(tmp_path)
    (tmp_path / "kvplan.toml").write_text(
        '[[scenarios]]\nname = "q"\nmodel = "qwen3-next-80b-a3b"\ngpu = "H200"\ntp = 2\nengine = "sglang"\n'
        'max_model_len = 4096\nmem_fraction_static = 0.85\nmax_mamba_cache_size = 1000\n'
        'disable_radix_cache = true\nmamba_radix_cache_strategy = "no_buffer"\nmin_concurrency = 100\n')
    code, out, err = cli("check")
    assert code == 0, out + err


def test_a_logs_launch_line_carries_them(tmp_path):
    """--from-log reads the three flags from an SGLang launch line (0.5.7 - 0.5.13's --mamba-scheduler-strategy as
    the strategy) and plans with them."""
    from kvplan.planning.capacity.logparse import parse_log

    log = tmp_path / "sglang.log"
    log.write_text("$ python -m sglang.launch_server --model-path Qwen/Qwen3-Next-80B-A3B-Instruct --tp-size 2 "
                   "--disable-radix-cache --max-mamba-cache-size 1000 --mamba-scheduler-strategy no_buffer\n"
                   "[2025-10-01 10:00:00 TP0] Load weight end. type=Qwen3NextForCausalLM, dtype=torch.bfloat16, "
                   "avail mem=60.00 GB, mem usage=74.50 GB.\n")
    assert parse_log(log).flags == {"tp": 2, "disable_radix_cache": True, "max_mamba_cache_size": 1000,
                                    "mamba_radix_cache_strategy": "no_buffer"}
