"""Hugging Face TGI (text-generation-inference, ``text-generation-launcher``): after a warm-up prefill of
``max_batch_prefill_tokens`` tokens, 90% of the memory left (less what ``--cuda-memory-fraction`` keeps back) becomes
KV blocks; ``max_batch_total_tokens`` = blocks x BLOCK_SIZE, the block size set by the attention backend.

Read from TGI at ``db931fcf`` (2026-01-08; /work/shared/reference/serving-features.md section 4.2):

- ``server/text_generation_server/models/flash_causal_lm.py`` ``FlashCausalLM.warmup``: ``total_cache_size =
  num_layers x BLOCK_SIZE x num_kv_heads x head_size x 2 x dtype_size``; ``free_memory =
  get_free_memory(device, MEMORY_FRACTION)``; ``num_blocks = int((free_memory x TGI_WIGGLE_ROOM) //
  total_cache_size) + batch_num_blocks`` ('KV-cache blocks: {num_blocks}, size: {BLOCK_SIZE}').
- ``utils/import_utils.py`` ``get_cuda_free_memory``: ``free - (1 - fraction) x total`` (cudaMemGetInfo);
  ``models/globals.py``: ``TGI_WIGGLE_ROOM`` 0.90, ``CUDA_MEMORY_FRACTION`` 1.0.
- ``launcher/src/main.rs`` ``resolve_attention``: flashinfer (BLOCK_SIZE 1) by default on CUDA, flashdecoding (256)
  when head_dim is not 64, 128 or 256, paged (16) on request (``ATTENTION=paged``); ``max_batch_prefill_tokens``
  default min(4096, max_position_embeddings, a VRAM bound kvplan does not model).
"""

from __future__ import annotations

from kvplan.cost.runtimes.setup import Options, ServingFlags, Setup, Stage
from kvplan.cost.features import shared_prefix as _prefix
from kvplan.cost.runtimes.tokenpool import TokenPool, unverified
from kvplan.errors import KvplanError, Refused
from kvplan.units import cdiv, fmt_bytes, fmt_int, require_fraction, require_positive

RULES = "TGI 3.3 (text-generation-inference db931fcf, 2026-01)"
WIGGLE_ROOM = 0.90  # models/globals.py TGI_WIGGLE_ROOM
DEFAULT_CUDA_MEMORY_FRACTION = 1.0  # launcher --cuda-memory-fraction
DEFAULT_PREFILL_TOKENS = 4096  # launcher/src/main.rs max_batch_prefill_tokens default
BLOCK_SIZES = {"flashinfer": 1, "paged": 16, "flashdecoding": 256}  # models/globals.py BLOCK_SIZE by ATTENTION
FLASHINFER_HEAD_DIMS = (64, 128, 256)
# launcher/src/main.rs (text-generation-inference 009c4e0b, struct Args): --kv-cache-dtype takes the clap names of enum
# KVCacheDtype, fp8_e4m3fn and fp8_e5m2 (kvplan's fp8_e4m3 is the former); --quantize takes enum Quantization, whose
# Fp8 is "fp8" (not needed for a pre-quantized checkpoint, whose config names its method)
KV_CACHE_DTYPES = {"fp8_e4m3": "fp8_e4m3fn", "fp8_e5m2": "fp8_e5m2"}


def default_attention(head_dim: int) -> str:
    """launcher/src/main.rs resolve_attention: flashinfer, or flashdecoding for head dims flashinfer lacks."""
    return "flashinfer" if head_dim in FLASHINFER_HEAD_DIMS else "flashdecoding"


def num_blocks(free_bytes: int, total_bytes: int, fraction: float, block_bytes: int, warmup_blocks: int) -> int:
    """flash_causal_lm.py warmup: int(max(0, free - (1 - fraction) x total) x 0.90) // block bytes + the warm-up
    batch's blocks (allocated during the warm-up, so outside ``free``)."""
    usable = max(0, free_bytes - (1 - fraction) * total_bytes)
    return int(usable * WIGGLE_ROOM) // block_bytes + warmup_blocks


class TGI(TokenPool):
    name = "tgi"
    display_name = "TGI"
    rules = RULES
    budget_flag = "--cuda-memory-fraction"
    online_fp8_flag = "--quantize fp8"  # KV_CACHE_DTYPES' source
    description = ("TGI paged cache: blocks of BLOCK_SIZE tokens (flashinfer 1, paged 16, flashdecoding 256), every "
                   "layer in full")
    flops_rule = "TGI: logits for the last position of each sequence; flashinfer/flashdecoding over the cache"
    kv_dtypes = ("fp16", "bf16", "fp8_e4m3", "fp8_e5m2")
    extra_flags = frozenset({"cuda_memory_fraction", "max_batch_prefill_tokens", "shared_prefix_len"})
    _dtype_hint = " (TGI --kv-cache-dtype: fp8_e4m3fn, fp8_e5m2)"

    def positions_held(self, window, run):
        """Every position of every layer (flashinfer, BLOCK_SIZE 1 by default; a plan's --block-size rounds up)."""
        return run.seq_len

    def check_servable(self, card, layout) -> None:
        super().check_servable(card, layout)
        if layout.pp > 1:
            raise Refused(f"--pp: TGI shards a model over --num-shard GPUs (tensor parallel) only; got --pp {layout.pp}")
        if card.mla is not None:
            raise KvplanError(f"--engine tgi: {card.name}'s MLA cache (TGI stores it expanded per head with "
                              "flashdecoding) is not modelled; use --engine vllm or sglang")

    def resolve(self, flags: ServingFlags, card, gpu, total, layout, max_model_len) -> Options:
        for flag, value in (("--gpu-memory-utilization", flags.gpu_memory_utilization),
                            ("--mem-fraction-static", flags.mem_fraction_static),
                            ("--kv-cache-memory", flags.kv_cache_memory),
                            ("--max-num-batched-tokens", flags.max_num_batched_tokens),
                            ("--max-num-seqs", flags.max_num_seqs)):
            if value is not None:
                raise KvplanError(f"{flag}: not a TGI flag; TGI takes --cuda-memory-fraction and "
                                  "--max-batch-prefill-tokens")
        fraction = DEFAULT_CUDA_MEMORY_FRACTION
        if flags.cuda_memory_fraction is not None:
            fraction = require_fraction("--cuda-memory-fraction", flags.cuda_memory_fraction)
        if flags.block_size is None:
            block = BLOCK_SIZES[default_attention(card.head_dim)]
        elif flags.block_size in BLOCK_SIZES.values():
            block = flags.block_size
        else:
            raise KvplanError(f"--block-size: TGI's BLOCK_SIZE is set by its attention backend: "
                              f"{', '.join(f'{v} ({k})' for k, v in BLOCK_SIZES.items())}; got {flags.block_size}")
        prefill = (min(DEFAULT_PREFILL_TOKENS, card.max_position_embeddings) if flags.max_batch_prefill_tokens is None
                   else require_positive("--max-batch-prefill-tokens", flags.max_batch_prefill_tokens))
        return Options(block_size=block, mnbt=prefill, cuda_memory_fraction=fraction,
                       shared_prefix_len=_prefix(flags))

    def attention(self, s: Setup) -> str:
        return next(k for k, v in BLOCK_SIZES.items() if v == s.block_size)

    # -- the budget --

    def warmup_blocks(self, s: Setup) -> int:
        """The warm-up batch's blocks: its max_batch_prefill_tokens tokens in whole blocks (an estimate: TGI splits
        the batch into requests of at most max_input_tokens, each rounded up to a block)."""
        return cdiv(s.mnbt, s.block_size)

    def budget(self, s: Setup, st: Stage) -> int:
        block_bytes = self.token_bytes(s, st) * s.block_size
        warm = self.warmup_blocks(s)
        free = st.available - warm * block_bytes  # the warm-up batch's blocks are allocated when TGI measures
        return num_blocks(free, s.total, s.opts.cuda_memory_fraction, block_bytes, warm) * block_bytes

    def requested_rule(self, s: Setup) -> str:
        return (f"total - CUDA context; the pool: (free after the warm-up - (1 - cuda_memory_fraction "
                f"{s.opts.cuda_memory_fraction}) x total) x 0.90")

    def activation_rule(self, s: Setup) -> str:
        if s.activation is None:
            return "warm-up prefill peak over max_batch_prefill_tokens, ESTIMATED (--activation-memory)"
        return super().activation_rule(s)

    # -- what a plan prints --

    def launch_command(self, s: Setup, repo: str, revision: str | None = None) -> str:
        attention = self.attention(s)
        env = [] if attention == default_attention(s.card.head_dim) else [f"ATTENTION={attention}"]
        cmd = env + ["text-generation-launcher", f"--model-id {repo}", *([f"--revision {revision}"] if revision else []),
                     f"--num-shard {s.layout.tp}", f"--max-input-tokens {s.max_model_len - 1}",
                     f"--max-total-tokens {s.max_model_len}", f"--max-batch-prefill-tokens {s.mnbt}"]
        if s.opts.cuda_memory_fraction != DEFAULT_CUDA_MEMORY_FRACTION:
            cmd.append(f"--cuda-memory-fraction {s.opts.cuda_memory_fraction}")
        if s.kv_t.name.startswith("fp8"):
            cmd.append(f"--kv-cache-dtype {KV_CACHE_DTYPES[s.kv_t.name]}")
        if s.w_t.name.startswith("fp8") or s.online_fp8:  # a 16-bit checkpoint quantized at load (Server.loaded_card)
            cmd.append("--quantize fp8")
        if s.w_t.name == "fp16" and s.card.dtype != "float16":
            cmd.append("--dtype float16")
        return " ".join(cmd)

    def notes(self, s: Setup, p) -> list[str]:
        lim = p.limiting
        out = [f"{RULES}: attention {self.attention(s)} (BLOCK_SIZE {s.block_size}); KV-cache blocks = int((free after "
               f"the warm-up - (1 - {s.opts.cuda_memory_fraction}) x total) x 0.90) // {fmt_int(p.pool.bytes_per_block)}"
               f" B + {fmt_int(self.warmup_blocks(s))} warm-up blocks = {fmt_int(p.pool.num_blocks)}; the router's "
               f"max_batch_total_tokens = {fmt_int(p.pool.tokens)} ('Setting max batch total tokens to "
               f"{p.pool.tokens}'). Free after the warm-up = total - CUDA context ({fmt_bytes(s.context)}) - weights "
               f"- warm-up activations ({fmt_bytes(lim.activation)}) - runtime growth ({fmt_bytes(s.non_torch)}) - the "
               f"warm-up blocks' own {fmt_bytes(self.warmup_blocks(s) * p.pool.bytes_per_block)} (allocated for the "
               "warm-up and still held when the free memory is read).",
               unverified("TGI", "the warm-up activation peak (kvplan's vLLM-style approximation), the warm-up blocks "
                          "and the budget")]
        if any(sp.window for sp in lim.specs):
            out.append("Sliding-window layers are held in full: TGI keeps every position of every layer.")
        return out
