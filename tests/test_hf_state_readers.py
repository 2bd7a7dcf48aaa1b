"""Readers of the published Nemotron-H and Jamba config.json files, against transformers 5.x: the raw
``hybrid_override_pattern`` string read as NemotronHConfig converts it, and no rotary embedding (``position: none``)
where transformers builds none, so vLLM's weights hold no rotary cache for them."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
warnings.filterwarnings("ignore")

from kvplan import count_params  # noqa: E402
from kvplan.cost.parallel import rope_buffer_bytes  # noqa: E402
from kvplan.errors import KvplanError  # noqa: E402
from kvplan.model.hf.config import card_from_hf_config  # noqa: E402

CONFIGS = json.loads((Path(__file__).with_name("data") / "hf_configs.json").read_text())["configs"]
IDS = dict(pad_token_id=0, bos_token_id=0, eos_token_id=0)
TINY_NEMOTRON = dict(model_type="nemotron_h", hidden_size=64, vocab_size=128, num_attention_heads=4,
                     num_key_value_heads=2, head_dim=16, intermediate_size=96, mamba_num_heads=4, mamba_head_dim=16,
                     n_groups=2, ssm_state_size=8, hybrid_override_pattern="M-M*-", **IDS)
TINY_JAMBA = dict(model_type="jamba", hidden_size=64, vocab_size=128, num_attention_heads=4, num_key_value_heads=2,
                  intermediate_size=96, num_hidden_layers=4, mamba_d_state=8, num_experts=4, num_experts_per_tok=2,
                  attn_layer_period=2, attn_layer_offset=1, use_mamba_kernels=False, **IDS)


def _hf(cfg: dict):
    kwargs = {k: v for k, v in cfg.items() if k != "model_type"}
    config = transformers.AutoConfig.for_model(cfg["model_type"], **kwargs)
    return config, transformers.AutoModelForCausalLM.from_config(config)


def test_raw_hybrid_override_pattern_is_read_as_transformers_converts_it():
    config, model = _hf(TINY_NEMOTRON)
    raw = card_from_hf_config(TINY_NEMOTRON)
    assert config.layers_block_type == ["linear_attention", "mlp", "linear_attention", "full_attention", "mlp"]
    assert raw.layer_types == ("mamba", "mlp", "mamba", "global", "mlp")
    assert raw == card_from_hf_config(config.to_dict())  # the raw file and transformers' normalized dict agree
    assert count_params(raw).total == sum(p.numel() for p in model.parameters())


def test_full_size_nemotron_h_raw_config_equals_the_normalized_one():
    raw_cfg = CONFIGS["nvidia/Nemotron-H-56B-Base-8K"]["config"]
    assert "hybrid_override_pattern" in raw_cfg and "layers_block_type" not in raw_cfg
    kwargs = {k: v for k, v in raw_cfg.items() if k not in ("_name_or_path", "auto_map", "model_type")}
    normalized = transformers.AutoConfig.for_model("nemotron_h", **kwargs).to_dict()
    skip = {"name", "source"}  # the raw file names its checkpoint (_name_or_path)
    assert card_from_hf_config(raw_cfg).model_dump(exclude=skip) == card_from_hf_config(normalized).model_dump(
        exclude=skip)
    # 118 blocks: 54 Mamba-2, 10 attention, 54 MLP ("M-" repeated, "*" every ~10th mixer)
    assert card_from_hf_config(raw_cfg).layer_types.count("global") == raw_cfg["hybrid_override_pattern"].count("*")


@pytest.mark.parametrize("normalized_too", [False, True], ids=["legacy-only", "both-legacy-wins"])
def test_legacy_mamba_keys_are_read_as_transformers_renames_them(normalized_too):
    # NemotronHConfig.__post_init__: mamba_n_groups -> n_groups, mamba_d_conv -> conv_kernel, mamba_chunk_size ->
    # chunk_size, mamba_conv_bias -> use_conv_bias, the legacy key winning over a normalized one also given
    legacy = dict(mamba_n_groups=4, mamba_d_conv=3, mamba_chunk_size=16, mamba_conv_bias=False)
    base = {k: v for k, v in TINY_NEMOTRON.items() if k != "n_groups"}
    raw = {**base, **legacy, **(dict(n_groups=2, conv_kernel=5, chunk_size=32, use_conv_bias=True)
                                if normalized_too else {})}
    config, model = _hf(raw)
    assert (config.n_groups, config.conv_kernel, config.chunk_size, config.use_conv_bias) == (4, 3, 16, False)
    card = card_from_hf_config(raw)
    assert card == card_from_hf_config(config.to_dict())
    s = card.ssm
    assert (s.n_groups, s.d_conv, s.chunk_size, s.conv_bias) == (4, 3, 16, False)
    assert count_params(card).total == sum(p.numel() for p in model.parameters())
    # conv over x, B, C: 64 + 2 x 4 groups x 8 = 128 channels x width 3, no bias, in both Mamba-2 blocks
    convs = [model.model.layers[i].mixer.conv1d for i in (0, 2)]
    assert [(c.weight.numel(), c.bias) for c in convs] == [(128 * 3, None)] * 2


def test_layers_block_type_wins_over_the_pattern():
    # NemotronHConfig.__post_init__ converts hybrid_override_pattern only when layers_block_type is not given
    both = {**TINY_NEMOTRON, "layers_block_type": ["mamba", "attention"]}
    assert card_from_hf_config(both).layer_types == ("mamba", "global")


@pytest.mark.parametrize(("pattern", "match"), [
    ("M-X", r"hybrid_override_pattern: 'M-X' is not a string of block characters; allowed: M, \*, -, E"),
    (["M", "-"], "hybrid_override_pattern: .* is not a string"),
    ("ME-", "hybrid_override_pattern: an mlp block after the first moe block"),
])
def test_bad_patterns_name_the_key(pattern, match):
    with pytest.raises(KvplanError, match=match):
        card_from_hf_config({**TINY_NEMOTRON, "hybrid_override_pattern": pattern})


@pytest.mark.parametrize("cfg", [TINY_NEMOTRON, TINY_JAMBA], ids=["nemotron_h", "jamba"])
def test_no_rope_where_transformers_builds_none(cfg):
    _, model = _hf(cfg)
    rotary = [n for n, _ in model.named_modules() if "rotary" in n]
    rope_buffers = [n for n, _ in model.named_buffers() if "inv_freq" in n]
    assert rotary == [] and rope_buffers == []
    card = card_from_hf_config(cfg)
    assert card.position == "none" and rope_buffer_bytes(card, 2) == 0
    assert count_params(card).total == sum(p.numel() for p in model.parameters())


def test_rope_hybrids_keep_their_rotary_cache():
    # Bamba and Falcon-H1 build a rotary embedding: their cards keep position rope (and vLLM's cos/sin cache)
    bamba = dict(model_type="bamba", hidden_size=64, vocab_size=128, num_attention_heads=4, num_key_value_heads=2,
                 intermediate_size=96, num_hidden_layers=2, mamba_n_heads=8, mamba_d_head=16, mamba_n_groups=2,
                 mamba_d_state=8, attn_layer_indices=[1], **IDS)
    _, model = _hf(bamba)
    assert any("rotary" in n for n, _ in model.named_modules())
    card = card_from_hf_config(bamba)
    assert card.position == "rope" and rope_buffer_bytes(card, 2) == card.max_position_embeddings * 16 * 2


def test_qwen3_5_recurrent_state_in_its_mamba_ssm_dtype():
    # Qwen/Qwen3.5-27B config.json: mamba_ssm_dtype float32; vLLM keeps the Gated DeltaNet state in it
    # (mamba_ssm_cache_dtype auto), the conv state in the model dtype: 48 layers x 48 heads x 128 x 128 x 4 B
    from kvplan import estimate

    card = card_from_hf_config(CONFIGS["Qwen/Qwen3.5-27B"]["config"])
    assert card.ssm.state_dtype == "float32"
    groups = {g.kind: g.total_bytes for g in estimate(card, seq_len=16, engine="vllm").kv_cache.groups}
    assert groups["ssm_state"] == 48 * 48 * 128 * 128 * 4
    assert groups["conv_state"] == 48 * (2 * 16 * 128 + 48 * 128) * 3 * 2  # q, k, v channels x (d_conv - 1) x bf16
    bad = {**CONFIGS["Qwen/Qwen3.5-27B"]["config"]["text_config"], "mamba_ssm_dtype": "int8"}
    with pytest.raises(KvplanError, match="mamba_ssm_dtype 'int8' unsupported; allowed: float32"):
        card_from_hf_config(bad)


def test_a_local_name_or_path_is_not_a_hub_source():
    # Codestral Mamba's config.json names the folder it was converted in, not a hub repository
    cfg = CONFIGS["mistralai/Mamba-Codestral-7B-v0.1"]["config"]
    assert cfg["_name_or_path"] == "/raid/pablo/codestral-hf-good/"
    assert card_from_hf_config(cfg).source == "config.json imported from config"
    hub = card_from_hf_config({**cfg, "_name_or_path": "mistralai/Mamba-Codestral-7B-v0.1"})
    assert hub.source == "https://huggingface.co/mistralai/Mamba-Codestral-7B-v0.1/blob/main/config.json"


def test_layouts_refused_without_attention(cli):
    # Codestral Mamba has no attention layers: MHA/GQA/MQA what-ifs have nothing to regroup
    code, _, err = cli("compare", "-m", "mamba-codestral-7b", "--attention", "mha,mqa")
    assert code == 2 and "--attention: mamba-codestral-7b has no attention layers (its 64 state layers" in err
    assert len(err.strip().splitlines()) == 1
