"""Grid axes of ``kvplan sweep``: comma lists and ranges of integers, comma lists of names.

An integer axis is a comma list whose items are values or ranges::

    1,2,8            three values
    1..256*2         1, 2, 4, ..., 256 (multiply by FACTOR while <= STOP)
    1024..8192+1024  1024, 2048, ..., 8192 (add STEP while <= STOP)

Values keep the order given and repeat nothing. A range that would never end (``*1``, ``+0``), runs backwards, or
holds more than ``MAX_AXIS`` values is refused with a KvplanError naming the flag.
"""

from __future__ import annotations

import re

from kvplan.errors import KvplanError, clip_text
from kvplan.units import MAX_COUNT, parse_tokens

MAX_AXIS = 1_000_000  # values on one axis
MAX_ROWS = 10_000_000  # rows of a sweep: the product of its axes, refused before anything is built
MAX_PARALLEL = 4096  # --tp, --pp values
_RANGE = re.compile(r"^\s*(\d+)\s*\.\.\s*(\d+)\s*([+*])\s*(\d+)\s*$")
_INT = re.compile(r"^\s*\d+\s*$")
_TOKEN = re.compile(r"^\s*\d+(?:\.\d+)?[kmgtKMGT]\s*$")  # 32k, 25.6k, 32K: kvplan.units.parse_tokens reads it
_TOKEN_RANGE = re.compile(r"^\s*(\d+(?:\.\d+)?[kmgtKMGT]?)\s*\.\.\s*(\d+(?:\.\d+)?[kmgtKMGT]?)\s*"
                          r"(?:([+])\s*(\d+(?:\.\d+)?[kmgtKMGT]?)|([*])\s*(\d+))\s*$")


def require_rows(rows: int, axes: str) -> None:
    """Refuse a grid of more than MAX_ROWS rows, naming the count: nothing runs unbounded."""
    if rows > MAX_ROWS:
        raise KvplanError(f"{axes}: the grid has {rows:,} rows; allowed: at most {MAX_ROWS:,} (sweep in parts, or "
                          "coarser ranges such as 1..65536*2)")


def parse_int_axis(text: str | int | list | tuple, flag: str, maximum: int = MAX_COUNT,
                   tokens: bool = False) -> list[int]:
    """The positive integers ``text`` names (each at most ``maximum``), in order, without repeats. ``tokens``: a
    length axis, whose values and range ends also take vLLM's suffixes as `plan` does (32k = 32,000, 32K = 32,768:
    kvplan.units.parse_tokens)."""
    if isinstance(text, int):
        text = str(text)
    items = list(text) if isinstance(text, (list, tuple)) else str(text).split(",")
    values: list[int] = []
    for item in items:
        values.extend(_int_item(str(item), flag, tokens))
        if len(values) > MAX_AXIS:
            raise KvplanError(f"{flag}: more than {MAX_AXIS:,} values; allowed: at most {MAX_AXIS:,} per axis")
    if values and max(values) > maximum:
        raise KvplanError(f"{flag}: {max(values):,} is too large; allowed: 1..{maximum:,}")
    values = list(dict.fromkeys(values))
    if not values:
        raise KvplanError(f"{flag}: empty grid; give values (1,2,8) or a range (1..256*2, 1024..8192+1024)")
    if len(values) > MAX_AXIS:
        raise KvplanError(f"{flag}: {len(values):,} values; at most {MAX_AXIS:,} per axis")
    return values


def _int_item(item: str, flag: str, tokens: bool = False) -> list[int]:
    if not item.strip():
        return []
    if len(item) > 200:
        raise KvplanError(f"{flag}: cannot read {item.strip()[:40]!r}...; give values (1,2,8) or a range")
    if _INT.match(item):
        return [_positive(int(item), flag)]
    m = (_TOKEN_RANGE if tokens else _RANGE).match(item)
    if tokens and m is None and _TOKEN.match(item):
        return [_positive(parse_tokens(flag, item.strip()), flag)]
    if not m:
        raise KvplanError(f"{flag}: cannot read {item.strip()[:40]!r}; give values (1,2,8"
                          + (", 32k" if tokens else "") + ") or a range START..STOP+STEP / START..STOP*FACTOR (e.g. "
                          + ("1k..32k*2" if tokens else "1..256*2") + ")")
    if tokens:  # a length range: 1k..32k*2, 1K..8K+1K
        start, stop, op = parse_tokens(flag, m[1]), parse_tokens(flag, m[2]), m[3] or m[5]
        n = parse_tokens(flag, m[4]) if m[3] else int(m[6])
    else:
        start, stop, op, n = int(m[1]), int(m[2]), m[3], int(m[4])
    start = _positive(start, flag)
    if stop < start:
        raise KvplanError(f"{flag}: range {item.strip()} is empty (STOP {stop} is below START {start})")
    if (op == "*" and n < 2) or (op == "+" and n < 1):
        need = "a FACTOR >= 2" if op == "*" else "a STEP >= 1"
        raise KvplanError(f"{flag}: range {item.strip()} never ends; give {need}")
    count = (stop - start) // n + 1 if op == "+" else None
    if count is not None and count > MAX_AXIS:
        raise KvplanError(f"{flag}: range {item.strip()} has {count:,} values; at most {MAX_AXIS:,} per axis")
    if op == "+":
        return list(range(start, stop + 1, n))
    out, v = [], start
    while v <= stop:
        out.append(v)
        v *= n
    return out


def _positive(value: int, flag: str) -> int:
    if value < 1:
        raise KvplanError(f"{flag}: {value} is not a positive integer")
    return value


def parse_name_axis(text: str | list | tuple | None, flag: str, default: list | None = None) -> list:
    """Names from comma lists (a repeated flag gives a list of them); ``default`` when none are given."""
    if text is None:
        return list(default if default is not None else [None])
    if not isinstance(text, (str, list, tuple)) or not all(isinstance(item, str) for item in
                                                              ([text] if isinstance(text, str) else text)):
        raise KvplanError(f"{flag}: {clip_text(repr(text), 60)}; allowed: a name, a comma list of names, or a list "
                          "of them")
    items = [text] if isinstance(text, str) else list(text)
    names = [p.strip() for item in items for p in item.split(",") if p.strip()]
    if not names:
        raise KvplanError(f"{flag}: empty grid; give one or more comma-separated values")
    return list(dict.fromkeys(names))
