"""What-if attention layouts of the same model: ``--kv-heads N`` or ``--attention mha|mqa|gqa:G``."""

from __future__ import annotations

from kvplan.model.card import ModelCard
from kvplan.model.catalog import card_from_dict
from kvplan.errors import KvplanError


def parse_attention(spec: str, num_heads: int) -> int:
    """KV heads for 'mha' (all heads), 'mqa' (one), or 'gqa:G' (G query heads share each KV head)."""
    text = spec.strip().lower()
    if text == "mha":
        return num_heads
    if text == "mqa":
        return 1
    if text.startswith("gqa:") and text[4:].isdigit() and int(text[4:]) > 0:
        group = int(text[4:])
        if num_heads % group:
            raise KvplanError(f"--attention: gqa:{group} needs num_heads ({num_heads}) divisible by the group size {group}")
        return num_heads // group
    raise KvplanError(f"--attention: unknown layout {spec!r}; allowed: mha, mqa, gqa:G (G query heads per KV head)")


def with_layout(card: ModelCard, *, kv_heads: int | None = None, attention: str | None = None) -> ModelCard:
    """The same card with another number of KV heads, revalidated (so 32 heads with 5 KV heads is refused)."""
    if kv_heads is None and attention is None:
        return card
    if kv_heads is not None and attention is not None:
        raise KvplanError("--kv-heads and --attention both set the KV heads; give one of them")
    flag = "--kv-heads" if kv_heads is not None else "--attention"
    if card.mla is not None:
        raise KvplanError(f"{flag}: {card.name} uses MLA (one latent per token, no per-head K/V); K/V-head layouts "
                          "apply to MHA, GQA and MQA cards")
    if kv_heads is None:
        kv_heads = parse_attention(attention, card.num_heads)
    if kv_heads < 1 or card.num_heads % kv_heads:
        raise KvplanError(f"{flag}: {kv_heads} KV heads do not divide {card.num_heads} query heads; allowed: "
                          + ", ".join(str(d) for d in range(1, card.num_heads + 1) if card.num_heads % d == 0))
    data = card.model_dump(exclude_none=True)
    data["num_kv_heads"] = kv_heads
    return card_from_dict(data, origin=f"{card.name} with {flag}")
