"""Cold-start cost of `kvplan estimate`, as a ratio to importing its libraries alone, both measured in this run.

    python benchmarks/cold_start.py [--runs 10]

kvplan's own code should add little on top of `import typer, pydantic, yaml, rich`: the ratio is the number to
watch (1.0 would mean kvplan costs nothing beyond its dependencies' imports). A third measurement, an empty typer
command with the same options, shows the part typer itself pays to parse options (recent typer builds a pydantic
TypeAdapter per option), so kvplan's own share is visible separately.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

from pathlib import Path

ARGS = ["--model", "llama-2-7b", "--batch", "16", "--seq-len", "4096"]
BASELINE = [sys.executable, "-c", "import typer, pydantic, yaml, rich"]
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    runs = parser.parse_args().runs
    base, floor, est = wall_s(BASELINE, runs), wall_s(TYPER_FLOOR, runs), wall_s(ESTIMATE, runs)
    print(f"import typer, pydantic, yaml, rich      : {base * 1000:7.1f} ms (median of {runs})")
    print(f"empty typer command, same options       : {floor * 1000:7.1f} ms (typer's own parsing floor)")
    print(f"kvplan estimate llama-2-7b (table)      : {est * 1000:7.1f} ms")
    print(f"ratio estimate / library imports        : {est / base:7.2f}x")
    print(f"ratio estimate / empty typer command    : {est / floor:7.2f}x")
    print(f"kvplan's own cost above the typer floor : {(est - floor) * 1000:7.1f} ms")


if __name__ == "__main__":
    main()
