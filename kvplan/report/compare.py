"""Rendering ``kvplan compare`` for people: one table, one row per attention layout, and what grouping buys."""

from __future__ import annotations

from rich.console import Console

from kvplan.planning.compare import CompareResult, LayoutRow
from kvplan.report.console import escape, ms, table
from kvplan.units import fmt_bytes, fmt_int


def _signed_millions(n: int) -> str:
    return "0" if n == 0 else f"{n / 1e6:+,.1f} M"


def _giga(n: int) -> str:
    return f"{n / 1e9:,.1f} G"


def _gpu_cells(row: LayoutRow) -> list[str]:
    if row.max_batch == 0:
        return ["0", "no fit", "-"]
    cells = [fmt_int(row.max_batch) if row.max_batch is not None else "-"]
    for t in (row.time_per_output_token_s, row.time_to_first_token_s):
        cells.append(ms(t) if t is not None else "-")
    return cells


def render_compare(r: CompareResult, console: Console) -> None:
    """One row per layout in at most 80 columns: the K/V heads beside the kind, KV per token and in total, the
    parameter change; with a GPU the plan's max batch and the latency bounds. Every figure (decode bytes per step
    too) is in --json."""
    where = "" if not r.gpu else f" on {r.gpu}" if r.tp == 1 else f" on {r.tp}x {r.gpu} (TP {r.tp})"
    title = (f"kvplan compare: {escape(r.model)}, batch {r.batch} x {fmt_int(r.seq_len)} tokens{escape(where)} "
             f"({r.engine}, KV {r.kv_dtype}, weights {r.weight_dtype}; attention FLOPs per decode step: "
             f"{_giga(r.rows[0].decode_attention_flops)} for MHA/GQA/MQA)")
    cols = ["layout", "kind", "KV/token", "KV total", "params"]
    if r.gpu:
        cols += ["max batch", "TPOT", "TTFT"]
    t = table(title, cols, left=("layout", "kind"), compact=True)
    for row in r.rows:
        kind = row.attention.split(" (")[0] + (f" {row.num_kv_heads}" if row.num_kv_heads else "")
        cells = [escape(row.layout), kind, fmt_bytes(row.kv_bytes_per_token), fmt_bytes(row.kv_total_bytes),
                 _signed_millions(row.params_delta_vs_card)]
        t.add_row(*cells, *(_gpu_cells(row) if r.gpu else []))
    console.print(t)
    console.print(r.summary)
    for text in r.notes:
        console.print(f"note: {escape(text)}", style="dim")
