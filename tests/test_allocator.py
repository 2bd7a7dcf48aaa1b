"""The CUDA caching-allocator model (no torch, no GPU): round_size and memory_allocated, pinned by hand."""

import pytest

from kvplan.verify.allocator import memory_allocated, kv_tensor_bytes, round_size
from kvplan.model.catalog import load_card
from kvplan.model.dtypes import parse_dtype
from kvplan.cost.engines import CacheRun
from kvplan.cost.runtimes import get_engine
from kvplan.planning.estimate import estimate


@pytest.mark.parametrize("n, rounded", [(0, 0), (1, 512), (4, 512), (511, 512), (512, 512), (513, 1024),
                                        (1024, 1024), (1025, 1536), (1_000_000, 1_000_448)])
def test_round_size(n, rounded):
    assert round_size(n) == rounded


def test_memory_allocated_sums_rounded_blocks():
    # a 1-element fp32 tensor, a 100x100 fp32 tensor (40,000 B -> 79 blocks = 40,448 B), an empty one
    assert memory_allocated([4, 40_000, 0]) == 512 + 40_448


def test_kv_tensors_static_llama_2_7b():
    # 32 layers x (K, V), each 4096 tokens x 32 heads x 128 x 2 B = 32 MiB
    sizes = kv_tensor_bytes(load_card("llama-2-7b"), parse_dtype("fp16"), get_engine("ideal"), CacheRun(4096), batch=1)
    assert sizes == [33_554_432] * 64
    assert sum(sizes) == estimate("llama-2-7b", seq_len=4096).kv_cache.total_bytes
    assert memory_allocated(sizes) == sum(sizes)  # multiples of 512 already


def test_kv_tensors_paged_pages_and_rounding():
    # vllm, 100 tokens, block 16: 7 pages per layer; a page is 16 tokens x 2 x 32 x 128 x 2 B = 262,144 B
    card = load_card("llama-2-7b")
    sizes = kv_tensor_bytes(card, parse_dtype("fp16"), get_engine("vllm"), CacheRun(100, block_size=16), batch=2)
    assert sizes == [262_144] * (2 * 32 * 7)
    # a tiny page (block 1, MQA falcon-7b: 2 x 1 x 64 x 2 B = 256 B) occupies a whole 512-byte block
    tiny = kv_tensor_bytes(load_card("falcon-7b"), parse_dtype("fp16"), get_engine("vllm"),
                           CacheRun(3, block_size=1), batch=1)
    assert tiny == [256] * (32 * 3) and memory_allocated(tiny) == 512 * 96


def test_kv_tensors_sliding_ring_is_window():
    # mistral: sliding_window 4096, so 10,000 tokens keep 4096 slots per layer
    sizes = kv_tensor_bytes(load_card("mistral-7b-v0.1"), parse_dtype("bf16"), get_engine("ideal"),
                            CacheRun(10_000), batch=1)
    assert sizes == [4096 * 8 * 128 * 2] * 64
