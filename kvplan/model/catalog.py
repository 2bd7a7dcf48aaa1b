"""Finding and loading model cards: bundled ones by name, a user's own by path. Errors are one line each."""

from __future__ import annotations

import difflib
from importlib import resources
from pathlib import Path

from pydantic import ValidationError

from kvplan.errors import KvplanError, clip
from kvplan.files import is_file, load_yaml, shown
from kvplan.model.card import ModelCard
from kvplan.model.validation import describe_validation_error


def cards_dir() -> Path:
    """The bundled cards: ``kvplan/model_cards`` in a wheel, top-level ``model_cards/`` in a source checkout."""
    packaged = Path(str(resources.files("kvplan"))) / "model_cards"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parents[2] / "model_cards"


def bundled_names() -> list[str]:
    return sorted(p.stem for p in cards_dir().glob("*.yaml"))


def load_card(name_or_path: str | Path) -> ModelCard:
    """A bundled card by name (``llama-2-7b``) or any card by path (``./my-card.yaml``)."""
    if not isinstance(name_or_path, (str, Path)):
        raise KvplanError(f"model: expected a card name or path, got {type(name_or_path).__name__}")
    text = str(name_or_path)
    path = Path(text)
    if path.suffix in (".yaml", ".yml") or is_file(path):
        return load_card_file(path)
    if text in bundled_names():
        return load_card_file(cards_dir() / f"{text}.yaml")
    close = difflib.get_close_matches(text[:200], bundled_names(), n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise KvplanError(f"unknown model {clip(text)}{hint} (`kvplan cards list` shows all; "
                      "or pass a path to a .yaml card)")


def resolve_card(model: str | None, hf_config: str | None) -> ModelCard:
    """The card a command runs on: ``--model NAME|PATH`` or ``--hf-config PATH`` (exactly one of them)."""
    if (model is None) == (hf_config is None):
        raise KvplanError("give exactly one of --model NAME|PATH and --hf-config PATH")
    if hf_config is not None:
        from kvplan.model.hf.config import card_from_hf_config

        return card_from_hf_config(hf_config)
    return load_card(model)


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
