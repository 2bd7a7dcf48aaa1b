"""The `kvplan check` baseline: the figures each scenario had when it was last accepted, and the card fields and
options that produced them (so a regression can name the line that moved it).

Written by ``kvplan check --update-baseline``: exact integers, keys in a fixed order, one block per scenario.

Read against a schema (``Baseline``): a gate must never pass on a baseline it cannot read, so a figure that is NaN,
infinite, negative, a string or a boolean where a number belongs, an unknown figure, or a file of the wrong shape
ends in one line naming the file and the figure (exit 2), never in "ok" or "new".
"""

from __future__ import annotations

import json
import os
import stat
from fractions import Fraction
from pathlib import Path
from typing import Annotated, Any, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, ValidationError, create_model

from kvplan.errors import KvplanError, clip, clip_text
from kvplan.files import parse_json, read_text, shown, write_atomic
from kvplan.planning.check.figures import FIGURES

BASELINE_VERSION = 1
ACCEPT = "kvplan check --update-baseline"
MAX_BASELINE_BYTES = 4 << 20
_FLOAT_SLACK = 1e-9  # relative: latency figures are floats; a formula refactor may move the last bit
_STRICT = ConfigDict(extra="forbid", strict=True, frozen=True)

Bytes = Annotated[StrictInt, Field(ge=0)]
Number = Annotated[Union[StrictInt, Annotated[StrictFloat, Field(allow_inf_nan=False)]], Field(ge=0)]
_TYPES: dict[str, tuple[Any, str]] = {"bytes": (Bytes, "an integer >= 0"), "count": (Number, "a finite number >= 0"),
                                      "ms": (Number, "a finite number >= 0"), "bool": (StrictBool, "true or false")}
Figures = create_model("Figures", __config__=_STRICT,
                       **{f.name: (_TYPES[f.unit][0], None) for f in FIGURES.values()})  # absent: new; null: refused


class Entry(BaseModel):
    """One scenario as accepted: its figures, the options that set them, the card's fields."""

    model_config = _STRICT
    figures: Figures  # type: ignore[valid-type]
    inputs: dict[str, Any] = {}
    card: dict[str, Any] = {}


class Baseline(BaseModel):
    model_config = _STRICT
    schema_version: Annotated[StrictInt, Field(ge=BASELINE_VERSION, le=BASELINE_VERSION)]
    written_by: Optional[str] = None
    scenarios: dict[str, Entry]


def read_baseline(path: Path) -> dict[str, dict] | None:
    """Scenario name -> ``{"figures": {...}, "inputs": {...}, "card": {...}}``; None when there is no file yet."""
    name = shown(path)
    try:
        dangling = stat.S_ISLNK(os.lstat(path).st_mode) and not os.path.exists(path)
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        dangling = False  # read_text names what is wrong
    if dangling:
        raise KvplanError(f"{name}: a symbolic link to {shown(os.readlink(path))}, which does not exist (a dangling "
                          f"link); allowed: the baseline file, or no file (`{ACCEPT}` writes one)")
    data = parse_json(read_text(path, what="baseline", limit=MAX_BASELINE_BYTES), name)
    try:
        base = Baseline.model_validate(data)
    except ValidationError as exc:
        raise KvplanError(f"{name}: {_problem(exc)}; rewrite it with `{ACCEPT}`") from None
    return {scenario: {"figures": entry.figures.model_dump(exclude_none=True), "inputs": entry.inputs,
                       "card": entry.card} for scenario, entry in base.scenarios.items()}


def _problem(exc: ValidationError) -> str:
    """'scenarios.tiny.figures.kv_bytes: got nan; allowed: an integer >= 0' from pydantic's first error."""
    err = exc.errors(include_url=False)[0]
    loc = [str(p) for p in err["loc"]]
    if len(loc) > 4 and loc[0] == "scenarios" and loc[2] == "figures":
        loc = loc[:4]  # past the figure: the branch of a union (int, float) pydantic tried
    where = ".".join(clip_text(p, 60) for p in loc[:5]) or "the file"
    got = f"got {clip(err['input'])}" if err["type"] != "missing" else "missing"
    if len(loc) == 4 and loc[0] == "scenarios" and loc[2] == "figures":
        fig = FIGURES.get(loc[3])
        allowed = _TYPES[fig.unit][1] if fig else f"the figures {', '.join(FIGURES)}"
    elif loc == ["schema_version"]:
        allowed = f"{BASELINE_VERSION}"
    elif not loc:
        allowed = "an object with schema_version and scenarios"
    else:
        allowed = {"scenarios": "an object of scenario name -> entry", "figures": "an object of figures",
                   "inputs": "an object", "card": "an object", "written_by": "a string"}.get(
            loc[-1], "schema_version, written_by, scenarios (entries: figures, inputs, card)")
    return f"{where}: {got}; allowed: {allowed}"


def baseline_text(entries: dict[str, dict]) -> str:
    """Scenarios sorted by name, each entry's keys in the order given: a diff shows one block per scenario."""
    data = {"schema_version": BASELINE_VERSION, "written_by": ACCEPT, "scenarios": dict(sorted(entries.items()))}
    return json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def write_baseline(path: Path, entries: dict[str, dict]) -> None:
    write_atomic(path, baseline_text(entries))


MARK = '"schema_version"'  # every baseline kvplan writes holds it in its first line of data


def check_replaceable(path: Path) -> None:
    """--update-baseline replaces only a baseline: a new path, an empty file, or a file that reads as one kvplan
    wrote (it holds ``"schema_version"``; a damaged one, a merge conflict, is still rewritten). Any other file
    (package.json, a README) is refused before anything is written, and so is what ``write_atomic`` refuses."""
    from kvplan.files import check_writable

    check_writable(path)
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return
        with open(path, "rb") as f:
            head = f.read(MAX_BASELINE_BYTES)
    except (OSError, ValueError):
        return  # gone, or unreadable: check_writable has named what matters
    text = head.decode("utf-8", errors="replace").replace("\x00", "")  # UTF-16 reads with NULs between
    if head.strip() and MARK not in text:
        raise KvplanError(f"{shown(path)}: exists and is not a kvplan baseline (no {MARK}); allowed: a new path or "
                          f"a baseline `{ACCEPT}` wrote (move the file away, or set baseline to another path)")


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
