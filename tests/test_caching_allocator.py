"""kvplan.cost.allocator: PyTorch's CUDA caching allocator, pinned on cases worked by hand from
c10/cuda/CUDACachingAllocator.cpp (PyTorch 2.6: round_size, get_allocation_size, should_split, get_free_block,
try_merge_blocks), and the generic replay of a rank's tensors against public vLLM logs ("Model loading took X GiB",
torch.cuda.max_memory_allocated after a peak reset)."""

from pathlib import Path

from kvplan import load_card, plan
from kvplan.cost.allocator import (VLLM_ROPE, CachingAllocator, _replay, reserved_rest_bytes, rotary_cache, round_size, rounding_bytes,
                                   segment_size)
from kvplan.cost.parallel import Layout, rank_weights
from kvplan.model.dtypes import parse_dtype
from kvplan.planning.capacity.fromlog import from_log

MIB, GIB = 2**20, 2**30
ROOT = Path(__file__).resolve().parents[1]
LOGS = ROOT / "docs" / "logs"


def test_sizes_round_to_512_bytes_and_segments_by_pool():
    assert [round_size(n) for n in (1, 512, 513, 1000)] == [512, 512, 1024, 1024]
    assert segment_size(MIB) == 2 * MIB  # <= kSmallSize: a 2 MiB small-pool segment
    assert segment_size(MIB + 512) == 20 * MIB  # above 1 MiB, below kMinLargeAlloc (10 MiB): kLargeBuffer
    assert segment_size(10 * MIB) == 10 * MIB and segment_size(21 * MIB) == 22 * MIB  # rounded to 2 MiB


def test_a_large_tensor_keeps_its_segment_when_at_most_1_mib_would_remain():
    a = CachingAllocator()
    a.malloc(21 * MIB)  # a 22 MiB segment; 1 MiB would remain, not more than kSmallSize: no split
    assert (a.allocated, a.reserved, a.requested) == (22 * MIB, 22 * MIB, 21 * MIB)
    a.malloc(23 * MIB // 2)  # 11.5 MiB: a 12 MiB segment, 0.5 MiB remaining: the whole 12 MiB block
    assert (a.allocated, a.reserved) == (34 * MIB, 34 * MIB)


def test_a_mid_sized_tensor_splits_a_20_mib_segment_and_the_tail_is_reused():
    a = CachingAllocator()
    a.malloc(9 * MIB)  # a 20 MiB segment, 11 MiB split off (more than 1 MiB remains)
    assert (a.allocated, a.reserved) == (9 * MIB, 20 * MIB)
    a.malloc(9 * MIB)  # fits the 11 MiB tail: 2 MiB split off again
    assert (a.allocated, a.reserved) == (18 * MIB, 20 * MIB)
    a.malloc(3 * MIB // 2)  # 1.5 MiB takes the 2 MiB tail whole (0.5 MiB would remain)
    assert (a.allocated, a.reserved, a.requested) == (20 * MIB, 20 * MIB, 18 * MIB + 3 * MIB // 2)


def test_freed_neighbours_merge_and_best_fit_takes_the_smallest_block():
    a = CachingAllocator()
    first, second = a.malloc(9 * MIB), a.malloc(9 * MIB)
    a.release(first, 9 * MIB)
    a.release(second, 9 * MIB)  # merged with the free first block and the 2 MiB tail: one free 20 MiB block
    a.malloc(19 * MIB)
    assert (a.allocated, a.reserved) == (20 * MIB, 20 * MIB)
    b30, b24 = a.malloc(30 * MIB), a.malloc(24 * MIB)
    a.release(b30, 30 * MIB)
    a.release(b24, 24 * MIB)
    a.malloc(23 * MIB)  # best fit: the 24 MiB block (1 MiB remains: kept whole), not the 30 MiB one
    assert a.allocated == 20 * MIB + 24 * MIB and a.reserved == 74 * MIB


def test_small_tensors_share_2_mib_segments():
    a = CachingAllocator()
    for _ in range(4):
        a.malloc(1000)
    assert (a.allocated, a.reserved) == (4 * 1024, 2 * MIB)


def test_generic_replay_holds_the_qwen2_7b_logs():
    """The five docs/logs/vllm-dennislee22-qwen2-7b-* logs (vLLM 0.10.1.1): 14.2488 GiB at TP 1, 7.1217 at TP 2, for
    Qwen2-7B-Instruct (the bundled qwen2.5-7b card's shapes with its config.json's 32,768 positions). The generic
    replay leaves out Attention's seven float32 scalars per layer (attention/layer.py: 28 x 7 blocks of 512 B, 0.1
    MiB), hence within 0.0002 GiB; the tensors' own bytes are 57 and 22 MiB below the logs."""
    card = load_card("qwen2.5-7b").model_copy(update=dict(max_position_embeddings=32_768))
    bf16 = parse_dtype("bfloat16")
    for tp, logged in ((1, 14.2488), (2, 7.1217)):
        w = rank_weights(card, bf16, Layout(tp=tp), 0, 0)
        requested = w.bytes + w.buffers_bytes
        allocated = requested + rounding_bytes(card, bf16, Layout(tp=tp), 0)
        assert abs(allocated / GIB - logged) < 0.0002
        assert logged - requested / GIB > 0.02  # the requested bytes alone miss the log


def test_plans_show_the_allocated_and_the_requested_bytes():
    gemma = plan("gemma-3-27b-it", gpu="H100-SXM", max_model_len=8192, tp=4).per_gpu
    assert 100 * MIB < gemma.weights_rounding_bytes < 130 * MIB  # segment tails of 21 and 55.125 MiB tensors
    llama = plan("llama-3.1-8b", gpu="H100-SXM", max_model_len=8192).per_gpu
    assert llama.weights_rounding_bytes == 0  # hidden 4,096: every large tensor a multiple of 2 MiB
    awq = plan("qwen3-8b-awq", gpu="H100-SXM", max_model_len=8192).per_gpu
    # AWQ: replayed as created (qweight, qzeros, scales): mostly 15 of the 36 gate_up scales (32 x 24,576 fp16 =
    # 1.5 MiB) in 2.5 MiB blocks and the 1,187 MiB embedding and LM head in 1,188 MiB segments; the vLLM 0.27.1
    # RTX 4090 logs (vllm-code61585879089) print 5.71 GiB where the tensors are 5.69
    assert awq.weights_rounding_bytes == 18 * MIB
    sglang = plan("gemma-3-27b-it", gpu="H100-SXM", max_model_len=8192, tp=4, engine="sglang").per_gpu
    assert sglang.weights_rounding_bytes == 0  # vLLM's figure only


def test_a_log_the_allocator_brings_within_rounding():
    """vllm-code69421856836 (Qwen2.5-0.5B, T4, 0.6.6): 0.9276 GiB, -0.38% with the tensors' bytes alone."""
    r = from_log(LOGS / "vllm-code69421856836-qwen2.5-0.5b-t4.log")
    row = next(x for x in r.rows if x.figure == "weights")
    assert row.flags_verdict in ("exact", "within rounding"), row
    assert r.plan.per_gpu.weights_rounding_bytes > 3 * MIB


def test_empty_cache_keeps_the_free_bytes_of_segments_that_hold_a_live_block():
    """release_cached_blocks returns only wholly free segments: a 9 MiB tensor keeps its 20 MiB segment's 11 MiB
    tail; freed, the segment goes back whole; a 21 MiB tensor's 22 MiB segment holds no free block."""
    a = CachingAllocator()
    nine = a.malloc(9 * MIB)
    a.malloc(21 * MIB)
    assert a.cached_free() == 11 * MIB
    a.release(nine, 9 * MIB)
    assert a.cached_free() == 0 and a.reserved == 42 * MIB  # the free 20 MiB segment would be released


def test_gptq_marlin_replay_holds_the_phi4_load():
    """vllm-code5773335890 (Phi-4 GPTQ 4-bit, group 128, vLLM 0.6.5, H100, 'Using MarlinLinearKernel'): 'Loading
    model weights took 8.5107 GB' (GiB). The replay builds every module's qweight, g_idx, qzeros and scales, then
    repacks (new qweight and scales, g_idx and qzeros freed, a workspace per layer): 8.5108 GiB, the norms (0.8 MiB)
    left out; before the repack the blocks held 8.5641 GiB, which the log rules out. The holes and tails the
    segments keep are 148.9 MiB; without Marlin (compute capability below 8.0) the load is not replayed."""
    from kvplan.cost.allocator import _replay, cached_free_bytes

    card, bf16 = load_card(str(ROOT / "tests/data/configs/phi-4-gptq")), parse_dtype("bfloat16")
    a = _replay(card, bf16, Layout(tp=1), 0, None, frozenset(), VLLM_ROPE, True, 0)
    assert abs(a.allocated / GIB - 8.5107) < 0.0002
    assert cached_free_bytes(card, bf16, Layout(tp=1), 0, marlin=True) == a.cached_free() == 156_151_808
    assert cached_free_bytes(card, bf16, Layout(tp=1), 0, marlin=False) is None


def test_v0_0_6_5_to_0_6_6_counts_the_cached_free_bytes_as_non_torch():
    """vLLM 0.6.5-0.6.6 utils.py memory_profiling: non-torch = in use after empty_cache - baseline - allocated bytes,
    so the bytes the allocator keeps count; 0.6.4 and 0.7 do not (0.7 subtracts memory_reserved). The T4 0.6.6 log
    (Qwen2.5-0.5B) states 'non_torch_memory takes 0.11GiB': 64 MiB default + 50.2 MiB kept = 0.1115 GiB."""
    cfg = str(ROOT / "tests/data/configs/qwen2.5-0.5b")
    kw = dict(gpu="T4", max_model_len=32768)
    new, old, v07 = (plan(cfg, engine=e, **kw) for e in ("vllm==0.6.6", "vllm==0.6.4", "vllm==0.7.0"))
    kept = new.per_gpu.non_torch_cached_bytes
    assert kept == new.per_gpu.non_torch_bytes - old.per_gpu.non_torch_bytes > 0
    assert old.per_gpu.available_kv_bytes - new.per_gpu.available_kv_bytes == kept
    assert old.per_gpu.non_torch_bytes == v07.per_gpu.non_torch_bytes and v07.per_gpu.non_torch_cached_bytes == 0
    r = from_log(LOGS / "vllm-code69421856836-qwen2.5-0.5b-t4.log")
    assert abs(r.plan.per_gpu.non_torch_bytes / GIB - 0.11) <= 0.005  # the log's two decimals
    given = plan(cfg, engine="vllm==0.6.6", non_torch_memory="100MiB", **kw)  # a given figure replaces the sum
    assert given.per_gpu.non_torch_bytes == 100 * MIB and given.per_gpu.non_torch_cached_bytes == 0



def test_v0_0_7_leaves_the_cached_free_bytes_out():
    """vllm-code55594152188 (Qwen2.5-1.5B-Instruct, T4, 0.7.2): 'non_torch_memory takes 0.01GiB' where the load keeps
    143.4 MiB in its segments: 0.7's MemorySnapshot subtracts memory_reserved(), so they are not in the figure, and
    kvplan charges its 64 MiB default alone."""
    from kvplan.cost.allocator import cached_free_bytes

    card = load_card(str(ROOT / "tests/data/configs/qwen2.5-1.5b-instruct"))
    kept = cached_free_bytes(card, parse_dtype("float16"), Layout(tp=1), 0, marlin=False)
    assert kept == 150_355_968 and kept > 0.1 * GIB  # ten times the logged 0.01 GiB
    r = from_log(LOGS / "vllm-code55594152188-qwen2.5-1.5b-t4.log")
    assert r.plan.per_gpu.non_torch_bytes == 64 * MIB and r.plan.per_gpu.non_torch_cached_bytes == 0


def test_awq_tensors_keep_the_rests_of_their_segments():
    """An AWQ checkpoint's packed tensors go through the allocator as vLLM creates them (awq.py / awq_marlin.py
    create_weights: qweight int32 [k, n / 8], qzeros, scales): Qwen2.5-14B-Instruct-AWQ's gate_up qweight
    (5,120 x 27,648 / 8 int32 = 67.5 MiB) gets a 68 MiB segment and keeps it whole (0.5 MiB would remain, not more than
    kSmallSize), down (13,824 x 5,120 / 8 = 33.75 MiB) its 34 MiB: 0.75 MiB in each of 48 layers, plus the 17.5 MiB qkv,
    the 1.05 MiB down scales and the 1,485 MiB embedding and LM head. The vLLM 0.19.1 A10G log prints 9.38 GiB, the
    tensors are 9.30 GiB (-0.83%), the blocks 9.38 GiB (78.7 MiB more)."""
    gate_up, down = 5120 * 27648 // 8 * 4, 13824 * 5120 // 8 * 4
    assert (gate_up, down) == (135 * MIB // 2, 135 * MIB // 4)
    for t in (gate_up, down):
        a = CachingAllocator()
        a.malloc(t)
        assert a.allocated == segment_size(t) == t + (MIB // 2 if t == gate_up else MIB // 4)
    r = from_log(LOGS / "vllm-code51771234912-qwen2.5-14b-awq-a10g.log")
    row = next(x for x in r.rows if x.figure == "weights")
    assert row.flags_verdict == "exact", row
    g = r.plan.per_gpu
    assert f"{(g.weights_bytes - g.weights_rounding_bytes) / GIB:.2f}" == "9.30"
    assert 48 * 3 * MIB // 4 < g.weights_rounding_bytes < 80 * MIB
    assert "took 9.38 GiB" in (LOGS / "vllm-code51771234912-qwen2.5-14b-awq-a10g.log").read_text(encoding="utf-8")


def test_sglang_keeps_the_float32_rotary_cache_and_its_segment_keeps_the_temporaries_rests():
    """Worked by hand, 32,768 positions x rotary_dim 64 (Qwen2.5's): the four 128 B inv_freq tensors and t (128 KiB)
    take a 2 MiB small segment; freqs, cos and sin (4 MiB each, above kSmallSize) take the first 12 MiB of a 20 MiB
    segment and the 8 MiB float32 concatenation its 8 MiB tail. SGLang keeps that (keep_fp32): the 12 MiB the
    temporaries free merge at the segment's head and stay reserved beside it. vLLM's cache.to(bfloat16) (4 MiB)
    takes the head of that 12 MiB and the float32 one is freed: 16 MiB free beside the 4 MiB buffer."""
    sglang, vllm = CachingAllocator(), CachingAllocator()
    rotary_cache(sglang, 32768, 64, 2, False, keep_fp32=True)
    rotary_cache(vllm, 32768, 64, 2, False)
    assert (sglang.allocated, sglang.requested, sglang.reserved, sglang.cached_free()) == (8 * MIB, 8 * MIB,
                                                                                          22 * MIB, 12 * MIB)
    assert (vllm.allocated, vllm.requested, vllm.reserved, vllm.cached_free()) == (4 * MIB, 4 * MIB, 22 * MIB,
                                                                                  16 * MIB)


def test_reserved_rests_are_the_rounding_and_the_cached_free_bytes():
    """reserved_rest_bytes = (allocated - requested) + cached_free of the same replay; Llama-3.1-8B keeps none: its
    64 MiB float32 rotary cache fills its own segment, the three 32 MiB temporaries' segments are taken whole by the
    next three o_proj (4,096 x 4,096 x 2 B = 32 MiB), every other tensor is a multiple of 2 MiB above 10 MiB."""
    bf16 = parse_dtype("bf16")
    assert reserved_rest_bytes(load_card("llama-3.1-8b"), bf16, Layout(), 0) == 0
    card = load_card(str(ROOT / "tests" / "data" / "configs" / "qwen2.5-0.5b"))
    a = _replay(card, bf16, Layout(), 0, None, frozenset(), (True, 1), False, 0)
    assert reserved_rest_bytes(card, bf16, Layout(), 0, mrope_factor=1) == a.allocated - a.requested + a.cached_free()
    assert reserved_rest_bytes(card, parse_dtype("fp8_e4m3"), Layout(), 0) == 0  # not replayed
