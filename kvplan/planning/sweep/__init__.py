"""``kvplan.sweep``: ``estimate`` over a grid of scenarios, fast enough for millions of rows.

Once per (model, engine, layout, dtypes) the sweep resolves the inputs exactly as ``estimate`` does and keeps the
per-layer cache geometry summed per distinct window (bytes per token of the full layers, of each sliding window, of
the cross-attention layers) and the weight bytes. A scenario is then integer arithmetic: the engine's
``positions_held`` rule once per distinct window and sequence length, times the bytes, times the batch. Every row
equals ``estimate(...)`` for the same inputs (tests compare them).

>>> from kvplan import sweep
>>> rows = sweep("llama-2-7b", batch="1..4*2", seq_len="1024,4096")
>>> len(rows), next(iter(rows))["kv_cache.total_bytes"]
(6, 536870912)

Rows are flat dicts keyed like the flattened ``estimate --json`` (``batch``, ``kv_cache.total_bytes``, ...), ready
for ``pandas.DataFrame(list(rows))``; ``rows.to_csv(path_or_file)`` writes them. With ``gpu`` a row adds the
roofline bounds (one ``roofline`` call per row: the slow path); with ``tp``/``pp``/``max_model_len`` it adds the
capacity planner's columns (``kvplan.planning.capacity``, imported when asked for).
"""

from __future__ import annotations

import csv
import itertools
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Iterator

from kvplan.cost.engines import CacheRun, Engine
from kvplan.cost.kvspec import kv_bytes_per_token, layer_specs
from kvplan.errors import KvplanError, clip_text
from kvplan.model.card import ModelCard
from kvplan.files import open_atomic
from kvplan.model.catalog import load_card
from kvplan.model.dtypes import DType
from kvplan.model.layouts import with_layout
from kvplan.planning.sweep.grid import parse_int_axis, parse_name_axis, require_rows
from kvplan.planning.estimate import (block_on, check_prefix_caching, default_block, fold_bytes, paged_groups,
                                      require_prefix_flag, resolve, served_weights)
from kvplan.planning.sweep import extra

_BLOCK = 4096  # rows per CSV block
BASE_COLUMNS = ("model", "engine", "attention", "kv_dtype", "weight_dtype", "batch", "seq_len")
KV_COLUMNS = ("kv_cache.bytes_per_token", "kv_cache.bytes_per_sequence", "kv_cache.total_bytes", "weights.bytes",
              "total_bytes")


@dataclass(frozen=True)
class SweepCase:
    """One (model, engine, layout, dtypes): resolved once, then sized per scenario by integer arithmetic."""

    card: ModelCard
    attention: str | None
    engine: Engine  # the runtime of the release asked for (``vllm==0.10``: that range's rules), as estimate/plan take
    engine_label: str  # the engine as given, version included: the rows' ``engine`` column
    kv_t: DType
    w_t: DType
    windows: tuple[tuple[int | None, int | None, int], ...]  # (window, chunk, bytes per token summed over the layers)
    cross_bytes_per_token: int  # cross-attention layers, summed
    bytes_per_token: int
    weights_bytes: int
    state_bytes: int = 0  # conv and SSM states of one sequence, summed over the state layers: constant in tokens
    kv_dtype_given: str | None = None  # --kv-dtype as given (None: the engine's default, as a plan takes it)
    prefix_caching: bool | None = None  # vLLM --(no-)enable-prefix-caching (None: the release's default)

    @property
    def head(self) -> tuple:
        """The text columns every row of this case starts with (BASE_COLUMNS up to ``batch``)."""
        return self.card.name, self.engine_label, self.attention, self.kv_t.name, self.w_t.name

    def per_sequence(self, seq_len: int, encoder_len: int, block_size: int, gpu=None) -> int:
        """KV bytes of one sequence: the engine's positions held per distinct window (or chunk), times its bytes;
        where the runtime pages layers in groups (vLLM V1), estimate's fold over them (on ``gpu``, a catalog GPU,
        where what the groups hold depends on it: vLLM 0.33's Gated DeltaNet checkpoint pages on SM 9.0)."""
        eng = self.engine
        fold = paged_groups(eng, self.card, self.kv_t, block_size, gpu,  # vLLM V1: the plan's groups (estimate's)
                            self.prefix_caching)  # a hybrid's state pages: the Mamba cache mode it sets
        if fold is not None:
            return fold_bytes(fold[1], eng, CacheRun(seq_len, encoder_len, eng.default_max_cache_len(seq_len), fold[0]))
        run = CacheRun(seq_len, encoder_len, eng.default_max_cache_len(seq_len), block_size)
        total = self.state_bytes
        for w, c, b in self.windows:  # c: a chunked layer's chunk (Llama-4), held by the engine's own rule
            total += (eng.chunk_positions(c, run) if c else eng.positions_held(w, run)) * b
        if self.cross_bytes_per_token:
            total += eng.cross_positions(run) * self.cross_bytes_per_token
        return total


def build_case(card: ModelCard, attention: str | None, engine: str | Engine, kv_dtype: str | None,
                 weight_dtype: str | None, encoder_len: int | None, block_size: int,
                 prefix_caching: bool | None = None) -> SweepCase:
    """Resolve as ``estimate`` does (same checks, same errors, --enable-prefix-caching's included) and sum the layer
    specs per window."""
    layout_card = with_layout(card, attention=attention) if attention not in (None, "card") else card
    r = resolve(layout_card, batch=1, seq_len=1, encoder_len=encoder_len, kv_dtype=kv_dtype,
                weight_dtype=weight_dtype, engine=engine, max_cache_len=None, block_size=block_size)
    check_prefix_caching(r, prefix_caching)
    specs = layer_specs(layout_card, r.kv_t, r.engine)
    windows: dict[tuple[int | None, int | None], int] = {}  # chunked layers (Llama-4) apart: their own rule
    for s in specs:
        if s.kind != "cross" and not s.per_sequence:
            key = (s.window, s.chunk if s.kind == "chunked" else None)
            windows[key] = windows.get(key, 0) + s.bytes_per_token
    cross = sum(s.bytes_per_token for s in specs if s.kind == "cross")
    states = sum(s.bytes_per_token for s in specs if s.per_sequence)  # one state per sequence (positions held 1)
    label = engine if isinstance(engine, str) else r.engine.name
    return SweepCase(layout_card, None if attention in (None, "card") else attention, r.engine, label, r.kv_t, r.w_t,
                  tuple((w, c, b) for (w, c), b in windows.items()), cross, kv_bytes_per_token(specs),
                  served_weights(layout_card, r).bytes, states, kv_dtype, prefix_caching)


@dataclass(frozen=True)
class Grid:
    """The parsed axes of a sweep."""

    models: tuple[ModelCard, ...]
    batch: tuple[int, ...]
    seq_len: tuple[int, ...]
    kv_dtype: tuple[str | None, ...]
    weight_dtype: tuple[str | None, ...]
    attention: tuple[str | None, ...]
    engine: tuple[str, ...]
    gpu: tuple[str | None, ...]
    encoder_len: tuple[int | None, ...]
    # (tp, pp, max_model_len) options, made as rows need them; ((None, None, None),) when none
    parallel: tuple[tuple, ...] | extra.Product
    block_size: int | None = None  # None: the engine's default (16 for the KV sizes; the planner's own per engine)
    gpu_file: str | None = None
    prefix_caching: bool | None = None  # vLLM --enable-prefix-caching / --no-enable-prefix-caching

    @property
    def cache_block(self) -> int:
        """Tokens per block for the KV sizes and the roofline: the one given, else vLLM's default 16."""
        return 16 if self.block_size is None else self.block_size

    def encoders(self, card: ModelCard) -> tuple[int | None, ...]:
        """The encoder lengths a model's rows take: the axis for an encoder-decoder model, none (an empty cell) for
        the others, so one grid holds both kinds (a decoder-only model is not multiplied by --encoder-len)."""
        return self.encoder_len if card.architecture == "encoder-decoder" else (None,)

    @property
    def size(self) -> int:
        axes = (self.batch, self.seq_len, self.kv_dtype, self.weight_dtype, self.attention, self.engine, self.gpu,
                self.parallel)
        return sum(len(self.encoders(m)) for m in self.models) * math.prod(len(a) for a in axes)

    @property
    def capacity(self) -> bool:
        return self.parallel != ((None, None, None),)


class Sweep:
    """The rows of a sweep: iterate for flat dicts, ``tuples()`` for value tuples in ``columns`` order."""

    def __init__(self, grid: Grid):
        self.grid = grid
        self._capacity_cache: dict = {}
        self._layouts = [self._case(*key) for key in self._layout_keys()]  # errors surface before any row
        self.columns: tuple[str, ...] = self._columns()

    def __len__(self) -> int:
        return self.grid.size

    def _repr_html_(self) -> str:
        """A notebook shows the first rows as a table (kvplan.planning.htmlrepr)."""
        from kvplan.planning.htmlrepr import sweep_html

        return sweep_html(self)

    def __iter__(self) -> Iterator[dict]:
        cols = self.columns
        return (dict(zip(cols, row)) for row in self.tuples())

    def _layout_keys(self) -> Iterator[tuple]:
        g = self.grid
        return itertools.product(g.models, g.engine, g.attention, g.kv_dtype, g.weight_dtype)

    def _case(self, card, engine, attention, kv_dtype, weight_dtype) -> SweepCase:
        enc = self.grid.encoders(card)[0]
        return build_case(card, attention, engine, kv_dtype, weight_dtype, enc, self.grid.cache_block,
                          self.grid.prefix_caching)

    def _columns(self) -> tuple[str, ...]:
        g = self.grid
        cols = BASE_COLUMNS + (("encoder_len",) if g.encoder_len != (None,) else ()) + KV_COLUMNS
        if g.gpu != (None,):
            cols += ("gpu",) + extra.ROOFLINE_COLUMNS
        if g.capacity:
            cols += extra.PARALLEL_COLUMNS + extra.capacity_columns()
        return cols

    def tuples(self) -> Iterator[tuple]:
        """Rows as tuples in ``columns`` order: the fast path for writers."""
        g = self.grid
        with_enc = g.encoder_len != (None,)
        slow = g.gpu != (None,) or g.capacity
        for lay in self._layouts:
            head = lay.head
            bpt, wb = lay.bytes_per_token, lay.weights_bytes
            # nested, not itertools.product: product would hold every (tp, pp, max_model_len) option in memory
            encoders = g.encoders(lay.card)
            for gpu, par, enc in ((gu, pa, en) for gu in g.gpu for pa in g.parallel for en in encoders):
                on = None if gpu is None else extra.load_gpu(gpu, g.gpu_file)  # read once for the row's block and fold
                block = g.cache_block if g.block_size is not None else block_on(lay.engine, lay.card, on,
                                                                                lay.kv_dtype_given)
                for s in g.seq_len:
                    ps = lay.per_sequence(s, enc or 0, block, on)
                    if slow:
                        yield from (self._slow_row(lay, head, b, s, enc, gpu, par, ps) for b in g.batch)
                    elif with_enc:
                        yield from (head + (b, s, enc, bpt, ps, b * ps, wb, b * ps + wb) for b in g.batch)
                    else:
                        yield from (head + (b, s, bpt, ps, b * ps, wb, b * ps + wb) for b in g.batch)

    def _block(self, lay: SweepCase, gpu: str | None) -> int:
        """The block the KV columns and the roofline take: the one given, else the engine's on this GPU for the K/V
        dtype as given (vLLM's MLA by release, as the plan columns beside them), else 16."""
        g = self.grid
        return (g.cache_block if g.block_size is not None
                else default_block(lay.engine, lay.card, gpu, g.gpu_file, lay.kv_dtype_given))

    def _slow_row(self, lay: SweepCase, head: tuple, b: int, s: int, enc, gpu, par, ps: int) -> tuple:
        g = self.grid
        row = head + (b, s) + ((enc,) if g.encoder_len != (None,) else ())
        kv = b * ps
        row += (lay.bytes_per_token, ps, kv, lay.weights_bytes, kv + lay.weights_bytes)
        if gpu is not None:
            row += (gpu,) + extra.roofline_values(lay, b, s, gpu, g.gpu_file, kv + lay.weights_bytes,
                                                  self._block(lay, gpu), par)
        if g.capacity:
            shown = par if par[2] is not None else (*par[:2], s)  # max_model_len defaults to the row's seq_len
            row += shown + extra.capacity_values(self._capacity_cache, lay, s, gpu, par, g.block_size, g.gpu_file)
        return row

    @property
    def fast_csv(self) -> bool:
        """CSV lines can be formatted directly: no roofline or plan columns, no text that needs CSV quoting."""
        g = self.grid
        texts = [t for lay in self._layouts for t in (lay.card.name, lay.engine_label)] + [str(a) for a in g.attention]
        return g.gpu == (None,) and not g.capacity and not any(set(t) & set(',"\r\n') for t in texts)

    def csv_blocks(self) -> Iterator[tuple[str, int]]:
        """(CSV text, rows in it) per (layout, encoder length, sequence length), without the header: the same bytes
        ``write_csv`` gives for these rows, about four times faster. Only when ``fast_csv``."""
        g = self.grid
        with_enc = g.encoder_len != (None,)
        for lay in self._layouts:
            pre = ",".join(("" if v is None else csv_text(v)) for v in lay.head) + ","
            bpt, wb = lay.bytes_per_token, lay.weights_bytes
            for enc in g.encoders(lay.card):
                for s in g.seq_len:
                    ps = lay.per_sequence(s, enc or 0, g.cache_block)
                    mid = f",{s},{'' if enc is None else enc}," if with_enc else f",{s},"
                    mid += f"{bpt},{ps},"
                    for i in range(0, len(g.batch), _BLOCK):  # bounded memory, whatever the batch axis holds
                        part = g.batch[i:i + _BLOCK]
                        yield "".join([f"{pre}{b}{mid}{b * ps},{wb},{b * ps + wb}\n" for b in part]), len(part)

    def to_csv(self, path_or_file: str | Path | IO[str]) -> int:
        """Write a header and every row as CSV (a path is written atomically); returns the rows written."""
        if isinstance(path_or_file, (str, Path)):
            with open_atomic(path_or_file, newline="") as f:
                return self.to_csv(f)
        if not self.fast_csv:
            return write_csv(self.columns, self.tuples(), path_or_file)
        write_csv(self.columns, (), path_or_file)
        n = 0
        for text, rows in self.csv_blocks():
            path_or_file.write(text)
            n += rows
        return n


def write_csv(columns: tuple[str, ...], rows, f: IO[str]) -> int:
    """CSV: one header, empty cells for None, Python's shortest round-trip repr for floats; a text cell that a
    spreadsheet would run as a formula (=, +, -, @, tab, CR first) starts with a ' (OWASP's CSV injection rule)."""
    w = csv.writer(f, lineterminator="\n")
    w.writerow(columns)
    n = 0
    for chunk in _chunks(rows, 4096):
        w.writerows([tuple(csv_text(v) if isinstance(v, str) else v for v in row) for row in chunk])
        n += len(chunk)
    return n


_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_text(text: str) -> str:
    """A text cell a spreadsheet shows as text: a leading ' before what would start a formula. Numbers are never
    text cells, so -1 stays a number."""
    return "'" + text if text.startswith(_FORMULA_START) else text


def _chunks(rows, size: int) -> Iterator[list]:
    it = iter(rows)
    while chunk := list(itertools.islice(it, size)):
        yield chunk


def sweep(model: str | ModelCard | list, *, batch="1", seq_len, kv_dtype=None, weight_dtype=None, attention=None,
          engine="ideal", gpu=None, encoder_len=None, tp=None, pp=None, max_model_len=None,
          block_size: int | None = None, gpu_file: str | None = None,
          enable_prefix_caching: bool | None = None) -> Sweep:
    """Every combination of the axes. Integer axes take ints, lists, or text ("1..256*2", "1,2,8"); name axes
    take a name, a comma list, or a list. ``attention`` "card" (or None) is the card's own layout. ``block_size``
    None: the engine's default (16 tokens for the KV sizes; the capacity plan's per engine). ``enable_prefix_caching``
    (vLLM only): as ``estimate`` and ``plan`` take it (a hybrid's state pages), None for the release's default."""
    if gpu_file is not None and not isinstance(gpu_file, (str, os.PathLike)):
        raise KvplanError(f"--gpu-file: {clip_text(repr(gpu_file), 60)}; allowed: a path")
    names = [m for m in (model if isinstance(model, (list, tuple)) else [model]) for m in _split(m)]
    if not names:
        raise KvplanError("--model: give one or more models")
    axes = (tuple(parse_int_axis(batch, "--batch")), tuple(parse_int_axis(seq_len, "--seq-len", tokens=True)),
            tuple(parse_name_axis(kv_dtype, "--kv-dtype")), tuple(parse_name_axis(weight_dtype, "--weight-dtype")),
            tuple(parse_name_axis(attention, "--attention")), tuple(parse_name_axis(engine, "--engine")),
            tuple(parse_name_axis(gpu, "--gpu")), _encoder_axis(encoder_len))
    rows = len(names) * math.prod(len(a) for a in axes)  # from the axes' lengths, before any card: at most this
    require_rows(rows, "--model x --batch x --seq-len x ...")
    parallel = extra.parallel_axis(tp, pp, max_model_len, gpu)
    require_rows(rows * len(parallel), "--model x --batch x ... x --tp x --pp")
    models = [m if isinstance(m, ModelCard) else load_card(m) for m in names]
    _check_encoders(models, axes[-1])
    require_prefix_flag(enable_prefix_caching)
    grid = Grid(tuple(models), *axes, parallel, block_size, gpu_file, enable_prefix_caching)
    if grid.gpu != (None,):
        extra.check_roofline(grid.models, grid.gpu, gpu_file)
    return Sweep(grid)


def _split(m):
    return [m] if isinstance(m, ModelCard) else [p.strip() for p in str(m).split(",") if p.strip()]


def _check_encoders(models: list[ModelCard], encoders: tuple[int | None, ...]) -> None:
    """--encoder-len is for the grid's encoder-decoder models (the others' rows leave it empty); given with none of
    them, it is refused as ``estimate`` refuses it."""
    if encoders != (None,) and not any(m.architecture == "encoder-decoder" for m in models):
        m = models[0]
        raise KvplanError(f"--encoder-len: only for encoder-decoder models; {m.name} is {m.architecture}"
                          + (" (as every model of the sweep)" if len(models) > 1 else ""))


def _encoder_axis(encoder_len) -> tuple[int | None, ...]:
    return (None,) if encoder_len is None else tuple(parse_int_axis(encoder_len, "--encoder-len", tokens=True))
