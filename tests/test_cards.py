"""The card schema: derivations, explicit values winning, and invariants with field-naming errors."""

import pytest

from kvplan import KvplanError, ModelCard, load_card
from kvplan.model.catalog import card_from_dict

BASE = dict(name="tiny", source="test", num_layers=4, hidden_size=64, num_heads=8, ffn_size=128, gated_ffn=True,
            activation="silu", vocab_size=100, tie_embeddings=False, norm="rmsnorm", position="rope",
            max_position_embeddings=512, dtype="bfloat16")


def make(**kw) -> ModelCard:
    return card_from_dict({**BASE, **kw})


def test_defaults_are_derived():
    card = make()
    assert (card.num_kv_heads, card.head_dim) == (8, 8)
    assert card.derived_fields() == {"num_kv_heads", "head_dim"}
    assert card.attention_kind == "MHA"
    assert make(num_kv_heads=None).derived_fields() == {"num_kv_heads", "head_dim"}


def test_explicit_head_dim_wins():
    card = make(head_dim=32)  # 8 heads x 32 = 256 != hidden 64, as Gemma and T5-11B do
    assert card.head_dim == 32 and "head_dim" not in card.derived_fields()
    gemma = load_card("gemma-2-9b")
    assert gemma.head_dim == 256 and gemma.hidden_size // gemma.num_heads == 224


@pytest.mark.parametrize(("kv", "kind"), [(8, "MHA"), (1, "MQA"), (2, "GQA"), (4, "GQA")])
def test_attention_kind(kv, kind):
    assert make(num_kv_heads=kv).attention_kind == kind


def test_layer_patterns():
    assert make(sliding_window=16).layer_types == ("sliding",) * 4
    assert make(sliding_window=16, layer_pattern=["sliding", "global"]).layer_types == (
        "sliding", "global", "sliding", "global")
    assert make().layer_types == ("global",) * 4
    gemma3 = load_card("gemma-3-27b").layer_types
    assert [i for i, t in enumerate(gemma3) if t == "global"] == list(range(5, 62, 6))


@pytest.mark.parametrize(
    ("change", "field", "allowed"),
    [
        ({"num_kv_heads": 3}, "num_kv_heads", "1, 2, 4, 8"),
        ({"hidden_size": 0}, "hidden_size", "(got 0); allowed: an integer 1..10000000"),
        ({"sliding_window": 0}, "sliding_window", "(got 0); allowed: an integer 1..2147483647"),
        ({"colour": "red"}, "colour", "allowed fields: name, source"),
        ({"norm": "batchnorm"}, "norm", "(got 'batchnorm'); allowed: rmsnorm, layernorm, layernorm_nobias"),
        ({"layer_pattern": ["sliding"]}, "sliding_window", "required"),
        ({"architecture": "encoder-decoder"}, "num_encoder_layers", "required"),
        ({"moe": {"num_experts": 2, "experts_per_token": 3, "expert_ffn_size": 8}}, "moe.experts_per_token", "1..2"),
        ({"mla": {"kv_lora_rank": 8, "qk_rope_head_dim": 4, "qk_nope_head_dim": 8, "v_head_dim": 8, "x": 1}},
         "mla.x", "allowed fields: kv_lora_rank"),
    ],
)
def test_invalid_cards_name_the_field(change, field, allowed):
    with pytest.raises(KvplanError) as err:
        card_from_dict({**BASE, **change}, origin="my.yaml")
    message = str(err.value)
    assert message.startswith(f"my.yaml: {field}:"), message
    assert allowed in message and "\n" not in message


def test_cards_are_frozen():
    card = make()
    from pydantic import ValidationError

    with pytest.raises(ValidationError) as err:
        card.num_layers = 5
    assert err.value.errors()[0]["type"] == "frozen_instance" and card.num_layers == make().num_layers
