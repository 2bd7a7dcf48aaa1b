"""The verdicts of ``kvplan plan --from-log``: kvplan's figure in a log's unit, and how it compares with the line
(exact, within the log's rounding, off by x%); shared by the comparison table and ``--calibrate``'s check."""

from __future__ import annotations

from typing import Literal

from kvplan.planning.capacity.logparse import GIB, Figure
from kvplan.planning.capacity.results import PlanResult

# The verdict tolerances, per figure (each is the log's own rounding; nothing else is forgiven):
# - a figure printed with d decimals (6.51 GiB, 1.30x, 74.2812 GiB) stands for any value within half its last digit
#   (Figure.rounding: 0.005 for two decimals), because vLLM and SGLang print f"{x:.2f}" / f"{x:.4f}";
# - an integer (blocks, tokens, max_running_requests) is exact as printed: rounding 0;
# - in the logged-pool column the pool given to kvplan is itself the rounded figure, so kvplan is run at both ends
#   of its rounding (A - r, A + r GiB) and a figure within [low - rounding, high + rounding] agrees: a pool printed
#   as 6.51 GiB holds a range of whole blocks, and every block count in that range is the log's rounding, not a rule.
Verdict = Literal["exact", "within rounding", "off", "not predicted", "outside the budget", "refused, as logged",
                  "GPU unknown", "not comparable"]  # not comparable: a flag given on the command line changes it


def value_of(name: str, r: PlanResult) -> float | None:
    """kvplan's figure ``name`` (a key of logparse.FIGURES) in the log's unit."""
    g, kv = r.per_gpu, r.kv_cache
    return {"weights": g.weights_bytes / GIB, "load_usage": (g.weights_bytes + g.non_torch_bytes) / GIB,
            "activation": g.activation_bytes / GIB,
            "non_torch": g.non_torch_bytes / GIB, "cuda_graph": g.cuda_graph_bytes / GIB,
            "cuda_graph_capture": g.cuda_graph_bytes / GIB,  # kvplan's estimate stands for the capture too
            "available": kv.available_bytes / GIB, "blocks": kv.num_blocks if r.inputs.paged else None,
            "tokens": kv.tokens, "concurrency": r.max_concurrency,
            # V0's "maximum number of tokens that can be stored in KV cache": the pool's tokens, not a length capped
            # at max_model_len (kvplan's search stops there once a request fits)
            "longest_fit": r.max_model_len_fit if not r.fits else kv.num_blocks * kv.block_size if r.inputs.paged
            and kv.groups == 1 else None,
            # the runtime's own cap (SGLang: resolve_max_num_reqs, a given --max-running-requests, the state slots)
            "max_running_requests": r.running_limit}[name]


def judge(f: Figure, ours: float | None, low: float | None = None, high: float | None = None
          ) -> tuple[Verdict, float | None]:
    """Exact (the same digits as printed), within the log's rounding (see the tolerances above), or off by x%."""
    if ours is None:
        return "not predicted", None
    err = None if f.value == 0 else round((ours - f.value) / f.value * 100, 4)
    decimals = len(f.text.replace(",", "").split(".")[1]) if "." in f.text and "+" not in f.text else 0
    if f"{ours:,.{decimals}f}".replace(",", "") == f"{f.value:.{decimals}f}" and "+" not in f.text:
        return "exact", err
    lo, hi = min(ours, low if low is not None else ours), max(ours, high if high is not None else ours)
    if lo - f.rounding - 1e-9 <= f.value <= hi + f.rounding + 1e-9:
        return "within rounding", err
    return "off", err
