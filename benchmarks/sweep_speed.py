"""Scenarios per second of `kvplan sweep`, end to end: a fresh `kvplan sweep ... -o FILE.csv` process, CSV written.

    python benchmarks/sweep_speed.py [--rows 1000000] [--min-rate 100000]

The grid is 1,000 batch sizes x (rows / 1,000) sequence lengths x 2 models (a full-attention GQA model and Gemma-2's
sliding/global mix), so the per-window engine rule runs on every length. Prints the rate and exits 1 below
``--min-rate`` (the issue's floor: 100,000 scenarios/s, i.e. 1,000,000 in under 10 s on 2 cores).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--min-rate", type=float, default=100_000)
    args = ap.parse_args()
    lens = max(1, args.rows // 2000)
    cmd = [sys.executable, "-m", "kvplan", "sweep", "-m", "llama-3-8b,gemma-2-9b", "--engine", "vllm",
           "--batch", "1..1000+1", "--seq-len", f"1..{lens * 97}+97"]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "sweep.csv"
        start = time.perf_counter()
        subprocess.run([*cmd, "-o", str(out)], check=True, env=env, capture_output=True)
        elapsed = time.perf_counter() - start
        rows = sum(1 for _ in out.open()) - 1
    rate = rows / elapsed
    print(f"{rows:,} scenarios in {elapsed:.2f} s end to end (process start, CSV written): {rate:,.0f} scenarios/s")
    return 0 if rate >= args.min_rate else 1


if __name__ == "__main__":
    sys.exit(main())
