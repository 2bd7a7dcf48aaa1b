"""The package's shape: one direction of dependency between layers, no import cycles, small modules.

    cli -> report -> planning -> cost -> model -> errors/units/files      (verify may use planning, cost and model)

Every import counts, including the ones inside functions (lazy imports hide cycles, they do not remove them).
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

from kvplan.cost.runtimes import _MODULES

PKG = Path(__file__).resolve().parents[1] / "kvplan"
BASE = "base"  # kvplan/errors.py, units.py, files.py: the bottom layer
ALLOWED = {
    BASE: {BASE},
    "model": {"model", BASE},
    "cost": {"cost", "model", BASE},
    "planning": {"planning", "cost", "model", BASE},
    "verify": {"verify", "planning", "cost", "model", BASE},
    "report": {"report", "planning", "cost", "model", "verify", BASE},
    "cli": {"cli", "report", "planning", "cost", "model", "verify", BASE},
}
FACADE = {"kvplan", "kvplan.__main__"}  # the public API re-exports lazily from every layer


def module_name(path: Path) -> str:
    parts = path.relative_to(PKG.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or parts[1] in ALLOWED else BASE


MODULES = {module_name(p): p for p in PKG.rglob("*.py")}


def imports(path: Path) -> set[str]:
    """Every kvplan module imported anywhere in the file (module level or inside functions)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("kvplan")}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("kvplan"):
            subs = {f"{node.module}.{a.name}" for a in node.names} & set(MODULES)
            found |= subs if len(subs) == len(node.names) else subs | {node.module}
    return found


@functools.cache
def graph() -> dict[str, set[str]]:
    """Each module's kvplan imports, parsed once a process and when a test asks (not at collection, which every
    xdist worker repeats)."""
    return {m: {i for i in imports(p) if i in MODULES and i != m} for m, p in MODULES.items()}


@pytest.mark.parametrize("module", sorted(set(MODULES) - FACADE))
def test_imports_follow_the_layers(module):
    bad = sorted(i for i in graph()[module] if i not in FACADE and layer(i) not in ALLOWED[layer(module)])
    assert not bad, f"{module} ({layer(module)}) imports {bad} against the layers"


def test_no_import_cycles():
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for n in sorted(graph()[m] - FACADE):
            if state.get(n) == 1:
                raise AssertionError("import cycle: " + " -> ".join(stack[stack.index(n):] + [n]))
            if n not in state:
                visit(n)
        stack.pop()
        state[m] = 2

    for m in sorted(set(MODULES) - FACADE):
        if m not in state:
            visit(m)


def test_the_layer_check_catches_an_upward_import():
    assert layer("kvplan.cost.flops") == "cost" and layer("kvplan.units") == BASE
    assert "planning" not in ALLOWED["cost"] and "report" not in ALLOWED["planning"] and "cli" not in ALLOWED["report"]


def test_a_short_root():
    root = sorted(p.name for p in PKG.glob("*.py"))
    assert len(root) <= 6, root


RUNTIME_NAMES = set(_MODULES)  # every registered engine's name: a new runtime is guarded without editing this test


def engine_name_comparisons(tree: ast.AST) -> list[int]:
    """Lines comparing a value with a runtime's name (==, !=, in, not in a literal holding one)."""
    def names(node: ast.AST) -> set[str]:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return {node.value}
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return set().union(*(names(e) for e in node.elts)) if node.elts else set()
        return set()

    return [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Compare)
            and any(names(x) & RUNTIME_NAMES for x in (node.left, *node.comparators))]


def test_no_engine_name_is_compared_outside_the_runtimes():
    """A runtime owns its rules: planning, report, cli and verify ask the object, never its name."""
    found = {m: lines for m, p in MODULES.items() if not m.startswith("kvplan.cost.runtimes")
             and (lines := engine_name_comparisons(ast.parse(p.read_text(encoding="utf-8"))))}
    assert not found, found


def test_the_engine_name_check_finds_a_comparison():
    assert engine_name_comparisons(ast.parse('if e.name == "vllm": pass')) == [1]
    assert engine_name_comparisons(ast.parse('x = e in ("sglang", "vllm")')) == [1]
    assert engine_name_comparisons(ast.parse('x = e.name == other')) == []


PUBLIC_KEYWORD_API = {"kvplan.planning.capacity.plan", "kvplan.planning.estimate.estimate",
                      "kvplan.planning.capacity.search.search", "kvplan.planning.sweep.sweep", "kvplan.planning.disagg.disagg"}


def parameter_counts(module: str, tree: ast.AST) -> dict[str, int]:
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            names = [x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
            out[f"{module}.{node.name}"] = len([n for n in names if n not in ("self", "cls")]) + bool(a.vararg) \
                + bool(a.kwarg)
    return out


def test_planning_and_cost_functions_take_at_most_ten_parameters():
    """Typed requests (PlanRequest, Workload, Setup) instead of loose parameters; the keyword API users call is the
    exception."""
    wide = {name: n for m, p in MODULES.items() if m not in FACADE and layer(m) in ("planning", "cost")
            for name, n in parameter_counts(m, ast.parse(p.read_text(encoding="utf-8"))).items()
            if n > 10 and name not in PUBLIC_KEYWORD_API}
    assert not wide, wide
