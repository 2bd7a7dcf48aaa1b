"""The charts of ``kvplan report`` as SVG text, drawn with matplotlib (the optional ``report`` extra).

matplotlib is imported inside ``_plt`` only, so ``estimate``, ``sweep`` and every other command never load it; a
kvplan without it gets one line naming the install command. Colours are the Okabe-Ito palette (distinguishable with
every common colour-vision deficiency), and lines also differ by marker. Byte axes use IEC units (KiB, MiB, GiB).
Each SVG is made inline-ready: no XML prolog or DOCTYPE (the DTD is an external reference), a viewBox and no fixed
size so it scales to the page, and ids salted per chart so several charts can share one HTML document.
"""

from __future__ import annotations

import html
import io
import math
import re

from kvplan.errors import KvplanError

INSTALL = "pip install 'kvplan[report]'"
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")


def _plt():
    try:
        import matplotlib
    except ImportError:
        raise KvplanError(f"kvplan report draws its charts with matplotlib, which is not installed: {INSTALL}") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"svg.fonttype": "none", "font.size": 10, "axes.grid": True, "grid.alpha": 0.3,
                         "axes.spines.top": False, "axes.spines.right": False, "font.family": "sans-serif",
                         "axes.prop_cycle": matplotlib.cycler(color=PALETTE)})
    return plt


def require() -> None:
    """Fail early (before any computing or writing) when matplotlib is missing."""
    _plt()


def _svg(fig, chart_id: str, title: str) -> str:
    plt = _plt()
    plt.rcParams["svg.hashsalt"] = chart_id
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None, "Creator": None})
    plt.close(fig)
    text = buf.getvalue()
    text = text[text.index("<svg"):]
    # no fixed size: the viewBox scales; drawn at most at its natural size (matplotlib's points are 4/3 px), so its
    # 10-point text stays the size of the report's tables instead of growing with the page's width
    natural = re.search(r'<svg[^>]*?\swidth="([\d.]+)pt"', text)
    text = re.sub(r'(<svg[^>]*?)\s+width="[^"]*"\s+height="[^"]*"', r"\1", text, count=1)
    if natural:
        text = text.replace("<svg", f'<svg style="max-width: min(100%, {float(natural[1]) * 4 / 3:.0f}px)"', 1)
    text = re.sub(r'id="([^"]+)"', lambda m: f'id="{chart_id}-{m[1]}"', text)
    text = re.sub(r'(href|clip-path)="(url\()?#([^")]+)', lambda m: f'{m[1]}="{m[2] or ""}#{chart_id}-{m[3]}', text)
    text = re.sub(r"url\(#(?!" + re.escape(chart_id) + r"-)([^)]+)\)", lambda m: f"url(#{chart_id}-{m[1]})", text)
    return text.replace("<svg", f'<svg role="img" aria-labelledby="{chart_id}-title"', 1).replace(
        ">", f'><title id="{chart_id}-title">{html.escape(title)}</title>', 1)


IEC = (("B", 1), ("KiB", 2**10), ("MiB", 2**20), ("GiB", 2**30), ("TiB", 2**40))


def iec_unit(values) -> tuple[str, int]:
    """The largest IEC unit the biggest value reaches: plot bytes / divisor against '... (GiB)'."""
    top = max([v for v in values if v] or [1])
    return next((name, div) for name, div in reversed(IEC) if top >= div)


def _log2_x(ax, lengths: list[int]) -> None:
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator(lengths))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v / 1024:g}Ki" if v >= 1024 else f"{v:g}"))
    ax.tick_params(axis="x", labelrotation=45)
    ax.set_xlim(lengths[0], lengths[-1])


def _pow2_ticks(ax, lengths: list[int]) -> None:
    from matplotlib.ticker import FuncFormatter, MultipleLocator

    step = 1 << max(0, (lengths[-1] // 4).bit_length() - 1)  # a power of two: 4 to 8 ticks
    ax.xaxis.set_major_locator(MultipleLocator(step))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v / 1024:g}Ki" if v >= 1024 else f"{v:g}"))
    ax.set_xlim(0, lengths[-1])


def memory_breakdown(chart_id: str, title: str, gpus: list[str], parts: dict[str, list[int]],
                     capacity: list[int]) -> str:
    """Stacked horizontal bars, one per GPU: each part's bytes, with the GPU's memory marked."""
    plt = _plt()
    # constrained layout with the legend "outside lower center": it sits under the axis label at any bar count
    fig, ax = plt.subplots(figsize=(7, 1.2 + 0.55 * len(gpus)), layout="constrained")
    unit, div = iec_unit(capacity)
    left = [0.0] * len(gpus)
    for i, (label, raw) in enumerate(parts.items()):
        values = [v / div for v in raw]
        ax.barh(gpus, values, left=left, label=label, color=PALETTE[i % len(PALETTE)], hatch=("", "//", "..", "xx")[i % 4],
                edgecolor="white")
        left = [a + b for a, b in zip(left, values)]
    ax.scatter([c / div for c in capacity], gpus, marker="|", s=400, color="black", label="GPU memory", zorder=3)
    ax.set_xlabel(f"{unit} per GPU (IEC: 1 GiB = 2^30 B)")
    ax.set_title(title, loc="left")
    ax.invert_yaxis()
    handles, labels = ax.get_legend_handles_labels()
    order = sorted(range(len(labels)), key=lambda i: labels[i] == "GPU memory")  # the parts first, the mark last
    fig.legend([handles[i] for i in order], [labels[i] for i in order], loc="outside lower center", ncol=4,
               frameon=False)
    return _svg(fig, chart_id, title)


def lines(chart_id: str, title: str, lengths: list[int], series: dict[str, list[int]], *, ylabel: str,
          y_bytes: bool, marks: dict[str, int] | None = None, log_x: bool = True, log_y: bool = False,
          dashed: tuple[str, ...] = ()) -> str:
    """One line per series against context length, with optional vertical markers; the ``dashed`` series (parts
    of a total) are drawn dashed. Byte series are drawn in the IEC unit their largest value reaches; zeros are left
    out of a log axis."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 3.8))
    unit, div = iec_unit([v for vs in series.values() for v in vs]) if y_bytes else ("", 1)
    for i, (label, raw) in enumerate(series.items()):
        values = [v / div if v or not log_y else float("nan") for v in raw]
        ax.plot(lengths, values, marker=MARKERS[i % len(MARKERS)], markersize=4, label=label, color=PALETTE[i % len(PALETTE)],
                linestyle="--" if label in dashed else "-")
    for j, (label, x) in enumerate((marks or {}).items()):
        ax.axvline(x, color="0.4", linestyle=(":", "--")[j % 2], linewidth=1, label=label)
    if log_x:
        _log2_x(ax, lengths)
    else:
        _pow2_ticks(ax, lengths)
    if log_y and any(v > 0 for vs in series.values() for v in vs):
        ax.set_yscale("log")
    else:
        ax.set_ylim(bottom=0)
    scale = "log2 scale" if log_x else "linear scale"
    ax.set_xlabel(f"context length (tokens per sequence, {scale}; Ki = 1,024)")
    ax.set_ylabel(ylabel.format(unit=unit))
    ax.set_title(title, loc="left")
    ax.legend(frameon=False, fontsize=8)
    return _svg(fig, chart_id, title)


def bars(chart_id: str, title: str, labels: list[str], values: list[int], *, xlabel: str, notes: list[str]) -> str:
    """Horizontal bars of byte values, each annotated (e.g. with the max batch it allows)."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 0.7 + 0.5 * len(labels)))
    unit, div = iec_unit(values)
    values = [v / div for v in values]
    ax.barh(labels, values, color=[PALETTE[i % len(PALETTE)] for i in range(len(labels))])
    for y, (v, text) in enumerate(zip(values, notes)):
        ax.annotate(text, (v, y), xytext=(4, 0), textcoords="offset points", va="center", fontsize=8)
    ax.set_xlabel(xlabel.format(unit=unit))
    ax.set_title(title, loc="left")
    ax.invert_yaxis()
    ax.set_xlim(right=max(values) * 1.35 if values else 1)
    return _svg(fig, chart_id, title)


def roofline(chart_id: str, title: str, roofs: list[tuple[str, float, float]],
             points: list[tuple[str, str, int | str, float, float]]) -> str:
    """Attainable FLOP/s against arithmetic intensity (log-log): each GPU's roof min(peak, I x bandwidth) and the
    prefill / decode points (gpu, phase, batch or the point's label, intensity, FLOP/s); a label 'd64/2' is one
    micro-batch's decode step of a batch of 64 in 2 (a pipeline's, as the plan's TPOT)."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 4.2))
    xs = [p[3] for p in points] + [peak / bw for _, peak, bw in roofs]
    lo, hi = min(xs) / 4, max(xs) * 4
    colour = {}
    for i, (gpu, peak, bw) in enumerate(roofs):
        colour[gpu] = PALETTE[i % len(PALETTE)]
        grid = [lo * (hi / lo) ** (k / 200) for k in range(201)]
        ax.plot(grid, [min(peak, x * bw) for x in grid], color=colour[gpu], linewidth=1.5, label=f"{gpu} roof")
    for gpu, phase, batch, x, y in points:
        ax.scatter([x], [y], color=colour[gpu], marker="o" if phase == "prefill" else "s",
                   facecolors="none" if phase == "decode" else colour[gpu], s=30, zorder=3)
    for text, x, y, dy in roof_labels(points):
        ax.annotate(text, (x, y), xytext=(0, dy), textcoords="offset points", fontsize=7, ha="center")
    ax.scatter([], [], color="0.3", marker="o", label="prefill (p = batch)")
    ax.scatter([], [], facecolors="none", edgecolors="0.3", marker="s", label="decode step (d = batch)")
    split = next((str(p[2]) for p in points if "/" in str(p[2])), None)
    if split:  # 'd64/2'
        batch, micro = split[1:].split("/")
        ax.scatter([], [], marker="none", label=f"{split}: one micro-batch's step of a batch of {batch} in {micro} "
                                                "(pipeline)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP per byte moved, log scale)")
    ax.set_ylabel("attainable FLOP/s (log scale)")
    ax.set_title(title, loc="left")
    ax.legend(frameon=False, fontsize=8, loc="lower right")
    return _svg(fig, chart_id, title)


def roof_labels(points: list[tuple[str, str, int | str, float, float]]) -> list[tuple[str, float, float, int]]:
    """Each batch labelled once per phase ('p8', 'd64': the GPUs share the intensities; a label given as text, e.g.
    'd64/2', as it is), as (text, x, y, vertical offset in points): above its highest point, except that a label
    whose neighbour of the same phase lies within a quarter decade of intensity goes under its lowest point, so that
    close batches ('p32', 'p64') never overlap."""
    span: dict[tuple[str, int], tuple[float, float, float]] = {}  # x, lowest y, highest y
    for _, phase, batch, x, y in points:
        _, lo, hi = span.get((phase, batch), (x, y, y))
        span[(phase, batch)] = (x, min(lo, y), max(hi, y))
    out = []
    for phase in dict.fromkeys(p for p, _ in span):
        row = sorted(((b, *v) for (p, b), v in span.items() if p == phase), key=lambda t: t[1])
        below = False
        for i, (batch, x, lo, hi) in enumerate(row):
            below = i > 0 and math.log10(x / row[i - 1][1]) < 0.25 and not below  # alternate while they crowd
            text = batch if isinstance(batch, str) else f"{phase[0]}{batch}"
            out.append((text, x, lo, -12) if below else (text, x, hi, 5))
    return out
