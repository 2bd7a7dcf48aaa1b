"""The `kvplan` command line: each command parses flags, calls one library function, and hands the result to report."""

from __future__ import annotations

import sys
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
    model: str = typer.Option(..., "--model", "-m", help="Bundled card name (llama-2-7b) or path to a card .yaml."),
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
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON (exact bytes)."),
) -> None:
    """KV cache bytes (per token, per sequence, whole batch), weights, and the formula with numbers filled in."""
    from kvplan.memory import estimate as run
    from kvplan import report

    try:
        result = run(model, batch=batch, seq_len=seq_len, encoder_len=encoder_len, kv_dtype=kv_dtype,
                     weight_dtype=weight_dtype, engine=engine, max_cache_len=max_cache_len, block_size=block_size,
                     kv_heads=kv_heads, attention=attention)
    except KvplanError as exc:
        _fail(exc)
    report.print_json(result) if as_json else report.render_estimate(result, console)


@cards_app.command("list")
def cards_list(as_json: bool = typer.Option(False, "--json", help="Print as JSON.")) -> None:
    """The bundled cards, with attention kind, parameters and KV bytes per token."""
    from kvplan import report
    from kvplan.catalog import bundled_names, load_card
    from kvplan.params import count_params
    from kvplan.summary import kv_bytes_per_token

    rows = []
    for name in bundled_names():
        card = load_card(name)
        rows.append(report.card_row(card, count_params(card).total, kv_bytes_per_token(card)))
    report.print_json(rows) if as_json else report.render_cards(rows, console)


@cards_app.command("show")
def cards_show(name: str = typer.Argument(..., help="Card name or path."),
               as_json: bool = typer.Option(False, "--json", help="Print as JSON.")) -> None:
    """One card as YAML, followed by what it implies (derived values)."""
    from kvplan import report
    from kvplan.catalog import load_card
    from kvplan.summary import derived_values

    try:
        card = load_card(name)
    except KvplanError as exc:
        _fail(exc)
    derived = derived_values(card)
    if as_json:
        report.print_json({"card": card.model_dump(mode="json"), "derived": derived})
    else:
        report.render_card(card, derived, console)


@cards_app.command("schema")
def cards_schema() -> None:
    """The JSON Schema of a model card, for editors and validators."""
    from kvplan import report
    from kvplan.cards import ModelCard

    report.print_json(ModelCard.model_json_schema())


def main() -> None:
    app()


if __name__ == "__main__":
    sys.exit(main())
