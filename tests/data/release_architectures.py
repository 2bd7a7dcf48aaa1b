"""Regenerate tests/data/release_architectures.json: which releases' model registries hold each architecture of
kvplan.cost.model_registries.FIRST_RELEASES (and of every bundled card), read from the engines' own sources.

    PYTHONPATH=. python tests/data/release_architectures.py \\
        --vllm /tmp/arch/src/vllm /tmp/audit/src --sglang /tmp/arch/src/sglang

Each ROOT holds one folder per release, named by its version (``0.8.4/vllm/...``, ``0.4.5.post2/sglang/...``): the
Python files of that release's wheel from PyPI (``pip download vllm==X --no-deps``, unzipped; a release in two roots
is read from the first). What a registry holds:

- vLLM: the string keys of the module-level dicts named in VLLM_DICTS in vllm/model_executor/models/registry.py
  (0.6.3+), models/__init__.py (0.2.5 - 0.6.2) or model_loader.py (0.1.4 - 0.2.4). Pooling-only, speculative-decoding,
  previously-supported and out-of-tree dicts do not load a generator and are not read.
- SGLang: the names in ``EntryClass`` of every sglang/srt/models/*.py (srt/models/registry.py import_model_classes keys
  its registry by each entry's __name__; a name bound by ``A = B`` is B's).

It also prints the rows of kvplan.cost.model_registries.FIRST_RELEASES. The test (tests/test_release_architectures.py)
derives each first release from this file and compares it with the table; it reads no /tmp path, so it runs
anywhere.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from pathlib import Path

OUT = Path(__file__).with_name("release_architectures.json")
VLLM_FILES = ("model_executor/models/registry.py", "model_executor/models/__init__.py", "model_executor/model_loader.py")
VLLM_DICTS = ("_MODEL_REGISTRY", "_MODELS", "_GENERATION_MODELS", "_TEXT_GENERATION_MODELS", "_MULTIMODAL_MODELS",
              "_CONDITIONAL_GENERATION_MODELS", "_TRANSFORMERS_SUPPORTED_MODELS")


def _module(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8-sig"))  # a few SGLang files start with a BOM


def vllm_registry(root: Path) -> dict[str, str]:
    """architecture -> where this release's registry holds it (file relative to vllm/, dict name)."""
    out: dict[str, str] = {}
    for rel in VLLM_FILES:
        path = root / rel
        if not path.is_file():
            continue
        for node in _module(path).body:
            target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
            if isinstance(target, ast.Name) and target.id in VLLM_DICTS and isinstance(node.value, ast.Dict):
                for key in node.value.keys:
                    if isinstance(key, ast.Constant) and isinstance(key.value, str):
                        out.setdefault(key.value, f"vllm/{rel} {target.id}")
    return out


def sglang_registry(root: Path) -> dict[str, str]:
    """architecture -> the sglang/srt/models module whose EntryClass names it."""
    out: dict[str, str] = {}
    for path in sorted((root / "srt" / "models").glob("*.py")):
        body = _module(path).body
        classes = {n.name for n in body if isinstance(n, ast.ClassDef)}
        alias = {t.id: n.value.id for n in body if isinstance(n, ast.Assign) and isinstance(n.value, ast.Name)
                 for t in n.targets if isinstance(t, ast.Name)}
        for node in body:
            target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
            if isinstance(target, ast.Name) and target.id == "EntryClass" and node.value is not None:
                for name in (x.id for x in ast.walk(node.value) if isinstance(x, ast.Name)):
                    seen = set()
                    while name in alias and name not in classes and name not in seen:
                        seen.add(name)
                        name = alias[name]
                    out.setdefault(name, f"sglang/srt/models/{path.name} EntryClass")
    return out


def releases(roots: list[Path], package: str) -> dict[str, Path]:
    """version -> its package folder, over ``roots`` (the first root holding a version wins)."""
    found: dict[str, Path] = {}
    for root in roots:
        for d in sorted(root.iterdir()):
            if (d / package).is_dir() and d.name not in found:
                found[d.name] = d / package
    return found


def architectures() -> list[str]:
    """The table's architectures and every bundled card's (a card added with a new one is read next time)."""
    from kvplan.cost.model_registries import FIRST_RELEASES
    from kvplan.model.catalog import bundled_names, load_card

    cards = {load_card(n).hf_architecture for n in bundled_names()}
    return sorted((set(FIRST_RELEASES) | cards) - {None})


def scan(roots: list[Path], package: str, read, archs: list[str]) -> dict:
    from kvplan.cost.model_registries import release_key

    found = releases(roots, package)
    order = sorted(found, key=release_key)
    held = {v: read(found[v]) for v in order}
    return {"releases_read": order,
            "architectures": {a: {"held_in": [v for v in order if a in held[v]],
                                  "first_where": next((held[v][a] for v in order if a in held[v]), None)}
                              for a in archs}}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--vllm", nargs="+", type=Path, required=True, help="folders of <version>/vllm trees")
    ap.add_argument("--sglang", nargs="+", type=Path, required=True, help="folders of <version>/sglang trees")
    args = ap.parse_args(argv)
    archs = architectures()
    facts = {"about": "Generated by tests/data/release_architectures.py from each release's wheel on PyPI; "
                      "held_in: the releases read whose model registry holds the architecture.",
             "vllm": scan(args.vllm, "vllm", vllm_registry, archs),
             "sglang": scan(args.sglang, "sglang", sglang_registry, archs)}
    OUT.write_text(json.dumps(facts, indent=1) + "\n")
    print(f"wrote {OUT}: {len(archs)} architectures, {len(facts['vllm']['releases_read'])} vLLM and "
          f"{len(facts['sglang']['releases_read'])} SGLang releases", file=sys.stderr)
    for a in archs:  # the table's rows, as kvplan.cost.model_registries writes them
        row = []
        for eng in ("vllm", "sglang"):
            fact = facts[eng]["architectures"][a]
            where = fact["first_where"] and fact["first_where"].split("/", 2 if eng == "vllm" else 3)[-1]
            where = where and where.removesuffix(" EntryClass")  # the table's short form
            row += [fact["held_in"][0] if fact["held_in"] else None, where]
        print(f"    {json.dumps(a)}: First({', '.join(map(json.dumps, row)).replace('null', 'None')}),")


if __name__ == "__main__":
    main()
