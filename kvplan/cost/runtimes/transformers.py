"""transformers ``generate()`` with a DynamicCache (``hf-dynamic``) or a StaticCache (``hf-static``): one process
on one GPU, K/V in the model dtype, the LM head on every prompt position, eager (dense) attention FLOPs.

Followed: transformers 5.x ``cache_utils.py`` (DynamicLayer, DynamicSlidingWindowLayer, StaticLayer,
StaticSlidingWindowLayer).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from kvplan.cost.engines import CacheRun
from kvplan.cost.runtimes.base import Runtime
from kvplan.errors import KvplanError

if TYPE_CHECKING:
    from kvplan.cost.runtimes.setup import Setup


class HFDynamic(Runtime):
    name = "hf-dynamic"
    display_name = "transformers DynamicCache"
    description = "transformers DynamicCache: grows per token; sliding layers keep the last W-1 positions"
    flops_rule = ("transformers: LM head on all P prefill positions (logits_to_keep=0); decode attends L+1 keys "
                  "(sliding: DynamicSlidingWindowLayer's W-1 cached + the new one); MLA: expand every step")
    transformers = True
    single_process = True
    kv_dtypes = ("fp32", "fp16", "bf16")
    _dtype_hint = " (transformers' Dynamic/StaticCache keep K/V in the model dtype), or use --engine ideal"
    cache_implementation: ClassVar[str] = "dynamic"
    sliding_view: ClassVar[bool] = True  # a sliding layer's W-1 positions are a view of a W-position tensor

    def positions_held(self, window: int | None, run: CacheRun) -> int:
        # DynamicSlidingWindowLayer.update keeps keys[:, :, -sliding_window + 1:, :] (W-1 positions): the token
        # being processed is appended before attention, making W (transformers 5.x cache_utils.py).
        return min(run.seq_len, window - 1) if window else run.seq_len

    def chunk_positions(self, chunk: int, run: CacheRun) -> int:
        """transformers caches a chunked layer as a sliding layer of W = chunk (cache_utils LAYER_TYPE_MAPPING:
        "chunked_attention" -> the sliding-window layer classes)."""
        return self.positions_held(chunk, run)

    def chunk_decode_keys(self, seq_len: int, chunk: int, run: CacheRun) -> int:
        """A chunked layer is a sliding-window cache layer of W = chunk here, scored densely and masked."""
        return self.decode_keys(seq_len, chunk, run)

    def fp32_params(self, card, w_t) -> int:
        """The modules transformers keeps in float32 in a half-precision model (kvplan.cost.fp32, 5.24 rules)."""
        from kvplan.cost.fp32 import hf_fp32_params

        return hf_fp32_params(card, w_t)

    def overhead_defaults(self, gpus: int) -> tuple[int, int, int]:
        from kvplan.cost.serving_vllm import DEFAULT_CONTEXT_BYTES

        return DEFAULT_CONTEXT_BYTES, 0, 0  # the CUDA context and cuBLAS workspace share the GPU

    def launch_command(self, s: Setup, repo: str, revision: str | None = None) -> str:
        pinned = f', revision="{revision}"' if revision else ""
        return (f'AutoModelForCausalLM.from_pretrained("{repo}"{pinned}, dtype="auto", device_map="cuda").generate('
                f'..., max_length={s.max_model_len}, cache_implementation="{self.cache_implementation}")')


class HFStatic(HFDynamic):
    name = "hf-static"
    display_name = "transformers StaticCache"
    static = True
    cache_implementation = "static"
    sliding_view = False
    reference_cache = True
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
