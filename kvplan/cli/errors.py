"""How the CLI ends: exit 0 success, 1 a check failed (verify, check), 2 bad input, 3 an internal error.

Bad input (a KvplanError, or click's own parse errors such as ``--batch abc``) is one line on stderr naming the flag
or field; an internal error is one line plus "please report", and its traceback only with ``--debug``.
"""

from __future__ import annotations

import sys
import traceback

from typer.core import TyperGroup

from kvplan.errors import KvplanError

EXIT_BAD_INPUT = 2
EXIT_INTERNAL = 3


def _is(exc: BaseException, name: str) -> bool:
    """By class name: typer >= 0.25 vendors click (typer._click), older typer raises click's own classes."""
    return any(c.__name__ == name for c in type(exc).__mro__)


def _say(prefix: str, message: str) -> None:
    from rich.console import Console
    from rich.markup import escape

    Console(stderr=True, soft_wrap=True, highlight=False).print(f"[red]{prefix}[/red] {escape(message)}")


class KvplanGroup(TyperGroup):
    """The root command: turns every way a run can end into its documented exit code and one line of text."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        argv = list(sys.argv[1:] if args is None else args)
        try:
            rv = super().main(args=argv, prog_name=prog_name, complete_var=complete_var, standalone_mode=False,
                              **extra)
        except KvplanError as exc:
            _say("error:", str(exc))
            sys.exit(EXIT_BAD_INPUT)
        except BrokenPipeError:  # `kvplan ... | head`: the reader left; nothing is wrong
            sys.stderr.close()
            sys.exit(0)
        except Exception as exc:  # noqa: BLE001 - the one place an unexpected error becomes exit 3
            sys.exit(_exit_code(exc, argv))
        sys.exit(rv if isinstance(rv, int) else 0)


def _exit_code(exc: Exception, argv: list[str]) -> int:
    if _is(exc, "NoArgsIsHelpError"):  # typer has printed the help already
        return 0
    if _is(exc, "UsageError"):  # click's parse errors: --batch abc, an unknown option, a missing argument
        where = _command_words(getattr(exc, "ctx", None))
        _say("error:", f"{exc.format_message()}{where}; see --help")
        return EXIT_BAD_INPUT
    if _is(exc, "Abort") or isinstance(exc, KeyboardInterrupt):
        _say("aborted", "")
        return 130
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
