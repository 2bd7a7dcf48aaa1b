"""Ctrl-C and SIGTERM before a command runs: an immediate, quiet exit (kvplan.cli.main installs it before the
imports); a command takes the signals over when it starts (``arm``): KeyboardInterrupt and ``Terminated``, so that
what it writes is cleaned up (kvplan.writes)."""

from __future__ import annotations

import os
import signal


class Terminated(KeyboardInterrupt):
    """SIGTERM (CI cancel, ``timeout``, ``docker stop``), raised where the process is so that it unwinds like
    Ctrl-C: temporary files are removed; the exit code is 128 + the signal's number (143)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def on_sigterm(signum, frame) -> None:
    raise Terminated(signum)


def quiet_exit(signum: int, frame) -> None:
    """Before a command runs: exit 128 + the signal's number, with no traceback and nothing to clean up."""
    os._exit(128 + signum)


def install_quiet() -> None:
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, quiet_exit)


def arm() -> None:
    """A command starts: Ctrl-C raises KeyboardInterrupt and SIGTERM calls ``on_sigterm`` from here on (where the
    quiet handlers were installed; an embedding program's own handlers are left alone)."""
    if signal.getsignal(signal.SIGINT) is quiet_exit:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if signal.getsignal(signal.SIGTERM) is quiet_exit:
        signal.signal(signal.SIGTERM, on_sigterm)
