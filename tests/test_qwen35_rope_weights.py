"""Qwen3.5-9B's weights per GPU at TP 2 under SGLang (docs/logs/sglang-code53944457073-qwen3.5-9b-tp2-rtx4090.log,
main the day after 0.5.10.post1): the parameters split as kvplan.cost.parallel splits them, the position table of
the vision tower split too (SGLang qwen3_vl.py), and the float32 rotary caches of a partial (0.25) rotary width with
an M-RoPE cache of max_position_embeddings (SGLang rotary_embedding/factory.py get_rope, mrope.py MRotaryEmbedding)."""

from __future__ import annotations

from pathlib import Path

from kvplan.cost import serving_sglang as sg
from kvplan.cost.parallel import rope_buffer_bytes, rotary_dim
from kvplan.cost.params import count_params
from kvplan.model.hf.config import card_from_hf_config
from kvplan.planning.capacity.fromlog import from_log
from kvplan.planning.capacity.logparse import GIB

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "tests/data/configs/qwen3.5-9b.json"
LOG = ROOT / "docs/logs/sglang-code53944457073-qwen3.5-9b-tp2-rtx4090.log"


def test_parameters_match_transformers_and_the_checkpoint():
    card = card_from_hf_config(CONFIG)
    # transformers 5.24 Qwen3_5ForConditionalGeneration built from this config on the meta device:
    # sum(p.numel() for p in model.parameters()) = 9,409,813,744 (no MTP layer: transformers does not build it)
    assert count_params(card).total == 9_409_813_744
    # the checkpoint's safetensors total, 19,306,216,416 B, is these in bfloat16 plus the MTP layer (fc 2h x h,
    # three norms, one gated-attention decoder layer: 243,290,624 parameters) plus 7,680 B: 24 Gated DeltaNet layers x
    # (32 A_log + 128 norm) values x 2 B more, as if those two are stored float32 (an inference from the sum)
    mtp = 2 * 4096 * 4096 + 3 * 4096 + (4096 * 8192 + 2 * 4096 * 1024 + 4096 * 4096 + 2 * 256 + 2 * 4096
                                        + 3 * 4096 * 12288)
    assert mtp == 243_290_624
    assert 2 * (count_params(card).total + mtp) + 24 * (32 + 128) * 2 == 19_306_216_416


def test_rotary_caches_partial_width():
    card = card_from_hf_config(CONFIG)
    assert card.partial_rotary_factor == 0.25 and rotary_dim(card) == 64  # int(256 x 0.25)
    # vLLM: M-RoPE 4 x 262,144 positions x 64 in bfloat16
    assert rope_buffer_bytes(card, 2) == 4 * 262_144 * 64 * 2
    # SGLang: 262,144 x 64 and the tower's 8,192 x 36 (head_dim 1152 / 16 = 72, rotary_dim 72 // 2), float32 on CUDA
    assert sg.rope_cache_bytes(sg.rope_buffers_model_dtype(card, 2, True), 2, True) == (262_144 * 64 + 8192 * 36) * 4
    # 0.5.3 - 0.5.6: the tower keeps no rotary cache (SglangVersion.qwen3_vl_tower_rope)
    assert sg.rope_cache_bytes(sg.rope_buffers_model_dtype(card, 2, False), 2, True) == 262_144 * 64 * 4


def test_sglang_weights_fit_the_logged_load_usage():
    r = from_log(LOG)
    weights = r.plan.per_gpu.weights_bytes
    # 4,707,352,504 parameters per rank less half the 2,304 x 1,152 position table (split by SGLang), in bfloat16,
    # plus 68,288,512 B of float32 rotary caches
    assert weights == (4_707_352_504 - 1152 * 1152) * 2 + 68_288_512 == 9_480_339_312
    logged = r.log.figure("load_usage")  # "Load weight end ... mem usage=8.85 GB" (GiB), both ranks
    assert logged.value == 8.85
    # the load allocated 16 - 27 MiB beyond them (8.845 - 8.855 GiB logged): kvplan's weights no longer exceed it
    assert 0 < (8.845 * GIB - weights) < (8.855 * GIB - weights) < 28 * 2**20
