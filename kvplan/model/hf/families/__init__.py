"""The readers of Hugging Face config.json files, one module per architecture, and their one registry.

``dense`` (one FFN per layer), ``moe`` (routed experts, standard attention), ``mla`` (multi-head latent attention),
``state_space`` (mixer-only Mamba models), ``hybrid`` (attention + Mamba mixers, shared blocks), ``linear``
(attention + linear-attention mixers); ``core`` holds what they share. Each module lists its ``READERS`` (model_type
-> reader) and, next to them, its ``DEFAULTS`` (transformers' config-class defaults for the keys those readers may
fall back to). A new family is a reader and a defaults entry in the module of its architecture.
"""

from __future__ import annotations

from typing import Callable

from kvplan.model.hf.families import dense, hybrid, linear, mla, moe, state_space
from kvplan.model.hf.reader import Config

MODULES = (dense, moe, mla, state_space, hybrid, linear)
READERS: dict[str, Callable[[Config], dict]] = {t: r for m in MODULES for t, r in m.READERS.items()}
DEFAULTS: dict[str, dict] = {t: d for m in MODULES for t, d in m.DEFAULTS.items()}
