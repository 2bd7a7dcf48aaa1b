"""Importing a Hugging Face ``config.json`` into a ModelCard, reading it the way transformers reads it.

Where a key is missing, the value is the default of transformers' own config class for that ``model_type``
(``hf_defaults.DEFAULTS``, checked against transformers in the tests), and the card says which defaults it assumed.
A key with no default that the card needs is an error naming the key; an unknown ``model_type`` is an error
listing the supported ones. Nothing is guessed silently.
"""

from __future__ import annotations

import difflib
import json
import re
from pathlib import Path
from typing import Any

from kvplan.model.card import ModelCard
from kvplan.model.catalog import card_from_dict
from kvplan.errors import KvplanError
from kvplan.model.hf.defaults import DEFAULTS as _DEFAULTS
from kvplan.model.hf.defaults_2025 import DEFAULTS_2025

DEFAULTS = _DEFAULTS | DEFAULTS_2025

_ACTIVATIONS = {"silu": "silu", "swish": "silu", "gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_fast": "gelu_tanh",
                "gelu_pytorch_tanh": "gelu_tanh", "gelu_tanh": "gelu_tanh", "relu": "relu"}
_DTYPES = {"float32": "float32", "float16": "float16", "bfloat16": "bfloat16", "fp32": "float32",
           "fp16": "float16", "bf16": "bfloat16", "float": "float32", "half": "float16"}


class Config:
    """A config.json dict plus the model type's transformers defaults; records every default it falls back to."""

    def __init__(self, data: dict, model_type: str, origin: str):
        self.data, self.model_type, self.origin = data, model_type, origin
        self.assumed: list[str] = []

    def has(self, key: str) -> bool:
        return self.data.get(key) is not None

    def get(self, key: str, *fallback_keys: str) -> Any:
        """The first of ``key``/``fallback_keys`` present (legacy names), else the transformers default."""
        for k in (key, *fallback_keys):
            if self.data.get(k) is not None:
                return self.data[k]
        defaults = DEFAULTS.get(self.model_type, {})
        if key in defaults:
            self.assumed.append(f"{key}={defaults[key]!r} (transformers default for {self.model_type})")
            return defaults[key]
        raise KvplanError(f"{self.origin}: missing key {key!r}, which a {self.model_type} card needs "
                          "(and transformers has no default for)")

    def lookup(self, key: str) -> Any:
        """The file's value when the key is present (even null), else the transformers default, else None."""
        if key in self.data:
            return self.data[key]
        return self.get(key) if key in DEFAULTS.get(self.model_type, {}) else None


def load_hf_config(path: str | Path) -> tuple[dict, str]:
    """Read a config.json, or the config.json inside a folder (a hub snapshot)."""
    p = Path(path)
    if p.is_dir():
        p = p / "config.json"
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise KvplanError(f"{p}: no such file (give a config.json or a folder holding one)") from None
    except json.JSONDecodeError as exc:
        raise KvplanError(f"{p}: not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}") from None
    if not isinstance(data, dict):
        raise KvplanError(f"{p}: a config.json is a JSON object, got {type(data).__name__}")
    return data, str(p)


def card_from_hf_config(config: dict | str | Path, *, name: str | None = None) -> ModelCard:
    """A validated ModelCard from a config.json dict, file or snapshot folder."""
    return import_hf_config(config, name=name)[0]


def import_hf_config(config: dict | str | Path, *, name: str | None = None) -> tuple[ModelCard, list[str]]:
    """(card, defaults assumed) for a config.json dict, file or folder."""
    data, origin = (config, "config") if isinstance(config, dict) else load_hf_config(config)
    from kvplan.model.hf.families_2025 import ALL_READERS as READERS  # the per-model-type readers

    model_type = str(data.get("model_type", ""))
    if model_type == "gemma3" and isinstance(data.get("text_config"), dict):  # multimodal: the text decoder
        data = {**data["text_config"], "torch_dtype": data.get("torch_dtype") or data.get("dtype"),
                "_name_or_path": data.get("_name_or_path"), "model_type": "gemma3_text"}
        model_type = "gemma3_text"
    if model_type not in READERS:
        near = difflib.get_close_matches(model_type, READERS, n=3, cutoff=0.5)
        raise KvplanError(f"{origin}: unsupported model_type {model_type!r}; supported: {', '.join(sorted(READERS))}"
                          f"{'; nearest: ' + ', '.join(near) if near else ''}")
    cfg = Config(data, model_type, origin)
    fields = READERS[model_type](cfg)
    card_name = _card_name(name, data, origin)
    fields = {"name": card_name, "source": _source(data, origin), **fields, "dtype": _dtype(cfg)}
    return card_from_dict(_drop_derivable(fields), origin=origin), cfg.assumed


def _card_name(name: str | None, data: dict, origin: str) -> str:
    raw = name or str(data.get("_name_or_path") or "").rstrip("/").split("/")[-1]
    if not raw and origin != "config":
        raw = Path(origin).parent.name
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "-", raw).strip("-._").lower()
    return cleaned or "imported-model"


def _source(data: dict, origin: str) -> str:
    repo = data.get("_name_or_path")
    if repo and "/" in str(repo) and not Path(str(repo)).exists():
        return f"https://huggingface.co/{repo}/blob/main/config.json"
    return f"config.json imported from {origin}"


def _dtype(cfg: Config) -> str:
    raw = cfg.data.get("torch_dtype") or cfg.data.get("dtype")
    if raw is None:
        cfg.assumed.append("dtype=float32 (the config names none; transformers loads float32)")
        return "float32"
    key = str(raw).removeprefix("torch.")
    if key not in _DTYPES:
        raise KvplanError(f"{cfg.origin}: torch_dtype {raw!r} unsupported; allowed: float32, float16, bfloat16")
    return _DTYPES[key]


def activation(cfg: Config, key: str, *fallback_keys: str) -> str:
    act = str(cfg.get(key, *fallback_keys))
    if act not in _ACTIVATIONS:
        raise KvplanError(f"{cfg.origin}: {key} {act!r} unsupported; allowed: {', '.join(_ACTIVATIONS)}")
    return _ACTIVATIONS[act]


def _drop_derivable(fields: dict) -> dict:
    """Leave head_dim / num_kv_heads out where they equal the derived value, so the card says only what differs."""
    heads = fields["num_heads"]
    if fields.get("head_dim") == fields["hidden_size"] // heads and fields["hidden_size"] % heads == 0:
        fields.pop("head_dim")
    if fields.get("num_kv_heads") == heads:
        fields.pop("num_kv_heads")
    return {k: v for k, v in fields.items() if v is not None}


def card_yaml(card: ModelCard, assumed: list[str]) -> str:
    """The card as YAML, headed by comments naming the transformers defaults it assumed."""
    import yaml

    head = [f"# imported by kvplan from {card.source}"]
    head += [f"# assumed {a}" for a in assumed]
    body = yaml.safe_dump(card.model_dump(mode="json", exclude_defaults=True, exclude=set(card.derived_fields())),
                          sort_keys=False)
    return "\n".join(head) + "\n" + body
