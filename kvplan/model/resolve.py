"""The card a command runs on: a bundled name, a card path, or a Hugging Face config.json."""

from __future__ import annotations

from kvplan.errors import KvplanError
from kvplan.model.card import ModelCard
from kvplan.model.catalog import load_card


def resolve_card(model: str | None, hf_config: str | None) -> ModelCard:
    """The card a command runs on: ``--model NAME|PATH`` or ``--hf-config PATH`` (exactly one of them)."""
    if (model is None) == (hf_config is None):
        raise KvplanError("give exactly one of --model NAME|PATH and --hf-config PATH")
    if hf_config is not None:
        from kvplan.model.hf.config import card_from_hf_config  # 40 model families: read only when asked for

        return card_from_hf_config(hf_config)
    return load_card(model)
