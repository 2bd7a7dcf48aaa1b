"""``kvplan verify --tp N --pp M``: the sharded reference model on N x M processes, checked rank by rank.

Each rank is its own process (kvplan.verify.reference.rank, forked by a forkserver) on torch.distributed (gloo on the CPU,
NCCL on CUDA); it shards the seeded reference model (kvplan.verify.reference.tp), keeps its own KV cache and
measures weights, KV, peaks, FLOPs and the bytes of every collective. Checks per rank:

- params, weights_bytes: exactly kvplan.cost.parallel.rank_weights (the function ``kvplan plan`` uses);
- kv_cache_bytes: exactly sum(positions held x bytes per token) over kvplan.cost.parallel.rank_kv_specs;
- prefill_flops / decode_step_flops: exactly kvplan.verify.rank_predict.rank_flops;
- peaks: kvplan.verify.activations' transients of the rank's shapes (rank_predict.rank_card) plus the rank's own
  resident bytes, plus the logits all-gather on the last stage; within PEAK_TOLERANCE;
- comm_{prefill,decode}_{op}_bytes: exactly kvplan.cost.comm.comm_bytes, the model of the latency bounds;
- logits_max_abs_error (last stage): the gathered logits of every step against the unsharded model's, absolute.

Torch is imported only inside the run (never at module import). A rank that fails or outlives ``timeout`` stops
every rank and raises an error naming it; no process outlives the call. An exception raised inside a rank is a bug
(RankCrash, exit 3, the rank's traceback with ``--debug``) unless it is a KvplanError; a rank that died without one
(a signal, os._exit) or hung raises RankFailure (exit 2).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from pydantic import BaseModel, ConfigDict, computed_field

from kvplan.cost.runtimes import get_engine
from kvplan.cost.parallel import Layout, check_layout, pp_partition, rank_weights
from kvplan.errors import KvplanError
from kvplan.model.card import ModelCard
from kvplan.model.catalog import load_card
from kvplan.model.dtypes import parse_dtype
from kvplan.planning.estimate import estimate
from kvplan.verify import allocator
from kvplan.verify.activations import TOKEN_ID_BYTES, activation_peaks
from kvplan.verify.limits import check_fits_machine
from kvplan.cost.comm import comm_bytes
from kvplan.verify.rank_predict import rank_card, rank_flops, rank_kv_bytes, rank_kv_tensor_bytes
from kvplan.verify.reference.shrink import shrink
from kvplan.verify.run import PEAK_TOLERANCE, Check, _check, _check_inputs, reference_import, signals_held

LOGITS_TOLERANCE = {"fp32": 1e-4, "bf16": 5e-2, "fp16": 1e-2}  # max |sharded - unsharded| logit
DEFAULT_TIMEOUT = 300.0
_RESULT = ConfigDict(frozen=True, extra="forbid")


class RankFailure(KvplanError):
    """A rank died or hung, or refused its input; the message names it (exit 2)."""


class RankCrash(RuntimeError):
    """A rank raised an unexpected exception: a bug in kvplan (the CLI's internal error, exit 3). The message names
    the rank; the cause (``__cause__``) holds the rank's own traceback, which ``kvplan --debug`` prints."""


class _RankTraceback(Exception):
    """The traceback text of an exception raised in a rank process (concurrent.futures' _RemoteTraceback)."""

    def __str__(self) -> str:
        return self.args[0]


class RankResult(BaseModel):
    model_config = _RESULT
    rank: int
    tp_rank: int
    pp_rank: int
    layers: list[int]  # [start, stop) of its decoder layers
    params: int
    checks: list[Check]

    @computed_field
    @property
    def ok(self) -> bool:
        return all(c.ok is not False for c in self.checks)


class ShardedResult(BaseModel):
    model_config = _RESULT
    model: str
    device: str
    backend: str
    engine: str
    kv_dtype: str
    tp: int
    pp: int
    batch: int
    seq_len: int
    prompt_len: int
    decode_steps: int
    block_size: int
    max_cache_len: int | None
    shrunk: list[str]
    ranks: list[RankResult]

    @computed_field
    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.ranks)


MAX_TIMEOUT_S = 7 * 24 * 3600.0  # a week


def verify_sharded(model: ModelCard | str | Path, *, tp: int = 1, pp: int = 1, batch: int = 1, seq_len: int = 32,
                   engine: str = "ideal", kv_dtype: str | None = None, device: str = "cpu", layers: int | None = None,
                   scale: float | None = None, decode_steps: int = 2, block_size: int = 16,
                   max_cache_len: int | None = None, seed: int = 0, timeout: float = DEFAULT_TIMEOUT) -> ShardedResult:
    base = model if isinstance(model, ModelCard) else load_card(model)
    card, shrunk = shrink(base, layers=layers, scale=scale, seq_len=seq_len)
    dtype = parse_dtype(kv_dtype or get_engine("ideal").default_dtype(card.dtype)[0], what="--kv-dtype").name
    _check_inputs(card, engine, dtype, device, batch, seq_len, decode_steps, None)
    layout = Layout(tp=tp, pp=pp)
    _check_shardable(card, layout, engine, timeout)
    backend = _backend(device, tp * pp)
    steps, prompt = decode_steps, seq_len - decode_steps
    mcl = estimate(card, batch=batch, seq_len=seq_len, kv_dtype=dtype, weight_dtype=dtype, engine=engine,
                   max_cache_len=max_cache_len, block_size=block_size).inputs.max_cache_len
    kw = dict(batch=batch, prompt_len=prompt, seq_len=seq_len, engine=engine, block_size=block_size, mcl=mcl,
              device=device)
    preds = [_predict(card, layout, r % tp, r // tp, dtype, **kw) for r in range(tp * pp)]
    full = estimate(card, batch=1, seq_len=seq_len, weight_dtype=dtype, kv_dtype=dtype, engine=engine,
                    max_cache_len=mcl, block_size=block_size).weights.bytes  # every rank builds the full model once
    check_fits_machine(sum(p["peak_prefill_bytes"] + full for p in preds),
                       sum(p["peak_decode_bytes"] + full for p in preds), device, steps, prompt, batch)
    cfg = dict(card=card.model_dump_json(), tp=tp, pp=pp, batch=batch, prompt_len=prompt, decode_steps=steps,
               engine=engine, dtype=dtype, block_size=block_size, max_cache_len=mcl, seed=seed, device=device,
               backend=backend, timeout=timeout)
    measured = launch(cfg, timeout)
    reference = _reference_logits(cfg)
    if device.startswith("cuda"):  # memory_allocated counts 512-byte-rounded blocks (kvplan.verify.allocator)
        for m in measured:
            p = preds[m["rank"]]
            p["weights_bytes"] = allocator.memory_allocated(m["param_bytes"])
            p["kv_cache_bytes"] = allocator.memory_allocated(rank_kv_tensor_bytes(
                card, parse_dtype(dtype), engine, layout, m["pp_rank"], batch=batch, seq_len=seq_len,
                block_size=block_size, max_cache_len=mcl))
    ranks = [_rank_result(preds[m["rank"]], m, reference, dtype) for m in measured]
    return ShardedResult(model=card.name, device=device, backend=backend, engine=engine, kv_dtype=dtype, tp=tp, pp=pp,
                         batch=batch, seq_len=seq_len, prompt_len=prompt, decode_steps=steps, block_size=block_size,
                         max_cache_len=mcl, shrunk=shrunk, ranks=ranks)


def _check_shardable(card: ModelCard, layout: Layout, engine: str, timeout: float) -> None:
    """What the sharded reference model cannot run, as one-line KvplanErrors naming the flag."""
    tp = layout.tp
    # kvplan plan shards state layers (kvplan.cost.parallel); the sharded reference model does not build them yet
    card.require_no_state_layers("kvplan verify --tp/--pp (the sharded reference model)")
    check_layout(card, layout)
    if not 0 < timeout <= MAX_TIMEOUT_S:  # NaN and inf fail too: a deadline must be a finite time
        raise KvplanError(f"--timeout: seconds before a hung run is stopped; allowed: 0 < seconds <= "
                          f"{MAX_TIMEOUT_S:g}, got {timeout}")
    if card.architecture != "decoder-only":
        raise KvplanError(f"--tp/--pp: the sharded verify runs decoder-only models; {card.name} is {card.architecture}")
    if tp > 1 and card.qk_norm_width == "all_heads":  # vLLM's Olmo2Attention all-gathers q/k for this norm
        raise KvplanError(f"--tp: {card.name}'s q/k norms span all heads (OLMo-2), which vLLM all-gathers across "
                          "ranks; the sharded verify does not model that gather: use --tp 1 (--pp works)")
    if card.hf_kv_heads and get_engine(engine).transformers:
        raise KvplanError(f"--engine {engine}: transformers broadcasts {card.name}'s K/V to hf_kv_heads before "
                          "caching; the sharded verify shards vLLM-style: use --engine ideal or vllm")


def _predict(card: ModelCard, layout: Layout, tp_rank: int, pp_rank: int, dtype: str, *, batch: int, prompt_len: int,
             seq_len: int, engine: str, block_size: int, mcl: int | None, device: str) -> dict:
    t, e = parse_dtype(dtype), parse_dtype(dtype).bits // 8
    w = rank_weights(card, t, layout, tp_rank, pp_rank, include_buffers=False)
    kv_kw = dict(batch=batch, seq_len=seq_len, block_size=block_size, max_cache_len=mcl)
    kv = rank_kv_bytes(card, t, engine, layout, pp_rank, **kv_kw)
    kv_prefill = rank_kv_bytes(card, t, engine, layout, pp_rank, prefill_len=prompt_len, **kv_kw)
    eng = get_engine(engine)
    fl = dict(batch=batch, prompt_len=prompt_len, seq_len=seq_len, engine=engine, max_cache_len=mcl)
    # transients of the rank's shapes; the resident bytes (weights, KV) are the rank's own
    act = activation_peaks(rank_card(card, layout.tp), batch=batch, prompt_len=prompt_len, dtype=dtype, engine=engine,
                           decode_steps=seq_len - prompt_len, max_cache_len=mcl, block_size=block_size, device=device)
    last = pp_rank == layout.pp - 1
    rows = prompt_len if eng.transformers else 1
    inputs = TOKEN_ID_BYTES * batch * seq_len  # every rank draws the whole token sequence
    pre_t, dec_t = act.prefill_transient_bytes, act.decode_transient_bytes - TOKEN_ID_BYTES * batch
    if last and layout.tp > 1:  # the all-gather: tp local logit blocks, their concatenation (the full padded row)
        vocab = rank_card(card, layout.tp).vocab_size * layout.tp
        pre_t = max(pre_t, e * batch * (prompt_len * card.hidden_size + rows * (vocab // layout.tp + 2 * vocab)))
        dec_t = max(dec_t, e * batch * (card.hidden_size + vocab // layout.tp + 2 * vocab))
    return dict(params=w.params, weights_bytes=w.bytes, kv_cache_bytes=kv,
                peak_prefill_bytes=w.bytes + inputs + kv_prefill + pre_t, peak_decode_bytes=w.bytes + inputs + kv + dec_t,
                prefill_flops=rank_flops(card, layout, pp_rank, phase="prefill", **fl),
                decode_step_flops=rank_flops(card, layout, pp_rank, phase="decode", **fl),
                comm={"prefill": comm_bytes(card, layout, pp_rank, batch=batch, new_tokens=prompt_len, logit_rows=rows,
                                            e=e),
                      "decode": comm_bytes(card, layout, pp_rank, batch=batch, new_tokens=1, logit_rows=1, e=e)},
                layers=pp_partition(card.num_layers, layout.pp)[pp_rank])


def _rank_result(pred: dict, m: dict, reference: list | None, dtype: str) -> RankResult:
    checks = [_check(name, pred[name], m[name], 0.0) for name in ("params", "weights_bytes", "kv_cache_bytes")]
    checks += [_check(name, pred[name], m[name], PEAK_TOLERANCE) for name in ("peak_prefill_bytes", "peak_decode_bytes")
               if m[name] is not None]
    checks += [_check(name, pred[name], m[name], 0.0) for name in ("prefill_flops", "decode_step_flops")
               if m[name] is not None]
    for phase in ("prefill", "decode"):
        got = m["comm"].get(phase, {})
        for op, want in pred["comm"][phase].items():
            if want or got.get(op, 0):
                checks.append(_check(f"comm_{phase}_{op}_bytes", want, got.get(op, 0), 0.0))
    if m["logits"] is not None and reference is not None:
        err = max(abs(a - b) for step_s, step_r in zip(m["logits"], reference, strict=True)
                  for row_s, row_r in zip(step_s, step_r, strict=True) for a, b in zip(row_s, row_r, strict=True))
        tol = LOGITS_TOLERANCE[dtype]
        checks.append(Check(name="logits_max_abs_error", predicted=0, measured=err, tolerance=tol, ok=err <= tol,
                            note=f"absolute: every step's last-position logits vs the unsharded model's, <= {tol:g}"))
    return RankResult(rank=m["rank"], tp_rank=m["tp_rank"], pp_rank=m["pp_rank"], layers=m["layers"],
                      params=m["params"], checks=checks)


def _backend(device: str, world: int) -> str:
    torch = reference_import("torch")  # Ctrl-C and SIGTERM held: a signal inside torch's import was lost
    dist = reference_import("torch.distributed")
    if not dist.is_available():
        raise KvplanError("--tp/--pp: this torch build has no torch.distributed")
    if device.startswith("cuda"):
        if not dist.is_nccl_available():
            raise KvplanError("--tp/--pp on --device cuda: this torch build has no NCCL backend")
        if torch.cuda.device_count() < world:
            raise KvplanError(f"--tp/--pp: {world} ranks need {world} CUDA devices, "
                              f"{torch.cuda.device_count()} are visible; use --device cpu (gloo)")
        return "nccl"
    if not dist.is_gloo_available():
        raise KvplanError("--tp/--pp on --device cpu: this torch build has no gloo backend")
    return "gloo"


def _reference_logits(cfg: dict) -> list:
    from kvplan.verify.reference.rank import reference_logits

    return reference_logits(cfg)


def launch(cfg: dict, timeout: float) -> list[dict]:
    """Run every rank in its own process; their results, or RankFailure naming the first rank that failed or hung.

    The processes fork from multiprocessing's forkserver, which imports torch once (spawning a fresh interpreter per
    rank costs ~3 s of imports each); every rank is killed and reaped before this returns or raises."""
    import multiprocessing as mp

    entry = reference_import("kvplan.verify.reference.rank").entry
    world = cfg["tp"] * cfg["pp"]
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(["kvplan.verify.reference.rank", "torch._dynamo"])
    with tempfile.TemporaryDirectory(prefix="kvplan-verify-") as tmp:
        d = Path(tmp)
        cfg = dict(cfg, store=str(d / "store"), fault=os.environ.get("KVPLAN_TEST_RANK_FAULT", ""))
        (d / "config.json").write_text(json.dumps(cfg))
        procs = []
        try:
            with _main_not_reimported(), _signals_held():
                _start_forkserver_deaf()
                for r in range(world):
                    p = ctx.Process(target=entry, args=(str(d / "config.json"), r), name=f"kvplan-rank{r}")
                    p.start()
                    procs.append(p)
            _wait(procs, d, cfg["tp"], timeout)
        finally:
            for p in procs:
                if p.exitcode is None:
                    p.kill()
            for p in procs:
                p.join()
        return [json.loads((d / f"rank{r}.json").read_text()) for r in range(world)]


def _signals_held():
    """Ctrl-C and SIGTERM are held while the ranks start and delivered once every started rank is in ``procs``, so
    the ``finally`` of ``launch`` stops each of them (an interrupt between ``start`` and ``append`` orphaned a rank,
    whose traceback came after the run folder was gone): kvplan.verify.run.signals_held, re-raised with the handlers
    in force before (KeyboardInterrupt; the CLI's SIGTERM exit). The forkserver and the ranks ignore SIGINT
    (``_start_forkserver_deaf``)."""
    return signals_held()


def _start_forkserver_deaf() -> None:
    """Start multiprocessing's forkserver with SIGINT ignored, so that it and every rank it forks ignore a Ctrl-C sent
    to the whole process group (a terminal's); the parent alone answers it and stops the ranks with SIGKILL.

    An ignored disposition survives exec (POSIX), and CPython starts the forkserver with ``restore_signals=False``
    (``multiprocessing.util.spawnv_passfds``); the forkserver itself ignores SIGINT only after importing its preload
    (CPython 3.11 ``multiprocessing/forkserver.py`` ``main``), so a Ctrl-C while it imported torch printed a
    KeyboardInterrupt traceback, and its children inherit the handler it saved. ``ensure_running`` returns once the
    process exists (its imports run after), so the parent ignores SIGINT for a few milliseconds only."""
    import signal
    from multiprocessing import forkserver

    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        forkserver.ensure_running()
    finally:
        signal.signal(signal.SIGINT, before)


@contextmanager
def _main_not_reimported():
    """multiprocessing re-runs the caller's main script in every child unless it is guarded by ``if __name__ ==
    '__main__'``; the ranks need nothing from it (their target lives in kvplan), so hide it while they start, as an
    interactive session would (multiprocessing.spawn.get_preparation_data reads __spec__ and __file__)."""
    main = sys.modules.get("__main__")
    saved = {k: main.__dict__[k] for k in ("__spec__", "__file__") if main is not None and k in main.__dict__}
    if main is not None:
        main.__dict__["__spec__"] = None
        main.__dict__.pop("__file__", None)
    try:
        yield
    finally:
        if main is not None:
            main.__dict__.pop("__spec__", None)
            main.__dict__.update(saved)


def _wait(procs: list, d: Path, tp: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        codes = [p.exitcode for p in procs]
        failed = [r for r, c in enumerate(codes) if c not in (None, 0)]
        if failed:
            r = min(failed, key=lambda r: (_is_peer_error(d, r), r))
            message = (f"rank {r} (tp_rank {r % tp}, pp_rank {r // tp}) failed with exit code {codes[r]}: "
                       f"{_why(d, r)}; all ranks stopped")
            kind, tb = d / f"rank{r}.kind", d / f"rank{r}.traceback"
            if kind.exists() and kind.read_text() == "internal":
                raise RankCrash(message) from _RankTraceback(
                    f"\n\nrank {r}'s traceback:\n{tb.read_text(errors='replace') if tb.exists() else '(none)'}")
            raise RankFailure(message)
        if all(c == 0 for c in codes):
            return
        if time.monotonic() > deadline:
            hung = [r for r, c in enumerate(codes) if c is None]
            r = min(hung, key=lambda r: (_progress(d, r), r))  # the least advanced rank holds the others up
            raise RankFailure(f"rank {r} (tp_rank {r % tp}, pp_rank {r // tp}) did not finish within {timeout:g} s "
                              f"(hung at {_phase(d, r)!r}; still running: ranks {hung}); all ranks stopped")
        time.sleep(0.02)


def _phase(d: Path, r: int) -> str:
    f = d / f"rank{r}.phase"
    return f.read_text().strip() if f.exists() else "not started"


def _progress(d: Path, r: int) -> int:
    from_phases = ("not started", "started", "joined", "sharded", "prefill", "decode")
    phase = _phase(d, r)
    return from_phases.index(phase) if phase in from_phases else 0


def _why(d: Path, r: int) -> str:
    err = d / f"rank{r}.error"
    if err.exists():
        return err.read_text().strip()[:300]
    log = d / f"rank{r}.log"
    lines = log.read_text(errors="replace").strip().splitlines() if log.exists() else []
    return lines[-1][:300] if lines else "it exited without a message"


def _is_peer_error(d: Path, r: int) -> bool:
    """A rank that failed because a peer went away (gloo connection errors) is a consequence, not the cause."""
    text = _why(d, r).lower()
    return any(s in text for s in ("connection", "peer", "closed", "gloo"))
