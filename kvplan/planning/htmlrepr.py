"""Small stdlib-only HTML tables for notebooks: ``_repr_html_`` of ``Estimate``, ``CompareResult`` and ``PlanResult``.

They live in the plan layer on purpose (no import of kvplan.report, no matplotlib): a notebook shows a result as a
table without the report extra. ``kvplan report`` is the full document with charts.
"""

from __future__ import annotations

from html import escape

from kvplan.units import fmt_bytes, fmt_int

_STYLE = "border-collapse:collapse;font-family:sans-serif;font-size:0.9em"
_CELL = "padding:2px 8px;border-bottom:1px solid #ddd;text-align:{}"


def exact_bytes(n: int) -> str:
    return f"{fmt_bytes(n)} ({fmt_int(n)} B)"


def key_value_table(title: str, rows: list[tuple[str, str]], notes: list[str] = ()) -> str:
    """A two-column table: label, value."""
    body = "".join(f'<tr><th style="{_CELL.format("left")}">{escape(k)}</th>'
                   f'<td style="{_CELL.format("left")}">{escape(v)}</td></tr>' for k, v in rows)
    foot = "".join(f"<li>{escape(n)}</li>" for n in notes)
    return (f'<table style="{_STYLE}"><caption style="text-align:left;font-weight:bold">{escape(title)}</caption>'
            f"{body}</table>" + (f'<ul style="font-size:0.85em">{foot}</ul>' if foot else ""))


def grid_table(title: str, columns: list[str], rows: list[list[str]]) -> str:
    """A table with a header row; cells right-aligned except the first."""
    head = "".join(f'<th style="{_CELL.format("left")}">{escape(c)}</th>' for c in columns)
    body = "".join("<tr>" + "".join(f'<td style="{_CELL.format("left" if i == 0 else "right")}">{escape(v)}</td>'
                                    for i, v in enumerate(row)) + "</tr>" for row in rows)
    return (f'<table style="{_STYLE}"><caption style="text-align:left;font-weight:bold">{escape(title)}</caption>'
            f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")


def estimate_html(r) -> str:
    i, m, kv, w = r.inputs, r.model, r.kv_cache, r.weights
    rows = [("model", f"{m.name} ({m.architecture}, {m.num_layers} layers)"), ("attention", m.attention_detail),
            ("engine", f"{kv.engine}: {kv.engine_rule}"),
            ("inputs", f"batch {i.batch} x {fmt_int(i.seq_len)} tokens; KV {i.kv_dtype}, weights {i.weight_dtype}"),
            ("KV per token", exact_bytes(kv.bytes_per_token)), ("KV per sequence", exact_bytes(kv.bytes_per_sequence)),
            ("KV total", exact_bytes(kv.total_bytes)), ("weights", f"{fmt_int(w.params)} params: {exact_bytes(w.bytes)}"),
            ("weights + KV", exact_bytes(r.total_bytes))]
    rows += [("formula", g.formula) for g in kv.groups]
    if r.roofline:
        roof = r.roofline
        rows += [(f"TTFT bound ({roof.gpu})", f"{roof.time_to_first_token_s * 1e3:.4g} ms"),
                 (f"TPOT bound ({roof.gpu})", f"{roof.time_per_output_token_s * 1e3:.4g} ms"),
                 ("fits in GPU memory", "yes" if roof.fits_in_memory else "no")]
    return key_value_table(f"kvplan estimate: {m.name}", rows, r.notes)


def compare_html(c) -> str:
    rows = [[r.layout, r.attention, fmt_bytes(r.kv_bytes_per_token), fmt_bytes(r.kv_total_bytes), fmt_int(r.params),
             "-" if r.max_batch is None else fmt_int(r.max_batch),
             "-" if r.time_per_output_token_s is None else f"{r.time_per_output_token_s * 1e3:.4g} ms"]
            for r in c.rows]
    title = f"kvplan compare: {c.model}, batch {c.batch} x {fmt_int(c.seq_len)} tokens, {c.engine}" + (
        f", {c.gpu}" if c.gpu else "")
    return grid_table(title, ["layout", "attention", "KV/token", "KV total", "params", "max batch", "TPOT bound"],
                      rows) + f'<p style="font-size:0.85em">{escape(c.summary)}</p>'


def plan_html(p) -> str:
    g, kv, i = p.per_gpu, p.kv_cache, p.inputs
    rows = [("verdict", p.verdict), ("launch", p.launch_command),
            ("weights per GPU", exact_bytes(g.weights_bytes)),
            ("activation peak", exact_bytes(g.activation_bytes) + (" (estimated)" if g.activation_estimated else "")),
            ("overheads", exact_bytes(g.overhead_bytes)), ("KV pool per GPU", exact_bytes(kv.available_bytes)),
            ("KV per token per GPU", exact_bytes(g.kv_bytes_per_token)),
            ("blocks", f"{fmt_int(kv.num_blocks)} of {kv.block_size} tokens"), ("tokens", fmt_int(kv.tokens)),
            ("max concurrency", f"{p.max_concurrency:.2f}"), ("fits", "yes" if p.fits else "no"),
            ("longest max_model_len that fits", fmt_int(p.max_model_len_fit))]
    return key_value_table(f"kvplan plan: {i.model} on {i.gpu}", rows, p.notes)
