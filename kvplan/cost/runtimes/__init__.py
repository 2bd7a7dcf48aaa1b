"""The runtimes kvplan models, one module each: its cache rules and its serving rules (``base.Runtime``).

``get_engine(name)`` returns the one instance per runtime. A new runtime is one module (a ``Runtime`` subclass) and
one line in ``RUNTIMES`` below; planning, the report and the CLI ask the object, never its name.
"""

from __future__ import annotations

from kvplan.cost.runtimes.base import Runtime
from kvplan.cost.runtimes.ideal import Ideal
from kvplan.cost.runtimes.sglang import SGLang
from kvplan.cost.runtimes.transformers import HFDynamic, HFStatic
from kvplan.cost.runtimes.vllm import VLLM
from kvplan.errors import KvplanError

RUNTIMES: dict[str, Runtime] = {r.name: r for r in (Ideal(), HFDynamic(), HFStatic(), VLLM(), SGLang())}
ENGINES = RUNTIMES  # the name earlier releases used


def register(runtime: Runtime) -> Runtime:
    """Add a runtime (a user's own engine model) under its name; returns it."""
    if not isinstance(runtime, Runtime):
        raise TypeError(f"{type(runtime).__name__}: a runtime is a kvplan.cost.runtimes.base.Runtime")
    RUNTIMES[runtime.name] = runtime
    return runtime


def get_engine(name: str | Runtime) -> Runtime:
    """The runtime object for ``name``, or for ``name==version`` (``vllm==0.11``: the rules of the modelled range
    that covers that release; no version: the newest modelled); KvplanError lists the known ones."""
    if isinstance(name, Runtime):
        return name
    base, _, version = str(name).partition("==")
    if base not in RUNTIMES:
        known = ", ".join(f"{n} (=={'|=='.join(r.versions)})" if r.versions else n for n, r in RUNTIMES.items())
        raise KvplanError(f"--engine: unknown engine {str(name)[:60]!r}; allowed: {known}")
    return RUNTIMES[base].at_version(version) if "==" in str(name) else RUNTIMES[base]


get_runtime = get_engine
