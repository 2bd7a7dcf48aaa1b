"""The roofline's typed results (``kvplan estimate --gpu`` JSON, ``roofline``); the arithmetic is in
``kvplan.cost.roofline``, which a plain estimate does not load. Their schema is built on first use."""

from typing import Literal

from pydantic import BaseModel, ConfigDict

_RESULT = ConfigDict(frozen=True, extra="forbid", defer_build=True)  # built when a roofline is computed


class PhaseRoofline(BaseModel):
    model_config = _RESULT
    flops: int  # executed by the engine (see flops_basis)
    flops_basis: Literal["dense", "causal"]
    weights_read_bytes: int
    kv_read_bytes: int
    kv_write_bytes: int
    bytes_moved: int
    arithmetic_intensity_flops_per_byte: float
    compute_time_s: float
    memory_time_s: float
    time_s: float  # max(compute_time_s, memory_time_s): a lower bound
    bound: Literal["compute", "memory"]


class RooflineResult(BaseModel):
    """``estimate --gpu`` JSON: the roofline of one prefill and one decode step on one GPU."""

    model_config = _RESULT
    gpu: str
    gpu_source: str
    engine: str
    batch: int
    prompt_len: int
    seq_len: int
    compute_dtype: str
    peak_flops_per_s: float
    memory_bandwidth_bytes_per_s: int
    ridge_point_flops_per_byte: float  # intensity above which a step is compute-bound
    mfu: float
    mbu: float
    memory_needed_bytes: int  # weights + KV cache at seq_len (kvplan.planning.estimate.estimate)
    gpu_memory_bytes: int  # the total torch sees (GPU.engine_memory_bytes: the catalog's visible total, else datasheet)
    gpu_memory_visible: bool = True  # False: no visible total is known, gpu_memory_bytes is the vendor-stated figure
    fits_in_memory: bool
    prefill: PhaseRoofline
    decode_step: PhaseRoofline
    moe_decode_weights_read_bytes_min: int | None  # MoE: all tokens on the same top-k experts
    # the prefill of the whole batch: when the last of `batch` requests gets its first token
    time_to_first_token_s: float
    time_to_first_token_one_request_s: float  # the prefill of one request alone
    time_per_output_token_s: float
    decode_tokens_per_s: float  # batch / time_per_output_token_s
    notes: list[str]
