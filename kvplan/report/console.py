"""Rendering results for people (rich tables, IEC units) and for programs (JSON with exact bytes)."""

from __future__ import annotations

import sys

from pydantic import BaseModel
from rich.console import Console
from rich.table import Table

from kvplan.model.card import ModelCard
from kvplan.plan.estimate import Estimate
from kvplan.units import fmt_bytes, fmt_int


def print_json(obj: BaseModel | dict | list) -> None:
    """JSON on stdout, never through rich (no markup, no wrapping)."""
    import json

    data = obj.model_dump(mode="json") if isinstance(obj, BaseModel) else obj
    sys.stdout.write(json.dumps(data, indent=2) + "\n")


def _bytes(n: int) -> str:
    return f"{fmt_bytes(n)} ({fmt_int(n)} B)"


def render_estimate(r: Estimate, console: Console) -> None:
    i, m, kv, w = r.inputs, r.model, r.kv_cache, r.weights
    t = Table(title=f"kvplan estimate: {m.name}", show_header=False, title_justify="left")
    t.add_column(style="bold")
    t.add_column()
    t.add_row("model", f"{m.name} ({m.architecture}, {m.num_layers} layers)")
    t.add_row("attention", m.attention_detail + ("  (what-if layout)" if m.layout_changed else ""))
    t.add_row("engine", f"{kv.engine}: {kv.engine_rule}")
    enc = f", encoder {i.encoder_len} tokens" if i.encoder_len else ""
    t.add_row("inputs", f"batch {i.batch} x {i.seq_len} tokens{enc}; KV {i.kv_dtype}, weights {i.weight_dtype}")
    t.add_row("KV per token", _bytes(kv.bytes_per_token) + " (one sequence, all layers)")
    t.add_row("KV per sequence", _bytes(kv.bytes_per_sequence))
    t.add_row("KV total", _bytes(kv.total_bytes) + f" (batch of {i.batch})")
    t.add_row("weights", f"{fmt_int(w.params)} params, {w.dtype}: {_bytes(w.bytes)}")
    if w.active_params != w.params:
        t.add_row("active params", f"{fmt_int(w.active_params)} per token (routed experts in use)")
    t.add_row("weights + KV", _bytes(r.total_bytes))
    console.print(t)
    if kv.groups:
        console.print(_groups_table(r))
        console.print("[bold]formula[/bold]")
        for g in kv.groups:
            console.print(f"  {g.formula}", highlight=False, soft_wrap=True)
        if kv.scale_bytes:
            console.print(f"  + per-layer scales {kv.scale_bytes} B", highlight=False)
    if r.flops:
        console.print(_flops_table(r))
    if r.roofline:
        console.print(_roofline_table(r.roofline))
    for note in r.notes:
        console.print(f"[yellow]note:[/yellow] {note}", highlight=False)


def _flops_table(r: Estimate) -> Table:
    t = Table(title=f"FLOPs (prefill of {r.inputs.prompt_len} tokens, decode step at {r.inputs.seq_len}; batch "
                    f"{r.inputs.batch})", title_justify="left")
    for col in ("phase", "total (dense)", "attention core", "LM head", "total (causal)", "MLA mode"):
        t.add_column(col, justify="left" if col in ("phase", "MLA mode") else "right")
    for phase, f in r.flops.items():
        t.add_row(phase, f"{f['total']:.3e}", f"{f['attention_core']:.3e}", f"{f['lm_head']:.3e}",
                  f"{f['causal_total']:.3e}", str(f.get("mla_mode") or "-"))
    return t


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3g} ms"


def _roofline_table(roof: dict) -> Table:
    t = Table(title=f"roofline lower bounds on {roof['gpu']} ({roof['compute_dtype']}, mfu {roof['mfu']}, "
                    f"mbu {roof['mbu']})", title_justify="left")
    for col in ("phase", "FLOPs", "moved", "FLOP/B", "compute", "memory", "bound", "by"):
        t.add_column(col, justify="left" if col in ("phase", "by") else "right")
    for phase in ("prefill", "decode", ):
        p = roof["prefill" if phase == "prefill" else "decode_step"]
        t.add_row(phase, f"{p['flops']:.3g}", fmt_bytes(p["bytes_moved"]),
                  f"{p['arithmetic_intensity_flops_per_byte']:.3g}", _ms(p["compute_time_s"]),
                  _ms(p["memory_time_s"]), _ms(p["time_s"]), p["bound"])
    t.caption = (f"TTFT >= {roof['time_to_first_token_s'] * 1e3:.2f} ms, TPOT >= "
                 f"{roof['time_per_output_token_s'] * 1e3:.2f} ms, decode <= {roof['decode_tokens_per_s']:.0f} tok/s; "
                 f"fits in {fmt_bytes(roof['gpu_memory_bytes'])}: {'yes' if roof['fits_in_memory'] else 'NO'}")
    return t


def _groups_table(r: Estimate) -> Table:
    t = Table(title="KV cache by layer kind", title_justify="left")
    for col in ("kind", "layers", "window", "B/token/layer", "positions held", "total"):
        t.add_column(col, justify="left" if col == "kind" else "right")
    for g in r.kv_cache.groups:
        t.add_row(g.kind, str(g.layers), str(g.window or "-"), fmt_int(g.bytes_per_token), fmt_int(g.positions_held),
                  fmt_bytes(g.total_bytes))
    return t


def card_row(card: ModelCard, params: int, kv_bytes_per_token: int) -> dict:
    return {"name": card.name, "architecture": card.architecture, "attention": card.attention_kind,
            "layers": card.num_layers, "params": params, "kv_bytes_per_token": kv_bytes_per_token,
            "max_position_embeddings": card.max_position_embeddings, "dtype": card.dtype}


def render_cards(rows: list[dict], console: Console) -> None:
    t = Table(title="bundled model cards", title_justify="left")
    for col in ("name", "architecture", "attention", "layers", "params", "KV/token", "max ctx", "dtype"):
        t.add_column(col, justify="right" if col in ("layers", "params", "KV/token", "max ctx") else "left")
    for r in rows:
        t.add_row(r["name"], r["architecture"], r["attention"], str(r["layers"]), f"{r['params'] / 1e9:.2f} B",
                  fmt_bytes(r["kv_bytes_per_token"]), fmt_int(r["max_position_embeddings"]), r["dtype"])
    console.print(t)


def render_card(card: ModelCard, derived: dict, console: Console) -> None:
    import yaml

    text = yaml.safe_dump(card.model_dump(mode="json", exclude_defaults=True, exclude=set(card.derived_fields())),
                          sort_keys=False)
    console.print(text.rstrip(), highlight=False, markup=False)
    console.print("\n[bold]# derived[/bold]")
    for key, value in derived.items():
        console.print(f"# {key}: {value}", highlight=False, markup=False)
