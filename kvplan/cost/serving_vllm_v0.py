"""vLLM's V0 engine (the default engine up to 0.7; ``VLLM_USE_V1=0`` until 0.10): its memory rules as small pure
functions. Followed: vLLM 0.6.4 - 0.8.5 (paths inside the ``vllm`` package); each differs from V1 where noted.

The budget (``worker/worker.py`` ``Worker.determine_num_available_blocks``)::

    available      = total_gpu_memory x gpu_memory_utilization - (weights + torch peak + non-torch growth)
    num_gpu_blocks = int(available // cache_block_size)
    num_cpu_blocks = int(swap_space_bytes // cache_block_size)            # --swap-space, 4 GiB per GPU by default

logged as ``# GPU blocks: N, # CPU blocks: M`` (``# cuda blocks`` / ``# CUDA blocks`` from 0.7: the platform's
device name), then ``Maximum concurrency for L tokens per request: C x`` with C = N x block_size / L
(``executor/executor_base.py`` ``initialize_cache``). The profile run (``worker/model_runner.py`` ``profile_run``)
is a forward of max_num_batched_tokens tokens split over max_num_seqs dummy sequences with ``SamplingParams(top_p=0.99,
top_k=vocab - 1)``, so V0's sampler sorts the whole vocabulary of every row (``layers/sampler.py``
``_apply_top_k_top_p``) as V1's dummy sampler does (serving_vllm.sorting_sampler_bytes, beside the forward's output:
held_forward_bytes). FlashInfer's top-k/top-p path replaces the sort only when
``VLLM_USE_FLASHINFER_SAMPLER`` is set (``envs.py``: default "0" in 0.6.x, unset = None from 0.7, which the V0 sampler
reads as off); it still holds the float32 copy, probabilities and log-probabilities beside the logits (sampler.py
forward), serving_vllm.UNSORTED_SAMPLER_EXTRA_BYTES, which ``--flashinfer-sampler`` selects. CUDA graphs are captured
after the pool is sized.

Non-torch memory by release (``worker/worker.py`` determine_num_available_blocks and ``utils.py``; read in 0.6.3,
0.6.4, 0.6.4.post1, 0.6.5, 0.6.6, 0.7.0-0.7.3, 0.8.0 and 0.8.5). ``init_gpu_memory`` is the free memory init_device
reads after ``torch.cuda.set_device`` and ``empty_cache`` (the CUDA context exists by then), before the distributed
environment is built; the weights figure is DeviceMemoryProfiler's ``max_memory_allocated`` after a peak reset, i.e.
the allocated bytes after the load minus before it:

- 0.6.3: peak = init_gpu_memory - free memory right after the profile, with no empty_cache: the segments the
  profile reserved count whole (no separate non-torch figure);
- 0.6.4: peak = torch's allocated peak + non_torch_allocations, the device memory in use after empty_cache minus
  torch's allocated bytes: the CUDA context, other processes' memory and the allocator's cached free bytes all count;
- 0.6.5 - 0.6.6: ``memory_profiling`` with ``MemorySnapshot`` of allocated bytes only (``torch_memory_in_bytes`` =
  ``allocated_bytes.all.current``): non_torch_increase = device memory in use after the profile's empty_cache -
  baseline (total - init_gpu_memory) - weights - the allocated bytes' growth during the profile. The free bytes
  empty_cache cannot return (those of segments that still hold a live block: the weights' segment tails, the 20 MiB
  segments tensors of 1-10 MiB share, the holes GPTQ-Marlin's repacking leaves) therefore count as non-torch
  memory; kvplan adds them to the non-torch default (kvplan.cost.allocator.cached_free_bytes, an ESTIMATE replaying
  the load; the profile run's own lasting allocations are not replayed);
- 0.7.0 - 0.8.5: ``MemorySnapshot.non_torch_memory`` = in use - ``torch.cuda.memory_reserved()``, its increase since
  init_device's baseline snapshot: reserved bytes, cached or not, are torch's, and no longer count.

Only the 0.6.5 - 0.6.6 rule is modelled beyond the default: 0.6.4's would charge the CUDA context (kvplan's
``--context-memory`` default, 512 MiB) inside the budget and 0.6.3's the profile's reserved segments, which the public
0.6.4 logs do not support (docs/capacity.md, "vLLM V0").

MLA and MoE through 0.7.3 (VllmVersion fields; the formulas in serving_vllm.py): 0.7.x has no FlashMLA, so an MLA
model keeps the 16-token block on every GPU (MLA_BLOCK_RULES "none"; 0.8.0 - 0.9.0 force FlashMLA's 64 on Hopper);
0.7.1 - 0.7.3 materialize MLA's absorbed W_Q_UK / W_UV_O beside the checkpoint (mla_absorbed_bytes, counted in the
weights); fused MoE's three intermediate caches are separate through 0.7.3 (profile_activation_bytes
``moe_separate_caches``; cache3 shares cache1's memory from 0.8.0).

Not modelled: before 0.6.5 the chunked-prefill default was 512 tokens (config.py SchedulerConfig 0.6.4: "the values
that have the best balance between ITL and TTFT on A100"), 2048 from 0.6.5; kvplan uses 2048 for every V0 release.
A long-context 0.6.4 run's profile forward is then a quarter of kvplan's; the sampler over 256 rows sets the peak for
the 8B-class models of docs/logs either way.
"""

from __future__ import annotations

from kvplan.units import cdiv

GIB = 2**30
DEFAULT_SWAP_SPACE_BYTES = 4 * GIB  # engine/arg_utils.py EngineArgs.swap_space = 4 (GiB, per GPU)
# engine/arg_utils.py EngineArgs.add_cli_args: parser.add_argument('--block-size', ..., choices=[8, 16, 32, 64, 128])
# (the 0.6-era V0 parser; "On CUDA devices, only block sizes up to 32 are supported"; the earliest releases took
# [8, 16, 32], which this list covers)
BLOCK_SIZE_CHOICES = (8, 16, 32, 64, 128)
DEFAULT_MAX_NUM_SEQS = 256  # engine/arg_utils.py EngineArgs.max_num_seqs = 256 on every GPU (V1: by GPU memory)
# config.py SchedulerConfig: _DEFAULT_MAX_NUM_BATCHED_TOKENS = 2048; chunked prefill is turned on by default for
# max_model_len > 32K (arg_utils.py create_engine_config, "use_long_context")
DEFAULT_MAX_NUM_BATCHED_TOKENS = 2048
LONG_CONTEXT = 32 * 1024
# worker/cache_engine.py align_to_256bytes: "Primarily targets MLA" (CacheEngine._align_cache: use_mla on CUDA,
# VLLM_CUDA_MEM_ALIGN_KV_CACHE default on): each key-cache entry of num_heads x head_size elements is rounded up to
# a multiple of 256 bytes in the model dtype (the PR that added it: "for MLA with a head dim of 576 ... we allocate
# 640 elements per cache entry", 1,280 B in bf16)
ENTRY_ALIGNMENT_BYTES = 256


def max_num_batched_tokens(max_model_len: int) -> int:
    """config.py SchedulerConfig.__post_init__: chunked prefill (on by default above 32K tokens) -> 2048; without it
    max(max_model_len, 2048), so the profile run's forward covers a whole max-length prompt."""
    if max_model_len > LONG_CONTEXT:
        return DEFAULT_MAX_NUM_BATCHED_TOKENS
    return max(max_model_len, DEFAULT_MAX_NUM_BATCHED_TOKENS)


def held_forward_bytes(num_tokens: int, hidden_size: int, act_bytes: int) -> int:
    """What V0's profile run still holds while its sampler sorts: the forward's output over the profile's tokens
    (worker/model_runner.py ModelRunner.execute_model keeps ``hidden_or_intermediate_states`` while
    ``compute_logits`` and the sampler run; the rows compute_logits prunes from it are freed on its return), in the
    model dtype. Read in 0.6.5, 0.7.3 and 0.8.5."""
    return num_tokens * hidden_size * act_bytes


def aligned_entry_elems(elems: int, model_dtype_bytes: int) -> int:
    """align_to_256bytes(extent, model_config.dtype): round up to 256 // itemsize elements (of the MODEL dtype)."""
    step = ENTRY_ALIGNMENT_BYTES // model_dtype_bytes
    return cdiv(elems, step) * step


def cache_block_bytes(entries: list[tuple[int, int]], block_size: int) -> int:
    """CacheEngine.get_cache_block_size: one block of every attention layer on the rank: sum over layers of
    block_size x (K entry + V entry (none for MLA)) x cache dtype bytes; ``entries`` is (elements one token stores
    in a layer, the entries aligned, and the cache dtype's bytes per element) per attention layer (vLLM's cache dtypes
    are whole bytes: fp32, fp16, bf16, fp8). V0 has one block table for all layers (no KV cache
    groups, no per-layer windows)."""
    return block_size * sum(elems * nbytes for elems, nbytes in entries)


def num_blocks(available: int, block_bytes: int) -> int:
    """int(available // cache_block_size), at least 0 (worker.py determine_num_available_blocks)."""
    return max(0, available) // block_bytes


def cpu_blocks(swap_space_bytes: int, block_bytes: int) -> int:
    """int(swap_space_bytes // cache_block_size): the '# CPU blocks' of the log (pinned host memory for swapping)."""
    return swap_space_bytes // block_bytes


def max_concurrency(blocks: int, block_size: int, max_model_len: int) -> float:
    """executor_base.py: num_gpu_blocks x block_size / max_model_len ('Maximum concurrency for L tokens per
    request'); V1 divides by the blocks one request takes instead (cdiv(L, block_size))."""
    return blocks * block_size / max_model_len


def max_tokens(blocks: int, block_size: int) -> int:
    """worker.py raise_if_cache_size_invalid: max_seq_len = block_size x num_gpu_blocks ('the maximum number of tokens
    that can be stored in KV cache'); a max_model_len above it is refused."""
    return blocks * block_size
