"""The checkpoint cross-check: the bytes of a Hub checkpoint's tensors beside kvplan's own weight bytes.

kvplan's side is the card's weights as the checkpoint stores them (the card's dtype, its quantization), so a
``--weight-dtype`` or an engine's serving dtype does not enter. The difference is explained, tensor by tensor from
the safetensors headers, where kvplan knows why a checkpoint holds more (or other) bytes than the model's parameters:

- ``lm_head.weight`` stored although ``tie_word_embeddings`` ties it to the input embedding (transformers'
  ``tie_weights`` makes them one tensor at load, so it is held once);
- layers past the card's ``num_layers`` and ``mtp.*``: multi-token-prediction modules (DeepSeek-V3
  ``num_nextn_predict_layers``, Qwen3-Next, GLM-4.5) that vLLM loads only for speculative decoding;
- vision and audio towers and projectors of a multimodal checkpoint whose card has no ``vision`` block (kvplan
  sizes its text decoder; a card with one counts its tower, kvplan.cost.vision);
- buffers saved beside the parameters (rotary ``inv_freq``, GPT-2's ``attn.bias`` mask; the routers'
  ``e_score_correction_bias``, an ``nn.Buffer`` in transformers 5.24 ``modeling_deepseek_v3.py:131``,
  ``modeling_glm4_moe.py:280``, ``modeling_nemotron_h.py:770``, ``modeling_kimi_linear.py:730``, not ERNIE-4.5's
  ``moe_statics`` parameter of that name; LFM2-MoE's ``feed_forward.expert_bias``, ``modeling_lfm2_moe.py:205``;
  MiniMax's lightning
  attention ``slope_rate`` / ``query_decay`` / ``key_decay`` / ``diagonal_decay``, ``modeling_minimax.py:144-147``),
  counted whole (tests/test_checkpoint_buffers.py: every persistent buffer of the families kvplan reads);
- quantization side tensors (``*_scale``, ``*.qzeros``, ``*.g_idx``) of a card without quantization;
- tensors stored in another dtype than the card's (fp32 norms or routers in a bf16 checkpoint): exactly
  ``nbytes - numel x card dtype bytes`` each.

What remains is a warning naming the checkpoint's tensors that would account for it.
"""

from __future__ import annotations

import re
from collections import defaultdict
from itertools import combinations

from kvplan.model.card import ModelCard
from kvplan.model.dtypes import parse_dtype
from kvplan.model.hf.checkpoint import Checkpoint, Tensor
from kvplan.planning.results import CheckpointCheck, CheckpointPart
from kvplan.units import fmt_bytes, fmt_int

_LAYER = re.compile(r"(?:^|\.)layers\.(\d+)\.")
_VISION = ("vision_tower", "vision_model", "visual.", "vision_encoder", "multi_modal_projector", "mm_projector",
           "image_newline", "audio_tower", "audio_model", "embed_vision", "embed_audio")
_BUFFERS = re.compile(r"(rotary_emb\.inv_freq|\.attn\.bias|\.attn\.masked_bias|\.position_ids"
                      r"|\.gate\.e_score_correction_bias|\.feed_forward\.expert_bias|\.self_attn\.(?:slope_rate|query_decay|key_decay|diagonal_decay))$")
_QUANT_SIDE = re.compile(r"(_scale|_scale_inv|\.scales|\.qzeros|\.g_idx|\.absmax)$")
_REASONS = {
    "tied": "lm_head.weight stored, though tie_word_embeddings ties it to the input embedding (held once)",
    "mtp": "multi-token-prediction layers past the card's layers (loaded only for speculative decoding)",
    "vision": "vision/audio tower and projector (kvplan sizes the text decoder)",
    "buffers": "buffers saved with the weights (rotary inv_freq, attention masks, router score biases), not "
               "parameters",
    "quant": "quantization scales and zero-points the card does not model",
}


def checkpoint_check(card: ModelCard, ckpt: Checkpoint, kvplan_bytes: int) -> CheckpointCheck | None:
    """Compare; None when the checkpoint's size is unknown (no headers read and no index)."""
    total = ckpt.total_bytes
    if total is None:
        return None
    parts = _explain(card, ckpt.tensors)
    unexplained = total - kvplan_bytes - sum(p.bytes for p in parts)
    warning = None if unexplained == 0 else _warning(card, ckpt, unexplained, parts)
    return CheckpointCheck(repo=ckpt.repo, commit=ckpt.commit,
                           read_from="safetensors headers" if ckpt.tensors else f"{_INDEX} metadata.total_size",
                           bytes=total, index_total_bytes=ckpt.index_total_bytes, tensors=len(ckpt.tensors),
                           kvplan_bytes=kvplan_bytes, difference_bytes=total - kvplan_bytes, explained=parts,
                           unexplained_bytes=unexplained, warning=warning)


_INDEX = "model.safetensors.index.json"


def _kind(card: ModelCard, t: Tensor) -> str | None:
    if card.vision is None and any(v in t.name for v in _VISION):  # a card with a tower counts it
        return "vision"
    m = _LAYER.search(t.name)
    if card.architecture == "decoder-only" and (t.name.startswith("mtp.") or (m and int(m[1]) >= card.num_layers)):
        return "mtp"
    if card.tie_embeddings and t.name in ("lm_head.weight", "model.lm_head.weight"):
        return "tied"
    if _BUFFERS.search(t.name):
        return "buffers"
    if card.quantization is None and _QUANT_SIDE.search(t.name):
        return "quant"
    return None


def _explain(card: ModelCard, tensors: tuple[Tensor, ...]) -> list[CheckpointPart]:
    groups: dict[str, list[Tensor]] = defaultdict(list)
    for t in tensors:
        groups[_kind(card, t) or "rest"].append(t)
    parts = [_part(_REASONS[k], sum(t.nbytes for t in ts), ts) for k, ts in groups.items() if k != "rest"]
    if card.quantization is None:  # a quantized card's packed tensors are compared whole
        dtype = parse_dtype(card.dtype)
        by_dtype: dict[str, list[Tensor]] = defaultdict(list)
        for t in groups.get("rest", ()):
            if t.nbytes != dtype.data_bytes(t.numel):
                by_dtype[t.dtype].append(t)
        parts += [_part(f"tensors stored in {d}, not {card.dtype}", sum(t.nbytes - dtype.data_bytes(t.numel)
                                                                      for t in ts), ts)
                  for d, ts in sorted(by_dtype.items())]
    return parts


def _part(reason: str, nbytes: int, tensors: list[Tensor]) -> CheckpointPart:
    return CheckpointPart(reason=reason, bytes=nbytes, tensors=len(tensors),
                          names=sorted({pattern(t.name) for t in tensors})[:5])


def pattern(name: str) -> str:
    """A tensor name with its layer (and expert) numbers as ``*``: model.layers.*.mlp.experts.*.up_proj.weight."""
    return re.sub(r"(?<=\.)\d+(?=\.)", "*", name)


def _warning(card: ModelCard, ckpt: Checkpoint, unexplained: int, parts: list[CheckpointPart]) -> str:
    side = (f"the checkpoint holds {fmt_int(unexplained)} B more than kvplan counts" if unexplained > 0 else
            f"kvplan counts {fmt_int(-unexplained)} B more than the checkpoint holds")
    head = f"checkpoint {ckpt.repo}: {side} for {card.name}, and cannot say why"
    if not ckpt.tensors:
        return f"{head} (only the index's total_size was read: its tensors' headers are not cached)"
    groups: dict[str, int] = defaultdict(int)  # the unexplained tensors by name pattern, in the card's terms
    for t in (t for t in ckpt.tensors if _kind(card, t) is None):
        groups[pattern(t.name)] += parse_dtype(card.dtype).data_bytes(t.numel) if not card.quantization else t.nbytes
    named = _matching(groups, abs(unexplained))
    how = "exactly the size of" if named else "nearest in size"
    named = named or sorted(groups, key=lambda g: abs(groups[g] - abs(unexplained)))[:3]
    return f"{head}; tensors {how}: " + ", ".join(f"{g} ({fmt_bytes(groups[g])})" for g in named)


def _matching(groups: dict[str, int], target: int) -> list[str]:
    """One or two tensor groups whose bytes add up to ``target`` exactly (the likeliest culprits), else none."""
    names = sorted(groups)
    for n in (1, 2):
        if n == 2 and len(names) > 400:  # pairs of a few hundred groups at most: milliseconds
            break
        for combo in combinations(names, n):
            if sum(groups[g] for g in combo) == target:
                return list(combo)
    return []
