"""The pool a runtime computes, as typed results (part of ``kvplan plan --json``, schema_version 1). Imported by a
plan only: a plain estimate never builds these models."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

RESULT = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class RankRow(BaseModel):
    """One pipeline stage (all TP ranks of a stage hold the same shapes)."""

    model_config = RESULT
    pp_rank: int
    first_layer: int
    last_layer: int
    params: int
    weights_bytes: int
    activation_bytes: int
    overhead_bytes: int
    available_kv_bytes: int
    kv_bytes_per_token: int
    bytes_per_block: int
    num_blocks: int  # this rank's own count, before the min over ranks
    max_model_len_fit: int


class KVCachePool(BaseModel):
    model_config = RESULT
    available_bytes: int  # per GPU, limiting rank
    block_size: int
    bytes_per_block: int  # one block of every layer slot on the limiting rank (SGLang: one token, all layers)
    num_blocks: int  # min over ranks ("GPU blocks"; SGLang: max_total_num_tokens)
    tokens: int  # "GPU KV cache size: N tokens" (vLLM 0.33: int(max_concurrency x max_model_len))
    groups: int  # vLLM KV cache groups (hybrid models: more than 1)
    padding_layers: int  # vLLM "Add k padding layers"
    blocks_per_request: int  # blocks one request at max_model_len takes, summed over groups
    state_bytes_per_request: int = 0  # state layers: one request's conv + SSM states on the rank (unpadded)
    state_slots: int | None = None  # SGLang hybrid: max_mamba_cache_size (requests whose states fit)
    swa_tokens: int | None = None  # SGLang hybrid SWA pool: swa_layer_tokens (``tokens`` is full_layer_tokens)
    # that pool's bytes per token (the rank's sliding-window layers); ``bytes_per_block`` is then the full layers'
    swa_bytes_per_token: int | None = None
    state_page_bytes: int = 0  # vLLM: one state layer's page (conv + SSM states of one request), unpadded
    state_page_padded_bytes: int | None = None  # vLLM hybrid: that page padded to the attention page
    # the cache the engine allocates where it is not all of available_bytes (llama.cpp, Ollama: n_ctx cells,
    # whatever memory is left); None: the pool fills available_bytes (vLLM, SGLang, ...)
    allocated_bytes: int | None = None

    @property
    def cache_bytes(self) -> int:
        """The cache the engine holds per GPU: what it allocates, else the whole pool."""
        return self.available_bytes if self.allocated_bytes is None else self.allocated_bytes
