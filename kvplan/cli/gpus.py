"""`kvplan gpus list|show`: the GPU catalog (kvplan/cost/gpus.yaml), extended with --gpu-file.

A GPU file is YAML with one key, ``gpus``, mapping a name to its figures; an entry replaces a bundled one of the
same name::

    gpus:
      MY-GPU:
        vendor: NVIDIA
        memory_bytes: 80000000000              # as the vendor states it (decimal GB x 10^9)
        visible_memory_bytes: 85030322176      # what torch sees (plans start from it), optional; 0.5x..1.1x the above
        visible_memory_source: vLLM log total_gpu_memory (79.19GiB)
        memory_bandwidth_bytes_per_s: 3350000000000   # bytes and bytes/s: integers (3350000000000, not 3.35e12)
        peak_flops: {fp32: 6.7e13, bf16: 9.89e14, fp16: 9.89e14, fp8: 1.979e15}   # dense, not 2:4 sparse
        source: https://vendor.example/datasheet.pdf
        price_per_hour_usd: 2.5                # on-demand, per GPU-hour, optional (--sort cost)
        price_source: https://cloud.example/pricing
        price_date: "2026-11-01"
      H100-SXM:                                # a bundled GPU with only a price: just its price is yours
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

    print_json(load_gpu(name, gpu_file))
