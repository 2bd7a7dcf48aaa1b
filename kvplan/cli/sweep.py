"""`kvplan sweep`."""

from __future__ import annotations

import sys
from typing import Annotated, Optional

import typer

from kvplan.cli import options as o
from kvplan.errors import clip_text

Axis = Optional[str]
_RANGE_HELP = "a comma list or a range START..STOP+STEP / START..STOP*FACTOR, e.g. 1..256*2"


def sweep(
    model: Annotated[list[str], typer.Option("--model", "-m", help="Card name(s), .yaml path(s) or Hub ids ORG/NAME; repeat or comma-separate.")],
    batch: Annotated[str, typer.Option("--batch", help=f"Sequences held at once: {_RANGE_HELP}.")] = "1",
    seq_len: Annotated[str, typer.Option("--seq-len", help=f"Tokens per sequence: {_RANGE_HELP}; "
                                                 "32k = 32,000, 32K = 32,768 (1k..32k*2).")] = ...,
    kv_dtype: Annotated[Axis, typer.Option("--kv-dtype", help="K/V dtypes, comma list; default: the engine's.")] = None,
    weight_dtype: Annotated[Axis, typer.Option("--weight-dtype", help="Weight dtypes, comma list.")] = None,
    attention: Annotated[Axis, typer.Option(
        "--attention", help="Layouts, comma list: card (the card's own), mha, mqa, gqa:G, mla:R.")] = None,
    engine: Annotated[str, typer.Option("--engine", help=f"Engines, comma list, each {o.ENGINES_HELP}.")] = "ideal",
    gpu: Annotated[Axis, typer.Option("--gpu", help="GPUs, comma list: adds roofline columns (slower per row).")] = None,
    gpu_file: o.GpuFile = None,
    encoder_len: Annotated[Axis, typer.Option("--encoder-len", help=f"Encoder tokens (encoder-decoder): {_RANGE_HELP}.")] = None,
    tp: Annotated[Axis, typer.Option("--tp", help="Tensor-parallel sizes (capacity plan columns; needs --gpu).")] = None,
    pp: Annotated[Axis, typer.Option("--pp", help="Pipeline-parallel sizes (capacity plan columns; needs --gpu).")] = None,
    max_model_len: Annotated[Axis, typer.Option(
        "--max-model-len", help="Capacity plan length(s), as --seq-len (32k = 32,000); default each row's --seq-len.")] = None,
    block_size: o.SweepBlockSize = None,
    enable_prefix_caching: o.EnablePrefixCaching = None,
    fmt: Annotated[Optional[str], typer.Option(
        "--format", help="csv, jsonl, markdown or table; default from -o's suffix, else table on a terminal, csv "
                         "in a pipe.")] = None,
    output: Annotated[Optional[str], typer.Option("--output", "-o", help="Write here (atomically) instead of stdout.")] = None,
) -> None:
    """estimate over a grid of scenarios: one row per combination, columns are estimate's JSON keys with dots."""
    from kvplan.planning.sweep import sweep as run
    from kvplan.report.tabular import pick_format, write_sweep

    if block_size is not None and tp is None and pp is None and max_model_len is None:  # the KV columns alone
        from kvplan.planning.estimate import check_engine_block
        from kvplan.planning.sweep.grid import parse_name_axis

        for name in parse_name_axis(engine, "--engine"):
            check_engine_block(name, block_size)

    result = run(model, batch=batch, seq_len=seq_len, kv_dtype=kv_dtype, weight_dtype=weight_dtype,
                 attention=attention, engine=engine, gpu=gpu, encoder_len=encoder_len, tp=tp, pp=pp,
                 max_model_len=max_model_len, block_size=block_size, gpu_file=gpu_file,
                 enable_prefix_caching=enable_prefix_caching)
    form = pick_format(fmt, output, sys.stdout.isatty())
    if output is None:
        write_sweep(form, result, sys.stdout)
        return
    from kvplan.files import open_atomic
    from kvplan.report.console import escape, make_console

    with open_atomic(output, newline="") as f:
        n = write_sweep(form, result, f)
    make_console(stderr=True).print(f"wrote {escape(clip_text(str(output), 2000))} ({n:,} rows, {form})")


def register(app: typer.Typer) -> None:
    from kvplan.cli.examples import epilog

    app.command(epilog=epilog("sweep"))(sweep)
