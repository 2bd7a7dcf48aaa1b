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


_SIZE_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
               "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


def parse_size(flag: str, text: str | int) -> int:
    """'6.51GiB', '80GB', '512MiB', '1e9' or integer bytes as exact bytes (fractions of a byte are dropped, as a logged
    '6.51 GiB' is itself rounded); KvplanError naming ``flag`` otherwise. GB/MB are decimal, GiB/MiB binary."""
    from decimal import Decimal, InvalidOperation

    if isinstance(text, int) and not isinstance(text, bool):
        value, unit = Decimal(text), ""
    else:
        raw = str(text).strip().replace("_", "").replace(",", "")
        digits = raw.rstrip("KMGTPiBkmgtpib ")
        value, unit = digits, raw[len(digits):].strip().lower()
        try:
            value = Decimal(digits)
        except InvalidOperation:
            value = None
    if value is None or unit not in _SIZE_UNITS or not value.is_finite() or value < 0:
        raise KvplanError(f"{flag}: not a size: {_short(text)}; give bytes or a number with a unit "
                          "(B, KB, MB, GB, TB, KiB, MiB, GiB, TiB), e.g. 6.51GiB or 80GB")
    return int(value * _SIZE_UNITS[unit])
