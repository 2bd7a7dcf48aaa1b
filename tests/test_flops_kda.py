"""Kimi Delta Attention (Kimi-Linear) FLOPs and tensor-parallel shards.

FLOPs against torch's FlopCounterMode on tiny random-weight Kimi-Linear models (tests/test_state_layers_kimi.py
cases: KDA with MLA attention layers, dense and MoE MLPs), exactly, the whole model and the KDA mixers alone: a prefill
into a fresh cache (``chunk_kimi_delta_attention``: chunks of 64, the prompt padded; one chunk, two, three; a prompt
shorter than the conv kernel, which the cache pads to the kernel) and one decode step (``recurrent_kimi_delta_attention``,
elementwise). Shards after vLLM's KimiDeltaAttention (vllm/model_executor/layers/kda.py), by hand.
"""

from __future__ import annotations

import json
import warnings

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
warnings.filterwarnings("ignore")

from kvplan import count_params, estimate  # noqa: E402
from kvplan.cost.flops import decode_step_flops, prefill_flops  # noqa: E402
from kvplan.cost.kvspec import state_specs  # noqa: E402
from kvplan.cost.ssm import check_state_tp, ssm_params, ssm_rank_params  # noqa: E402
from kvplan.model.dtypes import parse_dtype  # noqa: E402
from kvplan.model.hf.config import card_from_hf_config  # noqa: E402
from kvplan.cost.runtimes import get_engine  # noqa: E402
from cases import KIMI_48B, KIMI_CASES  # noqa: E402
from tiny_models import build_flop_model, measure_state_flops, predicted_state_flops  # noqa: E402

KIMI = {c[0]: c[1:] for c in KIMI_CASES if c[1] == "kimi_linear"}


@pytest.mark.parametrize(("name", "prompt"), [
    ("kimi", 7),  # one chunk of 64, mostly padding
    ("kimi", 130),  # three chunks, the last one of 2 tokens
    ("kimi-edges", 2),  # kernel 3 > prompt 2: update_conv_state pads the conv input to 3
    ("kimi-all-moe", 70),  # two chunks; MoE in every layer
    ("kimi-dense", 64),  # exactly one chunk; dense MLPs
    ("kimi", 1),  # a one-token prompt into a fresh cache: still the chunked path (no recurrent state yet)
])
def test_matches_flop_counter(name, prompt):
    model_type, kwargs = KIMI[name]
    cfg, model = build_flop_model(model_type, kwargs)
    card = card_from_hf_config(cfg.to_dict())
    measured = measure_state_flops(model_type, cfg, model, card, prompt)
    assert measured == predicted_state_flops(card, prompt)
    assert measured[0][1] > 0 and measured[1][1] > 0  # the KDA mixers' own counts, prefill and decode


def _card(name: str):
    model_type, kwargs = KIMI[name]
    return card_from_hf_config(transformers.AutoConfig.for_model(model_type, **kwargs).to_dict())


def test_kernel_engines_by_hand():
    """vLLM / ideal on Kimi tiny (4 KDA layers of 4 heads x 8, I = 32, kernel 4, hidden 64): the conv computes the L
    (decode: 1) outputs it keeps, transformers' torch fallback L + 3 (decode: 2); the scan over chunks of 64 as the
    torch path runs it; decode's recurrence elementwise."""
    card = _card("kimi")
    weights = 3 * 64 * 32 + 64 * 8 + 8 * 32 + 64 * 4 + 64 * 8 + 8 * 32 + 32 * 64  # q/k/v, f_a/f_b, b, g_a/g_b, o
    hf, vllm = (prefill_flops(card, batch=3, prompt_len=600, engine=get_engine(e)) for e in ("hf-dynamic", "vllm"))
    assert vllm.state_projections == hf.state_projections == 4 * 2 * 3 * 600 * weights
    assert vllm.state_conv == 4 * 2 * 3 * 600 * 96 * 4 and hf.state_conv == 4 * 2 * 3 * 603 * 96 * 4
    chunk = 3 * 2 * 64 * 64 * 8 + 3 * 2 * 64 * 8 * 8  # three Q^2 D products, three Q D^2 products per chunk and head
    assert vllm.state_scan == hf.state_scan == 4 * 3 * 4 * 10 * chunk  # 600 tokens: 10 chunks, the last padded
    for engine, outputs in (("vllm", 1), ("ideal", 1), ("hf-dynamic", 2)):
        dec = decode_step_flops(card, batch=2, cache_len=999, engine=get_engine(engine))
        assert (dec.state_projections, dec.state_conv, dec.state_scan) == (
            4 * 2 * 2 * weights, 4 * 2 * 2 * outputs * 96 * 4, 0)


def test_full_size_decode_is_two_flops_per_active_weight():
    """Kaplan et al. 2020 (arXiv:2001.08361): ~2 N FLOPs per token; Kimi-Linear-48B-A3B's decode step at a short
    context is 2 x its active non-embedding weights (2.73B, the model card's "3B activated") within 1%."""
    card = card_from_hf_config(KIMI_48B)
    p = count_params(card)
    dec = decode_step_flops(card, batch=1, cache_len=127, engine=get_engine("vllm"))
    assert dec.total == pytest.approx(2 * (p.active - p.embedding), rel=0.01)
    assert dec.state_mixer > 0 and dec.attention_core > 0


def test_estimate_reports_kda_flops_and_roofline(cli_json, tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(KIMI_48B))
    out = cli_json("estimate", "--hf-config", str(path), "--seq-len", "8192", "--engine", "vllm", "--gpu", "H100-SXM")
    est = estimate(card_from_hf_config(KIMI_48B), seq_len=8192, engine="vllm", gpu="H100-SXM")
    assert out["flops"]["prefill"]["state_mixer"] == est.flops.prefill.state_mixer > 0
    assert out["roofline"]["time_per_output_token_s"] == est.roofline.time_per_output_token_s > 0
    assert not any("not modelled" in n for n in est.notes)


# --- tensor parallelism (vLLM KimiDeltaAttention, layers/kda.py) -------------------------------------------------

def _kda_rank_by_hand(h: int, heads: int, d: int, kernel: int, tp: int) -> int:
    """One rank: q/k/v, f_b, g_b and b column-parallel, f_a and g_a replicated, o_proj row-parallel; the q/k/v
    conv1d split by channels; dt_bias (I) and A_log (H) split; the o_norm (head_dim) replicated."""
    i = heads * d
    return (3 * h * i // tp + h * d + d * i // tp + h * heads // tp + h * d + d * i // tp + i // tp * h
            + 3 * i // tp * kernel + i // tp + heads // tp + d)


@pytest.mark.parametrize("tp", [1, 2, 4])
def test_rank_params_by_hand(tp):
    card = _card("kimi")  # hidden 64, 4 heads x 8, kernel 4
    assert ssm_rank_params(card, tp) == _kda_rank_by_hand(64, 4, 8, 4, tp)
    # every rank holds 1/tp of each split tensor and the whole of f_a, g_a (64 x 8 each) and the o_norm (8)
    assert tp * ssm_rank_params(card, tp) - (tp - 1) * (2 * 64 * 8 + 8) == ssm_params(card)
    assert check_state_tp(card, tp) is None
    # vLLM kda_state_shape: conv divide(3 x I, tp) channels x (kernel - 1); recurrent (H / tp, D, D) in float32
    conv, rec = state_specs(card, parse_dtype("bf16"), False, tp)
    assert (conv.bytes_per_token, rec.bytes_per_token) == (3 * 32 // tp * 3 * 2, 4 // tp * 8 * 8 * 4)


def test_tp_must_divide_the_kda_heads(cli, tmp_path):
    """KimiDeltaAttention: assert num_heads % tp_size == 0 (kimi-edges: 2 KDA heads, 4 MLA heads)."""
    card = _card("kimi-edges")
    assert check_state_tp(card, 2) is None
    assert check_state_tp(card, 4) == "ssm num_heads 2 is not divisible by tensor parallel size 4 (Tensor parallel " \
                                      "world size must divide num heads)"
    path = tmp_path / "config.json"
    model_type, kwargs = KIMI["kimi-edges"]
    path.write_text(transformers.AutoConfig.for_model(model_type, **kwargs).to_json_string())
    code, _, err = cli("plan", "--hf-config", str(path), "--gpu", "H100-SXM", "--max-model-len", "64", "--tp", "4")
    assert code == 2 and "--tp: ssm num_heads 2 is not divisible by tensor parallel size 4" in err, err


def test_cli_plan_tp2_on_kimi_linear_48b(cli_json, tmp_path):
    """Kimi-Linear-48B-A3B on 2 GPUs: each rank holds 20 KDA mixers of the hand-counted size, and per request 20
    state pages of conv 3 x 4096 / 2 channels x 3 inputs in bf16 plus the recurrent 16 x 128 x 128 in float32."""
    from kvplan.cost.parallel import Layout, rank_breakdown

    path = tmp_path / "config.json"
    path.write_text(json.dumps(KIMI_48B))
    out = cli_json("plan", "--hf-config", str(path), "--gpu", "H100-SXM", "--tp", "2", "--max-model-len", "131072",
                   "--concurrency", "8")
    card = card_from_hf_config(KIMI_48B)
    parts = rank_breakdown(card, Layout(tp=2), 0)
    assert parts["ssm"] == 20 * _kda_rank_by_hand(2304, 32, 128, 4, 2) == 20 * 20_052_112
    assert out["per_gpu"]["params"] == sum(parts.values())
    assert out["kv_cache"]["state_page_bytes"] == 3 * 2048 * 3 * 2 + 16 * 128 * 128 * 4
    assert out["kv_cache"]["state_bytes_per_request"] == 20 * out["kv_cache"]["state_page_bytes"]
    assert out["latency"]["tpot_ms"] > 0 and out["latency"]["ttft_ms"] > 0
