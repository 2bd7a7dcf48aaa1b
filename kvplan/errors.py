"""The one exception type users see: a clear one-line message, exit code 2 in the CLI."""

from __future__ import annotations

import reprlib


class KvplanError(ValueError):
    """Bad input (unknown model, invalid card, impossible flag combination).

    The CLI prints ``error: <message>`` and exits with code 2, never a traceback.
    """


class Refused(KvplanError):
    """A layout or setup the engine itself refuses (a head count TP does not divide, no memory left for the cache):
    an answer about that layout, which the layout search skips; any other KvplanError is the user's input."""


_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxstring, _REPR.maxother, _REPR.maxlong = 2, 60, 60, 60
_REPR.maxlist = _REPR.maxtuple = _REPR.maxdict = _REPR.maxset = 4


def clip(value: object, limit: int = 60) -> str:
    """A bounded repr of user input for messages: never the whole value, never an exception.

    >>> clip(10 ** 5000)
    'an integer of 5001 digits'
    """
    if isinstance(value, int) and not isinstance(value, bool) and abs(value).bit_length() > 150:
        return f"an integer of {_digits(value)} digits"
    try:
        text = _REPR.repr(value)
    except Exception:  # noqa: BLE001 - a user object whose repr fails still gets a message
        text = f"<{type(value).__name__}>"
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def clip_text(text: str, limit: int = 200) -> str:
    """User text (a path, a name) shortened in the middle: 'head...tail', one line."""
    text = " ".join(str(text).split()) if ("\n" in str(text) or "\r" in str(text)) else str(text)
    if len(text) <= limit:
        return text
    half = (limit - 3) // 2
    return f"{text[:half]}...{text[-half:]}"


def _digits(n: int) -> int:
    """Decimal digits of a big integer without str() (which refuses above 4300 digits)."""
    n = abs(n)
    estimate = int(n.bit_length() * 0.30102999566398114)  # floor(log10(2^bits)) is within one of the answer
    return estimate + 1 if n >= 10 ** estimate else estimate
