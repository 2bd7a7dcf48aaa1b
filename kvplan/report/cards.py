"""``kvplan cards list/show/validate`` for people. A card is printed as plain YAML on stdout (never through rich,
so a redirected ``cards show`` is a valid card file); what it implies follows as YAML comments."""

from __future__ import annotations

import sys

import yaml
from rich.console import Console

from kvplan.model.card import ModelCard
from kvplan.report.console import escape, table
from kvplan.units import fmt_bytes, fmt_int


_SHORT = {"decoder-only": "decoder", "encoder-only": "encoder", "encoder-decoder": "enc-dec", "bfloat16": "bf16",
          "float16": "fp16", "float32": "fp32"}


def _max_ctx(n: int) -> str:
    """A state-space card's positions are unbounded (its card says 2**31 - 1): "none"."""
    return "none" if n >= 2**31 - 1 else fmt_int(n)


def render_cards(rows: list[dict], console: Console) -> None:
    t = table("bundled model cards", ["name", "kind", "attn", "layers", "params", "KV/token", "max ctx",
                                      "dtype"], left=("name", "kind", "attn", "dtype"), compact=True)
    t.padding = (0, 0, 0, 0)  # the rule's column gap alone: 80 columns hold the widest row
    for r in rows:  # short words for the kind and dtype, so the table reads at 80 columns (--json has the full ones)
        t.add_row(r["name"], _SHORT.get(r["architecture"], r["architecture"]), r["attention"], str(r["layers"]),
                  f"{r['params'] / 1e9:.2f} B", fmt_bytes(r["kv_bytes_per_token"]),
                  _max_ctx(r["max_position_embeddings"]), _SHORT.get(r["dtype"], r["dtype"]))
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
