"""kvplan.cost.allocator: the allocated bytes of PyTorch's CUDA caching allocator, and vLLM's "Model loading took"
figure that counts them (serving_vllm.load_allocator_bytes), pinned to public logs printed to 4 decimals."""

from pathlib import Path

import pytest

from kvplan.cost import serving_vllm as vl
from kvplan.cost.allocator import CachingAllocator, allocated_bytes, round_size, segment_size
from kvplan.planning.capacity import plan

MIB, GIB = 2**20, 2**30
LOGS = Path(__file__).resolve().parents[1] / "docs" / "logs"


def test_requests_round_to_512_bytes_and_segments_by_size():
    assert [round_size(n) for n in (1, 512, 513, 1792)] == [512, 512, 1024, 2048]
    assert segment_size(512) == 2 * MIB  # kSmallBuffer
    assert segment_size(3 * MIB) == 20 * MIB  # kLargeBuffer below kMinLargeAlloc
    assert segment_size(259 * MIB) == 260 * MIB  # rounded to kRoundLarge


def test_a_large_block_keeps_a_rest_of_at_most_1_mib():
    """should_split (large pool): the rest is split off only when it is MORE than kSmallSize (1 MiB)."""
    assert allocated_bytes([("alloc", 259 * MIB)]) == 260 * MIB  # 1 MiB rest stays in the block
    assert allocated_bytes([("alloc", 259 * MIB - 512)]) == 259 * MIB - 512  # 1 MiB + 512 B is split off
    # a 3 MiB request from a 20 MiB segment leaves 17 MiB free; 16.5 MiB from it leaves 0.5 MiB: the whole block
    assert allocated_bytes([("alloc", 3 * MIB), ("alloc", 33 * MIB // 2)]) == 20 * MIB


def test_freed_blocks_merge_and_best_fit_reuses_them():
    a = CachingAllocator()
    x, y = a.malloc(4 * MIB), a.malloc(4 * MIB)  # one 20 MiB segment: x, y, 12 MiB free
    a.free(x)
    a.free(y)  # merged back into one free 20 MiB block
    assert a.allocated == 0 and [s for s, *_ in a._free[False]] == [20 * MIB]
    a.malloc(19 * MIB + MIB // 2)  # fits the merged block; its 0.5 MiB rest is not split off
    assert a.allocated == 20 * MIB


@pytest.mark.parametrize(("file", "logged", "kw", "tensors"), [
    # "Loading model weights took 0.9276 GB" (vLLM 0.6.6.post1, fp16 on a T4); the parameters as transformers counts
    # them (tests/test_params: count_params) and the rotary cache of max_position_embeddings x head_dim x 2 B
    ("vllm-code69421856836-qwen2.5-0.5b-t4.log", "0.9276", dict(engine="vllm==0.6.6", weight_dtype="fp16"),
     494_032_768 * 2 + 32768 * 64 * 2),
    ("vllm-code55594152188-qwen2.5-1.5b-t4.log", "2.8875", dict(engine="vllm==0.7.2", weight_dtype="fp16"),
     1_543_714_304 * 2 + 32768 * 128 * 2),
])
def test_model_loading_took_counts_the_allocator_blocks(file, logged, kw, tensors):
    """Qwen2.5-0.5B: 494,032,768 parameters x 2 B + the 32,768 x 64 x 2 B rotary cache = 0.92413 GiB; vLLM prints
    0.9276: the blocks whose rest stayed unsplit (the 259.66 MiB embedding takes its 260 MiB segment whole, the rotary
    cache its 4.5 MiB block, gate/up and down rests of later layers) hold 3.6 MiB more."""
    assert f"took {logged} G" in (LOGS / file).read_text(encoding="utf-8")
    model = "tests/data/configs/" + ("qwen2.5-0.5b" if "0.5b" in file else "qwen2.5-1.5b-instruct")
    r = plan(model, gpu="T4", kv_cache_memory="1GiB", max_model_len=4096, **kw)
    assert f"{r.per_gpu.weights_bytes / GIB:.4f}" == logged
    assert f"{tensors / GIB:.4f}" != logged  # the tensors alone fall short
    assert 3 * MIB < r.per_gpu.weights_bytes - tensors < 5 * MIB


def test_tensors_that_fill_their_blocks_leave_nothing():
    """Llama-3.1-8B's weights are whole multiples of 2 MiB (4,096 x 128,256 x 2 B = 1,002 MiB, ...): no rest, the
    "14.9888 GB" of the vLLM 0.6.4 logs is the parameters and the rotary cache alone."""
    from kvplan import load_card

    card = load_card("llama-3.1-8b")
    assert vl.load_allocator_bytes(card, 1, range(32), (128256, 128256), 2, 131072) == 0
    assert vl.load_allocator_bytes(load_card("qwen2.5-7b"), 1, range(28), (152064, 152064), 2, 32768) == 57 * MIB
    assert not vl.plain_load_order(load_card("qwen3-30b-a3b"))  # MoE: not replayed
