"""``kvplan cards list/show/validate`` for people. A card is printed as plain YAML on stdout (never through rich,
so a redirected ``cards show`` is a valid card file); what it implies follows as YAML comments."""

from __future__ import annotations

import sys

import yaml
from rich.console import Console

from kvplan.model.card import ModelCard
from kvplan.report.console import escape, table
from kvplan.units import fmt_bytes, fmt_int


def render_cards(rows: list[dict], console: Console) -> None:
    t = table("bundled model cards", ["name", "architecture", "attention", "layers", "params", "KV/token", "max ctx",
                                      "dtype"], left=("name", "architecture", "attention", "dtype"))
    for r in rows:
        t.add_row(r["name"], r["architecture"], r["attention"], str(r["layers"]), f"{r['params'] / 1e9:.2f} B",
                  fmt_bytes(r["kv_bytes_per_token"]), fmt_int(r["max_position_embeddings"]), r["dtype"])
    console.print(t)


def card_text(card: ModelCard, derived: dict) -> str:
    """The card's own fields as YAML (derived values left out), then '# derived' comments."""
    data = card.model_dump(mode="json", exclude_defaults=True, exclude=set(card.derived_fields()))
    body = yaml.safe_dump(data, sort_keys=False, width=float("inf"))
    comments = "".join(f"# {key}: {value}\n" for key, value in derived.items())
    return f"{body}\n# derived\n{comments}"


def render_card(card: ModelCard, derived: dict) -> None:
    sys.stdout.write(card_text(card, derived))


def render_validation(results: list[tuple[str, list[str]]], console: Console, errors: Console) -> None:
    """'ok PATH' on ``console`` for each valid card; 'error: PATH: problem' on ``errors`` (stderr) for every problem
    of every invalid one."""
    for path, problems in results:
        if not problems:
            console.print(f"[green]ok[/green] {escape(path)}")
        for problem in problems:
            errors.print(f"[red]error:[/red] {escape(problem)}")
