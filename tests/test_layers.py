"""The package layers: cli -> report -> plan -> cost -> model -> errors/units; each imports only from below (or its
own layer). verify sits beside plan. Planning never imports torch, numpy or matplotlib."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "kvplan"
RANK = {"errors": 0, "units": 0, "model": 1, "cost": 2, "plan": 3, "verify": 3, "report": 4, "cli": 5}


def _layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "kvplan" and parts[1] in RANK else None


def _imports(path: Path):
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module
        elif isinstance(node, ast.Import):
            yield from (a.name for a in node.names)


@pytest.mark.parametrize("path", sorted(p for p in ROOT.rglob("*.py") if p.relative_to(ROOT).parts[0] in RANK
                                        or p.stem in RANK), ids=lambda p: str(p.relative_to(ROOT)))
def test_imports_go_down(path):
    own = path.relative_to(ROOT).parts[0].removesuffix(".py")
    bad = [m for m in _imports(path) if _layer(m) and RANK[_layer(m)] > RANK[own]]
    assert not bad, f"{own} imports from above: {bad}"


def test_plan_never_imports_heavy_libraries():
    code = ("import sys, kvplan.planning.capacity, kvplan.planning.capacity.search, kvplan.report.plan, kvplan.cli.plan; "
            "print(sorted(m for m in ('torch', 'numpy', 'matplotlib') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
