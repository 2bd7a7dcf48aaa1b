"""FLOPs, decode traffic, roofline and sweep rows of cards with state layers (kvplan.cost.ssm_flops).

Against torch's FlopCounterMode on tiny random-weight transformers models of every state-layer family (the cases of
tests/test_state_layers*.py), exactly: a prefill of P tokens into a fresh cache and one decode step on it, the whole
model (hf-dynamic: logits at every prompt position) and the state mixers alone (their modules' counts). Without the
mamba_ssm / causal_conv1d / fla kernels transformers runs its torch reference paths on CPU: matmuls, einsums (bmm)
and the depthwise conv1d are counted; elementwise state updates count 0.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from kvplan import estimate, sweep  # noqa: E402
from kvplan.cost.flops import decode_step_flops, prefill_flops  # noqa: E402
from kvplan.cost.params import count_params  # noqa: E402
from kvplan.model.hf.config import card_from_hf_config  # noqa: E402
from kvplan.cost.runtimes import get_engine  # noqa: E402
from cases import HYBRID_CASES, JAMBA_V01, QWEN3_NEXT_80B, STATE_CASES  # noqa: E402
from tiny_models import FLOP_BATCH, build_flop_model, measure_state_flops, predicted_state_flops  # noqa: E402

CASES = {c[0]: c[1:] for c in STATE_CASES + HYBRID_CASES}
P = 7


@pytest.mark.parametrize("name", list(CASES))
def test_matches_flop_counter(name):
    model_type, kwargs = CASES[name]
    cfg, model = build_flop_model(model_type, kwargs)
    card = card_from_hf_config(cfg.to_dict())
    assert measure_state_flops(model_type, cfg, model, card, P) == predicted_state_flops(card, P)


@pytest.mark.parametrize(("name", "prompt", "chunk"), [
    ("mamba2", 11, 4),  # SSD over 3 chunks of 4, the last padded; 4 x 4 chunk-decay contraction
    ("nemotron_h", 9, 2),
    ("qwen3-next-dense-bias", 70, None),  # Gated DeltaNet: 2 chunks of 64, the second padded
    ("minimax", 11, 4),  # lightning: blocks of 4, the last one of 3 tokens
])
def test_chunked_scans_match_flop_counter(name, prompt, chunk):
    model_type, kwargs = CASES[name]
    key = {"mamba2": "chunk_size", "nemotron_h": "chunk_size", "minimax": "block_size"}.get(model_type)
    cfg, model = build_flop_model(model_type, dict(kwargs, **{key: chunk}) if key else kwargs)
    card = card_from_hf_config(cfg.to_dict())
    if chunk and card.ssm.chunk_size != chunk:  # the MiniMax reader keeps the default 256 = block_size's default
        card = card.model_copy(update={"ssm": card.ssm.model_copy(update={"chunk_size": chunk})})
    assert measure_state_flops(model_type, cfg, model, card, prompt) == predicted_state_flops(card, prompt)


@pytest.mark.parametrize(("name", "prompt"), [
    ("mamba", 2), ("mamba2", 1), ("nemotron_h", 2), ("jamba", 1), ("qwen3-next", 2), ("lfm2", 1), ("minimax", 1)])
def test_prompts_shorter_than_the_conv_kernel_match_flop_counter(name, prompt):
    """A prompt shorter than d_conv: LinearAttentionLayer.update_conv_state left-pads the conv input to d_conv
    inputs, so the torch conv computes 2 d_conv - 1 outputs (RecurrentGemma, its states on its modules, does not:
    test_recurrent_gemma_conv_paths_match_flop_counter)."""
    model_type, kwargs = CASES[name]
    cfg, model = build_flop_model(model_type, kwargs)
    card = card_from_hf_config(cfg.to_dict())
    assert measure_state_flops(model_type, cfg, model, card, prompt) == predicted_state_flops(card, prompt)


LRU_WIDE_CONV_STATE = ("transformers 5.23 RecurrentGemmaRecurrentBlock zero-fills conv1d_state with hidden_size "
                       "channels, so its 1-token (decode-path) prefill cannot cat lru_width 96 != hidden 64 onto it")


@pytest.mark.parametrize(("name", "prompt"), [
    ("recurrent-gemma", 1), ("recurrent-gemma", 2), ("recurrent-gemma", 7),
    pytest.param("recurrent-gemma-lru-bias", 1, marks=pytest.mark.skip(reason=LRU_WIDE_CONV_STATE)),
    ("recurrent-gemma-lru-bias", 2), ("recurrent-gemma-lru-bias", 7)])
def test_recurrent_gemma_conv_paths_match_flop_counter(name, prompt):
    """RecurrentGemmaRecurrentBlock branches on position_ids.shape[1] != 1: a prefill of 1 token runs the decode
    path's elementwise torch.sum(conv_state * weight) (0 conv FLOPs), longer ones the padded nn.Conv1d (L + d_conv - 1
    outputs per channel). Tiny: 2 recurrent layers of 64 channels, conv width 4, so a 1-token prefill as a conv would
    be 2 x B 2 x 4 outputs x 64 x 4 x 2 layers = 8,192 FLOPs more."""
    model_type, kwargs = CASES[name]
    cfg, model = build_flop_model(model_type, kwargs)
    card = card_from_hf_config(cfg.to_dict())
    measured = measure_state_flops(model_type, cfg, model, card, prompt)
    assert measured == predicted_state_flops(card, prompt)
    conv = prefill_flops(card, batch=FLOP_BATCH, prompt_len=prompt, engine=get_engine("hf-dynamic")).state_conv
    assert conv == (0 if prompt == 1 else 2 * FLOP_BATCH * (prompt + card.ssm.d_conv - 1) * card.ssm.conv_dim
                    * card.ssm.d_conv * sum(card.mixer(i) == "mamba" for i in range(card.num_layers)))


def _card(name):
    model_type, kwargs = CASES[name]
    return card_from_hf_config(transformers.AutoConfig.for_model(model_type, **kwargs).to_dict())


def test_kernel_engines_by_hand():
    """vLLM / ideal: the conv computes the L (decode: 1) outputs it keeps; SSD passes states between chunks
    elementwise; the rest as transformers runs it. Mamba-2 tiny: 2 layers, 8 heads x 16, d_state 8, conv 160 x 4."""
    card = _card("mamba2")
    hf, vllm = (prefill_flops(card, batch=3, prompt_len=600, engine=get_engine(e)) for e in ("hf-dynamic", "vllm"))
    assert hf.state_conv == 2 * 2 * 3 * (600 + 3) * 160 * 4 and vllm.state_conv == 2 * 2 * 3 * 600 * 160 * 4
    assert hf.state_scan - vllm.state_scan == 2 * 3 * 8 * 2 * 4 * 4 * 16 * 8  # 3 chunks of 256: (3 + 1)^2 pairs
    chunk = 2 * 256 * 256 * 8 + 2 * 256 * 256 * 16 + 4 * 256 * 16 * 8  # C B^T, its product with X, two state terms
    assert vllm.state_scan == 2 * 3 * 8 * 3 * chunk
    dec = decode_step_flops(card, batch=1, cache_len=999, engine=get_engine("vllm"))
    p = count_params(card)
    weights = 64 * (128 + 160 + 8) + 128 * 64  # in_proj (z, xBC, dt) and out_proj: the only matmuls of a layer
    assert dec.state_projections == 2 * 2 * weights and dec.lm_head == 2 * 64 * 128
    assert dec.total == 2 * (2 * weights + p.lm_head) + 2 * (2 * 160 * 4 + 2 * 8 * 16 * 8)  # conv + C h per layer
    assert dec.causal_total == dec.total and dec.attention_core == dec.projections == dec.mlp == 0


@pytest.mark.parametrize(("config", "active"), [(JAMBA_V01, 12.11e9), (QWEN3_NEXT_80B, 3.9e9)])
def test_full_size_decode_is_two_flops_per_active_weight(config, active):
    """Kaplan et al. 2020 (arXiv:2001.08361): a forward pass costs ~2 N per token; at a short context the decode step
    of Jamba-v0.1 (12B active) and Qwen3-Next-80B-A3B (3.9B active with embeddings) is 2 x active non-embedding
    weights within 1% (the rest: conv, scan and attention scores)."""
    card = card_from_hf_config(config)
    p = count_params(card)
    dec = decode_step_flops(card, batch=1, cache_len=127, engine=get_engine("vllm"))
    assert p.active == pytest.approx(active, rel=0.01)
    assert dec.total == pytest.approx(2 * (p.active - p.embedding), rel=0.01)
    assert dec.state_mixer > 0 and dec.attention_core > 0


def test_decode_traffic_reads_and_writes_the_states():
    """Bamba tiny on vLLM in bf16 at 40 tokens (tests/test_state_layers.py test_estimate_numbers_by_hand): the decode
    step reads each sequence's states once and writes them once, whatever the length; K/V as before."""
    card = _card("bamba")
    states = 2 * (160 * 3 + 8 * 16 * 8) * 2  # 2 state layers: conv (d_conv - 1 inputs) and SSM state, bf16
    kv_token = 2 * 2 * 16 * 2  # the attention layer: K and V, 2 heads x 16, bf16
    for seq_len in (40, 400):
        r = estimate(card, batch=3, seq_len=seq_len, engine="vllm", kv_dtype="bf16", gpu="H100-SXM").roofline
        assert r.decode_step.kv_read_bytes == 3 * (states + seq_len * kv_token)  # the keys attended, the new included
        assert r.decode_step.kv_write_bytes == 3 * (states + kv_token)
        assert r.prefill.kv_write_bytes == 3 * (states + seq_len * kv_token)
        assert r.decode_step.weights_read_bytes == 2 * (count_params(card).total - count_params(card).embedding
                                                        + 3 * 64)


def test_estimate_reports_state_flops():
    est = estimate(_card("nemotron_h"), batch=2, seq_len=7, engine="hf-dynamic")
    assert est.flops.prefill.state_mixer == prefill_flops(_card("nemotron_h"), batch=2, prompt_len=7,
                                                          engine=get_engine("hf-dynamic")).state_mixer > 0
    assert any("state layers" in n and "elementwise" in n for n in est.notes)


CARDS = Path(__file__).parent / "data" / "cards"


@pytest.mark.parametrize("card", [f"{CARDS}/mamba2-tiny.yaml", f"{CARDS}/hybrid-tiny.yaml", f"{CARDS}/mamba-tiny.yaml"])
def test_cli_estimate_roofline(cli_json, card):
    out = cli_json("estimate", "-m", card, "--batch", "4", "--seq-len", "2048", "--prompt-len", "512", "--gpu",
                   "H100-SXM")
    roof, flops = out["roofline"], out["flops"]
    assert flops["prefill"]["state_mixer"] > 0 and roof["decode_step"]["bound"] == "memory"
    assert roof["prefill"]["flops"] == flops["prefill"]["causal_total"]  # ideal engine: the causal count
    assert roof["time_per_output_token_s"] == roof["decode_step"]["time_s"] > 0
    # ideal, no window: the step reads every cached position and each sequence's states, i.e. the whole cache
    assert roof["decode_step"]["kv_read_bytes"] == out["kv_cache"]["total_bytes"]
    assert roof["decode_step"]["kv_write_bytes"] == 4 * (out["kv_cache"]["bytes_per_token"] + sum(
        g["total_bytes"] for g in out["kv_cache"]["groups"] if g["kind"] in ("conv_state", "ssm_state")) // 4)


def test_cli_estimate_hf_config(cli_json, tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(JAMBA_V01))
    out = cli_json("estimate", "--hf-config", str(path), "--seq-len", "8192", "--engine", "vllm", "--gpu", "H100-SXM")
    est = estimate(card_from_hf_config(JAMBA_V01), seq_len=8192, engine="vllm", gpu="H100-SXM")
    assert out["roofline"] == json.loads(est.roofline.model_dump_json())
    assert out["flops"]["decode_step"]["state_mixer"] == est.flops.decode_step.state_mixer > 0


@pytest.mark.parametrize("gpu", [None, "H100-SXM"])
@pytest.mark.parametrize("name", ["jamba", "falcon-h1", "lfm2", "minimax", "recurrent-gemma", "mamba"])
def test_sweep_rows_equal_estimate(name, gpu):
    card = _card(name)
    grid = sweep(card, batch="1,3", seq_len="1,17,4096", gpu=gpu, engine="ideal,hf-dynamic,vllm", kv_dtype="bf16,fp32")
    rows = list(grid)
    assert len(rows) == 2 * 3 * 3 * 2
    buf = io.StringIO()
    grid.to_csv(buf)  # without --gpu: the fast CSV path, which sizes rows on its own
    assert [int(r["kv_cache.total_bytes"]) for r in csv.DictReader(io.StringIO(buf.getvalue()))] == [
        r["kv_cache.total_bytes"] for r in rows]
    for row in rows:
        e = estimate(card, batch=row["batch"], seq_len=row["seq_len"], kv_dtype=row["kv_dtype"], engine=row["engine"],
                     gpu=gpu)
        assert (row["kv_cache.bytes_per_token"], row["kv_cache.bytes_per_sequence"], row["kv_cache.total_bytes"],
                row["weights.bytes"], row["total_bytes"]) == (
            e.kv_cache.bytes_per_token, e.kv_cache.bytes_per_sequence, e.kv_cache.total_bytes, e.weights.bytes,
            e.total_bytes)
        if gpu:
            for key in ("time_to_first_token_s", "time_to_first_token_one_request_s", "time_per_output_token_s",
                        "decode_tokens_per_s", "fits_in_memory"):
                assert row[f"roofline.{key}"] == getattr(e.roofline, key), key


def test_cli_sweep_state_card(cli, tmp_path):
    out = tmp_path / "rows.jsonl"
    code, _, err = cli("sweep", "-m", f"{CARDS}/hybrid-tiny.yaml", "--batch", "1,8", "--seq-len", "16,4096",
                       "--engine", "ideal,vllm", "--gpu", "H100-SXM", "-o", str(out))
    assert code == 0, err
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 8
    for row in rows:
        e = estimate(f"{CARDS}/hybrid-tiny.yaml", batch=row["batch"], seq_len=row["seq_len"], engine=row["engine"],
                     gpu="H100-SXM")
        assert row["kv_cache.total_bytes"] == e.kv_cache.total_bytes
        assert row["roofline.decode_tokens_per_s"] == e.roofline.decode_tokens_per_s
