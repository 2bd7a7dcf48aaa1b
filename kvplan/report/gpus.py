"""``kvplan gpus list`` for people."""

from __future__ import annotations

from rich.console import Console

from kvplan.cost.hardware import GPU
from kvplan.report.console import escape, table
from kvplan.units import fmt_bytes


def _tflops(x: float | None) -> str:
    return "-" if x is None else f"{x / 1e12:,.0f}"


def render_gpus(gpus: list[GPU], console: Console) -> None:
    t = table("GPU catalog (dense peak TFLOP/s)", ["name", "vendor", "memory", "visible", "bandwidth", "bf16", "fp16", "fp8",
                                                   "source"], left=("name", "vendor", "source"))
    for g in gpus:
        p = g.peak_flops
        t.add_row(escape(g.name), escape(g.vendor), fmt_bytes(g.memory_bytes),
                  "-" if g.visible_memory_bytes is None else fmt_bytes(g.visible_memory_bytes),
                  f"{g.memory_bandwidth_bytes_per_s / 1e12:.2f} TB/s", _tflops(p.bf16), _tflops(p.fp16),
                  _tflops(p.fp8), escape(g.source))
    console.print(t)
