"""The Qwen3-VL / Qwen3.5 vision tower in SGLang, release by release (srt/models/qwen3_vl.py
Qwen3VLMoeVisionModel.__init__, read in every PyPI wheel 0.5.3 - 0.5.23; Qwen3-VL is first in 0.5.3, Qwen3.5 in 0.5.9):
0.5.3 - 0.5.6 build transformers' Qwen2_5_VisionRotaryEmbedding (no position cache) and an nn.Embedding position table
(whole on every rank); 0.5.7 builds get_rope(max_position=8192, rotary_dim=head_dim // 2), a cos/sin cache of its
own; 0.5.8 makes the table a VocabParallelEmbedding (split by TP). The decoder's M-RoPE cache is max_position_embeddings
long in every release (MRotaryEmbedding.__init__, 0.4.2 - 0.5.23), so it does not move here.

The card: Qwen3.5-9B's config (tests/data/configs/qwen3.5-9b.json: tower hidden 1152, 16 heads, 2,304 positions) with
the architecture Qwen3VLForConditionalGeneration, so that 0.5.3 - 0.5.8 load it (SGLang's Qwen3.5 takes its tower from
qwen3_vl.py): each boundary moves the weights per GPU by the tower's bytes alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvplan.cost.runtimes.sglang import VERSIONS
from kvplan.model.hf.config import card_from_hf_config
from kvplan.planning.capacity import plan

CONFIG = Path(__file__).resolve().parent / "data/configs/qwen3.5-9b.json"
TOWER_ROPE = 8192 * (1152 // 16 // 2) * 4  # 8,192 positions x rotary_dim 36, float32 on CUDA: 1,179,648 B
HALF_TABLE = 2304 // 2 * 1152 * 2  # TP 2: half the 2,304 x 1,152 table in bfloat16 no longer on each rank: 2,654,208 B


def _per_gpu(engine: str):
    card = card_from_hf_config(CONFIG).model_copy(update={"hf_architecture": "Qwen3VLForConditionalGeneration"})
    return plan(card, gpu="H100-SXM", tp=2, max_model_len=8192, engine=engine, mem_fraction_static=0.8).per_gpu


@pytest.mark.parametrize(("release", "tower_rope", "split"), [
    ("0.4.0", False, False), ("0.5.2", False, False), ("0.5.3", False, False), ("0.5.6", False, False),
    ("0.5.7", True, False), ("0.5.8", True, True), ("0.5.9", True, True), ("0.5.10", True, True),
    ("0.5.23", True, True)])
def test_the_fields_follow_the_first_release(release, tower_rope, split):
    v = next(v for v in VERSIONS if v.covers(tuple(map(int, release.split(".")))))
    assert (v.qwen3_vl_tower_rope, v.qwen3_vl_split_positions) == (tower_rope, split)


def test_each_boundary_moves_the_weights_by_the_tower_bytes():
    a, b, c, d = (_per_gpu(f"sglang=={r}") for r in ("0.5.6", "0.5.7", "0.5.8", "0.5.10"))
    assert TOWER_ROPE == 1_179_648 and HALF_TABLE == 2_654_208
    # 0.5.6 -> 0.5.7: the tower's rotary cache
    assert (b.buffers_bytes - a.buffers_bytes, b.weights_bytes - a.weights_bytes) == (TOWER_ROPE, TOWER_ROPE)
    assert b.params == a.params and a.available_kv_bytes - b.available_kv_bytes == TOWER_ROPE
    # 0.5.7 -> 0.5.8: the table split
    assert (b.params - c.params, b.weights_bytes - c.weights_bytes) == (HALF_TABLE // 2, HALF_TABLE)
    assert c.buffers_bytes == b.buffers_bytes and c.available_kv_bytes - b.available_kv_bytes == HALF_TABLE
    # 0.5.10 (the release the rules were first read in, docs/logs/sglang-code53944457073-...) as 0.5.8
    assert (d.weights_bytes, d.buffers_bytes, d.params) == (c.weights_bytes, c.buffers_bytes, c.params)
    assert d.weights_bytes == 9_480_339_312  # tests/test_qwen35_rope_weights.py's logged-load figure
