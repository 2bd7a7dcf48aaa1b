"""Public vLLM start-up logs reproduced from their launch flags alone; prints the second table of docs/capacity.md.

    PYTHONPATH=. python benchmarks/capacity_flags.py

Each case gives kvplan only what the deployment chose: model, GPU (the catalog's visible total, or the total the log
prints), engine version, TP, utilization, max_model_len, weight dtype. No logged memory goes in; the weights, the
profile peak, the budget, the pool and the concurrency all come out and are compared with the log. Sources are quoted
in docs/capacity.md (section "From launch flags alone").
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from capacity_logs import GIB, error, fmt, hybrid  # noqa: E402

from kvplan.planning.capacity import plan  # noqa: E402

AVAILABLE_TOLERANCE = 0.05  # issue 20: memory left for the cache within 5% of the log
WEIGHTS_TOLERANCE = 0.005  # weights per GPU within 0.5%


@dataclass
class Case:
    ref: str
    what: str
    kw: dict  # kvplan.plan arguments: the launch flags
    logged: dict  # figure -> logged value


CASES = [
    Case("GitHub code index file 34681159919",
         "Qwen3-8B-FP8, 24 GB GPU (23.53 GiB total), vLLM 0.10.2-0.11, TP1, --dtype float16, util 0.8, max_len 1,024",
         dict(model="qwen3-8b", gpu="RTX-4090", gpu_memory="23.53GiB", engine="vllm==0.11",
              gpu_memory_utilization=0.8, max_model_len=1024, weight_dtype="fp8_e4m3"),
         {"weights GiB": 8.80, "profile peak GiB": 1.40, "available GiB": 8.60, "tokens": 62608,
          "concurrency": 61.14}),
    Case("GitHub code index file 7292846353",
         "Qwen3-Next-80B-A3B-Instruct, 2x H200, vLLM 0.10.2, TP2, defaults (util 0.9, max_len 262,144)",
         dict(model=hybrid("Qwen/Qwen3-Next-80B-A3B-Instruct"), gpu="H200", tp=2, engine="vllm==0.10",
              max_model_len=262144),
         {"weights GiB": 74.2812, "available GiB": 44.59, "tokens": 973760, "concurrency": 14.77}),
    Case("aws-samples/sample-claude-code-multi-model",
         "Qwen3-Coder-30B-A3B, 4x L40S, vLLM 0.24.0, TP4, util 0.90, max_len 32,768, Torch sampler",
         dict(model="qwen3-30b-a3b", gpu="L40S", tp=4, engine="vllm==0.24", gpu_memory_utilization=0.9,
              max_model_len=32768),
         {"available GiB": 23.74, "tokens": 1037152, "concurrency": 31.65}),
]


def figures(r) -> dict:
    return {"weights GiB": r.per_gpu.weights_bytes / GIB, "profile peak GiB": r.per_gpu.activation_bytes / GIB,
            "available GiB": r.per_gpu.available_kv_bytes / GIB, "tokens": r.kv_cache.tokens, "concurrency": r.max_concurrency}


def results() -> list[tuple[Case, dict]]:
    out = []
    for c in CASES:
        kw = dict(c.kw)
        out.append((c, figures(plan(kw.pop("model"), **kw))))
    return out


def agreement(rows: list[tuple[Case, dict]]) -> tuple[int, int, int, int]:
    """(logs whose available memory is within 5%, logs stating it, weights within 0.5%, logs stating weights)."""
    def within(name: str, tol: float) -> tuple[int, int]:
        stated = [(c.logged[name], got[name]) for c, got in rows if name in c.logged]
        return sum(abs(ours / logged - 1) <= tol for logged, ours in stated), len(stated)

    return (*within("available GiB", AVAILABLE_TOLERANCE), *within("weights GiB", WEIGHTS_TOLERANCE))


def main() -> None:
    rows = results()
    print("| # | source | deployment (the flags given) | figure | logged | kvplan | error |")
    print("|---|---|---|---|---|---|---|")
    for i, (c, got) in enumerate(rows, 1):
        for j, (name, logged) in enumerate(c.logged.items()):
            head = f"F{i} | {c.ref} | {c.what}" if j == 0 else " | |"
            print(f"| {head} | {name} | {fmt(logged)} | {fmt(got[name])} | {error(got[name], logged)} |")
    a, n, w, m = agreement(rows)
    print(f"\nFrom launch flags alone: the memory left for the cache is within 5% of the log in {a} of {n} logs, "
          f"the weights per GPU within 0.5% in {w} of {m}.")


if __name__ == "__main__":
    main()
