"""The `kvplan check` baseline: the figures each scenario had when it was last accepted, and the card fields and
options that produced them (so a regression can name the line that moved it).

Written by ``kvplan check --update-baseline``: exact integers, keys in a fixed order, one block per scenario.
"""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

from kvplan.errors import KvplanError
from kvplan.files import write_atomic

BASELINE_VERSION = 1
ACCEPT = "kvplan check --update-baseline"
_FLOAT_SLACK = 1e-9  # relative: latency figures are floats; a formula refactor may move the last bit


def read_baseline(path: Path) -> dict[str, dict] | None:
    """Scenario name -> ``{"figures": {...}, "inputs": {...}, "card": {...}}``; None when there is no file yet."""
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise KvplanError(f"{path}: not a kvplan baseline ({exc}); rewrite it with `{ACCEPT}`") from None
    scenarios = data.get("scenarios") if isinstance(data, dict) else None
    if data.get("schema_version") != BASELINE_VERSION or not isinstance(scenarios, dict):
        raise KvplanError(f"{path}: not a kvplan baseline (schema_version {BASELINE_VERSION} with scenarios); "
                          f"rewrite it with `{ACCEPT}`")
    return scenarios


def baseline_text(entries: dict[str, dict]) -> str:
    """Scenarios sorted by name, each entry's keys in the order given: a diff shows one block per scenario."""
    data = {"schema_version": BASELINE_VERSION, "written_by": ACCEPT, "scenarios": dict(sorted(entries.items()))}
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def write_baseline(path: Path, entries: dict[str, dict]) -> None:
    write_atomic(path, baseline_text(entries))


def regressed(value: int | float | bool, base: int | float | bool, tolerance: float, higher_is_better: bool) -> bool:
    """Whether ``value`` is worse than ``base`` by more than ``tolerance`` (a fraction of ``base``). Integers are
    compared exactly; floats with a relative slack of 1e-9."""
    if isinstance(value, bool) or isinstance(base, bool):
        return bool(base) and not value
    tol = Fraction(str(tolerance))
    if isinstance(value, int) and isinstance(base, int):
        return value < base * (1 - tol) if higher_is_better else value > base * (1 + tol)
    slack = abs(base) * _FLOAT_SLACK
    return value < base * (1 - float(tol)) - slack if higher_is_better else value > base * (1 + float(tol)) + slack
