"""The communication model shared by the latency bounds (kvplan plan) and the sharded verify's byte checks."""

import pytest

from kvplan.cost.comm import comm_bytes, comm_time_s
from kvplan.cost.parallel import Layout
from kvplan.model.catalog import load_card


def test_llama_3_1_70b_tp4_decode_bytes_and_time():
    card = load_card("llama-3.1-70b")  # 80 layers, hidden 8192, vocabulary 128,256 (a multiple of 64)
    b = comm_bytes(card, Layout(tp=4), 0, batch=1, new_tokens=1, logit_rows=1, e=2)
    # 2 all-reduces per layer + 1 after the vocab-parallel embedding, each 1 token x 8192 x 2 B
    assert b == {"all_reduce": 161 * 8192 * 2, "all_gather": 128_256 // 4 * 2, "send": 0, "recv": 0}
    t = comm_time_s(card, Layout(tp=4), batch=1, new_tokens=1, logit_rows=1, e=2, link_bytes_per_s=900 * 10**9)
    assert t == pytest.approx((1.5 * 161 * 8192 * 2 + 3 * 64_128) / 450e9)


def test_pipeline_handoffs_and_one_gpu():
    card = load_card("llama-3-8b")  # 32 layers over 2 stages: [0, 16), [16, 32)
    first = comm_bytes(card, Layout(pp=2), 0, batch=4, new_tokens=1, logit_rows=1, e=2)
    last = comm_bytes(card, Layout(pp=2), 1, batch=4, new_tokens=1, logit_rows=1, e=2)
    assert first["send"] == last["recv"] == 4 * 4096 * 2 and first["recv"] == last["send"] == 0
    assert comm_time_s(card, Layout(), batch=4, new_tokens=1, logit_rows=1, e=2, link_bytes_per_s=None) == 0.0
