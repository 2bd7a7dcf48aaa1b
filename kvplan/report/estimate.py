"""``kvplan estimate`` for people: the totals, the KV cache by layer kind, the formula, FLOPs and roofline."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from kvplan.cost.roofline_results import RooflineResult
from kvplan.planning.results import CheckpointCheck, Estimate, weights_format
from kvplan.report.console import escape, exact, ms, note, table
from kvplan.units import fmt_bytes, fmt_float, fmt_int


def render_estimate(r: Estimate, console: Console) -> None:
    console.print(_summary_table(r))
    kv = r.kv_cache
    if kv.groups:
        console.print(_groups_table(r))
        console.print("[bold]formula[/bold]")
        for g in kv.groups:
            console.print(f"  {escape(g.formula)}")
    if r.flops:
        console.print(_flops_table(r))
    if r.roofline:
        console.print(_roofline_table(r.roofline))
    for text in r.notes:
        note(console, text)
    if r.weights.checkpoint and r.weights.checkpoint.warning:
        note(console, r.weights.checkpoint.warning, label="warning")


def _summary_table(r: Estimate) -> Table:
    i, m, kv, w = r.inputs, r.model, r.kv_cache, r.weights
    t = table(f"kvplan estimate: {escape(m.name)}", ["", ""], left=("",), show_header=False)
    t.columns[0].style = "bold"
    t.columns[1].justify = "left"
    t.add_row("model", escape(f"{m.name} ({m.architecture}, {m.num_layers} layers)"))
    t.add_row("attention", m.attention_detail + ("  (what-if layout)" if m.layout_changed else ""))
    t.add_row("engine", f"{kv.engine}: {kv.engine_rule}")
    enc = f", encoder {i.encoder_len} tokens" if i.encoder_len else ""
    t.add_row("inputs", f"batch {i.batch} x {i.seq_len} tokens{enc}; KV {kv.dtype}, weights {i.weight_dtype}")
    t.add_row("KV per token", exact(kv.bytes_per_token) + " (one sequence, all layers)")
    t.add_row("KV per sequence", exact(kv.bytes_per_sequence))
    c = r.llamacpp and r.llamacpp.context  # llama.cpp's cache: its slots, not the batch
    t.add_row("KV total", exact(kv.total_bytes) + (f" (llama.cpp's cache: n_ctx {c.n_ctx:,} cells, {c.n_seq_max} "
                                                   f"slot(s))" if c else f" (batch of {i.batch})"))
    scales = f" + fp8 KV scales {w.kv_scale_bytes} B" if w.kv_scale_bytes else ""
    q = w.quantization
    stored = weights_format(q.format if q else None, w.dtype)
    if w.fp32_params:  # transformers keeps some modules in float32 (kvplan.cost.fp32)
        stored += f" ({fmt_int(w.fp32_params)} of them in fp32)"
    t.add_row("weights", f"{fmt_int(w.params)} params, {stored}{scales}: {exact(w.bytes)}")
    if w.breakdown.get("vision"):  # a multimodal checkpoint: its vision tower and projector (kvplan.cost.vision)
        t.add_row("  of which vision", f"{fmt_int(w.breakdown['vision'])} params (vision tower + projector, as "
                                       "transformers builds them)")
    if q:
        extra = "".join(f" + {name} {exact(n)}" for name, n in (("zeros", q.zero_bytes), ("g_idx", q.g_idx_bytes)) if n)
        t.add_row("  quantized", f"{fmt_int(q.quantized_params)} params: values {exact(q.quantized_bytes)} + scales "
                                 f"{exact(q.scale_bytes)}{extra}")
        fp32 = f", {fmt_int(w.fp32_params)} in fp32" if w.fp32_params else ""
        t.add_row("  unquantized", f"{fmt_int(q.unquantized_params)} params in {w.dtype}{fp32}: "
                                   f"{exact(q.unquantized_bytes)} (embeddings, lm_head, norms, routers, biases)")
    if w.checkpoint:
        _checkpoint_rows(t, w.checkpoint)
    elif "/blob/" in m.source:  # a Hub model without safetensors: still name what was read
        t.add_row("source", escape(m.source))
    if w.active_params != w.params:
        t.add_row("active params", f"{fmt_int(w.active_params)} per token (routed experts in use)")
    t.add_row("weights + KV", exact(r.total_bytes))
    return t


def _checkpoint_rows(t: Table, c: CheckpointCheck) -> None:
    """The checkpoint's bytes beside kvplan's, each explained part, and what is left unexplained."""
    read = f"{fmt_int(c.tensors)} tensors' headers" if c.tensors else c.read_from
    t.add_row("checkpoint", escape(f"{c.repo} @ {c.commit[:12]}: {exact(c.bytes)} ({read}); kvplan "
                                   f"{exact(c.kvplan_bytes)} as stored, difference {c.difference_bytes:+,} B"))
    for p in c.explained:
        t.add_row("", escape(f"{p.bytes:+,} B {p.reason}: {p.tensors} tensor{'s' * (p.tensors != 1)} ({', '.join(p.names)})"))
    if c.explained or c.unexplained_bytes:
        t.add_row("", f"{c.unexplained_bytes:+,} B unexplained" + (" (see the warning)" if c.warning else ""))


def _groups_table(r: Estimate) -> Table:
    t = table("KV cache by layer kind", ["kind", "layers", "window", "B/token/layer", "positions held", "total"],
              left=("kind",))
    for g in r.kv_cache.groups:
        t.add_row(g.kind, str(g.layers), str(g.window or "-"), fmt_int(g.bytes_per_token_per_layer), fmt_int(g.positions_held),
                  fmt_bytes(g.total_bytes))
    return t


def _flops_table(r: Estimate) -> Table:
    states = r.flops.prefill.state_mixer > 0  # a card with state layers: their mixers' column
    t = table(f"FLOPs (prefill of {r.inputs.prompt_len} tokens, decode step at {r.inputs.seq_len}; batch "
              f"{r.inputs.batch})", ["phase", "total (dense)", "attention core", "LM head"]
              + (["state mixers"] if states else []) + ["total (causal)", "MLA mode"], left=("phase", "MLA mode"))
    for phase, f in (("prefill", r.flops.prefill), ("decode_step", r.flops.decode_step)):
        mixers = [f"{f.state_mixer:.3e}"] if states else []
        t.add_row(phase, f"{f.total:.3e}", f"{f.attention_core:.3e}", f"{f.lm_head:.3e}", *mixers,
                  f"{f.causal_total:.3e}", f.mla_mode or "-")
    return t


def _roofline_table(roof: RooflineResult) -> Table:
    t = table(f"roofline lower bounds on {roof.gpu} ({roof.compute_dtype}, mfu {roof.mfu}, mbu {roof.mbu})",
              ["phase", "FLOPs", "moved", "FLOP/B", "compute", "memory", "bound", "by"], left=("phase", "by"))
    for phase, p in (("prefill", roof.prefill), ("decode", roof.decode_step)):
        t.add_row(phase, f"{p.flops:.3g}", fmt_bytes(p.bytes_moved), f"{p.arithmetic_intensity_flops_per_byte:.3g}",
                  ms(p.compute_time_s), ms(p.memory_time_s), ms(p.time_s), p.bound)
    t.caption = (f"TTFT >= {ms(roof.time_to_first_token_one_request_s)} for one request alone, "
                 f"{ms(roof.time_to_first_token_s)} for the batch of {roof.batch}; TPOT >= "
                 f"{ms(roof.time_per_output_token_s)}, decode <= {roof.decode_tokens_per_s:.0f} tok/s; "
                 f"fits in {fmt_bytes(roof.gpu_memory_bytes)} ({_total_how(roof)}): "
                 f"{'yes' if roof.fits_in_memory else 'NO'}")
    return t


def _total_how(roof: RooflineResult) -> str:
    """What the total is: torch's, or (no visible total recorded) the vendor's figure, which torch shows less of."""
    if roof.gpu_memory_visible:
        return "what torch sees"
    return f"the vendor's {fmt_float(roof.gpu_memory_bytes / 1e9)} GB: no visible total known"
