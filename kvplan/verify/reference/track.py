"""Measuring real allocations: live and peak bytes as the allocator saw them, never the model's own arithmetic.

- CPU: ``StorageTracker``, a TorchDispatchMode that sees the output of every aten op. Each new untyped storage is
  counted once (``nbytes()``, keyed by data_ptr) and a weakref finalizer on it subtracts it when the storage is
  freed (torch keeps one Python object per live storage, so the finalizer fires exactly at the free). Outputs that
  alias an input (views, in-place ops) are not new. Kernel-internal scratch buffers that never surface as an op
  output (e.g. inside a oneDNN matmul) are invisible here.
- CUDA: ``CudaTracker``: torch.cuda.memory_allocated / max_memory_allocated / reset_peak_memory_stats, which see
  every block of the caching allocator, rounded (kvplan.verify.allocator).
"""

from __future__ import annotations

import weakref

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves


class StorageTracker(TorchDispatchMode):
    """Live and peak bytes of every storage created while the mode is active."""

    def __init__(self) -> None:
        super().__init__()
        self.live: dict[int, int] = {}  # data_ptr -> nbytes
        self.live_bytes = 0
        self.peak_bytes = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        inputs = {t.untyped_storage().data_ptr() for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)}
        for t in tree_leaves(out):
            if isinstance(t, torch.Tensor):
                self._see(t.untyped_storage(), inputs)
        return out

    def _see(self, st: torch.UntypedStorage, inputs: set[int]) -> None:
        ptr, n = st.data_ptr(), st.nbytes()
        if n == 0 or ptr in self.live or ptr in inputs:
            return
        self.live[ptr] = n
        self.live_bytes += n
        self.peak_bytes = max(self.peak_bytes, self.live_bytes)
        weakref.finalize(st, self._freed, ptr, n)

    def _freed(self, ptr: int, n: int) -> None:
        if self.live.pop(ptr, None) is not None:
            self.live_bytes -= n

    def current(self) -> int:
        return self.live_bytes

    def peak(self) -> int:
        return self.peak_bytes

    def reset_peak(self) -> None:
        self.peak_bytes = self.live_bytes


class CudaTracker:
    """The CUDA caching allocator's own counters (bytes of allocated blocks, rounded to 512 B)."""

    def __init__(self, device: str = "cuda") -> None:
        self.device = torch.device(device)

    def __enter__(self) -> CudaTracker:
        torch.cuda.synchronize(self.device)
        return self

    def __exit__(self, *exc) -> None:
        torch.cuda.synchronize(self.device)

    def current(self) -> int:
        torch.cuda.synchronize(self.device)
        return torch.cuda.memory_allocated(self.device)

    def peak(self) -> int:
        torch.cuda.synchronize(self.device)
        return torch.cuda.max_memory_allocated(self.device)

    def reset_peak(self) -> None:
        torch.cuda.synchronize(self.device)
        torch.cuda.reset_peak_memory_stats(self.device)


def tracker_for(device: str):
    return CudaTracker(device) if device.startswith("cuda") else StorageTracker()
