"""Reading one config.json the way transformers does: typed values, else the config class's defaults (recorded)."""

from __future__ import annotations

import math
from typing import Any

from kvplan.errors import KvplanError, clip
from kvplan.model.card import MAX_LAYERS

NOT_CARRIED = "not carried: "  # an entry of Config.assumed that names a key the card leaves out, not a default


class OrNull(int):
    """A config-class default (``DEFAULTS``) whose field also takes null (``int | None = 32``, Qwen3's
    num_key_value_heads): a file's null there means the class's ``__post_init__`` fallback (num_attention_heads), and
    only a left-out key means this default. A plain int default is a field that refuses null (transformers' strict
    dataclass: Mistral's ``num_key_value_heads: int = 8``)."""

    __repr__ = int.__repr__


_ACTIVATIONS = {"silu": "silu", "swish": "silu", "gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_fast": "gelu_tanh",
                "gelu_pytorch_tanh": "gelu_tanh", "gelu_tanh": "gelu_tanh", "relu": "relu"}


class Config:
    """A config.json dict plus the model type's transformers defaults (its family module's ``DEFAULTS`` entry, given
    by the registry); records every default it falls back to."""

    def __init__(self, data: dict, model_type: str, origin: str, defaults: dict | None = None):
        self.data, self.model_type, self.origin = data, model_type, origin
        self.defaults: dict = defaults or {}
        self.assumed: list[str] = []

    def derive(self, data: dict) -> Config:
        """The same model type, defaults and record of assumed defaults over ``data`` (keys a reader rewrote the way
        the config class's ``__post_init__`` does)."""
        own = Config(data, self.model_type, self.origin, self.defaults)
        own.assumed = self.assumed  # one record of the defaults assumed
        return own

    def assume(self, note: str) -> None:
        """Record a default taken (once, however often a reader asks for the key)."""
        if note not in self.assumed:
            self.assumed.append(note)

    def has(self, key: str) -> bool:
        return self.data.get(key) is not None

    def get(self, key: str, *fallback_keys: str) -> Any:
        """The first of ``key``/``fallback_keys`` present (legacy names), else the transformers default."""
        return self.find(key, *fallback_keys)[1]

    def find(self, key: str, *fallback_keys: str) -> tuple[str, Any]:
        """(the key the value came from, the value): the file's first present key, else a transformers default."""
        for k in (key, *fallback_keys):
            if self.data.get(k) is not None:
                return k, self.data[k]
        defaults = self.defaults
        for k in (key, *fallback_keys):
            if k in defaults:
                self.assume(f"{k}={defaults[k]!r} (transformers default for {self.model_type})")
                return k, int(defaults[k]) if isinstance(defaults[k], OrNull) else defaults[k]
        raise KvplanError(f"{self.origin}: missing key {key!r}, which a {self.model_type} card needs "
                          "(and transformers has no default for)")

    def sized(self, key: str, fallback: int | None, rule: str) -> int | None:
        """A size the config class fills when it is left out: num_key_value_heads, head_dim. The file's integer;
        left out, the class default (``DEFAULTS``: Mistral's 8 KV heads, Gemma's head_dim 256) or, where the class
        has none, ``__post_init__``'s ``fallback`` (``rule`` says what it is; None: the card derives it); null, that
        fallback where the class takes null (``OrNull``), else refused as transformers refuses it. Recorded."""
        default = self.defaults.get(key)
        if self.has(key):
            return self.integer(key)
        if default is not None and key not in self.data:
            return self.integer(key)  # find() records the class default
        if default is not None and not isinstance(default, OrNull):
            raise KvplanError(f"{self.origin}: {key}: null, which transformers' {self.model_type} config refuses; "
                              f"allowed: an integer 1 or more (left out: the class default {default})")
        shown = rule if fallback is None else f"{fallback} ({rule})"
        self.assume(f"{key}={shown}: transformers' fallback for {self.model_type} "
                            f"({'null' if key in self.data else 'not given'})")
        return fallback

    def integer(self, key: str, *fallback_keys: str, minimum: int = 1, maximum: int | None = None) -> int:
        """An integer key, type-checked before any arithmetic: JSON true, 32.0 and "32" are refused."""
        return self.check_int(*self.find(key, *fallback_keys), minimum=minimum, maximum=maximum)

    def layers(self, key: str, *fallback_keys: str) -> int:
        return self.integer(key, *fallback_keys, maximum=MAX_LAYERS)

    def optional(self, key: str, *, minimum: int = 1) -> int | None:
        """An integer key that may be absent or null (then None: the reader derives it)."""
        value = self.data.get(key)
        return None if value is None else self.check_int(key, value, minimum=minimum)

    def check_int(self, key: str, value: Any, *, minimum: int = 1, maximum: int | None = None) -> int:
        if type(value) is int and value >= minimum and (maximum is None or value <= maximum):
            return value
        upper = f"..{maximum:,}" if maximum is not None else " or more"
        raise KvplanError(f"{self.origin}: {key}: {clip(value)} is out of range or not an integer; "
                          f"allowed: an integer {minimum}{upper}")

    def flag(self, key: str, *fallback_keys: str) -> bool:
        """A boolean key: JSON true or false only ("false" as a string would silently mean true)."""
        found, value = self.find(key, *fallback_keys)
        return self.check_flag(found, value)

    def check_flag(self, key: str, value: Any) -> bool:
        if isinstance(value, bool):
            return value
        raise KvplanError(f"{self.origin}: {key}: {clip(value)} is not a boolean; allowed: true or false")

    def text(self, key: str, *fallback_keys: str) -> str:
        found, value = self.find(key, *fallback_keys)
        if isinstance(value, str):
            return value
        raise KvplanError(f"{self.origin}: {found}: {clip(value)} is not a string; allowed: a string")

    def number(self, key: str) -> float | int:
        """A finite positive number (MPT's expansion_ratio)."""
        found, value = self.find(key)
        if type(value) in (int, float) and math.isfinite(value) and value > 0:
            return value
        raise KvplanError(f"{self.origin}: {found}: {clip(value)} is not a positive number; allowed: a number > 0")

    def lookup(self, key: str) -> Any:
        """The file's value when the key is present (even null), else the transformers default, else None."""
        if key in self.data:
            return self.data[key]
        return self.get(key) if key in self.defaults else None


def activation(cfg: Config, key: str, *fallback_keys: str) -> str:
    act = cfg.text(key, *fallback_keys)
    if act not in _ACTIVATIONS:
        raise KvplanError(f"{cfg.origin}: {key} {clip(act)} unsupported; allowed: {', '.join(_ACTIVATIONS)}")
    return _ACTIVATIONS[act]
