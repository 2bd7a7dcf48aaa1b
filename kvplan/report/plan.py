"""``kvplan plan`` for people: the per-GPU budget, the pool, the per-rank table, the verdict and the launch command."""

from __future__ import annotations


from rich.console import Console
from rich.table import Table

from kvplan.planning.capacity.results import PlanResult, SearchResult
from kvplan.report.console import escape, exact, ms, note, print_command, table
from kvplan.units import fmt_bytes, fmt_int, fmt_usd, plural


def render_plan(r: PlanResult, console: Console) -> None:
    console.print(_budget_table(r))
    console.print(_pool_table(r))
    if len(r.ranks) > 1:
        console.print(_ranks_table(r))
    if r.latency:
        lat = r.latency
        console.print(f"[bold]latency bounds[/bold] (batch {lat.batch_per_replica} per replica, prompt "
                      f"{fmt_int(lat.prompt_len)}): TTFT >= {ms(lat.ttft_ms / 1e3)}, TPOT >= {ms(lat.tpot_ms / 1e3)} "
                      f"(of which all-reduce {ms(lat.allreduce_ms_per_token / 1e3)})")
        if lat.price_per_hour is not None:
            console.print(f"[bold]cost[/bold] ${lat.price_per_hour:,.2f}/h for {_gpus(r)} GPUs (on-demand list price: "
                          f"`kvplan gpus show {escape(r.inputs.gpu)}`); >= "
                          f"${fmt_usd(lat.usd_per_million_output_tokens)} per million output tokens at the decode "
                          "bound")
    console.print(f"[bold]verdict[/bold] {escape(r.verdict)}")
    if r.launch_command is not None:  # None: no line reproduces the plan, a note says why
        print_command(console, "launch", r.launch_command)
    if r.checkpoint is not None:  # a Hub model: the checkpoint's bytes beside kvplan's whole-model count
        c = r.checkpoint
        console.print(f"[bold]checkpoint[/bold] {escape(f'{c.repo} @ {c.commit[:12]}')}: {exact(c.bytes)}; kvplan "
                      f"{exact(c.kvplan_bytes)} as stored, difference {c.difference_bytes:+,} B"
                      + (f" ({c.unexplained_bytes:+,} B unexplained)" if c.unexplained_bytes else ""))
        if c.warning:
            note(console, c.warning, label="warning")
    for text in r.notes:
        note(console, text)
    for text in r.latency.notes[1:] if r.latency else ():  # the first restates the bound's rule (--json has it)
        note(console, text)


def _gpus(r: PlanResult) -> int:
    return r.inputs.tp * r.inputs.pp * r.inputs.dp


def _budget_table(r: PlanResult) -> Table:
    i, g = r.inputs, r.per_gpu
    rank = f", pipeline stage {g.pp_rank} (the limiting rank)" if i.pp > 1 else ""
    t = table(f"kvplan plan: {escape(i.model)} on {i.tp * i.pp * i.dp}x {escape(i.gpu)} ({i.engine_rules}), per GPU"
              f"{rank}", ["", "bytes", "how"], left=("", "how"))
    t.columns[0].style = "bold"
    t.add_row("GPU memory", exact(i.gpu_memory_bytes), "--gpu-memory, else the total torch sees (catalog)")
    t.add_row("context + NCCL", exact(g.context_bytes),
              _overhead_how(g, "context", "--context-memory") + ("; in use when the engine measures: charged inside "
                                                                 "the budget" if g.context_in_budget else
                                                                 "; before the engine's snapshot, outside the budget"))
    t.add_row("requested", exact(g.requested_bytes), _requested_how(r))
    t.add_row("- weights", exact(g.weights_bytes), _llamacpp_weights_how(r) or (
              f"{fmt_int(g.params)} params on this rank ({g.layers} layers), {g.weights_format or i.weight_dtype}; "
              f"+ rotary cache {fmt_bytes(g.buffers_bytes)}" + _rounding_how(g) + _offload_how(g)))
    if g.vision_bytes:
        t.add_row("  of which vision", exact(g.vision_bytes), "vision tower + projector, loaded on every GPU")
    t.add_row("- activations", exact(g.activation_bytes),
              "profile-run peak, ESTIMATED (--activation-memory)" if g.activation_estimated else _act_how(r))
    t.add_row("- non-torch", exact(g.non_torch_bytes),
              _overhead_how(g, "non_torch", "--non-torch-memory") + _cached_how(g))
    t.add_row("- CUDA graphs", exact(g.cuda_graph_bytes), _overhead_how(g, "cuda_graph", "--cuda-graph-memory"))
    if r.kv_cache.allocated_bytes is None:
        t.add_row("= KV cache", exact(r.kv_cache.available_bytes),
                  "--kv-cache-memory" if i.kv_cache_memory_bytes is not None else "what is left for the pool")
    else:  # llama.cpp allocates n_ctx cells, not what is left
        t.add_row("= left", exact(r.kv_cache.available_bytes), "what the cache may take")
        t.add_row("KV cache", exact(r.kv_cache.allocated_bytes),
                  f"allocated at start-up: n_ctx {fmt_int(r.kv_cache.tokens)} cells on this GPU's layers; the rest "
                  "stays free")
    t.add_row("KV per token", exact(g.kv_bytes_per_token), f"{i.kv_dtype}, this rank's layers and KV heads")
    return t


def _llamacpp_weights_how(r: PlanResult) -> str | None:
    """llama.cpp with a card's weights at a llama-quantize type (the plan's row of ``quants``): the model buffers on
    this GPU at that type; None otherwise."""
    q = next((q for q in r.quants or () if q.chosen), None)
    if q is None:
        return None
    return (f"GGUF {q.quant} (llama-quantize rules), {r.per_gpu.layers} layers' model buffers; the input "
            "embedding stays in host memory")


def _rounding_how(g) -> str:
    if not g.weights_rounding_bytes:
        return ""
    return (f"; {exact(g.weights_bytes - g.weights_rounding_bytes)} requested, + {fmt_bytes(g.weights_rounding_bytes)}"
            " as the caching allocator rounds it (ESTIMATED: kvplan.cost.allocator)")


def _overhead_how(g, name: str, flag: str) -> str:
    """A given overhead is the flag's; a default one is the runtime's documented ESTIMATE (0: none charged)."""
    if name in g.overheads_given:
        return flag
    value = {"context": g.context_bytes, "non_torch": g.non_torch_bytes, "cuda_graph": g.cuda_graph_bytes}[name]
    return f"default, an ESTIMATE ({flag})" if value else f"default: none charged ({flag})"


def _cached_how(g) -> str:
    if not g.non_torch_cached_bytes:
        return ""
    return (f"; {exact(g.non_torch_bytes - g.non_torch_cached_bytes)} + {fmt_bytes(g.non_torch_cached_bytes)} the "
            "caching allocator keeps after empty_cache, which this vLLM release counts "
            "(ESTIMATED: kvplan.cost.allocator)")


def _offload_how(g) -> str:
    return (f"; less {exact(g.offloaded_bytes)} of them in CPU memory (--cpu-offload-gb)" if g.offloaded_bytes
            else "")


def _requested_how(r: PlanResult) -> str:
    return r.per_gpu.requested_rule


def _act_how(r: PlanResult) -> str:
    return r.per_gpu.activation_rule


def _pool_table(r: PlanResult) -> Table:
    kv, i = r.kv_cache, r.inputs
    t = table("KV cache pool", ["", "value"], left=("",), show_header=False)
    t.columns[0].style = "bold"
    if i.paged:
        slots = ("every layer slot on the rank" if kv.swa_bytes_per_token is None else
                 f"the full-attention layers' slots; the sliding-window layers' pool: {exact(kv.swa_bytes_per_token)} "
                 "per token")
        t.add_row("block", f"{plural(i.block_size, 'token')}, {exact(kv.bytes_per_block)} ({slots})")
        t.add_row("blocks", fmt_int(kv.num_blocks) + (" (min over ranks)" if len(r.ranks) > 1 else ""))
    if kv.groups > 1:
        t.add_row("groups", f"{kv.groups} (hybrid), {kv.padding_layers} padding layers")
    t.add_row("tokens", f"{fmt_int(kv.tokens)} (GPU KV cache size)")
    if kv.swa_tokens is not None:
        t.add_row("sliding pool", f"{fmt_int(kv.swa_tokens)} tokens for the sliding-window layers (SGLang's hybrid "
                                  "SWA pool; the tokens above are the full-attention layers')")
    if kv.state_bytes_per_request:
        page = (f"; a page of {exact(kv.state_page_padded_bytes)} per state layer"
                if kv.state_page_padded_bytes else "")
        slots = f"; {fmt_int(kv.state_slots)} state slots" if kv.state_slots is not None else ""
        t.add_row("states", f"{exact(kv.state_bytes_per_request)} per request (conv + SSM){page}{slots}")
    blocks = f"{fmt_int(kv.blocks_per_request)} blocks, " if i.paged else ""
    t.add_row("one request", f"{blocks}{exact(r.request_kv_bytes)} at {fmt_int(i.max_model_len)} tokens")
    t.add_row("max concurrency", f"{r.max_concurrency:,.2f}x per replica" +
              (f", {r.max_concurrency_total:,.2f}x over {i.dp} replicas" if i.dp > 1 else ""))
    t.add_row("fits", "yes" if r.fits else f"NO: the longest max_model_len that fits is {fmt_int(r.max_model_len_fit)}")
    return t


def _ranks_table(r: PlanResult) -> Table:
    t = table("per pipeline stage (every TP rank of a stage alike)",
              ["stage", "layers", "weights", "activations", "KV cache", "KV/token", "block", "blocks", "longest fit"])
    for x in r.ranks:
        layers = f"{x.first_layer}-{x.last_layer}" if x.last_layer >= x.first_layer else "none"
        t.add_row(str(x.pp_rank), layers, fmt_bytes(x.weights_bytes),
                  fmt_bytes(x.activation_bytes), fmt_bytes(x.available_kv_bytes), fmt_int(x.kv_bytes_per_token),
                  fmt_bytes(x.bytes_per_block), fmt_int(x.num_blocks), fmt_int(x.max_model_len_fit))
    return t


def render_search(r: SearchResult, console: Console) -> None:
    title = (f"kvplan plan: {escape(r.model)}, {fmt_int(r.concurrency)} requests of {fmt_int(r.max_model_len)} "
             f"tokens ({r.engine}); {r.layouts_tried} layouts tried")
    t = table(title, ["GPU", "GPUs", "TPxPPxDP", "weights", "reqs", "KV/GPU", "TTFT>=", "TPOT>=", "$/h", "$/Mtok"],
              left=("GPU", "weights"), compact=True)  # the weights' bytes per GPU: --json (per_gpu.weights_bytes)
    for o in r.options:
        t.add_row(escape(o.gpu), str(o.num_gpus), f"{o.tp}x{o.pp}x{o.dp}", escape(o.per_gpu.weights_format),
                  f"{o.max_concurrency:,.1f}",
                  fmt_bytes(o.kv_cache.cache_bytes), _ms(o.ttft_ms, r.ttft_ms),
                  _ms(o.tpot_ms, r.tpot_ms), "-" if o.price_per_hour is None else f"{o.price_per_hour:,.2f}",
                  "-" if o.usd_per_million_output_tokens is None else fmt_usd(o.usd_per_million_output_tokens))
    console.print(t)
    for o in r.options:
        print_command(console, o.gpu, o.launch_command)
    for o in r.options:
        if o.price_source:
            date = f", read {o.price_date}" if o.price_date and o.price_date not in o.price_source else ""
            console.print(f"[bold]{escape(o.gpu)} price[/bold]  ${o.price_per_gpu_hour:,.2f} per GPU-hour x "
                          f"{o.num_gpus}: {escape(o.price_source)}{escape(date)}", overflow="fold")
    for text in r.notes:
        note(console, text)


def _ms(value: float | None, limit: float | None = None) -> str:
    """Milliseconds for people; beside a --ttft-ms / --tpot-ms target, never rounded onto it."""
    return "-" if value is None else ms(value / 1e3, None if limit is None else limit / 1e3)
