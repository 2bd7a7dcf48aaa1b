"""The sorting dummy sampler of vLLM V0 (0.2 - 0.9.0) and V1 (0.9.1 - 0.16), derived from the sources
(serving_vllm.sorting_sampler_bytes): pinned to arithmetic from the cited sizes, and to a CPU replay of the two
samplers' tensor sequence whose live bytes a dispatch-mode tracker counts as the caching allocator rounds them."""

from __future__ import annotations

import weakref

import pytest

from kvplan.cost import serving_vllm as vl
from kvplan.cost import serving_vllm_v0 as v0
from kvplan.planning.capacity import plan

GIB = 2**30


def _blk(n: int) -> int:  # CUDACachingAllocator round_size, written out again
    return -(-n // 512) * 512


def test_the_sort_at_256_rows_of_qwen3_is_the_fitted_38_bytes_plus_rounding():
    # 256 x 151,936 = 38,895,616 entries, bf16 logits (the vocabulary is a multiple of 64: no padding)
    logits, f32, i64 = 77_791_232, 155_582_464, 311_164_928
    cub = 155_582_464 + 311_164_928 + 255  # alternate keys + values, each a multiple of 256 B, + AliasTemporaries' 255
    assert cub == 466_747_647 and _blk(cub) == 466_747_904
    # logits + float32 copy + sorted values + int64 indices + SortStable.cu's int64 iota + cub's temporaries
    expected = logits + f32 + f32 + i64 + i64 + 466_747_904
    assert expected == 1_478_033_920 == 38 * 38_895_616 + 512
    assert vl.sorting_sampler_bytes(256, 151_936, 151_936, 2) == expected


def test_fewer_than_128_rows_sort_by_a_full_sort():
    # 64 x 151,936 = 9,723,904 entries: segmented_sort_pairs_by_full_sort's two int2 buffers (8 B an entry each), the
    # keys radix_sort_pairs allocates (4 B) and DeviceRadixSort's alternate keys and int2 values (4 + 8 B): 32 B
    # where 128+ rows take 20 (the int64 iota and the alternate keys and int64 values)
    n = 9_723_904
    expected = 2 * n + 4 * n + 4 * n + 8 * n + 8 * n + 8 * n + 4 * n + _blk(12 * n + 255)
    assert vl.sorting_sampler_bytes(64, 151_936, 151_936, 2) == expected == 50 * n + 512


def test_gpt_oss_1024_rows():
    # 1,024 x 201,088 = 205,914,112 entries (under INT_MAX: one segmented sort, nothing chunked)
    n = 205_914_112
    expected = 2 * n + 4 * n + 4 * n + 8 * n + 8 * n + _blk(12 * n + 255)
    assert expected == 7_824_736_768  # 7.29 GiB
    assert vl.sorting_sampler_bytes(1024, 201_088, 201_088, 2) == expected


def test_a_float32_model_has_no_copy_unless_its_vocabulary_is_padded():
    # logits.to(torch.float32) returns the tensor itself; a padded vocabulary leaves a strided view that Sort.cpp
    # copies into a contiguous one instead
    assert vl.sorting_sampler_bytes(256, 1024, 1024, 4) == 256 * 1024 * 36 + 512  # cub's 255 B, rounded to 512
    assert (vl.sorting_sampler_bytes(256, 1000, 1024, 4) - vl.sorting_sampler_bytes(256, 1000, 1000, 4)
            == 256 * 24 * 4 + 256 * 1000 * 4)


# --- a CPU replay: the samplers' own tensor sequence (vLLM 0.11.0 v1/sample/sampler.py forward + sample +
# ops/topk_topp_sampler.py apply_top_k_top_p / random_sample; V0 0.7.3 model_executor/layers/sampler.py forward +
# _apply_top_k_top_p), run on CPU tensors under a dispatch mode that counts every fresh storage as the caching
# allocator rounds it and frees it when Python drops it. CUDA sort's own allocations (Sort.cpp's contiguous copy of a
# strided input, SortStable.cu's int64 iota, cub's temporaries) do not exist on CPU: the tracker adds them while
# aten.sort runs.

torch = pytest.importorskip("torch")
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402
from torch.utils._pytree import tree_flatten  # noqa: E402


class _Live(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.live: dict[int, int] = {}
        self.now = self.peak = 0
        self.peak_op = ""

    def _free(self, key: int) -> None:
        self.now -= self.live.pop(key)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        inside = 0
        if func.overloadpacket is torch.ops.aten.sort:
            n, rows = args[0].numel(), args[0].shape[0]
            temp = _blk(-(-4 * n // 256) * 256 + -(-8 * n // 256) * 256 + 255)  # CUB_WRAPPER: alternate keys, values
            if 1 < rows < 128:  # segmented_sort_pairs_by_full_sort: two int2 buffers, keys_out, temp
                inside = 2 * _blk(8 * n) + _blk(4 * n) + temp
            else:  # segmented_sort_pairs: the int64 iota, temp
                inside = _blk(8 * n) + temp
            if not args[0].is_contiguous():  # Sort.cpp sort_cuda_kernel: a strided input is copied first
                inside += _blk(4 * n)
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor):
                key = t.untyped_storage().data_ptr()
                if key and key not in self.live:
                    self.live[key] = _blk(t.untyped_storage().nbytes())
                    self.now += self.live[key]
                    weakref.finalize(t, self._free, key)
        if self.now + inside > self.peak:
            self.peak, self.peak_op = self.now + inside, func.overloadpacket.__name__
        return out


def _apply_top_k_top_p(logits, k, p, v1):
    """V1 ops/topk_topp_sampler.py apply_top_k_top_p, V0 sampler.py _apply_top_k_top_p: the same masks; V1 writes the
    cumsum over the softmax (``out=``) and scatters into a new tensor, V0 cumsums into a new one and scatters into
    ``torch.empty_like``."""
    logits_sort, logits_idx = logits.sort(dim=-1, descending=False)
    top_k_mask = logits_sort.size(1) - k.to(torch.long)
    top_k_mask = logits_sort.gather(1, top_k_mask.unsqueeze(dim=1))
    top_k_mask = logits_sort < top_k_mask
    logits_sort.masked_fill_(top_k_mask, -float("inf"))
    probs_sort = logits_sort.softmax(dim=-1)
    probs_sum = torch.cumsum(probs_sort, dim=-1, out=probs_sort) if v1 else probs_sort.cumsum(dim=-1)
    top_p_mask = probs_sum <= 1 - p.unsqueeze(dim=1)
    top_p_mask[:, -1] = False
    logits_sort.masked_fill_(top_p_mask, -float("inf"))
    if v1:
        return logits_sort.scatter(dim=-1, index=logits_idx, src=logits_sort)
    return torch.empty_like(logits_sort).scatter_(dim=-1, index=logits_idx, src=logits_sort)


def _v1_sampler(logits, temperature, k, p):
    def random_sample(probs):
        q = torch.empty_like(probs)
        q.exponential_()
        return probs.div_(q).argmax(dim=-1).view(-1)

    def apply_temperature(logits, temp):
        temp = torch.where(temp < 1e-5, 1.0, temp)  # all_random False
        return logits.div_(temp.unsqueeze(dim=1))

    def sample(logits):
        greedy = logits.argmax(dim=-1).view(-1)  # all_random False
        logits = apply_temperature(logits, temperature)
        logits = _apply_top_k_top_p(logits, k, p, v1=True)
        random = random_sample(logits.softmax(dim=-1, dtype=torch.float32))
        return torch.where(temperature < 1e-5, greedy, random, out=greedy)

    return sample(logits.to(torch.float32))


def _v0_sampler(logits, temperature, k, p):
    logits = logits.to(torch.float)
    logits.div_(temperature.unsqueeze(dim=1))
    logits = _apply_top_k_top_p(logits, k, p, v1=False)
    probs = torch.softmax(logits, dim=-1, dtype=torch.float)
    logprobs = torch.log_softmax(logits, dim=-1, dtype=torch.float)
    q = torch.empty_like(probs)
    q.exponential_()
    return probs.div(q).argmax(dim=1), logprobs


@pytest.mark.parametrize(("dtype", "act"), [("bfloat16", 2), ("float32", 4)])
@pytest.mark.parametrize(("vocab", "padded"), [(1000, 1024), (1024, 1024)])
@pytest.mark.parametrize("engine", ["v1", "v0"])
@pytest.mark.parametrize("rows", [128, 64])  # SortStable.cu: 128+ rows segmented_sort_pairs, 2 - 127 by full sort
def test_a_replay_of_the_sampler_peaks_in_the_sort_at_the_derived_bytes(dtype, act, vocab, padded, engine, rows):
    temperature, p = torch.full((rows,), 0.5), torch.full((rows,), 0.9)
    k = torch.full((rows,), vocab - 1)
    with _Live() as live:
        base = torch.randn(rows, padded, dtype=getattr(torch, dtype))  # the LM head's (gathered) output
        (_v1_sampler if engine == "v1" else _v0_sampler)(base[..., :vocab], temperature, k, p)  # compute_logits' view
        after = live.now
    assert live.peak_op == "sort"
    # V1 holds the greedy argmax (int64 rows) beside the sort; V0 nothing but the tensors of the formula
    beside = _blk(8 * rows) if engine == "v1" else 0
    assert live.peak == vl.sorting_sampler_bytes(rows, vocab, padded, act) + beside
    assert after == _blk(rows * padded * act)  # everything else freed: only the logits remain


def test_0_11_plan_charges_the_sort_and_the_held_hidden_states():
    # the RTX 4090 log (F1 of docs/capacity.md): "torch peak memory increase: 1.40GiB", 256 rows x 151,936; the 2,048
    # token forward's output, its last rows and their rand_like (held_hidden_bytes) beside the sort
    r = plan("qwen3-8b", gpu="RTX-4090", gpu_memory="23.53GiB", engine="vllm==0.11", gpu_memory_utilization=0.8,
             max_model_len=1024, weight_dtype="fp8_e4m3")
    expected = 1_478_033_920 + (2048 + 2 * 256) * 4096 * 2
    assert r.per_gpu.activation_bytes == expected == vl.sorting_sampler_bytes(256, 151_936, 151_936, 2) + \
        vl.held_hidden_bytes(2048, 256, 4096, 2)
    assert abs(r.per_gpu.activation_bytes / (1.40 * GIB) - 1) < 0.005  # 1.396 GiB: -0.3%
    r_fi = plan("qwen3-8b", gpu="RTX-4090", gpu_memory="23.53GiB", engine="vllm==0.11", gpu_memory_utilization=0.8,
                max_model_len=1024, weight_dtype="fp8_e4m3", flashinfer_sampler=True)
    assert r_fi.per_gpu.activation_bytes == 256 * 151_936 * (2 + 12) + (2048 + 2 * 256) * 4096 * 2


def test_v0_holds_the_forward_output_beside_the_sort():
    # V0's execute_model keeps the forward's output (max_num_batched_tokens x hidden) while the sampler sorts 256 rows
    assert v0.held_forward_bytes(8192, 4096, 2) == 64 * 2**20


def test_what_profile_run_holds_beside_the_sampler_by_release():
    """Read in the wheels (v1/worker/gpu_model_runner.py): 0.8.0 - 0.9.2's _dummy_run returns only
    ``hidden_states[logit_indices]`` (the forward's output is freed before the sampler), 0.10.0 returns both; 0.9.0+'s
    _dummy_sampler_run adds ``torch.rand_like`` of the rows (absent in 0.8.x). Llama-3.1-8B on an H100 (8,192 batched
    tokens, 1,024 rows, hidden 4,096, bf16): the peaks differ by exactly those tensors, every other rule equal."""
    from kvplan import plan

    peak = {e: plan("llama-3.1-8b", gpu="H100-SXM", max_model_len=8192, engine=f"vllm=={e}").per_gpu.activation_bytes
            for e in ("0.8.5", "0.9.0", "0.9.2", "0.10.0")}
    assert peak["0.10.0"] - peak["0.9.2"] == 8192 * 4096 * 2  # the forward's output, held from 0.10.0
    assert peak["0.9.2"] == peak["0.9.0"]
    assert peak["0.9.0"] - peak["0.8.5"] == 1024 * 4096 * 2  # rand_like of the last rows, from 0.9.0


def test_model_runner_v2_holds_the_forward_output_beside_its_sampler():
    """V2's profile_run (v1/worker/gpu/model_runner.py, read in 0.22.1 - 0.32.0) keeps ``hidden_states`` and
    ``sample_hidden_states`` (the last rows, an indexed copy) while _dummy_sampler_run samples, no rand_like. Gemma-3-1B
    on an H100 (8,192 batched tokens, 1,024 rows, hidden 1,152, bf16; vocabulary 262,144) samples above its forward,
    so the peak is the sampler's logits and partial maxima plus (8,192 + 1,024) x 1,152 x 2 = 21,233,664 B."""
    from kvplan import plan
    from kvplan.cost import serving_vllm as vl
    from kvplan.model.catalog import load_card

    card = load_card("gemma-3-1b")
    assert (card.hidden_size, card.vocab_size) == (1152, 262144)
    peak = plan("gemma-3-1b", gpu="H100-SXM", max_model_len=4096, engine="vllm==0.29").per_gpu.activation_bytes
    assert peak == vl.v2_dummy_sampler_bytes(1024, 262144, 262144, 2) + 21_233_664
