"""Parameter counts: exact where the published checkpoint total is known exactly, within 1% elsewhere."""

import pytest

from kvplan import bundled_names, count_params, load_card


@pytest.mark.parametrize(
    ("model", "params"),
    [
        ("llama-2-7b", 6_738_415_616),  # issue #2; safetensors total of meta-llama/Llama-2-7b-hf
        ("mistral-7b-v0.1", 7_241_732_096),  # issue #2
        ("llama-2-13b", 13_015_864_320),
        ("llama-2-70b", 68_976_648_192),
        ("gpt2", 124_439_808),  # GPT2Model / GPT2LMHeadModel (tied head)
        ("t5-base", 222_903_552),  # T5ForConditionalGeneration, tied head
    ],
)
def test_exact_counts(model, params):
    assert count_params(load_card(model)).total == params


def test_every_card_near_its_published_total():
    checked = 0
    for name in bundled_names():
        card = load_card(name)
        if card.published_params is None:
            continue
        total, published = count_params(card).total, card.published_params.value
        assert abs(total - published) <= 0.01 * published, (name, total, published)
        checked += 1
    assert checked >= 20


def test_moe_active_params():
    p = count_params(load_card("mixtral-8x7b"))
    assert p.total > 46e9 and 12e9 < p.active < 13.5e9  # 46.7B total, 12.9B active (Mistral AI)
    p = count_params(load_card("deepseek-v3"))
    assert 36e9 < p.active < 38e9  # 37B activated (DeepSeek-V3 report)
