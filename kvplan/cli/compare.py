"""`kvplan compare`."""

from __future__ import annotations

from typing import Annotated

import typer

from kvplan.cli import options as o
from kvplan.cli.output import emit
from kvplan.cost.runtimes import dynamic_names


def compare(
    model: o.Model = None,
    gguf: o.Gguf = None,
    hf_config: o.HfConfig = None,
    attention: Annotated[str, typer.Option(
        "--attention", help="Layouts to compare: mha, mqa, gqa:G (G query heads per KV head), mla:R (an MLA latent "
                            "of rank R), comma-separated, e.g. mha,gqa:8,mqa.")] = ...,
    gpu: o.Gpu = None,
    gpu_file: o.GpuFile = None,
    tp: Annotated[int, typer.Option("--tp", help="Plan each layout on this many GPUs of --gpu (tensor parallel).")] = 1,
    seq_len: Annotated[int, typer.Option("--seq-len", help="Tokens each sequence holds.")] = 4096,
    batch: Annotated[int, typer.Option("--batch", help="Sequences decoded together.")] = 1,
    engine: Annotated[str, typer.Option("--engine", help="The runtime, one of: " + ", ".join(dynamic_names())
                                        + " (those without a preallocated static cache).")] = "ideal",
    kv_dtype: o.KvDtype = None,
    weight_dtype: o.WeightDtype = None,
    enable_prefix_caching: o.EnablePrefixCaching = None,
    as_json: o.Json = False,
) -> None:
    """The model under several attention layouts: KV bytes, decode traffic, parameters, max batch, latency bounds."""
    from kvplan.model.resolve import resolve_card
    from kvplan.planning.compare import compare as run

    result = run(resolve_card(model, hf_config, gguf), attention=attention, seq_len=seq_len, batch=batch, gpu=gpu,
                 engine=engine, kv_dtype=kv_dtype, weight_dtype=weight_dtype, gpu_file=gpu_file, tp=tp,
                 enable_prefix_caching=enable_prefix_caching)
    from kvplan.report.compare import render_compare

    emit(result, as_json, render_compare)


def register(app: typer.Typer) -> None:
    from kvplan.cli.examples import epilog

    app.command(epilog=epilog("compare"))(compare)
