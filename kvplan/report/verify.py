"""Rendering a ``kvplan verify`` result: a table of predicted vs measured, or JSON with exact integers."""

from __future__ import annotations

import json
import sys

from rich.console import Console
from rich.table import Table

from kvplan.units import fmt_int
from kvplan.verify.run import Check, VerifyResult


def verify_json(r: VerifyResult) -> dict:
    """The ``--json`` object: every field of the result plus the overall ``ok``."""
    return {**r.model_dump(mode="json"), "ok": r.ok}


def print_verify_json(r: VerifyResult) -> None:
    sys.stdout.write(json.dumps(verify_json(r), indent=2) + "\n")


def _fmt(name: str, n: int | None) -> str:
    if n is None:
        return "-"
    return fmt_int(n) if name.endswith("flops") else f"{fmt_int(n)} B"


def _diff(c: Check) -> str:
    if c.predicted is None or c.measured is None:
        return "-"
    d = c.measured - c.predicted
    rel = f" ({d / c.predicted:+.3%})" if c.predicted else ""
    return f"{d:+,}{rel}"


def _verdict(c: Check) -> str:
    if c.ok is None:
        return "[yellow]info[/yellow]"
    tol = "exact" if c.tolerance == 0 else f"within {c.tolerance:.0%}"
    return f"[green]pass[/green] ({tol})" if c.ok else f"[red]FAIL[/red] ({tol})"


def render_verify(r: VerifyResult, console: Console) -> None:
    title = (f"kvplan verify: {r.model} on {r.device}, engine {r.engine}, {r.kv_dtype}, batch {r.batch} x "
             f"{r.prompt_len} prompt + {r.decode_steps} decoded = {r.seq_len} tokens")
    t = Table(title=title, title_justify="left")
    t.add_column("quantity", no_wrap=True)
    for col in ("predicted", "measured", "difference"):
        t.add_column(col, justify="right")
    t.add_column("verdict")
    for c in r.checks:
        t.add_row(c.name, _fmt(c.name, c.predicted), _fmt(c.name, c.measured), _diff(c), _verdict(c))
    console.print(t)
    console.print(f"parameters: {fmt_int(r.params)} (reference model = kvplan count)")
    if r.shrunk:
        console.print("shrunk: " + "; ".join(r.shrunk), highlight=False)
    for c in r.checks:
        if c.note:
            console.print(f"{c.name}: {c.note}", highlight=False)
    console.print("[green]all checks pass[/green]" if r.ok else "[red]some checks failed[/red]")
