"""``kvplan gpus list`` for people: one narrow table (it reads at 80 columns), each GPU's source beneath it."""

from __future__ import annotations

from rich.console import Console

from kvplan.cost.hardware import GPU
from kvplan.report.console import escape, table
from kvplan.units import fmt_bytes


def _tflops(x: float | None) -> str:
    return "-" if x is None else f"{x / 1e12:,.0f}"


def _half(g: GPU) -> str:
    """bf16 and fp16 peaks, one figure where they are equal (every bundled GPU)."""
    p = g.peak_flops
    return _tflops(p.bf16) if p.bf16 == p.fp16 else f"{_tflops(p.bf16)} / {_tflops(p.fp16)}"


def render_gpus(gpus: list[GPU], console: Console) -> None:
    t = table("GPU catalog (dense peak TFLOP/s; sources below)",
              ["name", "vendor", "stated", "visible", "bandwidth", "bf16/fp16", "fp8", "$/h"], left=("name", "vendor"),
              compact=True)
    for g in gpus:
        t.add_row(escape(g.name), escape(g.vendor), g.stated_memory,
                  "-" if g.visible_memory_bytes is None else fmt_bytes(g.visible_memory_bytes),
                  f"{g.memory_bandwidth_bytes_per_s / 1e12:.2f} TB/s", _half(g), _tflops(g.peak_flops.fp8),
                  "-" if g.price_per_hour_usd is None else f"{g.price_per_hour_usd:,.2f}")
    console.print(t)
    console.print("stated: the vendor's memory (decimal GB); visible: the total torch sees, which plans start from")
    windows = [f"{g.name} {fmt_bytes(g.windows_visible_memory_bytes)}" for g in gpus
               if g.windows_visible_memory_bytes is not None]
    if console.width < 120 and len(gpus) > 12:  # a terminal: the table, and where each figure's source is
        console.print("sources: `kvplan gpus show NAME` (each figure, the --platform windows total too, with where "
                      "it was read); piped, this list prints them all", overflow="fold")
        return
    if windows:
        console.print(f"under Windows and WSL2 (--platform windows, the whole board): {escape(', '.join(windows))}",
                      overflow="fold")
    console.print("sources:")
    by_source: dict[str, list[str]] = {}
    for g in gpus:
        by_source.setdefault(g.source, []).append(g.name)
    for source, names in by_source.items():
        console.print(f"  {escape(', '.join(names))}: {escape(source)}", overflow="fold")
    priced = [g for g in gpus if g.price_per_hour_usd is not None]
    if priced:
        console.print("$/h: public on-demand USD per GPU-hour (`kvplan gpus show NAME` gives its page and date):")
        by_date: dict[str, list[str]] = {}
        for g in priced:
            by_date.setdefault(g.price_date or "your --gpu-file", []).append(g.name)
        for date, names in by_date.items():
            console.print(f"  read {escape(date)}: {escape(', '.join(names))}", overflow="fold")
