"""``quantization_config`` of a config.json -> the card's ``quantization:`` block (kvplan.model.quant).

The keys are the ones transformers' quantization configs read (``utils/quantization_config.py``:
``FineGrainedFP8Config`` weight_block_size / activation_scheme / modules_to_not_convert, ``AwqConfig`` bits /
group_size / zero_point / version, ``GPTQConfig`` bits / group_size / desc_act / sym) and vLLM's (``fp8.py``
``ignored_layers``; ``compressed_tensors`` config_groups / ignore). A method kvplan does not size is refused.
"""

from __future__ import annotations

import re
from typing import Any

from kvplan.errors import KvplanError, clip
from kvplan.model.quant import QUANTIZABLE

SUPPORTED = ("awq", "compressed-tensors (float8 weights)", "fp8", "gptq", "mxfp4")
# modules no format quantizes (kvplan counts them in the card dtype anyway): heads, embeddings, routers, norms
_ALWAYS_UNQUANTIZED = re.compile(r"(lm_head|embed\w*|wte|gate|router|shared_expert_gate|\w*norm\w*)$")


def read_quantization(data: dict, origin: str) -> dict | None:
    """The card's quantization block for ``data['quantization_config']``; None when the config has none."""
    qc = data.get("quantization_config")
    if qc is None:
        return None
    if not isinstance(qc, dict):
        raise KvplanError(f"{origin}: quantization_config: {clip(qc)} is not an object")
    method = qc.get("quant_method")
    readers = {"fp8": _fp8, "awq": _awq, "gptq": _gptq, "compressed-tensors": _compressed_tensors,
               "mxfp4": lambda qc, origin: {"method": "mxfp4"}}  # gpt-oss: the experts (Mxfp4Config)
    if method not in readers:
        raise KvplanError(f"{origin}: quantization_config.quant_method {clip(method)} is not supported; supported: "
                          f"{', '.join(SUPPORTED)}")
    block = readers[method](qc, origin)
    skipped = qc.get("modules_to_not_convert") or qc.get("ignored_layers") or qc.get("ignore") or []
    unquantized = _unquantized(skipped, origin)
    return {**block, **({"unquantized": unquantized} if unquantized else {})}


def _fp8(qc: dict, origin: str) -> dict:
    block = qc.get("weight_block_size")
    scheme = _choice(qc.get("activation_scheme", "dynamic"), ("dynamic", "static"), "activation_scheme", origin)
    if block is None:  # vLLM Fp8Config: no weight_block_size -> one weight_scale per tensor
        return {"method": "fp8", "weight_scales": "tensor", "activation_scheme": scheme}
    return {"method": "fp8", "weight_scales": "block", "block": block, "activation_scheme": scheme}


def _awq(qc: dict, origin: str) -> dict:
    version = str(qc.get("version", "gemm")).lower()
    if version != "gemm":  # GEMV / Marlin / IPEX layouts pack differently
        raise KvplanError(f"{origin}: quantization_config.version {clip(version)}: kvplan sizes AWQ's gemm layout; "
                          "supported: gemm")
    zero_point = qc.get("zero_point", True)
    return {"method": "awq", "bits": qc.get("bits", qc.get("w_bit")), "group_size": qc.get("group_size",
            qc.get("q_group_size")), "sym": not zero_point if isinstance(zero_point, bool) else zero_point}


def _gptq(qc: dict, origin: str) -> dict:
    fmt = qc.get("checkpoint_format", "gptq")
    if fmt not in ("gptq", "gptq_v2"):  # gptq_v2 only shifts the stored zero points by one: same tensors
        raise KvplanError(f"{origin}: quantization_config.checkpoint_format {clip(fmt)}; supported: gptq, gptq_v2")
    return {"method": "gptq", "bits": qc.get("bits"), "group_size": qc.get("group_size"),
            "desc_act": qc.get("desc_act", False), "sym": qc.get("sym", True)}


def _compressed_tensors(qc: dict, origin: str) -> dict:
    """One config group of float8 weights (llm-compressor FP8 / FP8_DYNAMIC / FP8_BLOCK schemes)."""
    groups = qc.get("config_groups")
    if not isinstance(groups, dict) or len(groups) != 1:
        raise KvplanError(f"{origin}: quantization_config.config_groups: kvplan sizes one group of float8 weights; "
                          f"supported: {', '.join(SUPPORTED)}")
    group = next(iter(groups.values()))
    w = group.get("weights") if isinstance(group, dict) else None
    if not isinstance(w, dict) or w.get("type") != "float" or w.get("num_bits") != 8:
        raise KvplanError(f"{origin}: compressed-tensors weights {clip(w)}: only 8-bit float weights are sized; "
                          f"supported: {', '.join(SUPPORTED)}")
    strategy = _choice(w.get("strategy"), ("tensor", "channel", "block"), "weights.strategy", origin)
    act = group.get("input_activations")
    scheme = "static" if isinstance(act, dict) and act.get("dynamic") is False else "dynamic"
    out = {"method": "fp8", "weight_scales": strategy, "activation_scheme": scheme,
           "checkpoint_format": "compressed-tensors"}
    return out | ({"block": w.get("block_structure")} if strategy == "block" else {})


def _choice(value: Any, allowed: tuple[str, ...], key: str, origin: str) -> str:
    if value not in allowed:
        raise KvplanError(f"{origin}: quantization_config.{key} {clip(value)}; allowed: {', '.join(allowed)}")
    return value


def _unquantized(entries: Any, origin: str) -> list[str]:
    """Linears named in modules_to_not_convert / ignored_layers / ignore that kvplan would otherwise count
    quantized. An entry for one layer's linear only is refused: the card holds one format for every layer."""
    if not isinstance(entries, list) or not all(isinstance(e, str) for e in entries):
        raise KvplanError(f"{origin}: quantization_config modules to skip: {clip(entries)}; allowed: a list of names")
    names: list[str] = []
    for entry in entries:
        leaf = re.sub(r"[$^\\()*+?\[\]]", "", entry.removeprefix("re:")).split(".")[-1]
        if _ALWAYS_UNQUANTIZED.match(leaf):
            continue
        if leaf in QUANTIZABLE and re.search(r"(^|\.)\d+\.", entry) is None:
            names += [leaf] if leaf not in names else []
        elif leaf in QUANTIZABLE or re.search(r"(^|\.)\d+(\.|$)", entry):
            raise KvplanError(f"{origin}: quantization_config skips {clip(entry)} in some layers only; kvplan sizes "
                              "one format for every layer; allowed: names for all layers (e.g. 'down_proj', "
                              "'lm_head') or routers")
    return names
