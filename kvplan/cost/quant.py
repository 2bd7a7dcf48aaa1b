"""Exact bytes of a quantized linear as its checkpoint stores it and as one vLLM TP rank loads it.

vLLM loads fp8, AWQ and GPTQ checkpoints without dequantizing: each rank holds its shard of the packed values and
the matching rows or columns of the scales and zero points (``model_executor/layers/quantization``). For a Matrix
``n_in -> n_out`` (torch weight ``[n_out, n_in]``) on a rank holding ``k = n_in / tp`` (row-parallel) or
``n = n_out / tp`` (column-parallel) of it:

- fp8 (``fp8.py`` Fp8LinearMethod; transformers ``FP8Linear``): ``n x k`` float8 bytes; scales fp32: per tensor 1,
  per channel ``n``, per block ``cdiv(n, bn) x cdiv(k, bk)`` (``weight_scale_inv``: a 7168 x 18432 down_proj has
  56 x 144 scales). A TP-split dimension must be a multiple of its block edge (``validate_fp8_block_shape``).
  ``activation_scheme: static`` adds one fp32 ``input_scale``.
- AWQ (AutoAWQ ``WQLinear_GEMM``; vLLM ``awq.py`` AWQLinearMethod): qweight int32 ``[k, n / pack]``, qzeros int32
  ``[k / g, n / pack]``, scales ``[k / g, n]``; pack = 32 / bits, g = group_size (-1: the whole input).
  ``k % g == 0`` and ``n % pack == 0`` (AutoAWQ asserts both; vLLM raises "input size is not aligned").
  On CUDA GPUs of compute capability 8.0+ vLLM serves AWQ as ``awq_marlin`` (AWQMarlinConfig
  .override_quantization_method): process_weights_after_loading repacks qweight to the Marlin tiles
  ``[k / 16, n * 16 / pack]`` int32 and permutes scales ``[k / g, n]`` and qzeros ``[k / g, n / pack]``: the same
  element counts, so these bytes stand (tests/test_logs_vllm_moe.py pins them to the repack shapes and to two public
  logs). Not counted: one int32 workspace of the SM count per linear (marlin_make_workspace_new, <= 1 KiB).
- GPTQ (AutoGPTQ ``QuantLinear``; vLLM ``gptq.py`` GPTQLinearMethod): qweight int32 ``[k / pack, n]``, qzeros int32
  ``[G, n / pack]``, scales ``[G, n]``, g_idx int32 ``[k]``. G = ``k / g``, except on a row-parallel shard with
  ``desc_act`` (act-order scatters groups over the rows, so vLLM keeps all ``n_in / g`` groups on every rank) or
  with g = -1 (one group over the whole input, replicated).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from functools import lru_cache

from kvplan.cost.shapes import Matrix
from kvplan.errors import KvplanError
from kvplan.model.quant import Mxfp4Layout, Quantization
from kvplan.units import cdiv

INT32 = 4
FP32 = 4


@dataclass(frozen=True)
class QuantBytes:
    """Quantized linears, summed: the weight elements they hold and their stored bytes by kind."""

    quantized_elems: int = 0  # weight elements stored quantized (biases stay in the card dtype)
    data: int = 0  # packed values: float8 bytes, AWQ/GPTQ int32 words
    scales: int = 0  # weight scales (+ fp8 static input scales)
    zeros: int = 0  # AWQ/GPTQ packed qzeros
    g_idx: int = 0  # GPTQ per-input-row group index
    bias: int = 0  # biases a kernel holds in a layout of its own (Mxfp4Layout.bias_bytes), counted in quantized_elems

    @property
    def overhead(self) -> int:
        """Scales, zero points and g_idx: what a format adds to the packed values."""
        return self.scales + self.zeros + self.g_idx

    @property
    def stored(self) -> int:
        return self.data + self.overhead + self.bias

    def __add__(self, other: QuantBytes | int) -> QuantBytes:
        if isinstance(other, int) and other == 0:  # sum() starts from 0
            return self
        return QuantBytes(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))

    __radd__ = __add__

    def __mul__(self, n: int) -> QuantBytes:
        return QuantBytes(*(getattr(self, f.name) * n for f in fields(self)))

    __rmul__ = __mul__


def matrix_bytes(q: Quantization, m: Matrix, tp: int = 1, kv_heads: int | None = None,
                 head_dim: int = 0) -> QuantBytes:
    """What one of ``tp`` ranks holds of ``m`` (tp 1: the checkpoint's tensors); zero for a linear the checkpoint
    keeps unquantized (its parameters are then counted in the card dtype)."""
    if not q.quantizes(m.name):
        return QuantBytes()
    s = m.shard(tp, kv_heads, head_dim)
    if q.method == "fp8":
        return _fp8(q, m, s, tp)
    if q.method == "mxfp4":
        return _mxfp4(m, s, q.kernel_layout or MXFP4_MARLIN)
    pack = 32 // q.bits
    group = m.n_in if q.group_size == -1 else q.group_size  # -1: vLLM group_size = input_size (the full input)
    _check_aligned(q, m, s, tp, pack, group)
    groups = s.n_in // group
    if q.method == "awq":
        return QuantBytes(s.elems, s.n_in * (s.n_out // pack) * INT32, groups * s.n_out * q.scale_bytes,
                          groups * (s.n_out // pack) * INT32)
    if s.n_in != m.n_in and (q.desc_act or q.group_size == -1):  # gptq.py: scales/qzeros not split by rows
        groups = m.n_in // group
    return QuantBytes(s.elems, (s.n_in // pack) * s.n_out * INT32, groups * s.n_out * q.scale_bytes,
                      groups * (s.n_out // pack) * INT32, s.n_in * INT32)


def _fp8(q: Quantization, m: Matrix, s: Matrix, tp: int) -> QuantBytes:
    if q.weight_scales == "block":
        bn, bk = q.block
        if tp > 1 and (s.n_out != m.n_out and s.n_out % bn or s.n_in != m.n_in and s.n_in % bk):
            split, edge = ("n_out", bn) if s.n_out != m.n_out else ("n_in", bk)
            raise KvplanError(f"--tp: {m.name} {split} per rank {getattr(s, split)} is not divisible by the fp8 "
                              f"block {edge} (vLLM validate_fp8_block_shape)")
        scales = cdiv(s.n_out, bn) * cdiv(s.n_in, bk)
    else:
        scales = s.n_out if q.weight_scales == "channel" else 1
    static = FP32 if q.activation_scheme == "static" else 0
    return QuantBytes(s.elems, s.elems, scales * q.scale_bytes + static)


# vLLM mxfp4.py Mxfp4MoEMethod.create_weights pads each expert for its kernels; the default is the Marlin backend's
# padding ("The moe marlin kernel requires that for each linear n % 256 == 0 and k % 128 == 0": hidden to 256,
# intermediate per rank to 128), which puts gpt-oss-120b at 65.91 GiB on one GPU where vLLM 0.10.1 on H100 (Marlin)
# logs 65.9651 GiB (docs/logs/vllm-issue23278-gpt-oss-120b-h100.log). A runtime sets Quantization.kernel_layout for
# the backend it picks (vLLM: kvplan.cost.serving_vllm.mxfp4_layout, by release and GPU).
MXFP4_MARLIN = Mxfp4Layout()


def held_card(card, engine, gpu=None):
    """``card`` as ``engine`` holds it on ``gpu`` (None: no GPU named): MXFP4 experts in the runtime's kernel layout
    (``Runtime.mxfp4_layout_on``: vLLM picks its backend by GPU) where the card names none; any other card, or a
    bare cache-rules Engine, unchanged. The estimate's weights row and its roofline's bytes both read this card."""
    q = card.quantization
    on = getattr(engine, "mxfp4_layout_on", None)  # a runtime's; a bare cache-rules Engine has none
    layout = on(gpu) if on is not None else None
    if q is None or q.method != "mxfp4" or q.kernel_layout is not None or layout is None:
        return card
    return _with_layout_cached(card, layout, f"MXFP4 as {engine.name} holds it")


@lru_cache(maxsize=64)
def _with_layout_cached(card, layout: Mxfp4Layout, how: str):
    return with_kernel_layout(card, layout, how)


def with_kernel_layout(card, layout: Mxfp4Layout, how: str):
    """``card`` with its MXFP4 experts as ``layout`` holds them (Quantization.kernel_layout); ``how`` names it in the
    card's origin."""
    from kvplan.model.catalog import card_from_dict

    data = card.model_dump(exclude_none=True)
    data["quantization"] = {**data["quantization"], "kernel_layout": layout.model_dump()}
    return card_from_dict(data, origin=f"{card.name} ({how})")


def mxfp4_expert_bytes(layout: Mxfp4Layout, hidden: int, intermediate: int) -> QuantBytes:
    """One MXFP4 expert on one rank (``intermediate``: its size per rank) as ``layout`` holds it after loading:
    create_weights' w13 [2 I_p, H_p / 2] and w2 [H_p, I_p / 2] uint8 values, w13_weight_scale [2 I_p, H_p / 32] and
    w2_weight_scale [H_p, I_p / 32] e8m0 bytes, w13_bias [2 I_p] and w2_bias [H_p] (I_p, H_p: rounded up to the
    layout's pads). A kernel that re-lays them out (vLLM's Triton backend, _swizzle_mxfp4) holds its copy of each
    matrix padded to ``value_align`` / ``scale_align`` (rows, columns) instead, plus the loaded scales where it keeps
    them; quantized_elems: the unpadded weights (and biases, when the layout holds them: ``bias_bytes``)."""
    w13, w2 = _mxfp4_tensors(layout, hidden, intermediate)
    biases = 2 * intermediate + hidden if layout.bias_bytes is not None else 0
    return w13 + w2 + QuantBytes(3 * hidden * intermediate + biases)


def _mxfp4_tensors(layout: Mxfp4Layout, hidden: int, intermediate: int) -> tuple[QuantBytes, QuantBytes]:
    """The bytes (no elements) of one expert's w13 (gate and up, one fused tensor) and w2 with their biases."""
    from kvplan.model.quant import MXFP4_BLOCK

    h, i = _round_up(hidden, layout.hidden_pad), _round_up(intermediate, layout.intermediate_pad)
    (vr, vc), (sr, sc) = layout.value_align, layout.scale_align
    out = []
    for n_out, n_in in ((2 * i, h), (h, i)):
        values = _round_up(n_out, vr) * _round_up(n_in // 2, vc)
        scales = _round_up(n_out, sr) * _round_up(n_in // MXFP4_BLOCK, sc)
        kept = n_out * (n_in // MXFP4_BLOCK) if layout.kept_scales else 0
        out.append(QuantBytes(0, values, scales + kept, bias=n_out * (layout.bias_bytes or 0)))
    return out[0], out[1]


def _mxfp4(m: Matrix, s: Matrix, layout: Mxfp4Layout) -> QuantBytes:
    """An expert's gate, up or down matrix on one rank: gate_proj (hidden -> intermediate) carries the bytes of w13,
    the fused gate and up tensor of mxfp4_expert_bytes, down_proj those of w2; each its own elements."""
    elems = QuantBytes(s.elems + (s.n_out if s.bias and layout.bias_bytes is not None else 0))
    if m.name == "up_proj":
        return elems
    hidden, inter = (s.n_in, s.n_out) if m.name == "gate_proj" else (s.n_out, s.n_in)
    return elems + _mxfp4_tensors(layout, hidden, inter)[m.name != "gate_proj"]


def _round_up(n: int, multiple: int) -> int:
    return cdiv(n, multiple) * multiple


def _check_aligned(q: Quantization, m: Matrix, s: Matrix, tp: int, pack: int, group: int) -> None:
    """AutoAWQ/AutoGPTQ assert these when packing; vLLM raises 'The input size is not aligned with the quantized
    weight shape. This can be caused by too large tensor parallel size.' (GPTQ tests ``k % group_size`` with the
    configured -1, which always holds.)"""
    where = f" on each of {tp} ranks" if tp > 1 else ""
    if s.n_in % group and not (q.method == "gptq" and q.group_size == -1):
        raise KvplanError(f"{m.name}: {s.n_in} input rows{where} are not a multiple of {q.method} group_size "
                          f"{group}" + (" (vLLM: too large tensor parallel size)" if tp > 1 else ""))
    packed = [("outputs", s.n_out)] + ([("input rows", s.n_in)] if q.method == "gptq" else [])
    for what, size in packed:
        if size % pack:
            raise KvplanError(f"{m.name}: {size} {what}{where} do not pack into int32 ({pack} {q.bits}-bit values "
                              "per int32)")


# ---- the model dtype a quantized checkpoint's kernel takes ----------------------------------------------------------

@dataclass(frozen=True)
class QuantKernel:
    """The quantization method a server runs a quantized checkpoint with on one GPU and release, as far as the model
    dtype (``--dtype``, the activations') goes. vLLM and SGLang check it at load: VllmConfig._get_quantization_config
    (vLLM config/vllm.py 0.14.0 - 0.33.0; config.py in 0.9.1) and SGLang model_loader/loader.py
    _get_quantization_config (0.4.8 - 0.5.23) raise "{dtype} is not supported for quantization method {name}.
    Supported dtypes: [...]" unless ``model_config.dtype in quant_config.get_supported_act_dtypes()``, and "The
    quantization method {name} is not supported for the current GPU. Minimum capability: ..." below
    ``get_min_capability()``."""

    name: str  # as the engine names the method it picked (model_config.quantization): awq_marlin, awq, auto_awq
    dtypes: tuple[str, ...]  # kvplan names of the model dtypes get_supported_act_dtypes accepts, the default first
    source: str  # where the rule was read: the file and config class, the releases
    min_capability: float | None = None  # get_min_capability / 10 (NVIDIA compute capability); None: not checked
    why: str = ""  # why the engine picks this method here (where it is not its fastest)
    refused: str = ""  # why the engine refuses the method on this platform at all ("": it does not)


MARLIN_GROUP_SIZES = (-1, 32, 64, 128)  # marlin_utils.py MARLIN_SUPPORTED_GROUP_SIZES (vLLM 0.9.1 - 0.23.0, SGLang
# 0.4.10 - 0.5.23)


def awq_marlin_compatible(q: Quantization) -> bool:
    """AWQMarlinConfig.is_awq_marlin_compatible's checkpoint half (vLLM awq_marlin.py 0.9.1 - 0.23.0, SGLang awq.py
    0.4.10 - 0.5.23): 4-bit with zero points (query_marlin_supported_quant_types(has_zp=True) is [uint4] only) and a
    group size Marlin supports; the platform half is each engine's (the GPU and release)."""
    return q.method == "awq" and q.bits == 4 and q.sym is not True and q.group_size in MARLIN_GROUP_SIZES


def gptq_marlin_compatible(q: Quantization) -> bool:
    """GPTQMarlinConfig.is_gptq_marlin_compatible's checkpoint half (vLLM gptq_marlin.py 0.9.1 - 0.21.0, SGLang
    gptq.py 0.4.8 - 0.5.12, gptq/gptq.py 0.5.13 - 0.5.23): TYPE_MAP holds (4, True) and (8, True) only (symmetric:
    uint4b8, uint8b128, query_marlin_supported_quant_types(has_zp=False)) and a group size Marlin supports; act order
    (desc_act) either way. ``sym`` null is GPTQ's default, symmetric (kvplan.model.hf.quant reads a missing one so)."""
    return q.method == "gptq" and q.bits in (4, 8) and q.sym is not False and q.group_size in MARLIN_GROUP_SIZES


MARLIN_COMPATIBLE = {"awq": awq_marlin_compatible, "gptq": gptq_marlin_compatible}  # per method: the Marlin twin's
# checkpoint check (AWQMarlinConfig / GPTQMarlinConfig override_quantization_method)


@dataclass(frozen=True)
class IntMethods:
    """A packed-int checkpoint format's methods in one engine (vLLM's ModelConfig._verify_quantization, SGLang's
    configs/model_config.py _verify_quantization: each method's override_quantization_method in order): from
    ``auto_first`` the one config every name maps to; before it the Marlin twin where its override takes the
    checkpoint (MARLIN_COMPATIBLE) on the platform, else the plain config. The twins and the auto configs take
    [torch.half, torch.bfloat16], the plain ones [torch.half] (get_supported_act_dtypes), off Ascend / CPU / XPU."""

    fmt: str  # AWQ, GPTQ
    plain: str  # the plain config's name and where it was read
    plain_source: str
    marlin: str
    marlin_source: str
    marlin_first: tuple[int, ...]  # the first release with the Marlin twin taking bfloat16
    marlin_rocm_first: tuple[int, ...] | None  # from which release the twin runs on ROCm; None: never (before auto)
    min_capability: float  # get_min_capability / 10 of the plain and auto configs (the twin's is met where picked)
    checkpoint: str  # which checkpoints the twin takes, for a note
    auto: str = ""
    auto_source: str = ""
    auto_first: tuple[int, ...] | None = None  # None: no auto config in the releases read


def pick_int_method(m: IntMethods, release: tuple[int, ...], vendor: str, compute_capability: float | None,
                    q: Quantization, marlin_cc: float) -> QuantKernel | None:
    """The config ``m``'s engine builds for checkpoint ``q`` in ``release`` on a GPU of ``vendor``: None where kvplan
    has not read it (vendors but NVIDIA and AMD). ``marlin_cc``: the compute capability below which the release's
    marlin_utils.py query_marlin_supported_quant_types returns [] on CUDA (ROCm reports gfx versions, 9.4 for an
    MI300X, above every threshold, so only the platform check of is_*_marlin_compatible counts there)."""
    nvidia, amd = vendor.lower() == "nvidia", vendor.lower() == "amd"
    if not (nvidia or amd):
        return None
    min_cc = m.min_capability if nvidia else None
    if m.auto_first is not None and release >= m.auto_first:
        return QuantKernel(m.auto, ("fp16", "bf16"), m.auto_source, min_cc)
    rocm = m.marlin_rocm_first is not None and release >= m.marlin_rocm_first
    platform = nvidia and compute_capability is not None and compute_capability >= marlin_cc or amd and rocm
    if release >= m.marlin_first and platform and MARLIN_COMPATIBLE[q.method](q):
        return QuantKernel(m.marlin, ("fp16", "bf16"), m.marlin_source, min_cc)
    twin = f"{m.fmt}-Marlin"
    if release < m.marlin_first:
        why = f"no {twin} before {'.'.join(map(str, m.marlin_first))}"
    elif amd and not platform:
        until = m.marlin_rocm_first or m.auto_first
        why = (f"{twin} runs on CUDA only" + (f" before {'.'.join(map(str, until))}" if until else "")
               + f": is_{q.method}_marlin_compatible asks the platform")
    elif not platform:
        why = f"{twin} needs compute capability {marlin_cc}+" + (" in this release" if m.auto_first else "")
    else:
        why = f"{twin} takes {m.checkpoint} only"
    return QuantKernel(m.plain, ("fp16",), m.plain_source, min_cc, why)


def pick_kernel(kernels, release: tuple[int, ...], vendor: str, compute_capability: float | None,
                q: Quantization) -> QuantKernel | None:
    """The method an engine ``release`` runs checkpoint quantization ``q`` with, as far as the model dtype goes, from
    that engine's table of pickers by method (serving_vllm.QUANT_KERNELS, serving_sglang.QUANT_KERNELS); None where
    kvplan has no rule read (mxfp4)."""
    pick = kernels.get(q.method)
    return None if pick is None else pick(release, vendor, compute_capability, q)
