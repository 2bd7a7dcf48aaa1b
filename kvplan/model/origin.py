"""Where a card came from: the Hugging Face repository and the commit its source names (a launch line loads them)."""

from __future__ import annotations

import re

from kvplan.model.card import ModelCard

_PINNED = re.compile(r"/(?P<repo>[\w.-]+/[\w.-]+)/blob/(?P<commit>[0-9a-f]{40})/config\.json$")
PLACEHOLDER = "<path-or-repo-of-this-config>"  # a config.json that names no Hub id: the user names the checkpoint


def hf_repo(card: ModelCard) -> str:
    """The Hugging Face repository named in the card's source, else the card name. A card read from the Hub names
    ``ENDPOINT/ORG/NAME/blob/COMMIT/config.json`` (kvplan.model.hf.hub), whatever HF_ENDPOINT is. A config.json
    read from a file that names no Hub id (kvplan.model.hf.config._source) gives ``PLACEHOLDER``: the card's name
    is no checkpoint an engine can load."""
    m = re.search(r"huggingface\.co/([\w.-]+/[\w.-]+)", card.source) or _PINNED.search(card.source)
    if m:
        return m.group(1)
    return PLACEHOLDER if card.source.startswith("config.json imported from") else card.name


def revision(card: ModelCard) -> str | None:
    """The commit a card was read at (a Hub model): the launch line pins it, so the engine loads the config kvplan
    sized."""
    m = _PINNED.search(card.source)
    return m["commit"] if m else None
