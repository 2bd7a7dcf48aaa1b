"""The importer without transformers: full-size configs (vendored in tests/data) become the bundled cards."""

from __future__ import annotations

import errno
import json
import re
from pathlib import Path

import pytest

from helpers import os_reason
from kvplan import load_card
from kvplan.errors import KvplanError
from kvplan.model.hf.config import card_from_hf_config

CONFIGS = json.loads((Path(__file__).with_name("data") / "hf_configs.json").read_text())["configs"]
BUNDLED = {
    "meta-llama/Llama-2-7b-hf": "llama-2-7b", "meta-llama/Llama-2-13b-hf": "llama-2-13b",
    "meta-llama/Llama-2-70b-hf": "llama-2-70b", "meta-llama/Meta-Llama-3-8B": "llama-3-8b",
    "meta-llama/Llama-3.1-70B": "llama-3.1-70b", "meta-llama/Llama-3.1-405B": "llama-3.1-405b",
    "mistralai/Mistral-7B-v0.1": "mistral-7b-v0.1", "mistralai/Mixtral-8x7B-v0.1": "mixtral-8x7b",
    "tiiuae/falcon-7b": "falcon-7b", "tiiuae/falcon-40b": "falcon-40b", "google/gemma-2-9b": "gemma-2-9b",
    "google/gemma-2-27b": "gemma-2-27b", "google/gemma-3-27b-it": "gemma-3-27b", "Qwen/Qwen2.5-7B": "qwen2.5-7b",
    "Qwen/Qwen2.5-72B": "qwen2.5-72b", "Qwen/Qwen3-8B": "qwen3-8b", "Qwen/Qwen3-30B-A3B": "qwen3-30b-a3b",
    "microsoft/Phi-3-mini-4k-instruct": "phi-3-mini-4k", "deepseek-ai/DeepSeek-V2-Lite": "deepseek-v2-lite",
    "deepseek-ai/DeepSeek-V3": "deepseek-v3", "gpt2": "gpt2", "gpt2-xl": "gpt2-xl",
    "bert-base-uncased": "bert-base-uncased", "t5-base": "t5-base", "t5-11b": "t5-11b",
    "meta-llama/Llama-4-Scout-17B-16E-Instruct": "llama-4-scout-17b-16e", "google/gemma-3-12b-it": "gemma-3-12b",
    "allenai/OLMo-2-1124-13B": "olmo-2-13b", "LGAI-EXAONE/EXAONE-4.0-32B": "exaone-4.0-32b",
    # state-space and linear-attention hybrids (conv and recurrent states beside attention K/V)
    "ai21labs/AI21-Jamba-1.5-Mini": "jamba-1.5-mini", "Qwen/Qwen3.5-27B": "qwen3.5-27b",
    "nvidia/Nemotron-H-56B-Base-8K": "nemotron-h-56b", "Qwen/Qwen3-Next-80B-A3B-Instruct": "qwen3-next-80b-a3b",
    "mistralai/Mamba-Codestral-7B-v0.1": "mamba-codestral-7b",
    # glm4_moe, kimi_k2, the dense granitemoehybrid, Nemotron-H with MoE blocks
    "zai-org/GLM-4.5-Air": "glm-4.5-air", "zai-org/GLM-4.6": "glm-4.6", "moonshotai/Kimi-K2-Instruct": "kimi-k2-instruct",
    "ibm-granite/granite-4.0-micro": "granite-4.0-micro",
    "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16": "nemotron-3-nano-30b-a3b",
}


@pytest.mark.parametrize(("repo", "card_name"), sorted(BUNDLED.items()))
def test_full_size_configs_import_to_bundled_cards(repo, card_name):
    imported = card_from_hf_config(CONFIGS[repo]["config"], name=card_name)
    bundled = load_card(card_name)
    skip = {"name", "source", "published_params"}
    if "architectures" not in CONFIGS[repo]["config"]:  # the vendored copy leaves it out: the card's own source says it
        skip.add("hf_architecture")
    assert imported.model_dump(exclude=skip) == bundled.model_dump(exclude=skip)


# Llama 4 Scout's vision encoder and projector, which the text card leaves out: transformers 5.x
# Llama4ForConditionalGeneration built (on the meta device) from the vision_config of meta-llama/Llama-4-Scout-17B-16E
# (34 layers of 1408, MLP 5632, patch 14, image 336, projector 4096) holds 871,932,416 parameters besides the decoder.
SCOUT_VISION_PARAMS = 871_932_416


@pytest.mark.parametrize(("card_name", "check"), [
    # Meta's model card: 17B active, 109B total (the total includes the vision encoder)
    ("llama-4-scout-17b-16e", lambda p: (round(p.active / 1e9), round((p.total + SCOUT_VISION_PARAMS) / 1e9)) == (17, 109)),
    # Google: Gemma 3 "12B" (the text decoder alone is 11.77B)
    ("gemma-3-12b", lambda p: round(p.total / 1e9) == 12),
    # the checkpoint's safetensors index: total_size 54,864,793,600 B of float32 tensors
    ("olmo-2-13b", lambda p: p.total * 4 == 54_864_793_600),
    # LG AI Research: "a mid-size 32B model"
    ("exaone-4.0-32b", lambda p: round(p.total / 1e9) == 32),
    # AI21 (arXiv:2408.12570): Jamba-1.5-Mini 52B total, 12B active (51.57B, 12.11B)
    ("jamba-1.5-mini", lambda p: (round(p.total / 1e9), round(p.active / 1e9)) == (52, 12)),
    # Qwen: Qwen3.5-27B "27B" (the text decoder: 26.90B; the vision encoder adds the rest)
    ("qwen3.5-27b", lambda p: round(p.total / 1e9) == 27),
    # NVIDIA (arXiv:2504.03624): Nemotron-H-56B (56.32B)
    ("nemotron-h-56b", lambda p: round(p.total / 1e9) == 56),
    # Qwen3-Coder-Next (the same qwen3_next geometry): safetensors total 79,674,391,296, active 3,874,929,408;
    # Qwen3-Next-80B-A3B: "80B total, 3B activated" (3B without embeddings and LM head)
    ("qwen3-next-80b-a3b", lambda p: (p.total, p.active) == (79_674_391_296, 3_874_929_408)
     and (round(p.total / 1e9), round((p.active - p.embedding - p.lm_head) / 1e9)) == (80, 3)),
    # Mistral AI: Codestral Mamba, "an instructed model, with 7,285,403,648 parameters"
    ("mamba-codestral-7b", lambda p: p.total == 7_285_403_648),
    # zai-org: GLM-4.5-Air 106B total / 12B active, GLM-4.5 (GLM-4.6's architecture) 355B / 32B; active without
    # embeddings and LM head (106.85B / 12.18B; 352.80B / 32.08B, the MTP layer not counted: 356.8B with it)
    ("glm-4.5-air", lambda p: (p.total // 10**9, round((p.active - p.embedding - p.lm_head) / 1e9)) == (106, 12)),
    ("glm-4.6", lambda p: 352e9 < p.total < 355e9 and round((p.active - p.embedding - p.lm_head) / 1e9) == 32),
    # Moonshot: Kimi-K2 1T total, 32B activated (1.026T; 31.69B without the input embeddings)
    ("kimi-k2-instruct", lambda p: (round(p.total / 1e12), round((p.active - p.embedding) / 1e9)) == (1, 32)),
    # IBM: Granite-4.0-Micro, 3B (3.40B)
    ("granite-4.0-micro", lambda p: round(p.total / 1e9) == 3 and p.active == p.total),
    # NVIDIA: Nemotron 3 Nano 31.6B total, 3.2B active (3.6B with embeddings): 31.58B, 3.58B
    ("nemotron-3-nano-30b-a3b", lambda p: (round(p.total / 1e8), round(p.active / 1e8),
                                          round((p.active - p.embedding) / 1e8)) == (316, 36, 32)),
])
def test_2025_cards_match_their_published_sizes(card_name, check):
    from kvplan import count_params

    assert check(count_params(load_card(card_name)))


def test_unknown_model_type_lists_supported():
    with pytest.raises(KvplanError, match=r"unsupported model_type 'rwkv'; supported: .*llama.*t5"):
        card_from_hf_config({"model_type": "rwkv"})


def test_missing_size_key_is_named():
    with pytest.raises(KvplanError, match="missing key 'hidden_size'"):
        card_from_hf_config({"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 4})


def test_qwen2_window_off_is_respected():
    base = dict(model_type="qwen2", hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2, vocab_size=128, sliding_window=8)
    assert card_from_hf_config({**base, "use_sliding_window": False}).sliding_window is None
    on = card_from_hf_config({**base, "use_sliding_window": True, "max_window_layers": 1})
    assert on.layer_types == ("global", "sliding")


def test_cli_import_and_hf_config(cli, cli_json, tmp_path):
    cfg = dict(model_type="llama", hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
               num_key_value_heads=1, vocab_size=128, _name_or_path="org/Tiny-Llama", torch_dtype="bfloat16")
    folder = tmp_path / "snapshot"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(cfg))
    code, out, _ = cli("cards", "import", str(folder))
    assert code == 0 and "name: tiny-llama" in out and "assumed tie_word_embeddings=False" in out
    target = tmp_path / "card.yaml"
    assert cli("cards", "import", str(folder), "-o", str(target), "--name", "mine")[0] == 0
    assert load_card(target).name == "mine" and load_card(target).attention_kind == "MQA"
    code, _, err = cli("cards", "import", str(folder), "-o", str(target))
    assert code == 2 and "--force" in err
    assert cli("cards", "import", str(folder), "-o", str(target), "--force")[0] == 0
    r = cli_json("estimate", "--hf-config", str(folder / "config.json"), "--seq-len", "10")
    assert r["kv_cache"]["bytes_per_token"] == 2 * 1 * 16 * 2 * 2  # 2 layers x 1 KV head x 16 x (K,V) x bf16
    code, _, err = cli("estimate", "--hf-config", str(tmp_path / "nope.json"), "--seq-len", "10")
    assert code == 2 and re.search(rf"nope\.json: cannot read config\.json: {os_reason(errno.ENOENT)}$", err.strip())
    (tmp_path / "bad.json").write_text("{not json")
    code, _, err = cli("estimate", "--hf-config", str(tmp_path / "bad.json"), "--seq-len", "10")
    assert code == 2 and "not valid JSON" in err and "line 1" in err


def test_verify_takes_hf_config(cli, tmp_path):
    pytest.importorskip("torch")
    cfg = dict(model_type="llama", hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
               num_key_value_heads=2, vocab_size=64, torch_dtype="float32")
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    code, out, err = cli("verify", "--hf-config", str(tmp_path), "--seq-len", "16", "--json")
    assert code == 0, err
    checks = {c["name"]: c for c in json.loads(out)["checks"]}
    assert checks["kv_cache_bytes"]["measured"] == checks["kv_cache_bytes"]["predicted"] == 2 * 2 * 8 * 16 * 2 * 4


def test_one_registry_reads_each_model_type_once():
    """model/hf/families: every architecture module lists its readers and, beside them, the defaults of those model
    types only; the registry merges them without one module overriding another."""
    from kvplan.model.hf.families import DEFAULTS, MODULES, READERS

    types = [t for m in MODULES for t in m.READERS]
    assert len(types) == len(set(types)) == len(READERS)
    assert all(set(m.DEFAULTS) <= set(m.READERS) for m in MODULES)
    assert sum(len(m.DEFAULTS) for m in MODULES) == len(DEFAULTS)
