"""The sizes a config.json may leave out, filled the way transformers' own config class fills them.

Each supported model_type's default config (transformers' ``to_dict()``), with one key left out or set to null,
imported by kvplan and built by transformers: the card's K/V heads, head width, sliding window and RoPE scaling
equal what transformers builds (or kvplan refuses a file that transformers refuses), and the card says which
default it took. The same with the query heads doubled, so a class default (Qwen3's head_dim 128, Mistral's 8 K/V
heads) and the ``hidden_size // num_attention_heads`` fallback part.
"""

import dataclasses
import warnings

import pytest

transformers = pytest.importorskip("transformers")

from typer.testing import CliRunner  # noqa: E402

from kvplan.cli.app import app  # noqa: E402
from kvplan.errors import KvplanError  # noqa: E402
from kvplan.model.hf.config import card_yaml, import_hf_config  # noqa: E402
from kvplan.model.hf.families import READERS  # noqa: E402
from kvplan.model.hf.families.core import FLOOR_HEAD_DIM  # noqa: E402

# transformers' default configs kvplan cannot import whole, for reasons of their own (not a left-out key)
_NOT_IMPORTABLE = {"deepseek_v2", "lfm2_moe", "nemotron_h"}
TYPES = sorted(t for t in READERS if t in transformers.CONFIG_MAPPING and t not in _NOT_IMPORTABLE)
_SKIP = {"model_type", "architectures", "_name_or_path", "transformers_version", "dtype", "torch_dtype"}


def _default_dict(model_type: str, heads_times: int = 1) -> dict:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        data = transformers.CONFIG_MAPPING[model_type]().to_dict()
    if heads_times != 1 and isinstance(data.get("num_attention_heads"), int):
        data["num_attention_heads"] *= heads_times
    return {**data, "torch_dtype": "bfloat16"}


def _built(model_type: str, data: dict):
    """transformers' config from the dict, as from_pretrained reads a config.json (None: it refuses it)."""
    kwargs = {k: v for k, v in data.items() if k not in _SKIP}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return transformers.CONFIG_MAPPING[model_type](**kwargs)
    except Exception:  # noqa: BLE001 - a strict field's validation error, or __post_init__'s
        return None


def _ours(data: dict):
    try:
        return import_hf_config(data)
    except KvplanError:
        return None


def _kv_heads(cfg) -> int | None:
    return getattr(cfg, "num_key_value_heads", None)


@pytest.mark.parametrize("heads_times", [1, 2])
@pytest.mark.parametrize("key", ["num_key_value_heads", "head_dim"])
@pytest.mark.parametrize("model_type", TYPES)
def test_left_out_or_null_size_is_transformers_own(model_type, key, heads_times):
    full = _default_dict(model_type, heads_times)
    fields = {f.name for f in dataclasses.fields(transformers.CONFIG_MAPPING[model_type])}
    if key not in fields or key not in full or _ours(full) is None or _built(model_type, full) is None:
        pytest.skip(f"{model_type}'s config has no {key} of its own, or this variant is not a valid model")
    for data in ({k: v for k, v in full.items() if k != key}, {**full, key: None}):
        cfg, ours = _built(model_type, data), _ours(data)
        if cfg is None:  # transformers refuses the file: so does kvplan
            assert ours is None, (model_type, key, "null accepted where transformers refuses it")
            continue
        built = getattr(cfg, key, None)
        if built is None and ours is None:  # null kept as None, which most modeling files cannot build from
            continue
        if built is None and key == "head_dim":  # the modeling's own `getattr(config, "head_dim", None) or ...`
            built = cfg.hidden_size // cfg.num_attention_heads
        if built is None:  # no K/V heads: transformers builds no model from it
            continue
        assert ours is not None, (model_type, key, data.get(key, "left out"))
        card, assumed = ours
        if card.mla:  # K/V heads and head width are nominal: the latent is cached
            continue
        assert any(a.startswith(f"{key}=") for a in assumed), (model_type, key, assumed)
        if model_type == "mamba2":  # the mixer's head width
            assert card.ssm.head_dim == built
        else:
            assert getattr(card, "num_kv_heads" if key == "num_key_value_heads" else key) == built, \
                (model_type, key, data.get(key, "left out"))


def test_every_family_with_a_class_default_is_compared():
    """The comparison above runs (is not skipped) for the families whose class holds a number of its own."""
    compared = {t for t in TYPES if "num_key_value_heads" in _default_dict(t) and _ours(_default_dict(t))}
    assert {"mistral", "mixtral", "gemma", "gemma2", "gemma3_text", "qwen3", "qwen3_moe", "starcoder2", "smollm3",
            "gpt_oss", "llama4_text", "glm", "glm4", "ernie4_5", "bamba", "jamba", "falcon_h1"} <= compared


@pytest.mark.parametrize(("model_type", "kv", "head_dim"), [
    ("mistral", 8, 128), ("gemma", 16, 256), ("gemma2", 4, 256), ("gemma3_text", 4, 256), ("llama", 32, 128),
    ("qwen3", 32, 128),
])
def test_cli_import_names_the_default_taken(tmp_path, model_type, kv, head_dim):
    """QA D4: Llama-3-8B's config.json under another model_type, num_key_value_heads and head_dim left out: the
    card holds transformers' own default (Mistral 8 K/V heads, Gemma-2/3 4 and head_dim 256; Llama: the query
    heads) and a '# assumed' line for each."""
    import json

    llama3 = dict(model_type=model_type, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                  num_attention_heads=32, vocab_size=128256, max_position_embeddings=8192, torch_dtype="bfloat16",
                  hidden_act="silu", rms_norm_eps=1e-5, tie_word_embeddings=False)
    src = tmp_path / "config.json"
    src.write_text(json.dumps(llama3))
    out = tmp_path / "card.yaml"
    res = CliRunner().invoke(app, ["cards", "import", str(src), "-o", str(out)])
    assert res.exit_code == 0, res.output
    card, _ = import_hf_config(str(src))
    assert (card.num_kv_heads, card.head_dim) == (kv, head_dim)
    text = out.read_text()
    assert "# assumed num_key_value_heads=" in text and "# assumed head_dim=" in text
    built = transformers.CONFIG_MAPPING[model_type](**{k: v for k, v in llama3.items() if k not in _SKIP})
    assert (built.num_key_value_heads, built.head_dim) == (kv, head_dim)


def test_estimate_hf_config_uses_the_class_default(tmp_path):
    """`estimate --hf-config`: a Mistral config without num_key_value_heads is GQA with 8 K/V heads (64 KiB of K/V
    per token at bf16 over 32 layers x 8 heads x 128), not MHA."""
    import json

    data = dict(model_type="mistral", hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                num_attention_heads=32, vocab_size=32000, torch_dtype="bfloat16")
    src = tmp_path / "nokv.json"
    src.write_text(json.dumps(data))
    res = CliRunner().invoke(app, ["estimate", "--hf-config", str(src), "--seq-len", "1024", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["kv_cache"]["bytes_per_token"] == 32 * 2 * 8 * 128 * 2


def test_explicit_null_sliding_window_is_no_window():
    """transformers keeps an explicit null sliding_window as None (the sliding layers see everything); the card has
    no window and says no default was taken."""
    full = _default_dict("gemma3_text")
    card, assumed = import_hf_config({**full, "sliding_window": None, "layer_types": None})
    assert card.sliding_window is None and not any(a.startswith("sliding_window") for a in assumed)
    card, assumed = import_hf_config({**full, "sliding_window": None})
    assert card.sliding_window is None
    left_out = {k: v for k, v in full.items() if k not in ("sliding_window", "layer_types")}
    card, assumed = import_hf_config(left_out)
    assert card.sliding_window == 4096 and "sliding_window=4096 (transformers default for gemma3_text)" in assumed
    assert card_yaml(card, assumed).count("# assumed sliding_window=") == 1


def test_gpt_oss_rope_default_is_yarn():
    """GptOssConfig fills rope_parameters with YaRN x32 over 4,096 positions when a file gives none."""
    full = _default_dict("gpt_oss")
    cfg = transformers.GptOssConfig()
    for data in ({k: v for k, v in full.items() if k != "rope_parameters"}, {**full, "rope_parameters": None}):
        card, assumed = import_hf_config(data)
        assert card.rope_scaling is not None and card.rope_scaling.rope_type == cfg.rope_parameters["rope_type"]
        assert card.rope_scaling.factor == cfg.rope_parameters["factor"]
        assert any(a.startswith("rope_parameters=") for a in assumed)


@pytest.mark.parametrize("scaling", [{"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 8192,
                                      "low_freq_factor": 1.0, "high_freq_factor": 4.0},
                                     {"type": "mrope", "mrope_section": [16, 24, 24]}])
def test_rope_scaling_left_out_is_said(tmp_path, scaling):
    """QA D18: a llama3 or M-RoPE scaling moves no memory and is left out of the card, and the card says so; the
    header names the file once."""
    import json

    data = {**_default_dict("llama"), "rope_scaling": scaling}
    src = tmp_path / "rope.json"
    src.write_text(json.dumps(data))
    out = tmp_path / "card.yaml"
    res = CliRunner().invoke(app, ["cards", "import", str(src), "-o", str(out)])
    assert res.exit_code == 0, res.output
    head = [line for line in out.read_text().splitlines() if line.startswith("#")]
    kind = scaling.get("rope_type", scaling.get("type"))
    assert any(line.startswith("# not carried: rope_scaling") and kind in line for line in head), head
    assert head[0] == f"# imported by kvplan from {src}"


def _q_rows(model) -> tuple[str, int]:
    name, p = next((n, p) for n, p in model.named_parameters() if n.endswith(("q_proj.weight", "qkv_proj.weight")))
    return name, p.shape[0]


@pytest.mark.parametrize("model_type", sorted(FLOOR_HEAD_DIM | {"cohere2"}))
def test_head_dim_left_out_is_floored_as_transformers_builds_it(model_type):
    """QA D12: heads that do not divide hidden_size, no head_dim: transformers' attention builds q_proj with
    heads x (hidden_size // heads) rows (modeling_glm4_moe.py:181 and the like); the card floors the same, and says
    so in a '# assumed' line."""
    import torch

    data = {k: v for k, v in _default_dict(model_type).items() if k != "head_dim"}
    hidden, heads = data["hidden_size"], data["num_attention_heads"] * 3
    while hidden % heads == 0:
        heads += 1
    data["num_attention_heads"] = heads
    if isinstance(data.get("num_key_value_heads"), int) and heads % data["num_key_value_heads"]:
        data["num_key_value_heads"] = heads
    cfg = _built(model_type, data)
    with warnings.catch_warnings(), torch.device("meta"):
        warnings.simplefilter("ignore")
        model = transformers.AutoModelForCausalLM.from_config(cfg)
    name, rows = _q_rows(model)
    card, assumed = import_hf_config(data)
    per_head = rows // (3 if name.endswith("qkv_proj.weight") else 1) // heads  # phi3: fused q/k/v of MHA
    assert card.head_dim == per_head == hidden // heads != hidden / heads
    assert any(a.startswith(f"head_dim={hidden // heads} (hidden_size // num_attention_heads)") for a in assumed)
    assert f"# assumed head_dim={hidden // heads} " in card_yaml(card, assumed)


@pytest.mark.parametrize("model_type", ["llama", "gpt_neox", "stablelm", "persimmon"])
def test_head_dim_not_dividing_is_refused_where_transformers_refuses(model_type):
    """LlamaConfig / GPTNeoXConfig refuse the file (validate_architecture), StableLM's and Persimmon's attention
    ("hidden_size must be divisible by num_heads"): the card refuses it too."""
    import torch

    data = {k: v for k, v in _default_dict(model_type).items() if k != "head_dim"}
    data["num_attention_heads"] = data["num_attention_heads"] * 3 + 1
    data["num_key_value_heads"] = data["num_attention_heads"]
    cfg = _built(model_type, data)
    if cfg is not None:
        with warnings.catch_warnings(), torch.device("meta"), pytest.raises(ValueError, match="divisible"):
            warnings.simplefilter("ignore")
            transformers.AutoModelForCausalLM.from_config(cfg)
    assert _ours(data) is None


def test_glm4_moe_default_config_counts_what_transformers_builds():
    """QA D12: Glm4MoeConfig() (hidden 4096, 96 heads, no head_dim) builds head_dim 42 and 103,481,200,640
    parameters; the card holds the same."""
    import torch

    from kvplan import count_params

    cfg = transformers.Glm4MoeConfig()
    with warnings.catch_warnings(), torch.device("meta"):
        warnings.simplefilter("ignore")
        model = transformers.AutoModelForCausalLM.from_config(cfg)
    card, _ = import_hf_config(_default_dict("glm4_moe"))
    assert card.head_dim == 42 == cfg.hidden_size // cfg.num_attention_heads
    assert count_params(card).total == sum(p.numel() for p in model.parameters()) == 103_481_200_640
