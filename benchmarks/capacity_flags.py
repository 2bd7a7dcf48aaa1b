"""Every public start-up log in docs/logs/ reproduced through `kvplan plan --from-log`; prints the "From launch
flags alone" table of docs/capacity.md and its summary.

    PYTHONPATH=. python benchmarks/capacity_flags.py

One code path: each file is read by kvplan.planning.capacity.fromlog.from_log, exactly as `kvplan plan --from-log FILE` reads
it (the model, GPU, engine version and launch flags from the file; no logged memory goes into the flags-alone
column). The second column gives kvplan the logged pool, so block arithmetic and budget errors are told apart. The
folder is globbed: a log added there is in the next run.
"""

from __future__ import annotations

import sys
from pathlib import Path

from kvplan.errors import KvplanError
from kvplan.planning.capacity.fromlog import FromLog, Row, from_log

LOGS = Path(__file__).resolve().parents[1] / "docs" / "logs"
AVAILABLE_TOLERANCE_PCT = 5.0  # issue 20: memory left for the cache within 5% of the log
WEIGHTS_TOLERANCE_PCT = 0.5  # weights per GPU within 0.5%


def results(folder: Path = LOGS) -> list[tuple[Path, FromLog | str]]:
    """Each log with its comparison, or the one-line reason kvplan cannot read it."""
    out: list[tuple[Path, FromLog | str]] = []
    for path in sorted(folder.glob("*.log")):
        try:
            out.append((path, from_log(path)))
        except KvplanError as exc:
            out.append((path, str(exc)))
    return out


def _within(row: Row | None, pct: float) -> bool | None:
    if row is None or row.flags_verdict == "GPU unknown":  # a stand-in GPU: the budget is not judged
        return None
    if row.flags_verdict in ("exact", "within rounding", "refused, as logged"):
        return True
    return row.flags_error_pct is not None and abs(row.flags_error_pct) <= pct


def agreement(rows: list[tuple[Path, FromLog | str]]) -> tuple[int, int, int, int]:
    """(logs whose available memory is within 5%, logs stating it, weights within 0.5%, logs stating weights)."""
    def count(figure: str, pct: float) -> tuple[int, int]:
        names = (figure, "load_usage") if figure == "weights" else (figure,)  # SGLang logs its load's usage
        hits = [_within(next((x for x in r.rows if x.figure in names), None), pct)
                for _, r in rows if not isinstance(r, str)]
        stated = [h for h in hits if h is not None]
        return sum(stated), len(stated)

    return (*count("available", AVAILABLE_TOLERANCE_PCT), *count("weights", WEIGHTS_TOLERANCE_PCT))


def _cell(value: float | None, row: Row) -> str:
    if value is None:
        return "-"
    text = row.logged.text.split(" + ")[0].replace(",", "")  # SGLang's pool: K size + V size
    decimals = len(text.split(".")[1]) if "." in text else 0
    return f"{value:,.{max(decimals, 2)}f}" if decimals or not float(value).is_integer() else f"{int(value):,}"


def _verdict(kind: str | None, err: float | None) -> str:
    shown = None if err is None else f"{err:+.2f}%" if abs(err) >= 0.01 else f"{err:+.4f}%"
    return {"off": shown or "off", "within rounding": "rounding",
            None: "-"}.get(kind, kind)


def main() -> None:
    rows = results()
    print("| log | model, GPU, engine | figure | logged | flags alone | verdict | logged pool | verdict |")
    print("|---|---|---|---|---|---|---|---|")
    for path, r in rows:
        if isinstance(r, str):
            print(f"| {path.name} | not read: {r} | | | | | | |")
            continue
        for j, x in enumerate(r.rows):
            head = (f"{path.name} | {r.model}, {r.plan.inputs.tp * r.plan.inputs.pp}x {r.gpu}, {r.engine}"
                    if j == 0 else " |")
            print(f"| {head} | {x.what} | {x.logged.text} | {_cell(x.flags_alone, x)} | "
                  f"{_verdict(x.flags_verdict, x.flags_error_pct)} | {_cell(x.logged_pool, x)} | "
                  f"{_verdict(x.pool_verdict, x.pool_error_pct)} |")
    a, n, w, m = agreement(rows)
    unread = sum(isinstance(r, str) for _, r in rows)
    print(f"\nFrom launch flags alone ({len(rows)} logs in docs/logs/, {unread} not read): the memory left for the "
          f"cache is within 5% of the log in {a} of {n} logs that state it, the weights per GPU within 0.5% in "
          f"{w} of {m}.")


if __name__ == "__main__":
    sys.exit(main())
