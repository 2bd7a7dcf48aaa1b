"""`kvplan report` (charts need matplotlib: `pip install 'kvplan[report]'`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from kvplan.cli import options as o


def report(
    model: Annotated[list[str], typer.Option("--model", "-m", help="Card name(s), .yaml path(s) or Hub ids ORG/NAME; repeat or comma-separate.")],
    gpu: Annotated[Optional[list[str]], typer.Option(
        "--gpu", help="GPU(s) to size for; repeat or comma-separate. Default: A100-80GB, H100-SXM, H200.")] = None,
    gpu_file: o.GpuFile = None,
    tp: Annotated[str, typer.Option("--tp", help="Tensor-parallel sizes to plan for each GPU, comma-separated, e.g. 1,2,4.")] = "1",
    max_model_len: Annotated[str, typer.Option("--max-model-len", metavar="TOKENS", help="Tokens per request "
                                               "(prompt + output); 32k = 32,000, 32K = 32,768.")] = "8192",
    concurrency: Annotated[int, typer.Option("--concurrency", help="Requests held at once.")] = 1,
    engine: Annotated[str, typer.Option("--engine", help=f"The serving engine, {o.ENGINES_HELP}.")] = "vllm",
    output: Annotated[Path, typer.Option("--output", "-o", help="report.html (one self-contained file) or report.md "
                                                                "(charts as SVG files beside it).")] = ...,
    rate: Annotated[Optional[float], typer.Option("--rate", help="Adds kvplan disagg's section: requests/s (with "
                                                  "--isl, --osl, --ttft-ms, --tpot-ms), on the first --gpu.")] = None,
    isl: Annotated[Optional[int], typer.Option("--isl", help="disagg: prompt tokens per request.")] = None,
    osl: Annotated[Optional[int], typer.Option("--osl", help="disagg: output tokens per request.")] = None,
    ttft_ms: Annotated[Optional[float], typer.Option("--ttft-ms", help="disagg: time-to-first-token target.")] = None,
    tpot_ms: Annotated[Optional[float], typer.Option("--tpot-ms", help="disagg: time-per-output-token target.")] = None,
) -> None:
    """A capacity-planning document: verdict, memory per GPU, KV against context, layouts, roofline, formulas."""
    from kvplan.errors import KvplanError
    from kvplan.planning.report_data import build_report
    from kvplan.report import charts
    from kvplan.report.console import escape, make_console

    suffix = output.suffix.lower()
    if suffix not in (".html", ".htm", ".md", ".markdown"):
        raise KvplanError(f"--output: {output} should end in .html or .md")
    if not output.parent.is_dir() or output.is_dir():
        raise KvplanError(f"{output}: cannot write: {'is a folder' if output.is_dir() else 'no such folder'}")
    charts.require()
    models = [p.strip() for m in model for p in m.split(",") if p.strip()]
    gpus = [p.strip() for g in gpu for p in g.split(",") if p.strip()] if gpu else None
    from kvplan.planning.sweep.grid import parse_int_axis
    from kvplan.units import parse_tokens

    targets = dict(rate=rate, isl=isl, osl=osl, ttft_ms=ttft_ms, tpot_ms=tpot_ms)
    given = {k: v for k, v in targets.items() if v is not None}
    if given and len(given) < len(targets):
        missing = next(k for k, v in targets.items() if v is None)
        raise KvplanError(f"--{missing.replace('_', '-')}: the disagg section needs --rate, --isl, --osl, --ttft-ms "
                          "and --tpot-ms together")
    from kvplan.report.tabular import Progress

    with Progress(len(models), label="planning models") as progress:  # a bar on a terminal's stderr after a second
        rep = build_report(models, gpus=gpus, tp=tuple(parse_int_axis(tp, "--tp")),
                           max_model_len=parse_tokens("--max-model-len", max_model_len),
                           concurrency=concurrency, engine=engine, gpu_file=gpu_file, disagg=given or None,
                           advance=progress.advance)
    from kvplan.report.docformat import to_html, write_markdown
    from kvplan.report.document import build_blocks

    with Progress(len(rep.models), label="charting models") as progress:  # a bar on a terminal's stderr once it runs over a second
        blocks = build_blocks(rep, progress.advance)
    if suffix in (".md", ".markdown"):
        write_markdown(output, blocks)
    else:
        from kvplan.files import write_atomic

        write_atomic(output, to_html(blocks, f"kvplan report: {', '.join(models)}"))
    make_console(stderr=True).print(f"wrote {escape(str(output))}")


def register(app: typer.Typer) -> None:
    from kvplan.cli.examples import epilog

    app.command(epilog=epilog("report"))(report)
