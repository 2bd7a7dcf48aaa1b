"""Reading a public vLLM or SGLang start-up log (the file format of docs/logs/, docs/capacity.md "From a log"):
the `# ` header lines, the launch line, and the lines the engines print, into typed figures and launch flags.

Every pattern below is a line the engine prints, with the file and function that prints it:

- vLLM V1 (0.10 - 0.2x): ``Initializing a V1 LLM engine (vX.Y.Z) with config: model=..., tensor_parallel_size=...``
  (v1/engine/core.py), ``non-default args: {...}`` (entrypoints/utils.py log_non_default_args), ``Model loading
  took X GiB`` (v1/worker/gpu_model_runner.py load_model), ``Available KV cache memory: X GiB`` (v1/worker/
  gpu_worker.py determine_available_memory), ``GPU KV cache size: N tokens`` / ``Maximum concurrency for N tokens per
  request: Xx`` (v1/core/kv_cache_utils.py), ``Graph capturing finished in N secs, took X GiB``
  (gpu_model_runner.py capture_model), ``Free memory on device (a/b GiB) on startup. ... Actual usage is X GiB for
  weight, ...`` and ``Current kv cache memory in use is N bytes`` (gpu_worker.py compile_or_warm_up_model, 0.10.2+),
  the DEBUG line ``torch peak memory increase: X GiB; non-torch forward increase memory: X GiB; weights memory:
  X GiB`` (gpu_worker.py determine_available_memory).
- vLLM V0 (0.4 - 0.9): ``# GPU blocks: N, # CPU blocks: M`` (executor/gpu_executor.py; ``# CUDA blocks`` in 0.7,
  ``# cuda blocks`` / ``# rocm blocks`` from 0.8: executor_base.py), ``Loading model weights took
  X GB`` (worker/model_runner.py load_model: float_memory_usage / 2**30, so GiB although it prints GB), ``Memory
  profiling takes ... total_gpu_memory (X GiB) x gpu_memory_utilization (U) = Y GiB ... model weights take X GiB;
  non_torch_memory takes X GiB; PyTorch activation peak memory takes X GiB; the rest of the memory reserved for KV
  Cache is X GiB`` (worker/worker.py determine_num_available_blocks), and 0.6's variant ``Memory profiling results:
  total_gpu_memory=X GiB ... non_torch_memory=X GiB kv_cache_size=X GiB gpu_memory_utilization=U``.
- SGLang: ``server_args=ServerArgs(model_path=..., tp_size=..., mem_fraction_static=...)``, ``Load weight begin.
  avail mem=X GB`` / ``Load weight end. ... [quant=fp8, ...] avail mem=X GB, mem usage=Y GB``, ``KV Cache is
  allocated. [dtype: torch.bfloat16, ]#tokens: N, K size: X GB, V size: Y GB`` (0.4.0 - 0.4.1: ``KV Cache is
  allocated. K size: X GB, V size: Y GB.``) (srt/model_executor/model_runner.py, srt/mem_cache/memory_pool.py; its
  "GB" is 2**30 bytes: get_available_gpu_memory divides by 1 << 30), ``max_total_num_tokens=N, ...,
  max_running_requests=R, context_len=L`` (srt/managers/scheduler.py), ``Capture cuda graph end. ... mem usage=X
  GB`` / ``Capture target decode CUDA graph end. elapsed=..., mem usage=X GB``.
"""

from __future__ import annotations

import ast
import json
from fractions import Fraction
import re
import shlex
from pathlib import Path

from pydantic import BaseModel

from kvplan.cost.serving_sglang import DEFAULT_SWA_FULL_TOKENS_RATIO
from kvplan.errors import KvplanError
from kvplan.files import read_text_head
from kvplan.planning.results import RESULT

GIB = 2**30

# ---- what a log states -------------------------------------------------------------------------------------------

# figure name -> (what it is, unit); the names are the keys of FromLog's rows
FIGURES = {
    "weights": ("weights per GPU as loaded", "GiB"),
    # SGLang's "Load weight end ... mem usage": free memory before less after the load, the weights and whatever the
    # load left reserved beside them (kvplan: weights + the caching allocator's rests, allocator.reserved_rest_bytes)
    "load_usage": ("memory the weights' load took (weights and load overhead)", "GiB"),
    "activation": ("profile-run peak (torch, beyond the weights)", "GiB"),
    "non_torch": ("non-torch memory growth during profiling", "GiB"),
    # vLLM 0.20+ charges profile_cudagraph_memory's ESTIMATE before sizing the pool (gpu_worker.py
    # determine_available_memory); the capture itself is measured after the pool is sized: two figures
    "cuda_graph": ("CUDA graphs", "GiB"),
    "cuda_graph_capture": ("CUDA graphs as captured", "GiB"),
    "available": ("memory left for the KV cache", "GiB"),
    "blocks": ("KV cache blocks (GPU blocks)", "blocks"),
    "tokens": ("KV cache tokens (GPU KV cache size / #tokens)", "tokens"),
    "concurrency": ("maximum concurrency at max_model_len", "x"),
    "longest_fit": ("longest max_model_len that fits", "tokens"),
    "max_running_requests": ("SGLang max_running_requests", "requests"),
}


class Figure(BaseModel):
    """One figure as a log prints it: the value, the text, and half its last printed digit (the log's rounding)."""

    model_config = RESULT
    name: str  # a key of FIGURES
    value: float  # in the unit of FIGURES (GiB for memory)
    text: str  # as printed, e.g. "6.51"
    rounding: float  # half the last printed digit: 6.51 -> 0.005; integers -> 0 (exact)
    line: int  # 1-based line number in the file
    # "summary": vLLM's start-up summary ("X GiB for peak activation"), whose peak the release may sum with the
    # charged graph estimate (Runtime.peak_line_holds_graphs); "utilization": the graph estimate derived from the
    # utilization advisory (graph_estimate); "": the line states the figure alone
    kind: str = ""

    @property
    def bytes(self) -> int:
        """A memory figure (GiB) in exact bytes: those below the printed decimal, as ``--kv-cache-memory 19.36GiB``
        reads the same text (kvplan.units.parse_size), so a logged pool and the flag give one byte count."""
        value = sum(Fraction(part.replace(",", "")) for part in self.text.split(" + ")) * GIB  # a pool of parts
        return value.numerator // value.denominator


class ParsedLog(BaseModel):
    """A start-up log as read: header, the engine and its version, the launch flags found, every figure stated."""

    model_config = RESULT
    path: str
    source: str | None
    engine: str  # "vllm" or "sglang": the family of lines found (a runtime name for kvplan.get_engine)
    version: str | None  # as printed, e.g. "0.10.2"; None: not printed and no `# engine:` header
    model_id: str | None  # the model as launched (Hub id or a local path)
    model_header: str | None  # `# model:`: a bundled card name or a card / config path
    gpu_header: str | None  # `# gpu:`
    gpu_memory_header: str | None  # `# gpu-memory:`
    platform: str | None = None  # "windows": a `# platform: windows` header or vLLM's "WSL is detected" line
    platform_how: str | None = None  # where the platform was read
    flags: dict[str, int | float | str | bool]  # kvplan.plan keyword -> value (tp, max_model_len, ...)
    flag_sources: dict[str, str]  # keyword -> where it was read (command, non-default args, config, ...)
    quantization: str | None  # the launch's --quantization / the config's quantization=
    total_memory_gib: Figure | None  # the GPU total the log prints (torch's view)
    free_at_start_gib: Figure | None  # free memory before the load (SGLang's pool starts from it)
    figures: list[Figure]  # every figure stated, first statement of each name first
    exact_available_bytes: int | None  # "kv cache memory in use is N bytes" (vLLM 0.10.2+): the pool to the byte
    # vLLM's utilization advisory (gpu_worker.py determine_available_memory, 0.21.0 - 0.33.0: "The current
    # --gpu-memory-utilization=U is equivalent to --gpu-memory-utilization=U2 without CUDA graph memory profiling",
    # U2 = round(U - estimate / total, 4)): (U, U2, line), the charged estimate where no line prints it (graph_estimate)
    graph_utilization: tuple[str, str, int] | None = None
    header_lines: dict[str, int] = {}  # `# name:` header -> its line number
    flag_lines: dict[str, int] = {}  # keyword of flags -> the line it was read from (0: the `# command:` header)
    unmodelled: dict[str, int] = {}  # UNMODELLED_FLAGS set at launch -> the line (0: the `# command:` header)
    startups: list[int] = []  # the first line of each start-up when the file holds several
    startup: int | None = None  # of those, the first line of the one read (the last that states a figure)
    last_line: int = 0  # the last line read
    args_line: int | None = None  # vLLM's `non-default args` / SGLang's `ServerArgs(...)`: every launch flag not
    # named there is the engine's default, which the log so states
    read_bytes: int | None = None  # the bytes read when the file is longer than MAX_LOG_BYTES (its start is read)
    # vLLM: the first line only V0 prints (_V0_LINES): a release that had both engines (0.8.0 - 0.9.0) is planned with
    # its V0 rules (Runtime.log_engine); None: none found
    v0_line: int | None = None
    size_bytes: int | None = None  # the file's size in that case

    def figure(self, name: str) -> Figure | None:
        """The first statement of ``name`` (ranks print alike; a later one is a repeat)."""
        return next((f for f in self.figures if f.name == name), None)


# ---- the lines ---------------------------------------------------------------------------------------------------

# a number never starts inside another (the look-behind): a pattern that begins with one tries each digit run once,
# not once per digit, so a line of N digits costs O(N) (a run of 20,000 digits took a minute)
_NUM = r"(?<![\d.,])(\d+(?:,\d{3})*(?:\.\d+)?)"
_GIB = _NUM + r" ?GiB"

_SUMMARY_PEAK = _GIB + r" for peak activation"
# (figure, pattern); the first group is the value. Memory in GiB (V0's "GB" and SGLang's "GB" are 2**30 bytes).
_VLLM_LINES = [
    ("weights", r"Model loading took " + _NUM + r" ?G(?:i)?B\b"),  # "GB" before 0.9: the same GiB figure (/ 2**30)
    ("weights", r"Loading model weights took " + _NUM + r" ?GB"),
    ("weights", r"weights memory: " + _GIB),
    ("weights", r"model weights take\s+" + _GIB),
    ("weights", _GIB + r" for weight\b"),
    ("activation", r"torch peak memory increase: " + _GIB),
    ("activation", r"PyTorch activation peak memory (?:takes )?\s*" + _GIB),
    # gpu_worker.py compile_or_warm_up_model's summary: self.peak_activation_memory, which 0.27.0+ sets to the
    # transient peak + the charged CUDA-graph estimate (determine_available_memory; 0.21.0 - 0.26.0:
    # torch_peak_increase alone): Figure.kind "summary", read by the runtime (Runtime.peak_line_holds_graphs)
    ("activation", _SUMMARY_PEAK),
    ("non_torch", r"non-torch forward increase memory: " + _GIB),
    ("non_torch", r"non_torch_memory (?:takes )?\s*" + _GIB),
    ("non_torch", _GIB + r" for non-torch memory"),
    ("non_torch", r"\bnon_torch_memory=" + _GIB),
    # the estimate charged before the pool is sized: V1 runner's profile_cudagraph_memory (gpu_model_runner.py,
    # "Estimated CUDA graph memory: %.2f GiB total", 0.21.0 - 0.33.0; the " total" optional), and
    # compile_or_warm_up_model's "CUDA graph pool memory: %s GiB (actual), %s GiB (estimated), ..." (gpu_worker.py,
    # 0.21.0 - 0.33.0); Model Runner V2 (0.29+) prints neither: its estimate is in the utilization advisory
    # (graph_utilization below)
    ("cuda_graph", r"Estimated CUDA graph memory: " + _GIB),
    ("cuda_graph", r"CUDA graph pool memory: [\d.]+ ?GiB \(actual\), " + _GIB + r" \(estimated\)"),
    # the capture as measured: capture_model's "Graph capturing finished in %.0f secs, took %.2f GiB" (both runners;
    # V2 0.29+ also prints it for the throwaway capture profile_cudagraph_memory measures, before "Available KV cache
    # memory"), compile_or_warm_up_model's "X GiB for CUDAGraph memory" and "CUDA graph pool memory: X GiB (actual)"
    ("cuda_graph_capture", r"Graph capturing finished in \d+ secs?, took " + _GIB),
    ("cuda_graph_capture", _GIB + r" for CUDAGraph memory"),
    ("cuda_graph_capture", r"CUDA graph pool memory: " + _GIB + r" \(actual\)"),
    # negative: no room (the engine stops)
    ("available", r"Available KV cache memory: +" + r"(-?\d+(?:,\d{3})*(?:\.\d+)?) ?GiB"),
    ("available", r"the rest of the memory reserved for KV Cache is " + _GIB),
    ("available", r"kv_cache_size=" + _GIB),
    ("available", r"available_kv_cache_memory\s+" + _GIB),  # 0.6.5's table of "Memory profiling results:"
    ("blocks", r"# GPU blocks: " + _NUM),
    # V0 0.7+ (executor/executor_base.py initialize_cache: "# %s blocks" with the platform's dispatch_key, "CUDA"
    # on CUDA and ROCm, in 0.7; its device_name, "cuda" / "rocm", from 0.8)
    ("blocks", r"# (?:CUDA|cuda|rocm) blocks: " + _NUM),
    ("blocks", r"(?<!# )GPU blocks: " + _NUM + ", # CPU blocks"),  # as pasted where Markdown ate the "# "
    ("blocks", r"num_gpu_blocks is: " + _NUM),
    ("tokens", r"GPU KV cache size: +" + _NUM + " tokens"),
    ("concurrency", r"Maximum concurrency for [\d,]+ tokens per request: " + _NUM + "x"),
    ("longest_fit", r"maximum number of tokens that can be stored in KV cache \(" + _NUM + r"\)"),
]
# "KV Cache is allocated. " then, from 0.5.x on, "dtype: torch.bfloat16, " (mem_cache/memory_pool.py
# _finalize_allocation_log); 0.4.0 - 0.4.1 print no "#tokens: N, " (MHATokenToKVPool.__init__: "K size: X GB, V size:
# Y GB.")
_SGLANG_KV = r"KV Cache is allocated\. (?:dtype: [\w.]+, )?"
_SGLANG_LINES = [
    ("load_usage", r"Load weight end\..*?mem usage=" + _NUM + " ?GB"),
    # a hybrid SWA pool: "Use sliding window memory pool. full_layer_tokens=N, ..." (0.5.7+; 0.4.10 - 0.5.6
    # model_runner.py: "Use Sliding window ...") before the pools' own lines; max_total_num_tokens is the full pool's
    ("tokens", r"[Ss]liding window memory pool\. full_layer_tokens=" + _NUM),
    ("tokens", _SGLANG_KV + r"#tokens: " + _NUM),
    ("tokens", r"max_total_num_tokens=" + _NUM),
    ("available", _SGLANG_KV + r"#tokens: \d+, KV size: " + _NUM + " GB"),  # MLA: one latent pool
    ("max_running_requests", r"max_running_requests=" + _NUM),
    # 0.5.x's graph runners: "Capture cuda graph end. Time elapsed: ... mem usage=X GB", and from the split decode /
    # prefill runners on "Capture target decode CUDA graph end. elapsed=..., mem usage=X GB" (the decode graphs)
    ("cuda_graph", r"Capture (?:cuda graph|target decode CUDA graph) end\..*?mem usage=" + _NUM + " ?GB"),
]
_SGLANG_MARKERS = re.compile(r"Load weight (?:begin|end)\.|KV Cache is allocated\.|max_total_num_tokens=|"
                             r"sglang\.launch_server|ServerArgs\(")
# lines only vLLM's V0 engine prints: its engine's config line (engine/llm_engine.py: "Initializing an LLM engine",
# "Initializing a V0 LLM engine" in 0.8 - 0.10; V1's v1/engine/core.py says "a V1 LLM engine"), the blocks line
# (executor/executor_base.py initialize_cache), worker/worker.py determine_num_available_blocks's profile summary
_V0_LINES = [r"Initializing a(?:n| V0) LLM engine \(v", r"# (?:GPU|CUDA|cuda|rocm) blocks: \d",
             r"GPU blocks: [\d,]+, # CPU blocks", r"the current vLLM instance can use total_gpu_memory",
             r"model weights take [\d.]+ ?GiB; non_torch_memory takes"]
_VERSION_LINES = [r"Initializing an? (?:V[01] )?LLM engine \(v(\d+\.\d+[\w.+-]*)\)",
                  r"█ +version (\d+\.\d+[\w.+-]*)",  # the start-up banner of 0.11+
                  r"vLLM API server version (\d+\.\d+[\w.+-]*)", r"\bvllm==(\d+\.\d+[\w.+-]*)"]
_LAUNCH = re.compile(r"(?:^|\s|\$ )((?:vllm serve|python3? -m (?:vllm\.entrypoints\.openai\.api_server|"
                     r"sglang\.launch_server))\s.*)$")

# launch-flag spellings (command line, non-default args, the V1 config line, SGLang's ServerArgs) -> plan keyword
_FLAG_NAMES = {
    "tensor_parallel_size": "tp", "tp": "tp", "tp_size": "tp",
    "pipeline_parallel_size": "pp", "pp": "pp", "pp_size": "pp",
    "data_parallel_size": "dp", "dp": "dp", "dp_size": "dp",
    "max_model_len": "max_model_len", "max_seq_len": "max_model_len", "context_length": "max_model_len",
    "gpu_memory_utilization": "gpu_memory_utilization", "mem_fraction_static": "mem_fraction_static",
    "max_num_seqs": "max_num_seqs", "max_num_batched_tokens": "max_num_batched_tokens",
    "kv_cache_dtype": "kv_dtype", "dtype": "dtype", "quantization": "quantization", "q": "quantization",
    "enable_expert_parallel": "expert_parallel", "block_size": "block_size", "page_size": "block_size",
    "model": "model", "model_path": "model", "model_tag": "model", "kv_cache_memory": "kv_cache_memory",
    "kv_cache_memory_bytes": "kv_cache_memory", "flashinfer_sampler": "flashinfer_sampler",
    "cold_compile": "cold_compile", "cpu_offload_gb": "cpu_offload_gb",
    "max_running_requests": "max_running_requests",
    # serving features (vLLM): the draft's layers join the pool, LoRA slots count in the load
    "speculative_config": "speculative_config", "enable_lora": "enable_lora", "max_loras": "max_loras",
    "max_lora_rank": "max_lora_rank",
    # SGLang's hybrid sliding-window pool
    "swa_full_tokens_ratio": "swa_full_tokens_ratio", "disable_hybrid_swa_memory": "disable_hybrid_swa_memory",
    # SGLang's radix cache and a state-space hybrid's state pool (--mamba-scheduler-strategy: 0.5.7 - 0.5.13's name)
    "disable_radix_cache": "disable_radix_cache", "max_mamba_cache_size": "max_mamba_cache_size",
    "mamba_radix_cache_strategy": "mamba_radix_cache_strategy", "mamba_scheduler_strategy": "mamba_radix_cache_strategy",
    # vLLM --enforce-eager: no CUDA graphs (config/vllm.py VllmConfig.__post_init__: CUDAGraphMode.NONE), so nothing
    # is charged for them where the release charges them before sizing the pool (0.20+)
    "enforce_eager": "enforce_eager",
    # vLLM prefix caching (the config line's resolved value; --no-enable-prefix-caching on a launch line: _command):
    # a hybrid's Mamba cache mode follows it (VLLM.state_options)
    "enable_prefix_caching": "enable_prefix_caching",
}
# launch flags that move the memory a start-up leaves for the cache and that kvplan does not model: named in the
# comparison's notes where the launch line or the non-default args set them (the config line prints every field)
UNMODELLED_FLAGS = {
    "kv_transfer_config": "a KV connector (LMCache, NIXL, P2P, ...) can allocate GPU buffers of its own",
    "kv_events_config": "KV cache events are published from the pool",
    "num_gpu_blocks_override": "the pool's block count is set by hand",
    "compilation_config": "torch.compile and CUDA graph capture as configured, not the release's defaults",
    "cuda_graph_sizes": "the CUDA graph capture sizes as configured, not the release's defaults",
    "max_seq_len_to_capture": "the longest sequence CUDA graphs capture, as configured",
    "cuda_graph_max_bs": "SGLang's largest CUDA-graph batch as configured",
    "disable_cuda_graph": "SGLang without CUDA graphs",
    "speculative_draft_model_path": "an SGLang draft model (its weights and cache)",
    "lora_paths": "SGLang LoRA adapters (their weights and buffers)",
}
_INT_FLAGS = {"tp", "pp", "dp", "max_model_len", "max_num_seqs", "max_num_batched_tokens", "block_size",
              "max_running_requests", "max_loras", "max_lora_rank", "max_mamba_cache_size"}
_FLOAT_FLAGS = {"gpu_memory_utilization", "mem_fraction_static", "cpu_offload_gb", "swa_full_tokens_ratio"}
_BOOL_FLAGS = {"expert_parallel", "flashinfer_sampler", "cold_compile", "enable_lora", "disable_hybrid_swa_memory",
               "enforce_eager", "disable_radix_cache", "enable_prefix_caching"}
MAX_LOG_BYTES = 4 << 20  # the first 4 MiB of a log are read: the start-up's lines come first (docs/errors.md)
MAX_LINE_CHARS = 1 << 16  # a line is matched on its first 64 KiB (V1's config line, the longest, is a few KiB)
_MAX_GIB = 2**20  # the largest memory figure a log may state (1 PiB); more is a corrupt line, refused
_MAX_COUNT = 10**12  # the largest count (blocks, tokens, requests) or concurrency, as every integer flag
_HEADERS = ("source", "posted", "gpu", "gpu-memory", "platform", "model", "engine", "command")
# vLLM under WSL2: platforms/interface.py is_pin_memory_available "Using 'pin_memory=False' as WSL is detected"
# (0.2-0.33; platforms/cuda.py also says it from 0.2x): the GPU's total is the Windows driver's (GPU.on_platform)
_WSL_LINE = r"as WSL is detected"
# vLLM compiled in this boot (its torch.compile cache missed): backends.py "Compiling a graph for compile range %s
# takes %.2f s" (0.13.0+; a cache hit logs "Directly load the compiled graph(s) for compile range"), decorators.py
# save_aot_compiled_function "saved AOT compiled function to %s" (0.15.1+, skipped when loaded from disk)
_COLD_COMPILE = r"Compiling a graph for compile range|saved AOT compiled function"
# Before 0.13 the cache-miss line reads "Compiling a graph for dynamic shape takes %.2f s" (backends.py
# CompilerManager.compile, read in 0.11.0 and 0.11.2; a hit logs "Directly load the compiled graph(s) for dynamic
# shape"), which 0.11.0 (torch 2.8) prints too without benchmarking anything: it marks a cold compile only where the
# engine's config line shows Inductor's combo-kernel benchmark on (config/compilation.py CompilationConfig.__post_init__
# sets 'benchmark_combo_kernel': True with torch >= 2.9, read in 0.11.2; absent in 0.11.0)
_COLD_COMPILE_DYNAMIC = r"Compiling a graph for dynamic shape takes"
_COMBO_BENCHMARK = r"'benchmark_combo_kernel': True"


def _platform(path, header: dict, header_lines: dict, body) -> tuple[str | None, str | None]:
    """(the host OS, where it was read): the `# platform:` header (linux or windows, Windows or WSL2), else
    "windows" where the log prints vLLM's WSL line, else (None, None): the catalog's Linux total."""
    from kvplan.cost.hardware import PLATFORMS

    if "platform" in header:
        if header["platform"] not in PLATFORMS:
            raise KvplanError(f"{path}:{header_lines['platform']}: `# platform: {_quote(header['platform'])}`; "
                              f"allowed: {', '.join(PLATFORMS)} (windows: native Windows or WSL2)")
        return header["platform"], f"the `# platform:` header, line {header_lines['platform']}"
    hit = next((n for n, line in body if re.search(_WSL_LINE, line)), None)
    return ("windows", f"vLLM's WSL line, line {hit}") if hit is not None else (None, None)


def parse_log(path: str | Path) -> ParsedLog:
    """Read ``path`` (the format of docs/logs/); KvplanError naming the file when it is no vLLM or SGLang log.

    Of a longer file the first MAX_LOG_BYTES are read (its start-up comes first); of a file holding several start-ups
    (a restart appended: docker logs, journald) the last one that states a figure; a file mixing vLLM's and SGLang's
    lines, or whose `# engine:` header names another engine than its lines, is refused."""
    text, size = read_text_head(path, what="log", limit=MAX_LOG_BYTES)
    header: dict[str, str] = {}
    header_lines: dict[str, int] = {}
    body: list[tuple[int, str]] = []
    lines = text.splitlines()
    for n, line in enumerate(lines, 1):
        line = line[:MAX_LINE_CHARS]  # every pattern is matched on a bounded line
        m = re.match(r"# ([a-z-]+): ?(.*)$", line)
        if m and m.group(1) in _HEADERS and not body:
            header[m.group(1)] = m.group(2).strip()
            header_lines[m.group(1)] = n
        else:
            body.append((n, line))
    starts = _startups(body)
    for first, last in reversed(list(zip(starts, [*starts[1:], None]))):  # the last start-up that states a figure
        part = [(n, line) for n, line in body if n >= first and (last is None or n < last)]
        sglang_at = _sglang_line(part)
        figures = _figures(path, part, _SGLANG_LINES if sglang_at else _VLLM_LINES)
        if figures:
            body = part
            break
    vllm_at = _vllm_line(body)
    if sglang_at and vllm_at:
        raise KvplanError(f"{path}: holds vLLM's lines (line {vllm_at[0]}: {_quote(vllm_at[1])}) and SGLang's (line "
                          f"{sglang_at[0]}: {_quote(sglang_at[1])}), two engines' logs in one file; allowed: one "
                          "engine's start-up (cut the file to it)")
    family = "sglang" if sglang_at else "vllm"
    named = re.match(r"[a-z]+", header.get("engine", ""))
    if "engine" in header and not re.fullmatch(r"[a-z]+(?:==\d+(?:\.\d+)*[\w.+-]*)?", header["engine"]):
        raise KvplanError(f"{path}:{header_lines['engine']}: `# engine: {_quote(header['engine'])}`: not an engine "
                          "and release; allowed: `# engine: vllm==X.Y` or `# engine: sglang==X.Y`")
    if named and named.group(0) != family and (sglang_at or vllm_at):
        at = sglang_at or vllm_at
        raise KvplanError(f"{path}:{header_lines['engine']}: `# engine: {_quote(header['engine'])}` contradicts the "
                          f"log's lines, which are {'SGLang' if sglang_at else 'vLLM'}'s (line {at[0]}: "
                          f"{_quote(at[1])}); allowed: `# engine: {family}==X.Y`, or no header")
    engine = named.group(0) if named else family
    try:
        flags, sources, quant, flag_lines, unmodelled = _flags(header, body, header_lines.get("command", 0))
    except KvplanError as exc:  # a launch flag the log (or its `# command:` line) gives in a form no engine reads
        raise KvplanError(f"{path}: launch flags: {exc}") from None
    if not figures:
        raise KvplanError(f"{path}: no vLLM or SGLang start-up figure found (Model loading took, Available KV cache "
                          "memory, GPU KV cache size, # GPU blocks, KV Cache is allocated, ...)")
    sglang_kv = _sglang_kv(path, body)
    if sglang_kv is not None:
        figures = _ordered([*figures, sglang_kv])
    args_line = flag_lines.pop("args line") or None
    platform, platform_how = _platform(path, header, header_lines, body)
    return ParsedLog(path=str(path), source=header.get("source"), engine=engine,
                     version=_version(header, body), model_id=flags.pop("model", None),
                     model_header=header.get("model"), gpu_header=header.get("gpu"),
                     gpu_memory_header=header.get("gpu-memory"), platform=platform, platform_how=platform_how,
                     flags=flags, flag_sources=sources,
                     quantization=quant, total_memory_gib=_total(path, body),
                     free_at_start_gib=_free_at_start(path, body), figures=figures,
                     exact_available_bytes=_exact_available(path, body), graph_utilization=_graph_utilization(body),
                     header_lines=header_lines,
                     flag_lines=flag_lines, unmodelled=unmodelled, startups=starts if len(starts) > 1 else [],
                     startup=body[0][0] if len(starts) > 1 else None, last_line=len(lines), args_line=args_line,
                     read_bytes=None if size is None else len(text.encode()), size_bytes=size,
                     v0_line=None if sglang_at else _v0_line(body))


def _quote(text: str) -> str:
    """A log line as an error quotes it: its start, one printable line."""
    from kvplan.errors import printable

    text = printable(" ".join(text.split()))
    return text if len(text) <= 80 else text[:77] + "..."


# ---- start-ups and engines ---------------------------------------------------------------------------------------

# lines a server prints once per start (entrypoints/utils.py log_non_default_args, the API server's version line and
# 0.11+'s banner, SGLang's launch_server `server_args=ServerArgs(...)`, a launch command echoed), and the engine's
# own config line, used only where none of those is printed (V0 and offline runs print it once; V1 once per DP rank)
_SERVER_STARTS = [("non-default args", re.compile(r"non-default args: \{")),
                  ("API server version", re.compile(r"vLLM API server version \d")),
                  ("banner", re.compile(r"█ +version \d")),
                  ("ServerArgs", re.compile(r"ServerArgs\(")),
                  ("launch line", re.compile(r"(?:^|\s|\$ )(?:vllm serve|python3? -m (?:vllm\.entrypoints\.openai\."
                                             r"api_server|sglang\.launch_server))\s"))]
_ENGINE_START = re.compile(r"Initializing an? (?:V[01] )?LLM engine \(v")


def _startups(body) -> list[int]:
    """The first line of each start-up: a line a server prints once per start, printed again, begins the next."""
    kinds = [(name, rx) for name, rx in _SERVER_STARTS if any(rx.search(line) for _, line in body)]
    kinds = kinds or [("engine config line", _ENGINE_START)]
    starts, seen = [body[0][0] if body else 1], set()
    for n, line in body:
        for name, rx in kinds:
            if rx.search(line):
                if name in seen:
                    starts.append(n)
                    seen = set()
                seen.add(name)
    return starts


def _sglang_line(body) -> tuple[int, str] | None:
    """The first line only SGLang prints (its markers and figure lines)."""
    rxs = [_SGLANG_MARKERS, *(re.compile(p) for _, p in _SGLANG_LINES)]
    return next(((n, line) for n, line in body if any(rx.search(line) for rx in rxs)), None)


def _vllm_line(body) -> tuple[int, str] | None:
    """The first line only vLLM prints (its figure lines, its version lines, non-default args)."""
    rxs = [re.compile(p) for _, p in _VLLM_LINES] + [re.compile(p) for p in _VERSION_LINES[:3]]
    rxs.append(re.compile(r"non-default args: \{"))
    return next(((n, line) for n, line in body if any(rx.search(line) for rx in rxs)), None)


# ---- the figures -------------------------------------------------------------------------------------------------

def _figure(name: str, text: str, line: int, path=None) -> Figure:
    plain = text.replace(",", "")
    digits = len(plain.replace(".", "").lstrip("-"))
    unit = FIGURES.get(name, ("", "GiB"))[1]
    largest = _MAX_GIB if unit == "GiB" else _MAX_COUNT
    value = float(plain) if digits <= 30 else float("inf")
    if not abs(value) <= largest:  # inf, and a figure no GPU holds (99999999999999 GiB)
        shown = text if len(text) <= 30 else f"a number of {digits:,} digits"
        what = FIGURES[name][0] if name in FIGURES else {"total": "the GPU's total memory",
                                                         "free": "free memory at start"}[name]
        raise KvplanError(f"{path}:{line}: {what}: {shown} {unit} is out of range; allowed: at most "
                          f"{largest:,} {unit}")
    decimals = len(plain.split(".")[1]) if "." in plain else 0
    return Figure(name=name, value=value, text=text, rounding=0.5 * 10 ** -decimals if decimals else 0.0,
                  line=line)


def _figures(path, body: list[tuple[int, str]], patterns) -> list[Figure]:
    out: list[Figure] = []
    for name, pattern in patterns:
        rx = re.compile(pattern)
        # a pattern that begins with its number is tried only on lines holding the words after it (" for weight"):
        # re tries such a pattern at every position of every line, a literal-led one only where its words occur
        key = re.match(r"[\w ]+", pattern[len(_GIB):]).group(0) if pattern.startswith(_GIB) else ""
        kind = "summary" if pattern == _SUMMARY_PEAK else ""
        for i, (n, line) in enumerate(body):
            if key in line and (m := rx.search(line)):
                out.append(_figure(name, m.group(1), n, path).model_copy(update={"kind": kind}))
            elif i + 1 < len(body):  # a figure line a page wrapped: the match must span the break (DeepSeek-R1 log)
                head = line.rstrip()
                joined = head + " " + body[i + 1][1].lstrip()
                if key in joined and (m := rx.search(joined)) and m.start() < len(head) < m.end():
                    out.append(_figure(name, m.group(1), n, path).model_copy(update={"kind": kind}))
    return _ordered(out, per_worker=patterns is _VLLM_LINES)


# vLLM prints these once per worker (gpu_worker.py, kv_cache_utils.py get_kv_cache_config), and the engine sizes every
# worker's pool by the smallest (unify_kv_cache_configs: the minimum num_blocks): the smallest statement is the one
# compared, with kvplan's limiting rank (a pipeline's stages hold different layers and peaks: stage 0's 6,654,432
# tokens beside the last stage's 6,167,536 in the GH200 PP 2 log)
PER_WORKER = ("available", "blocks", "tokens", "concurrency")


def _ordered(figures: list[Figure], per_worker: bool = False) -> list[Figure]:
    """In FIGURES' order; of one figure's statements the most precise first, then the earliest; with ``per_worker``
    (vLLM) the smallest statement of a PER_WORKER figure first."""
    def key(f: Figure):
        smallest = f.value if per_worker and f.name in PER_WORKER else 0
        return list(FIGURES).index(f.name), smallest, f.rounding, f.line

    return sorted(figures, key=key)


def _sglang_kv(path, body) -> Figure | None:
    """SGLang's pool, K size + V size (each printed to 0.01 GB: the sum is good to 0.01)."""
    rx = re.compile(_SGLANG_KV + r"(?:#tokens: \d+, )?K size: " + _NUM + r" GB, V size: " + _NUM + " GB")
    # a hybrid model's state pool is sized from the same budget first (SGLang's MambaPool: "conv_state size: X GB,
    # ssm_state size: Y GB"), so the memory left for the cache is K + V + the states
    states = re.compile(r"conv_state size: " + _NUM + r" ?GB, ssm_state size: " + _NUM + r" ?GB")
    parts = [m.groups() for _, line in body if (m := states.search(line))][:1]
    # a hybrid SWA pool allocates the full layers' pool and the sliding layers' ("Full KV Cache is allocated" and
    # "SWA KV Cache is allocated" in 0.5.23: swa_memory_pool.py allocation_label), both from the same budget
    if _first(body, r"[Ss]liding window memory pool\. full_layer_tokens="):
        parts += [m.groups() for _, line in body if (m := rx.search(line))][1:2]
    for n, line in body:
        if m := rx.search(line):
            texts = [m.group(1), m.group(2), *(t for p in parts for t in p)]
            figs = [_figure("available", t, n, path) for t in texts]
            return Figure(name="available", value=sum(f.value for f in figs), text=" + ".join(texts),
                          rounding=sum(f.rounding for f in figs), line=n)
    return None


def _first(body, pattern: str) -> tuple[int, re.Match] | None:
    rx = re.compile(pattern)
    return next(((n, m) for n, line in body if (m := rx.search(line))), None)


def _total(path, body) -> Figure | None:
    for pattern in (r"Free memory on device \([\d.]+/" + _NUM + r" GiB\)", r"total_gpu_memory \(" + _GIB + r"\)",
                    r"total_gpu_memory[=\s]\s*" + _GIB):
        if hit := _first(body, pattern):
            return _figure("total", hit[1].group(1), hit[0], path)
    return None


def _graph_utilization(body) -> tuple[str, str, int] | None:
    hit = _first(body, r"--gpu-memory-utilization=" + _NUM + r" is equivalent to --gpu-memory-utilization=" + _NUM
                 + r" without CUDA graph memory profiling")
    return (hit[1].group(1), hit[1].group(2), hit[0]) if hit else None


def with_graph_estimate(log: ParsedLog, total_bytes: int) -> ParsedLog:
    """``log`` with the charged CUDA-graph estimate of its utilization advisory, (U - U2) x the GPU's total (the
    log's, else ``total_bytes``), where no line prints the estimate itself; good to U2's rounding, 0.00005 x total."""
    if log.graph_utilization is None or log.figure("cuda_graph") is not None:
        return log
    u, u2, line = log.graph_utilization
    total = log.total_memory_gib.bytes if log.total_memory_gib is not None else total_bytes
    gib = float((Fraction(u) - Fraction(u2)) * total) / GIB
    estimate = Figure(name="cuda_graph", value=gib, text=f"{gib:.4f}", rounding=0.00005 * total / GIB, line=line,
                      kind="utilization")
    return log.model_copy(update={"figures": _ordered([*log.figures, estimate], per_worker=True)})  # a vLLM line


def _free_at_start(path, body) -> Figure | None:
    hit = _first(body, r"Load weight begin\..*?avail mem=" + _NUM + " ?GB")
    return _figure("free", hit[1].group(1), hit[0], path) if hit else None


def _exact_available(path, body) -> int | None:
    """The smallest "kv cache memory in use is N bytes" (one per worker, as the available memory they state)."""
    rx = re.compile(r"[Cc]urrent kv cache memory in use is (\d+) bytes")
    out = None
    for n, line in body:
        if not (m := rx.search(line)):
            continue
        digits = m.group(1)
        if len(digits) > 16 or int(digits) > _MAX_GIB * GIB:
            shown = digits if len(digits) <= 30 else f"a number of {len(digits):,} digits"
            raise KvplanError(f"{path}:{n}: kv cache memory in use: {shown} bytes is out of range; allowed: at "
                              f"most {_MAX_GIB * GIB:,} bytes")
        out = int(digits) if out is None else min(out, int(digits))
    return out


def _v0_line(body) -> int | None:
    """The first line of ``body`` that only vLLM's V0 engine prints (_V0_LINES), or None."""
    hits = [hit[0] for pattern in _V0_LINES if (hit := _first(body, pattern))]
    return min(hits) if hits else None


def _version(header: dict[str, str], body) -> str | None:
    if "engine" in header:
        m = re.match(r"[a-z]+==(\S+)$", header["engine"])
        return m.group(1) if m else None
    for pattern in _VERSION_LINES:
        if hit := _first(body, pattern):
            return hit[1].group(1)
    return None


# ---- launch flags ------------------------------------------------------------------------------------------------

def _flags(header: dict[str, str], body, command_line: int = 0) -> tuple[dict, dict, str | None, dict, dict]:
    """Launch flags by source, later sources winning: the V1 config line and SGLang's ServerArgs (the resolved
    values), `Using max model len`, the `Maximum concurrency for N tokens` line, `Chunked prefill is enabled with
    max_num_batched_tokens=N`, non-default args, the launch line; with the line each was read from; and the
    UNMODELLED_FLAGS the launch line or the non-default args set, with their lines."""
    layers: list[tuple[str, int, dict[str, object]]] = []

    def layer(where: str, pattern: str, values) -> None:
        if hit := _first(body, pattern):
            layers.append((where, hit[0], values(hit[1])))

    layer("config line", r"with config: (.*)$", lambda m: _pairs(m.group(1)))
    layer("server_args", r"ServerArgs\((.*)\)", lambda m: _pairs(m.group(1)))
    # V0: the utilization used
    layer("Memory profiling line", r"(?:Memory profiling results: .*|total_gpu_memory \(.*)",
          lambda m: {"gpu_memory_utilization": u.group(1)}
          if (u := re.search(r"gpu_memory_utilization(?:=| \()(\d+(?:\.\d+)?)", m.group(0))) else {})
    layer("Memory profiling table", r"\] gpu_memory_utilization\s+(\d+(?:\.\d+)?)\s*$",  # the table form of the same
          lambda m: {"gpu_memory_utilization": m.group(1)})
    layer("Maximum concurrency line", r"Maximum concurrency for ([\d,]+) tokens per request",
          lambda m: {"max_model_len": m.group(1).replace(",", "")})
    layer("scheduler line", r"max_total_num_tokens=.*\bcontext_len=(\d+)",  # SGLang's scheduler: the length used
          lambda m: {"max_model_len": m.group(1)})
    layer("Load weight end line", r"Load weight end\..*?\bquant=([\w-]+)",  # SGLang 0.5.x: the checkpoint's quant
          lambda m: {"quantization": m.group(1)})
    layer("Using max model len", r"Using max model len (\d+)", lambda m: {"max_model_len": m.group(1)})
    layer("Chunked prefill line", r"Chunked prefill is enabled with max_num_batched_tokens=(\d+)",  # SchedulerConfig's
          lambda m: {"max_num_batched_tokens": m.group(1)})  # resolved value
    if args := _non_default_args(body):
        layers.append(("non-default args", args[0], _dict(args[1])))
    layer("FlashInfer sampler line", r"Using FlashInfer for top-p & top-k sampling",  # vLLM 0.10-0.16's sampler
          lambda m: {"flashinfer_sampler": "True"})
    layer("compile line", _COLD_COMPILE, lambda m: {"cold_compile": "True"})
    if _first(body, _COMBO_BENCHMARK):
        layer("compile line", _COLD_COMPILE_DYNAMIC, lambda m: {"cold_compile": "True"})
    if header.get("command"):
        layers.append(("launch line", command_line, _command(header["command"])))
    elif hit := next(((n, m.group(1)) for n, line in body if (m := _LAUNCH.search(line))), None):
        layers.append(("launch line", hit[0], _command(hit[1])))
    ranks = {(int(m.group(1)), n) for n, line in body if (m := re.search(r"VllmWorker (?:rank=|TP)(\d+)", line))}
    # V0's workers ("(VllmWorkerProcess pid=N)") and its driver (no pid) print their weights once each (a repeated
    # pid is a repeated paste); V1's lines ("(EngineCore pid=N)") say nothing of the world size: two pids there are
    # two start-ups, and TP comes from the flags
    loads = [(m.group(1) if (m := re.search(r"\(VllmWorkerProcess pid=(\d+)\)", line)) else "driver", n)
             for n, line in body if "Model loading took" in line]
    workers = {pid for pid, _ in loads}
    if ranks or (len(workers) > 1 and workers - {"driver"}):  # one process per GPU: the world size when no flag
        world = max(r for r, _ in ranks) + 1 if ranks else len(workers)  # says TP (PP then 1)
        line = max(ranks)[1] if ranks else loads[0][1]
        layers.insert(0, ("worker ranks" if ranks else "one weights line per GPU", line,
                          {"tensor_parallel_size": str(world)}))
    flags: dict[str, object] = {}
    sources: dict[str, str] = {}
    lines: dict[str, int] = {}
    unmodelled: dict[str, int] = {}
    for where, n, values in layers:
        for key, value in values.items():
            bare = key.lstrip("-").replace("-", "_")
            if (bare in UNMODELLED_FLAGS and where in ("launch line", "non-default args")
                    and str(value) not in ("None", "False", "", "{}", "0")):
                unmodelled[bare] = n
            name = _FLAG_NAMES.get(bare)
            if name is None or value in (None, "None", "auto", ""):
                continue
            if name == "swa_full_tokens_ratio" and _typed(name, value) == DEFAULT_SWA_FULL_TOKENS_RATIO:
                continue  # SGLang's ServerArgs prints the default for every model; it sizes only a hybrid SWA pool
            if name == "speculative_config":  # a dict (non-default args) or JSON text (the launch line); the
                value = _speculative(value)  # config line's SpeculativeConfig(...) repr is not read
                if value is None:
                    continue
            flags[name], sources[name], lines[name] = _typed(name, value), where, n
    quant = flags.pop("quantization", None)
    sources.pop("quantization", None)
    lines.pop("quantization", None)
    lines["args line"] = next((n for where, n, _ in layers if where in ("non-default args", "server_args")), 0)
    return flags, sources, None if quant is None else str(quant), lines, unmodelled


def _non_default_args(body) -> tuple[int, str] | None:
    """(line, the dict of vLLM's ``non-default args: {...}`` line, joined across the line breaks a post may have put
    in it); a post that lists them one per line under ``non-default args:`` (``  max_num_seqs=8``) gives the same
    dict."""
    for i, (n, line) in enumerate(body):
        if line.rstrip().endswith("non-default args:"):
            pairs = []
            for _, more in body[i + 1:i + 200]:
                if not (m := re.fullmatch(r"\s+(\w+)\s*[=:]\s*(.*?)\s*", more)):
                    break
                pairs.append(f"{m.group(1)!r}: {m.group(2)!r}")
            if pairs:
                return n, "{" + ", ".join(pairs) + "}"
        if (at := line.find("non-default args: {")) >= 0:
            text = line[at + len("non-default args: "):]
            for _, more in body[i + 1:i + 20]:
                if text.count("{") <= text.count("}"):
                    break
                text += more
            end = text.rfind("}")
            return (n, text[:end + 1]) if end >= 0 else None
    return None


def _speculative(value: object) -> str | None:
    """--speculative-config as JSON text, from the dict of non-default args or the launch line's JSON."""
    if isinstance(value, dict):
        return json.dumps(value)
    text = str(value).strip()
    return text if text.startswith("{") else None


def _typed(name: str, value: object) -> int | float | str | bool:
    text = str(value).strip("'\"")
    try:
        if name in _INT_FLAGS:
            return _human_int(text)
        if name in _FLOAT_FLAGS:
            return float(text)
    except ValueError:
        raise KvplanError(f"{name} = {text!r} is not a number") from None
    if name in _BOOL_FLAGS:
        return text not in ("False", "false", "0")
    return text.removeprefix("torch.")


def _human_int(text: str) -> int:
    """An integer flag as vLLM reads it (``vllm/utils`` ``human_readable_int``, the type of --max-model-len and
    --max-num-batched-tokens since 0.10): a decimal suffix in lower case (1k = 1,000, 1m = 10^6, 1g = 10^9) and a
    binary one in upper case (32K = 32,768, 1M = 2^20, 1G = 2^30)."""
    if m := re.fullmatch(r"(\d+(?:\.\d+)?)([kmgKMG])", text):
        scale = {"k": 10**3, "m": 10**6, "g": 10**9, "K": 2**10, "M": 2**20, "G": 2**30}[m.group(2)]
        number = float(m.group(1))
        if m.group(2).isupper() and not number.is_integer():
            raise ValueError(text)  # vLLM: "Decimals are not allowed with binary suffixes"
        return int(number * scale)
    return int(text)


def hub_id(model: str) -> str:
    """The Hub id of a model given as a huggingface_hub cache folder (``.../models--ORG--NAME/snapshots/<commit>``),
    as servers launched on a downloaded snapshot print it; any other text as it is."""
    m = re.search(r"models--([^/\s]+?)--([^/\s]+)", model)
    return f"{m.group(1)}/{m.group(2)}" if m else model


def _pairs(text: str) -> dict[str, str]:
    """``key=value, key='v, w', key={...}`` of the V1 config line and ServerArgs(...): the scalar values."""
    return {m.group(1): m.group(2) or m.group(3) for m in re.finditer(r"\b(\w+)=(?:'([^']*)'|([^,'{\[(]+))", text)}


def _dict(text: str) -> dict[str, object]:
    try:
        value = ast.literal_eval(text) if len(text) <= MAX_LINE_CHARS else text
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):  # nested past the parser's depth too
        value = text
    if isinstance(value, str):  # a value printed as an object: take the scalar pairs
        return {m.group(1): m.group(2) for m in re.finditer(r"'(\w+)': ('[^']*'|[\w.]+)", text)}
    return value if isinstance(value, dict) else {}


def _command(text: str) -> dict[str, object]:
    """``vllm serve MODEL --flag value --switch ...`` (and python -m ... api_server / sglang.launch_server)."""
    try:
        words = shlex.split(text.replace("\\\n", " "))
    except ValueError:
        words = text.split()
    out: dict[str, object] = {}
    if m := re.match(r"\s*vllm serve\s+([^-\s]\S*)", " ".join(words[:3])):  # `vllm serve MODEL`: positional
        out["model"] = m.group(1)
    i = 0
    while i < len(words):
        w = words[i]
        if w.startswith("-"):
            key, _, value = w.lstrip("-").partition("=")
            if not value:
                nxt = words[i + 1] if i + 1 < len(words) else None
                if nxt is not None and not nxt.startswith("-"):
                    value, i = nxt, i + 1
                else:
                    value = "True"
            out[key.replace("-", "_")] = value
        i += 1
    if out.pop("no_enable_prefix_caching", None) == "True":  # argparse's BooleanOptionalAction negative spelling
        out["enable_prefix_caching"] = "False"
    return out
