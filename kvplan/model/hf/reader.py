"""Reading one config.json the way transformers does: its values, else the config class's defaults (recorded)."""

from __future__ import annotations

from typing import Any

from kvplan.errors import KvplanError
from kvplan.model.hf.defaults import DEFAULTS

_ACTIVATIONS = {"silu": "silu", "swish": "silu", "gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_fast": "gelu_tanh",
                "gelu_pytorch_tanh": "gelu_tanh", "gelu_tanh": "gelu_tanh", "relu": "relu"}

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


def activation(cfg: Config, key: str, *fallback_keys: str) -> str:
    act = str(cfg.get(key, *fallback_keys))
    if act not in _ACTIVATIONS:
        raise KvplanError(f"{cfg.origin}: {key} {act!r} unsupported; allowed: {', '.join(_ACTIVATIONS)}")
    return _ACTIVATIONS[act]
