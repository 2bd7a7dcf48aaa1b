"""The sharded tables of docs/validation.md: `python benchmarks/validation_sharded.py` prints them as markdown.

Each case is the `kvplan verify ... --tp N --pp M --json` run printed above its table (the same function)."""

from __future__ import annotations

import sys
import time

from kvplan.verify.distributed import verify_sharded

CASES = [
    ("llama-2-7b", dict(tp=2, layers=2, scale=0.0625, kv_dtype="fp32")),
    ("qwen3-30b-a3b", dict(tp=8, layers=2, scale=0.0625, kv_dtype="fp32")),
    ("deepseek-v2-lite", dict(tp=2, layers=2, scale=0.0625, engine="vllm", kv_dtype="fp32")),
    ("gemma-2-9b", dict(tp=2, layers=2, scale=0.0625, engine="vllm", block_size=4, kv_dtype="fp32")),
    ("gpt2", dict(tp=2, pp=2, layers=2, scale=0.0625, kv_dtype="fp32")),
    ("llama-3-8b", dict(pp=2, layers=5, scale=0.0625, kv_dtype="fp32")),
]


def _flag(key: str, value) -> str:
    return f"--{key.replace('_', '-')} {value}"


def _pct(c) -> str:
    return f"{c.measured / c.predicted - 1:+.3%}" if c.predicted else "-"


def _exact(c) -> str:
    return f"{c.measured:,}" if c.ok else f"FAIL {c.predicted:,} vs {c.measured:,}"


def table(name: str, kw: dict) -> str:
    t0 = time.monotonic()
    r = verify_sharded(name, **kw)
    secs = time.monotonic() - t0
    cmd = f"kvplan verify --model {name} " + " ".join(_flag(k, v) for k, v in kw.items())
    out = [f"`{cmd}` ({r.tp * r.pp} ranks, {r.backend}; engine {r.engine}, batch {r.batch} x {r.prompt_len} prompt + "
           f"{r.decode_steps} decoded; {secs:.0f} s on 2 cores; ok: {r.ok})", "",
           "| rank (tp, pp) | layers | params = weights B | KV B | peak prefill | peak decode | FLOPs prefill; decode |"
           " logits max err | comm B prefill; decode (all-reduce / all-gather / send / recv) |",
           "|---|---|---|---|---|---|---|---|---|"]
    for k in r.ranks:
        c = {x.name: x for x in k.checks}

        def comm(phase: str) -> str:
            return " / ".join(f"{c[n].measured:,}" + ("" if c[n].ok else " FAIL") if n in c else "0"
                              for n in (f"comm_{phase}_{op}_bytes" for op in ("all_reduce", "all_gather", "send", "recv")))

        err = c.get("logits_max_abs_error")
        out.append(f"| {k.rank} ({k.tp_rank}, {k.pp_rank}) | {k.layers[0]}..{k.layers[1] - 1} | "
                   f"{_exact(c['params'])} = {_exact(c['weights_bytes'])} | {_exact(c['kv_cache_bytes'])} | "
                   f"{_pct(c['peak_prefill_bytes'])} | {_pct(c['peak_decode_bytes'])} | "
                   f"{_exact(c['prefill_flops'])}; {_exact(c['decode_step_flops'])} | "
                   f"{f'{err.measured:.1e}' if err else '(not last stage)'} | {comm('prefill')}; {comm('decode')} |")
    if r.shrunk:
        out += ["", "shrunk: " + "; ".join(r.shrunk)]
    return "\n".join(out) + "\n"


def sweep() -> None:
    """Every bundled card x {ideal, vllm} x {tp 2, tp 2 x pp 2}, fp32, batch 2, seq_len 12, --layers 2 --scale 1/32."""
    from kvplan.errors import KvplanError
    from kvplan.model.catalog import bundled_names
    from kvplan.verify.distributed import RankCrash

    names = [a for a in sys.argv[2:]] or bundled_names()  # --sweep [CARD ...]: those cards only
    runs, worst, failed, crashed, refused, cards = 0, {}, set(), set(), set(), set()
    for name in names:
        for engine in ("ideal", "vllm"):
            for tp, pp in ((2, 1), (2, 2)):
                try:
                    r = verify_sharded(name, tp=tp, pp=pp, layers=2, scale=1 / 32, seq_len=12, batch=2, decode_steps=3,
                                       block_size=4, engine=engine, kv_dtype="fp32")
                except KvplanError as exc:
                    print(f"{name} {engine} tp {tp} pp {pp}: refused: {exc}")
                    refused.add(name)
                    continue
                except RankCrash as exc:
                    print(f"{name} {engine} tp {tp} pp {pp}: CRASH {exc}")
                    crashed.add(name)
                    continue
                runs += 1
                cards.add(name)
                for k in r.ranks:
                    for c in k.checks:
                        if c.ok is False:
                            failed.add(name)
                            print(f"{name} {engine} tp {tp} pp {pp} rank {k.rank}: FAIL {c}")
                        if c.name.startswith("peak") and abs(c.measured / c.predicted - 1) > abs(worst.get(c.name, (0,))[0]):
                            worst[c.name] = (c.measured / c.predicted - 1, name, engine, tp, pp)
    print(f"{len(names)} cards: {len(cards)} ran ({runs} runs), {len(failed)} with a failed check {sorted(failed)}, "
          f"{len(crashed)} crashed {sorted(crashed)}, {len(refused)} refused at least once {sorted(refused)}")
    print(f"{runs} runs; worst peak errors: " + "; ".join(f"{n} {e:+.2%} ({m}, {g}, tp {t} pp {p})"
                                                           for n, (e, m, g, t, p) in worst.items()))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--sweep"]:
        sweep()
        sys.exit(0)
    wanted = set(sys.argv[1:])
    for name, kw in CASES:
        if not wanted or name in wanted:
            print(table(name, kw), flush=True)
