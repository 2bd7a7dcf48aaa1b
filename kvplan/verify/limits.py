"""Refuse a verify run this machine cannot hold, before anything is built: kvplan predicts the run's own peak.

The reference model runs in this process, so its predicted peak (kvplan.verify.activations: weights + KV cache +
the largest transient) plus the tracker's bookkeeping must fit the memory the OS reports as available. A run that
would not fit names the flags that shrink it instead of being killed by the OOM killer halfway.
"""

from __future__ import annotations

import os

from kvplan.errors import KvplanError
from kvplan.units import fmt_bytes

CPU_FLOPS_PER_S = {"fp32": 2e9, "bf16": 5e8, "fp16": 5e8}  # one torch thread, conservative (fp16/bf16 emulated)
MAX_SECONDS = 300  # a verify run this long is a mistake: shrink the card instead
HEADROOM = 0.7  # use at most this share of the available memory (torch's allocator, Python objects, fragmentation)
MAX_DECODE_STEPS = 4096  # each step is a Python-level forward; beyond this a run takes minutes on a CPU


def available_memory_bytes(device: str) -> int | None:
    """Bytes the run may use: CUDA free memory, or the OS's MemAvailable (None where neither can be read)."""
    if device.startswith("cuda"):
        import torch

        return torch.cuda.mem_get_info(torch.device(device))[0]
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def check_fits_machine(peak_prefill: int, peak_decode: int, device: str, decode_steps: int, prompt_len: int,
                       batch: int, available: int | None = None) -> None:
    """KvplanError (exit 2) when the predicted peak exceeds the usable memory, or the run would take too long."""
    if decode_steps > MAX_DECODE_STEPS:
        raise KvplanError(f"--decode-steps: {decode_steps} steps would run for minutes; allowed: 1..{MAX_DECODE_STEPS}"
                          " (the last step is the one measured)")
    peak = max(peak_prefill, peak_decode)
    free = available_memory_bytes(device) if available is None else available
    if free is None or peak <= HEADROOM * free:
        return
    raise KvplanError(f"--layers/--scale: the reference run would peak at {fmt_bytes(peak)} ({peak:,} B), more than "
                      f"{HEADROOM:.0%} of the {fmt_bytes(free)} available on {device}; shrink it with --layers N and "
                      f"--scale F (e.g. --layers 2 --scale 0.0625), or lower --batch ({batch}) / --seq-len")


def check_time(flops: int, device: str, dtype: str) -> None:
    """KvplanError when the run's matmul FLOPs would keep one CPU thread busy longer than MAX_SECONDS."""
    if device.startswith("cuda"):
        return
    seconds = flops / CPU_FLOPS_PER_S.get(dtype, 5e8)
    if seconds > MAX_SECONDS:
        raise KvplanError(f"--layers/--scale: the reference run needs {flops:.3g} FLOPs, about {seconds:,.0f} s on one "
                          f"CPU thread (more than {MAX_SECONDS} s); shrink it with --layers N and --scale F "
                          "(e.g. --layers 2 --scale 0.0625)")
