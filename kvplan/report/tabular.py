"""Sweep rows as CSV, JSON Lines, Markdown or a terminal table, streamed, with a progress bar for long runs.

CSV is ``kvplan.planning.sweep.write_csv`` (the one ``Sweep.to_csv`` uses): a header of dotted JSON keys, empty cells
for None. JSON Lines: one flat object per row, the same keys. Markdown: one pipe table.
"""

from __future__ import annotations

import itertools
import json
import sys
import time
from typing import IO, Iterable, Iterator

from kvplan.errors import KvplanError, clip_text, printable
from kvplan.planning.sweep import Sweep, write_csv

FORMATS = ("csv", "jsonl", "markdown", "table")
_SUFFIXES = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".md": "markdown", ".markdown": "markdown",
             ".txt": "table"}
_CHUNK = 16_384
_TEXT = ("model", "engine", "attention", "kv_dtype", "weight_dtype", "gpu")


def pick_format(fmt: str | None, output: str | None, tty: bool) -> str:
    """--format, else the -o suffix, else a table on a terminal and CSV in a pipe."""
    if fmt is not None:
        if fmt not in FORMATS:
            raise KvplanError(f"--format: unknown format {fmt[:40]!r}; allowed: {', '.join(FORMATS)}")
        return fmt
    if output is not None:
        name = output.replace("\\", "/").rsplit("/", 1)[-1]
        suffix = "." + name.rsplit(".", 1)[-1].lower() if "." in name.lstrip(".") else ""
        if suffix and suffix not in _SUFFIXES:  # out.xlsx: not a CSV file under another name
            raise KvplanError(f"--output: cannot tell the format from {clip_text(suffix, 20)!r}; allowed suffixes: "
                              f"{', '.join(_SUFFIXES)} (none: csv), or give --format")
        return _SUFFIXES.get(suffix, "csv")
    return "table" if tty else "csv"


def write_rows(fmt: str, sweep: Sweep, rows: Iterable[tuple], f: IO[str]) -> int:
    """Write ``rows`` (tuples in ``sweep.columns`` order) to ``f`` in ``fmt``; returns the rows written."""
    if fmt == "csv":
        return write_csv(sweep.columns, rows, f)
    if fmt == "jsonl":
        return _jsonl(sweep.columns, rows, f)
    if fmt == "markdown":
        return _markdown(sweep.columns, rows, f)
    return _table(sweep.columns, rows, f)


def _jsonl(columns: tuple[str, ...], rows: Iterable[tuple], f: IO[str]) -> int:
    n = 0
    dumps = json.JSONEncoder(separators=(",", ":")).encode
    for row in rows:
        f.write(dumps(dict(zip(columns, row))) + "\n")
        n += 1
    return n


def cell(v: object) -> str:
    if v is None:
        return ""
    return repr(v) if isinstance(v, float) else printable(str(v))


def _md_cell(v: object) -> str:
    """A Markdown table cell: ``|`` escaped so that a name cannot add a column."""
    from kvplan.report.docformat import md_text

    return md_text(cell(v))


def _markdown(columns: tuple[str, ...], rows: Iterable[tuple], f: IO[str]) -> int:
    f.write("| " + " | ".join(columns) + " |\n")
    f.write("|" + "|".join("---" if c in _TEXT else "---:" for c in columns) + "|\n")
    n = 0
    for row in rows:
        f.write("| " + " | ".join(_md_cell(v) for v in row) + " |\n")
        n += 1
    return n


MAX_TABLE_ROWS = 10_000  # a terminal table is built whole before it prints; the other formats stream


def _table(columns: tuple[str, ...], rows: Iterable[tuple], f: IO[str]) -> int:
    from kvplan.report.console import escape, make_console, table
    from kvplan.units import fmt_cell

    t = table("kvplan sweep", list(columns), left=_TEXT)
    n = 0
    for row in rows:
        t.add_row(*(escape(fmt_cell(c, v)) if isinstance(v, (int, float)) else escape(cell(v))
                    for c, v in zip(columns, row)))
        n += 1
    make_console(file=f).print(t)
    return n


class Progress:
    """Counts rows; after ``delay_s`` shows a rich progress bar on stderr (a terminal only). Use as a context."""

    def __init__(self, total: int, delay_s: float = 1.0, label: str = "scenarios"):
        self.total, self.delay_s, self.done, self.label = total, delay_s, 0, label
        self.start, self.bar, self.task = time.monotonic(), None, None

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.stop()

    def advance(self, n: int) -> None:
        self.done += n
        if self.bar is None and time.monotonic() - self.start > self.delay_s and sys.stderr.isatty():
            self.bar, self.task = _start_bar(self.total, self.label)
        if self.bar is not None:
            self.bar.update(self.task, completed=self.done)

    def counted(self, rows: Iterable[tuple]) -> Iterator[tuple]:
        """Pass ``rows`` through, advancing once per chunk."""
        it = iter(rows)
        while chunk := list(itertools.islice(it, _CHUNK)):
            yield from chunk
            self.advance(len(chunk))


def write_sweep(fmt: str, sweep: Sweep, f: IO[str]) -> int:
    """Every row of ``sweep`` to ``f`` in ``fmt``, with a progress bar for long runs; returns the rows written.
    CSV without roofline or plan columns takes the sweep's direct formatting path (same bytes, faster)."""
    if fmt == "table" and len(sweep) > MAX_TABLE_ROWS:
        raise KvplanError(f"--format table: {len(sweep):,} rows; allowed: at most {MAX_TABLE_ROWS:,} (a table is "
                          "built whole; csv, jsonl and markdown stream any number)")
    with Progress(len(sweep)) as progress:
        if fmt != "csv" or not sweep.fast_csv:
            return write_rows(fmt, sweep, progress.counted(sweep.tuples()), f)
        write_csv(sweep.columns, (), f)
        for text, n in sweep.csv_blocks():
            f.write(text)
            progress.advance(n)
        return progress.done


def _start_bar(total: int, label: str):
    from rich.progress import BarColumn, MofNCompleteColumn, Progress as Bar, TimeRemainingColumn

    from kvplan.report.console import make_console

    bar = Bar(label, BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
              console=make_console(stderr=True), transient=True)
    bar.start()
    return bar, bar.add_task("sweep", total=total)
