"""The runtimes kvplan models, one module each: its cache rules and its serving rules (``base.Runtime``).

``get_engine(name)`` returns the one instance per runtime. A new runtime is one module (a ``Runtime`` subclass) and
one line in ``_MODULES`` below; planning, the report and the CLI ask the object, never its name. A runtime's module
is imported the first time it is asked for, so a plain ``kvplan estimate`` loads only the runtime it runs.
"""

from __future__ import annotations

from kvplan.cost.runtimes.base import Runtime
from kvplan.errors import KvplanError


def _ideal() -> Runtime:
    from kvplan.cost.runtimes.ideal import Ideal

    return Ideal()


def _hf_dynamic() -> Runtime:
    from kvplan.cost.runtimes.transformers import HFDynamic

    return HFDynamic()


def _hf_static() -> Runtime:
    from kvplan.cost.runtimes.transformers import HFStatic

    return HFStatic()


def _vllm() -> Runtime:
    from kvplan.cost.runtimes.vllm import VLLM

    return VLLM()


def _sglang() -> Runtime:
    from kvplan.cost.runtimes.sglang import SGLang

    return SGLang()


def _trtllm() -> Runtime:
    from kvplan.cost.runtimes.trtllm import TensorRTLLM

    return TensorRTLLM()


def _tgi() -> Runtime:
    from kvplan.cost.runtimes.tgi import TGI

    return TGI()


def _llamacpp() -> Runtime:
    from kvplan.cost.runtimes.llamacpp import LlamaCpp

    return LlamaCpp()


def _ollama() -> Runtime:
    from kvplan.cost.runtimes.ollama import Ollama

    return Ollama()


# name -> the factory of its one instance, in the order errors and help list them
_MODULES = {"ideal": _ideal, "hf-dynamic": _hf_dynamic, "hf-static": _hf_static, "vllm": _vllm, "sglang": _sglang,
            "trtllm": _trtllm, "tgi": _tgi, "llamacpp": _llamacpp, "ollama": _ollama}
RUNTIMES: dict[str, Runtime] = {}  # the instances made so far, and the ones a user registered


def register(runtime: Runtime) -> Runtime:
    """Add a runtime (a user's own engine model) under its name; returns it."""
    if not isinstance(runtime, Runtime):
        raise TypeError(f"{type(runtime).__name__}: a runtime is a kvplan.cost.runtimes.base.Runtime")
    RUNTIMES[runtime.name] = runtime
    return runtime


def names() -> list[str]:
    """Every runtime's name: the modelled ones, then those registered."""
    return [*_MODULES, *(n for n in RUNTIMES if n not in _MODULES)]


# the modelled runtimes whose cache is preallocated to max_cache_len (Engine.static; tests/test_report_inputs.py
# pins it), named here so that a help text lists the others without importing every runtime's module
_STATIC = frozenset({"hf-static"})


def dynamic_names() -> list[str]:
    """The runtimes without a preallocated static cache (``compare`` and ``report`` take these): the modelled ones,
    then those registered."""
    return [n for n in names() if n not in _STATIC and (n not in RUNTIMES or not RUNTIMES[n].static)]


# the modelled runtimes with a disaggregated prefill/decode mode (Runtime.disagg_roles; tests/test_cli_help.py pins
# it), named here for the same reason
_DISAGG = ("vllm", "sglang", "trtllm")


def disagg_names() -> list[str]:
    """The runtimes ``kvplan disagg`` takes: the modelled ones with disaggregated serving, then registered ones."""
    return [*_DISAGG, *(n for n, r in RUNTIMES.items() if n not in _MODULES and r.disagg_roles is not None)]


def get_engine(name: str | Runtime) -> Runtime:
    """The runtime object for ``name``, or for ``name==version`` (``vllm==0.11``: the rules of the modelled range
    that covers that release; no version: the newest modelled); KvplanError lists the known ones."""
    if isinstance(name, Runtime):
        return name
    base, _, version = name.partition("==") if isinstance(name, str) else (name, "", "")
    if base not in RUNTIMES:
        if not isinstance(base, str) or base not in _MODULES:
            every = [get_engine(n) for n in names()]  # an error: load them all to list their versions
            known = ", ".join(f"{r.name} (=={'|=='.join(r.versions)})" if r.versions else r.name for r in every)
            raise KvplanError(f"--engine: unknown engine {str(name)[:60]!r}; allowed: {known}")
        RUNTIMES[base] = _MODULES[base]()
    return RUNTIMES[base].at_version(version) if "==" in name else RUNTIMES[base]

