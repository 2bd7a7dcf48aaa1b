"""Small stdlib-only HTML tables for notebooks: ``_repr_html_`` of every result (``Estimate``, ``CompareResult``,
``PlanResult``, ``SearchResult``, ``Sweep``, ``CheckReport``).

They live in the plan layer on purpose (no import of kvplan.report, no matplotlib): a notebook shows a result as a
table without the report extra. ``kvplan report`` is the full document with charts.
"""

from __future__ import annotations

from html import escape

from kvplan.units import fmt_bytes, fmt_cell, fmt_int, fmt_usd, plural

_STYLE = "border-collapse:collapse;font-family:sans-serif;font-size:0.9em"
_CELL = "padding:2px 8px;border-bottom:1px solid #ddd;text-align:{}"


def exact_bytes(n: int) -> str:
    return f"{fmt_bytes(n)} ({fmt_int(n)} B)"


def key_value_table(title: str, rows: list[tuple[str, str]], notes: list[str] = ()) -> str:
    """A two-column table: label, value."""
    body = "".join(f'<tr><th style="{_CELL.format("left")}">{escape(k)}</th>'
                   f'<td style="{_CELL.format("left")}">{escape(v)}</td></tr>' for k, v in rows)
    return (f'<table style="{_STYLE}"><caption style="text-align:left;font-weight:bold">{escape(title)}</caption>'
            f"{body}</table>" + notes_html(list(notes)))


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
    rows = [("verdict", p.verdict), ("launch", p.launch_command or "none (see the notes)"),
            ("weights per GPU", exact_bytes(g.weights_bytes)),
            ("activation peak", exact_bytes(g.activation_bytes) + (" (estimated)" if g.activation_estimated else "")),
            ("overheads", exact_bytes(g.overhead_bytes)), ("KV pool per GPU", exact_bytes(kv.available_bytes)),
            ("KV per token per GPU", exact_bytes(g.kv_bytes_per_token)),
            ("blocks", f"{fmt_int(kv.num_blocks)} of {plural(kv.block_size, 'token')}"), ("tokens", fmt_int(kv.tokens)),
            ("max concurrency", f"{p.max_concurrency:.2f}"), ("fits", "yes" if p.fits else "no"),
            ("longest max_model_len that fits", fmt_int(p.max_model_len_fit))]
    if p.latency:
        rows += [("TTFT bound", _ms(p.latency.ttft_ms)), ("TPOT bound", _ms(p.latency.tpot_ms))]
        if p.latency.price_per_hour is not None:
            rows += [("price (on-demand)", f"${p.latency.price_per_hour:,.2f}/h"),
                     ("per million output tokens", f">= ${fmt_usd(p.latency.usd_per_million_output_tokens)}")]
    return key_value_table(f"kvplan plan: {i.model} on {i.gpu}", rows, p.notes)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.4g} ms"


def _money(value: float | None) -> str:
    return "-" if value is None else f"{value:,.2f}"


def notes_html(notes: list[str]) -> str:
    return f'<ul style="font-size:0.85em">{"".join(f"<li>{escape(n)}</li>" for n in notes)}</ul>' if notes else ""


def search_html(r) -> str:
    """The plan search: one row per GPU type in the order asked (--sort), its price with where it was read."""
    rows = [[o.gpu, str(o.num_gpus), f"{o.tp}x{o.pp}x{o.dp}", f"{o.max_concurrency:,.1f}",
             exact_bytes(o.per_gpu.weights_bytes), exact_bytes(o.kv_cache.available_bytes), _ms(o.ttft_ms),
             _ms(o.tpot_ms), _money(o.price_per_hour), _money(o.usd_per_million_output_tokens)] for o in r.options]
    title = (f"kvplan plan: {r.model}, {fmt_int(r.concurrency)} requests of {fmt_int(r.max_model_len)} tokens "
             f"({r.engine}); sorted by {r.sort}; {r.layouts_tried} layouts tried")
    table = grid_table(title, ["GPU", "GPUs", "TPxPPxDP", "requests", "weights/GPU", "KV pool/GPU", "TTFT >=",
                               "TPOT >=", "$/h", "$/Mtok"], rows)
    launch = [f"{o.gpu}: {o.launch_command}" for o in r.options]
    prices = [f"{o.gpu}: ${o.price_per_gpu_hour:,.2f} per GPU-hour x {o.num_gpus}, {o.price_source}"
              for o in r.options if o.price_source]
    return table + notes_html(launch + prices + r.notes)


SWEEP_ROWS = 100  # a notebook shows the first rows of a sweep; to_csv() writes them all


def sweep_html(s) -> str:
    """The first ``SWEEP_ROWS`` rows of a sweep (a sweep is lazy: its rows are computed as they are shown)."""
    from itertools import islice

    shown = list(islice(s.tuples(), SWEEP_ROWS))
    rows = [[fmt_cell(c, v) for c, v in zip(s.columns, row)] for row in shown]
    more = [f"first {len(shown):,} of {len(s):,} rows; Sweep.to_csv(path) writes them all"] if len(s) > len(shown) \
        else []
    return grid_table(f"kvplan sweep: {len(s):,} rows", list(s.columns), rows) + notes_html(more)


def _cell(v) -> str:
    return fmt_cell("", v)


def check_html(c) -> str:
    """Each budget and baseline figure of every scenario: the limit, the value, the verdict."""
    rows = [[r.scenario, r.check, r.figure, "-" if r.limit is None else _cell(r.limit), _cell(r.value),
             "-" if r.delta is None else _cell(r.delta), r.verdict.upper() if r.verdict == "fail" else r.verdict]
            for r in c.rows]
    title = (f"kvplan check: {c.config} ({len(c.figures)} scenarios, {len(c.rows)} checks, {c.failed} failed; "
             f"baseline {c.baseline}{'' if c.baseline_found else ': none yet'})")
    return grid_table(title, ["scenario", "check", "figure", "limit", "value", "delta", "verdict"], rows) + \
        notes_html(c.notes)


def disagg_html(d) -> str:
    """The prefill and decode pools, and the K/V each request hands over."""
    rows = [[p.role, p.gpu, f"{p.tp}x{p.pp}", fmt_int(p.replicas), fmt_int(p.gpus), fmt_int(p.batch),
             _ms(p.ttft_ms), _ms(p.tpot_ms), f"{p.requests_per_s:,.3g}"] for p in (d.prefill, d.decode)]
    title = (f"kvplan disagg: {d.model}, {d.rate:g} req/s of {fmt_int(d.isl)} + {fmt_int(d.osl)} tokens ({d.engine}); "
             f"{d.ratio}, {d.total_gpus} GPUs; K/V per request {exact_bytes(d.kv_transfer_bytes_per_request)}")
    return grid_table(title, ["role", "GPU", "TPxPP", "workers", "GPUs", "batch", "TTFT >=", "TPOT >=", "req/s"],
                      rows) + notes_html([f"{p.role}: {p.launch_command}" for p in (d.prefill, d.decode)] + d.notes)
