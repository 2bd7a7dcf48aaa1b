"""Property-based tests (Hypothesis): garbled cards, config.json files and GPU files never crash kvplan.

Every generated input either works or ends in one ``KvplanError`` line (exit 2 in the CLI); never another
exception, a traceback, or a hang (each example has a deadline). The normal suite runs a small budget; a longer run:

    KVPLAN_FUZZ_EXAMPLES=2000 python -m pytest tests/test_fuzz_inputs.py
"""

from __future__ import annotations

import copy
import json
import os
from datetime import timedelta
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from kvplan import KvplanError, estimate, load_card
from kvplan.cli.app import app
from kvplan.cost.hardware import load_gpus
from kvplan.cost.params import count_params
from kvplan.files import parse_json, parse_yaml
from kvplan.model.catalog import card_from_dict
from kvplan.model.hf.config import card_from_hf_config, card_yaml

# 50 examples in the default tier, 300 in the slow tiers (--tier all|slow), derandomized so CI is reproducible;
# KVPLAN_FUZZ_EXAMPLES=N sets the count and draws at random (a long run to look for new bugs)
EXAMPLES = int(os.environ.get("KVPLAN_FUZZ_EXAMPLES", "50" if os.environ.get("KVPLAN_TEST_TIER", "default") == "default"
                              else "300"))
FUZZ = settings(max_examples=EXAMPLES, deadline=timedelta(seconds=3), database=None,
                derandomize="KVPLAN_FUZZ_EXAMPLES" not in os.environ,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# ---- what gets garbled ------------------------------------------------------------------------------------------

CARDS = {name: load_card(name).model_dump(mode="json", exclude_none=True)
         for name in ("llama-2-7b", "gemma-2-9b", "deepseek-v2-lite", "t5-base", "bert-base-uncased", "falcon-40b")}
_DEC = dict(hidden_size=64, intermediate_size=96, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
            vocab_size=128, max_position_embeddings=256, torch_dtype="bfloat16", _name_or_path="org/tiny")
CONFIGS = {
    "llama": dict(_DEC, model_type="llama", tie_word_embeddings=False, attention_bias=False),
    "qwen2": dict(_DEC, model_type="qwen2", use_sliding_window=True, sliding_window=8, max_window_layers=2,
                  layer_types=["full_attention"] * 2 + ["sliding_attention"] * 2),
    "gemma2": dict(_DEC, model_type="gemma2", head_dim=16, sliding_window=8, hidden_activation="gelu_pytorch_tanh"),
    "mpt": dict(model_type="mpt", d_model=64, n_layers=2, n_heads=4, vocab_size=128, max_seq_len=64,
                expansion_ratio=4, no_bias=True, attn_config={"alibi": True}),
    "deepseek_v3": dict(_DEC, model_type="deepseek_v3", kv_lora_rank=32, q_lora_rank=24, qk_rope_head_dim=8,
                        qk_nope_head_dim=16, v_head_dim=16, n_routed_experts=4, num_experts_per_tok=2,
                        moe_intermediate_size=32, n_shared_experts=1, first_k_dense_replace=1),
}
GPU_TEXT = ("gpus:\n  T-1:\n    vendor: Test\n    memory_bytes: 80000000000\n"
            "    memory_bandwidth_bytes_per_s: 2000000000000\n    peak_flops: {fp32: 6.7e+13, bf16: 9.9e+14}\n"
            "    source: https://example.org\n")

# ---- strategies -------------------------------------------------------------------------------------------------

_SPECIAL = [0, -1, 1, 2, 3, 10 ** 7, 10 ** 30, 2 ** 63, 10 ** 400,  # (10^5000: in test_input_errors; Hypothesis cannot print it)
            "true", "false", "32", "", "x" * 300,
            "full_attention", "sliding_attention", "silu", "bf16", "decoder-only", "encoder-only", "sliding", "global"]
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-5, 300), st.integers(-(10 ** 40), 10 ** 40),
                    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12), st.sampled_from(_SPECIAL))
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4)
                      | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=8)
_INSERTS = [b"&a ", b"*a", b"[", b"{", b"]", b": ", b"\n  ", b"!!python/object:os.system ", b"\xff\xfe", b"\x00",
            b"true", b"9" * 200, b"- ", b"'", b'"', b"\t", b"<<: *a\n", b"\xc3", b"1e999", b"-.inf"]


@st.composite
def mutated(draw, bases: dict) -> dict:
    """A valid dict with 1-4 keys set to random values, dropped, or changed one level down."""
    data = copy.deepcopy(draw(st.sampled_from(sorted(bases.items())))[1])
    keys = sorted(set(data) | {"num_layers", "moe", "mla", "layer_types", "attn_config", "sliding_window_pattern"})
    for _ in range(draw(st.integers(1, 4))):
        key, action = draw(st.sampled_from(keys)), draw(st.sampled_from(["set", "drop", "nested"]))
        if action == "drop":
            data.pop(key, None)
        elif action == "nested" and isinstance(data.get(key), dict) and data[key]:
            data[key][draw(st.sampled_from(sorted(data[key])))] = draw(VALUES)
        else:
            data[key] = draw(VALUES)
    return data


@st.composite
def garbled(draw, texts: list[str]) -> bytes:
    """A valid text with 1-5 byte-level edits: flips, deletions, duplications and YAML/JSON-significant inserts."""
    raw = bytearray(draw(st.sampled_from(texts)).encode())
    for _ in range(draw(st.integers(1, 5))):
        pos, op = draw(st.integers(0, len(raw))), draw(st.sampled_from(["insert", "delete", "flip", "dup"]))
        if op == "insert":
            raw[pos:pos] = draw(st.sampled_from(_INSERTS) | st.binary(max_size=6))
        elif op == "delete":
            del raw[pos:pos + draw(st.integers(1, 20))]
        elif op == "flip" and pos < len(raw):
            raw[pos] = draw(st.integers(0, 255))
        else:
            raw[pos:pos] = raw[max(0, pos - 40):pos] * draw(st.integers(1, 3))
    return bytes(raw)


CARD_TEXTS = [yaml.safe_dump(c, sort_keys=False) for c in CARDS.values()]
CONFIG_TEXTS = [json.dumps(c, indent=2) for c in CONFIGS.values()]


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


def _ok_or_kvplan_error(fn, *args):
    """Run fn; a KvplanError must be one line. Any other exception fails the test (with Hypothesis' example)."""
    try:
        return fn(*args)
    except KvplanError as exc:
        assert "\n" not in str(exc) and 0 < len(str(exc)) < 1000, str(exc)[:2000]
        return None


def _use(card) -> None:
    """A card that validated must also size: parameters and a small estimate."""
    if card is not None:
        assert count_params(card).total > 0
        _ok_or_kvplan_error(lambda: estimate(card, batch=1, seq_len=8, encoder_len=8 if
                                             card.architecture == "encoder-decoder" else None))


# ---- library ----------------------------------------------------------------------------------------------------

@FUZZ
@given(mutated(CARDS))
def test_garbled_card_dicts(data):
    _use(_ok_or_kvplan_error(card_from_dict, data))


@FUZZ
@given(garbled(CARD_TEXTS))
def test_garbled_card_yaml(folder, raw):
    path = folder / "card.yaml"
    path.write_bytes(raw)
    _use(_ok_or_kvplan_error(load_card, path))


@FUZZ
@given(mutated(CONFIGS))
def test_mutated_hf_configs(config):
    before = copy.deepcopy(config)
    card = _ok_or_kvplan_error(card_from_hf_config, config)
    assert repr(config) == repr(before)  # never mutates the caller's dict (repr: NaN != NaN)
    _use(card)
    if card is not None:  # what import writes reads back as the same card
        assert parse_yaml(card_yaml(card, []), "roundtrip") == yaml.safe_load(card_yaml(card, []))


@FUZZ
@given(garbled(CONFIG_TEXTS))
def test_garbled_config_json(folder, raw):
    path = folder / "config.json"
    path.write_bytes(raw)
    _use(_ok_or_kvplan_error(card_from_hf_config, path))


@FUZZ
@given(garbled([GPU_TEXT]))
def test_garbled_gpu_files(folder, raw):
    path = folder / "gpus.yaml"
    path.write_bytes(raw)
    _ok_or_kvplan_error(load_gpus, path)


@FUZZ
@given(st.text(max_size=200) | st.binary(max_size=200).map(lambda b: b.decode("latin-1")))
def test_arbitrary_text_parsers(text):
    _ok_or_kvplan_error(parse_yaml, text, "t.yaml")
    _ok_or_kvplan_error(parse_json, text, "t.json")


# ---- CLI --------------------------------------------------------------------------------------------------------

def _cli(*args: str) -> None:
    result = CliRunner().invoke(app, list(args))
    out = result.stdout + result.stderr
    assert result.exit_code in (0, 2), (result.exit_code, out[-2000:], result.exception)
    assert "Traceback" not in out
    if result.exit_code == 2:
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr[-2000:]


CLI_FUZZ = settings(FUZZ, max_examples=max(10, EXAMPLES // 2))


@CLI_FUZZ
@given(garbled(CARD_TEXTS))
def test_cli_estimate_with_garbled_cards(folder, raw):
    path = folder / "cli-card.yaml"
    path.write_bytes(raw)
    extra = ("--encoder-len", "8") if b"encoder-decoder" in raw else ()
    _cli("estimate", "--model", str(path), "--seq-len", "8", *extra, "--json")


@CLI_FUZZ
@given(mutated(CONFIGS))
def test_cli_import_with_mutated_configs(folder, config):
    path = folder / "cli-config.json"
    path.write_text(json.dumps(config, default=str) if _dumpable(config) else "{}")
    _cli("cards", "import", str(path))


def _dumpable(config: dict) -> bool:
    try:
        json.dumps(config)
        return True
    except ValueError:  # an integer beyond str()'s 4300-digit limit
        return False
