"""Bundled cards without YAML or validation at run time (a cold ``kvplan estimate`` spends ~15 ms less).

``model_cards/validated.json`` holds each bundled card as ``ModelCard`` validated it: every field's value (derived
ones filled in), which fields its YAML set, nested blocks alike. A card is built from it with ``model_construct``
only while the SHA-256 of its YAML, and of the source of the modules that validate cards, are the ones it was
made from; otherwise the YAML is read and validated as before, so a stale file costs time, never a wrong card.
The key is kvplan's own sources, not the pydantic version: a card is what kvplan's schema makes of its YAML, so a
pydantic release (users install with a range) neither invalidates the file nor changes what it holds; the test
suite proves every cached card equal to its validated YAML under the pydantic installed.
``python -m kvplan.model.catalog`` rewrites the file; ``tests/test_cold_start.py`` fails while it is stale.
"""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from kvplan.model.card import MLA, ModelCard, MoE, PublishedParams
from kvplan.model.quant import Quantization
from kvplan.model.rope import RopeScaling
from kvplan.model.shared import SharedBlocks
from kvplan.model.ssm import SSM
from kvplan.model.vision import VisionTower

FILE = "validated.json"
MODELS = {cls.__name__: cls for cls in (ModelCard, MLA, MoE, SSM, Quantization, PublishedParams, SharedBlocks,
                                                 VisionTower, RopeScaling)}


def sha256(data: bytes) -> str:
    """Of text as bytes, line ends as in a checkout on any system."""
    return hashlib.sha256(data.replace(b"\r\n", b"\n")).hexdigest()


@lru_cache(maxsize=1)
def schema_key() -> str:
    """What a cached card depends on besides its YAML: the source of every module of kvplan.model (the card models
    and whatever their validators call: derivations, dtype names, layouts) and kvplan/files.py (how YAML is read)."""
    here = Path(__file__).parent
    sources = [*sorted(here.glob("*.py")), here.parent / "files.py"]
    return sha256(b"".join(p.name.encode() + p.read_bytes() for p in sources))


def encode(value: Any) -> Any:
    """A validated card (or a value of one of its fields) as JSON: models and tuples tagged, the rest as is."""
    if isinstance(value, BaseModel):
        cls = type(value)
        if MODELS.get(cls.__name__) is not cls:
            raise TypeError(f"{cls.__qualname__}: a model kvplan.model.cardcache.MODELS does not list")
        fields = {name: encode(getattr(value, name)) for name in cls.model_fields}
        return {"$model": cls.__name__, "$set": sorted(value.model_fields_set), **fields}
    if isinstance(value, tuple):
        return {"$tuple": [encode(v) for v in value]}
    if isinstance(value, list):
        return [encode(v) for v in value]
    if value is None or isinstance(value, (str, int, float)):
        return value
    raise TypeError(f"{type(value).__name__}: a card field type kvplan.model.cardcache does not encode")


def decode(value: Any) -> Any:
    """The inverse of ``encode``: models built with ``model_construct`` (no validation), with their fields set."""
    if isinstance(value, list):
        return [decode(v) for v in value]
    if not isinstance(value, dict):
        return value
    if "$tuple" in value:
        return tuple(decode(v) for v in value["$tuple"])
    fields = {name: decode(v) for name, v in value.items() if not name.startswith("$")}
    return MODELS[value["$model"]].model_construct(set(value["$set"]), **fields)


def file_text(cards: dict[str, tuple[bytes, ModelCard]]) -> str:
    """The cache file for ``cards`` (name -> the bytes of its YAML, the card validated from them): one line a card."""
    lines = [f"{json.dumps(name)}: " + json.dumps({"yaml_sha256": sha256(text), "card": encode(card)}, sort_keys=True)
             for name, (text, card) in sorted(cards.items())]
    return f'{{"schema": {json.dumps(schema_key())}, "cards": {{\n' + ",\n".join(lines) + "\n}}\n"


@lru_cache(maxsize=4)
def _entries(directory: Path) -> dict[str, Any]:
    try:
        data, key = json.loads((directory / FILE).read_bytes()), schema_key()
    except (OSError, TypeError, ValueError):  # no cache, an unreadable one, or modules without source files
        return {}
    if not isinstance(data, dict) or data.get("schema") != key:
        return {}
    return data.get("cards", {})


def lookup(directory: Path, name: str) -> ModelCard | None:
    """The bundled card ``name`` of ``directory`` from the cache; None when it has none that matches its YAML."""
    entry = _entries(directory).get(name)
    if entry is None:
        return None
    try:
        text = (directory / f"{name}.yaml").read_bytes()
    except OSError:
        return None
    return decode(entry["card"]) if sha256(text) == entry["yaml_sha256"] else None
