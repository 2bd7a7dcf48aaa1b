"""Full-size configs of the 2025-2026 state-space and linear-attention hybrids (vendored in tests/data with their
sources): the importer builds each card and its parameter count matches the published size. Jamba-1.5-Mini,
Qwen3.5-27B, Nemotron-H-56B and Qwen3-Next-80B-A3B are bundled (tests/test_hf_cards.py); Granite-4.0-H-Tiny and
Falcon-H1-7B wait: only their sizing keys were read (biases, dtype and multipliers take transformers' defaults)."""

from __future__ import annotations

import json
from pathlib import Path

from kvplan import count_params
from kvplan.model.hf.config import card_from_hf_config

CONFIGS = json.loads((Path(__file__).with_name("data") / "hf_configs.json").read_text())["configs"]


def _card(repo: str):
    return card_from_hf_config(CONFIGS[repo]["config"])


def test_jamba_1_5_mini_is_52b_total_12b_active():
    # AI21: Jamba-1.5-Mini 52B total, 12B active
    p = count_params(_card("ai21labs/AI21-Jamba-1.5-Mini"))
    assert (round(p.total / 1e9), round(p.active / 1e9)) == (52, 12)  # 51.57B, 12.11B


def test_qwen3_next_80b_a3b_is_the_published_total():
    # Qwen3-Coder-Next (the same qwen3_next geometry): safetensors total 79,674,391,296, active 3,874,929,408
    p = count_params(_card("Qwen/Qwen3-Next-80B-A3B-Instruct"))
    assert (p.total, p.active) == (79_674_391_296, 3_874_929_408)
    assert round((p.active - p.embedding - p.lm_head) / 1e9) == 3  # "3B activated" (without embeddings)


def test_qwen3_5_27b_imports_its_text_decoder():
    card = _card("Qwen/Qwen3.5-27B")
    assert card.num_layers == 64 and card.layer_types.count("global") == 16
    assert round(count_params(card).total / 1e9) == 27  # 26.90B


def test_nemotron_h_56b_reads_the_raw_pattern():
    # the checkpoint's config.json gives hybrid_override_pattern, read as NemotronHConfig converts it
    # (tests/test_hf_state_readers.py proves the raw and the transformers-normalized dicts give one card)
    card = _card("nvidia/Nemotron-H-56B-Base-8K")
    assert card.layer_types.count("global") == 10 and card.position == "none"
    assert round(count_params(card).total / 1e9) == 56  # 56.32B


def test_granite_4_0_h_tiny_is_7b_total_1b_active():
    # IBM: Granite 4.0 Tiny, 7B total / 1B active (sizing keys only vendored: biases take transformers' defaults)
    card = _card("ibm-granite/granite-4.0-h-tiny")
    p = count_params(card)
    assert card.layer_types.count("global") == 4
    assert (round(p.total / 1e9), round(p.active / 1e9)) == (7, 1)  # 6.94B, 1.47B
