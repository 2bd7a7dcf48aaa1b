"""Weight quantization as a checkpoint ships it: the optional ``quantization:`` block of a model card.

``None`` (no block) means every tensor is stored in the card's ``dtype``. With a block, the linear projections of
each block (kvplan.cost.shapes) are stored quantized, except those named in ``unquantized``; the embeddings, the LM
head, the norms and the MoE routers are never quantized by these formats (vLLM builds DeepSeek's and Mixtral's
``gate`` with ``quant_config=None``, ``ParallelLMHead``/``VocabParallelEmbedding`` unquantized for fp8, AWQ and
GPTQ; transformers' quantizers skip ``get_keys_to_not_convert``: the LM head).

- ``fp8``: one float8 byte per weight plus fp32 scales: one per tensor (``tensor``), per output channel
  (``channel``), or per ``block`` = [n, k] tile (DeepSeek-V3 and Qwen3-FP8 ``weight_block_size: [128, 128]``,
  stored as ``weight_scale_inv``); ``activation_scheme: static`` adds one fp32 ``input_scale`` per matrix.
- ``mxfp4`` (gpt-oss): the MoE experts' values as 4-bit e2m1, two per byte, with one e8m0 scale byte per 32 values
  (4.25 bits a weight); attention, routers, embeddings and the LM head stay in the card dtype (vLLM ``mxfp4.py``
  ``Mxfp4Config`` quantizes FusedMoE layers only).
- ``awq`` (AutoAWQ GEMM) and ``gptq`` (AutoGPTQ / GPTQModel): ``bits``-wide integers packed 32 / bits to an int32,
  with per-``group_size`` scales (fp16) and packed int32 zero points (``qzeros``); GPTQ also stores ``g_idx`` (one
  int32 per input row: its group, permuted when ``desc_act``). ``group_size: -1``: one group over the whole input.
"""

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, model_validator

QuantMethod = Literal["fp8", "awq", "gptq", "mxfp4"]
# The linears of kvplan.cost.shapes a format may quantize (routers are never quantized)
QuantizableLinear = Literal["q_proj", "k_proj", "v_proj", "o_proj", "q_a_proj", "q_b_proj", "kv_a_proj_with_mqa",
                            "kv_b_proj", "gate_proj", "up_proj", "down_proj"]
QUANTIZABLE: frozenset[str] = frozenset(QuantizableLinear.__args__)
ScaleDType = Literal["float32", "float16", "bfloat16", "float8_e8m0"]
SCALE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float8_e8m0": 1}
# AutoAWQ WQLinear_GEMM and AutoGPTQ QuantLinear store fp16 scales; fp8 stores fp32 (weight_scale_inv / weight_scale);
# MXFP4 (OCP microscaling) one E8M0 exponent byte per 32 values (vLLM mxfp4.py: scale_dtype uint8, mxfp4_block 32)
_DEFAULT_SCALE_DTYPE = {"fp8": "float32", "awq": "float16", "gptq": "float16", "mxfp4": "float8_e8m0"}
_BITS = {"fp8": (8,), "awq": (4,), "gptq": (4, 8), "mxfp4": (4,)}  # vLLM AWQConfig: 4-bit only; GPTQ: kvplan 4, 8
MXFP4_BLOCK = 32  # values per E8M0 scale
# vLLM Mxfp4Config.get_quant_method quantizes FusedMoE layers only (every LinearBase stays unquantized)
_MXFP4_LINEARS = frozenset({"gate_proj", "up_proj", "down_proj"})
_STRICT = ConfigDict(frozen=True, extra="forbid", defer_build=True)
_Pos = Annotated[StrictInt, Field(gt=0, le=10_000_000)]


class Mxfp4Layout(BaseModel):
    """MXFP4 experts as a MoE kernel backend holds them once loaded, per expert on one rank: w13 (gate and up fused,
    [2 I, H]) and w2 ([H, I]) as uint8 values [n_out, n_in / 2] and e8m0 scales [n_out, n_in / 32], and their biases
    (kvplan.cost.quant.mxfp4_expert_bytes turns it into bytes; the runtimes pick one: vLLM's per release and GPU in
    kvplan.cost.serving_vllm.mxfp4_layout)."""

    model_config = _STRICT
    backend: str = Field("Marlin", description="The backend's name, as a plan prints it.")
    hidden_pad: _Pos = Field(256, description="create_weights rounds the hidden size up to a multiple of this.")
    intermediate_pad: _Pos = Field(128, description="... and the intermediate size per rank to a multiple of this.")
    value_align: tuple[_Pos, _Pos] = Field(
        (1, 1), description="The kernel's copy of each value matrix: (rows, bytes per row) multiples it pads to.")
    scale_align: tuple[_Pos, _Pos] = Field(
        (1, 1), description="The kernel's copy of each scale matrix: (rows, scales per row) multiples it pads to.")
    kept_scales: StrictBool = Field(False, description="The loaded scales stay beside the kernel's copy.")
    bias_bytes: Literal[2, 4] | None = Field(
        None, description="Bytes per bias entry, biases padded as the matrices are; null: unpadded, in the card "
                          "dtype (counted with the unquantized parameters).")


class Quantization(BaseModel):
    """How a checkpoint stores its quantized linears; every byte rule lives in kvplan.cost.quant."""

    model_config = _STRICT
    method: QuantMethod = Field(description="fp8 (float8 e4m3 values + fp32 scales), awq or gptq (packed ints).")
    bits: Literal[4, 8] | None = Field(None, description="Bits per weight; null: 8 for fp8. awq: 4; gptq: 4 or 8.")
    weight_scales: Literal["tensor", "channel", "block"] | None = Field(
        None, description="fp8 only: one scale per tensor, per output channel, or per block [n, k].")
    block: tuple[_Pos, _Pos] | None = Field(
        None, description="fp8 block scales: [n, k] output x input elements per scale (weight_block_size).")
    activation_scheme: Literal["dynamic", "static"] = Field(
        "dynamic", description="fp8: static stores one fp32 input_scale per matrix; dynamic none.")
    group_size: StrictInt | None = Field(None, description="awq/gptq: input rows per scale group; -1: one group.")
    desc_act: StrictBool = Field(False, description="gptq act-order: g_idx permuted (vLLM keeps a row-parallel "
                                                    "matrix's scales and zeros whole on every rank).")
    sym: StrictBool | None = Field(None, description="Symmetric; null: the format's default. Both awq and gptq "
                                                     "store qzeros either way, so bytes do not change.")
    scale_dtype: ScaleDType | None = Field(None, description="Scale storage; null: float32 for fp8, float16 else.")
    checkpoint_format: Literal["compressed-tensors"] | None = Field(
        None, description="fp8 only: compressed-tensors where llm-compressor wrote the checkpoint (quant_method "
                          "compressed-tensors: vLLM and SGLang load it with CompressedTensorsConfig, whose model dtypes "
                          "differ from Fp8Config's); null: the method's own format.")
    kernel_layout: Mxfp4Layout | None = Field(
        None, description="mxfp4 as an engine's MoE backend holds the experts after loading (kvplan.cost.quant "
                          "mxfp4_expert_bytes); null: vLLM's Marlin backend. Set by the runtime, not by a checkpoint.")
    unquantized: tuple[QuantizableLinear, ...] = Field(
        (), description="Linears the checkpoint keeps in the card dtype in every layer (modules_to_not_convert, "
                        "ignored_layers); embeddings, lm_head, norms and routers always are.")

    @model_validator(mode="after")
    def _check(self) -> "Quantization":
        method = self.method
        if self.bits is None and method in ("fp8", "mxfp4"):
            object.__setattr__(self, "bits", 8 if method == "fp8" else 4)
        if self.bits not in _BITS[method]:
            raise ValueError(f"quantization.bits: {self.bits} with method {method}; allowed: "
                             f"{', '.join(map(str, _BITS[method]))}")
        if self.scale_dtype is None:
            object.__setattr__(self, "scale_dtype", _DEFAULT_SCALE_DTYPE[method])
        if self.checkpoint_format is not None and method != "fp8":
            raise ValueError("quantization.checkpoint_format: fp8 only (compressed-tensors float8 weights)")
        if method == "fp8":
            self._check_fp8()
        elif method == "mxfp4":
            self._check_mxfp4()
        else:
            self._check_int()
        return self

    def _check_fp8(self) -> None:
        if self.group_size is not None or self.desc_act:
            raise ValueError("quantization.group_size/desc_act: awq and gptq only; fp8 uses weight_scales")
        if self.weight_scales is None:
            object.__setattr__(self, "weight_scales", "block" if self.block else "tensor")
        if (self.weight_scales == "block") != (self.block is not None):
            raise ValueError("quantization.block: required with (and allowed only with) weight_scales block; "
                             "allowed: [n, k], e.g. [128, 128]")

    def _check_mxfp4(self) -> None:
        if self.kernel_layout is not None and self.method != "mxfp4":
            raise ValueError("quantization.kernel_layout: mxfp4 only")
        if (self.weight_scales is not None or self.block is not None or self.desc_act
                or self.group_size not in (None, MXFP4_BLOCK) or self.scale_dtype != "float8_e8m0"):
            raise ValueError(f"quantization: mxfp4 has one float8_e8m0 scale per {MXFP4_BLOCK} values (group_size "
                             f"{MXFP4_BLOCK}); weight_scales, block, desc_act and other scale dtypes do not apply")
        object.__setattr__(self, "group_size", MXFP4_BLOCK)

    def _check_int(self) -> None:
        if self.weight_scales is not None or self.block is not None or self.activation_scheme != "dynamic":
            raise ValueError("quantization.weight_scales/block/activation_scheme: fp8 only; awq and gptq use "
                             "group_size")
        if self.group_size is None or not (self.group_size == -1 or 0 < self.group_size <= 10_000_000):
            raise ValueError(f"quantization.group_size: {self.group_size}; allowed: a positive integer, or -1 "
                             "(one group over the whole input)")
        if self.desc_act and self.method != "gptq":
            raise ValueError("quantization.desc_act: gptq only")

    @property
    def scale_bytes(self) -> int:
        return SCALE_BYTES[self.scale_dtype]

    def quantizes(self, linear: str) -> bool:
        """Whether the checkpoint stores linear ``linear`` (a kvplan.cost.shapes name) quantized."""
        if self.method == "mxfp4" and linear not in _MXFP4_LINEARS:
            return False
        return linear in QUANTIZABLE and linear not in self.unquantized

    @property
    def label(self) -> str:
        """e.g. 'fp8 (block 128x128 scales)', 'awq int4 (group 128)'."""
        if self.method == "fp8":
            scales = f"block {self.block[0]}x{self.block[1]}" if self.block else f"per-{self.weight_scales}"
            return f"fp8 ({scales} scales, {self.activation_scheme} activations)"
        if self.method == "mxfp4":
            return f"mxfp4 (MoE experts: e2m1 values + an e8m0 scale per {MXFP4_BLOCK})"
        group = "per-channel" if self.group_size == -1 else f"group {self.group_size}"
        return f"{self.method} int{self.bits} ({group}{', desc_act' if self.desc_act else ''})"
