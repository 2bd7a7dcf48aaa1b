"""The runtimes kvplan models, one module each: its cache rules and its serving rules (``base.Runtime``).

``get_engine(name)`` returns the one instance per runtime. A new runtime is one module (a ``Runtime`` subclass) and
one line in ``RUNTIMES`` below; planning, the report and the CLI ask the object, never its name.
"""

from __future__ import annotations

from kvplan.cost.runtimes.base import Runtime
from kvplan.cost.runtimes.ideal import Ideal
from kvplan.cost.runtimes.llamacpp import LlamaCpp
from kvplan.cost.runtimes.ollama import Ollama
from kvplan.cost.runtimes.sglang import SGLang
from kvplan.cost.runtimes.transformers import HFDynamic, HFStatic
from kvplan.cost.runtimes.vllm import VLLM
from kvplan.errors import KvplanError

RUNTIMES: dict[str, Runtime] = {r.name: r for r in (Ideal(), HFDynamic(), HFStatic(), VLLM(), SGLang(), LlamaCpp(),
                                              Ollama())}
ENGINES = RUNTIMES  # the name earlier releases used


def register(runtime: Runtime) -> Runtime:
    """Add a runtime (a user's own engine model) under its name; returns it."""
    if not isinstance(runtime, Runtime):
        raise TypeError(f"{type(runtime).__name__}: a runtime is a kvplan.cost.runtimes.base.Runtime")
    RUNTIMES[runtime.name] = runtime
    return runtime


def get_engine(name: str | Runtime) -> Runtime:
    """The runtime object for ``name``; KvplanError lists the known ones."""
    if isinstance(name, Runtime):
        return name
    if name not in RUNTIMES:
        raise KvplanError(f"--engine: unknown engine {str(name)[:60]!r}; allowed: {', '.join(RUNTIMES)}")
    return RUNTIMES[name]


get_runtime = get_engine
