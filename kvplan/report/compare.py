"""Rendering ``kvplan compare`` for people: one table, one row per attention layout, and what grouping buys."""

from __future__ import annotations

from rich.console import Console

from kvplan.planning.compare import CompareResult, LayoutRow
from kvplan.report.console import escape, table
from kvplan.units import fmt_bytes, fmt_int


def _signed_millions(n: int) -> str:
    return "0" if n == 0 else f"{n / 1e6:+,.1f} M"


def _giga(n: int) -> str:
    return f"{n / 1e9:,.1f} G"


def _gpu_cells(row: LayoutRow) -> list[str]:
    if row.max_batch == 0:
        return ["0", "does not fit", "-"]
    cells = [fmt_int(row.max_batch) if row.max_batch is not None else "-"]
    for t in (row.time_per_output_token_s, row.time_to_first_token_s):
        cells.append(f"{t * 1e3:.2f} ms" if t is not None else "-")
    return cells


def render_compare(r: CompareResult, console: Console) -> None:
    gpu = f" on {r.gpu}" if r.gpu else ""
    title = (f"kvplan compare: {escape(r.model)}, batch {r.batch} x {r.seq_len} tokens{gpu} "
             f"(engine {r.engine}, KV {r.kv_dtype}, weights {r.weight_dtype})")
    cols = ["layout", "kind", "KV heads", "KV/token", "KV total", "decode bytes/step", "attn FLOP/step",
            "params vs card"]
    if r.gpu:
        cols += ["max batch", "TPOT at batch", "TTFT, 1 request"]
    t = table(title, cols, left=("layout", "kind"))
    for row in r.rows:
        cells = [row.layout, row.attention.split(" (")[0], str(row.num_kv_heads or "-"),
                 fmt_bytes(row.kv_bytes_per_token), fmt_bytes(row.kv_total_bytes), fmt_bytes(row.decode_bytes_per_step),
                 _giga(row.decode_attention_flops), _signed_millions(row.params_delta_vs_card)]
        t.add_row(*cells, *(_gpu_cells(row) if r.gpu else []))
    console.print(t)
    console.print(r.summary)
    for text in r.notes:
        console.print(f"note: {escape(text)}", style="dim")
