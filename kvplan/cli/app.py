"""The `kvplan` command line: each command parses flags, calls one library function, and hands the result to report.
Command groups live in their own modules; this one builds the app and its root options."""

from __future__ import annotations

import atexit
import copy
import errno
import gc
import io
import os
import signal
import sys
from typing import Annotated

import typer

from kvplan.cli.errors import KvplanGroup
from kvplan.cli.signals import on_sigterm
from kvplan.cli.examples import epilog

_base = typer.Typer(help="Size the KV cache, weights and memory of transformer LLMs, exactly.", cls=KvplanGroup,
                    epilog=epilog("kvplan"),
                    no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
                    context_settings={"help_option_names": ["-h", "--help"]})


def _version(value: bool) -> None:
    if value:
        from kvplan import __version__

        typer.echo(f"kvplan {__version__}")
        raise typer.Exit(0)


@_base.callback()
def root(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True, metavar="",
                                          help="Print the version and exit.")] = False,
    debug: Annotated[bool, typer.Option("--debug", metavar="", help="Show the traceback of an internal error.")] = False,
) -> None:
    """Exit codes: 0 success, 1 a check failed (verify, check), 2 bad input, 3 internal error."""


# Each command's module (kvplan.cli.<name>, one command of that name: ``register(app)``) and each group's (a Typer
# ``app`` added under its name). A run imports only the module of the command it names (`_slim`).
_COMMANDS = ("estimate", "plan", "compare", "sweep", "report", "verify", "check", "disagg")
_GROUPS = ("cards", "gpus")


def _add(target: typer.Typer, name: str) -> None:
    """Register the command or group ``name`` on ``target`` (its module imported now)."""
    import importlib

    module = importlib.import_module(f"kvplan.cli.{name}")
    if name in _GROUPS:
        target.add_typer(module.app, name=name)
    else:
        module.register(target)


def __getattr__(name: str) -> typer.Typer:
    """``app``: the whole command line (every command and group), built on first use; ``main`` builds only the
    command a run names."""
    if name != "app":
        raise AttributeError(name)
    if "app" in globals():
        return globals()["app"]
    for command in (*_COMMANDS, *_GROUPS):
        _add(_base, command)
    globals()["app"] = _base
    return _base


_ROOT_FLAGS = ("--version", "--debug")  # the root options, all flags: the first other word names the command
# Commands that compute and print, in a second or less: they run without the cyclic garbage collector and skip
# the interpreter's teardown (_exit_now).
_QUICK_EXIT = frozenset({"estimate", "compare", "plan", "cards", "gpus"})


def _command(argv: list[str]) -> str | None:
    return next((word for word in argv if word not in _ROOT_FLAGS), None)


def _slim(name: str | None) -> typer.Typer:
    """The app with only the command ``name``, its module alone imported: typer builds the options of every
    command before it parses (some 15 ms for all of them) and importing every command's module costs more; a run
    needs just its own. Help, ``--version`` and a word that names no command (click lists the commands or suggests
    one) get the whole app."""
    if name not in _COMMANDS and name not in _GROUPS:
        return __getattr__("app")
    slim = copy.copy(_base)
    slim.registered_commands, slim.registered_groups = [], []
    _add(slim, name)
    return slim


def _exit_now(code: object) -> None:
    """End the process with ``code`` the quick way: run the atexit handlers, flush stdout and stderr, and skip the
    freeing of every module and object that follows a normal exit (some 30-40 ms, a fifth of a cold `kvplan
    estimate`; nothing a command wrote depends on it). Returns, for the usual exit, where that would differ: a
    thread still running, an exit code that is not a number, a stream that cannot be flushed (a closed pipe), a
    Python without CPython's atexit._run_exitfuncs."""
    threading, run_atexit = sys.modules.get("threading"), getattr(atexit, "_run_exitfuncs", None)
    if not isinstance(code, int) or run_atexit is None or (threading is not None and threading.active_count() > 1):
        return
    run_atexit()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        return
    os._exit(code)


def _standard_streams() -> None:
    """Streams any command can write to: SIGTERM unwinds like Ctrl-C (temporary files removed); a closed stdout
    or stderr (``>&-``) gets the null device under its number (so that no file kvplan opens takes it) and a
    stdout whose first write fails (one line, exit 2); text the stream's encoding cannot hold is escaped."""
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:  # run without kvplan.cli.main's quiet handlers
        signal.signal(signal.SIGTERM, on_sigterm)
    for fd, name in ((1, "stdout"), (2, "stderr")):
        if getattr(sys, name) is None:
            try:
                os.fstat(fd)
            except OSError:
                devnull = os.open(os.devnull, os.O_WRONLY)
                if devnull != fd:
                    os.dup2(devnull, fd)
                    os.close(devnull)
            setattr(sys, name, _Closed() if fd == 1 else open(os.devnull, "w", encoding="utf-8"))
    for stream in (sys.stdout, sys.stderr):
        encoding = (getattr(stream, "encoding", None) or "").lower().replace("-", "").replace("_", "")
        if encoding not in ("utf8", "utf8sig") and hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")


class _Closed(io.TextIOBase):
    """stdout when the shell closed it: the first write fails (one line, exit 2), nothing is written anywhere."""

    def write(self, text: str) -> int:
        raise OSError(errno.EBADF, "Stdout is closed")

    def flush(self) -> None:
        raise OSError(errno.EBADF, "Stdout is closed")

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False


def main() -> None:
    _standard_streams()
    name = _command(sys.argv[1:])
    slim = _slim(name)
    quick = slim is not _base and name in _QUICK_EXIT
    if quick:  # a short run: it leaves little cyclic garbage, and the collector's passes would cost ~12 ms
        gc.disable()
    try:
        slim()
    except SystemExit as done:
        _after_the_result()
        if quick:
            _exit_now(done.code)
        raise


def _after_the_result() -> None:
    """The command has ended (its output written, its exit code set): a Ctrl-C or SIGTERM from here on changes
    nothing. Ignored, so that the interpreter's teardown (0.5-1 s after torch) can neither print a traceback nor
    end the process by the signal: CPython resets Python-level handlers to the default action while it finalizes,
    and a signal then killed a finished `sweep -o` or `verify` (exit -2 after its result)."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            signal.signal(sig, signal.SIG_IGN)
        except (OSError, ValueError):  # not the main thread: nothing to do
            pass
