"""Importing a Hugging Face ``config.json`` into a ModelCard, reading it the way transformers reads it.

Where a key is missing, the value is the default of transformers' own config class for that ``model_type`` (the
``DEFAULTS`` beside its reader in ``model/hf/families/``, checked against transformers in the tests), and the card
says which defaults it assumed. A key with no default that the card needs is an error naming the key; an unknown
``model_type`` is an error listing the supported ones. Nothing is guessed silently.
"""

from __future__ import annotations

import copy
import difflib
import os
import re
from pathlib import Path

from kvplan.errors import KvplanError, clip, clip_text
from kvplan.files import MAX_DEPTH, is_dir, load_json, nesting_depth, shown
from kvplan.model.card import ModelCard
from kvplan.model.validation import card_from_dict
from kvplan.model.hf.families import DEFAULTS, READERS
from kvplan.model.hf.quant import read_quantization
from kvplan.model.hf.reader import NOT_CARRIED, Config
from kvplan.model.hf.rope import partial_rotary, rope_scaling
from kvplan.model.hf.vision import MULTIMODAL, text_part, vision_fields

_TEXT_DECODERS = {"gemma3": "gemma3_text", "qwen3_5": "qwen3_5_text", "qwen3_5_moe": "qwen3_5_moe_text",
                  "llama4": "llama4_text"}
SUPPORTED = sorted(set(READERS) | set(MULTIMODAL))  # every model_type read: text decoders and multimodal files
_DTYPES = {"float32": "float32", "float16": "float16", "bfloat16": "bfloat16", "fp32": "float32",
           "fp16": "float16", "bf16": "bfloat16", "float": "float32", "half": "float16"}


def load_hf_config(path: str | Path) -> tuple[dict, str]:
    """Read a config.json, or the config.json inside a folder (a hub snapshot)."""
    if not isinstance(path, (str, os.PathLike)):
        raise KvplanError(f"config: expected a dict, or the path of a config.json, got {type(path).__name__}")
    p = Path(path)
    if is_dir(p):
        p = p / "config.json"
    data = load_json(p, what="config.json")
    if not isinstance(data, dict):
        raise KvplanError(f"{shown(p)}: a config.json is a JSON object, got {type(data).__name__}")
    return data, shown(p)


def _own_copy(config: dict) -> dict:
    """A deep copy, so the readers never change the caller's dict; too deep or cyclic input is refused."""
    if nesting_depth(config) > MAX_DEPTH:
        raise KvplanError(f"config: nested deeper than {MAX_DEPTH} levels (or cyclic); allowed: at most {MAX_DEPTH}")
    return copy.deepcopy(config)


def card_from_hf_config(config: dict | str | Path, *, name: str | None = None) -> ModelCard:
    """A validated ModelCard from a config.json dict, file or snapshot folder."""
    return import_hf_config(config, name=name)[0]


def import_hf_config(config: dict | str | Path, *, name: str | None = None, origin: str | None = None,
                     source: str | None = None) -> tuple[ModelCard, list[str]]:
    """(card, defaults assumed) for a config.json dict, file or folder. ``origin`` names the config in messages
    (default: its path, or "config" for a dict) and ``source`` is the card's source (default: from _name_or_path)."""
    data, where = (_own_copy(config), "config") if isinstance(config, dict) else load_hf_config(config)
    origin = origin or where

    arch = data.get("architectures")
    hf_architecture = arch[0] if isinstance(arch, list) and arch and isinstance(arch[0], str) else None
    model_type = data.get("model_type", "")
    if not isinstance(model_type, str):
        raise KvplanError(f"{origin}: model_type: {clip(model_type)} is not a string; "
                          f"supported: {', '.join(SUPPORTED)}")
    data, model_type, whole, text_assumed = text_part(data, model_type, origin)  # multimodal (model.hf.vision): the decoder, then the tower
    if whole is None and model_type in _TEXT_DECODERS and isinstance(data.get("text_config"), dict):
        model_type = _TEXT_DECODERS[model_type]
        data = {**data["text_config"], "torch_dtype": data.get("torch_dtype") or data.get("dtype"),
                "_name_or_path": data.get("_name_or_path"), "model_type": model_type,
                "quantization_config": data.get("quantization_config")}
    if model_type in MULTIMODAL and model_type not in READERS:
        raise KvplanError(f"{origin}: model_type {model_type} is read from its text_config ({MULTIMODAL[model_type][0]}) "
                          "and vision_config; this file has no text_config object")
    if model_type not in READERS:
        near = difflib.get_close_matches(model_type[:100], SUPPORTED, n=3, cutoff=0.5)
        raise KvplanError(f"{origin}: unsupported model_type {clip(model_type)}; supported: "
                          f"{', '.join(SUPPORTED)}{'; nearest: ' + ', '.join(near) if near else ''}")
    cfg = Config(data, model_type, origin, DEFAULTS.get(model_type))
    cfg.assumed += text_assumed
    fields = READERS[model_type](cfg)
    if fields.get("position") == "rope":  # what the engines size their rotary caches by (model.hf.rope)
        fields.update(rope_scaling(cfg))
        fields.update(partial_rotary(cfg))
    if name is not None and not isinstance(name, str):
        raise KvplanError(f"name: expected a string, got {type(name).__name__}")
    card_name = _card_name(name, _name_or_path(cfg), origin)
    fields = {"name": card_name, "source": source or _source(data, origin), "hf_architecture": hf_architecture,
              **fields, "dtype": _dtype(cfg),
              "quantization": read_quantization(data, origin)}
    if whole is not None:
        fields["vision"] = vision_fields(whole, fields["hidden_size"], origin, cfg.assumed)
    return card_from_dict(_drop_derivable(fields), origin=origin), cfg.assumed


def _name_or_path(cfg: Config) -> str:
    value = cfg.data.get("_name_or_path")
    if value is not None and not isinstance(value, str):
        raise KvplanError(f"{cfg.origin}: _name_or_path: {clip(value)} is not a string; allowed: a string")
    return value or ""


def _card_name(name: str | None, repo: str, origin: str) -> str:
    """A valid card name (at most 100 characters) from --name, the repo id's last part, or the folder's name (a file
    other than config.json: its own name)."""
    if name is not None and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}", name):  # the card's name pattern
        raise KvplanError(f"--name: {clip(name)} is not a card name; allowed: 1-100 letters, digits and . _ -, "
                          "starting with a letter or digit (e.g. my-model)")
    raw = name or repo.rstrip("/").split("/")[-1]
    if not raw and origin != "config":  # <folder>/config.json names the folder; any other file names itself
        path = Path(origin)
        raw = path.parent.name if path.name == "config.json" else path.stem
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "-", raw[:1000]).strip("-._").lower()[:100].rstrip("-._")
    return cleaned or "imported-model"


_LOCAL = "config.json imported from "  # the source of a card read from a local file
_HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*")


def _source(data: dict, origin: str) -> str:
    repo = data.get("_name_or_path")
    # a hub id is owner/name; a local path ("/raid/pablo/codestral-hf-good/", "./", a folder here) is not
    if (isinstance(repo, str) and _HUB_ID.fullmatch(repo) and len(repo) <= 200 and not os.path.exists(repo)):
        return f"https://huggingface.co/{repo}/blob/main/config.json"
    return f"{_LOCAL}{clip_text(origin)}"


def _dtype(cfg: Config) -> str:
    raw = cfg.data.get("torch_dtype") or cfg.data.get("dtype")
    if raw is None:
        cfg.assumed.append("dtype=float32 (the config names none; transformers loads float32)")
        return "float32"
    key = raw.removeprefix("torch.") if isinstance(raw, str) else None
    if key not in _DTYPES:
        raise KvplanError(f"{cfg.origin}: torch_dtype {clip(raw)} unsupported; allowed: float32, float16, bfloat16")
    return _DTYPES[key]


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

    source = card.source.removeprefix(_LOCAL)  # a local file's path, once
    head = [f"# imported by kvplan from {source}"]
    head += [f"# {a}" if a.startswith(NOT_CARRIED) else f"# assumed {a}" for a in assumed]
    body = yaml.safe_dump(card.model_dump(mode="json", exclude_defaults=True, exclude=set(card.derived_fields())),
                          sort_keys=False)
    return "\n".join(head) + "\n" + body
