"""Human-readable sizes in IEC units (KiB, MiB, GiB); JSON always carries exact bytes."""

_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def fmt_bytes(n: int) -> str:
    """1536 -> '1.5 KiB', 34359738368 -> '32.0 GiB'; bytes below 1 KiB are printed exactly."""
    if abs(n) < 1024:
        return f"{n} B"
    value, unit = float(n), 0
    while abs(value) >= 1024 and unit < len(_UNITS) - 1:
        value /= 1024
        unit += 1
    return f"{value:.1f} {_UNITS[unit]}"


def fmt_int(n: int) -> str:
    return f"{n:,}"
