"""`kvplan verify` (needs torch: `pip install "torch==2.13.0"`)."""

from __future__ import annotations

import sys
from typing import Annotated, Optional

import typer

from kvplan.cli import options as o


def verify(
    model: o.Model = None,
    gguf: o.Gguf = None,
    hf_config: o.HfConfig = None,
    batch: Annotated[int, typer.Option("--batch", help="Sequences run together.")] = 1,
    seq_len: Annotated[int, typer.Option("--seq-len", help="Tokens per sequence after decoding (prompt + decoded).")] = 32,
    engine: Annotated[str, typer.Option("--engine", help="ideal, hf-static or vllm: the cache the reference keeps; llamacpp: the real llama.cpp.")] = "ideal",
    kv_dtype: Annotated[Optional[str], typer.Option("--kv-dtype", help="fp32, bf16 or fp16 (model and cache).")] = None,
    device: Annotated[str, typer.Option("--device", help="cpu or cuda.")] = "cpu",
    layers: Annotated[Optional[int], typer.Option("--layers", help="Shrink to N layers (keeps the layer pattern).")] = None,
    scale: Annotated[Optional[float], typer.Option("--scale", help="Shrink widths by this factor in (0, 1].")] = None,
    decode_steps: Annotated[int, typer.Option("--decode-steps", help="Greedy decode steps after the prefill.")] = 2,
    block_size: o.BlockSize = None,
    encoder_len: o.EncoderLen = None,
    tp: Annotated[int, typer.Option("--tp", help="Tensor-parallel ranks: shard the reference model over N processes "
                                    "(torch.distributed: gloo on cpu, NCCL on cuda).")] = 1,
    pp: Annotated[int, typer.Option("--pp", help="Pipeline stages (vLLM's layer partition); N x M processes.")] = 1,
    timeout: Annotated[float, typer.Option("--timeout", help="--tp/--pp: seconds before a hung rank stops the run.")] = 300.0,
    as_json: o.Json = False,
) -> None:
    """Run the reference model (torch) and compare measured weights, KV cache, peaks and FLOPs with kvplan's;
    with --tp/--pp, per rank of the sharded model (plus logits vs the unsharded model and collective bytes).
    Exit 0 when every check passes, 1 when one fails."""
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from kvplan.cost.runtimes import get_engine

    from kvplan.planning.estimate import check_engine_block

    check_engine_block(engine, block_size)  # vllm's block; another engine's cache has none to set
    block_size = 16 if block_size is None else block_size
    if get_engine(engine).takes_llama_flags:  # the real llama.cpp on small GGUFs (kvplan.verify.llamacpp)
        _verify_llamacpp(model, gguf, hf_config, as_json)
        return
    from kvplan.model.resolve import resolve_card
    from kvplan.report.console import escape, make_console
    from kvplan.verify.run import verify as run

    card = resolve_card(model, hf_config, gguf)
    sharded = tp != 1 or pp != 1
    what = f" on {tp * pp} ranks (tp {tp} x pp {pp})" if sharded else ""
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                  console=make_console(stderr=True), transient=True,
                  disable=as_json or not sys.stderr.isatty()) as progress:  # a pipe gets no spinner, no blank line
        progress.add_task(f"building and running the reference model of {escape(card.name)} on {escape(device)}"
                          f"{what}...")
        kw = dict(batch=batch, seq_len=seq_len, engine=engine, kv_dtype=kv_dtype, device=device, layers=layers,
                  scale=scale, decode_steps=decode_steps, block_size=block_size)
        if sharded:
            from kvplan.errors import KvplanError
            from kvplan.verify.distributed import verify_sharded

            if encoder_len is not None:
                raise KvplanError("--encoder-len: the sharded verify (--tp/--pp) runs decoder-only models")
            result = verify_sharded(card, tp=tp, pp=pp, timeout=timeout, **kw)
        else:
            result = run(card, encoder_len=encoder_len, **kw)
    _write_result(result, as_json, lambda: _render_reference(result, sharded))


def _render_reference(result, sharded: bool) -> None:
    from kvplan.report.console import make_console
    from kvplan.report.verify import render_sharded, render_verify

    (render_sharded if sharded else render_verify)(result, make_console())


def _write_result(result, as_json: bool, render) -> None:
    """Print the finished run's result and exit 0 (every check passes) or 1: a Ctrl-C or SIGTERM from here on comes
    after the run has ended, so the result is printed whole and the exit code is its own (kvplan.cli.signals)."""
    from kvplan.cli.signals import result_written

    code = 0 if result.ok else 1
    with result_written(code):
        if as_json:
            from kvplan.report.jsonout import print_json

            print_json(result)
        else:
            render()
    raise typer.Exit(code)


def _verify_llamacpp(model, gguf, hf_config, as_json: bool) -> None:
    from kvplan.errors import KvplanError
    from kvplan.report.console import make_console
    from kvplan.report.verify import render_llama_verify
    from kvplan.verify.llamacpp import verify_llamacpp

    if any(x is not None for x in (model, gguf, hf_config)):
        raise KvplanError("--engine llamacpp: verify writes its own small GGUFs (dense, MoE, sliding window); "
                          "leave out --model/--gguf/--hf-config")
    result = verify_llamacpp()
    _write_result(result, as_json, lambda: render_llama_verify(result, make_console()))


def register(app: typer.Typer) -> None:
    from kvplan.cli.examples import epilog

    app.command(epilog=epilog("verify"))(verify)
