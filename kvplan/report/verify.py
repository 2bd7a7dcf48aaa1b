"""Rendering a ``kvplan verify`` result: a table of predicted vs measured, or JSON with exact integers."""

from __future__ import annotations

from rich.console import Console

from kvplan.report.console import escape, table
from kvplan.units import fmt_int
from kvplan.verify.distributed import ShardedResult
from kvplan.verify.run import Check, VerifyResult


def _fmt(name: str, n: int | float | None) -> str:
    if n is None:
        return "-"
    if isinstance(n, float) or name == "logits_max_abs_error":
        return f"{n:.2e}"
    return fmt_int(n) if name.endswith("flops") or name == "params" else f"{fmt_int(n)} B"


def _diff(c: Check) -> str:
    if c.predicted is None or c.measured is None:
        return "-"
    if c.name == "logits_max_abs_error":
        return f"<= {c.tolerance:g}" if c.ok else f"> {c.tolerance:g}"
    d = c.measured - c.predicted
    rel = f" ({d / c.predicted:+.3%})" if c.predicted else ""
    return f"{d:+,}{rel}"


def _verdict(c: Check) -> str:
    if c.ok is None:
        return "[yellow]info[/yellow]"
    tol = ("exact" if c.tolerance == 0 else f"abs <= {c.tolerance:g}" if c.name == "logits_max_abs_error"
           else f"within {c.tolerance:.0%}")
    return f"[green]pass[/green] ({tol})" if c.ok else f"[red]FAIL[/red] ({tol})"


def render_verify(r: VerifyResult, console: Console) -> None:
    title = (f"kvplan verify: {escape(r.model)} on {r.device}, engine {r.engine}, {r.kv_dtype}, batch {r.batch} x "
             f"{r.prompt_len} prompt + {r.decode_steps} decoded = {r.seq_len} tokens")
    t = table(title, ["quantity", "predicted", "measured", "difference", "verdict"], left=("quantity", "verdict"))
    for c in r.checks:
        t.add_row(c.name, _fmt(c.name, c.predicted), _fmt(c.name, c.measured), _diff(c), _verdict(c))
    console.print(t)
    console.print(f"parameters: {fmt_int(r.params)} (reference model = kvplan count)")
    if r.shrunk:
        console.print("shrunk: " + escape("; ".join(r.shrunk)))
    for c in r.checks:
        if c.note:
            console.print(f"{c.name}: {escape(c.note)}")
    console.print("[green]all checks pass[/green]" if r.ok else "[red]some checks failed[/red]")


def render_sharded(r: ShardedResult, console: Console) -> None:
    """One table, a block of rows per rank: its checks, predicted (kvplan.cost.parallel) vs measured."""
    title = (f"kvplan verify: {escape(r.model)}, tp {r.tp} x pp {r.pp} = {r.tp * r.pp} ranks ({r.backend} on "
             f"{r.device}), engine {r.engine}, {r.kv_dtype}, batch {r.batch} x {r.prompt_len} prompt + "
             f"{r.decode_steps} decoded = {r.seq_len} tokens")
    t = table(title, ["rank", "quantity", "predicted", "measured", "difference", "verdict"],
              left=("rank", "quantity", "verdict"))
    for rank in r.ranks:
        label = f"{rank.rank} (tp {rank.tp_rank}, pp {rank.pp_rank}; layers {rank.layers[0]}..{rank.layers[1] - 1})"
        for i, c in enumerate(rank.checks):
            t.add_row(label if i == 0 else "", c.name, _fmt(c.name, c.predicted), _fmt(c.name, c.measured),
                      _diff(c), _verdict(c), end_section=i == len(rank.checks) - 1)
    console.print(t)
    if r.shrunk:
        console.print("shrunk: " + escape("; ".join(r.shrunk)))
    console.print("[green]all checks pass on every rank[/green]" if r.ok else "[red]some checks failed[/red]")


def render_llama_verify(r, console: Console) -> None:
    """`kvplan verify --engine llamacpp`: each case's buffers and caches, kvplan's MiB against llama.cpp's log."""
    t = table(f"kvplan verify --engine llamacpp: llama.cpp (llama-cpp-python {escape(r.llama_cpp_python)}) on the CPU",
              ["case", "what", "predicted", "llama.cpp logged", "verdict"], left=("case", "what", "verdict"))
    for c in r.checks:
        t.add_row(escape(c.case), escape(c.what), c.predicted, escape(c.measured), "ok" if c.ok else "[red]DIFFERS[/red]")
    console.print(t)
    console.print("[green]all checks pass[/green]" if r.ok else "[red]some checks failed[/red]")
