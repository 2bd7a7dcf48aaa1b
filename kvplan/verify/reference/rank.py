"""One rank of a sharded verify run: ``entry(CONFIG.json, RANK)`` in a process forked by multiprocessing's
forkserver (``python -m kvplan.verify.reference.rank CONFIG.json RANK`` runs the same by hand).

Joins the process group (gloo on CPU, NCCL on CUDA), builds the full seeded reference model OUTSIDE the allocation
tracker, then inside it shards its stage (kvplan.verify.reference.tp), allocates its own KV cache (its KV heads, its
layers), runs the prefill and the decode steps (teacher-forced: the decode tokens are the seeded continuation, so
every rank and the unsharded model see the same inputs) and measures what single-device verify measures, plus the
bytes each collective moved. Writes ``rank{R}.json`` (or ``rank{R}.error`` with the exception's line, ``.traceback``
and ``.kind``: input for a KvplanError, else internal) in the run folder.
"""

from __future__ import annotations

import gc
import json
import os
import sys
import time
import traceback
from contextlib import nullcontext
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
from torch.utils.flop_counter import FlopCounterMode

from kvplan.cost.runtimes import get_engine
from kvplan.errors import KvplanError
from kvplan.cost.parallel import kv_heads_per_rank, pp_partition
from kvplan.model.card import ModelCard
from kvplan.verify.reference.build import build
from kvplan.verify.reference.cache import _self_cache, make_caches
from kvplan.verify.reference.generate import decode_step, prefill
from kvplan.verify.reference.measure import TORCH_DTYPES
from kvplan.verify.reference.model import Step
from kvplan.verify.reference.tp import Comm, shard
from kvplan.verify.reference.track import tracker_for


def mark(cfg: dict, rank: int, phase: str) -> None:
    """Record how far this rank got: the parent names the least advanced rank when the run hangs."""
    Path(cfg["dir"], f"rank{rank}.phase").write_text(phase)


def _fault(cfg: dict, rank: int, phase: str) -> None:
    """Test hook: cfg fault (the parent's KVPLAN_TEST_RANK_FAULT) R:die, R:raise or R:hang makes rank R exit, raise
    an unexpected exception (a bug) or sleep once it joined the group (before it marks 'joined')."""
    spec = cfg.get("fault") or ""
    if phase == "joined" and spec.partition(":")[0] == str(rank):
        if spec.endswith(":die"):
            os._exit(7)
        if spec.endswith(":raise"):
            raise RuntimeError("test fault: an unexpected exception in the rank")
        time.sleep(3600)


def run_rank(cfg: dict, rank: int) -> dict:
    tp, pp = cfg["tp"], cfg["pp"]
    tp_rank, pp_rank = rank % tp, rank // tp
    device = cfg["device"]
    if device.startswith("cuda"):
        device = f"cuda:{rank % torch.cuda.device_count()}"
        torch.cuda.set_device(device)
    else:
        torch.set_num_threads(1)
    dist.init_process_group(cfg["backend"], init_method=f"file://{cfg['store']}", rank=rank, world_size=tp * pp,
                            timeout=timedelta(seconds=cfg["timeout"]))
    _fault(cfg, rank, "joined")
    mark(cfg, rank, "joined")
    try:
        groups = [dist.new_group([s * tp + t for t in range(tp)]) for s in range(pp)] if tp > 1 else [None] * pp
        return _measure(cfg, device, rank, tp_rank, pp_rank, Comm(tp, tp_rank, rank, groups[pp_rank]))
    finally:
        dist.destroy_process_group()


def _settled(tracker, tries: int = 20) -> int:
    """Live bytes once nothing is about to be freed: unreachable cycles collected, and the buffers of the last
    collectives released -- gloo's worker thread drops its reference to a finished op's tensors just after waking
    the caller (ProcessGroupGloo::runLoop), so on a loaded machine they can outlive the call by a few ms."""
    gc.collect()
    last = tracker.current()
    for _ in range(tries):
        time.sleep(0.005)
        gc.collect()
        now = tracker.current()
        if now == last:
            return now
        last = now
    return last


def _run_steps(cfg: dict, rank: int, stage, tokens, caches: list, peers: tuple, tracker, comm: Comm,
               transformers: bool) -> tuple:
    """The prefill and the decode steps on the stage: (peak prefill bytes, prefill FLOPs, peak decode bytes, decode
    step FLOPs, last-position logits per step). Peaks and FLOPs of the decode are those of its final step."""
    prompt, steps, device = cfg["prompt_len"], cfg["decode_steps"], tokens.device
    logits: list = []
    tracker.reset_peak()
    comm.phase = "prefill"
    mark(cfg, rank, "prefill")
    with FlopCounterMode(display=False) as fc:
        out = stage(tokens[:, :prompt], Step("prefill", 0, torch.arange(prompt, device=device),
                                             last_only=not transformers), caches, *peers)
    peak_prefill, prefill_flops = tracker.peak(), fc.get_total_flops()
    logits.append(None if out is None else out[:, -1].tolist())
    del out
    peak_decode = decode_flops = None
    for i in range(steps):
        final = i == steps - 1
        comm.phase = "decode" if final else "decode_warm"
        mark(cfg, rank, "decode")
        if final:
            tracker.reset_peak()
        with FlopCounterMode(display=False) if final else nullcontext() as fc:
            pos = prompt + i
            out = stage(tokens[:, pos:pos + 1], Step("decode", pos, torch.arange(pos, pos + 1, device=device)),
                        caches, *peers)
        if final:
            peak_decode, decode_flops = tracker.peak(), fc.get_total_flops()
        logits.append(None if out is None else out[:, -1].tolist())
        del out
    return peak_prefill, prefill_flops, peak_decode, decode_flops, logits


def _measure(cfg: dict, device: str, rank: int, tp_rank: int, pp_rank: int, comm: Comm) -> dict:
    card = ModelCard.model_validate_json(cfg["card"])
    tp, pp, batch, prompt, steps = cfg["tp"], cfg["pp"], cfg["batch"], cfg["prompt_len"], cfg["decode_steps"]
    eng, t = get_engine(cfg["engine"]), TORCH_DTYPES[cfg["dtype"]]
    layers = pp_partition(card.num_layers, pp)[pp_rank]
    first, last = pp_rank == 0, pp_rank == pp - 1
    prev, nxt = (rank - tp if not first else None), (rank + tp if not last else None)
    # the full model, built on the CPU and before tracking starts: the rank's weights are the shards cloned from it
    full = build(card, engine=eng.name, dtype=t, device="cpu", seed=cfg["seed"], hf_fp32=False)  # vLLM's dtypes
    tracker = tracker_for(device)
    with tracker, torch.no_grad():
        start = tracker.current()
        stage = shard(full, layers, first=first, last=last, tp=tp, tp_rank=tp_rank, comm=comm).to(device)
        del full
        gc.collect()
        weights = tracker.current() - start
        mark(cfg, rank, "sharded")
        gen = torch.Generator(device=device).manual_seed(cfg["seed"] + 1)
        tokens = torch.randint(0, card.vocab_size, (batch, prompt + steps), generator=gen, device=device)
        base = tracker.current()
        rc = card.model_copy(update={"num_kv_heads": kv_heads_per_rank(card.num_kv_heads, tp)})
        kw = dict(dtype=t, device=device)
        # the same cache per layer as the unsharded run (cache.make_caches): sliding window, or Llama-4's chunk
        caches = [_self_cache(rc, card.window(i), eng, batch, prompt + steps, cfg["max_cache_len"] or 0,
                              cfg["block_size"], kw, card.chunk(i)) for i in layers]
        peak_prefill, prefill_flops, peak_decode, decode_flops, logits = _run_steps(
            cfg, rank, stage, tokens, caches, (prev, nxt), tracker, comm, eng.transformers)
        kv = _settled(tracker) - base
    params = sum(p.numel() for p in stage.parameters())
    return dict(rank=rank, tp_rank=tp_rank, pp_rank=pp_rank, layers=[layers.start, layers.stop], params=params,
                param_bytes=[p.numel() * p.element_size() for p in stage.parameters()], weights_bytes=weights,
                kv_cache_bytes=kv, peak_prefill_bytes=peak_prefill, peak_decode_bytes=peak_decode,
                prefill_flops=prefill_flops, decode_step_flops=decode_flops, comm=comm.bytes,
                logits=logits if last else None)


@torch.no_grad()
def reference_logits(cfg: dict) -> list:
    """The unsharded model's last-position logits of the prefill and every decode step, on the ranks' tokens."""
    card = ModelCard.model_validate_json(cfg["card"])
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        model = build(card, engine=cfg["engine"], dtype=TORCH_DTYPES[cfg["dtype"]], seed=cfg["seed"], hf_fp32=False)
        prompt, steps = cfg["prompt_len"], cfg["decode_steps"]
        gen = torch.Generator().manual_seed(cfg["seed"] + 1)
        tokens = torch.randint(0, card.vocab_size, (cfg["batch"], prompt + steps), generator=gen)
        caches = make_caches(card, engine=cfg["engine"], batch=cfg["batch"], seq_len=prompt + steps,
                             max_cache_len=cfg["max_cache_len"] or 0, block_size=cfg["block_size"],
                             dtype=TORCH_DTYPES[cfg["dtype"]])
        out = [prefill(model, tokens[:, :prompt], caches, last_only=not get_engine(cfg["engine"]).transformers)]
        out += [decode_step(model, tokens[:, prompt + i:prompt + i + 1], prompt + i, caches) for i in range(steps)]
        return [o[:, -1].tolist() for o in out]
    finally:
        torch.set_num_threads(threads)


def main(argv: list[str]) -> int:
    cfg_path, rank = Path(argv[0]), int(argv[1])
    cfg = json.loads(cfg_path.read_text())
    out = cfg_path.parent
    cfg["dir"] = str(out)
    try:
        mark(cfg, rank, "started")
        result = run_rank(cfg, rank)
    except BaseException as exc:  # the parent reports it, naming this rank
        last = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
        where = f" at {os.path.basename(last.filename)}:{last.lineno}" if last else ""
        # the whole traceback, and whether it is the user's input (a KvplanError: exit 2) or a bug (exit 3), before
        # the one line the parent waits for
        (out / f"rank{rank}.traceback").write_text("".join(traceback.format_exception(exc)))
        (out / f"rank{rank}.kind").write_text("input" if isinstance(exc, KvplanError) else "internal")
        (out / f"rank{rank}.error").write_text(f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
                                               f"{where}")
        return 1
    tmp = out / f"rank{rank}.json.tmp"
    tmp.write_text(json.dumps(result))
    tmp.rename(out / f"rank{rank}.json")
    return 0


def entry(cfg_path: str, rank: int) -> None:
    """multiprocessing target (forked from a forkserver that preloaded torch): output to the rank's log."""
    log = os.open(Path(cfg_path).parent / f"rank{rank}.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(log, 1)
    os.dup2(log, 2)
    sys.exit(main([cfg_path, str(rank)]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
