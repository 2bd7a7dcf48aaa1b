"""The cache rules of a runtime: what a layer's cache holds, what a step attends to, how FLOPs and MLA run there.

The same model holds different bytes in different runtimes. Each engine answers, for one layer of one sequence:

- ``positions_held``: token positions its cache keeps (the KV bytes are positions x bytes per token);
- ``prefill_keys`` / ``decode_keys``: keys each new query is scored against by a dense implementation;
- ``mla_mode``: whether MLA expands the latent to per-head K/V (``expand``) or absorbs the up-projections
  (``absorb``), and whether the LM head runs on every prompt position (transformers) or the last one.

The base class holds the ideal rules (exactly the tokens attention needs); each runtime in
``kvplan.cost.runtimes`` subclasses it (through ``Runtime``, which adds the serving rules) and overrides where its
engine differs. This module imports nothing of the runtimes, so the arithmetic below it (kvspec, parallel, flops)
takes a runtime object and never looks one up by name: ``kvplan.cost.runtimes.get_engine(name)`` does that.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from kvplan.errors import KvplanError
from kvplan.model.dtypes import TORCH_NAMES, DType


@dataclass(frozen=True)
class CacheRun:
    """The lengths one estimate runs at: tokens per sequence, encoder tokens (cross-attention), the preallocated
    length of a static cache, and the tokens per page of a paged cache."""

    seq_len: int
    encoder_len: int = 0
    max_cache_len: int | None = None
    block_size: int = 16


class Engine:
    """A runtime's caching rules, the ideal ones unless a runtime overrides them."""

    name: ClassVar[str] = "ideal"
    description: ClassVar[str] = ("exactly the tokens attention needs: all tokens, or the last W of a sliding-window "
                                  "layer")
    flops_rule: ClassVar[str] = ("LM head on the last position of each sequence; decode attends the cache (sliding: "
                                 "last W); MLA: expand in prefill, absorb in decode")
    transformers: ClassVar[bool] = False  # caches hf_kv_heads, LM head on all prompt positions, dense FLOPs
    kv_dtypes: ClassVar[tuple[str, ...] | None] = None  # None: every dtype kvplan knows

    serves_fp32: ClassVar[bool] = True  # runs a float32 checkpoint in float32 when no dtype is given
    paged: ClassVar[bool] = False  # holds whole pages of block_size tokens (vLLM's block pool)
    # estimate's --block-size sets the pages this engine's positions_held rounds to (vLLM's block); False: its
    # estimate holds positions in pages of its own or none, and refuses the flag (plan takes each engine's own)
    takes_estimate_block: ClassVar[bool] = False
    static: ClassVar[bool] = False  # preallocates its buffers to max_cache_len and attends every slot
    sliding_view: ClassVar[bool] = False
    reference_cache: ClassVar[bool] = False  # kvplan verify's reference model implements this cache  # holds a sliding layer's cache as a view of a longer tensor

    def positions_held(self, window: int | None, run: CacheRun) -> int:
        """Token positions one layer of one sequence holds: all of them, or the last W of a sliding layer."""
        return min(run.seq_len, window) if window else run.seq_len

    def caps_window(self, window: int) -> bool:
        """Whether a sliding layer of ``window`` stops growing near its window under ``positions_held``: at a length
        far past the window it holds fewer positions than the sequence has (vLLM frees the blocks that left it;
        SGLang's token pool and TensorRT-LLM hold every token)."""
        n = 4 * window + 4096  # past any page rounding (vLLM's blocks, llama.cpp's n_swa + n_ubatch)
        return self.positions_held(window, CacheRun(n, 0, self.default_max_cache_len(n))) < n

    def held_block(self, run: CacheRun) -> int | None:
        """The tokens per page ``positions_held`` rounds to, as an estimate's formula names it; None: no pages
        (every position by itself)."""
        return run.block_size if self.takes_estimate_block else None

    def chunk_positions(self, chunk: int, run: CacheRun) -> int:
        """Positions a chunked local-attention layer holds: the last token's chunk so far, (L-1) // C * C .. L-1."""
        return (run.seq_len - 1) % chunk + 1

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

    def default_kv_dtype(self, card_dtype: str) -> tuple[str, str | None]:
        """``default_dtype`` for the K/V cache: the same, unless the engine caches in a type of its own."""
        return self.default_dtype(card_dtype)

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

    def step_keys(self, phase: str, tokens: int, window: int | None, chunk: int | None, run: CacheRun) -> int:
        """Keys each new query of a step is scored against in a layer of this ``window`` or ``chunk``: the one rule
        kvplan.cost.flops and the sharded verify's per-rank FLOPs both fold over. ``tokens``: the prompt (prefill)
        or the length the decode step reaches. A chunked layer prefills as a sliding layer of W = chunk."""
        if phase == "prefill":
            return self.prefill_keys(tokens, window or chunk, run)
        return self.chunk_decode_keys(tokens, chunk, run) if chunk else self.decode_keys(tokens, window, run)

    def mla_mode(self, phase: str) -> str:
        """MLA: expand the latent in prefill, absorb W_UK/W_UV in decode (vLLM MLACommonImpl, DeepSeek-V2 2.1.2)."""
        return "expand" if self.transformers or phase == "prefill" else "absorb"

    @property
    def flops_basis(self) -> str:
        """Eager transformers attention computes the full score matrix; FlashAttention skips masked blocks."""
        return "dense" if self.transformers else "causal"

    def fp32_params(self, card, w_t: DType) -> int:
        """Parameters the runtime keeps in float32 in a model loaded in ``w_t`` (none unless it says so)."""
        return 0

    def check_dtype(self, kv_dtype: DType) -> None:
        """Refuse a K/V dtype the runtime cannot store, instead of reporting bytes it would never hold."""
        if self.kv_dtypes is not None and kv_dtype.name not in self.kv_dtypes:
            raise KvplanError(f"--kv-dtype: {self.name} does not store {kv_dtype.name} K/V; allowed: "
                              f"{', '.join(self.kv_dtypes)}{self._dtype_hint}")

    def kv_dtypes_for(self, card) -> tuple[str, ...] | None:
        """The K/V dtypes this runtime stores for ``card`` (``kv_dtypes`` unless some are refused for it)."""
        return self.kv_dtypes

    def kv_layout(self, kv_dtype: DType, card) -> DType:
        """The K/V layout this runtime stores ``kv_dtype`` in for ``card`` (after ``check_dtype``): kvplan's own
        (kvplan.model.dtypes) unless the runtime quantizes K/V its own way (vLLM int8/int4), or refuses the card."""
        return kv_dtype

    def kv_layout_note(self, kv_dtype: DType) -> str | None:
        """What the output says of a ``kv_layout`` of this runtime's own (None: kvplan's layout)."""
        return None

    def check_run(self, run: CacheRun, has_full_layer: bool) -> None:
        """Refuse lengths the runtime cannot hold."""
        if run.max_cache_len is not None:
            raise KvplanError(f"--max-cache-len: only used by --engine hf-static (got --engine {self.name})")

    _dtype_hint: ClassVar[str] = ""


IDEAL_RULES = Engine()  # the default of the arithmetic that takes a runtime (kvplan.cost.runtimes.ideal serves it)


def as_rules(engine: Engine) -> Engine:
    """``engine`` itself; a name is refused here, below the registry: kvplan.cost.runtimes.get_engine(name)."""
    if not isinstance(engine, Engine):
        raise TypeError(f"{engine!r}: pass a runtime object (kvplan.cost.runtimes.get_engine(name)), not a name")
    return engine
