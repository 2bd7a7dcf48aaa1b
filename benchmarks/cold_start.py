"""Start-up and throughput of `kvplan estimate`, as ratios measured in one run.

    python benchmarks/cold_start.py [--runs 10] [--calls 2000]

1. Cold start: `kvplan estimate` against an empty typer command with the same options (the floor any typer CLI pays
   to import its libraries and parse options; recent typer builds a pydantic TypeAdapter per option). Target: <= 1.2x.
2. Library throughput: `kvplan.estimate(...)` calls per second in one process, without and with `gpu=` (the GPU
   catalog is read once per process, bundled cards are validated once).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ARGS = ["--model", "llama-2-7b", "--batch", "16", "--seq-len", "4096"]
TYPER_FLOOR = [sys.executable, str(Path(__file__).with_name("typer_floor.py")), *ARGS]
ESTIMATE = [sys.executable, "-m", "kvplan", "estimate", *ARGS]


def wall_s(cmd: list[str], runs: int) -> float:
    """Median wall time of ``runs`` fresh interpreter runs, after one warm-up for the OS file cache."""
    subprocess.run(cmd, check=True, capture_output=True)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def calls_per_s(calls: int, **kw) -> float:
    import kvplan

    kvplan.estimate("llama-2-7b", seq_len=4096, **kw)  # warm: imports, catalog, card
    start = time.perf_counter()
    for i in range(calls):
        kvplan.estimate("llama-2-7b", batch=1 + i % 64, seq_len=4096, **kw)
    return calls / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--calls", type=int, default=2000)
    a = parser.parse_args()
    floor, est = wall_s(TYPER_FLOOR, a.runs), wall_s(ESTIMATE, a.runs)
    print(f"empty typer command, same options : {floor * 1000:7.1f} ms (median of {a.runs})")
    print(f"kvplan estimate llama-2-7b        : {est * 1000:7.1f} ms")
    print(f"ratio estimate / typer floor      : {est / floor:7.2f}x (target <= 1.2x)")
    plain, gpu = calls_per_s(a.calls), calls_per_s(a.calls, gpu="H100-SXM")
    print(f"kvplan.estimate() calls/s         : {plain:9,.0f}")
    print(f"kvplan.estimate(gpu=...) calls/s  : {gpu:9,.0f}")


if __name__ == "__main__":
    main()
