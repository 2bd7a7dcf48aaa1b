"""One object per runtime: what a layer's cache holds, what a step attends to, how FLOPs and MLA run there.

The same model holds different bytes in different runtimes. Each engine answers, for one layer of one sequence:

- ``positions_held``: token positions its cache keeps (the KV bytes are positions x bytes per token);
- ``prefill_keys`` / ``decode_keys``: keys each new query is scored against by a dense implementation;
- ``mla_mode``: whether MLA expands the latent to per-head K/V (``expand``) or absorbs the up-projections
  (``absorb``), and whether the LM head runs on every prompt position (transformers) or the last one.

``get_engine(name)`` returns the one instance per runtime; adding a runtime is one subclass and one entry in
``ENGINES``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from kvplan.errors import KvplanError
from kvplan.model.dtypes import TORCH_NAMES, DType
from kvplan.units import cdiv


@dataclass(frozen=True)
class CacheRun:
    """The lengths one estimate runs at: tokens per sequence, encoder tokens (cross-attention), the preallocated
    length of a static cache, and the tokens per page of a paged cache."""

    seq_len: int
    encoder_len: int = 0
    max_cache_len: int | None = None
    block_size: int = 16


class Engine:
    """A runtime's caching rules. Subclasses override ``positions_held`` and, where they differ, the key rules."""

    name: ClassVar[str]
    description: ClassVar[str]  # the positions-held rule, as results print it
    flops_rule: ClassVar[str]  # LM-head rows, keys attended, MLA mode
    transformers: ClassVar[bool] = False  # caches hf_kv_heads, LM head on all prompt positions, dense FLOPs
    kv_dtypes: ClassVar[tuple[str, ...] | None] = None  # None: every dtype kvplan knows

    serves_fp32: ClassVar[bool] = True  # runs a float32 checkpoint in float32 when no dtype is given
    paged: ClassVar[bool] = False  # holds whole pages of block_size tokens (vLLM's block pool)
    static: ClassVar[bool] = False  # preallocates its buffers to max_cache_len and attends every slot

    def positions_held(self, window: int | None, run: CacheRun) -> int:
        raise NotImplementedError

    def chunk_positions(self, chunk: int, run: CacheRun) -> int:
        """Positions a chunked local-attention layer holds. transformers caches a chunked layer as a sliding layer
        of W = chunk (cache_utils LAYER_TYPE_MAPPING: "chunked_attention" -> the sliding-window layer classes)."""
        return self.positions_held(chunk, run)

    def default_max_cache_len(self, seq_len: int) -> int | None:
        """The preallocated length when none is given (hf-static: the sequence length)."""
        return None

    def default_dtype(self, card_dtype: str) -> tuple[str, str | None]:
        """(kvplan dtype name, why it differs from the checkpoint's or None) for weights and K/V when none is given."""
        name = TORCH_NAMES[card_dtype]
        if name == "fp32" and not self.serves_fp32:
            return "bf16", (f"{self.name} serves a float32 checkpoint in bfloat16 (dtype=auto downcasts float32 to the "
                            "platform's preferred half type, bfloat16 on compute capability >= 8.0; vLLM "
                            "config/model.py _resolve_auto_dtype); pass --weight-dtype/--kv-dtype fp32 to override")
        return name, None

    def cross_positions(self, run: CacheRun) -> int:
        """Encoder positions a cross-attention layer holds (computed once per request)."""
        return run.encoder_len

    def prefill_keys(self, prompt_len: int, window: int | None, run: CacheRun) -> int:
        """Keys each prompt row is scored against by a dense kernel: the P prompt tokens (masked where causal)."""
        return prompt_len

    def decode_keys(self, seq_len: int, window: int | None, run: CacheRun) -> int:
        """Keys the decode step that brings a sequence to ``seq_len`` tokens attends (and reads from memory)."""
        return min(seq_len, window) if window else seq_len

    def chunk_decode_keys(self, seq_len: int, chunk: int, run: CacheRun) -> int:
        """Keys a decode step attends in a chunked layer: its own chunk so far."""
        return (seq_len - 1) % chunk + 1

    def mla_mode(self, phase: str) -> str:
        """MLA: expand the latent in prefill, absorb W_UK/W_UV in decode (vLLM MLACommonImpl, DeepSeek-V2 2.1.2)."""
        return "expand" if self.transformers or phase == "prefill" else "absorb"

    @property
    def flops_basis(self) -> str:
        """Eager transformers attention computes the full score matrix; FlashAttention skips masked blocks."""
        return "dense" if self.transformers else "causal"

    def check_dtype(self, kv_dtype: DType) -> None:
        """Refuse a K/V dtype the runtime cannot store, instead of reporting bytes it would never hold."""
        if self.kv_dtypes is not None and kv_dtype.name not in self.kv_dtypes:
            raise KvplanError(f"--kv-dtype: {self.name} does not store {kv_dtype.name} K/V; allowed: "
                              f"{', '.join(self.kv_dtypes)}{self._dtype_hint}")

    def check_run(self, run: CacheRun, has_full_layer: bool) -> None:
        """Refuse lengths the runtime cannot hold."""
        if run.max_cache_len is not None:
            raise KvplanError(f"--max-cache-len: only used by --engine hf-static (got --engine {self.name})")

    _dtype_hint: ClassVar[str] = ""


class Ideal(Engine):
    name = "ideal"
    description = "exactly the tokens attention needs: all tokens, or the last W of a sliding-window layer"
    flops_rule = ("LM head on the last position of each sequence; decode attends the cache (sliding: last W); "
                  "MLA: expand in prefill, absorb in decode")

    def positions_held(self, window: int | None, run: CacheRun) -> int:
        return min(run.seq_len, window) if window else run.seq_len

    def chunk_positions(self, chunk: int, run: CacheRun) -> int:
        """The last token's chunk so far: positions (L-1) // C * C .. L-1."""
        return (run.seq_len - 1) % chunk + 1


class HFDynamic(Engine):
    name = "hf-dynamic"
    description = "transformers DynamicCache: grows per token; sliding layers keep the last W-1 positions"
    flops_rule = ("transformers: LM head on all P prefill positions (logits_to_keep=0); decode attends L+1 keys "
                  "(sliding: DynamicSlidingWindowLayer's W-1 cached + the new one); MLA: expand every step")
    transformers = True
    kv_dtypes = ("fp32", "fp16", "bf16")
    _dtype_hint = " (transformers' Dynamic/StaticCache keep K/V in the model dtype), or use --engine ideal"

    def positions_held(self, window: int | None, run: CacheRun) -> int:
        # DynamicSlidingWindowLayer.update keeps keys[:, :, -sliding_window + 1:, :] (W-1 positions): the token
        # being processed is appended before attention, making W (transformers 5.x cache_utils.py).
        return min(run.seq_len, window - 1) if window else run.seq_len

    def chunk_decode_keys(self, seq_len: int, chunk: int, run: CacheRun) -> int:
        """A chunked layer is a sliding-window cache layer of W = chunk here, scored densely and masked."""
        return self.decode_keys(seq_len, chunk, run)


class HFStatic(HFDynamic):
    name = "hf-static"
    static = True
    description = ("transformers StaticCache: preallocated to max_cache_len positions (sliding layers "
                   "min(max_cache_len, W))")
    flops_rule = ("transformers StaticCache: LM head on all P prefill positions; every step attends all "
                  "max_cache_len slots (sliding: min(max_cache_len, W)), masked; MLA: expand every step")

    def positions_held(self, window: int | None, run: CacheRun) -> int:
        # StaticCache allocates max_cache_len positions per layer; StaticSlidingWindowLayer min(max_cache_len, W)
        return min(run.max_cache_len, window) if window else run.max_cache_len

    def default_max_cache_len(self, seq_len: int) -> int | None:
        return seq_len

    def prefill_keys(self, prompt_len: int, window: int | None, run: CacheRun) -> int:
        """A full layer returns all max_cache_len slots; a sliding layer its min(max_cache_len, W) slots, or the P
        new states when the prompt overflows them (StaticSlidingWindowLayer.update)."""
        slots = self.positions_held(window, run)
        return prompt_len if window and prompt_len > slots else slots

    def decode_keys(self, seq_len: int, window: int | None, run: CacheRun) -> int:
        return self.positions_held(window, run)  # every preallocated slot is scored (and masked)

    def check_run(self, run: CacheRun, has_full_layer: bool) -> None:
        if run.max_cache_len is None or run.max_cache_len < 1:
            raise KvplanError(f"--max-cache-len: hf-static preallocates max_cache_len positions; give a positive "
                              f"integer (got {run.max_cache_len})")
        # Only a full-attention layer must hold every position: a cache whose layers all slide keeps
        # min(max_cache_len, W) per layer and accepts longer sequences, as transformers does.
        if has_full_layer and run.max_cache_len < run.seq_len:
            raise KvplanError(f"--max-cache-len: {run.max_cache_len} is below --seq-len {run.seq_len}; a StaticCache "
                              "with full-attention layers cannot hold more positions than it preallocates")


class VLLM(Engine):
    name = "vllm"
    description = ("vLLM v1 paged cache: whole blocks of block_size tokens; sliding layers free blocks that left "
                   "the window")
    flops_rule = ("vLLM: logits only for the last position of each sequence; FlashAttention over the sequence's "
                  "own tokens (sliding: last W); MLA: expand in prefill, absorb in decode (MLACommonImpl)")
    kv_dtypes = ("fp32", "fp16", "bf16", "fp8_e4m3", "fp8_e5m2")
    serves_fp32 = False
    paged = True
    _dtype_hint = " (vLLM kv_cache_dtype: auto, fp8, fp8_e4m3, fp8_e5m2)"

    def positions_held(self, window: int | None, run: CacheRun) -> int:
        return self.blocks_held(window, run) * run.block_size

    def cross_positions(self, run: CacheRun) -> int:
        return cdiv(run.encoder_len, run.block_size) * run.block_size

    def chunk_positions(self, chunk: int, run: CacheRun) -> int:
        """``ChunkedLocalAttentionManager``: before a step from C = L - 1 computed tokens, the (C // chunk) * chunk
        tokens before the current chunk are skipped and their whole blocks freed (get_num_skipped_tokens)."""
        skipped = (run.seq_len - 1) // chunk * chunk
        return (cdiv(run.seq_len, run.block_size) - skipped // run.block_size) * run.block_size

    @staticmethod
    def blocks_held(window: int | None, run: CacheRun) -> int:
        """Blocks one sequence holds during the decode step that brings it to ``seq_len`` tokens.

        Full attention and MLA: cdiv(L, block_size) (``FullAttentionManager``, nothing is freed before the request
        ends). Sliding window: before allocating a step, ``SlidingWindowManager.remove_skipped_blocks(C)`` frees the
        blocks wholly before token C - W + 1 (C computed tokens), so a step from C = L - 1 to L holds
        cdiv(L, bs) - max(0, L - W) // bs blocks (vllm/v1/core/single_type_kv_cache_manager.py). A prefill chunk of
        n tokens frees nothing while it runs and can briefly hold more; this is the steady decode state.
        """
        held = cdiv(run.seq_len, run.block_size)
        if window:
            held -= max(0, run.seq_len - window) // run.block_size
        return held


class SGLang(Engine):
    name = "sglang"
    description = ("SGLang token pool, page size 1: one slot per token and layer (sliding layers counted in full; "
                   "its hybrid SWA pool is not modelled)")
    flops_rule = ("SGLang: logits only for the last position of each sequence; FlashInfer/FA3 over the sequence's own "
                  "tokens (sliding: last W); MLA: expand in prefill, absorb in decode")
    kv_dtypes = ("fp32", "fp16", "bf16", "fp8_e4m3", "fp8_e5m2")
    serves_fp32 = False
    _dtype_hint = " (SGLang --kv-cache-dtype: auto, fp8_e4m3, fp8_e5m2)"

    def positions_held(self, window: int | None, run: CacheRun) -> int:
        # srt/mem_cache/memory_pool.py MHATokenToKVPool: page_size 1 by default, a slot per cached token
        return run.seq_len


ENGINES: dict[str, Engine] = {e.name: e for e in (Ideal(), HFDynamic(), HFStatic(), VLLM(), SGLang())}


def get_engine(name: str | Engine) -> Engine:
    """The engine object for ``name``; KvplanError lists the known ones."""
    if isinstance(name, Engine):
        return name
    if name not in ENGINES:
        raise KvplanError(f"--engine: unknown engine {str(name)[:60]!r}; allowed: {', '.join(ENGINES)}")
    return ENGINES[name]
