"""SGLang's state pool for the state-space hybrids, release by release (read in the PyPI wheels 0.5.4 - 0.5.23;
kvplan.cost.serving_sglang's comments above mamba_running_cap, MAMBA_EXTRA_BUFFER_ARCHITECTURES_0_5_14 and
MAMBA_RADIX_OFF_ARCHITECTURES_0_5_4). Every figure is recomputed here from SGLang's formula, from the memory kvplan
leaves for the cache at --mem-fraction-static 0.85 (the same in every 0.5.x release for a given model and GPU)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kvplan.cli.app import app
from kvplan.cost import serving_sglang as sg
from kvplan.cost.runtimes.sglang import SGLang

H200 = ("--gpu", "H200", "--max-model-len", "4096", "--mem-fraction-static", "0.85")
# The load's rests held at the figures the pools below are worked from (217 MiB with more than one GPU, none on one):
# these tests pin SGLang's pool rules apart from the allocator replay that estimates the rests by default
# (kvplan.cost.allocator.reserved_rest_bytes, pinned against the logs in tests/test_logs_v0_sglang.py)
TWO_GPUS_LOAD, ONE_GPU_LOAD = ("--non-torch-memory", "217MiB"), ("--non-torch-memory", "0")


def _plan(*args: str) -> dict:
    r = CliRunner().invoke(app, ["plan", *args, "--json"])
    assert r.exit_code == 0, r.stdout
    return json.loads(r.stdout)


def _at(text: str):
    return SGLang().at_version(text).version


# Qwen3-Next-80B-A3B at TP 2: 36 Gated DeltaNet layers of a conv state (2 x 16 x 128 + 32 x 128) / 2 channels x 3
# steps = 12,288 bfloat16 = 24,576 B and a recurrent state 16 heads x 128 x 128 = 262,144 float32 = 1,048,576 B:
# 36 x 1,073,152 = 38,633,472 B a slot; 12 attention layers of 1 KV head x 256 x (K, V) x 2 B = 12,288 B a token
QWEN3_NEXT_REST, QWEN3_NEXT_STATE, QWEN3_NEXT_CELL = 45_647_696_640, 38_633_472, 12_288


@pytest.mark.parametrize(("engine", "slots", "running", "concurrency"), [
    ("sglang==0.5.4", 559, 186, 1_957_323 / 4096),  # no_buffer: 559 // 3; a request holds one slot
    ("sglang==0.5.13", 559, 186, 1_957_323 / 4096),  # "auto" -> "no_buffer" in __post_init__
    ("sglang==0.5.14", 559, 111, 186),  # extra_buffer: 559 // (3 + 2); a request holds 1 + 2 slots: 559 // 3
    ("sglang==0.5.16", 559, 111, 186),
    ("sglang==0.5.19", 558, 111, 186),  # the padding slot (0.5.17+): 558 // 5
    ("sglang", 558, 111, 186),
])
def test_qwen3_next_takes_the_extra_buffer_from_0_5_14(engine, slots, running, concurrency):
    """budget = 45,647,696,640 x 0.9 / 1.9 = 21,622,593,145.3 B: int(budget // 38,633,472) = 559 slots (0.5.17+:
    int((budget - 38,633,472) // 38,633,472) = 558 beside the padding slot); the K/V pool 45,647,696,640 - 559 x
    38,633,472 = 24,051,585,792 B, // 12,288 = 1,957,323 tokens either way (the padding slot's bytes leave it too).
    resolve_max_num_reqs: min(clamp(1,957,323 / 4,096 x 512, 2,048, 4,096) = 4,096, 1,957,323 // 2,
    max_mamba_cache_size // _calculate_mamba_ratio()), the ratio 3 with no_buffer and 3 + 2 with extra_buffer and the
    overlap scheduler (MAMBA_CACHE_V2_ADDITIONAL_RATIO_OVERLAP = 2). From 0.5.14 "auto" becomes extra_buffer for
    Qwen3NextForCausalLM (overlap on, --linear-attn-backend triton: _handle_mamba_radix_cache), and alloc takes each
    request's two ping-pong track slots from the same allocator (HybridReqToTokenPool._alloc_ping_pong_buffer)."""
    d = _plan("-m", "qwen3-next-80b-a3b", *H200, "--tp", "2", "--engine", engine, *TWO_GPUS_LOAD)
    kv = d["kv_cache"]
    assert (kv["available_bytes"], kv["state_bytes_per_request"]) == (QWEN3_NEXT_REST, QWEN3_NEXT_STATE)
    budget = QWEN3_NEXT_REST * 0.9 / 1.9
    assert slots == (int((budget - QWEN3_NEXT_STATE) // QWEN3_NEXT_STATE) if _at(engine.partition("==")[2] or "0.5.23")
                     .mamba_padding_slot else int(budget // QWEN3_NEXT_STATE))
    assert kv["state_slots"] == slots
    assert kv["tokens"] == (QWEN3_NEXT_REST - 559 * QWEN3_NEXT_STATE) // QWEN3_NEXT_CELL == 1_957_323
    assert d["max_running"] == running and d["max_concurrency"] == pytest.approx(concurrency)
    extra = running == slots // 5
    assert d["request_kv_bytes"] == 4096 * QWEN3_NEXT_CELL + (3 if extra else 1) * QWEN3_NEXT_STATE
    assert any(f"max_mamba_cache_size // {5 if extra else 3} = {running}" in n for n in d["notes"])
    assert any("extra_buffer strategy for Qwen3NextForCausalLM" in n for n in d["notes"]) == extra


def test_one_track_slot_at_pp_2():
    """PP 2 turns the overlap scheduler off after the strategy is chosen (server_args.py _handle_pipeline_parallelism
    0.5.14, arg_groups/overrides.py _pipeline_parallel_overlap_disable 0.5.15+): one ping-pong slot
    (mamba_ping_pong_track_buffer_size 1, MAMBA_CACHE_V2_ADDITIONAL_RATIO_NO_OVERLAP = 1). 0.5.23, the limiting
    stage's 45,698,338,048 B (18 layers of 2 x 1,073,152 B at TP 1 = 38,633,472 B a slot, the largest stage's share as
    0.5.17+ _handle_max_mamba_cache charges it): int((45,698,338,048 x 0.9 / 1.9 - 38,633,472) // 38,633,472) = 559;
    559 // (3 + 1) = 139 running; 559 // 2 = 279 requests' slots."""
    d = _plan("-m", "qwen3-next-80b-a3b", *H200, "--pp", "2", "--engine", "sglang==0.5.23", *TWO_GPUS_LOAD)
    kv = d["kv_cache"]
    assert kv["available_bytes"] == 45_698_338_048 and kv["state_bytes_per_request"] == QWEN3_NEXT_STATE
    assert kv["state_slots"] == int((45_698_338_048 * 0.9 / 1.9 - QWEN3_NEXT_STATE) // QWEN3_NEXT_STATE) == 559
    assert d["max_running"] == 139 and d["max_concurrency"] == 279
    assert any("max_mamba_cache_size // 4 = 139" in n and "off at PP > 1" in n for n in d["notes"])


def test_qwen3_5_and_lfm2_by_release():
    """Qwen3.5-27B on one H200 (48 Gated DeltaNet layers of 153,944,064 / 48 = 3,207,168 B): 73,278,007,910 B for the
    cache, int(x 0.9 / 1.9 // 153,944,064) = 225 slots; 225 // 3 = 75 running in 0.5.13, 225 // 5 = 45 in 0.5.14.
    LFM2 (Lfm2ForCausalLM) is no extra_buffer architecture in any release (_MAMBA_EXTRA_BUFFER_ARCHS): no_buffer,
    ratio 3."""
    for engine, running in (("sglang==0.5.13", 75), ("sglang==0.5.14", 45)):
        d = _plan("-m", "qwen3.5-27b", *H200, "--engine", engine)
        assert d["kv_cache"]["state_slots"] == int(73_278_007_910 * 0.9 / 1.9 // 153_944_064) == 225
        assert d["max_running"] == running
    d = _plan("--hf-config", "tests/data/configs/lfm2-700m", *H200, "--engine", "sglang")
    slots = d["kv_cache"]["state_slots"]
    assert any(f"max_mamba_cache_size // 3 = {slots // 3:,}" in n for n in d["notes"])
    assert not any("extra_buffer strategy for" in n for n in d["notes"])


# Nemotron-3-Nano-30B-A3B: 23 Mamba-2 layers of a conv state (64 x 64 + 2 x 8 x 128) x 3 = 18,432 bfloat16 = 36,864 B
# and an SSM state 64 x 64 x 128 = 524,288 float32 = 2,097,152 B: 23 x 2,134,016 = 49,082,368 B; 6 attention layers of
# 2 KV heads x 128 x (K, V) x 2 B = 6,144 B a token. 63,981,239,014 B for the cache on one H200 at 0.85
NANO_REST, NANO_STATE, NANO_CELL = 63_981_239_014, 49_082_368, 6_144


@pytest.mark.parametrize(("engine", "slots", "tokens", "running", "concurrency"), [
    ("sglang==0.5.4", 512, 6_323_415, 512, 512),
    ("sglang==0.5.6", 512, 6_323_415, 512, 512),
    ("sglang==0.5.7", 617, 5_484_605, 123, 617),  # 0.5.7's ratio 3 + 2 for no_buffer too: 617 // 5
    ("sglang==0.5.8", 617, 5_484_605, 205, 617),  # 617 // 3
])
def test_nemotron_h_without_the_radix_cache_before_0_5_7(engine, slots, tokens, running, concurrency):
    """0.5.4 - 0.5.6 turn the radix cache off for NemotronH / FalconH1 (model_runner.py: "{class_name} model
    detected, disable radix cache"), and handle_max_mamba_cache then takes max_mamba_cache_size = 512 (no
    --max-running-requests): the K/V pool gets 63,981,239,014 - 512 x 49,082,368 = 38,851,066,598 B, // 6,144 =
    6,323,415 tokens; resolve_max_num_reqs' ratio is 1 without the radix cache: min(4,096, 3,161,707, 512 // 1) = 512.
    0.5.7 keeps the radix cache (it turns the overlap scheduler off instead): the ratio split, int(63,981,239,014 x 0.9
    / 1.9 // 49,082,368) = 617 slots, (63,981,239,014 - 617 x 49,082,368) // 6,144 = 5,484,605 tokens. 0.5.7's
    resolve_max_num_reqs adds MAMBA_CACHE_V2_ADDITIONAL_RATIO_OVERLAP = 2 unless the extra_buffer is on with
    speculative decoding ("if enable_mamba_extra_buffer() and not spec_algorithm.is_none(): ... NO_OVERLAP else: ...
    OVERLAP"), no_buffer included: 617 // 5 = 123 running; 0.5.8 gates it on enable_mamba_extra_buffer(): 617 // 3 =
    205."""
    d = _plan("-m", "nemotron-3-nano-30b-a3b", *H200, "--engine", engine, *ONE_GPU_LOAD)
    kv = d["kv_cache"]
    assert (kv["available_bytes"], kv["state_bytes_per_request"]) == (NANO_REST, NANO_STATE)
    if slots == 512:
        assert tokens == (NANO_REST - 512 * NANO_STATE) // NANO_CELL
        assert any("turns the radix cache off for NemotronHForCausalLM" in n for n in d["notes"])
    else:
        assert slots == int(NANO_REST * 0.9 / 1.9 // NANO_STATE)
        assert tokens == (NANO_REST - slots * NANO_STATE) // NANO_CELL
    assert (kv["state_slots"], kv["tokens"], d["max_running"]) == (slots, tokens, running)
    assert d["max_concurrency"] == concurrency


def test_nemotron_h_56b_states_outgrow_the_pool_without_the_radix_cache():
    """Nemotron-H-56B's 512 slots x 912,605,184 B = 467 GB dwarf the 14,488,412,774 B left on an H200: SGLang 0.5.6's
    K/V pool would be negative (its start-up refuses); kvplan plans no tokens and says it does not fit."""
    d = _plan("-m", "nemotron-h-56b", *H200, "--engine", "sglang==0.5.6")
    assert d["kv_cache"]["state_slots"] == 512 and d["kv_cache"]["tokens"] == 0 and not d["fits"]


def test_the_rules_by_release():
    assert [sg.mamba_tracking_slots(e, o) for e, o in ((False, True), (True, True), (True, False))] == [0, 2, 1]
    assert 557 // sg.mamba_ratio(tracking_slots=2) == 111 and 512 // sg.mamba_ratio(radix_cache=False) == 512
    assert sg.mamba_fixed(10_000, 10) == (10_000 - 5_120, 512)
    assert [("Qwen3NextForCausalLM" in _at(v).mamba_extra_buffer) for v in
            ("0.5.9", "0.5.13", "0.5.14", "0.5.15", "0.5.16", "0.5.18", "0.5.19", "0.5.23")] == [
        False, False, True, True, True, True, True, True]
    assert not any("Lfm2ForCausalLM" in _at(v).mamba_extra_buffer for v in ("0.5.14", "0.5.19", "0.5.23"))
    assert "Qwen3_5ForCausalLM" in _at("0.5.19").mamba_extra_buffer - _at("0.5.18").mamba_extra_buffer
    assert [_at(v).mamba_no_buffer_ratio_extra for v in ("0.5.6", "0.5.7", "0.5.8", "0.5.23")] == [0, 2, 0, 0]
    assert [("NemotronHForCausalLM" in _at(v).mamba_radix_off) for v in
            ("0.5.2", "0.5.3", "0.5.4", "0.5.6", "0.5.7", "0.5.23")] == [False, True, True, True, False, False]
    assert "Qwen3NextForCausalLM" not in _at("0.5.4").mamba_radix_off  # MambaRadixCache for the GDN hybrids


@pytest.mark.parametrize(("engine", "per_slot", "slots", "running"), [
    ("sglang==0.5.13", 2 * QWEN3_NEXT_STATE, 280, 93),  # the whole model's 36 layers; no_buffer: 280 // 3
    ("sglang==0.5.16", 2 * QWEN3_NEXT_STATE, 280, 70),  # extra_buffer without overlap: 280 // 4
    ("sglang==0.5.17", QWEN3_NEXT_STATE, 559, 139),  # the largest stage's 18 of 36: int(77,266,944 x 0.5)
])
def test_pp_stages_charge_the_whole_models_states_before_0_5_17(engine, per_slot, slots, running):
    """Qwen3-Next at PP 2 (TP 1: 2 x 1,073,152 = 2,146,304 B a GDN layer, 18 layers a stage): 0.5.4 - 0.5.16's
    _handle_max_mamba_cache divides the budget by mamba_cache_per_req, Mamba2CacheParams' sum over every state layer
    of the model (36 x 2,146,304 = 77,266,944 B), on every stage; 0.5.17+ by int(77,266,944 x 18 / 36) = 38,633,472
    (pp_layer_scale). The limiting stage's 45,698,338,048 B: int(x 0.9 / 1.9 // 77,266,944) = 280 slots, the K/V
    pool 45,698,338,048 - 280 x 77,266,944 = 24,063,593,728 B // 12,288 = 1,958,300 tokens (6 attention layers of 2
    KV heads x 256 x (K, V) x 2 B); 0.5.17: int((x 0.9 / 1.9 - 38,633,472) // 38,633,472) = 559, (45,698,338,048 -
    560 x 38,633,472) // 12,288 = 1,958,300."""
    d = _plan("-m", "qwen3-next-80b-a3b", *H200, "--pp", "2", "--engine", engine, *TWO_GPUS_LOAD)
    kv = d["kv_cache"]
    rest = 45_698_338_048
    assert kv["available_bytes"] == rest and kv["state_bytes_per_request"] == per_slot
    budget = rest * 0.9 / 1.9
    assert slots == (int(budget // per_slot) if per_slot > QWEN3_NEXT_STATE else int((budget - per_slot) // per_slot))
    assert kv["state_slots"] == slots and d["max_running"] == running
    held = slots + (per_slot == QWEN3_NEXT_STATE)  # the padding slot (0.5.17+)
    assert kv["tokens"] == (rest - held * per_slot) // QWEN3_NEXT_CELL == 1_958_300
    assert any("At PP > 1 every stage charges a slot" in n for n in d["notes"])


NEXTN = ("--speculative-algorithm", "NEXTN")  # Qwen3-Next's own MTP layer: 3 steps, top-k 1, D = 4 draft tokens


# the token pool's cell with the MTP layer in it: 12 full-attention layers of 1,024 B a token at TP 2 and the draft's
# one (features.sglang_spec_cell_size: int(cell x (1 + 1 / 12)))
NEXTN_CELL = QWEN3_NEXT_CELL * 13 // 12


def _spec_pool(d: dict) -> tuple[int, int, int, int, int]:
    kv = d["kv_cache"]
    assert kv["state_bytes_per_request"] == QWEN3_NEXT_STATE
    return kv["available_bytes"], QWEN3_NEXT_STATE, NEXTN_CELL, kv["state_slots"], kv["tokens"]


@pytest.mark.parametrize(("engine", "ratio", "pad"), [("sglang==0.5.23", 5, 1), ("sglang==0.5.17", 5, 1),
                                                      ("sglang==0.5.16", 5, 0)])
def test_speculative_states_are_solved_jointly_with_the_state_slots(engine, ratio, pad):
    """0.5.13+ _handle_max_mamba_cache (model_runner_kv_cache_mixin.py 0.5.13 - 0.5.15, kv_cache_configurator.py
    0.5.16+; 0.5.13 takes speculative decoding only without the radix cache, below): max_mamba_cache_size = int((budget - pad x per_req x (1 + D)) // (per_req x (1 + D / ratio))), the
    intermediate states per_req x (min(max_running_requests 48, slots // ratio) + pad) x D come out of the rest with
    (slots + pad) x per_req; pad is the padding slot of 0.5.17+. Before, kvplan split as without speculative decoding
    (650 / 557 slots here)."""
    d = _plan("-m", "qwen3-next-80b-a3b", *H200, "--tp", "2", "--engine", engine, *NEXTN)
    rest, per, cell, slots, tokens = _spec_pool(d)
    budget, draft = rest * 0.9 / 1.9, 4
    assert slots == int((budget - pad * per * (1 + draft)) // (per * (1 + draft / ratio)))
    copies = per * (min(48, slots // ratio) + pad) * draft
    assert tokens == (rest - copies - (slots + pad) * per) // cell
    assert d["max_running"] == min(48, slots // ratio)
    assert any("MAMBA_SPEC_RULES 'joint" in n and f"({copies:,} B)" in n for n in d["notes"])


def test_speculative_states_with_a_given_running_count():
    """--max-running-requests R with speculative decoding on a hybrid (refused before): 0.5.17+ reserves
    per_req x (min(R, slots // ratio) + 1) x D (kv_cache_configurator.py _handle_max_mamba_cache)."""
    d = _plan("-m", "qwen3-next-80b-a3b", *H200, "--tp", "2", "--engine", "sglang==0.5.23", *NEXTN,
              "--max-running-requests", "16")
    rest, per, cell, slots, tokens = _spec_pool(d)
    assert slots == int((rest * 0.9 / 1.9 - per * 5) // (per * (1 + 4 / 5)))
    assert tokens == (rest - per * (16 + 1) * 4 - (slots + 1) * per) // cell and d["max_running"] == 16


def test_speculative_states_multiply_every_slot_in_0_5_4_to_0_5_6():
    """0.5.4 - 0.5.6 model_runner.py handle_max_mamba_cache: speculativa_ratio = D; max_mamba_cache_size =
    int(budget // per_req // (1 + D)) and the state memory is slots x per_req x (1 + D)."""
    d = _plan("-m", "qwen3-next-80b-a3b", *H200, "--tp", "2", "--engine", "sglang==0.5.5", *NEXTN)
    rest, per, cell, slots, tokens = _spec_pool(d)
    assert slots == int(rest * 0.9 / 1.9 // per // 5)
    assert tokens == (rest - slots * per * 5) // cell and d["max_running"] == min(48, slots // 3)


@pytest.mark.parametrize("engine", ["sglang==0.5.7", "sglang==0.5.8"])
def test_speculative_states_come_off_the_rest_first_in_0_5_7_to_0_5_8(engine):
    """0.5.7 - 0.5.12 handle_max_mamba_cache: per_req x max_running_requests x D off the rest, then the ratio split
    of what is left (0.5.7 and 0.5.8 in the ratio branch alone)."""
    d = _plan("-m", "qwen3-next-80b-a3b", *H200, "--tp", "2", "--engine", engine, *NEXTN)
    rest, per, cell, slots, tokens = _spec_pool(d)
    left = rest - per * 48 * 4
    assert slots == int(left * 0.9 / 1.9 // per) and tokens == (left - slots * per) // cell


def test_speculative_decoding_turns_the_radix_cache_off_in_0_5_9():
    """0.5.9 server_args.py _handle_mamba_radix_cache: no_buffer (auto's choice) with speculative decoding turns the
    radix cache off; handle_max_mamba_cache then takes max_running_requests (48, set for speculative decoding) as the
    state pool's count, after per_req x 48 x D off the rest; the running cap is slots // 1."""
    d = _plan("-m", "qwen3-next-80b-a3b", *H200, "--tp", "2", "--engine", "sglang==0.5.9", *NEXTN)
    rest, per, cell, slots, tokens = _spec_pool(d)
    assert slots == 48 and tokens == (rest - per * 48 * 4 - 48 * per) // cell and d["max_running"] == 48
    assert any("turns the radix cache off for Qwen3NextForCausalLM under speculative decoding" in n
               for n in d["notes"])


@pytest.mark.parametrize("engine", ["sglang==0.5.10", "sglang==0.5.12", "sglang==0.5.13"])
def test_speculative_decoding_with_the_radix_cache_refused_in_0_5_10_to_0_5_13(engine):
    """0.5.10 - 0.5.13 _handle_mamba_radix_cache raises ValueError for speculative decoding with the radix cache
    under no_buffer; with --disable-radix-cache the pool is counted from max_running_requests 48."""
    r = CliRunner().invoke(app, ["plan", "-m", "qwen3-next-80b-a3b", *H200, "--tp", "2", "--engine", engine, *NEXTN])
    assert r.exit_code == 2 and "--speculative-algorithm" in r.output
    d = _plan("-m", "qwen3-next-80b-a3b", *H200, "--tp", "2", "--engine", engine, *NEXTN, "--disable-radix-cache")
    rest, per, cell, slots, tokens = _spec_pool(d)
    copies = per * 48 * 4  # 0.5.10 - 0.5.12 before the count; 0.5.13 min(48, 48 // 1) x D beside it
    assert slots == 48 and tokens == (rest - copies - 48 * per) // cell


def test_spec_no_buffer_rule_is_one_condition():
    """SglangVersion.mamba_spec_no_buffer_rule, the one condition behind 0.5.8 - 0.5.9's radix cache off and 0.5.10 -
    0.5.13's refusal (_handle_mamba_radix_cache, read in 0.5.8 - 0.5.13): a hybrid under speculative decoding with
    the radix cache on and no_buffer; never an all-attention model, which _handle_mamba_radix_cache leaves alone."""
    from kvplan.cost.runtimes.setup import Options
    from kvplan.model.catalog import load_card

    qwen, nemotron, llama = load_card("qwen3-next-80b-a3b"), load_card("nemotron-h-56b"), load_card("llama-3.1-8b")
    spec = Options(speculative=object())
    assert [_at(v).mamba_spec_no_buffer_rule(qwen, spec) for v in ("0.5.7", "0.5.8", "0.5.9", "0.5.10", "0.5.13",
                                                                    "0.5.14")] == ["", "", "radix_off", "refuse",
                                                                                   "refuse", ""]
    assert _at("0.5.8").mamba_spec_no_buffer_rule(nemotron, spec) == "radix_off"  # Nemotron-H alone in 0.5.8
    assert _at("0.5.10").mamba_spec_no_buffer_rule(llama, spec) == ""
    for off in (Options(), Options(speculative=object(), radix_disabled=True),
                Options(speculative=object(), mamba_strategy="extra_buffer")):
        assert _at("0.5.10").mamba_spec_no_buffer_rule(qwen, off) == ""


def test_mamba_spec_split_rules():
    """serving_sglang.mamba_spec_split against the formulas read (per_req 10, pool 1900: budget 900, D 4, R 48)."""
    assert sg.mamba_spec_split("factor", 1900, 10, 4, 48, 3) == (1900 - 18 * 50, 18)  # 900 // 10 // 5
    assert sg.mamba_spec_split("upfront", 3820, 10, 4, 48, 3) == (1900 - 90 * 10, 90)  # 3820 - 1920 = 1900
    assert sg.mamba_spec_split("upfront_split", 3820, 10, 4, 48, 3, count=7) == (3820 - 70, 7)
    assert sg.mamba_spec_split("joint", 1900, 10, 4, 48, 3) == (1900 - 10 * 12 * 4 - 38 * 10, 38)  # 900 // 23.33
    assert sg.mamba_spec_split("joint_padded", 1900, 10, 4, 48, 3) == (1900 - 10 * 13 * 4 - 37 * 10, 36)  # 850 //
    with pytest.raises(ValueError):
        sg.mamba_spec_split("bogus", 1, 1, 1, 1, 1)


def test_mamba_spec_copies_rules():
    """serving_sglang.mamba_spec_copies, the one rule for the intermediate states' bytes that both the split and the
    plan's note read, at test_mamba_spec_split_rules' figures (per_req 10, D 4, R 48, ratio 3)."""
    assert sg.mamba_spec_copies("", 10, 4, 48, 3, 90) == 0  # before 0.5.3: not charged
    assert sg.mamba_spec_copies("factor", 10, 4, 48, 3, 18) == 18 * 10 * 4  # every slot's D copies
    assert sg.mamba_spec_copies("upfront", 10, 4, 48, 3) == sg.mamba_spec_copies("upfront", 10, 4, 48, 3, count=7) \
        == 48 * 10 * 4
    assert sg.mamba_spec_copies("upfront_split", 10, 4, 48, 3) == 48 * 10 * 4
    assert sg.mamba_spec_copies("upfront_split", 10, 4, 48, 3, count=7) == 0  # by count: nothing (0.5.7 - 0.5.8)
    assert sg.mamba_spec_copies("joint", 10, 4, 48, 3, 38) == 10 * 12 * 4  # min(48, 38 // 3) x D
    assert sg.mamba_spec_copies("joint_padded", 10, 4, 48, 3, 36) == 10 * 13 * 4  # (min(48, 36 // 3) + 1) x D
    assert sg.mamba_spec_copies("joint_padded", 10, 4, 8, 3, 36) == 10 * 9 * 4  # R below slots // ratio
    with pytest.raises(ValueError):
        sg.mamba_spec_copies("bogus", 1, 1, 1, 1)


def _tiny(tmp_path, name: str, arch: str) -> str:
    """tests/cases.py's tiny hybrid config, written where --hf-config reads it."""
    from cases import HYBRID_CASES

    model_type, kwargs = next((mt, kw) for n, mt, kw in HYBRID_CASES if n == name)
    (tmp_path / "config.json").write_text(json.dumps(dict(kwargs, model_type=model_type, architectures=[arch],
                                                          torch_dtype="bfloat16")))
    return str(tmp_path)


@pytest.mark.parametrize(("name", "arch"), [("falcon-h1", "FalconH1ForCausalLM"),
                                            ("granite-moe-hybrid", "GraniteMoeHybridForCausalLM")])
def test_falcon_h1_and_granite_hybrid_by_release(tmp_path, name, arch):
    """The tiny Falcon-H1 / Granite-MoE-Hybrid (2 Mamba-2 layers of 8 heads x 16, 2 groups, d_state 8: a conv state of
    (128 + 2 x 2 x 8) x 3 = 480 bfloat16 = 960 B and an SSM state 8 x 16 x 8 = 1,024 float32 = 4,096 B; 2 x 5,056 =
    10,112 B a slot) on an L4 at 0.85: 0.5.6 turns Falcon-H1's radix cache off (512 slots, cap 512 // 1; Granite's
    hybrid first loads in 0.5.9); 0.5.13 splits by the ratio, int(rest x 0.9 / 1.9 // 10,112) slots, cap // 3;
    0.5.14 picks extra_buffer for both (cap // 5)."""
    config = _tiny(tmp_path, name, arch)
    args = ("--hf-config", config, "--gpu", "L4", "--max-model-len", "4096", "--mem-fraction-static", "0.85")
    for engine, ratio in (("sglang==0.5.6", 1), ("sglang==0.5.13", 3), ("sglang==0.5.14", 5)):
        if name != "falcon-h1" and ratio == 1:
            continue
        d = _plan(*args, "--engine", engine)
        kv = d["kv_cache"]
        assert kv["state_bytes_per_request"] == 10_112
        slots = 512 if ratio == 1 else int(kv["available_bytes"] * 0.9 / 1.9 // 10_112)
        assert kv["state_slots"] == slots
        assert kv["tokens"] == (kv["available_bytes"] - slots * 10_112) // kv["bytes_per_block"]
        assert any(f"max_mamba_cache_size // {ratio} = {slots // ratio:,}" in n for n in d["notes"])
