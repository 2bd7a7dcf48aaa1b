"""One measured run of the reference model: weights, KV cache, peaks and FLOPs of prefill and one decode step."""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass

import torch
from torch.utils.flop_counter import FlopCounterMode

from kvplan.cost.runtimes import get_engine
from kvplan.model.card import ModelCard
from kvplan.verify.reference.build import build
from kvplan.verify.reference.cache import make_caches
from kvplan.verify.reference.generate import decode_step, prefill
from kvplan.verify.reference.model import Step
from kvplan.verify.reference.track import tracker_for

TORCH_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


@dataclass(frozen=True)
class Measured:
    """Bytes as the tracker saw them (absolute live bytes for peaks), FLOPs as FlopCounterMode counted them."""

    params: int
    param_bytes: tuple[int, ...]  # each parameter tensor (shared ones once): CUDA allocator rounding per tensor
    weights_bytes: int
    kv_bytes: int  # live after the last decode step, minus weights and inputs
    peak_prefill_bytes: int  # absolute peak during prefill (weights, inputs and caches included)
    peak_decode_bytes: int | None  # absolute peak during the last decode step
    prefill_flops: int
    decode_step_flops: int | None


def _warm_up(device: str) -> None:
    """CUDA: let cuBLAS allocate its persistent workspace before anything is measured."""
    if device.startswith("cuda"):
        a = torch.ones(64, 64, device=device)
        (a @ a).sum().item()
        torch.cuda.synchronize(device)


def measure(card: ModelCard, *, batch: int, prompt_len: int, decode_steps: int, engine: str, dtype: str,
            device: str = "cpu", encoder_len: int = 0, max_cache_len: int = 0, block_size: int = 16,
            seed: int = 0) -> Measured:
    threads = torch.get_num_threads()
    if not device.startswith("cuda"):
        # shrunk models are tiny: intra-op threads only add spin-waits (25x slower on a loaded 2-core machine);
        # allocations do not depend on the thread count
        torch.set_num_threads(1)
    try:
        return _measure(card, batch=batch, prompt_len=prompt_len, decode_steps=decode_steps, engine=engine,
                        dtype=dtype, device=device, encoder_len=encoder_len, max_cache_len=max_cache_len,
                        block_size=block_size, seed=seed)
    finally:
        torch.set_num_threads(threads)


def _decode(model, caches, nxt: list, tracker, *, steps: int, prompt_len: int, device: str) -> tuple:
    """Greedy decode steps from the prefill's next tokens: (peak bytes, FLOPs) of the last step, or (None, None)."""
    batch = len(nxt)
    peak_decode = decode_flops = None
    for i in range(steps):
        last = i == steps - 1
        if last:
            tracker.reset_peak()
        with FlopCounterMode(display=False) if last else nullcontext() as fc:
            tok = torch.tensor(nxt, device=device).view(batch, 1)
            logits = decode_step(model, tok, prompt_len + i, caches)
        if last:
            peak_decode, decode_flops = tracker.peak(), fc.get_total_flops()
        nxt = logits[:, -1].argmax(-1).tolist()
        del logits, tok
    return peak_decode, decode_flops


def _measure(card: ModelCard, *, batch: int, prompt_len: int, decode_steps: int, engine: str, dtype: str,
             device: str, encoder_len: int, max_cache_len: int, block_size: int, seed: int) -> Measured:
    _warm_up(device)
    t = TORCH_DTYPES[dtype]
    tracker = tracker_for(device)
    with tracker, torch.no_grad():
        start = tracker.current()
        model = build(card, engine=engine, dtype=t, device=device, seed=seed)
        weights = tracker.current() - start
        gen = torch.Generator(device=device).manual_seed(seed + 1)
        tokens = torch.randint(0, card.vocab_size, (batch, prompt_len), generator=gen, device=device)
        enc = None
        if card.architecture == "encoder-decoder":
            enc = torch.randint(0, card.vocab_size, (batch, encoder_len), generator=gen, device=device)
        base = tracker.current()
        seq_len = prompt_len + decode_steps
        caches = None
        if card.has_kv_cache:
            caches = make_caches(card, engine=engine, batch=batch, seq_len=seq_len, encoder_len=encoder_len,
                                 max_cache_len=max_cache_len, block_size=block_size, dtype=t, device=device)
        tracker.reset_peak()
        with FlopCounterMode(display=False) as fc:
            if caches is None:  # encoder-only: one bidirectional pass, nothing cached
                pos = torch.arange(prompt_len, device=device)
                logits = model(tokens, Step("full", 0, pos))
                del pos
            else:
                logits = prefill(model, tokens, caches, last_only=not get_engine(engine).transformers, enc_tokens=enc)
        peak_prefill, prefill_flops = tracker.peak(), fc.get_total_flops()
        nxt = logits[:, -1].argmax(-1).tolist()
        del logits
        steps = decode_steps if caches is not None else 0
        peak_decode, decode_flops = _decode(model, caches, nxt, tracker, steps=steps, prompt_len=prompt_len,
                                            device=device)
        kv = tracker.current() - base
    params = sum(p.numel() for p in model.parameters())
    param_bytes = tuple(p.numel() * p.element_size() for p in model.parameters())
    return Measured(params, param_bytes, weights, kv, peak_prefill, peak_decode, prefill_flops, decode_flops)
