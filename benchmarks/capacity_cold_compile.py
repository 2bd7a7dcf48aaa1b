"""What a cold-compile default would do to the "From launch flags alone" figures of docs/capacity.md: every log in
docs/logs/ through `kvplan plan --from-log` as read (a warm boot unless the log prints a compile) and with
`--cold-compile`, listing the logs whose memory left for the cache moves, and how many cross the 5% line each way.

    PYTHONPATH=. python benchmarks/capacity_cold_compile.py
"""

from __future__ import annotations

from capacity_flags import AVAILABLE_TOLERANCE_PCT, LOGS, _within

from kvplan.errors import KvplanError
from kvplan.planning.capacity.fromlog import from_log


def main() -> None:
    to_hit = to_miss = 0
    for path in sorted(LOGS.glob("*.log")):
        try:
            warm, cold = from_log(path), from_log(path, cold_compile=True)
        except KvplanError:  # a release without the compile rule, or a log kvplan does not read
            continue
        a = next((x for x in warm.rows if x.figure == "available"), None)
        b = next((x for x in cold.rows if x.figure == "available"), None)
        if a is None or b is None or a.flags_error_pct == b.flags_error_pct:
            continue
        hit_a, hit_b = _within(a, AVAILABLE_TOLERANCE_PCT), _within(b, AVAILABLE_TOLERANCE_PCT)
        to_hit += bool(not hit_a and hit_b)
        to_miss += bool(hit_a and not hit_b)
        print(f"{path.name[:64]:64s} warm {a.flags_error_pct:+8.2f}%  cold {b.flags_error_pct:+8.2f}%")
    print(f"a cold-compile default: {to_hit} misses become hits, {to_miss} hits become misses")


if __name__ == "__main__":
    main()
