"""`kvplan disagg`: prefill and decode pools for a request rate under TTFT and TPOT targets."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from kvplan.cli import options as o


def disagg(
    model: o.Model = None, hf_config: o.HfConfig = None,
    gpu: Annotated[str, typer.Option("--gpu", help="A GPU of the catalog (`kvplan gpus list`), e.g. H100-SXM.")] = ...,
    rate: Annotated[float, typer.Option("--rate", help="Requests per second to serve.")] = ...,
    isl: Annotated[int, typer.Option("--isl", help="Input (prompt) tokens per request.")] = ...,
    osl: Annotated[int, typer.Option("--osl", help="Output tokens per request.")] = ...,
    ttft_ms: Annotated[float, typer.Option("--ttft-ms", help="Time-to-first-token target.")] = ...,
    tpot_ms: Annotated[float, typer.Option("--tpot-ms", help="Time-per-output-token target.")] = ...,
    engine: o.DisaggEngine = "vllm", gpu_file: o.GpuFile = None, gpu_memory: o.GpuMemory = None,
    platform: o.Platform = None,
    kv_dtype: o.KvDtype = None, weight_dtype: o.WeightDtype = None,
    max_gpus_per_worker: Annotated[int, typer.Option("--max-gpus-per-worker", help="Largest TP per worker.")] = 8,
    prefill_factor: Annotated[Optional[float], typer.Option(
        "--prefill-factor", help="aiconfigurator's prefill efficiency (default 0.9).")] = None,
    decode_factor: Annotated[Optional[float], typer.Option(
        "--decode-factor", help="aiconfigurator's decode efficiency (default 0.92).")] = None,
    ttft_factor: Annotated[Optional[float], typer.Option(
        "--ttft-factor", help="aiconfigurator's TTFT queueing correction (default 1.8).")] = None,
    as_json: o.Json = False,
) -> None:
    """Disaggregated serving: prefill and decode workers, the K/V each request hands over and the link it needs."""
    from kvplan.model.resolve import resolve_card
    from kvplan.planning import disagg as d

    card = resolve_card(model, hf_config)
    factors = {k: v for k, v in dict(prefill_factor=prefill_factor, decode_factor=decode_factor,
                                     ttft_factor=ttft_factor).items() if v is not None}
    r = d.disagg(card, gpu=gpu, rate=rate, isl=isl, osl=osl, ttft_ms=ttft_ms, tpot_ms=tpot_ms, engine=engine,
                 gpu_file=gpu_file, gpu_memory=gpu_memory, platform=platform, kv_dtype=kv_dtype, weight_dtype=weight_dtype,
                 max_gpus_per_worker=max_gpus_per_worker, **factors)
    if as_json:
        from kvplan.report.jsonout import print_json

        print_json(r)
        return
    from kvplan.report.console import make_console
    from kvplan.report.disagg import render_disagg

    render_disagg(r, make_console())


def register(app: typer.Typer) -> None:
    from kvplan.cli.examples import epilog

    app.command(epilog=epilog("disagg"))(disagg)
