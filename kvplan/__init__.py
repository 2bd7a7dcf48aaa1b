"""kvplan: exact KV-cache, weight and memory estimates for transformer LLMs.

    >>> import kvplan
    >>> kvplan.estimate("llama-2-70b", batch=16, seq_len=4096).kv_cache.bytes_per_token
    327680

Public API: ``estimate`` (returns a typed ``Estimate``), ``plan`` (serving capacity on a GPU layout, a typed
``PlanResult``), ``search`` (which GPUs and how many), ``sweep`` (estimate over a grid: flat dict rows),
``load_card`` (bundled name or path), ``ModelCard``,
``count_params``, ``card_from_hf_config``. Attributes load lazily so ``import kvplan`` stays cheap.
"""

from __future__ import annotations

__version__ = "0.1.0"

_EXPORTS = {
    "estimate": "kvplan.planning.estimate",
    "plan": "kvplan.planning.capacity",
    "PlanResult": "kvplan.planning.capacity.results",
    "search": "kvplan.planning.capacity.search",
    "Estimate": "kvplan.planning.estimate",
    "sweep": "kvplan.planning.sweep",
    "Sweep": "kvplan.planning.sweep",
    "load_card": "kvplan.model.catalog",
    "bundled_names": "kvplan.model.catalog",
    "ModelCard": "kvplan.model.card",
    "count_params": "kvplan.cost.params",
    "card_from_hf_config": "kvplan.model.hf.config",
    "KvplanError": "kvplan.errors",
}
__all__ = [*_EXPORTS, "__version__"]


def __getattr__(name: str):
    if name in _EXPORTS:
        import importlib

        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value  # the next access is a plain attribute (kvplan.estimate in a loop)
        return value
    raise AttributeError(f"module 'kvplan' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The lazily loaded API too, so that a notebook's completion offers estimate, plan, sweep, ..."""
    return sorted({*globals(), *__all__})
