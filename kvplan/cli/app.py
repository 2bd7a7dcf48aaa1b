"""The `kvplan` command line: each command parses flags, calls one library function, and hands the result to report."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from kvplan.errors import KvplanError

app = typer.Typer(help="Size the KV cache, weights and memory of transformer LLMs, exactly.",
                  no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)
cards_app = typer.Typer(help="List, show and validate model cards.", no_args_is_help=True)
app.add_typer(cards_app, name="cards")
console = Console()


def _fail(exc: KvplanError) -> None:
    from rich.markup import escape

    Console(stderr=True, soft_wrap=True).print(f"[red]error:[/red] {escape(str(exc))}", highlight=False)
    raise typer.Exit(2)


@app.command()
def estimate(
    model: Optional[str] = typer.Option(None, "--model", "-m", help="Bundled card name (llama-2-7b) or a card .yaml."),
    hf_config: Optional[str] = typer.Option(None, "--hf-config", help="A Hugging Face config.json, or its folder."),
    batch: int = typer.Option(1, help="Sequences held at once."),
    seq_len: int = typer.Option(..., "--seq-len", help="Tokens each sequence holds (prompt + generated)."),
    encoder_len: Optional[int] = typer.Option(None, "--encoder-len", help="Encoder tokens (encoder-decoder models)."),
    kv_dtype: Optional[str] = typer.Option(None, "--kv-dtype", help="fp32, fp16, bf16, fp8_e4m3, fp8_e5m2, int8, int4."),
    weight_dtype: Optional[str] = typer.Option(None, "--weight-dtype", help="Weight dtype; default: the card's."),
    kv_heads: Optional[int] = typer.Option(None, "--kv-heads", help="What-if: this many KV heads."),
    attention: Optional[str] = typer.Option(None, "--attention", help="What-if layout: mha, mqa or gqa:G."),
    engine: str = typer.Option("ideal", help="ideal, hf-dynamic, hf-static or vllm."),
    max_cache_len: Optional[int] = typer.Option(None, "--max-cache-len", help="hf-static: preallocated positions."),
    block_size: int = typer.Option(16, "--block-size", help="vllm: tokens per KV block."),
    prompt_len: Optional[int] = typer.Option(None, "--prompt-len", help="Prefill length for FLOPs; default --seq-len."),
    gpu: Optional[str] = typer.Option(None, "--gpu", help="Roofline bounds on this GPU (e.g. H100-SXM)."),
    gpu_file: Optional[str] = typer.Option(None, "--gpu-file", help="A YAML file of extra GPUs."),
    mfu: float = typer.Option(1.0, "--mfu", help="Efficiency factor on peak FLOP/s (0..1]."),
    mbu: float = typer.Option(1.0, "--mbu", help="Efficiency factor on memory bandwidth (0..1]."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON (exact bytes)."),
) -> None:
    """KV cache bytes (per token, per sequence, whole batch), weights, and the formula with numbers filled in."""
    from kvplan.report import console as report
    from kvplan.model.catalog import resolve_card
    from kvplan.plan.estimate import estimate as run

    try:
        result = run(resolve_card(model, hf_config), batch=batch, seq_len=seq_len, encoder_len=encoder_len, kv_dtype=kv_dtype,
                     weight_dtype=weight_dtype, engine=engine, max_cache_len=max_cache_len, block_size=block_size,
                     kv_heads=kv_heads, attention=attention, prompt_len=prompt_len, gpu=gpu, gpu_file=gpu_file,
                     mfu=mfu, mbu=mbu)
    except KvplanError as exc:
        _fail(exc)
    report.print_json(result) if as_json else report.render_estimate(result, console)


@cards_app.command("list")
def cards_list(as_json: bool = typer.Option(False, "--json", help="Print as JSON.")) -> None:
    """The bundled cards, with attention kind, parameters and KV bytes per token."""
    from kvplan.report import console as report
    from kvplan.model.catalog import bundled_names, load_card
    from kvplan.cost.params import count_params
    from kvplan.plan.cards import kv_bytes_per_token

    rows = []
    for name in bundled_names():
        card = load_card(name)
        rows.append(report.card_row(card, count_params(card).total, kv_bytes_per_token(card)))
    report.print_json(rows) if as_json else report.render_cards(rows, console)


@cards_app.command("show")
def cards_show(name: str = typer.Argument(..., help="Card name or path."),
               as_json: bool = typer.Option(False, "--json", help="Print as JSON.")) -> None:
    """One card as YAML, followed by what it implies (derived values)."""
    from kvplan.report import console as report
    from kvplan.model.catalog import load_card
    from kvplan.plan.cards import derived_values

    try:
        card = load_card(name)
    except KvplanError as exc:
        _fail(exc)
    derived = derived_values(card)
    if as_json:
        report.print_json({"card": card.model_dump(mode="json"), "derived": derived})
    else:
        report.render_card(card, derived, console)


@cards_app.command("import")
def cards_import(
    path: str = typer.Argument(..., help="A config.json, or a folder holding one (a hub snapshot)."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write the card here instead of printing it."),
    name: Optional[str] = typer.Option(None, "--name", help="Card name; default: from the config's _name_or_path."),
    force: bool = typer.Option(False, "--force", help="Overwrite an existing --output file."),
) -> None:
    """Turn a Hugging Face config.json into a validated kvplan card (defaults it assumed are named in comments)."""
    from kvplan.files import write_atomic
    from kvplan.model.hf.config import card_yaml, import_hf_config

    try:
        if output is not None and output.exists() and not force:
            raise KvplanError(f"{output}: exists; pass --force to overwrite it")
        card, assumed = import_hf_config(path, name=name)
    except KvplanError as exc:
        _fail(exc)
    text = card_yaml(card, assumed)
    if output is None:
        sys.stdout.write(text)
        return
    write_atomic(output, text)
    Console(stderr=True).print(f"wrote {output} ({card.name}, {card.attention_label})", highlight=False)


@cards_app.command("schema")
def cards_schema() -> None:
    """The JSON Schema of a model card, for editors and validators."""
    from kvplan.report import console as report
    from kvplan.model.card import ModelCard

    report.print_json(ModelCard.model_json_schema())


@app.command()
def compare(
    model: Optional[str] = typer.Option(None, "--model", "-m", help="Bundled card name or path to a card .yaml."),
    hf_config: Optional[str] = typer.Option(None, "--hf-config", help="A Hugging Face config.json, or its folder."),
    attention: str = typer.Option(..., "--attention", help="Layouts to compare, e.g. mha,gqa:8,mqa."),
    gpu: Optional[str] = typer.Option(None, "--gpu", help="GPU for max batch and time per token (e.g. H100-SXM)."),
    gpu_file: Optional[str] = typer.Option(None, "--gpu-file", help="YAML of extra/overriding GPU entries."),
    seq_len: int = typer.Option(4096, "--seq-len", help="Tokens each sequence holds."),
    batch: int = typer.Option(1, help="Sequences decoded together."),
    engine: str = typer.Option("ideal", help="ideal, hf-dynamic or vllm."),
    kv_dtype: Optional[str] = typer.Option(None, "--kv-dtype", help="KV cache dtype; default: the card's."),
    weight_dtype: Optional[str] = typer.Option(None, "--weight-dtype", help="Weight dtype; default: the card's."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON (exact bytes)."),
) -> None:
    """The model under several K/V-head layouts: KV bytes, decode traffic, parameters, max batch, time per token."""
    from kvplan.report import console as report
    from kvplan.model.catalog import resolve_card
    from kvplan.plan.compare import compare as run
    from kvplan.report.compare import render_compare

    try:
        result = run(resolve_card(model, hf_config), attention=attention, seq_len=seq_len, batch=batch, gpu=gpu, engine=engine,
                     kv_dtype=kv_dtype, weight_dtype=weight_dtype, gpu_file=gpu_file)
    except KvplanError as exc:
        _fail(exc)
    report.print_json(result) if as_json else render_compare(result, console)


@app.command()
def verify(
    model: Optional[str] = typer.Option(None, "--model", "-m", help="Bundled card name or path to a card .yaml."),
    hf_config: Optional[str] = typer.Option(None, "--hf-config", help="A Hugging Face config.json, or its folder."),
    batch: int = typer.Option(1, help="Sequences run together."),
    seq_len: int = typer.Option(32, "--seq-len", help="Tokens per sequence after decoding (prompt + decoded)."),
    engine: str = typer.Option("ideal", help="ideal, hf-static or vllm: which cache the reference model keeps."),
    kv_dtype: Optional[str] = typer.Option(None, "--kv-dtype", help="fp32, bf16 or fp16 (model and cache)."),
    device: str = typer.Option("cpu", help="cpu or cuda."),
    layers: Optional[int] = typer.Option(None, "--layers", help="Shrink to N layers (keeps the layer pattern)."),
    scale: Optional[float] = typer.Option(None, "--scale", help="Shrink widths by this factor in (0, 1]."),
    decode_steps: int = typer.Option(2, "--decode-steps", help="Greedy decode steps after the prefill."),
    block_size: int = typer.Option(16, "--block-size", help="vllm: tokens per KV block."),
    encoder_len: Optional[int] = typer.Option(None, "--encoder-len", help="Encoder tokens (encoder-decoder)."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON (exact integers)."),
) -> None:
    """Run the reference model (torch) and compare measured weights, KV cache, peaks and FLOPs with kvplan's."""
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from kvplan.verify.run import verify as run
    from kvplan.report.verify import print_verify_json, render_verify

    try:
        with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                      console=Console(stderr=True), transient=True, disable=as_json) as progress:
            progress.add_task(f"building and running the reference model of {model or hf_config} on {device}...")
            from kvplan.model.catalog import resolve_card

            result = run(resolve_card(model, hf_config), batch=batch, seq_len=seq_len, engine=engine, kv_dtype=kv_dtype, device=device,
                         layers=layers, scale=scale, decode_steps=decode_steps, block_size=block_size,
                         encoder_len=encoder_len)
    except KvplanError as exc:
        _fail(exc)
    print_verify_json(result) if as_json else render_verify(result, console)
    raise typer.Exit(0 if result.ok else 1)


def main() -> None:
    app()


if __name__ == "__main__":
    sys.exit(main())
