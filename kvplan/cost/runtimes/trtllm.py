"""TensorRT-LLM (PyTorch backend, ``trtllm-serve``): ``free_gpu_memory_fraction`` of the memory left after a warm-up
pass, divided by TensorRT-LLM's own per-token estimate, in blocks of ``tokens_per_block`` tokens.

Read from TensorRT-LLM 1.x (2025-2026; paths inside ``tensorrt_llm``; /work/shared/reference/serving-features.md
section 4.1):

- ``_torch/pyexecutor/_util.py`` ``KvCacheCreator._cal_max_tokens``: after dummy context requests of
  ``max_num_tokens`` tokens, ``available_kv_mem = (total_gpu_memory - peak_memory + tmp_kv) x fraction`` and
  ``max_tokens = int(available_kv_mem // kv_size_per_token)`` ('Peak memory during memory usage profiling (torch +
  non-torch): ... available KV cache memory when calculating max tokens: ...'); the peak holds the CUDA context,
  the weights, the warm-up's activations and the temporary cache (added back), so available = (total - context -
  weights - activations - runtime growth) x fraction.
- ``_torch/pyexecutor/resource_manager.py`` ``KVCacheManager.get_cache_size_per_token``: ``kv_factor x
  num_attention_layers(this PP rank) x head_dim`` with ``head_dim = head_dim x num_key_value_heads // tp_size``
  (kv_factor 2), or for MLA ``kv_lora_rank + qk_rope_head_dim`` (kv_factor 1, not divided by TP); x 1 byte for an
  fp8 cache, x 2 otherwise. ``calculate_max_num_blocks``: ``blocks = int(max_tokens // tokens_per_block)``, all
  ranks take the MIN (allreduce).
- ``llmapi/llm_args.py`` ``KvCacheConfig``: ``free_gpu_memory_fraction`` default 0.9 (must be < 1.0),
  ``tokens_per_block`` 32; ``BaseLlmArgs``: ``max_batch_size`` 2048, ``max_num_tokens`` 8192.
"""

from __future__ import annotations

from kvplan.cost.runtimes.setup import Options, ServingFlags, Setup, Stage
from kvplan.cost.features import shared_prefix as _prefix
from kvplan.cost.runtimes.tokenpool import TokenPool, unverified
from kvplan.errors import KvplanError
from kvplan.model.dtypes import TORCH_NAMES
from kvplan.units import MAX_BLOCK_TOKENS, cdiv, fmt_bytes, fmt_int, require_fraction, require_positive

RULES = "TensorRT-LLM 1.x PyTorch backend (2025-2026 sources)"
DEFAULT_FRACTION = 0.9  # llm_args.py KvCacheConfig.free_gpu_memory_fraction
DEFAULT_TOKENS_PER_BLOCK = 32  # llm_args.py KvCacheConfig.tokens_per_block
DEFAULT_MAX_NUM_TOKENS = 8192  # llm_args.py max_num_tokens
DEFAULT_MAX_BATCH_SIZE = 2048  # llm_args.py max_batch_size


def kv_size_per_token(kv_heads: int, head_dim: int, layers: int, tp: int, kv_bytes: int,
                      mla_width: int | None = None) -> int:
    """resource_manager.py get_cache_size_per_token: 2 x layers x (head_dim x kv_heads // tp) x bytes; MLA: 1 x
    layers x (kv_lora_rank + qk_rope_head_dim) x bytes, whatever the TP. The integer division does not replicate
    K/V heads when kv_heads < tp (the allocator does): an estimate."""
    if mla_width is not None:
        return layers * mla_width * kv_bytes
    return 2 * layers * (head_dim * kv_heads // tp) * kv_bytes


class TensorRTLLM(TokenPool):
    name = "trtllm"
    # docs/source/features/disagg-serving.md: context and generation servers each load cache_transceiver_config (its
    # backend: DEFAULT, UCX, NIXL or MPI) from their --extra_llm_api_options YAML; `trtllm-serve disaggregated -c
    # CONFIG` lists the context_servers and generation_servers and routes each request through both
    disagg_roles = {role: f"--extra_llm_api_options {role}.yaml" for role in ("prefill", "decode")}
    disagg_note = ("TensorRT-LLM: prefill.yaml and decode.yaml each set cache_transceiver_config (backend DEFAULT), "
                   "and the settings of kv_cache.yaml (dtype, kv_cache_config) where the plan has one; `trtllm-serve "
                   "disaggregated -c "
                   "CONFIG` (context_servers: the prefill workers, generation_servers: the decode workers) routes "
                   "each request through both")

    def disagg_launch(self, launch: str, role: str) -> str:
        """One --extra_llm_api_options file per worker (click keeps the last of a repeated option): the role's,
        which carries kv_cache.yaml's settings too."""
        return f"{launch.replace(' --extra_llm_api_options kv_cache.yaml', '')} {self.disagg_roles[role]}"
    display_name = "TensorRT-LLM"
    # CUDA only: commands/serve.py get_llm_args counts GPUs with torch.cuda.device_count() ("No GPU devices found"
    # otherwise) and its kernels (TensorRT, cpp/tensorrt_llm/kernels) are NVIDIA's; the install docs list NVIDIA GPUs
    # and CUDA only (TensorRT-LLM 1.x, docs/source/installation)
    gpu_vendors = frozenset({"NVIDIA"})
    rules = RULES
    budget_flag = "--kv-cache-free-gpu-memory-fraction"
    description = ("TensorRT-LLM paged cache: blocks of tokens_per_block (32) tokens, every attention layer in full "
                   "(max_attention_window unset)")
    flops_rule = "TensorRT-LLM: logits for the last position of each sequence; fused attention over the cache"
    kv_dtypes = ("fp16", "bf16", "fp8_e4m3")  # get_cache_size_per_token: fp8 1 B, otherwise 2 B
    extra_flags = frozenset({"free_gpu_memory_fraction", "max_num_tokens", "max_batch_size", "shared_prefix_len"})
    _dtype_hint = " (TensorRT-LLM kv_cache_config.dtype: auto, fp8)"

    def decode_micro_batches(self, pp: int) -> int:
        """pp micro-batches: _torch/pyexecutor/py_executor.py PyExecutor.__init__ ("list of requests in each PP micro
        batch": num_micro_batches = dist.pp_size) and _executor_loop_pp, whose scheduler leaves out the requests of the
        micro-batches in flight (inflight_req_ids, _add_inflight_ids) (TensorRT-LLM 1.x)."""
        return pp

    def loaded_card(self, card, w_t, model_t):
        """A 16-bit checkpoint at --weight-dtype fp8 is refused: trtllm-serve (PyTorch backend) quantizes nothing at
        load and has no flag for it: it runs FP8 from a checkpoint TensorRT Model Optimizer quantized (TensorRT-LLM 1.0
        docs, features/quantization.html "Running Pre-quantized Models"; 0.17 - 0.21 torch.html "Quantization")."""
        # fp32: trtllm-serve has no dtype option (commands/serve.py); LlmArgs.dtype ("auto") could be set in the
        # --extra_llm_api_options YAML, but kvplan has not verified that the PyTorch backend's attention and kernels
        # run float32, so it is refused rather than printed (conservative)
        if w_t.name == "fp32":
            raise KvplanError("--weight-dtype: fp32: trtllm-serve has no dtype flag, and float32 through the "
                              "--extra_llm_api_options YAML (LlmArgs.dtype) is not verified for its PyTorch backend; "
                              "allowed here: fp16, bf16")
        if w_t.name.startswith("fp8") and card.quantization is None and model_t.bits >= 16:
            raise KvplanError(f"--weight-dtype: {w_t.name}: trtllm-serve has no flag that quantizes a {model_t.name} "
                              "checkpoint (it serves FP8 from a ModelOpt FP8 checkpoint: plan that checkpoint, e.g. "
                              f"-m nvidia/Llama-3.1-8B-Instruct-FP8); allowed here: {model_t.name}")
        return super().loaded_card(card, w_t, model_t)

    def held_block(self, run) -> int:
        """tokens_per_block, which ``positions_held`` rounds to."""
        return DEFAULT_TOKENS_PER_BLOCK

    def positions_held(self, window, run):
        """Whole blocks of tokens_per_block (32 by default; a plan's --block-size sets it), no window freeing."""
        return cdiv(run.seq_len, DEFAULT_TOKENS_PER_BLOCK) * DEFAULT_TOKENS_PER_BLOCK

    def resolve(self, flags: ServingFlags, card, gpu, total, layout, max_model_len) -> Options:
        if flags.gpu_memory_utilization is not None or flags.mem_fraction_static is not None:
            raise KvplanError("--gpu-memory-utilization/--mem-fraction-static: TensorRT-LLM sizes its pool with "
                              "--kv-cache-free-gpu-memory-fraction (--kv_cache_free_gpu_memory_fraction)")
        if any(v is not None for v in (flags.kv_cache_memory, flags.max_num_batched_tokens, flags.max_num_seqs)):
            raise KvplanError("--kv-cache-memory/--max-num-batched-tokens/--max-num-seqs: vLLM's; TensorRT-LLM takes "
                              "--max-num-tokens and --max-batch-size")
        fraction = DEFAULT_FRACTION
        if flags.free_gpu_memory_fraction is not None:
            fraction = require_fraction("--kv-cache-free-gpu-memory-fraction", flags.free_gpu_memory_fraction)
            if fraction >= 1:  # resource_manager.py: assert free_mem_fraction < 1.0
                raise KvplanError("--kv-cache-free-gpu-memory-fraction: TensorRT-LLM requires a fraction below 1.0 "
                                  f"(got {fraction})")
        block = (DEFAULT_TOKENS_PER_BLOCK if flags.block_size is None
                 else require_positive("--block-size", flags.block_size, MAX_BLOCK_TOKENS))
        tokens = (DEFAULT_MAX_NUM_TOKENS if flags.max_num_tokens is None
                  else require_positive("--max-num-tokens", flags.max_num_tokens))
        batch = (DEFAULT_MAX_BATCH_SIZE if flags.max_batch_size is None
                 else require_positive("--max-batch-size", flags.max_batch_size))
        return Options(block_size=block, mnbt=tokens, max_num_seqs=batch, free_gpu_memory_fraction=fraction,
                       shared_prefix_len=_prefix(flags))

    # -- the budget --

    def budget(self, s: Setup, st: Stage) -> int:
        """_util.py _cal_max_tokens: (free after the warm-up) x free_gpu_memory_fraction, in bytes."""
        return int(st.available * s.opts.free_gpu_memory_fraction)

    def token_bytes(self, s: Setup, st: Stage) -> int:
        card = s.card
        layers = sum(1 for sp in st.specs if not sp.per_sequence)
        kv_bytes = 1 if s.kv_t.bits == 8 else 2
        mla = card.mla.kv_lora_rank + card.mla.qk_rope_head_dim if card.mla else None
        return kv_size_per_token(card.num_kv_heads, card.head_dim, layers, s.layout.tp, kv_bytes, mla)

    def requested_rule(self, s: Setup) -> str:
        return "total - CUDA context; the pool: free after the warm-up x free_gpu_memory_fraction"

    def activation_rule(self, s: Setup) -> str:
        if s.activation is None:
            return "warm-up peak over max_num_tokens, ESTIMATED (--activation-memory)"
        return super().activation_rule(s)

    # -- what a plan prints --

    def launch_command(self, s: Setup, repo: str, revision: str | None = None) -> str:
        """A pinned commit goes to trtllm-serve's own ``--revision`` (tensorrt_llm/commands/serve.py click option,
        passed to get_llm_args(revision=...))."""
        lay = s.layout
        cmd = [f"trtllm-serve {repo}", *([f"--revision {revision}"] if revision else []), "--backend pytorch",
               f"--tp_size {lay.tp}"]
        cmd += [f"--pp_size {lay.pp}"] if lay.pp > 1 else []
        cmd += [f"--max_seq_len {s.max_model_len}", f"--max_num_tokens {s.mnbt}", f"--max_batch_size {s.max_num_seqs}",
                f"--kv_cache_free_gpu_memory_fraction {s.opts.free_gpu_memory_fraction}"]
        if _needs_yaml(s):
            cmd.append("--extra_llm_api_options kv_cache.yaml")
        return " ".join(cmd)

    def notes(self, s: Setup, p) -> list[str]:
        card, lim = s.card, p.limiting
        per_token = self.token_bytes(s, lim)
        out = [f"{RULES}: KV pool = (total - CUDA context ({fmt_bytes(s.context)}) - weights - warm-up activations "
               f"- runtime growth ({fmt_bytes(s.non_torch)}, --non-torch-memory)) x free_gpu_memory_fraction "
               f"{s.opts.free_gpu_memory_fraction} = {fmt_bytes(lim.available)}; max_tokens = pool // "
               f"{fmt_int(per_token)} B per token (get_cache_size_per_token) = {fmt_int(p.pool.tokens)} tokens in "
               f"{fmt_int(p.pool.num_blocks)} blocks of {s.block_size}.",
               unverified("TensorRT-LLM", "the budget, the per-token estimate and the warm-up activation peak "
                          "(kvplan's vLLM-style approximation)")]
        if card.mla is None and card.num_kv_heads < s.layout.tp:
            out.append(f"TensorRT-LLM's per-token estimate divides head_dim x {card.num_kv_heads} K/V heads by TP "
                       f"{s.layout.tp} without replicating heads: it counts {fmt_int(per_token)} B per token where "
                       f"each rank holds {fmt_int(lim.kv_bytes_per_token)} B; the pool it sizes can overrun.")
        if any(sp.window for sp in lim.specs):
            out.append("Sliding-window layers are held in full: TensorRT-LLM's variable sliding window "
                       "(kv_cache_config.max_attention_window) is not modelled.")
        if _needs_yaml(s):
            yaml = ", ".join((["dtype: fp8"] if s.kv_t.bits == 8 else [])
                             + ([f"tokens_per_block: {s.block_size}"] if s.block_size != DEFAULT_TOKENS_PER_BLOCK
                                else []))
            model_dtype = _model_dtype(s)
            top = f"dtype: {model_dtype}" if model_dtype else ""
            kv = f"kv_cache_config: {{{yaml}}}" if yaml else ""
            out.append(f"kv_cache.yaml for --extra_llm_api_options: {'; '.join(x for x in (top, kv) if x)}")
        return out


def _model_dtype(s) -> str | None:
    """The YAML's top-level ``dtype`` where the plan's 16-bit weights are not the checkpoint's own: trtllm-serve has
    no dtype flag (tensorrt_llm/commands/serve.py), and LlmArgs' ``dtype`` field (tensorrt_llm/llmapi/llm_args.py
    BaseLlmArgs: ``dtype: str = Field(default="auto", description="The data type to use for the model.")``, read in
    NVIDIA/TensorRT-LLM's stored copy of the PyTorch-backend era) takes it from the --extra_llm_api_options YAML,
    which serve.py merges into the LLM arguments (fp16 of a bf16 checkpoint: same bytes, but the plan's dtype)."""
    if s.w_t.name in ("fp16", "bf16") and s.card.quantization is None and TORCH_NAMES.get(s.card.dtype) != s.w_t.name:
        return next(torch for torch, short in TORCH_NAMES.items() if short == s.w_t.name)
    return None


def _needs_yaml(s) -> bool:
    """Whether the line needs --extra_llm_api_options: fp8 K/V, a block other than 32 tokens, or the model's dtype."""
    return s.kv_t.bits == 8 or s.block_size != DEFAULT_TOKENS_PER_BLOCK or _model_dtype(s) is not None
