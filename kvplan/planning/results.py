"""The typed result of ``kvplan.estimate``: what ``kvplan estimate --json`` prints (schema_version 3)."""

from pydantic import BaseModel, ConfigDict

from kvplan.cost.llamacpp_results import LlamaMemory  # noqa: F401 - part of the estimate schema
from kvplan.cost.flops import StepFlops
from kvplan.cost.roofline_results import RooflineResult

SCHEMA_VERSION = 3
RESULT = ConfigDict(frozen=True, extra="forbid", defer_build=True)  # built on first use: a plain estimate builds only the models it fills


class EstimateInputs(BaseModel):
    """The inputs, echoed, with defaults resolved (dtypes, max_cache_len)."""

    model_config = RESULT
    model: str
    batch: int
    seq_len: int
    encoder_len: int | None
    kv_dtype: str
    weight_dtype: str
    engine: str
    max_cache_len: int | None
    block_size: int | None  # --block-size where the engine's estimate takes it (vllm), else None
    kv_heads: int | None
    attention: str | None
    prompt_len: int
    gpu: str | None = None
    enable_prefix_caching: bool | None = None  # vLLM --enable-prefix-caching / --no-enable-prefix-caching as given


class ModelSummary(BaseModel):
    model_config = RESULT
    name: str
    source: str
    architecture: str
    attention: str  # MHA, MQA, GQA or MLA
    attention_detail: str
    num_layers: int
    num_kv_heads: int  # cached per token and layer: MLA 1 (its latent + rope key); no attention layers, encoder-only: 0
    head_dim: int  # MLA: kv_lora_rank + qk_rope_head_dim; no attention layers: 0
    layout_changed: bool  # --kv-heads / --attention replaced the card's own layout


class KVGroup(BaseModel):
    """Layers of one kind with identical cache geometry, e.g. Gemma-2's 21 sliding layers."""

    model_config = RESULT
    kind: str  # full, sliding, mla, cross
    layers: int
    window: int | None
    chunk: int | None = None  # chunked local attention (Llama 4): the chunk a token attends within
    bytes_per_token_per_layer: int  # one cached token of one sequence in ONE of these layers (0: a state per sequence)
    positions_held: int  # per layer, per sequence
    bytes_per_sequence: int  # these layers, one sequence (at its length; a state layer's whole state)
    total_bytes: int  # these layers, whole batch
    formula: str


class KVCacheResult(BaseModel):
    model_config = RESULT
    engine: str
    engine_rule: str
    dtype: str
    bytes_per_token: int  # one more cached token, one sequence, while no window is full (self-attention layers)
    bytes_per_sequence: int
    total_bytes: int  # whole batch
    groups: list[KVGroup]


class QuantizedWeights(BaseModel):
    """A quantized checkpoint's weight bytes by kind (kvplan.cost.quant); they add up to weights.bytes minus
    kv_scale_bytes."""

    model_config = RESULT
    method: str  # fp8, awq, gptq
    format: str  # e.g. "fp8 (block 128x128 scales, dynamic activations)", "awq int4 (group 128)"
    quantized_params: int  # weight elements of the quantized linears
    quantized_bytes: int  # their packed values: float8 bytes or int32 words
    scale_bytes: int  # their scales (fp8 weight_scale_inv / weight_scale, + static input_scale; AWQ/GPTQ scales)
    zero_bytes: int  # AWQ/GPTQ packed qzeros
    g_idx_bytes: int  # GPTQ g_idx, one int32 per input row
    unquantized_params: int  # embeddings, lm_head, norms, routers, biases, linears the format skips
    unquantized_bytes: int  # those in weights.dtype (weights.fp32_params of them at 4 bytes)

    @property
    def stored_bytes(self) -> int:
        return self.quantized_bytes + self.scale_bytes + self.zero_bytes + self.g_idx_bytes + self.unquantized_bytes


def weights_format(quantization: str | None, dtype: str) -> str:
    """How weights are stored, as a result names them: ``dtype``, or a quantized checkpoint's format (its label) and
    ``dtype`` for the rest (embeddings, LM head, norms, routers, linears the format skips)."""
    return f"{quantization}, the rest {dtype}" if quantization else dtype


class CheckpointPart(BaseModel):
    """One explained part of the difference: what the checkpoint holds beyond kvplan's count (negative: less)."""

    model_config = RESULT
    reason: str
    bytes: int
    tensors: int
    names: list[str]  # tensor names with layer numbers as *, at most 5


class CheckpointCheck(BaseModel):
    """A Hub checkpoint's bytes beside kvplan's weight bytes for the same card."""

    model_config = RESULT
    repo: str
    commit: str
    read_from: str  # "safetensors headers" or "model.safetensors.index.json metadata.total_size"
    bytes: int  # the checkpoint's tensors
    index_total_bytes: int | None  # the index's metadata.total_size, where there is an index
    tensors: int  # from the headers (0: not read)
    kvplan_bytes: int  # kvplan's weights of the card as the checkpoint stores them (its dtype, its quantization)
    difference_bytes: int  # bytes - kvplan_bytes
    explained: list[CheckpointPart]
    unexplained_bytes: int
    warning: str | None


class WeightsResult(BaseModel):
    model_config = RESULT
    params: int
    active_params: int  # per token: only the routed experts a token uses (equal to params for dense models)
    dtype: str  # of the unquantized tensors (all of them without card.quantization)
    bytes: int  # the stored parameters (packed values, scales, zeros of quantized linears) plus kv_scale_bytes
    kv_scale_bytes: int  # fp8 KV: vLLM's per-layer fp32 k_scale and v_scale parameters (0 otherwise)
    # of params, those the engine holds in float32 beside dtype, at 4 bytes in bytes (transformers 5.24 keeps the
    # DeepSeek router, gpt-oss norms in fp16, ... in float32: kvplan.cost.fp32); 0 for vLLM, SGLang and ideal
    fp32_params: int = 0
    breakdown: dict[str, int]  # parameters by component
    quantization: QuantizedWeights | None = None  # the card's quantized checkpoint, by kind of bytes
    checkpoint_bytes: int | None = None  # a Hub model's checkpoint: the bytes of its tensors
    checkpoint: CheckpointCheck | None = None  # ... beside kvplan's count, the difference explained


class Estimate(BaseModel):
    """Everything ``kvplan estimate`` reports; ``--json`` prints exactly this."""

    model_config = RESULT
    schema_version: int = SCHEMA_VERSION
    inputs: EstimateInputs
    model: ModelSummary
    kv_cache: KVCacheResult
    weights: WeightsResult
    total_bytes: int  # weights + KV cache
    flops: StepFlops | None  # prefill and decode_step; decoder-only and encoder-decoder cards
    roofline: RooflineResult | None = None  # with --gpu
    notes: list[str]
    llamacpp: LlamaMemory | None = None  # --engine llamacpp|ollama: context, caches and buffers per device

    def _repr_html_(self) -> str:
        """A notebook shows the estimate as a table (stdlib HTML, kvplan.planning.htmlrepr)."""
        from kvplan.planning.htmlrepr import estimate_html

        return estimate_html(self)
