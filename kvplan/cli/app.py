"""The `kvplan` command line: each command parses flags, calls one library function, and hands the result to report.
Command groups live in their own modules; this one builds the app and its root options."""

from __future__ import annotations

import copy
import sys
from typing import Annotated

import typer

from kvplan.cli.errors import KvplanGroup

app = typer.Typer(help="Size the KV cache, weights and memory of transformer LLMs, exactly.", cls=KvplanGroup,
                  no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
                  context_settings={"help_option_names": ["-h", "--help"]})


def _version(value: bool) -> None:
    if value:
        from kvplan import __version__

        typer.echo(f"kvplan {__version__}")
        raise typer.Exit(0)


@app.callback()
def root(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True, metavar="",
                                          help="Print the version and exit.")] = False,
    debug: Annotated[bool, typer.Option("--debug", metavar="", help="Show the traceback of an internal error.")] = False,
) -> None:
    """Exit codes: 0 success, 1 a check failed (verify, check), 2 bad input, 3 internal error."""


def _register() -> None:
    from kvplan.cli import cards, check, compare, estimate, gpus, plan, report, sweep, verify

    for module in (estimate, plan, compare, sweep, report, verify, check):
        module.register(app)
    app.add_typer(cards.app, name="cards")
    app.add_typer(gpus.app, name="gpus")


_register()


_ROOT_FLAGS = ("--version", "--debug")  # the root options, all flags: the first other word names the command


def _slim(argv: list[str]) -> typer.Typer:
    """``app`` with only the command ``argv`` runs. typer builds the options of every command before it parses (some
    15 ms for all of them) and a run needs just its own. Help, ``--version`` and a word that names no command (click
    lists the commands or suggests one) get the whole app."""
    name = next((word for word in argv if word not in _ROOT_FLAGS), None)
    commands = [c for c in app.registered_commands
                if (c.name or typer.main.get_command_name(c.callback.__name__)) == name]
    groups = [g for g in app.registered_groups if g.name == name]
    if not commands and not groups:
        return app
    slim = copy.copy(app)
    slim.registered_commands, slim.registered_groups = commands, groups
    return slim


def main() -> None:
    _slim(sys.argv[1:])()
