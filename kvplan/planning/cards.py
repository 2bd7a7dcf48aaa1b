"""One-card summaries for `kvplan cards list` and `kvplan cards show`: derived values, never stored in the card."""

from __future__ import annotations

from collections import Counter

from kvplan.cost.runtimes import get_engine
from kvplan.cost.kvspec import kv_bytes_per_token, layer_specs
from kvplan.cost.params import count_params
from kvplan.model.card import ModelCard
from kvplan.model.dtypes import parse_dtype


def card_kv_bytes_per_token(card: ModelCard, kv_dtype: str | None = None) -> int:
    """Self-attention KV bytes one more token adds to one sequence (ideal engine), at the card's dtype by default."""
    ideal = get_engine("ideal")
    dtype = parse_dtype(kv_dtype or ideal.default_dtype(card.dtype)[0])
    return kv_bytes_per_token(layer_specs(card, dtype, ideal))


def derived_values(card: ModelCard) -> dict:
    """What the card implies: attention kind, head geometry, layer kinds, exact parameter counts, KV per token."""
    p = count_params(card)
    out = {"attention": card.attention_label}
    for field in sorted(card.derived_fields()):
        out[field] = f"{getattr(card, field)} (derived)"
    if card.has_kv_cache:
        out["layer_types"] = ", ".join(f"{n} {t}" for t, n in Counter(card.layer_types).items())
        out["kv_bytes_per_token"] = card_kv_bytes_per_token(card)
    out["params"] = p.total
    if p.active != p.total:
        out["active_params"] = p.active
    if card.published_params:
        dev = (p.total - card.published_params.value) / card.published_params.value
        out["published_params"] = f"{card.published_params.value} ({dev:+.2%} from the derived count)"
    return out


def card_row(card: ModelCard) -> dict:
    """One row of `kvplan cards list`."""
    return {"name": card.name, "architecture": card.architecture, "attention": card.attention_kind,
            "layers": card.num_layers, "params": count_params(card).total,
            "kv_bytes_per_token": card_kv_bytes_per_token(card) if card.has_kv_cache else 0,
            "max_position_embeddings": card.max_position_embeddings, "dtype": card.dtype}
