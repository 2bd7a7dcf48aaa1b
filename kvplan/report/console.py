"""Shared pieces of the human-readable output: consoles that never cut a number, tables, sizes with exact bytes.

Piped or redirected output is not a terminal: it gets no width limit at all (rich would otherwise wrap at 80
columns and end numbers in an ellipsis), so what a person pastes is what kvplan computed.
"""

from __future__ import annotations

import errno
import re
import sys

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.measure import Measurement
from rich.table import Table

from kvplan.units import fmt_bytes, fmt_int, fmt_seconds

_UNLIMITED = 100_000  # columns for a file or a pipe: tables take their natural width


def make_console(stderr: bool = False, file=None) -> Console:
    """A console on stdout (stderr, or ``file``) that takes its natural width unless it writes to a terminal."""
    stream = file if file is not None else sys.stderr if stderr else sys.stdout
    tty = stream.isatty() if hasattr(stream, "isatty") else False
    # emoji=False: ":name:" in a card's text stays as written (and rich's table of emoji codes, ~3 ms, stays unread)
    return _Console(file=stream, width=None if tty else _UNLIMITED, soft_wrap=not tty, stderr=stderr,
                    highlight=False, emoji=False)


class _Console(Console):
    def on_broken_pipe(self) -> None:
        """rich ends the process with exit 1 when the reader left (``kvplan ... | head``); kvplan's CLI makes that
        exit 0, so the error goes up to it."""
        raise BrokenPipeError(errno.EPIPE, "the reader of the output left")


def print_command(console: Console, label: str, command: str) -> None:
    """A shell command under a bold label, safe to paste: one line where it fits (always in a pipe or a file); on a
    narrower terminal broken before its options with shell continuations (`` \\``), never inside an argument, so
    the lines pasted run as one command."""
    head = f"[bold]{escape(label)}[/bold]  "
    room = console.width - len(label) - 2
    if not console.is_terminal or len(command) <= room:
        console.print(head + escape(command), soft_wrap=True)
        return
    parts: list[str] = []
    for part in re.split(r" (?=--?[A-Za-z])", command):  # before each flag, never inside a quoted argument
        if parts and (parts[-1].count("'") % 2 or parts[-1].count('"') % 2):
            parts[-1] += " " + part
        else:
            parts.append(part)
    lines: list[str] = []
    for part in parts:
        if lines and len(lines[-1]) + 1 + len(part) + 2 <= room:
            lines[-1] += " " + part
        else:
            lines.append(part)
    console.print(head + escape(" \\\n    ".join(lines)), soft_wrap=True)


def table(title: str, columns: list[str], *, left: tuple[str, ...] = (), show_header: bool = True,
          compact: bool = False, fold: tuple[str, ...] = ()) -> Table:
    """A table whose cells fold rather than truncate when a terminal is too narrow: no number ever ends in '...'.
    ``compact``: made to read at 80 columns: a header rule instead of a box (two columns less per column), and
    each cell kept on one line (a number or a name is never split mid-word) except in the ``fold`` columns, the
    long free text that may wrap."""
    kw = dict(box=box.SIMPLE_HEAD, padding=(0, 1, 0, 0), show_edge=False) if compact else {}
    t = FitTable(title=title, title_justify="left", show_header=show_header, **kw)
    for col in columns:
        t.add_column(col, justify="left" if col in left else "right", overflow="fold",
                     no_wrap=compact and col not in fold)
    return t


class FitTable(Table):
    """A table that reads on a narrow terminal: when its natural width exceeds the console's, each row is printed as
    a block (the first cell, then one ``header: value`` line per column) instead of folding names and numbers
    mid-word. A pipe or a file has no width limit (``make_console``), so it always gets the table itself."""

    def __rich_console__(self, console, options):
        # A pipe or a file (max_width _UNLIMITED) always fits: no measuring twice (a fifth of rendering an estimate)
        if options.max_width >= _UNLIMITED or not self.columns or not self.show_header or Measurement.get(
                console, options.update(width=_UNLIMITED), self).maximum <= options.max_width:
            yield from super().__rich_console__(console, options)
            return
        yield from stacked(self)


def stacked(t: Table):
    """The rows of ``t`` as blocks: the first cell in bold, then each other column as 'header: value'."""
    from rich.text import Text

    if t.title:
        yield Text.from_markup(str(t.title), style="italic") if isinstance(t.title, str) else t.title
    headers = [str(c.header) for c in t.columns]
    for cells in zip(*(c._cells for c in t.columns)):
        first = Text.from_markup(cells[0]) if isinstance(cells[0], str) else cells[0]
        yield Text.assemble(first, style="bold") if isinstance(first, Text) else first
        grid = Table.grid(padding=(0, 1))
        grid.add_column(no_wrap=True, style="dim")
        grid.add_column(overflow="fold")
        for header, cell in zip(headers[1:], cells[1:]):
            grid.add_row(f"  {escape(header)}:", cell)
        yield grid


def exact(n: int) -> str:
    """'32.0 GiB (34,359,738,368 B)'."""
    return f"{fmt_bytes(n)} ({fmt_int(n)} B)"


def ms(seconds: float, limit_s: float | None = None) -> str:
    """A duration for people: '158 ms', '2.34 s' (kvplan.units.fmt_seconds, never an exponent); beside a target
    (``limit_s``) with the digits that keep it off the target."""
    return fmt_seconds(seconds, limit_s)


def note(console: Console, text: str, label: str = "note") -> None:
    console.print(f"[yellow]{label}:[/yellow] {escape(text)}")


__all__ = ["make_console", "table", "exact", "ms", "note", "escape"]
