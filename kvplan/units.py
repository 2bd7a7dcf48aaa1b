"""Bottom layer: integer helpers and human-readable sizes. JSON always carries exact bytes; people read IEC units."""

from __future__ import annotations

import math
import re
from fractions import Fraction

from kvplan.errors import KvplanError, clip

_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")


def cdiv(a: int, b: int) -> int:
    """Ceiling division on integers (vLLM ``cdiv``)."""
    return -(-a // b)


def divisors(n: int) -> list[int]:
    """The positive divisors of ``n``, ascending."""
    small = [d for d in range(1, int(n ** 0.5) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


MAX_COUNT = 10**12  # sequences, tokens, blocks: far beyond any deployment, and every derived float stays finite
MAX_BLOCK_TOKENS = 1 << 20  # tokens per KV block or page (--block-size): one bound for every command and engine


def require_positive(flag: str, value: object, maximum: int = MAX_COUNT) -> int:
    """``value`` as an int in 1..maximum, else KvplanError naming ``flag`` (bool is not an int here)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= maximum:
        raise KvplanError(f"{flag}: must be an integer in 1..{maximum:,}, got {clip(value)}")
    return value


def require_text(flag: str, value: object) -> str | None:
    """None or a non-empty string, else KvplanError naming ``flag`` (for the Python API's string arguments)."""
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise KvplanError(f"{flag}: expected a non-empty string, got {clip(value)}")
    return value


MIN_FRACTION = 1e-6  # below it a roofline time overflows a float (1e-320: Infinity in JSON)


def require_fraction(flag: str, value: object) -> float:
    """A number in (0, 1], else KvplanError naming ``flag``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not MIN_FRACTION <= value <= 1:
        raise KvplanError(f"{flag}: a fraction in (0, 1], at least {MIN_FRACTION:g}, got {clip(value)}")
    return float(value)


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


_TIME_UNITS = (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9))


def fmt_seconds(s: float, limit_s: float | None = None) -> str:
    """A duration for people, three significant digits and never an exponent: 78.23 -> '78.2 s', 0.15824 ->
    '158 ms', 2.3e-5 -> '23 µs', 1234.5 -> '1,234 s' (thousands separators from 100 up).

    Beside a target (``limit_s``, e.g. a --tpot-ms bound), as many more digits (up to 9) as keep the shown figure off
    the target and on the side the value is: 19.99 ms against 20 ms reads '19.99 ms', not '20 ms'."""
    unit, scale = next(((u, k) for u, k in _TIME_UNITS if abs(s) >= k), _TIME_UNITS[-1])
    v = s / scale
    for extra in range(7):
        text = f"{v:,.{extra}f}" if abs(v) >= 99.95 else f"{v:.{3 + extra}g}"
        if limit_s is None or s == limit_s or (float(text.replace(",", "")) * scale - limit_s) * (s - limit_s) > 0:
            break
    return f"{text} {unit}"


def fmt_float(v: float) -> str:
    """A ratio or rate for people: four significant digits, thousands separators, never an exponent
    (221.20670609436684 -> '221.2', 0.004520658 -> '0.004521', 1.50 -> '1.5', 123456.7 -> '123,457')."""
    if v != v or v in (float("inf"), float("-inf")):
        return str(v)
    if v == 0 or abs(v) >= 1000:
        return f"{v:,.0f}"
    text = f"{v:,.{max(3 - math.floor(math.log10(abs(v))), 0)}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def fmt_usd(value: float) -> str:
    """Dollars to the cent, and to four significant digits below a cent (0.003142, not 0.00)."""
    if value >= 0.01 or value <= 0:
        return f"{value:,.2f}"
    return fmt_float(round(value, 3 - math.floor(math.log10(value))))


def fmt_cell(column: str, v: object) -> str:
    """A result column's value for people (a terminal table, a notebook): seconds (``*_s``) as durations, other
    floats by ``fmt_float``, integers with separators; the machine formats (CSV, JSONL) keep every digit."""
    if v is None:
        return "-"
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return str(v)
    if isinstance(v, int):
        return fmt_int(v)
    return fmt_seconds(v) if column.endswith("_s") and not column.endswith("_per_s") else fmt_float(v)


def plural(n: int | float, noun: str) -> str:
    """'1 request', '16 requests', '1,024 tokens'."""
    text = fmt_int(n) if isinstance(n, int) else f"{n:,.1f}"
    return f"{text} {noun}" if n == 1 else f"{text} {noun}s"


_TOKEN_SUFFIX = re.compile(r"(\d+(?:\.\d+)?)([kKmMgGtT])")
_TOKEN_DECIMAL = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_TOKEN_BINARY = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
TOKENS_HINT = ("an integer, or one with a suffix as vLLM reads it: k/m/g/t x1000 (32k = 32,000; 25.6k), K/M/G/T "
               "x1024 (32K = 32,768)")


def parse_tokens(flag: str, text: object, *, auto: bool = False) -> int | None:
    """A token count as vLLM reads its --max-model-len, --max-num-batched-tokens (``human_readable_int``,
    vllm/utils/argparse_utils.py, 0.33): an integer (Python's ``int()``: '4096.0' is refused, as vLLM refuses it), or
    digits with a suffix, lower case decimal (``int(float(n) * 1000**i)``: '25.6k' = 25,600), upper case binary
    (whole numbers only: '32K' = 32,768). None stays None; the range is the caller's. ``auto``: vLLM's --max-model-len
    also takes -1 / auto (fit the memory), which a plan cannot take: it is refused with what to give instead."""
    if text is None or (isinstance(text, int) and not isinstance(text, bool)):
        return text
    if not isinstance(text, str) or len(text) > 64:
        raise KvplanError(f"{flag}: {clip(text)} is not a token count; allowed: {TOKENS_HINT}")
    value = text.strip()
    if auto and (value == "-1" or value.lower() == "auto"):
        raise KvplanError(f"{flag}: {value} (vLLM: the longest length that fits) is not planned; allowed: a length "
                          "(the plan prints the longest max_model_len that fits)")
    m = _TOKEN_SUFFIX.fullmatch(value)
    if m:
        number, suffix = m.groups()
        if suffix in _TOKEN_DECIMAL:
            return int(float(number) * _TOKEN_DECIMAL[suffix])
        if "." in number:
            raise KvplanError(f"{flag}: {value}: a binary suffix ({suffix}) takes a whole number (vLLM refuses it; "
                              f"{number}{suffix.lower()} is decimal); allowed: {TOKENS_HINT}")
        return int(number) * _TOKEN_BINARY[suffix]
    try:
        return int(value)
    except ValueError:
        raise KvplanError(f"{flag}: {clip(value)} is not a token count; allowed: {TOKENS_HINT}") from None


_SIZE_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12, "pb": 10**15, "eb": 10**18,
               "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40, "pib": 2**50, "eib": 2**60}
# one letter, as vLLM's human_readable_int reads --kv-cache-memory-bytes 8G (and kvplan's log parser its flags):
# lower case decimal, upper case binary
_SIZE_LETTERS = {**{c: 1000**i for i, c in enumerate("kmgtpe", 1)}, **{c: 1024**i for i, c in enumerate("KMGTPE", 1)}}
_SIZE_HINT = ("bytes as an integer (80e9), or a number with a unit: 512MiB, \"40 GiB\", 80GB (IEC KiB..EiB, SI "
              "kB..EB, either case), or one letter as vLLM reads it (8G = 8 GiB, 8g = 8 GB)")


def parse_size(what: str, text: object) -> int:
    """A size in exact bytes: an int, or a string such as ``"40 GiB"``, ``"80GB"``, ``"512MiB"``, ``"1.5 KiB"``.

    IEC units (KiB, MiB, ... powers of 1024) and SI units (kB/KB, MB, GB, ... powers of 1000), case-insensitive; a
    bare letter as vLLM's own size flags read it (``8G`` = 8 GiB, ``8g`` = 8 GB); a number may carry an exponent
    (``80e9``). A fraction of a byte left by a decimal with a unit is dropped (vLLM's ``int()`` of its own sizes; a
    logged '6.51 GiB' is itself rounded); a plain byte count must be whole. Anything else: a one-line KvplanError
    naming ``what``.
    """
    if isinstance(text, int) and not isinstance(text, bool):
        if text < 0:
            raise KvplanError(f"{what}: a size cannot be negative, got {clip(text)}")
        return _bounded(what, text, text)
    if not isinstance(text, str) or len(text) > 64:
        raise KvplanError(f"{what}: not a size: {clip(text)}; give {_SIZE_HINT}")
    m = re.fullmatch(r"\s*(-?)(\d+(?:\.\d+)?|\.\d+)((?:[eE][+-]?\d{1,4})?)\s*([A-Za-z]*)\s*", text.replace("_", ""))
    name = m.group(4) if m else ""
    unit = m and (_SIZE_LETTERS.get(name) if len(name) == 1 and name not in "bB" else _SIZE_UNITS.get(name.lower()))
    if not unit:
        raise KvplanError(f"{what}: not a size: {clip(text)}; give {_SIZE_HINT}")
    if m.group(1):
        raise KvplanError(f"{what}: a size cannot be negative, got {clip(text.strip())}")
    value = Fraction(m.group(2) + m.group(3)) * unit
    if value.denominator != 1 and unit == 1:
        raise KvplanError(f"{what}: {clip(text.strip())} is not a whole number of bytes")
    return _bounded(what, value.numerator // value.denominator, text)  # '6.51 GiB' as logged: the bytes below it


MAX_SIZE_BYTES = 2**64  # 16 EiB: beyond any memory, and every float derived from a size stays finite


def _bounded(what: str, size: int, text: object) -> int:
    if size > MAX_SIZE_BYTES:
        raise KvplanError(f"{what}: {clip(text)} is more than 16 EiB; allowed: a size of at most 2^64 bytes")
    return size


def f32(x: float) -> float:
    """``x`` rounded to a C / Rust f32 (llama.cpp's split points, TGI's memory arithmetic compute in single
    precision)."""
    import struct  # only llama.cpp's and TGI's rules round so: the estimate path imports nothing more

    return struct.unpack("f", struct.pack("f", x))[0]
