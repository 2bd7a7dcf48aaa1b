"""The one exception type users see: a clear one-line message, exit code 2 in the CLI."""

from __future__ import annotations

import re
import reprlib


class KvplanError(ValueError):
    """Bad input (unknown model, invalid card, impossible flag combination).

    The CLI prints ``error: <message>`` and exits with code 2, never a traceback.
    """


class SchemaErrors(KvplanError):
    """A file that fails its schema: the message is the first problem (one line, as every KvplanError);
    ``problems`` holds every one of them, each a line naming its field (``kvplan cards validate`` lists them all)."""

    def __init__(self, origin: str, problems: list[str]):
        super().__init__(f"{origin}: {problems[0]}")
        self.problems = [f"{origin}: {p}" for p in problems]


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
    """User text (a path, a name) shortened in the middle: 'head...tail', one printable line (line breaks become
    spaces, other control characters their escapes: no terminal sequence or workflow command gets through)."""
    text = str(text)
    if len(text) > 4 * limit:  # a 1 MB name: cut before any per-character work
        text = text[:2 * limit] + text[-2 * limit:]
    text = printable(" ".join(text.split()) if ("\n" in text or "\r" in text) else text)
    if len(text) <= limit:
        return text
    half = (limit - 3) // 2
    return f"{text[:half]}...{text[-half:]}"


def printable(text: str) -> str:
    """``text`` with every character that is not printable (control characters, line and paragraph separators,
    bidi overrides, escape sequences) written as its Python escape: one line that a terminal shows as written. A byte
    of a file name that is not UTF-8 (Python's surrogate escape, U+DC80-U+DCFF) is shown as the byte, ``\\xff``, not
    as the surrogate ``\\udcff`` that names no file."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else f"\\x{ord(c) - 0xDC00:02x}" if 0xDC80 <= ord(c) <= 0xDCFF
                   else ascii(c)[1:-1] for c in text)


MAX_NAME_CHARS = 200


def require_line(where: str, text: str, limit: int = MAX_NAME_CHARS) -> str:
    """``text`` when it is one printable line of 1..``limit`` characters (a name other programs will read), else a
    KvplanError naming ``where`` and the first character at fault."""
    if not text.strip():
        raise KvplanError(f"{where}: empty; allowed: one printable line of at most {limit} characters")
    if len(text) > limit:
        raise KvplanError(f"{where}: {len(text):,} characters ({clip_text(text, 60)}); allowed: one printable line "
                          f"of at most {limit} characters")
    bad = next((c for c in text if not c.isprintable()), None)
    if bad is not None:
        raise KvplanError(f"{where}: {clip_text(text, 60)} holds the control character {ascii(bad)}; allowed: one "
                          f"printable line of at most {limit} characters")
    return text


def _digits(n: int) -> int:
    """Decimal digits of a big integer without str() (which refuses above 4300 digits)."""
    n = abs(n)
    estimate = int(n.bit_length() * 0.30102999566398114)  # floor(log10(2^bits)) is within one of the answer
    return estimate + 1 if n >= 10 ** estimate else estimate


class DoesNotFit(Refused):
    """The layout does not fit in memory: on some rank nothing is left for the KV cache (the weights, activations
    and overheads fill the budget). An answer about the memory, as a request that does not fit the pool is (a
    `kvplan check` budget ``fits = true`` fails on it), never a mistake in the input (a head count TP does not
    divide is plain ``Refused``). ``gpu_bytes``: what that rank holds besides the pool (weights, activation peak,
    overheads, CUDA context), where known."""

    def __init__(self, message: str, *, gpu_bytes: int | None = None):
        super().__init__(message)
        self.gpu_bytes = gpu_bytes


class WeightsDoNotFit(DoesNotFit):
    """The weights alone exceed a GPU's memory on some rank: no flag of the budget helps, only more GPUs, a bigger
    GPU or smaller weights (the plan names a bundled quantized card of the same model where there is one).
    ``weights_bytes``: the heaviest rank's weights; ``room_bytes``: what its GPU holds after the CUDA context."""

    def __init__(self, message: str, *, weights_bytes: int | None = None, room_bytes: int | None = None,
                 gpu_bytes: int | None = None):
        super().__init__(message, gpu_bytes=gpu_bytes)
        self.weights_bytes, self.room_bytes = weights_bytes, room_bytes


# A name other programs read (a GPU of a --gpu-file, a kvplan.toml scenario): it starts with a letter or a digit and
# holds none of the characters that Markdown, HTML or a GitHub workflow command give a meaning (`<>[]*`|&!~^{}$%`,
# "::"), so no format has to trust its own escaping for it: a line of a table can never begin "::error ..." and
# a Markdown summary never renders a link or a tag from it.
NAME_CHARS = "letters, digits, spaces and . _ + - / ( ) @ : , # =, starting with a letter or a digit, no '::'"
_NAME_CHAR = r"[\w .+\-/()@:,#=]"
_NAME = re.compile(rf"[^\W_]{_NAME_CHAR}*")


def name_problem(text: str) -> str | None:
    """Why ``text`` is no name (``NAME_CHARS``), or None."""
    if not _NAME.fullmatch(text):
        if not _NAME.match(text[:1]):
            return f"starts with {text[:1]!r}; allowed: {NAME_CHARS}"
        bad = next(c for c in text if not re.fullmatch(_NAME_CHAR, c))
        return f"holds {bad!r}; allowed: {NAME_CHARS}"
    if "::" in text:
        return f"holds '::'; allowed: {NAME_CHARS}"
    return None


def require_name(where: str, text: str, limit: int = MAX_NAME_CHARS) -> str:
    """``require_line``, and a name by ``NAME_CHARS`` (KvplanError naming ``where`` otherwise)."""
    require_line(where, text, limit)
    if problem := name_problem(text):
        raise KvplanError(f"{where}: {clip_text(text, 60)} {problem}")
    return text

