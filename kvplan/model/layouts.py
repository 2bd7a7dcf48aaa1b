"""What-if attention layouts of the same model: ``--kv-heads N`` or ``--attention mha|mqa|gqa:G|mla:R``.

``gqa:G`` means G query heads share each K/V head (num_kv_heads = num_heads / G). ``mla:R`` replaces the K/V
projections by DeepSeek's multi-head latent attention with a cached latent of rank R, with DeepSeek-V2's proportions
relative to the card's head_dim (arXiv:2405.04434, section 2.1: qk_nope = v = head_dim, rope key = head_dim / 2,
no query compression); on an MLA card it changes the latent rank only.
"""

from __future__ import annotations

import re

from kvplan.errors import KvplanError
from kvplan.model.card import ModelCard
from kvplan.model.catalog import card_from_dict

_ALLOWED = "mha, mqa, gqa:G (G query heads per KV head), mla:R (a latent of rank R)"
_NUMBER = re.compile(r"^(gqa|mla):([0-9]{1,7})$")  # ASCII digits only ('²' passes str.isdigit)


def parse_attention(spec: str, num_heads: int) -> int:
    """KV heads for 'mha' (all heads), 'mqa' (one), or 'gqa:G' (G query heads share each KV head)."""
    text = spec.strip().lower()
    if text == "mha":
        return num_heads
    if text == "mqa":
        return 1
    m = _NUMBER.match(text)
    if m and m.group(1) == "gqa" and int(m.group(2)) > 0:
        group = int(m.group(2))
        if num_heads % group:
            raise KvplanError(f"--attention: gqa:{group} needs num_heads ({num_heads}) divisible by the group size {group}")
        return num_heads // group
    raise KvplanError(f"--attention: unknown layout {spec[:40]!r}; allowed: {_ALLOWED}")


def with_layout(card: ModelCard, *, kv_heads: int | None = None, attention: str | None = None) -> ModelCard:
    """The same card with another attention layout, revalidated (so 32 heads with 5 KV heads is refused)."""
    if kv_heads is None and attention is None:
        return card
    if kv_heads is not None and attention is not None:
        raise KvplanError("--kv-heads and --attention both set the KV heads; give one of them")
    flag = "--kv-heads" if kv_heads is not None else "--attention"
    if not card.has_kv_cache:
        raise KvplanError(f"{flag}: {card.name} is encoder-only and caches no K/V; layouts apply to models with a KV "
                          "cache")
    if not card.attention_layers:  # a pure state-space model (Mamba, Codestral Mamba): no K/V heads to regroup
        raise KvplanError(f"{flag}: {card.name} has no attention layers (its {card.state_layers} state layers hold "
                          "fixed-size conv and SSM states); layouts apply to models with attention")
    m = _NUMBER.match(attention.strip().lower()) if attention else None
    if m and m.group(1) == "mla":
        return _with_mla(card, int(m.group(2)))
    if card.mla is not None:
        raise KvplanError(f"{flag}: {card.name} uses MLA (one latent per token, no per-head K/V); give mla:R for "
                          "another latent rank")
    if kv_heads is None:
        kv_heads = parse_attention(attention, card.num_heads)
    if kv_heads < 1 or card.num_heads % kv_heads:
        raise KvplanError(f"{flag}: {kv_heads} KV heads do not divide {card.num_heads} query heads; allowed: "
                          + ", ".join(str(d) for d in range(1, card.num_heads + 1) if card.num_heads % d == 0))
    data = card.model_dump(exclude_none=True)
    data["num_kv_heads"] = kv_heads
    return card_from_dict(data, origin=f"{card.name} with {flag}")


def _with_mla(card: ModelCard, rank: int) -> ModelCard:
    if rank < 1:
        raise KvplanError("--attention: mla:R needs a latent rank R >= 1")
    if card.sliding_window or card.architecture != "decoder-only":
        raise KvplanError(f"--attention: mla:{rank} applies to decoder-only cards without sliding windows; "
                          f"{card.name} is {card.architecture}{' with sliding layers' if card.sliding_window else ''}")
    data = card.model_dump(exclude_none=True)
    if card.mla is not None:
        data["mla"]["kv_lora_rank"] = rank
    else:
        d = card.head_dim
        data["mla"] = {"kv_lora_rank": rank, "qk_rope_head_dim": max(2, d // 2), "qk_nope_head_dim": d,
                       "v_head_dim": d}
        data["num_kv_heads"] = card.num_heads  # nominal under MLA
        data.pop("qkv_bias", None), data.pop("out_bias", None)  # MLA's projections carry no biases
        data.pop("qk_norm", None), data.pop("qk_norm_width", None)  # MLA's norms are its latents', not per-head q/k
    return card_from_dict(data, origin=f"{card.name} with --attention mla:{rank}")
