"""`kvplan gpus list|show`: the GPU catalog (kvplan/cost/gpus.yaml), extended with --gpu-file.

A GPU file is YAML with one key, ``gpus``, mapping a name to its figures; an entry replaces a bundled one of the
same name::

    gpus:
      MY-GPU:
        vendor: NVIDIA
        # as the vendor states it (decimal GB x 10^9)
        memory_bytes: 80000000000
        # optional: what torch sees (plans start from it), 0.5x..1.1x
        # memory_bytes, with where it was read
        visible_memory_bytes: 85030322176
        visible_memory_source: vLLM log total_gpu_memory (79.19GiB)
        # bytes and bytes/s are integers (3350000000000, not 3.35e12)
        memory_bandwidth_bytes_per_s: 3350000000000
        # dense peaks, not 2:4 sparse
        peak_flops: {fp32: 6.7e13, bf16: 9.89e14, fp16: 9.89e14,
                     fp8: 1.979e15}
        source: https://vendor.example/datasheet.pdf
        # optional: on-demand USD per GPU-hour (--sort cost)
        price_per_hour_usd: 2.5
        price_source: https://cloud.example/pricing
        price_date: "2026-11-01"
      # a bundled GPU with only a price: just its price is yours
      H100-SXM:
        price_per_hour_usd: 1.85
"""

from __future__ import annotations

from typing import Annotated

import typer

from kvplan.cli import options as o
from kvplan.cli.examples import epilog
from kvplan.cli.output import emit

app = typer.Typer(help="The GPU catalog (memory, bandwidth, peak FLOP/s, interconnect, sources); extend it with "
                       "--gpu-file (format: kvplan gpus --help).",
                  no_args_is_help=True, epilog=__doc__.split("\n\n", 1)[1].replace("::", ":"))


@app.command("list", epilog=epilog("gpus list"))
def gpus_list(gpu_file: o.GpuFile = None, as_json: o.Json = False) -> None:
    """The GPUs kvplan knows: memory, bandwidth, dense peak FLOP/s, source."""
    from kvplan.cost.hardware import load_gpus

    from kvplan.report.gpus import render_gpus

    emit(list(load_gpus(gpu_file).values()), as_json, render_gpus)


@app.command("show", epilog=epilog("gpus show"))
def gpus_show(name: Annotated[str, typer.Argument(help="GPU name, e.g. H100-SXM.")], gpu_file: o.GpuFile = None) -> None:
    """One GPU's figures as JSON (exact integers)."""
    from kvplan.cost.hardware import load_gpu
    from kvplan.report.jsonout import print_json

    from kvplan.errors import KvplanError

    try:
        gpu = load_gpu(name, gpu_file)
    except KvplanError as exc:  # the catalog names its --gpu flag; here the GPU is the NAME argument
        raise KvplanError(str(exc).replace("--gpu: ", "NAME: ", 1)) from None
    print_json(gpu)
