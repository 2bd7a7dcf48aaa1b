"""Line numbers for `kvplan check` messages and GitHub annotations: a plain line scan of the TOML config and the
YAML card (no parser keeps positions), so an annotation can point at the line that set a value."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

_KEY = re.compile(r'^\s*("?)([A-Za-z0-9_-]+)\1\s*=')


@dataclass
class ScenarioLines:
    """Where one ``[[scenarios]]`` table starts and where each of its keys is set (1-based line numbers)."""

    header: int
    keys: dict[str, int] = field(default_factory=dict)

    def of(self, key: str | None) -> int:
        return self.keys.get(key, self.header) if key else self.header


def scenario_lines(text: str, table: str) -> list[ScenarioLines]:
    """One entry per ``[[<table>.scenarios]]`` header, in file order (``table`` is "" or "tool.kvplan")."""
    header = re.compile(r"^\s*\[\[\s*" + re.escape(f"{table}.scenarios" if table else "scenarios") + r"\s*\]\]")
    out: list[ScenarioLines] = []
    current: ScenarioLines | None = None
    for n, line in enumerate(text.splitlines(), start=1):
        if header.match(line):
            current = ScenarioLines(n)
            out.append(current)
        elif line.lstrip().startswith("["):
            current = None
        elif current is not None and (m := _KEY.match(line)):
            current.keys.setdefault(m.group(2), n)
    return out


def table_key_line(text: str, table: str, key: str) -> int | None:
    """Line that sets ``key = ...`` in the config's own table: the lines before the first table header
    (``table`` "", kvplan.toml) or those under ``[tool.kvplan]``; None when no line there does (an inline table)."""
    inside = not table
    header = re.compile(r"^\s*\[\s*" + re.escape(table) + r"\s*\]") if table else None
    for n, line in enumerate(text.splitlines(), start=1):
        if line.lstrip().startswith("["):
            inside = bool(header and header.match(line))
        elif inside and (m := _KEY.match(line)) and m.group(2) == key:
            return n
    return None


def key_line(text: str, key: str) -> int:
    """First line that sets ``key = ...`` (1 when none does, e.g. an inline table)."""
    for n, line in enumerate(text.splitlines(), start=1):
        m = _KEY.match(line)
        if m and m.group(2) == key:
            return n
    return 1


def yaml_field_line(path: Path, name: str) -> int | None:
    """Line of ``name:`` in a card: a top-level field first, else a nested one (``kv_lora_rank:`` under ``mla:``)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    for pattern in (rf"^{re.escape(name)}\s*:", rf"^\s+{re.escape(name)}\s*:"):
        for n, line in enumerate(lines, start=1):
            if re.match(pattern, line):
                return n
    return None
