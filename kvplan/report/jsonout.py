"""JSON for programs: exact integers, never through rich (no markup, no wrapping), one function for every command."""

from __future__ import annotations

import json
import sys

from pydantic import BaseModel


def to_data(obj: object) -> object:
    """Pydantic results (computed fields included) and lists of them as plain JSON data."""
    if isinstance(obj, BaseModel):
        return obj.model_dump(mode="json")
    if isinstance(obj, list):
        return [to_data(x) for x in obj]
    return obj


def dumps(obj: object) -> str:
    return json.dumps(to_data(obj), indent=2) + "\n"


def print_json(obj: object) -> None:
    sys.stdout.write(dumps(obj))
