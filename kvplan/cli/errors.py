"""How the CLI ends: exit 0 success, 1 a check failed (verify, check), 2 bad input, 3 an internal error.

Bad input (a KvplanError, or click's own parse errors such as ``--batch abc``) is one line on stderr naming the flag
or field; an internal error is one line plus "please report", and its traceback only with ``--debug``.
"""

from __future__ import annotations

import errno
import io
import os
import sys
import traceback

from typer.core import TyperGroup

from kvplan.cli.signals import Terminated, arm
from kvplan.errors import KvplanError

EXIT_BAD_INPUT = 2
EXIT_INTERNAL = 3


def _is(exc: BaseException, name: str) -> bool:
    """By class name: typer >= 0.25 vendors click (typer._click), older typer raises click's own classes."""
    return any(c.__name__ == name for c in type(exc).__mro__)


def _say(prefix: str, message: str) -> None:
    from rich.console import Console
    from rich.markup import escape

    from kvplan.errors import clip_text

    # one printable line, bounded whatever the input held (a 1 MB name, a terminal escape, a newline)
    Console(stderr=True, soft_wrap=True, highlight=False).print(f"[red]{prefix}[/red] {escape(clip_text(message, 2000))}")


class _Signalled(Exception):
    def __init__(self, exc: Terminated) -> None:
        super().__init__(exc.signum)
        self.signum = exc.signum


_OUTPUT_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EBADF, errno.EFBIG}


class _ReaderLeft(Exception):
    """stdout's reader went away (``kvplan ... | head``): nothing is wrong, exit 0."""


class _OutputFailed(Exception):
    """stdout cannot be written (``> /dev/full``, closed): one line, exit 2."""


def stdout_failure(exc: BaseException) -> Exception | None:
    """What an OSError means for the run: the reader left, stdout is broken, or neither (None: a real error)."""
    if isinstance(exc, BrokenPipeError):
        return _ReaderLeft()
    # kvplan's own reads and writes turn OSError into KvplanError: one that reaches here with these numbers comes
    # from writing stdout (or stderr)
    if isinstance(exc, OSError) and (exc.errno in _OUTPUT_ERRNOS or _stdout_broken()):
        return _OutputFailed(exc.strerror or str(exc))
    return None


def _stdout_broken() -> bool:
    try:
        sys.stdout.flush()
    except (OSError, ValueError, AttributeError):
        return True
    return False


def quiet_stdout() -> None:
    """Point stdout at the null device: what is still buffered is dropped, not reported again at exit."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        sys.stdout = open(os.devnull, "w", encoding="utf-8")


def _respelled(arg: str) -> str:
    """An engine's underscore spelling of a flag (trtllm-serve's --max_num_tokens, also as --max_num_tokens=N) as the
    flag kvplan declares (kvplan.cli.options.UNDERSCORE_SPELLINGS)."""
    if not isinstance(arg, str) or not arg.startswith("--") or "_" not in arg:
        return arg
    from kvplan.cli.options import UNDERSCORE_SPELLINGS

    name, eq, value = arg.partition("=")
    return UNDERSCORE_SPELLINGS.get(name, name) + eq + value


HELP_PANELS_MIN_WIDTH = 120  # below it typer's panels cut long flag names (--gpu-memory-uti...) to fit


def _plain_help_when_narrow(group, argv: list[str]) -> bool | None:
    """Help in a pipe, a file or a terminal narrower than HELP_PANELS_MIN_WIDTH in click's plain layout, which wraps
    the descriptions and never cuts a flag's name; typer's panels where there is room for them."""
    asks = any(a in ("--help", "-h") for a in argv) or not argv or (len(argv) == 1 and argv[0] in ("cards", "gpus"))
    if not asks:
        return None
    import typer.core
    from rich.console import Console

    before = getattr(typer.core, "HAS_RICH", None)
    if before is None:  # a typer without the switch: its own help layout
        return None
    if Console().width < HELP_PANELS_MIN_WIDTH:
        typer.core.HAS_RICH = False
        _keep_epilog_lines(group)
    return before


def _keep_epilog_lines(command) -> None:
    """Click rewraps an epilog's paragraphs, which would run an example's comment into its command line and a GPU
    file's lines into one; '\\b' before a paragraph keeps its lines as written (typer's panels print them so). The
    help texts' rich escapes ('kvplan\\\\[gguf]', for the panels) are plain brackets here."""
    if command.epilog and "\b" not in command.epilog:  # indented paragraphs (examples, a YAML file) as written
        command.epilog = "\n\n".join("\b\n" + p if any(line[:1].isspace() for line in p.splitlines()) else p
                                      for p in command.epilog.split("\n\n"))
    if command.help:
        command.help = command.help.replace("\\[", "[")
    for param in getattr(command, "params", []):
        if getattr(param, "help", None):
            param.help = param.help.replace("\\[", "[")
    for sub in getattr(command, "commands", {}).values():
        if sub.help and not sub.short_help:  # click would cut a command's summary to 45 characters with "..."
            sub.short_help = " ".join(sub.help.split("\n\n")[0].split())
        _keep_epilog_lines(sub)


class KvplanGroup(TyperGroup):
    """The root command: turns every way a run can end into its documented exit code and one line of text."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        argv = [_respelled(a) for a in (sys.argv[1:] if args is None else args)]
        rich_help = _plain_help_when_narrow(self, argv)
        try:
            rv = super().main(args=argv, prog_name=prog_name, complete_var=complete_var, standalone_mode=False,
                              **extra)
            if sys.stdout is not None:
                sys.stdout.flush()  # a full disk or a reader that left shows here, inside the handlers below
        except KvplanError as exc:
            _say("error:", str(exc))
            sys.exit(EXIT_BAD_INPUT)
        except Terminated as exc:
            sys.exit(_exit_code(exc, argv))
        except OSError as exc:
            sys.exit(_exit_code(stdout_failure(exc) or exc, argv))
        except Exception as exc:  # noqa: BLE001 - the one place an unexpected error becomes exit 3
            sys.exit(_exit_code(exc, argv))
        finally:
            if rich_help is not None:  # in-process callers (tests, CliRunner) get typer's setting back
                import typer.core

                typer.core.HAS_RICH = rich_help
        sys.exit(rv if isinstance(rv, int) else 0)

    def invoke(self, ctx):
        """The command, with what typer would turn into other exit codes caught first: SIGTERM (typer: 130), a reader
        that left (typer: exit 1), a stdout that cannot be written (exit 3 otherwise)."""
        arm()  # the command's signals raise from here on (kvplan.cli.signals)
        try:
            return super().invoke(ctx)
        except Terminated as exc:
            raise _Signalled(exc) from None
        except OSError as exc:
            failure = stdout_failure(exc)
            if failure is None:
                raise
            raise failure from None


def _exit_code(exc: Exception, argv: list[str]) -> int:
    if _is(exc, "NoArgsIsHelpError"):  # typer has printed the help already
        return 0
    if _is(exc, "UsageError"):  # click's parse errors: --batch abc, an unknown option, a missing argument
        where = _command_words(getattr(exc, "ctx", None))
        _say("error:", f"{exc.format_message()}{where}; see --help")
        return EXIT_BAD_INPUT
    if isinstance(exc, (Terminated, _Signalled)):
        _say("terminated", "")
        return 128 + exc.signum
    if _is(exc, "Abort") or isinstance(exc, KeyboardInterrupt):
        _say("aborted", "")
        return 130
    if isinstance(exc, _ReaderLeft):
        quiet_stdout()
        return 0
    if isinstance(exc, _OutputFailed):
        quiet_stdout()
        reason = str(exc)
        _say("error:", f"stdout: cannot write: {reason[:1].lower()}{reason[1:]}; the output is incomplete")
        return EXIT_BAD_INPUT
    if "--debug" in argv:
        traceback.print_exc()
    _say("internal error:", f"{type(exc).__name__}: {str(exc)[:200]}; this is a bug in kvplan, please report it "
                            "with the command line (run again with --debug for the traceback)")
    return EXIT_INTERNAL


def _command_words(ctx) -> str:
    """' (kvplan cards show)': the commands below the root, whatever the program is called (python -m kvplan)."""
    words = []
    while ctx is not None and ctx.parent is not None:
        words.append(ctx.info_name)
        ctx = ctx.parent
    return f" (kvplan {' '.join(reversed(words))})" if words else ""
