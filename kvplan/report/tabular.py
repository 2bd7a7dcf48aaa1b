"""Sweep rows as CSV, JSON Lines, Markdown or a terminal table, streamed, with a progress bar for long runs.

CSV is ``kvplan.plan.sweep.write_csv`` (the one ``Sweep.to_csv`` uses): a header of dotted JSON keys, empty cells
for None. JSON Lines: one flat object per row, the same keys. Markdown: one pipe table.
"""

from __future__ import annotations

import itertools
import json
import sys
import time
from typing import IO, Iterable, Iterator

from kvplan.errors import KvplanError
from kvplan.plan.sweep import Sweep, write_csv

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
        suffix = "." + output.rsplit(".", 1)[-1].lower() if "." in output else ""
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
    return repr(v) if isinstance(v, float) else str(v)


def _markdown(columns: tuple[str, ...], rows: Iterable[tuple], f: IO[str]) -> int:
    f.write("| " + " | ".join(columns) + " |\n")
    f.write("|" + "|".join("---" if c in _TEXT else "---:" for c in columns) + "|\n")
    n = 0
    for row in rows:
        f.write("| " + " | ".join(cell(v) for v in row) + " |\n")
        n += 1
    return n


def _table(columns: tuple[str, ...], rows: Iterable[tuple], f: IO[str]) -> int:
    from rich.console import Console

    from kvplan.report.console import table

    t = table("kvplan sweep", list(columns), left=_TEXT)
    n = 0
    for row in rows:
        t.add_row(*(f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else cell(v) for v in row))
        n += 1
    tty = f.isatty() if hasattr(f, "isatty") else False
    Console(file=f, width=None if tty else 100_000, soft_wrap=not tty, highlight=False).print(t)
    return n


def with_progress(rows: Iterable[tuple], total: int, *, delay_s: float = 1.0) -> Iterator[tuple]:
    """Pass ``rows`` through; after ``delay_s`` a rich progress bar on stderr (a terminal only) counts them."""
    start, done, progress, task = time.monotonic(), 0, None, None
    it = iter(rows)
    try:
        while chunk := list(itertools.islice(it, _CHUNK)):
            yield from chunk
            done += len(chunk)
            if progress is None and time.monotonic() - start > delay_s and sys.stderr.isatty():
                progress, task = _start_progress(total)
            if progress is not None:
                progress.update(task, completed=done)
    finally:
        if progress is not None:
            progress.stop()


def _start_progress(total: int):
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    from kvplan.report.console import make_console

    progress = Progress("scenarios", BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                        console=make_console(stderr=True), transient=True)
    progress.start()
    return progress, progress.add_task("sweep", total=total)
