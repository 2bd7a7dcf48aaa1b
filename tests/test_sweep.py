"""`kvplan sweep` / `kvplan.sweep`: grid parsing, every row equal to `estimate`, the writers and the CLI's errors."""

import csv
import io
import json
import os
import random

import pytest

from helpers import one_line_error

from kvplan import estimate, sweep
from kvplan.errors import KvplanError
from kvplan.model.catalog import bundled_names, load_card
from kvplan.planning.sweep.grid import parse_int_axis

ENGINES = ("ideal", "hf-dynamic", "hf-static", "vllm")


@pytest.mark.parametrize("text, values", [
    ("1..256*2", [1, 2, 4, 8, 16, 32, 64, 128, 256]),
    ("1024..4096+1024", [1024, 2048, 3072, 4096]),
    ("1,2,8", [1, 2, 8]),
    ("3, 1..4*2 ,3", [3, 1, 2, 4]),
    ("5..5*2", [5]),
])
def test_int_axis(text, values):
    assert parse_int_axis(text, "--batch") == values


@pytest.mark.parametrize("text, words", [
    ("1..10*1", "never ends"), ("1..10+0", "never ends"), ("10..1*2", "empty"), ("", "empty grid"),
    (",", "empty grid"), ("0", "not a positive"), ("1..x", "cannot read"), ("1..100000000+1", "at most"),
])
def test_int_axis_refuses(text, words):
    with pytest.raises(KvplanError, match=words):
        parse_int_axis(text, "--batch")


def _check_row(row, card):
    kw = dict(batch=row["batch"], seq_len=row["seq_len"], kv_dtype=row["kv_dtype"], weight_dtype=row["weight_dtype"],
              engine=row["engine"], attention=row["attention"], encoder_len=row.get("encoder_len"))
    e = estimate(card, **kw)
    assert row["kv_cache.bytes_per_token"] == e.kv_cache.bytes_per_token, kw
    assert row["kv_cache.bytes_per_sequence"] == e.kv_cache.bytes_per_sequence, kw
    assert row["kv_cache.total_bytes"] == e.kv_cache.total_bytes, kw
    assert row["weights.bytes"] == e.weights.bytes, kw
    assert row["total_bytes"] == e.total_bytes, kw


def _kv_dtypes(card):
    return "fp16,bf16" if card.architecture != "decoder-only" else "fp16,bf16,fp32"


@pytest.mark.parametrize("name", bundled_names())
def test_random_rows_equal_estimate(name):
    """Hundreds of rows over all bundled cards (every engine, dtypes, odd lengths) against estimate itself."""
    card = load_card(name)
    rng = random.Random(name)
    batches = sorted(rng.sample(range(1, 300), 4))
    lens = sorted({1, 15, 16, 17} | set(rng.sample(range(2, 140_000), 6)) | {4095, 4096, 4097})
    enc = "7,512" if card.architecture == "encoder-decoder" else None
    engines = [e for e in ENGINES if not enc or e not in ("vllm", "sglang")]  # neither loads T5 (refused)
    rows = list(sweep(card, batch=batches, seq_len=lens, engine=",".join(engines), kv_dtype=_kv_dtypes(card),
                      encoder_len=enc))
    assert len(rows) == len(batches) * len(lens) * len(engines) * len(_kv_dtypes(card).split(",")) * (1 + bool(enc))
    for row in rng.sample(rows, 40):
        _check_row(row, card)


def test_chunked_layers_hold_their_chunk():
    # Llama-4 Scout, 20,000 tokens: 12 global layers hold them all, the 36 chunked layers only the last token's
    # 8,192-token chunk so far (20,000 - 2 x 8,192 = 3,616); 8 KV heads x 128 x (K,V) x 2 B = 4,096 B per layer
    row = next(iter(sweep("llama-4-scout-17b-16e", batch="1", seq_len="20000", engine="ideal", kv_dtype="bf16")))
    assert row["kv_cache.bytes_per_sequence"] == 4096 * (12 * 20_000 + 36 * 3_616) == 1_516_240_896


def test_layouts_and_quantized_rows_equal_estimate():
    rows = list(sweep("llama-3-8b,gemma-2-9b", batch="1..64*4", seq_len="1..9000*3", attention="card,mha,mqa,gqa:2",
                      kv_dtype="int4,int8,fp8_e4m3", engine="ideal"))
    rng = random.Random(1)
    for row in rng.sample(rows, 120):
        _check_row(row, row["model"])


def test_roofline_columns_equal_estimate():
    row = list(sweep("llama-3-8b", batch="4", seq_len="3000", gpu="H100-SXM", engine="vllm"))[0]
    e = estimate("llama-3-8b", batch=4, seq_len=3000, gpu="H100-SXM", engine="vllm")
    assert row["roofline.time_per_output_token_s"] == e.roofline.time_per_output_token_s
    assert row["roofline.time_to_first_token_s"] == e.roofline.time_to_first_token_s
    assert row["roofline.fits_in_memory"] is e.roofline.fits_in_memory


def test_to_csv_round_trips(tmp_path):
    s = sweep("llama-2-7b", batch="1,2", seq_len="10,20")
    path = tmp_path / "s.csv"
    assert s.to_csv(path) == 4
    got = list(csv.DictReader(path.open()))
    want = list(s)
    assert [int(r["kv_cache.total_bytes"]) for r in got] == [r["kv_cache.total_bytes"] for r in want]
    assert list(got[0]) == list(s.columns) and got[0]["attention"] == ""
    buf = io.StringIO()
    s.to_csv(buf)
    assert buf.getvalue() == path.read_text()


_error = one_line_error


@pytest.mark.parametrize("args, words", [
    (("-m", "llama-2-7", "--seq-len", "10"), "llama-2-7b"),
    (("-m", "llama-2-7b", "--seq-len", ","), "empty grid"),
    (("-m", "llama-2-7b", "--seq-len", "10", "--batch", "1..10*1"), "never ends"),
    (("-m", "llama-2-7b", "--seq-len", "10", "--engine", "sglang", "--kv-dtype", "int4"), "--kv-dtype"),
    (("-m", "llama-2-7b", "--seq-len", "10", "--gpu", "NOPE"), "--gpu"),
    (("-m", "llama-2-7b", "--seq-len", "10", "--format", "xls"), "--format"),
    (("-m", "llama-2-7b", "--seq-len", "10", "--tp", "2"), "--gpu"),
])
def test_cli_bad_input_one_line_no_file(cli, tmp_path, args, words):
    out = tmp_path / "s.csv"
    assert words in _error(cli, "sweep", *args, "-o", str(out))
    assert list(tmp_path.iterdir()) == []


def test_cli_unwritable_output(cli, tmp_path):
    assert "cannot write" in _error(cli, "sweep", "-m", "gpt2", "--seq-len", "10", "-o", str(tmp_path / "no" / "x.csv"))
    assert "is a directory; allowed: a file path" in _error(cli, "sweep", "-m", "gpt2", "--seq-len", "10", "-o", str(tmp_path))


def _stub_planner(monkeypatch, plan):
    """kvplan.planning.capacity replaced by ``plan`` alone; its latency module (the roofline columns of a TP > 1 row)
    loaded first, or importing it under the stub fails in a worker that has not imported it yet."""
    import sys
    import types

    import kvplan.planning.capacity.latency  # noqa: F401

    monkeypatch.setitem(sys.modules, "kvplan.planning.capacity", types.SimpleNamespace(plan=plan))


def test_capacity_columns_from_planner(monkeypatch):
    """The adapter flattens whatever kvplan.planning.capacity.plan returns; one call per (layout, GPU, tp, pp,
    length)."""
    calls = []

    def plan(card, **kw):
        calls.append(kw)
        return {"max_concurrency": 2.5 * kw["tp"], "fits": True, "per_gpu": {"weights_bytes": 7, "kv_bytes_per_token": 3}}

    _stub_planner(monkeypatch, plan)
    rows = list(sweep("gpt2", batch="1,2,4", seq_len="100,200", gpu="H100-SXM", tp="1,2"))
    assert len(rows) == 12 and len(calls) == 4
    assert rows[0]["tp"] == 1 and rows[0]["max_model_len"] == 100 == calls[0]["max_model_len"]
    assert {r["max_concurrency"] for r in rows} == {2.5, 5.0} and rows[0]["per_gpu.weights_bytes"] == 7
    assert rows[0]["kv_cache.num_blocks"] is None


def test_cli_writes_each_format(cli, tmp_path):
    for name, first in (("s.csv", "model,engine"), ("s.jsonl", '{"model":'), ("s.md", "| model |")):
        code, _, err = cli("sweep", "-m", "llama-2-7b,gemma-2-9b", "--batch", "1..8*2", "--seq-len", "1024,8192",
                           "-o", str(tmp_path / name))
        assert code == 0, err
        text = (tmp_path / name).read_text()
        assert text.startswith(first) and "wrote" in err
    lines = (tmp_path / "s.jsonl").read_text().splitlines()
    assert len(lines) == 16 and json.loads(lines[-1])["kv_cache.total_bytes"] == estimate(
        "gemma-2-9b", batch=8, seq_len=8192).kv_cache.total_bytes
    assert len([x for x in os.listdir(tmp_path) if x.startswith(".")]) == 0


def test_interrupt_leaves_no_file(tmp_path, monkeypatch):
    from kvplan.report import tabular

    def boom(*a):
        raise KeyboardInterrupt

    s = sweep("gpt2", batch="1..4*2", seq_len="10")
    monkeypatch.setattr(tabular, "_jsonl", boom)
    with pytest.raises(KeyboardInterrupt):
        from kvplan.files import open_atomic

        with open_atomic(tmp_path / "x.jsonl") as f:
            tabular.write_rows("jsonl", s, s.tuples(), f)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("kw", [
    dict(model="llama-3-8b,gemma-2-9b", attention="card,gqa:2", engine="vllm,hf-static"),
    dict(model="t5-base", encoder_len="1,77"),
    dict(model="llama-3-8b,t5-base", encoder_len="1,77"),
])
def test_fast_csv_equals_csv_writer(kw):
    from kvplan.planning.sweep import write_csv

    s = sweep(batch="1..9*3", seq_len="1,4095,4097", **kw)
    assert s.fast_csv
    fast, slow = io.StringIO(), io.StringIO()
    assert s.to_csv(fast) == len(s)
    write_csv(s.columns, s.tuples(), slow)
    assert fast.getvalue() == slow.getvalue()


def test_one_grid_holds_decoder_only_and_encoder_decoder_models():
    """--encoder-len multiplies only the encoder-decoder model's rows; the decoder-only model's rows leave it empty,
    and each row equals estimate (QA D 9: the grid was refused either way)."""
    s = sweep("llama-3-8b,t5-base", seq_len="128,256", encoder_len="64,512")
    rows = list(s)
    assert len(s) == len(rows) == 2 + 4
    assert [r["encoder_len"] for r in rows] == [None, None, 64, 64, 512, 512]
    for row in rows:
        _check_row(row, load_card(row["model"]))
    with pytest.raises(KvplanError, match="--encoder-len: t5-base is encoder-decoder"):
        sweep("llama-3-8b,t5-base", seq_len="128")
    with pytest.raises(KvplanError, match="--encoder-len: only for encoder-decoder models"):
        sweep("llama-3-8b,gpt2", seq_len="128", encoder_len="64")


def test_progress_counts_every_row():
    from kvplan.report.tabular import Progress, write_sweep

    s = sweep("gpt2", batch="1..50000+1", seq_len="8,9")
    for fmt in ("csv", "jsonl"):
        with Progress(len(s)) as p:
            assert sum(1 for _ in p.counted(s.tuples())) == p.done == 100_000
        assert write_sweep(fmt, s, io.StringIO()) == 100_000


def test_planner_refusal_is_a_row(monkeypatch):
    def plan(card, **kw):
        if kw["tp"] == 1:
            raise KvplanError("--gpu-memory-utilization: no memory left for the cache")
        return {"max_concurrency": 3.0, "fits": True}

    _stub_planner(monkeypatch, plan)
    rows = list(sweep("gpt2", seq_len="100", gpu="H100-SXM", tp="1,2"))
    assert [(r["fits"], r["max_concurrency"], bool(r["plan_error"])) for r in rows] == [(False, 0.0, True),
                                                                                        (True, 3.0, False)]


def test_search_holds_an_fp32_checkpoint_on_one_h100_within_a_ttft_budget():
    """Gemma-2-9B (float32 checkpoint, served in bf16) with a 500 ms TTFT budget: one H100 is enough."""
    from kvplan.planning.capacity.search import search

    res = search("gemma-2-9b", max_model_len=8192, concurrency=1, gpus=["H100-SXM"], ttft_ms=500)
    best = res.options[0]
    assert (best.num_gpus, best.tp) == (1, 1)
    assert 140 < best.ttft_ms < 170


def test_tp_with_the_default_engine_plans_without_a_block_size_nobody_gave():
    """`sweep --tp 1,2 --gpu H100-SXM` (default engine ideal): every row planned by the ideal engine's own rules,
    none blamed on --block-size; a block size the user gives still reaches the planner."""
    from kvplan import sweep
    from kvplan.planning.capacity import plan

    rows = list(sweep("llama-3-8b", seq_len=4096, tp="1,2", gpu="H100-SXM"))
    assert [(r["tp"], r["fits"], r["plan_error"]) for r in rows] == [(1, True, None), (2, True, None)]
    for r in rows:
        assert r["max_concurrency"] == plan("llama-3-8b", gpu="H100-SXM", tp=r["tp"], max_model_len=4096,
                                            engine="ideal").max_concurrency
    given = list(sweep("llama-3-8b", seq_len=4096, tp="1", gpu="H100-SXM", block_size=32))
    assert given[0]["fits"] is False and "--block-size" in given[0]["plan_error"]


def test_a_capacity_sweep_holds_no_axis_product_in_memory():
    """--tp 1..4096 x --pp 1..2048 is 8.4 million plan options: the first row comes without them in memory, and the
    plans a long sweep makes are not all kept (the cache is bounded)."""
    import tracemalloc

    from kvplan.planning.sweep import extra

    tracemalloc.start()
    s = sweep("llama-3-8b", seq_len=1024, gpu="H100-SXM", tp="1..4096+1", pp="1..2048+1")
    rows = s.tuples()
    first = [next(rows) for _ in range(3)]
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert len(s) == 4096 * 2048 and len(first) == 3
    assert peak < 64 * 2**20, peak  # a tuple of the options alone would take ~800 MB
    cache = {}
    lay = s._layouts[0]
    for tp in range(1, extra.CACHED_PLANS + 50):
        extra.capacity_values(cache, lay, 1024, "H100-SXM", (tp, 1, None), None, None)
    assert len(cache) <= extra.CACHED_PLANS


@pytest.mark.parametrize("kw", [dict(kv_dtype=5), dict(gpu=5), dict(engine=5.0), dict(attention=[None]),
                                dict(gpu_file=5), dict(weight_dtype=b"fp8")])
def test_a_wrong_type_in_the_python_api_is_a_kvplan_error(kw):
    with pytest.raises(KvplanError, match=f"--{next(iter(kw)).replace('_', '-')}"):
        sweep("llama-2-7b", seq_len=8, **kw)


def test_a_capacity_sweeps_roofline_columns_are_the_rows_layout():
    """At TP 4 the latency columns are `kvplan plan`'s bounds (roofline / tp plus the all-reduce), not one GPU's:
    a TP-4 row of Llama-3.1-70B equals the plan at one request, and its memory is the four GPUs'."""
    from kvplan.planning.capacity import plan

    rows = {r["tp"]: r for r in sweep("llama-3.1-70b", batch="1", seq_len="8192", gpu="H100-SXM", tp="1,4",
                                      engine="vllm")}
    one, four = rows[1], rows[4]
    p = plan("llama-3.1-70b", gpu="H100-SXM", tp=4, max_model_len=8192, engine="vllm", concurrency=1)
    assert four["roofline.time_per_output_token_s"] == pytest.approx(p.latency.tpot_ms / 1e3, rel=1e-12)
    assert four["roofline.time_to_first_token_one_request_s"] == pytest.approx(p.latency.ttft_ms / 1e3, rel=1e-12)
    assert four["roofline.time_per_output_token_s"] < one["roofline.time_per_output_token_s"] / 3
    assert four["roofline.gpu_memory_bytes"] == 4 * one["roofline.gpu_memory_bytes"]
    assert four["roofline.fits_in_memory"] and not one["roofline.fits_in_memory"] and four["fits"]


def test_a_capacity_sweeps_max_model_len_column_shows_the_length_planned():
    """Without --max-model-len each row plans its --seq-len; the column said nothing."""
    rows = list(sweep("llama-3-8b", batch="1", seq_len="2048,4096", gpu="H100-SXM", tp="1", engine="vllm"))
    assert [r["max_model_len"] for r in rows] == [2048, 4096]


@pytest.mark.parametrize("gpu, engine, block", [("H100-SXM", "vllm==0.17", 64), ("B200", "vllm", 32),
                                               ("A100-80GB", "vllm", 16)])
def test_an_mla_rows_kv_columns_take_the_engines_block_on_that_gpu(gpu, engine, block):
    """vLLM pages MLA in its backend's blocks (FlashMLA's 64 on Hopper through 0.17, FlashInfer MLA's 32 on Blackwell
    from 0.18): the KV columns agree with the plan's request bytes (they used 16 beside the plan's 64)."""
    row = list(sweep("deepseek-v2-lite", batch="1", seq_len="5000", gpu=gpu, tp="1", engine=engine))[0]
    assert row["kv_cache.bytes_per_sequence"] == row["request_kv_bytes"]
    per_token = row["kv_cache.bytes_per_token"]
    assert row["kv_cache.bytes_per_sequence"] == -(-5000 // block) * block * per_token


def test_the_estimate_takes_the_same_block_on_that_gpu():
    """`estimate --engine vllm --gpu B200` of an MLA model: FlashInfer MLA's 32-token blocks (vLLM 0.18+), as the
    sweep and the plan (it kept 16); a given --block-size wins, and without --gpu it stays 16."""
    row = list(sweep("deepseek-v2-lite", batch="1", seq_len="5000", gpu="B200", engine="vllm"))[0]
    e = estimate("deepseek-v2-lite", seq_len=5000, engine="vllm", gpu="B200")
    assert e.inputs.block_size == 32 and e.kv_cache.bytes_per_sequence == row["kv_cache.bytes_per_sequence"]
    assert estimate("deepseek-v2-lite", seq_len=5000, engine="vllm").inputs.block_size == 16
    given = estimate("deepseek-v2-lite", seq_len=5000, engine="vllm", gpu="B200", block_size=16)
    assert given.inputs.block_size == 16


@pytest.mark.parametrize("model, engines", [("llama-3-8b", "vllm==0.10,vllm"),
                                            ("gpt-oss-20b", "sglang==0.5.9,sglang")])
def test_a_versioned_engine_plans_every_row_at_that_release_and_names_it(model, engines):
    """`--engine vllm==0.10,vllm`: each row is `kvplan plan --engine` of its own release (26,420 blocks at 0.10,
    28,279 at the newest for Llama-3-8B) and says which; both rows were the newest release's, labelled `vllm`."""
    from kvplan.planning.capacity import plan

    rows = list(sweep(model, seq_len=8192, gpu="H100-SXM", tp="1", engine=engines))
    assert [r["engine"] for r in rows] == engines.split(",")
    for r in rows:
        p = plan(model, gpu="H100-SXM", max_model_len=8192, engine=r["engine"])
        assert (r["max_concurrency"], r["kv_cache.num_blocks"]) == (p.max_concurrency, p.kv_cache.num_blocks)
        _check_row(r, load_card(model))
    assert rows[0]["max_concurrency"] != rows[1]["max_concurrency"]
    assert rows[0]["kv_cache.num_blocks"] != rows[1]["kv_cache.num_blocks"]


def test_every_format_names_the_engine_release(cli, tmp_path):
    for fmt in ("csv", "jsonl", "markdown", "table"):
        for extra in ((), ("--gpu", "H100-SXM", "--tp", "1")):  # the fast CSV path and the planned rows
            code, out, err = cli("sweep", "-m", "llama-3-8b", "--engine", "vllm==0.10,vllm", "--seq-len", "8192",
                                 "--format", fmt, *extra)
            assert code == 0, err
            assert "vllm==0.10" in out and out.count("vllm==0.10") == 1, (fmt, extra)
