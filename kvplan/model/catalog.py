"""Finding and loading model cards: bundled ones by name, a user's own by path. Errors are one line each."""

from __future__ import annotations

import difflib
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from kvplan.errors import KvplanError, clip
from kvplan.files import is_dir, is_file, load_yaml, shown
from kvplan.model import cardcache
from kvplan.model.card import ModelCard
from kvplan.model.validation import card_from_dict  # noqa: F401 - re-exported: catalog.card_from_dict

if TYPE_CHECKING:
    from kvplan.model.hf.checkpoint import Checkpoint


def cards_dir() -> Path:
    """The bundled cards: ``kvplan/model_cards`` in a wheel, top-level ``model_cards/`` in a source checkout."""
    package = Path(__file__).resolve().parents[1]  # the folder importlib.resources.files("kvplan") names, cheaper
    packaged = package / "model_cards"
    return packaged if packaged.is_dir() else package.parent / "model_cards"


def bundled_names() -> list[str]:
    return sorted(_bundled_set())


@lru_cache(maxsize=1)
def _bundled_set() -> frozenset[str]:
    return frozenset(p.stem for p in cards_dir().glob("*.yaml"))


@lru_cache(maxsize=None)
def _load_bundled(name: str) -> ModelCard:
    """A bundled card, read once per process (cards are frozen, so sharing one is safe): from the cache of validated
    cards while it matches the card's YAML (kvplan.model.cardcache), else read and validated."""
    directory = cards_dir()
    return cardcache.lookup(directory, name) or load_card_file(directory / f"{name}.yaml")


def card_cache_text() -> str:
    """The cache of validated bundled cards, made afresh from their YAML."""
    directory = cards_dir()
    paths = {name: directory / f"{name}.yaml" for name in bundled_names()}
    return cardcache.file_text({name: (path.read_bytes(), load_card_file(path)) for name, path in paths.items()})


_CHECKPOINTS: dict[str, Checkpoint] = {}  # card.source -> the checkpoint read with it (Hub models of this process)


def load_card(name_or_path: str | Path) -> ModelCard:
    """A bundled card by name (``llama-2-7b``), any card by path (``./my-card.yaml``), a folder holding a
    config.json, or a Hugging Face Hub id (``Qwen/Qwen2.5-7B``, ``ORG/NAME@REVISION``), in that order."""
    if not isinstance(name_or_path, (str, Path)):
        raise KvplanError(f"model: expected a card name or path, got {type(name_or_path).__name__}")
    text = str(name_or_path)
    path = Path(text)
    if path.suffix == ".gguf":
        from kvplan.model.gguf_card import card_from_gguf  # the gguf package: only when a GGUF is given

        return card_from_gguf(text)
    if path.suffix in (".yaml", ".yml") or is_file(path):
        return load_card_file(path)
    if text in _bundled_set():
        return _load_bundled(text)
    if is_dir(path):  # a local snapshot wins over the Hub id it may look like
        from kvplan.model.hf.config import card_from_hf_config  # 40 model families: read only when asked for

        return card_from_hf_config(path)
    if isinstance(name_or_path, str) and "/" in text and _hub_id(text):
        return load_hub_card(text)
    close = difflib.get_close_matches(text[:200], bundled_names(), n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise KvplanError(f"unknown model {clip(text)}{hint} (`kvplan cards list` shows all; "
                      "or pass a path to a .yaml card, or a Hugging Face Hub id ORG/NAME)")


def load_hub_card(hub_id: str) -> ModelCard:
    """The card of a Hub model (kvplan.model.hf.hub); its checkpoint is kept for ``checkpoint_of``."""
    from kvplan.model.hf.hub import load_hub_model  # huggingface_hub and the readers: only for a Hub id

    hub = load_hub_model(hub_id)
    if hub.checkpoint is not None:
        _CHECKPOINTS[hub.card.source] = hub.checkpoint
    return hub.card


def _hub_id(text: str) -> bool:
    from kvplan.model.hf.checkpoint import parse_hub_id

    return parse_hub_id(text) is not None


def checkpoint_of(card: ModelCard) -> Checkpoint | None:
    """The safetensors checkpoint read with ``card`` from the Hub in this process, if any."""
    return _CHECKPOINTS.get(card.source)


def validate_cards(paths: list[str]) -> list[tuple[str, list[str]]]:
    """(path, []) for each valid card, (path, every problem, one line each) for each invalid one."""
    out: list[tuple[str, list[str]]] = []
    for path in paths:
        try:
            load_card(path)
            out.append((path, []))
        except KvplanError as exc:
            out.append((path, list(getattr(exc, "problems", None) or [str(exc)])))
    return out


def load_card_file(path: str | Path) -> ModelCard:
    """A card from a YAML file: read and parsed within kvplan.files' limits, then validated."""
    data = load_yaml(path, what="card")
    if not isinstance(data, dict):
        raise KvplanError(f"{shown(path)}: a card is a YAML mapping of fields (name, num_layers, ...), "
                          f"got {type(data).__name__}")
    return card_from_dict(data, origin=shown(path))


if __name__ == "__main__":  # python -m kvplan.model.catalog: rewrite the cache after changing a bundled card
    import argparse

    from kvplan.files import write_atomic

    argparse.ArgumentParser(prog="python -m kvplan.model.catalog", description=(
        f"Rewrite {cards_dir() / cardcache.FILE} (the validated bundled cards) after changing a card in "
        "model_cards/ or the card schema.")).parse_args()
    write_atomic(cards_dir() / cardcache.FILE, card_cache_text())
    print(f"wrote {cards_dir() / cardcache.FILE}")
