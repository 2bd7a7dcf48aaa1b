"""`kvplan report` (charts need matplotlib: `pip install 'kvplan[report]'`)."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Annotated, Optional

import typer

from kvplan.cli import options as o
from kvplan.errors import clip_text
from kvplan.cost.runtimes import dynamic_names

ENGINE_HELP = (f"The serving engine, one of: {', '.join(dynamic_names())}; a version as vllm==0.11 (modelled: "
               f"{o.VERSIONS_HELP}; {o.V0_SUFFIX_HELP}; default the newest) or sglang==0.5.6 "
               f"({o.SGLANG_VERSIONS_HELP}).")


def report(
    model: Annotated[list[str], typer.Option("--model", "-m", help="Card name(s), .yaml path(s) or Hub ids ORG/NAME; repeat or comma-separate.")],
    gpu: Annotated[Optional[list[str]], typer.Option(
        "--gpu", help="GPU(s) to size for; repeat or comma-separate. Default: A100-80GB, H100-SXM, H200.")] = None,
    gpu_file: o.GpuFile = None,
    tp: Annotated[str, typer.Option("--tp", help="Tensor-parallel sizes to plan for each GPU, comma-separated, e.g. 1,2,4.")] = "1",
    max_model_len: Annotated[str, typer.Option("--max-model-len", metavar="TOKENS", help="Tokens per request "
                                               "(prompt + output); 32k = 32,000, 32K = 32,768.")] = "8192",
    concurrency: Annotated[int, typer.Option("--concurrency", help="Requests held at once.")] = 1,
    engine: Annotated[str, typer.Option("--engine", help=ENGINE_HELP)] = "vllm",
    output: Annotated[Path, typer.Option("--output", "-o", help="report.html (one self-contained file) or report.md "
                                                                "(charts as SVG files beside it).")] = ...,
    rate: Annotated[Optional[float], typer.Option("--rate", help="Adds kvplan disagg's section: requests/s (with "
                                                  "--isl, --osl, --ttft-ms, --tpot-ms), on the first --gpu.")] = None,
    isl: Annotated[Optional[int], typer.Option("--isl", help="disagg: prompt tokens per request.")] = None,
    osl: Annotated[Optional[int], typer.Option("--osl", help="disagg: output tokens per request.")] = None,
    ttft_ms: Annotated[Optional[float], typer.Option("--ttft-ms", help="disagg: time-to-first-token target.")] = None,
    tpot_ms: Annotated[Optional[float], typer.Option("--tpot-ms", help="disagg: time-per-output-token target.")] = None,
    **serving,  # kvplan plan's flags that shape a layout's plan (--pp, --dp, --kv-dtype, ...): PLAN_FLAGS below
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

    from kvplan.cli.plan import default_pp, serving_keywords

    plan_kw = serving_keywords({**PLAN_DEFAULTS, **serving})
    plan_kw.update(pp=default_pp(plan_kw, serving.get("pp")), dp=1 if serving.get("dp") is None else serving["dp"])
    with Progress(len(models), label="planning models") as progress:  # a bar on a terminal's stderr after a second
        rep = build_report(models, gpus=gpus, tp=tuple(parse_int_axis(tp, "--tp")),
                           max_model_len=parse_tokens("--max-model-len", max_model_len),
                           concurrency=concurrency, engine=engine, gpu_file=gpu_file, disagg=given or None,
                           advance=progress.advance, **plan_kw)
    from kvplan.report.docformat import to_html, write_markdown
    from kvplan.report.document import build_blocks

    with Progress(len(rep.models), label="charting models") as progress:  # a bar on a terminal's stderr once it runs over a second
        blocks = build_blocks(rep, progress.advance)
    if suffix in (".md", ".markdown"):
        write_markdown(output, blocks)
    else:
        from kvplan.files import write_atomic

        write_atomic(output, to_html(blocks, f"kvplan report: {', '.join(models)}"))
    make_console(stderr=True).print(f"wrote {escape(clip_text(str(output), 2000))}")


def _plan_flags() -> list[inspect.Parameter]:
    """``kvplan plan``'s parameters that shape one layout's plan (kvplan.cli.plan.PLAN_ONLY apart), as keyword
    parameters of ``report``: the same flags, help and defaults, read by the same ``serving_keywords``."""
    from kvplan.cli.plan import PLAN_ONLY, plan

    own = inspect.signature(report).parameters
    return [p.replace(kind=inspect.Parameter.KEYWORD_ONLY)
            for name, p in inspect.signature(plan, eval_str=True).parameters.items()
            if name not in PLAN_ONLY and name not in own]


PLAN_FLAGS = _plan_flags()
PLAN_DEFAULTS = {p.name: p.default for p in PLAN_FLAGS}
report.__signature__ = inspect.signature(report, eval_str=True).replace(parameters=[
    p for p in inspect.signature(report, eval_str=True).parameters.values() if p.kind != p.VAR_KEYWORD] + PLAN_FLAGS)


def register(app: typer.Typer) -> None:
    from kvplan.cli.examples import epilog

    app.command(epilog=epilog("report"))(report)
