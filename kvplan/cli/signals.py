"""Ctrl-C and SIGTERM before a command runs: an immediate, quiet exit (kvplan.cli.main installs it before the
imports); a command takes the signals over when it starts (``arm``): KeyboardInterrupt and ``Terminated``, so that
what it writes is cleaned up (kvplan.writes); once its result is complete (``result_written``), a signal ends the
process at once with the result's exit code."""

from __future__ import annotations

import os
import signal
import sys
import threading
from contextlib import contextmanager


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


_owned = False  # the process is kvplan's own (kvplan.cli.main): ``arm`` took the signals over from ``quiet_exit``


def arm() -> None:
    """A command starts: Ctrl-C raises KeyboardInterrupt and SIGTERM calls ``on_sigterm`` from here on (where the
    quiet handlers were installed; an embedding program's own handlers are left alone)."""
    global _owned
    if signal.getsignal(signal.SIGINT) is quiet_exit:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        _owned = True
    if signal.getsignal(signal.SIGTERM) is quiet_exit:
        signal.signal(signal.SIGTERM, on_sigterm)
        _owned = True


@contextmanager
def result_written(code: int):
    """The block writes a command's finished result (``kvplan verify``'s table or JSON); ``code`` is the exit code
    that result stands for. A Ctrl-C or SIGTERM from the block's start on comes after the run has ended: the result
    is written whole and flushed, and the signal then ends the process at once with ``code`` (a signal during the
    block, at its end; one after it, in the interpreter's teardown, from its handler). The teardown after torch takes
    0.5-1 s; a signal there raised KeyboardInterrupt in atexit and weakref finalizers: "Exception ignored ...
    Traceback" on stderr, and exit 0, 1, 130 or a death by SIGINT after "all checks pass".

    Only in kvplan's own process (``arm`` took the signals over): elsewhere (a program that embeds the CLI, a test's
    CliRunner) the handlers in force before are restored after the block and a signal held meanwhile is delivered
    to them. An error in the block (stdout cannot be written) restores them too; outside the main thread (only it
    may set handlers) the block runs unguarded."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    before = {sig: signal.signal(sig, lambda signum, _frame: caught.append(signum))
              for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except BaseException:
        _restore(before, caught)
        raise
    if not _owned:
        _restore(before, caught)
        return
    if caught:
        os._exit(code)

    def finished(signum, frame) -> None:
        os._exit(code)

    for sig in before:
        signal.signal(sig, finished)


def _restore(before: dict, caught: list[int]) -> None:
    for sig, handler in before.items():
        signal.signal(sig, handler)
    if caught:
        signal.raise_signal(caught[0])
