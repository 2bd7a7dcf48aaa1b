"""The optional columns of a sweep row: roofline bounds (``--gpu``) and the capacity plan (``--tp``/``--pp``/
``--max-model-len``).

The capacity planner (``kvplan.planning.capacity.plan``, ``kvplan plan``) is imported only when a sweep asks for its
columns; a kvplan without it refuses those flags with one line. Its result is flattened with dots like every other
row and the columns below are taken from it (a key it lacks is an empty cell). ``max_model_len`` defaults to the
row's ``seq_len``: "how many requests of this length fit". Where the planner refuses an option (a layout the engine
cannot run, weights that leave nothing for the cache) the row says so: ``fits`` False, ``max_concurrency`` 0 and
the planner's one-line reason in ``plan_error``; the sweep goes on.
"""

from __future__ import annotations

import itertools
import math

from kvplan.cost.hardware import load_gpu
from kvplan.cost.roofline import Workload, roofline
from kvplan.errors import KvplanError
from kvplan.model.card import ModelCard
from kvplan.planning.sweep.grid import MAX_PARALLEL, parse_int_axis, require_rows

ROOFLINE_COLUMNS = ("roofline.time_to_first_token_s", "roofline.time_to_first_token_one_request_s",
                    "roofline.time_per_output_token_s", "roofline.decode_tokens_per_s", "roofline.gpu_memory_bytes",
                    "roofline.fits_in_memory")
PARALLEL_COLUMNS = ("tp", "pp", "max_model_len")
CAPACITY_COLUMNS = ("max_concurrency", "fits", "max_model_len_fit", "request_kv_bytes", "kv_cache.available_bytes",
                    "kv_cache.num_blocks", "kv_cache.tokens", "per_gpu.weights_bytes", "per_gpu.kv_bytes_per_token",
                    "per_gpu.activation_bytes", "per_gpu.overhead_bytes", "plan_error")
_NO_CAPACITY = (None, None, None)


def check_roofline(models: tuple[ModelCard, ...], gpus: tuple, gpu_file: str | None) -> None:
    """The same refusals as ``estimate --gpu``: an unknown GPU, a card the roofline does not model."""
    for g in gpus:
        load_gpu(g, gpu_file)
    for card in models:
        if card.architecture != "decoder-only":
            raise KvplanError(f"--gpu: roofline bounds are modelled for decoder-only models; {card.name} is "
                              f"{card.architecture}")


def roofline_values(lay, batch: int, seq_len: int, gpu: str, gpu_file: str | None, needed: int,
                    block_size: int, par: tuple = (None, None, None)) -> tuple:
    """The roofline columns of one row, as ``estimate(..., gpu=gpu)`` computes them (prompt_len = seq_len). With a
    row's ``par`` = (tp, pp, max_model_len) of a capacity sweep, they are the layout's, as ``kvplan plan`` bounds its
    latency (kvplan.planning.capacity.latency): each GPU's FLOPs / tp and its own bytes (its rank's weights and
    cache, summed over the stages), plus the ring collectives between the ranks over the GPU's interconnect
    (kvplan.cost.comm), the memory that of the tp x pp GPUs together."""
    gpu_obj = load_gpu(gpu, gpu_file)
    work = Workload(lay.card, lay.engine, lay.kv_t, lay.w_t, batch, seq_len, seq_len,
                    lay.engine.default_max_cache_len(seq_len), block_size)
    r = roofline(work, gpu_obj, memory_needed_bytes=needed)
    tp, pp = par[0] or 1, par[1] or 1
    if tp == 1 and pp == 1:
        return (r.time_to_first_token_s, r.time_to_first_token_one_request_s, r.time_per_output_token_s,
                r.decode_tokens_per_s, r.gpu_memory_bytes, r.fits_in_memory)
    from kvplan.cost.parallel import Layout
    from kvplan.planning.capacity.latency import layout_bounds

    layout = Layout(tp=tp, pp=pp)
    try:
        held = lay.engine.held_layout(lay.card, lay.w_t, lay.kv_t, layout)
        ttft, one, tpot = layout_bounds(r, work, held, layout, e=lay.w_t.activation_bytes,
                                        link_bytes_per_s=gpu_obj.interconnect_bandwidth_bytes_per_s, gpu=gpu_obj)
    except KvplanError:  # a GPU without a stated interconnect, or a split the model cannot take: the plan's columns
        return (None,) * len(ROOFLINE_COLUMNS)  # name the refusal (plan_error)
    memory = r.gpu_memory_bytes * tp * pp
    return ttft, one, tpot, batch / tpot, memory, needed <= memory


def parallel_axis(tp, pp, max_model_len, gpu) -> tuple[tuple, ...]:
    """(tp, pp, max_model_len) options; max_model_len None means each row's seq_len."""
    if tp is None and pp is None and max_model_len is None:
        return (_NO_CAPACITY,)
    if gpu is None:
        raise KvplanError("--tp/--pp/--max-model-len: the capacity plan needs --gpu NAME")
    planner()
    tps = parse_int_axis(1 if tp is None else tp, "--tp", MAX_PARALLEL)
    pps = parse_int_axis(1 if pp is None else pp, "--pp", MAX_PARALLEL)
    mmls = [None] if max_model_len is None else parse_int_axis(max_model_len, "--max-model-len", tokens=True)
    require_rows(len(tps) * len(pps) * len(mmls), "--tp x --pp x --max-model-len")
    return Product(tuple(tps), tuple(pps), tuple(mmls))


class Product:
    """The (tp, pp, max_model_len) options, made one at a time as rows need them: 4,096 x 2,048 TP x PP sizes are
    8.4 million options, which a tuple would hold in memory before the first row."""

    def __init__(self, *axes: tuple):
        self.axes = axes

    def __len__(self) -> int:
        return math.prod(len(a) for a in self.axes)

    def __iter__(self):
        return itertools.product(*self.axes)


def planner():
    """``kvplan.planning.capacity``, imported when a sweep has capacity columns."""
    import importlib

    return importlib.import_module("kvplan.planning.capacity")  # resolved through sys.modules (tests stub it)


def capacity_columns() -> tuple[str, ...]:
    return CAPACITY_COLUMNS


CACHED_PLANS = 1024  # a capacity sweep's memory stays bounded however many rows it writes


def capacity_values(cache: dict, lay, seq_len: int, gpu: str, par: tuple, block_size: int | None,
                    gpu_file: str | None) -> tuple:
    """The plan's columns for (layout, GPU, tp, pp, max_model_len): computed once, shared by every batch;
    ``block_size`` None: the engine's own default (an engine without pages is never asked for one)."""
    tp, pp, mml = par
    key = (id(lay), gpu, tp, pp, mml or seq_len)
    if key not in cache:
        if len(cache) >= CACHED_PLANS:  # rows come grouped by layout and length: recent plans are the ones reused
            cache.clear()
        try:
            result = planner().plan(lay.card, gpu=gpu, tp=tp, pp=pp, max_model_len=mml or seq_len,
                                    engine=lay.engine, kv_dtype=lay.kv_dtype_given, weight_dtype=lay.w_t.name,
                                    block_size=block_size, gpu_file=gpu_file,
                                    enable_prefix_caching=lay.prefix_caching)
        except KvplanError as exc:  # a layout the engine refuses, or no memory left for the cache: a row, not a stop
            data = {"max_concurrency": 0.0, "fits": False, "plan_error": str(exc)}
        else:
            data = flatten(result.model_dump(mode="json") if hasattr(result, "model_dump") else dict(result))
        cache[key] = tuple(data.get(c) for c in CAPACITY_COLUMNS)
    return cache[key]


def flatten(data: dict, prefix: str = "") -> dict:
    """{"a": {"b": 1}} -> {"a.b": 1}; lists stay values."""
    out: dict = {}
    for k, v in data.items():
        if isinstance(v, dict):
            out.update(flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out
