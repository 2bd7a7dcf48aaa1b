"""`kvplan verify` (needs torch: `pip install "torch==2.13.0"`)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from kvplan.cli import options as o


def verify(
    model: o.Model = None,
    hf_config: o.HfConfig = None,
    batch: Annotated[int, typer.Option("--batch", help="Sequences run together.")] = 1,
    seq_len: Annotated[int, typer.Option("--seq-len", help="Tokens per sequence after decoding (prompt + decoded).")] = 32,
    engine: Annotated[str, typer.Option("--engine", help="ideal, hf-static or vllm: the cache the reference keeps.")] = "ideal",
    kv_dtype: Annotated[Optional[str], typer.Option("--kv-dtype", help="fp32, bf16 or fp16 (model and cache).")] = None,
    device: Annotated[str, typer.Option("--device", help="cpu or cuda.")] = "cpu",
    layers: Annotated[Optional[int], typer.Option("--layers", help="Shrink to N layers (keeps the layer pattern).")] = None,
    scale: Annotated[Optional[float], typer.Option("--scale", help="Shrink widths by this factor in (0, 1].")] = None,
    decode_steps: Annotated[int, typer.Option("--decode-steps", help="Greedy decode steps after the prefill.")] = 2,
    block_size: o.BlockSize = 16,
    encoder_len: o.EncoderLen = None,
    as_json: o.Json = False,
) -> None:
    """Run the reference model (torch) and compare measured weights, KV cache, peaks and FLOPs with kvplan's.
    Exit 0 when every check passes, 1 when one fails."""
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from kvplan.model.resolve import resolve_card
    from kvplan.report.console import escape, make_console
    from kvplan.verify.run import verify as run

    card = resolve_card(model, hf_config)
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                  console=make_console(stderr=True), transient=True, disable=as_json) as progress:
        progress.add_task(f"building and running the reference model of {escape(card.name)} on {escape(device)}...")
        result = run(card, batch=batch, seq_len=seq_len, engine=engine, kv_dtype=kv_dtype, device=device,
                     layers=layers, scale=scale, decode_steps=decode_steps, block_size=block_size,
                     encoder_len=encoder_len)
    if as_json:
        from kvplan.report.jsonout import print_json

        print_json(result)
    else:
        from kvplan.report.verify import render_verify

        render_verify(result, make_console())
    raise typer.Exit(0 if result.ok else 1)


def register(app: typer.Typer) -> None:
    app.command()(verify)
