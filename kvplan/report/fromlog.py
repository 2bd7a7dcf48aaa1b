"""``kvplan plan --from-log FILE`` for people: every figure the log states beside kvplan's, from the launch flags
alone and from the logged pool, each with its verdict; then the calibrated plan (``--calibrate``)."""

from __future__ import annotations

from rich.console import Console

from kvplan.planning.capacity.fromlog import FromLog, Row
from kvplan.report.console import escape, exact, note, table
from kvplan.units import fmt_int


def render_from_log(r: FromLog, console: Console) -> None:
    lg = r.log
    console.print(f"[bold]log[/bold] {escape(lg.path)}" + (f"  ({escape(lg.source)})" if lg.source else ""))
    console.print(f"[bold]model[/bold] {escape(r.model)} ({escape(r.model_how)}); [bold]GPU[/bold] {escape(r.gpu)}, "
                  f"{exact(r.gpu_memory_bytes)} ({escape(r.gpu_how)}); [bold]engine[/bold] {escape(r.engine)} "
                  f"({escape(r.plan.inputs.engine_rules)})")
    flags = ", ".join(f"{k}={v}" for k, v in r.plan_args.items())
    console.print(f"[bold]launch flags[/bold] {escape(flags)}")
    # the bytes, not a 3-digit GiB figure beside the log's own (a logged 19.36 GiB read "given 19.4 GiB")
    pool = "" if r.logged_pool_bytes is None else f" (given {fmt_int(r.logged_pool_bytes)} B)"
    t = table("the log's figures beside kvplan's", ["figure", "logged", "from the flags alone", "verdict",
                                                     f"from the logged pool{pool}", "verdict"], left=("figure",))
    for row in r.rows:
        t.add_row(escape(row.what), f"{escape(row.logged.text)} {row.unit}", _num(row, row.flags_alone),
                  _verdict(row.flags_verdict, row.flags_error_pct), _num(row, row.logged_pool),
                  _verdict(row.pool_verdict, row.pool_error_pct) if row.pool_verdict else "-")
    console.print(t)
    for text in r.notes:
        note(console, text)
    if r.calibration is not None:
        _calibration(r, console)


def _num(row: Row, v: float | None) -> str:
    if v is None:
        return "-"
    text = row.logged.text.split(" + ")[0].replace(",", "")  # SGLang's pool: K size + V size
    decimals = len(text.split(".")[1]) if "." in text else 0
    return fmt_int(int(v)) if decimals == 0 and float(v).is_integer() else f"{v:,.{max(decimals, 2)}f}"


def _verdict(kind: str | None, err: float | None) -> str:
    if kind == "off" and err is None:  # the log prints 0 (e.g. "0.0 GiB for CUDAGraph memory"): no relative error
        return "off (logged 0)"
    if kind == "off":
        return f"off by {err:+.2f}%" if abs(err) >= 0.01 else f"off by {err:+.4f}%"
    if kind == "within rounding":
        return "within the log's rounding"
    return kind or "-"


def _calibration(r: FromLog, console: Console) -> None:
    c, p = r.calibration, r.calibration.plan
    what = ", ".join(f"{k}={v}" for k, v in c.what_ifs.items()) or "none (the log's own flags)"
    how = "" if not c.what_ifs else " (scaled: see below)" if c.scaled else " (exact: nothing measured changes)"
    console.print(f"[bold]calibrated[/bold] on the log's measured budget; what-ifs: {escape(what)}{how}")
    for text in c.measured:
        console.print(f"  measured: {escape(text)}")
    for text in c.scaled:
        console.print(f"  scaled:   {escape(text)}")
    if p is None:
        console.print(f"  calibrated plan: refused: {escape(c.refused or '')}")
    else:
        t = table("calibrated plan", ["", "value"], left=("",), show_header=False)
        t.add_row("KV cache", exact(p.kv_cache.available_bytes))
        if p.inputs.paged:
            t.add_row("blocks", fmt_int(p.kv_cache.num_blocks))
        t.add_row("tokens", fmt_int(p.kv_cache.tokens))
        t.add_row("max concurrency", f"{p.max_concurrency:,.2f}x at {fmt_int(p.inputs.max_model_len)} tokens")
        t.add_row("fits", "yes" if p.fits else
                  f"NO: the longest max_model_len that fits is {fmt_int(p.max_model_len_fit)}")
        console.print(t)
    for text in c.notes:
        note(console, text)
    if c.reproduction:
        console.print(f"  no what-if: {escape(c.reproduction)}")
