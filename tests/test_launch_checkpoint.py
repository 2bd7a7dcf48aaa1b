"""A plan's launch line loads the checkpoint of the card's source; where that checkpoint holds weights the card does
not plan (a quantized sibling's, a vision tower), the plan says so."""

from __future__ import annotations

import pytest

from kvplan.planning.capacity import plan


def launch_notes(model: str, **kw) -> list[str]:
    return [n for n in plan(model, gpu="H200", max_model_len=8192, **kw).notes if n.startswith("launch:")]


def test_the_bf16_deepseek_card_says_its_repository_holds_the_fp8_weights():
    notes = launch_notes("deepseek-v3", tp=8, pp=2)
    assert len(notes) == 1 and "deepseek-ai/DeepSeek-V3 holds fp8 weights (-m deepseek-v3-fp8" in notes[0]
    assert launch_notes("deepseek-v3-fp8", tp=8) == []


@pytest.mark.parametrize("model, sibling", [("gemma-3-27b", "gemma-3-27b-it"), ("gemma-3-12b", None),
                                            ("qwen3.5-27b", None)])
def test_a_text_decoder_card_of_a_multimodal_checkpoint_names_the_tower_it_leaves_out(model, sibling):
    notes = launch_notes(model)
    assert len(notes) == 1 and "multimodal checkpoint" in notes[0] and "vision encoder" in notes[0]
    assert (f"-m {sibling} counts them" in notes[0]) == (sibling is not None)


@pytest.mark.parametrize("model", ["gemma-3-27b-it", "llama-3.1-8b", "qwen3-8b-awq"])
def test_a_card_that_is_its_checkpoint_gets_no_such_note(model):
    assert launch_notes(model) == []
