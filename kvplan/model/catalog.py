"""Finding and loading model cards: bundled ones by name, a user's own by path. Errors are one line each."""

from __future__ import annotations

import difflib
from functools import lru_cache
from pathlib import Path

from pydantic import ValidationError

from kvplan.errors import KvplanError, clip
from kvplan.files import is_file, load_yaml, shown, write_atomic
from kvplan.model import cardcache
from kvplan.model.card import ModelCard
from kvplan.model.validation import describe_validation_error


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


def load_card(name_or_path: str | Path) -> ModelCard:
    """A bundled card by name (``llama-2-7b``) or any card by path (``./my-card.yaml``)."""
    if not isinstance(name_or_path, (str, Path)):
        raise KvplanError(f"model: expected a card name or path, got {type(name_or_path).__name__}")
    text = str(name_or_path)
    path = Path(text)
    if path.suffix in (".yaml", ".yml") or is_file(path):
        return load_card_file(path)
    if text in _bundled_set():
        return _load_bundled(text)
    close = difflib.get_close_matches(text[:200], bundled_names(), n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise KvplanError(f"unknown model {clip(text)}{hint} (`kvplan cards list` shows all; "
                      "or pass a path to a .yaml card)")


def validate_cards(paths: list[str]) -> list[tuple[str, str | None]]:
    """(path, None) for each valid card, (path, one-line problem) for each invalid one."""
    out: list[tuple[str, str | None]] = []
    for path in paths:
        try:
            load_card(path)
            out.append((path, None))
        except KvplanError as exc:
            out.append((path, str(exc)))
    return out


def load_card_file(path: str | Path) -> ModelCard:
    """A card from a YAML file: read and parsed within kvplan.files' limits, then validated."""
    data = load_yaml(path, what="card")
    if not isinstance(data, dict):
        raise KvplanError(f"{shown(path)}: a card is a YAML mapping of fields (name, num_layers, ...), "
                          f"got {type(data).__name__}")
    return card_from_dict(data, origin=shown(path))


def card_from_dict(data: dict, *, origin: str = "card") -> ModelCard:
    """Validate a plain dict as a ModelCard; schema errors become a one-line KvplanError naming the field."""
    try:
        return ModelCard.model_validate(data)
    except ValidationError as exc:
        raise KvplanError(f"{origin}: {describe_validation_error(exc, ModelCard)}") from None


if __name__ == "__main__":  # python -m kvplan.model.catalog: rewrite the cache after changing a bundled card
    write_atomic(cards_dir() / cardcache.FILE, card_cache_text())
    print(f"wrote {cards_dir() / cardcache.FILE}")
