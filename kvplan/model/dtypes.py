"""Storage formats for weights and KV caches, with exact sizes for sub-byte types.

Sizes are integer bits per element; byte counts are ceil-divided per stored vector, because real kernels pack
sub-byte values along the innermost (head_dim) axis of each vector: an int4 vector of 127 elements takes 64 bytes.

Quantization scales are explicit overhead, never folded into the element size:

- ``fp8_e4m3`` / ``fp8_e5m2``: one fp32 scale for K and one for V per attention layer (vLLM's per-tensor
  ``k_scale``/``v_scale``, ``vllm/attention/layer.py``). That is 8 bytes per layer, not per token.
- ``int8``: symmetric, one fp16 scale per group of 64 elements of each vector (per token, per head).
- ``int4``: asymmetric, one fp16 scale and one fp16 zero-point per group of 64 elements of each vector, the layout
  of transformers' ``QuantizedCache`` (``q_group_size=64``) and KIVI (Liu et al. 2024, arXiv:2402.02750).

These are the ``ideal`` layouts. A runtime that stores int8/int4 K/V its own way holds another DType of the same name
(``Engine.kv_layout``: vLLM's ``int8_per_token_head`` / ``int4_per_token_head``, one fp32 scale per vector,
``vector_scale_bytes``).
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.errors import KvplanError, clip


@dataclass(frozen=True)
class DType:
    name: str  # canonical name, as printed
    bits: int  # bits per stored element
    group_size: int = 0  # elements sharing one scale group (0: no per-vector scales)
    group_scale_bytes: int = 0  # bytes of scale (+ zero-point) per group
    layer_scale_bytes: int = 0  # fixed per-layer scale bytes (per-tensor K and V scales)
    vector_scale_bytes: int = 0  # scale bytes per stored vector, whatever its length (one per token and head)

    def data_bytes(self, elems: int) -> int:
        """Bytes of one packed vector of ``elems`` elements, without scales: ceil(elems * bits / 8)."""
        return (elems * self.bits + 7) // 8

    def scale_bytes(self, elems: int) -> int:
        """Per-vector scale bytes: ceil(elems / group_size) groups x group_scale_bytes, plus a per-vector scale."""
        if self.group_size == 0:
            return self.vector_scale_bytes
        return (elems + self.group_size - 1) // self.group_size * self.group_scale_bytes + self.vector_scale_bytes

    def vector_bytes(self, elems: int) -> int:
        return self.data_bytes(elems) + self.scale_bytes(elems)

    @property
    def activation_bytes(self) -> int:
        """Bytes of one activation (or buffer) element of a model whose weights are this dtype: float32 models run in
        float32, every other one (16-bit, fp8, quantized) in its 16-bit model dtype."""
        return 4 if self.bits == 32 else 2

    def describe_element(self) -> str:
        """'2 B' for whole-byte types, '4 bit' otherwise."""
        return f"{self.bits // 8} B" if self.bits % 8 == 0 else f"{self.bits} bit"


_FP8_LAYER_SCALES = 2 * 4  # k_scale + v_scale, fp32 each
DTYPES: dict[str, DType] = {
    d.name: d
    for d in (
        DType("fp32", 32),
        DType("fp16", 16),
        DType("bf16", 16),
        DType("fp8_e4m3", 8, layer_scale_bytes=_FP8_LAYER_SCALES),
        DType("fp8_e5m2", 8, layer_scale_bytes=_FP8_LAYER_SCALES),
        DType("int8", 8, group_size=64, group_scale_bytes=2),
        DType("int4", 4, group_size=64, group_scale_bytes=4),
    )
}

# Other spellings people use: torch/transformers names, and vLLM's "fp8" (which means e4m3).
ALIASES: dict[str, str] = {
    "float32": "fp32", "float": "fp32", "float16": "fp16", "half": "fp16", "bfloat16": "bf16",
    "fp8": "fp8_e4m3", "e4m3": "fp8_e4m3", "float8_e4m3fn": "fp8_e4m3", "fp8_e4m3fn": "fp8_e4m3",
    "e5m2": "fp8_e5m2", "float8_e5m2": "fp8_e5m2",
}

# The card's `dtype` field uses torch names; this maps them to canonical names.
TORCH_NAMES = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}
TORCH_NAME_OF = {name: torch for torch, name in TORCH_NAMES.items()}  # the other way: an engine's --dtype value


def parse_dtype(name: str, *, what: str = "dtype") -> DType:
    """Look up a dtype by canonical name or alias, case-insensitively; KvplanError names the allowed values."""
    if not isinstance(name, str):
        raise KvplanError(f"{what}: expected a dtype name, got {type(name).__name__}")
    key = name.strip().lower().replace("-", "_")
    key = ALIASES.get(key, key)
    if key not in DTYPES:
        allowed = ", ".join([*DTYPES, *ALIASES])
        raise KvplanError(f"{what}: unknown dtype {clip(name)}; allowed: {allowed}")
    return DTYPES[key]
