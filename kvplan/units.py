"""Bottom layer: integer helpers and human-readable sizes. JSON always carries exact bytes; people read IEC units."""

from __future__ import annotations

from kvplan.errors import KvplanError

_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")


def cdiv(a: int, b: int) -> int:
    """Ceiling division on integers (vLLM ``cdiv``)."""
    return -(-a // b)


def require_positive(flag: str, value: object) -> int:
    """``value`` as a positive int, else KvplanError naming ``flag`` (bool is not an int here)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise KvplanError(f"{flag}: must be a positive integer, got {_short(value)}")
    return value


def _short(value: object, limit: int = 60) -> str:
    text = repr(value) if not isinstance(value, int) or abs(value) < 10**limit else f"an integer of {len(str(abs(value)))} digits"
    return text if len(text) <= limit else text[:limit] + "..."


def fmt_bytes(n: int) -> str:
    """1536 -> '1.5 KiB', 34359738368 -> '32.0 GiB'; bytes below 1 KiB are printed exactly. Integer arithmetic only,
    so sizes far beyond a float's range still format (as EiB)."""
    if abs(n) < 1024:
        return f"{n} B"
    unit = 0
    while unit < len(_UNITS) - 1 and abs(n) >= 1024 ** (unit + 1):
        unit += 1
    tenths = (abs(n) * 10 + 1024**unit // 2) // 1024**unit  # rounded to one decimal, exactly
    sign = "-" if n < 0 else ""
    return f"{sign}{tenths // 10:,}.{tenths % 10} {_UNITS[unit]}" if tenths >= 10000 else \
        f"{sign}{tenths // 10}.{tenths % 10} {_UNITS[unit]}"


def fmt_int(n: int) -> str:
    return f"{n:,}"
