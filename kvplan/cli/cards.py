"""`kvplan cards list|show|validate|import|schema`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from kvplan.cli import options as o
from kvplan.errors import clip_text
from kvplan.cli.examples import epilog
from kvplan.cli.output import emit

app = typer.Typer(help="List, show, validate and import model cards.", no_args_is_help=True)


@app.command("list", epilog=epilog("cards list"))
def cards_list(as_json: o.Json = False) -> None:
    """The bundled cards, with attention kind, parameters and KV bytes per token."""
    from kvplan.model.catalog import bundled_names, load_card
    from kvplan.planning.cards import card_row

    from kvplan.report.cards import render_cards

    emit([card_row(load_card(name)) for name in bundled_names()], as_json, render_cards)


@app.command("show", epilog=epilog("cards show"))
def cards_show(name: Annotated[str, typer.Argument(help="Card name or path.")], as_json: o.Json = False) -> None:
    """One card as YAML (a valid card file when redirected), followed by what it implies as comments."""
    from kvplan.model.catalog import load_card
    from kvplan.planning.cards import derived_values

    card = load_card(name)
    derived = derived_values(card)
    if as_json:
        from kvplan.report.jsonout import print_json

        print_json({"card": card.model_dump(mode="json"), "derived": derived})
        return
    from kvplan.report.cards import render_card

    render_card(card, derived)


@app.command("validate", epilog=epilog("cards validate"))
def cards_validate(paths: Annotated[list[str], typer.Argument(help="Card files (or bundled names) to check.")]) -> None:
    """Check cards against the schema: 'ok PATH' per valid card, every problem of every invalid one on stderr (one
    line each, naming the file and the field); exit 0 when all are valid, 2 when one is not."""
    from kvplan.model.catalog import validate_cards
    from kvplan.report.cards import render_validation
    from kvplan.report.console import make_console

    results = validate_cards(paths)
    render_validation(results, make_console(), make_console(stderr=True))
    if any(problems for _, problems in results):
        raise typer.Exit(2)


@app.command("import", epilog=epilog("cards import"))
def cards_import(
    path: Annotated[str, typer.Argument(
        help="A config.json, a folder holding one, a Hugging Face Hub id ORG/NAME\\[@REVISION], or a .gguf file.")],
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="Write the card here instead of printing it.")] = None,
    name: Annotated[Optional[str], typer.Option("--name", help="Card name; default: the config's _name_or_path.")] = None,
    force: Annotated[bool, typer.Option("--force", metavar="", help="Overwrite an existing --output file.")] = False,
) -> None:
    """Turn a Hugging Face config.json into a validated kvplan card (defaults it assumed are named in comments)."""
    from kvplan.files import is_dir, is_file, write_atomic
    from kvplan.model.hf.checkpoint import parse_hub_id
    from kvplan.model.hf.config import card_yaml, import_hf_config
    from kvplan.report.console import escape, make_console

    if path.endswith(".gguf"):  # a GGUF's metadata and tensor table (kvplan[gguf])
        from kvplan.errors import KvplanError
        from kvplan.files import shown
        from kvplan.model.gguf_card import card_from_gguf

        try:
            card = card_from_gguf(path, name)
        except KvplanError as exc:  # the GGUF readers name --gguf (plan, estimate); here the file is the argument
            message = str(exc)
            raise KvplanError(f"{shown(path)}: {message.removeprefix('--gguf: ')}") from None
        text = card_yaml(card, [])
    elif not (is_file(path) or is_dir(path)) and parse_hub_id(path):  # a local path wins over a Hub id
        from kvplan.model.hf.hub import hub_card_yaml, load_hub_model

        hub = load_hub_model(path, name=name)
        card, text = hub.card, hub_card_yaml(hub)
    else:
        card, assumed = import_hf_config(path, name=name)
        text = card_yaml(card, assumed)
    if output is None:
        sys.stdout.write(text)
        return
    write_atomic(output, text, exclusive=not force)
    make_console(stderr=True).print(f"wrote {escape(clip_text(str(output), 2000))} ({card.name}, {escape(card.attention_label)})")


@app.command("schema", epilog=epilog("cards schema"))
def cards_schema() -> None:
    """The JSON Schema of a model card, for editors and validators."""
    from kvplan.model.card import ModelCard
    from kvplan.report.jsonout import print_json

    print_json(ModelCard.model_json_schema())
