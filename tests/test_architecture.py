"""The package's shape: one direction of dependency between layers, no import cycles, small modules.

    cli -> report -> planning -> cost -> model -> errors/units/files      (verify may use planning, cost and model)

Every import counts, including the ones inside functions (lazy imports hide cycles, they do not remove them).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

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


GRAPH = {m: {i for i in imports(p) if i in MODULES and i != m} for m, p in MODULES.items()}


@pytest.mark.parametrize("module", sorted(set(MODULES) - FACADE))
def test_imports_follow_the_layers(module):
    bad = sorted(i for i in GRAPH[module] if i not in FACADE and layer(i) not in ALLOWED[layer(module)])
    assert not bad, f"{module} ({layer(module)}) imports {bad} against the layers"


def test_no_import_cycles():
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for n in sorted(GRAPH[m] - FACADE):
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


def test_small_modules_and_a_short_root():
    long = {m: n for m, p in MODULES.items() if (n := len(p.read_text(encoding="utf-8").splitlines())) > 400}
    assert not long, f"modules over 400 lines: {long}"
    root = sorted(p.name for p in PKG.glob("*.py"))
    assert len(root) <= 6, root


MAX_BODY_LINES = 40  # the guide's "functions under ~40 lines"; typer signatures of CLI commands do not count


def body_lines(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Lines from the first statement after the docstring to the function's end (0 for a docstring-only body)."""
    body = fn.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]
    return fn.end_lineno - body[0].lineno + 1 if body else 0


def long_functions(source: str, limit: int = MAX_BODY_LINES) -> dict[str, int]:
    tree = ast.parse(source)
    return {f"{n.name}:{n.lineno}": b for n in ast.walk(tree)
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and (b := body_lines(n)) > limit}


def test_short_functions():
    long = {f"{m}.{f}": n for m, p in MODULES.items() for f, n in long_functions(p.read_text(encoding="utf-8")).items()}
    assert not long, f"function bodies over {MAX_BODY_LINES} lines: {long}"


def test_the_function_check_counts_the_body_not_the_signature_or_docstring():
    args = "".join(f"    a{i}: int = 0,\n" for i in range(50))
    doc = '    """' + "doc\n" * 20 + '    """\n'
    short = f"def f(\n{args}):\n{doc}" + "    x = 1\n" * MAX_BODY_LINES
    assert long_functions(short) == {}
    assert long_functions(short + "    return x\n") == {"f:1": MAX_BODY_LINES + 1}
