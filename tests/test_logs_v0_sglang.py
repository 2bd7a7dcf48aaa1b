"""Public vLLM V0 and SGLang start-up logs (docs/logs/*.log) reproduced by kvplan (issue 20).

For each log: (1) from launch flags alone (the model, the GPU or the total the log prints, the engine version, TP,
utilization / mem_fraction_static, max_model_len, dtype) the memory left for the cache is within 5% of the log and,
where the log states them, the weights per GPU within 0.5%; (2) given the logged pool, the blocks / tokens /
concurrency / CPU blocks / state slots agree within the log's own print rounding. A gap that stays open is an
xfail(strict=True) with its reason. Each figure used here is quoted from its file (``quotes``), so the numbers below
cannot drift from the public text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from kvplan.cost import serving_sglang as sg
from kvplan.cost import serving_vllm as vl
from kvplan.cost import serving_vllm_v0 as v0
from kvplan.planning.capacity import plan

GIB, MIB = 2**30, 2**20
LOGS = Path(__file__).resolve().parents[1] / "docs" / "logs"
AVAILABLE_TOLERANCE, WEIGHTS_TOLERANCE = 0.05, 0.005  # issue 20
PRINT = 0.005  # a figure printed with two decimals is itself +-0.005


@dataclass(frozen=True)
class Log:
    file: str
    flags: dict  # kvplan.plan keywords: the launch flags and the GPU, nothing measured
    available_gib: float  # the memory the log says was left for the cache (SGLang: K + V (+ state pool))
    quotes: tuple[str, ...]  # the lines (or parts) the figures come from, verbatim in the file
    weights_gib: float | None = None  # vLLM's "Loading model weights took X GB" (GiB)
    pool: dict = field(default_factory=dict)  # the logged pool's figures
    open_gap: str = ""  # why the flags-alone budget misses (xfail, strict)
    weights_gap: str = ""  # why the weights miss (xfail, strict)


LOGS_V0 = [
    Log("vllm-code55594152188-qwen2.5-1.5b-t4.log",
        dict(model="tests/data/configs/qwen2.5-1.5b-instruct", gpu="T4", gpu_memory="14.56GiB", engine="vllm==0.7.2",
             gpu_memory_utilization=0.5, max_model_len=32768, weight_dtype="fp16"),
        2.36, ("Loading model weights took 2.8875 GB", "the rest of the memory reserved for KV Cache is 2.36GiB",
               "# CUDA blocks: 5519, # CPU blocks: 9362", "Maximum concurrency for 32768 tokens per request: 2.69x"),
        weights_gib=2.8875, pool=dict(blocks=5519, cpu_blocks=9362, concurrency=2.69)),
    Log("vllm-code69421856836-qwen2.5-0.5b-t4.log",
        dict(model="tests/data/configs/qwen2.5-0.5b", gpu="T4", gpu_memory="14.56GiB", engine="vllm==0.6.6",
             max_model_len=32768, weight_dtype="fp16"),
        10.63, ("Loading model weights took 0.9276 GB", "the rest of the memory reserved for KV Cache is 10.63GiB",
                "# GPU blocks: 58059, # CPU blocks: 21845", "Maximum concurrency for 32768 tokens per request: 28.35x"),
        weights_gib=0.9276, pool=dict(blocks=58059, cpu_blocks=21845, concurrency=28.35)),
    Log("vllm-code14319663172-llama-3.1-8b-a10.log",
        dict(model="llama-3.1-8b", gpu="A10G", gpu_memory="22.07GiB", engine="vllm==0.7.1", max_model_len=131072),
        4.60, ("Loading model weights took 14.9888 GB", "the rest of the memory reserved for KV Cache is 4.60GiB",
               "# CUDA blocks: 2356, # CPU blocks: 2048", "Maximum concurrency for 131072 tokens per request: 0.29x",
               "stored in KV cache (37696)"),
        weights_gib=14.9888, pool=dict(blocks=2356, cpu_blocks=2048, concurrency=0.29, longest=37696),
        open_gap="the logged profile peak, 0.22 GiB, is the 2,048-token chunked forward alone (0.227 GiB by kvplan's "
                 "rule): no sampler over V0's 256 dummy rows, sorted (1.16 GiB) or not (FlashInfer's path, 0.43 GiB, "
                 "test_v0_a10_peak_is_below_any_256_row_sampler), ran in it; kvplan's pool is 0.94 GiB (-21%) short. "
                 "--activation-memory 0.22GiB reproduces it"),
    Log("vllm-code13068150713-qwen3-8b-tp4-v0.log",
        dict(model="tests/data/configs/deepseek-r1-0528-qwen3-8b", gpu="A10G", gpu_memory="21.48GiB", tp=4,
             engine="vllm==0.8.5:v0",
             gpu_memory_utilization=0.93, max_model_len=65536, weight_dtype="fp16", max_num_batched_tokens=8192),
        14.49, ("model weights take 3.85GiB", "PyTorch activation peak memory takes 1.45GiB",
                "the rest of the memory reserved for KV Cache is 14.49GiB"),
        weights_gib=3.85),
    *(Log(f"vllm-issue10517-llama-3.1-8b-{length // 1000}k.log",  # one RTX 3090, two max_model_len
          dict(model="llama-3.1-8b", gpu="RTX-4090", gpu_memory="23.58GiB", engine="vllm==0.6.4", max_model_len=length),
          kv, ("Loading model weights took 14.9888 GB", f"kv_cache_size={kv:.2f}GiB gpu_memory_utilization=0.90",
               f"GPU blocks: {blocks}, # CPU blocks: 2048",
               f"Maximum concurrency for {length} tokens per request: {conc:.2f}x", *quotes),
          weights_gib=14.9888, pool=dict(blocks=blocks, cpu_blocks=2048, concurrency=conc, **more))
      for length, kv, blocks, conc, quotes, more in ((20000, 3.81, 1952, 1.56, (), {}),
                                                      (29000, 2.89, 1478, 0.82, ("stored in KV cache (23648)",),
                                                       dict(longest=23648)))),
    Log("vllm-code5773335890-phi-4-gptq-h100.log",
        dict(model="tests/data/configs/phi-4-gptq", gpu="H100-SXM", gpu_memory="79.25GiB", engine="vllm==0.6.5",
             gpu_memory_utilization=0.15, max_model_len=2048),
        2.18, ("Loading model weights took 8.5107 GB", "non_torch_memory takes 0.26GiB",
               "the rest of the memory reserved for KV Cache is 2.18GiB", "# GPU blocks: 715, # CPU blocks: 1310",
               "Maximum concurrency for 2048 tokens per request: 5.59x"),
        weights_gib=8.5107, pool=dict(blocks=715, cpu_blocks=1310, concurrency=5.59)),
    Log("vllm-code43801487237-llama-3.1-70b-fp8-mi300x.log",
        dict(model="llama-3.1-70b", gpu="MI300X", gpu_memory="191.98GiB", engine="vllm==0.6.4",
             gpu_memory_utilization=0.98, max_num_seqs=4096, max_model_len=32768, weight_dtype="fp8_e4m3"),
        95.28, ("Loading model weights took 67.6979 GB", "peak_torch_memory=86.79GiB", "kv_cache_size=95.28GiB",
                "# GPU blocks: 19513, # CPU blocks: 819", "Maximum concurrency for 32768 tokens per request: 9.53x"),
        weights_gib=67.6979, pool=dict(blocks=19513, cpu_blocks=819, concurrency=9.53),
        open_gap="ROCm: this build's non_torch_memory (memory_usage_post_profile - torch's allocated bytes: "
                 "everything on the GPU outside torch's live tensors, the HIP context and the allocator's cache "
                 "among it; 3.70 GiB before the profile, 2.37 GiB more after) is 6.07 GiB where kvplan charges 64 "
                 "MiB: +6.8% on the pool. "
                 "The profile peak itself agrees: 86.79 - 67.70 = 19.09 GiB logged, kvplan's sorting sampler over "
                 "4,096 rows x 128,256 (38 B an entry) and the 32,768-token forward's output it holds = 19.09 GiB"),
    # ROCm V0 logs (non-torch 0.46 - 1.78 GiB where CUDA V0 0.7+ logs 0.01 - 0.20 GiB; not modelled, docs/capacity.md)
    Log("vendor-builds/vllm-code54382809113-qwen3-0.6b-radeon-pro-vii.log",
        dict(model="tests/data/configs/qwen3-0.6b", gpu="RTX-4080", gpu_memory="15.98GiB", engine="vllm==0.8.5:v0",
             max_model_len=40960),
        11.10, ("Model loading took 1.3379 GiB", "non_torch_memory takes 0.46GiB",
                "the rest of the memory reserved for KV Cache is 11.10GiB", "# rocm blocks: 6495, # CPU blocks: 2340",
                "Maximum concurrency for 40960 tokens per request: 2.54x"),
        weights_gib=1.3379, pool=dict(blocks=6495, cpu_blocks=2340, concurrency=2.54),
        open_gap="+6.5%: ROCm's non-torch 0.46 GiB (kvplan 64 MiB) and the 0.22 GiB of weights kvplan does not "
                 "count (below) leave 0.62 GiB too much",
        weights_gap="1.3379 GiB logged, 1.12 GiB for Qwen3-0.6B's 596M bf16 parameters (LM head tied, as vLLM's "
                    "Qwen3ForCausalLM ties it): 0.22 GiB not identified, in a gfx906 fork (nalanzeyu/vllm-gfx906)"),
    Log("vendor-builds/vllm-code6727521558-opt-125m-rocm.log",
        dict(model="tests/data/configs/opt-125m", gpu="RTX-4090", gpu_memory="23.98GiB", engine="vllm==0.9:v0",
             max_model_len=2048, weight_dtype="fp16"),
        20.33, ("Model loading took 0.2363 GiB", "non_torch_memory takes 0.53GiB",
                "the rest of the memory reserved for KV Cache is 20.33GiB", "# rocm blocks: 37011, # CPU blocks: 7281",
                "Maximum concurrency for 2048 tokens per request: 289.15x"),
        weights_gib=0.2363, pool=dict(blocks=37011, cpu_blocks=7281, concurrency=289.15),
        weights_gap="+1.1% (2.6 MiB above the logged figure with kvplan's allocator replay of vLLM's own load; 3 MiB "
                    "below it without): the weights come in through ServerlessLLM's loader "
                    "(load_format=SERVERLESS_LLM), not vLLM's"),
    # no pool figures: the blocks are the minimum over eight workers, the quoted 39.51 GiB one worker's (KNOWN_MISSES)
    Log("vendor-builds/vllm-code58928701347-r1-distill-qwen-32b-dcu-tp8.log",
        dict(model="qwq-32b", gpu="MI250X", gpu_memory="63.98GiB", tp=8, engine="vllm==0.8.5:v0",
             gpu_memory_utilization=0.8, max_model_len=32768, block_size=32, weight_dtype="fp16"),
        39.51, ("model weights take 7.71GiB", "non_torch_memory takes 1.78GiB",
                "the rest of the memory reserved for KV Cache is 39.51GiB", "# rocm blocks: 40178, # CPU blocks: 4096"),
        # 7.71 GiB printed; the Qwen2.5-32B shapes at TP 8 (a private fine-tune whose config is not public, its
        # architecture from the 4,096 CPU blocks of 1 MiB: 64 layers x one KV head per rank x 128 x 32 tokens x 2 x
        # 2 B) request 7.64 GiB, which ROCm's caching allocator (hipified from CUDACachingAllocator.cpp) holds in
        # 7.69 GiB of blocks (kvplan.cost.allocator): -0.30%
        weights_gib=7.71),
    Log("vllm-code43538788302-llama-3.1-8b-rocm.log",
        dict(model="llama-3.1-8b", gpu="L40S", gpu_memory="44.98GiB", engine="vllm==0.6.4", max_model_len=131072),
        23.84, ("total_gpu_memory=44.98GiB", "kv_cache_size=23.84GiB", "gpu_memory_utilization=0.90")),
]

LOGS_SGLANG = [
    Log("sglang-didierdurand-qwq-32b-l4.log",  # 'Load weight begin. avail mem=21.63 GB' is the total it sizes from
        dict(model="qwq-32b", gpu="L4", gpu_memory="21.63GiB", context_memory=0, tp=4, engine="sglang==0.4.3",
             max_model_len=131072),
        2 * 1.42, ("Load weight begin. avail mem=21.63 GB", "avail mem=6.09 GB, mem usage=15.54 GB.",
                   "KV Cache is allocated. #tokens: 46611, K size: 1.42 GB, V size: 1.42 GB", "mem_fraction_static=0.85"),
        pool=dict(tokens=46611, k_gib=1.42, start_gib=21.63, after_load_gib=6.09, mfs=0.85)),
    Log("sglang-docs-send-request-llama-3.1-8b.log",
        dict(model="llama-3.1-8b", gpu="H100-SXM", engine="sglang==0.4", max_model_len=131072),
        2 * 27.13, ("Load weight begin. avail mem=78.81 GB", "avail mem=63.72 GB",
                    "KV Cache is allocated. K size: 27.13 GB, V size: 27.13 GB.", "max_total_num_tokens=444500"),
        pool=dict(tokens=444500, k_gib=27.13, start_gib=78.81, after_load_gib=63.72, mfs=0.88)),
    Log("sglang-code49361099215-llama-3.1-8b-24gb.log",  # free at start = the two figures of 'Load weight end'
        dict(model="llama-3.1-8b", gpu="RTX-4090", engine="sglang==0.4.8", max_model_len=131072),
        2 * 2.33, ("avail mem=7.37 GB, mem usage=15.02 GB.", "#tokens: 38141, K size: 2.33 GB, V size: 2.33 GB",
                   "max_total_num_tokens=38141", "context_len=131072", "available_gpu_mem=0.83 GB"),
        # 0.4.8 - 0.5.2's default on a 24,564 MiB GPU: round((24564 - 2.9 x 1024) / 24564, 3) = 0.879; 0.88 would
        # put the pool 172 tokens above the logged 38,141
        pool=dict(tokens=38141, k_gib=2.33, start_gib=7.37 + 15.02, start_print=2 * PRINT, after_load_gib=7.37,
                  mfs=0.879),
        open_gap="Windows (WSL2) Docker Desktop: 22.39 GiB was free at the load of a 24 GB GPU, about 1.1 GiB below "
                 "a Linux host's; the desktop's share is no launch flag"),
    Log("sglang-code55529353766-qwen3-14b-tp4.log",
        dict(model="qwen3-14b", gpu="RTX-4090", tp=4, engine="sglang", mem_fraction_static=0.8, max_model_len=40960),
        2 * 5.69, ("KV Cache is allocated. #tokens: 298447, K size: 5.69 GB, V size: 5.69 GB",
                   "max_total_num_tokens=298447", "max_running_requests=3730, context_len=40960"),
        pool=dict(tokens=298447, k_gib=5.69, max_running_requests=3730)),
    Log("sglang-code46415979912-lfm2-700m.log",
        dict(model="tests/data/configs/lfm2-700m", gpu="RTX-4090", gpu_memory="15.33GiB", context_memory=0,
             engine="sglang==0.5.6", max_model_len=128000),
        2 * 2.71 + 4.88, ("Load weight begin. avail mem=15.33 GB",
                          "max_mamba_cache_size: 85292, conv_state size: 4.88GB, ssm_state size: 0.00GB",
                          "KV Cache is allocated. #tokens: 473854, K size: 2.71 GB, V size: 2.71 GB"),
        pool=dict(tokens=473854, k_gib=2.71, slots=85292, conv_gib=4.88)),
    # TP 4 over NVLink: the communicators' memory before the free-memory reading (serving_sglang.NCCL_NVLINK_BYTES,
    # fitted on two other logs) takes the flags-alone pool from +8.4% to -0.6%
    Log("sglang-issue21348-qwen3-235b-fp8-tp4.log",
        dict(model="qwen3-235b-a22b", gpu="H100-SXM", tp=4, engine="sglang", mem_fraction_static=0.93,
             max_model_len=40960, weight_dtype="fp8_e4m3"),
        2 * 8.23, ("KV Cache is allocated. #tokens: 367404, K size: 8.23 GB, V size: 8.23 GB",
                   "--tp 4", "--mem-fraction-static 0.93"),
        pool=dict(tokens=367404, k_gib=8.23)),
]

ALL = LOGS_V0 + LOGS_SGLANG


def _plan(log: Log, **extra):
    kw = dict(log.flags, **extra)  # a logged pool: kvplan's what-if (V0 has no --kv-cache-memory-bytes)
    return plan(kw.pop("model"), **kw, kv_cache_memory_what_if="kv_cache_memory" in kw)


def _param(log: Log, open_gap: str = ""):
    marks = [pytest.mark.xfail(strict=True, reason=open_gap)] if open_gap else []
    return pytest.param(log, id=log.file.removesuffix(".log"), marks=marks)


@pytest.mark.parametrize("log", [_param(x) for x in ALL])
def test_the_figures_are_quoted_from_the_public_log_file(log):
    text = (LOGS / log.file).read_text(encoding="utf-8")
    head = text.splitlines()[0]
    assert head.startswith("# source: ")
    for quote in log.quotes:
        assert quote in text, quote


@pytest.mark.parametrize("log", [_param(x, x.open_gap) for x in ALL])
def test_flags_alone_leave_the_logged_memory_for_the_cache(log):
    got = _plan(log).per_gpu.available_kv_bytes / GIB
    assert abs(got / log.available_gib - 1) <= AVAILABLE_TOLERANCE, (got, log.available_gib)


@pytest.mark.parametrize("log", [_param(x, x.weights_gap) for x in ALL if x.weights_gib])
def test_flags_alone_weights_per_gpu(log):
    got = _plan(log).per_gpu.weights_bytes / GIB
    assert abs(got / log.weights_gib - 1) <= WEIGHTS_TOLERANCE, (got, log.weights_gib)


# ---- the logged pool: vLLM V0 ------------------------------------------------------------------------------------

@pytest.mark.parametrize("log", [_param(x) for x in LOGS_V0 if x.pool])
def test_v0_blocks_cpu_blocks_and_concurrency_from_the_logged_memory(log):
    """int(available // cache_block_size) within the print rounding of the logged GiB; '# CPU blocks' is the 4 GiB
    --swap-space // the same block size, exactly; concurrency = blocks x 16 / max_model_len as printed."""
    p, L = log.pool, log.flags["max_model_len"]
    r = _plan(log, kv_cache_memory=f"{log.available_gib}GiB")
    bpb, bs = r.kv_cache.bytes_per_block, r.kv_cache.block_size
    lo, hi = (int((log.available_gib + d) * GIB) // bpb for d in (-PRINT, PRINT))
    assert lo <= p["blocks"] <= hi and lo <= r.kv_cache.num_blocks <= hi
    assert v0.cpu_blocks(v0.DEFAULT_SWAP_SPACE_BYTES, bpb) == p["cpu_blocks"]
    assert f"{v0.max_concurrency(p['blocks'], bs, L):.2f}" == f"{p['concurrency']:.2f}"
    assert r.max_concurrency == v0.max_concurrency(r.kv_cache.num_blocks, bs, L)
    if "longest" in p:  # 'the maximum number of tokens that can be stored in KV cache (37696)': refused, not fit
        assert v0.max_tokens(p["blocks"], bs) == p["longest"] and not r.fits


def test_v0_pads_each_mla_entry_to_256_bytes():
    """cache_engine.py align_to_256bytes ("for MLA with a head dim of 576 ... 640 elements per cache entry ...
    (1280 bytes"): DeepSeek-V2-Lite's block is 27 layers x 640 x 2 B x 16 in V0, 576 wide in V1; a 4,096-wide
    (non-MLA) entry is not padded."""
    kw = dict(gpu="L4", max_model_len=32768, kv_cache_memory="1GiB", kv_cache_memory_what_if=True)
    old, new = plan("deepseek-v2-lite", engine="vllm==0.7.3", **kw), plan("deepseek-v2-lite", engine="vllm==0.10", **kw)
    assert old.kv_cache.bytes_per_block == 27 * 640 * 2 * 16 and new.kv_cache.bytes_per_block == 27 * 576 * 2 * 16
    assert v0.aligned_entry_elems(576, 2) == 640 and v0.aligned_entry_elems(4096, 2) == 4096
    llama = [plan("llama-3.1-8b", engine=e, **kw).kv_cache.bytes_per_block for e in ("vllm==0.6", "vllm==0.10")]
    assert llama[0] == llama[1] == 32 * 8 * 128 * 2 * 2 * 16


def test_the_yarn_rotary_cache_of_deepseek_r1_qwen3_8b_at_tp4():
    """The TP 4 A10G log serves DeepSeek-R1-0528-Qwen3-8B (its source line), Qwen3-8B's geometry with YaRN rope
    scaling factor 4 over 32,768 positions: vLLM 0.8.5 get_rope builds YaRNScalingRotaryEmbedding, whose
    _compute_cos_sin_cache spans original_max_position x scaling_factor = 131,072 positions of head_dim 128 in the
    model dtype (fp16 here) on every rank: 32 MiB, where Qwen3-8B's own 40,960 positions take 10 MiB. Those 22 MiB are
    the 0.026 GiB per rank kvplan lacked with the qwen3-8b card; the launch's --max-model-len 65536 is itself above
    Qwen3-8B's 40,960 (vLLM 0.8.5 config.py _get_and_verify_max_len refuses it unless VLLM_ALLOW_LONG_MAX_MODEL_LEN)."""
    log = next(x for x in ALL if x.file == "vllm-code13068150713-qwen3-8b-tp4-v0.log")
    assert "DeepSeek-R1-0528-Qwen3-8B" in (LOGS / log.file).read_text(encoding="utf-8").splitlines()[0]
    r = _plan(log)
    base = _plan(log, model="qwen3-8b")
    assert r.per_gpu.weights_bytes - base.per_gpu.weights_bytes == (32768 * 4 - 40960) * 128 * 2
    assert 3.845 <= r.per_gpu.weights_bytes / GIB < 3.855  # "model weights take 3.85GiB"
    assert not 3.845 <= base.per_gpu.weights_bytes / GIB < 3.855


def test_v0_batch_defaults():
    """256 sequences on every GPU; the profile's forward covers max(max_model_len, 2048) tokens up to 32K, 2048
    (chunked prefill) above (config.py SchedulerConfig); 0.10 chooses by GPU (1,024 rows on an H100)."""
    assert [v0.max_num_batched_tokens(n) for n in (1024, 32768, 32769)] == [2048, 32768, 2048]
    a = plan("llama-3.1-8b", gpu="H100-SXM", max_model_len=8192, engine="vllm==0.6").per_gpu.activation_bytes
    b = plan("llama-3.1-8b", gpu="H100-SXM", max_model_len=8192, engine="vllm==0.10").per_gpu.activation_bytes
    # the sorting sampler over 256 rows in V0 and 1,024 in 0.10: 128,256 entries a row x 38 B (bf16 logits 2, float32
    # copy 4, values 4, int64 indices 8, the sort's int64 iota 8, cub's alternate keys and values 12) + the 255 B cub
    # adds, rounded to 512; beside the 8,192-token forward's output (V0), and its last rows and rand_like too (0.10)
    assert a == 256 * 128_256 * 38 + 512 + 8192 * 4096 * 2
    assert b == 1024 * 128_256 * 38 + 512 + (8192 + 2 * 1024) * 4096 * 2


def test_v0_refuses_state_layers_by_flag():
    from kvplan.errors import KvplanError

    with pytest.raises(KvplanError, match="^--engine: vLLM V0"):
        plan("jamba-1.5-mini", gpu="H100-SXM", max_model_len=8192, engine="vllm==0.6")


# ---- the logged pool: SGLang -------------------------------------------------------------------------------------

def _cell(log: Log) -> int:
    return _plan(log).per_gpu.kv_bytes_per_token


@pytest.mark.parametrize("log", [_param(x) for x in LOGS_SGLANG])
def test_sglang_k_size_is_tokens_times_the_cell(log):
    """'KV Cache is allocated. #tokens: N, K size: X GB' (GB = 2^30 B): N x cell / 2 prints as X."""
    p = log.pool
    assert f"{p['tokens'] * _cell(log) / 2 / GIB:.2f}" == f"{p['k_gib']:.2f}"


@pytest.mark.parametrize("log", [_param(x, x.pool.get("pool_gap", "")) for x in LOGS_SGLANG if "start_gib" in x.pool])
def test_sglang_pool_from_measured_free_memory(log):
    """model_runner.py profile_max_num_token: rest = free after the load - free at start x (1 - mfs), tokens =
    rest // cell: from the log's 'avail mem' figures (each +-0.005) and its mfs, the logged tokens are inside; the
    version's default mfs (0.4: by TP size) is the logged one."""
    p, cell = log.pool, _cell(log)
    start_print = p.get("start_print", PRINT)
    lo, hi = ((p["after_load_gib"] + d - (p["start_gib"] - d / PRINT * start_print) * (1 - p["mfs"])) * GIB // cell
              for d in (-PRINT, PRINT))
    assert lo <= p["tokens"] <= hi
    assert _plan(log).inputs.mem_fraction_static == p["mfs"]


def test_sglang_max_running_requests():
    log = next(x for x in LOGS_SGLANG if "max_running_requests" in x.pool)
    assert sg.max_running_requests(log.pool["tokens"], log.flags["max_model_len"]) == log.pool["max_running_requests"]


def test_sglang_lfm2_short_conv_state_pool():
    """LFM2 on SGLang: a conv-state-only MambaPool beside the token pool, split by mamba_full_memory_ratio 0.9
    (kv_cache_configurator.py _handle_max_mamba_cache): the rest implied by the log's two pools splits back into
    the logged 85,292 state slots and 473,854 tokens; 10 conv layers x 1,536 x 2 x 2 B a slot."""
    log = next(x for x in LOGS_SGLANG if "slots" in x.pool)
    p, r = log.pool, _plan(log)
    per_req, cell = r.kv_cache.state_bytes_per_request, r.per_gpu.kv_bytes_per_token
    assert per_req == 10 * 1536 * 2 * 2 and cell == 6 * 2 * 8 * 64 * 2
    assert f"{p['slots'] * per_req / GIB:.2f}" == f"{p['conv_gib']:.2f}"
    kv, slots = sg.mamba_split(p["slots"] * per_req + p["tokens"] * cell, per_req)
    assert slots == p["slots"] and kv // cell == p["tokens"]


def test_sglang_versions_choose_the_default_mem_fraction_static():
    """0.4.0 - 0.4.5: by TP size (server_args.py __post_init__); 0.5.3 on: (gpu - reserved) / gpu, reserved MiB = 512
    + 1.5 x 2048 + 2 x 8 + 128 on a 16 GB GPU (PR 10975); from 0.5.10 8 MiB per prefill CUDA graph."""
    assert [sg.mem_fraction_by_tp(t) for t in (1, 2, 4, 8, 16)] == [0.88, 0.87, 0.85, 0.81, 0.79]
    assert sg.default_mem_fraction_static(16376, 1, 1, False, prefill_graphs=False) == round(
        (16376 - 3728) / 16376, 3) == 0.772
    assert sg.default_mem_fraction_static(16376, 1, 1, False) < 0.772


def test_sglang_default_fraction_by_release_from_public_figures():
    """Each release's default, read from its wheel, against a printed figure: 0.4.8 - 0.5.2 keep 9.5 + 0.5 GiB per
    GPU on an 80 GB card (H100, nvidia-smi 81,559 MiB: 0.874, the mem_fraction_static=0.874 of SGLang's docs
    notebooks built 2025-06-16, https://docs.sglang.ai/frontend/frontend.html) and 2.8 + 0.1 GiB on a 24 GB one
    (0.879, the 24gb log's pool); 0.5.10 on reserve the 74 prefill graphs of chunk 16,384 on a B200 (0.854: the B200
    log's K + V + load over its free memory), 0.5.9 does not (0.857); 0.5.23 on an H100 at TP 1: 0.83, the
    server_args the Qwen3-30B-A3B-FP8 log's run printed. 0.4.6 and 0.4.7 (no public log): their own formulas."""
    assert sg.mem_fraction_by_tier(81559, 1, 1) == 0.874 and sg.mem_fraction_by_tier(24564, 1, 1) == 0.879
    assert sg.mem_fraction_by_tier(183359, 8, 1) == round((183359 - 32 * 1024) / 183359, 3)
    b200 = dict(gpu="B200", max_model_len=40960)
    logged = (68.18 + 68.18 + 15.28) / 177.57  # docs/logs/sglang-code52132052242-qwen3-8b-b200.log
    assert round(logged, 3) == 0.854 == plan("qwen3-8b", engine="sglang==0.5.10", **b200).inputs.mem_fraction_static
    assert plan("qwen3-8b", engine="sglang==0.5.9", **b200).inputs.mem_fraction_static == 0.857
    assert plan("qwen3-30b-a3b", gpu="H100-SXM", engine="sglang==0.5.23", max_model_len=40960,
                weight_dtype="fp8_e4m3").inputs.mem_fraction_static == 0.83
    assert plan("llama-3.1-8b", gpu="H100-SXM", engine="sglang==0.4.9",
                max_model_len=8192).inputs.mem_fraction_static == 0.874
    assert sg.mem_fraction_0_4_6(81559, 4) == 0.85 and sg.mem_fraction_0_4_6(143771, 1) == (143771 - 13312) / 143771
    assert sg.mem_fraction_0_4_7(183359, 1, 1, cuda=True) == 0.79
    assert sg.mem_fraction_0_4_7(143771, 1, 1, cuda=True) == (143771 - 18432) / 143771  # below 0.88 + 48 GiB x 0.12
    assert sg.gpu_defaults(24564, 1, sg.MID_TIER_0_5_5) == (2048, 24) and sg.gpu_defaults(24564, 1) == (4096, 48)


def test_sglang_rotary_cache_is_float32_on_cuda_from_0_4_2():
    """rotary_embedding.py keeps cos_sin_cache float32 on CUDA (PR 3134): the load the B200 log prints for Qwen3-8B,
    15.28 GB, is kvplan's weights with its 40,960 x 128 positions in float32; Llama 3.1 8B's 131,072 positions: 15.02
    GB, the 24gb log's load, 32 MiB more than 0.4.1's bf16 cache (0.4.1 loads no Qwen3: Qwen3ForCausalLM is first in
    0.4.5.post2). ROCm keeps the model dtype."""
    kw = dict(max_model_len=8192)
    fp32 = plan("qwen3-8b", gpu="B200", engine="sglang==0.5.10", **kw).per_gpu.weights_bytes
    assert f"{fp32 / GIB:.2f}" == "15.28"
    llama = plan("llama-3.1-8b", gpu="RTX-4090", engine="sglang==0.4.8", **kw).per_gpu.weights_bytes
    assert f"{llama / GIB:.2f}" == "15.02"
    bf16 = plan("llama-3.1-8b", gpu="RTX-4090", engine="sglang==0.4.1", **kw).per_gpu.weights_bytes
    assert llama - bf16 == 131072 * 128 * 2
    rocm = plan("llama-3.1-8b", gpu="MI300X", engine="sglang==0.4.8", **kw).per_gpu.weights_bytes
    assert llama - rocm == 131072 * 128 * 2


@pytest.mark.parametrize("file, tp, usage_gib, rests_mib, kw", [
    ("sglang-didierdurand-qwq-32b-l4.log", 4, 15.54, 227.28, dict(model="qwq-32b", gpu="L4", engine="sglang==0.4.3")),
    ("sglang-code55529353766-qwen3-14b-tp4.log", 4, 7.08, 182.12, dict(model="qwen3-14b", gpu="RTX-4090",
                                                                       engine="sglang")),
    ("sglang-code53944457073-qwen3.5-9b-tp2-rtx4090.log", 2, 8.85, 22.71,
     dict(model="tests/data/configs/qwen3.5-9b.json", gpu="RTX-4090", engine="sglang==0.5.10")),
    ("sglang-sglangplay-qwen2.5-0.5b-h100nvl.log", 1, 0.98, 51.79,
     dict(model="tests/data/configs/qwen2.5-0.5b", gpu="H100-NVL", engine="sglang==0.5.10")),
])
def test_sglang_load_usage_is_the_weights_and_the_allocator_rests(file, tp, usage_gib, rests_mib, kw):
    """'Load weight end ... mem usage=X GB' is free memory read after torch.cuda.empty_cache before and after the
    load: kvplan's weights (float32 rotary cache) + the rests the caching allocator keeps reserved beside them
    (kvplan.cost.allocator.reserved_rest_bytes: block rounding and the free tails of segments that hold a tensor,
    replayed in construction order; no constant) are within 0.5% of the logged usage at TP 1, 2 and 4. The
    replay's figures (MiB) are pinned as computed; --non-torch-memory replaces them."""
    from kvplan.cost.allocator import reserved_rest_bytes
    from kvplan.cost.parallel import Layout
    from kvplan.model.catalog import load_card
    from kvplan.model.dtypes import parse_dtype

    from kvplan.model.hf.config import card_from_hf_config

    assert f"mem usage={usage_gib:.2f} GB" in (LOGS / file).read_text(encoding="utf-8")
    model = kw.pop("model")
    path = str(LOGS.parent.parent / model)
    card = card_from_hf_config(path) if model.endswith(".json") else load_card(path if "/" in model else model)
    g = plan(card, tp=tp, max_model_len=8192, **kw).per_gpu
    assert g.non_torch_bytes == reserved_rest_bytes(card, parse_dtype("bf16"), Layout(tp=tp), 0, mrope_factor=1)
    assert f"{g.non_torch_bytes / MIB:.2f}" == f"{rests_mib:.2f}"
    assert abs((g.weights_bytes + g.non_torch_bytes) / GIB / usage_gib - 1) <= WEIGHTS_TOLERANCE
    given = plan(card, tp=tp, max_model_len=8192, non_torch_memory=5 * MIB, **kw).per_gpu
    assert given.non_torch_bytes == 5 * MIB


def test_v0_a10_peak_is_below_any_256_row_sampler():
    """vLLM 0.7.1 (the A10 log's file:line prefixes are 0.7.1's) samples V0's 256 dummy rows with top_p 0.99 and
    top_k = vocab - 1 (model_runner.py _dummy_run); VLLM_USE_FLASHINFER_SAMPLER is unset by default (envs.py: None,
    falsy to the V0 sampler; "0" in 0.6.x), so the sampler sorts (_apply_top_k_top_p). FlashInfer's path
    (--flashinfer-sampler) skips the sort but still holds the float32 copy, probabilities and log-probabilities
    beside the logits (sampler.py forward: logits.to(torch.float), softmax, log_softmax): 2 + 12 B a logit. Either
    is far above the logged 0.22 GiB, which is the 2,048-token chunked forward alone (within its print)."""
    from kvplan.model.catalog import load_card

    log = next(x for x in LOGS_V0 if x.file.startswith("vllm-code14319663172"))
    rows, vocab, logged = 256, 128_256, 0.22 * GIB
    default, flashinfer = _plan(log), _plan(log, flashinfer_sampler=True)
    held = 2048 * 4096 * 2  # the chunked forward's output, which execute_model holds while the sampler runs
    assert default.per_gpu.activation_bytes == vl.sorting_sampler_bytes(rows, vocab, vocab, 2) + held
    assert flashinfer.per_gpu.activation_bytes == rows * vocab * (2 + vl.UNSORTED_SAMPLER_EXTRA_BYTES) + held
    assert flashinfer.per_gpu.activation_bytes > 1.9 * logged
    forward = vl.profile_activation_bytes(load_card("llama-3.1-8b"), 1, 2, v0.max_num_batched_tokens(131072), rows,
                                          vocab, last_stage=False, hold_qkv=False)
    assert abs(forward - logged) <= 0.01 * GIB  # 0.227 GiB: "0.22" is printed from 0.215 - 0.225


@pytest.mark.parametrize("gpu, tp, free_at_load_gib, tolerance_gib", [
    # 8x H100 80GB HBM3, nccl 2.27.3 (GitHub code index file 45518106035, Sep 2025): "Init torch distributed ends. mem
    # usage=1.25 GB", "Load weight begin. avail mem=77.43 GB"
    ("H100-SXM", 8, 77.43, 0.351),
    # 8x H200 (sglang PR 11716, Oct 2025): "[TP0] Init torch distributed ends. mem usage=1.96 GB", "[TP0] Load weight
    # begin. avail mem=137.34 GB"
    ("H200", 8, 137.34, 0.351),
    # 4x L4 over PCIe (docs/logs/sglang-didierdurand-qwq-32b-tp4.log): "mem usage=0.13 GB", "avail mem=21.63 GB"
    ("L4", 4, 21.63, 0.035),
])
def test_sglang_memory_in_use_before_the_free_memory_reading(gpu, tp, free_at_load_gib, tolerance_gib):
    """model_runner.py init_torch_distributed reads the free memory that mem_fraction_static multiplies after the TP
    group's NCCL communicator and custom all-reduce are built: the memory in use then (the catalog's total - the
    logged free memory) is the CUDA context + the communicators, the 1.61 GiB NCCL estimate over NVLink within
    0.351 GiB of both NVLink logs it is the middle of, none beyond the context over PCIe."""
    g = plan("llama-3.1-8b", gpu=gpu, tp=tp, engine="sglang", mem_fraction_static=0.8, max_model_len=8192).per_gpu
    total = plan("llama-3.1-8b", gpu=gpu, tp=tp, engine="sglang", mem_fraction_static=0.8,
                 max_model_len=8192).inputs.gpu_memory_bytes
    logged_in_use = total - free_at_load_gib * GIB
    assert abs(g.context_bytes - logged_in_use) <= tolerance_gib * GIB, (g.context_bytes / GIB, logged_in_use / GIB)
    one = plan("llama-3.1-8b", gpu=gpu, engine="sglang", mem_fraction_static=0.8, max_model_len=8192).per_gpu
    assert one.context_bytes == 512 * MIB  # one GPU: the CUDA context's default alone, no NCCL

