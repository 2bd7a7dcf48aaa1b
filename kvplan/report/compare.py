"""Rendering ``kvplan compare`` for people: one rich table, one row per K/V layout, and what grouping buys."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from kvplan.plan.compare import CompareResult
from kvplan.units import fmt_bytes, fmt_int


def _signed_millions(n: int) -> str:
    return "0" if n == 0 else f"{n / 1e6:+,.1f} M"


def _giga(n: int) -> str:
    return f"{n / 1e9:,.1f} G"


def render_compare(r: CompareResult, console: Console) -> None:
    gpu = f" on {r.gpu}" if r.gpu else ""
    title = (f"kvplan compare: {r.model}, batch {r.batch} x {r.seq_len} tokens{gpu} "
             f"(engine {r.engine}, KV {r.kv_dtype}, weights {r.weight_dtype})")
    t = Table(title=title, title_justify="left")
    for col in ("layout", "kind", "KV heads", "KV/token", "KV total", "decode bytes/step", "attn FLOP/step",
                "params vs card"):
        t.add_column(col, justify="left" if col in ("layout", "kind") else "right")
    if r.gpu:
        t.add_column("max batch", justify="right")
        t.add_column("time/token", justify="right")
    for row in r.rows:
        cells = [row.layout, row.attention.split(" (")[0], str(row.num_kv_heads), fmt_bytes(row.kv_bytes_per_token),
                 fmt_bytes(row.kv_total_bytes), fmt_bytes(row.decode_bytes_per_step),
                 _giga(row.decode_attention_flops), _signed_millions(row.params_delta_vs_card)]
        if r.gpu:
            tpot = row.time_per_output_token_s
            cells += [fmt_int(row.max_batch) if row.max_batch is not None else "-",
                      f"{tpot * 1e3:.2f} ms" if tpot is not None else "-"]
        t.add_row(*cells)
    console.print(t)
    console.print(r.summary, highlight=False)
    for note in r.notes:
        console.print(f"note: {note}", highlight=False, style="dim")
