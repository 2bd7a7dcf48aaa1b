"""The one exception type users see: a clear one-line message, exit code 2 in the CLI."""


class KvplanError(ValueError):
    """Bad input (unknown model, invalid card, impossible flag combination).

    The CLI prints ``error: <message>`` and exits with code 2, never a traceback.
    """
