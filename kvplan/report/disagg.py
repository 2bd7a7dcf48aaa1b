"""``kvplan disagg`` for people: the two pools, the hand-over and the link, the aggregated comparison."""

from __future__ import annotations

from rich.console import Console

from kvplan.planning.disagg import DisaggResult
from kvplan.report.console import escape, ms, note, print_command, table
from kvplan.units import fmt_bytes, fmt_int


def render_disagg(r: DisaggResult, console: Console) -> None:
    t = table(f"kvplan disagg: {escape(r.model)}, {r.rate:g} req/s of {fmt_int(r.isl)} + {fmt_int(r.osl)} tokens, "
              f"TTFT <= {r.ttft_ms:g} ms, TPOT <= {r.tpot_ms:g} ms ({r.engine})",
              ["pool", "GPU", "TP", "PP", "workers", "GPUs", "batch", "concurrency/worker", "TTFT >=", "TPOT >=",
               "req/s/worker"], left=("pool", "GPU"))
    for p in (r.prefill, r.decode):
        t.add_row(p.role, escape(p.gpu), str(p.tp), str(p.pp), str(p.replicas), str(p.gpus), str(p.batch),
                  f"{p.max_concurrency:,.1f}", ms(p.ttft_ms / 1e3, r.ttft_ms / 1e3) if p.ttft_ms is not None else "-",
                  ms(p.tpot_ms / 1e3, r.tpot_ms / 1e3) if p.tpot_ms is not None else "-", f"{p.requests_per_s:,.2f}")
    console.print(t)
    console.print(f"[bold]ratio[/bold] {r.ratio} prefill:decode workers, {r.total_gpus} GPUs")
    console.print(f"[bold]hand-over[/bold] {fmt_int(r.kv_transfer_bytes_per_request)} B "
                  f"({fmt_bytes(r.kv_transfer_bytes_per_request)}) per request; {r.kv_transfer_bytes_per_s / 1e9:,.2f} "
                  f"GB/s over all links; one transfer within {r.transfer_budget_ms:.0f} ms needs "
                  f"{r.link_bytes_per_s_needed / 1e9:,.2f} GB/s")
    print_command(console, "prefill launch", r.prefill.launch_command)
    print_command(console, "decode launch", r.decode.launch_command)
    for text in r.notes:
        note(console, text)
