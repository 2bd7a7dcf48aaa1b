"""Bad cards, config.json files and GPU files: one KvplanError naming the field or key, never a crash (issue 9)."""

from __future__ import annotations

import copy
import errno
import json
import re
import time
from pathlib import Path

import pytest

from helpers import os_reason
from kvplan import KvplanError, load_card
from kvplan.cost.hardware import load_gpus
from kvplan.model.catalog import card_from_dict
from kvplan.model.hf.config import card_from_hf_config

BASE = dict(name="tiny", source="test", num_layers=4, hidden_size=64, num_heads=8, ffn_size=128, gated_ffn=True,
            activation="silu", vocab_size=100, tie_embeddings=False, norm="rmsnorm", position="rope",
            max_position_embeddings=512, dtype="bfloat16")
LLAMA = dict(model_type="llama", hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, vocab_size=128, torch_dtype="bfloat16")
MOE = dict(num_experts=4, experts_per_token=2, expert_ffn_size=32)
MLA = dict(kv_lora_rank=32, qk_rope_head_dim=8, qk_nope_head_dim=16, v_head_dim=16)


def _card_error(**change) -> str:
    with pytest.raises(KvplanError) as err:
        card_from_dict({**BASE, **change}, origin="c.yaml")
    assert "\n" not in str(err.value) and len(str(err.value)) < 400
    return str(err.value)


# ---- cards ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("field", ["num_layers", "hidden_size", "num_heads", "ffn_size", "vocab_size",
                                   "max_position_embeddings", "norms_per_layer", "type_vocab_size"])
def test_true_is_not_the_integer_one(field):
    # kvplan's parts of the line: file, field, the value given and what is allowed (the middle is pydantic's)
    assert re.fullmatch(rf"c\.yaml: {field}: .+ \(got True\); allowed: an integer \d+\.\.\d+",
                        _card_error(**{field: True}))


@pytest.mark.parametrize(("value", "shown"), [(32.0, "32.0"), ("32", "'32'"), (float("inf"), "inf")])
def test_floats_and_strings_are_not_integers(value, shown):
    assert re.fullmatch(rf"c\.yaml: num_layers: .+ \(got {re.escape(shown)}\); allowed: an integer 1\.\.10000",
                        _card_error(num_layers=value))


def test_booleans_are_strict():
    assert re.fullmatch(r"c\.yaml: gated_ffn: .+ \(got 1\); allowed: true or false", _card_error(gated_ffn=1))
    assert re.fullmatch(r"c\.yaml: tie_embeddings: .+ \(got 'false'\); allowed: true or false",
                        _card_error(tie_embeddings="false"))


@pytest.mark.parametrize("layers", [10 ** 7, 10 ** 30, 10 ** 5000], ids=["1e7", "1e30", "1e5000"])
def test_absurd_layer_counts_are_refused_at_once(layers):
    start = time.monotonic()
    message = _card_error(num_layers=layers)
    shown = "an integer of 5001 digits" if layers == 10 ** 5000 else str(layers)
    assert re.fullmatch(rf"c\.yaml: num_layers: .+ \(got {shown}\); allowed: an integer 1\.\.10000", message)
    assert time.monotonic() - start < 0.5


def test_caps_on_widths_heads_and_experts():
    assert "allowed: an integer 1..10000000" in _card_error(hidden_size=10 ** 8)
    assert "allowed: an integer 1..100000" in _card_error(num_heads=10 ** 6)
    assert "moe.num_experts" in _card_error(moe={**MOE, "num_experts": 10 ** 6})


@pytest.mark.parametrize(("change", "needle"), [
    ({"hf_kv_heads": 16}, "hf_kv_heads: 16 is not a multiple of num_kv_heads (8) dividing num_heads (8); allowed: 8"),
    ({"num_kv_heads": 2, "hf_kv_heads": 3}, "hf_kv_heads: 3 is not a multiple of num_kv_heads (2) dividing "
                                            "num_heads (8); allowed: 2, 4, 8"),
    ({"moe": {**MOE, "first_dense_layers": 4}}, "moe.first_dense_layers: 4 leaves no MoE layer of num_layers (4); "
                                                "allowed: 0..3"),
    ({"moe": {**MOE, "shared_expert_gate": True}}, "moe.shared_expert_gate: set, but num_shared_experts is 0"),
    ({"moe": {**MOE, "shared_expert_ffn_size": 8}}, "moe.shared_expert_ffn_size: set, but num_shared_experts is 0"),
    ({"architecture": "encoder-only", "mla": MLA}, "mla: not supported with architecture encoder-only"),
    ({"architecture": "encoder-decoder", "num_encoder_layers": 2, "mla": MLA}, "mla: not supported with "
                                                                              "architecture encoder-decoder"),
    ({"architecture": "encoder-only", "sliding_window": 8}, "sliding_window: an encoder-only model keeps no KV"),
    ({"architecture": "encoder-only", "hf_kv_heads": 8}, "hf_kv_heads: an encoder-only model keeps no KV"),
    ({"mla": MLA, "num_kv_heads": 2}, "num_kv_heads: MLA caches one latent"),
    ({"mla": MLA, "hf_kv_heads": 8}, "hf_kv_heads: not supported together with mla"),
    ({"sliding_window": 8, "layer_pattern": ["global"]}, "sliding_window: set, but layer_pattern has no sliding"),
    ({"relative_attention_num_buckets": 32}, "relative_attention_num_buckets: allowed only when position is relative"),
    ({"learned_position_offset": 2}, "learned_position_offset: allowed only when position is learned"),
])
def test_contradictions_are_refused(change, needle):
    assert _card_error(**change).startswith(f"c.yaml: {needle}")


def test_offending_values_are_clipped():
    message = _card_error(name="x" * 5000)
    allowed = re.escape("allowed: a string of at most 128 characters matching ^[A-Za-z0-9][A-Za-z0-9._-]*$")
    assert re.fullmatch(rf"c\.yaml: name: .+ \(got 'x{{27}}\.\.\.x{{28}}'\); {allowed}", message) and len(message) < 300
    assert "(got an integer of 5001 digits)" in _card_error(vocab_size=10 ** 5000)


def test_card_file_duplicate_keys_and_alias_bomb(tmp_path):
    path = tmp_path / "dup.yaml"
    path.write_text("name: a\nnum_layers: 2\nnum_layers: 3\n")
    with pytest.raises(KvplanError, match=r"dup\.yaml: line 3, column 1: duplicate key 'num_layers'"):
        load_card(path)
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("layer_pattern: &a [global, global, global, global, global, global, global, global]\n" + "".join(
        f"x{i}: &a{i} [{', '.join(['*a' if i == 0 else f'*a{i - 1}'] * 8)}]\n" for i in range(8)))
    with pytest.raises(KvplanError, match=r"bomb\.yaml: line \d+, column \d+: expands to more than 100,000 nodes"):
        load_card(bomb)


def test_card_paths_and_names_never_crash(tmp_path):
    with pytest.raises(KvplanError, match=r"^unknown model 'x{27}\.\.\.x{28}' \(`kvplan cards list`"):
        load_card("x" * 5000)
    with pytest.raises(KvplanError, match=rf"^x+\.\.\.x+\.yaml: cannot read card: {os_reason(errno.ENAMETOOLONG)}$"):
        load_card("x" * 5000 + ".yaml")
    with pytest.raises(KvplanError, match="a card is a YAML mapping of fields"):
        (tmp_path / "list.yaml").write_text("- 1\n")
        load_card(tmp_path / "list.yaml")
    with pytest.raises(KvplanError, match="model: expected a card name or path, got int"):
        load_card(7)


# ---- config.json ------------------------------------------------------------------------------------------------

def _hf_error(config: dict) -> str:
    with pytest.raises(KvplanError) as err:
        card_from_hf_config(config)
    assert "\n" not in str(err.value)
    return str(err.value)


@pytest.mark.parametrize(("change", "needle"), [
    ({"num_attention_heads": 0}, "num_attention_heads: 0 is out of range or not an integer; allowed: an integer 1"),
    ({"num_attention_heads": "32"}, "num_attention_heads: '32' is out of range or not an integer"),
    ({"num_hidden_layers": 32.0}, "num_hidden_layers: 32.0 is out of range or not an integer; allowed: an integer "
                                  "1..10,000"),
    ({"num_hidden_layers": float("inf")}, "num_hidden_layers: inf is out of range"),
    ({"num_hidden_layers": 10 ** 30}, "num_hidden_layers: 1000000000000000000000000000000 is out of range"),
    ({"num_hidden_layers": True}, "num_hidden_layers: True is out of range or not an integer"),
    ({"hidden_size": [64]}, "hidden_size: [64] is out of range or not an integer"),
    ({"tie_word_embeddings": "false"}, "tie_word_embeddings: 'false' is not a boolean; allowed: true or false"),
    ({"attention_bias": 0}, "attention_bias: 0 is not a boolean"),
    ({"layer_types": "sliding_attention"}, "layer_types: 'sliding_attention' is not a list of num_hidden_layers (2)"),
    ({"layer_types": ["full_attention", 3]}, "layer_types: 3 unsupported; allowed: a list of 2 entries"),
    ({"hidden_act": {"x": 1}}, "hidden_act: {'x': 1} is not a string"),
    ({"torch_dtype": ["bf16"]}, "torch_dtype ['bf16'] unsupported"),
    ({"model_type": 10 ** 5000}, "model_type: an integer of 5001 digits is not a string"),  # id: see ids=
    ({"_name_or_path": 7}, "_name_or_path: 7 is not a string"),
], ids=lambda v: next(iter(v)) if isinstance(v, dict) else "")
def test_config_keys_are_type_checked(change, needle):  # ids: the key changed
    assert f"config: {needle}" in _hf_error({**LLAMA, **change})


def test_gemma3_pattern_mpt_and_deepseek_keys():
    gemma3 = dict(LLAMA, model_type="gemma3_text", head_dim=16, sliding_window=8)
    assert "sliding_window_pattern: 0 is out of range" in _hf_error({**gemma3, "sliding_window_pattern": 0})
    mpt = dict(model_type="mpt", d_model=64, n_layers=2, n_heads=4, vocab_size=128, max_seq_len=64)
    assert "attn_config: 'alibi' is not a mapping" in _hf_error({**mpt, "attn_config": "alibi"})
    assert "expansion_ratio: '4' is not a positive number" in _hf_error({**mpt, "expansion_ratio": "4"})
    assert "expansion_ratio 8 unsupported: transformers' MPT ignores it" in _hf_error({**mpt, "expansion_ratio": 8})
    assert "attn_config.alibi: 'no' is not a boolean" in _hf_error({**mpt, "attn_config": {"alibi": "no"}})
    ds = dict(LLAMA, model_type="deepseek_v3", **MLA, n_routed_experts=4, num_experts_per_tok=2,
              moe_intermediate_size=32)
    assert "missing key 'q_lora_rank'" in _hf_error(ds)
    assert "moe_layer_freq '1' unsupported" in _hf_error({**ds, "q_lora_rank": None, "moe_layer_freq": "1"})


def test_mpt_relying_on_defaults_matches_transformers_shapes():
    card = card_from_hf_config(dict(model_type="mpt", d_model=64, n_layers=2, n_heads=4, vocab_size=128))
    assert (card.ffn_size, card.qkv_bias, card.mlp_bias, card.position) == (256, False, False, "alibi")


def test_gemma_without_activation_uses_transformers_default():
    card = card_from_hf_config(dict(LLAMA, model_type="gemma", head_dim=16))
    assert card.activation == "gelu_tanh"


def test_callers_dict_is_not_changed():
    config = dict(LLAMA, model_type="qwen2", use_sliding_window=False,
                  layer_types=["full_attention", "full_attention"], rope_scaling={"factor": 2.0})
    before = copy.deepcopy(config)
    card_from_hf_config(config)
    assert config == before


def test_deep_or_cyclic_config_dict_is_refused():
    deep: dict = {}
    node = deep
    for _ in range(2000):
        node["x"] = {}
        node = node["x"]
    assert "nested deeper than 32 levels" in _hf_error({**LLAMA, "extra": deep})
    cyclic = dict(LLAMA)
    cyclic["self"] = cyclic
    assert "nested deeper than 32 levels (or cyclic)" in _hf_error(cyclic)


def test_long_name_or_path_gives_a_short_card_name():
    card = card_from_hf_config({**LLAMA, "_name_or_path": "org/" + "Very Long Name " * 400})
    assert card.name.startswith("very-long-name-very") and len(card.name) <= 100
    assert card.source == "config.json imported from config"


def test_config_file_errors(tmp_path):
    folder = tmp_path / "snap"
    (folder / "config.json").mkdir(parents=True)
    loop = tmp_path / "loop.json"
    loop.symlink_to(loop)
    (tmp_path / "u16.json").write_bytes(json.dumps(LLAMA).encode("utf-16"))
    cases = [(folder, r"snap/config\.json: a directory; allowed: a config\.json file"),
             (loop, rf"loop\.json: cannot read config\.json: {os_reason(errno.ELOOP)}$"),
             (tmp_path / "u16.json", r"u16\.json: config\.json is UTF-16"),
             (tmp_path / ("c" * 5000), rf"c\.\.\.c.*: cannot read config\.json: {os_reason(errno.ENAMETOOLONG)}$")]
    for path, needle in cases:
        with pytest.raises(KvplanError, match=needle):
            card_from_hf_config(path)
    (tmp_path / "big.json").write_text('{"model_type": "llama", "n": ' + "7" * 5000 + "}")
    with pytest.raises(KvplanError, match=r"big\.json: an integer of 5000 digits; allowed: at most 100 digits"):
        card_from_hf_config(tmp_path / "big.json")


# ---- GPU files --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "needle"), [
    ("gpus:\n  X: 5\n", r"gpus\.X: an entry is a mapping .*got int"),
    ("gpus:\n  X: [1, 2]\n", r"gpus\.X: an entry is a mapping .*got list"),
    ("gpus:\n  X: {memory_bytes: 1}\n  X: {memory_bytes: 2}\n", r"line 3, column 3: duplicate key 'X'"),
    ("gpus: {X: {vendor: v, memory_bytes: 1000000000, memory_bandwidth_bytes_per_s: 1, peak_flops: {fp32: 1, fp64: 1},"
     " source: s}}",
     r"gpus\.X: peak_flops\.fp64: unknown field; allowed fields: fp32, tf32, bf16, fp16, fp8, int8"),
    ("gpus: {X: {vendor: v, memory_bytes: -1, memory_bandwidth_bytes_per_s: 1, peak_flops: {fp32: 1}, source: s}}",
     r"gpus\.X: memory_bytes: .+ \(got -1\); allowed: an integer 268435456\.\.1000000000000000000$"),
    # below any GPU's memory (a figure in GB with its unit left out): SGLang's default fraction divided by it
    ("gpus: {X: {vendor: v, memory_bytes: 80, memory_bandwidth_bytes_per_s: 1, peak_flops: {fp32: 1}, source: s}}",
     r"gpus\.X: memory_bytes: .+ \(got 80\); allowed: an integer 268435456\.\.1000000000000000000$"),
    ("gpus: [\n", r"line 2, column 1: not valid YAML"),
    ("gpus: {X: {}}\nextra: 1\n", "a GPU file is a mapping with one key, gpus"),
])
def test_gpu_file_errors_are_one_line(tmp_path, text, needle):
    path = tmp_path / "gpus.yaml"
    path.write_text(text)
    with pytest.raises(KvplanError, match=needle) as err:
        load_gpus(path)
    assert "\n" not in str(err.value) and str(err.value).startswith(str(path))


# ---- through the CLI --------------------------------------------------------------------------------------------

def test_cli_bad_files_exit_2_with_one_line(cli, tmp_path):
    (tmp_path / "u16.yaml").write_bytes("name: x\n".encode("utf-16"))
    (tmp_path / "deep.json").write_text("[" * 50_000)
    runs = [(("estimate", "--model", "m" * 5000, "--seq-len", "8"), "unknown model 'mmm"),
            (("estimate", "--model", str(tmp_path / "u16.yaml"), "--seq-len", "8"), "card is UTF-16"),
            (("cards", "import", str(tmp_path / "deep.json")), "nested deeper than 32 levels"),
            (("cards", "import", str(tmp_path / ("c" * 5000))),
             re.compile(rf"c\.\.\.c+: cannot read config\.json: {os_reason(errno.ENAMETOOLONG)}$"))]
    for args, needle in runs:
        code, out, err = cli(*args)
        assert code == 2 and "Traceback" not in out + err, err
        assert len(err.strip().splitlines()) == 1 and err.startswith("error: "), err
        assert (needle.search(err.strip()) if isinstance(needle, re.Pattern) else needle in err), err


def test_qa_pass_messages_name_what_was_given(cli, tmp_path):
    """Each names the flag or file the user gave and what is allowed (they blamed --gpu, config.json, or a flag that
    came from a log file without naming it)."""
    code, _, err = cli("estimate", "-m", "", "--seq-len", "10")
    assert code == 2 and err.startswith("error: --model: empty; allowed:")
    code, _, err = cli("disagg", "-m", "llama-3.1-70b", "--gpu", "H100-SXM", "--rate", "10", "--isl", "2048", "--osl",
                       "256", "--ttft-ms", "2000", "--tpot-ms", "50", "--max-gpus-per-worker", "0")
    assert code == 2 and err.startswith("error: --max-gpus-per-worker:")
    log = Path(__file__).parents[1] / "docs" / "logs" / "vllm-pr10511-llama-3-8b.log"
    code, _, err = cli("plan", "--from-log", str(log), "--engine", "sglang")
    assert code == 2 and str(log) in err
    assert "--gpu-memory-utilization (from the log's Memory profiling table, line 8)" in err
    code, _, err = cli("report", "-m", "llama-3-8b", "--gpu", "L40S", "-o", str(tmp_path / "r.md"), "--engine",
                       "hf-static")
    assert code == 2 and "sglang" in err and "--max-cache-len" in err and not (tmp_path / "r.md").exists()
