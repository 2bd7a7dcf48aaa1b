"""`kvplan sweep` / `kvplan.sweep`: grid parsing, every row equal to `estimate`, the writers and the CLI's errors."""

import csv
import io
import json
import random

import pytest

from kvplan import estimate, sweep
from kvplan.errors import KvplanError
from kvplan.model.catalog import bundled_names, load_card
from kvplan.plan.grid import parse_int_axis

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
    rows = list(sweep(card, batch=batches, seq_len=lens, engine=",".join(ENGINES), kv_dtype=_kv_dtypes(card),
                      encoder_len=enc))
    assert len(rows) == len(batches) * len(lens) * len(ENGINES) * len(_kv_dtypes(card).split(",")) * (1 + bool(enc))
    for row in rng.sample(rows, 40):
        _check_row(row, card)


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
