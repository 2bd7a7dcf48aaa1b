"""Shrink a card for a cheap measured run while keeping its structure (layer pattern, KV-head grouping, MLA, MoE).

Every change is reported as ``"field: old -> new"`` so a verify result says exactly what was measured.
Rules: head counts are kept (so num_heads / num_kv_heads, the GQA grouping, is unchanged; Mamba-2 heads and groups
too); widths are multiplied by ``scale`` (head widths rounded to an even number >= 4 for RoPE); layers keep one of
each layer type and one dense and one MoE layer; sliding windows and attention chunks are kept below
``seq_len // 2`` so the window actually slides and a new chunk actually starts.
"""

from __future__ import annotations

from kvplan.model.card import ModelCard
from kvplan.model.catalog import card_from_dict
from kvplan.errors import KvplanError


REFERENCE_SSM_KINDS = ("mamba", "mamba2")  # the state mixers reference/ssm.py SSMixer implements


def require_reference_mixer(card: ModelCard) -> None:
    """KvplanError, naming ssm.kind, for a state mixer the reference model does not implement (Gated DeltaNet,
    KDA, short conv, lightning attention, RG-LRU): their params and states are proven against transformers in the
    tests instead."""
    if card.ssm is not None and card.ssm.kind not in REFERENCE_SSM_KINDS:
        raise KvplanError(f"ssm.kind: verify's reference model implements {' and '.join(REFERENCE_SSM_KINDS)} state "
                          f"mixers; {card.name}'s are {card.ssm.kind} (its params and states are proven against "
                          "transformers in the tests instead)")


def _even(x: float, floor: int = 4) -> int:
    return max(floor, 2 * round(x / 2))


def _scaled(x: int, f: float, floor: int = 1) -> int:
    return max(floor, round(x * f))


def min_layers(card: ModelCard) -> int:
    """Fewest layers that keep every layer type of the pattern and, for MoE, a dense and a routed layer."""
    need = len(card.layer_pattern) if card.layer_pattern else 1
    if card.moe and card.moe.first_dense_layers:
        need = max(need, 2)
    return need


def shrink(card: ModelCard, *, layers: int | None = None, scale: float | None = None,
           seq_len: int | None = None) -> tuple[ModelCard, list[str]]:
    """The shrunk card and the list of changes (empty when nothing was asked). A quantized card loses its
    quantization: the reference model runs the architecture in float weights. A multimodal card loses its vision
    block: the reference model is the decoder (the tower's parameters are proven against transformers in
    tests/test_multimodal_hf.py). A state mixer the reference model lacks is refused here (require_reference_mixer),
    before its widths are shrunk."""
    require_reference_mixer(card)
    if layers is None and scale is None and card.quantization is None and card.vision is None:
        return card, []
    data = card.model_dump(exclude_none=True)
    data.pop("quantization", None)
    data.pop("vision", None)
    if "num_kv_heads" not in card.model_fields_set:
        data.pop("num_kv_heads", None)
    if "head_dim" not in card.model_fields_set:
        data.pop("head_dim", None)
    if layers is not None:
        _shrink_layers(card, data, layers)
    if scale is not None:
        if not 0 < scale <= 1:
            raise KvplanError(f"--scale: must be in (0, 1], got {scale}")
        _shrink_widths(card, data, scale, seq_len)
    data["name"] = f"{card.name}-shrunk"
    new = card_from_dict(data, origin=f"{card.name} shrunk")
    return new, _diff(card, new)


def _shrink_layers(card: ModelCard, data: dict, layers: int) -> None:
    if layers < 1:
        raise KvplanError(f"--layers: must be a positive integer, got {layers}")
    n = min(card.num_layers, max(layers, min_layers(card)))
    data["num_layers"] = n
    if card.num_encoder_layers:
        data["num_encoder_layers"] = min(card.num_encoder_layers, n)
    if card.moe and card.moe.first_dense_layers:  # keep >= 1 dense and >= 1 MoE layer
        data["moe"]["first_dense_layers"] = max(1, min(card.moe.first_dense_layers, n - 1))
    if card.moe and card.moe.last_layer is not None:  # the MoE window ends inside the kept layers
        data["moe"]["last_layer"] = max(data["moe"]["first_dense_layers"], min(card.moe.last_layer, n - 1))


def _shrink_widths(card: ModelCard, data: dict, f: float, seq_len: int | None) -> None:
    hd = _even(card.head_dim * f)
    if "head_dim" in card.model_fields_set:  # explicit head_dim (Gemma, Qwen3, T5-11B): scale both independently
        data["head_dim"] = hd
        data["hidden_size"] = _even(card.hidden_size * f)
    else:  # derived head_dim = hidden / heads: keep the derivation exact
        data["hidden_size"] = card.num_heads * hd
    data["ffn_size"] = _scaled(card.ffn_size, f)
    data["vocab_size"] = _scaled(card.vocab_size, f, floor=16)
    if card.position == "learned":
        data["max_position_embeddings"] = max(seq_len or 1, _scaled(card.max_position_embeddings, f))
    if card.sliding_window:
        w = _scaled(card.sliding_window, f)
        data["sliding_window"] = min(w, max(1, (seq_len or w * 2) // 2))
    if card.attention_chunk_size:
        c = _scaled(card.attention_chunk_size, f)
        data["attention_chunk_size"] = min(c, max(1, (seq_len or c * 2) // 2))
    if card.moe:
        m = data["moe"]
        k = card.moe.experts_per_token
        m["num_experts"] = max(min(card.moe.num_experts, k + 1), _scaled(card.moe.num_experts, f))
        m["expert_ffn_size"] = _scaled(card.moe.expert_ffn_size, f)
        if card.moe.shared_expert_ffn_size:
            m["shared_expert_ffn_size"] = _scaled(card.moe.shared_expert_ffn_size, f)
    if card.ssm:
        _shrink_ssm(card, data, f)
    if card.mla:
        m = data["mla"]
        for key in ("kv_lora_rank", "qk_nope_head_dim", "v_head_dim", "q_lora_rank"):
            if m.get(key):
                m[key] = _scaled(m[key], f, floor=2)
        m["qk_rope_head_dim"] = _even(card.mla.qk_rope_head_dim * f, floor=2)


def _shrink_ssm(card: ModelCard, data: dict, f: float) -> None:
    """Mamba widths: d_state and the inner width scaled; Mamba-2 keeps its heads and groups (head_dim scaled, the
    inner width heads x head_dim); derived sizes (dt_rank, an expand-derived inner width) are derived again."""
    s, d = card.ssm, data["ssm"]
    d["d_state"] = _scaled(s.d_state, f, floor=2)
    if s.kind == "mamba2":
        d["head_dim"] = _scaled(s.head_dim, f)
        d["intermediate_size"] = s.num_heads * d["head_dim"]
        return
    if "intermediate_size" in s.model_fields_set:
        d["intermediate_size"] = _scaled(s.intermediate_size, f)
    else:
        d.pop("intermediate_size", None)
    if "dt_rank" in s.model_fields_set:
        d["dt_rank"] = _scaled(s.dt_rank, f)
    else:
        d.pop("dt_rank", None)


def _diff(old: ModelCard, new: ModelCard) -> list[str]:
    """'field: old -> new' for every changed value, nested fields dotted (moe.num_experts)."""
    out: list[str] = []

    def walk(prefix: str, a: dict, b: dict) -> None:
        for key in a:
            if key in ("name", "source", "published_params"):
                continue
            if isinstance(a[key], dict) and isinstance(b.get(key), dict):
                walk(f"{prefix}{key}.", a[key], b[key])
            elif key == "quantization" and a[key]:
                out.append(f"quantization: {old.quantization.label} -> none (the reference model runs float weights)")
            elif key == "vision" and a[key]:
                out.append(f"vision: {old.vision.kind} tower -> none (the reference model is the decoder)")
            elif a[key] != b.get(key):
                out.append(f"{prefix}{key}: {a[key]} -> {b.get(key)}")

    walk("", old.model_dump(), new.model_dump())
    return out
