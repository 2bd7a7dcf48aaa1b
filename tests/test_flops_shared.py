"""FLOPs, roofline traffic and per-rank plans of shared-block cards (Zamba, Zamba2; kvplan.cost.shared).

FLOPs against torch's FlopCounterMode on the tiny random-weight transformers models of tests/test_hf_zamba.py
(Mamba-1 and Mamba-2 mixers, GQA and MHA, attention adapters, two blocks over three invocations, more blocks than
invocations, biases, RoPE): a prefill of P tokens into a fresh DynamicCache and one decode step on it, the whole model
and its parts (every hybrid layer's shared block: attention and MLP; every layer's Mamba mixer). Plans against
vLLM's models/zamba2.py, by hand.
"""

from __future__ import annotations

import functools
import re
import warnings

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
warnings.filterwarnings("ignore")

from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

from kvplan import estimate, sweep  # noqa: E402
from kvplan.cost.comm import comm_bytes  # noqa: E402
from kvplan.cost.flops import decode_step_flops, prefill_flops  # noqa: E402
from kvplan.cost.parallel import Layout, rank_breakdown  # noqa: E402
from kvplan.cost.params import count_params  # noqa: E402
from kvplan.model.hf.config import card_from_hf_config  # noqa: E402
from kvplan.planning.capacity import plan  # noqa: E402
from kvplan.cost.runtimes import get_engine  # noqa: E402
from cases import HYBRID_CASES, STATE_CASES, ZAMBA_CASES  # noqa: E402
from tiny_models import build_flop_model, case, case_card, measure_state_flops, predicted_state_flops  # noqa: E402

ZAMBAS = [c for c in ZAMBA_CASES if c[1].startswith("zamba")]
_card = functools.partial(case_card, ZAMBA_CASES)
B = 2
MIXER = re.compile(r"layers\.\d+\.(mamba_decoder\.)?mamba$")
BLOCK_ATTENTION = re.compile(r"(self_attn|layers\.\d+\.linear)$")  # the block's attention and the invocation's linear


def _model(model_type: str, kwargs: dict):
    torch.manual_seed(0)
    cfg = transformers.AutoConfig.for_model(model_type, **kwargs)
    cfg._attn_implementation = "eager"
    return cfg, transformers.AutoModelForCausalLM.from_config(cfg).eval()


def _count(model, ids, cache) -> dict[str, int]:
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(ids, past_key_values=cache, use_cache=True)
    per = {name: sum(ops.values()) for name, ops in counter.get_flop_counts().items()}
    return {"total": counter.get_total_flops(), "mixer": sum(v for k, v in per.items() if MIXER.search(k)),
            "mlp": sum(v for k, v in per.items() if k.endswith("feed_forward")),
            "attention": sum(v for k, v in per.items() if BLOCK_ATTENTION.search(k)),
            "lm_head": sum(v for k, v in per.items() if k.endswith("lm_head"))}


def _parts(f) -> dict[str, int]:
    return {"total": f.total, "mixer": f.state_mixer, "mlp": f.mlp, "attention": f.projections + f.attention_core,
            "lm_head": f.lm_head}


@pytest.mark.parametrize(("model_type", "kwargs"), [c[1:] for c in ZAMBAS], ids=[c[0] for c in ZAMBAS])
def test_matches_flop_counter(model_type, kwargs):
    """Prompts shorter than d_conv (2), and longer (7, 13); every part equal, not just the total."""
    cfg, model = _model(model_type, kwargs)
    card = card_from_hf_config(cfg.to_dict())
    for prompt in (2, 7, 13):
        cache, ids = transformers.DynamicCache(config=cfg), torch.randint(0, 128, (B, prompt + 1))
        measured = (_count(model, ids[:, :prompt], cache), _count(model, ids[:, prompt:], cache))
        predicted = (_parts(prefill_flops(card, batch=B, prompt_len=prompt, engine=get_engine("hf-dynamic"))),
                     _parts(decode_step_flops(card, batch=B, cache_len=prompt, engine=get_engine("hf-dynamic"))))
        assert measured == predicted, prompt


def test_chunked_ssd_with_adapters_matches_flop_counter():
    """Zamba2 with chunk_size 4: the SSD over 3 chunks (the last padded) beside two blocks with q/k/v adapters."""
    model_type, kwargs = next(c[1:] for c in ZAMBAS if c[0] == "zamba2-adapters")
    cfg, model = _model(model_type, dict(kwargs, chunk_size=4))
    card = card_from_hf_config(cfg.to_dict())
    assert card.ssm.chunk_size == 4
    cache, ids = transformers.DynamicCache(config=cfg), torch.randint(0, 128, (3, 12))
    assert _count(model, ids[:, :11], cache) == _parts(prefill_flops(card, batch=3, prompt_len=11, engine=get_engine("hf-dynamic")))
    assert _count(model, ids[:, 11:], cache) == _parts(decode_step_flops(card, batch=3, cache_len=11,
                                                                         engine=get_engine("hf-dynamic")))


def test_zamba2_decode_flops_by_hand():
    """Zamba2 tiny (h 64, 4 heads of 32 over 2h = 128 inputs, ffn 96, rank 4; 3 hybrid of 6 layers), one decode step
    of one sequence at 40 cached tokens on vLLM: per invocation q/k/v 128 x 128 each and o 128 x 64, the Linear
    64 x 64, q/k/v adapters 3 x (128 x 4 + 4 x 128), MLP 64 x 192 + 96 x 64 and its adapter 64 x 4 + 4 x 192;
    scores against 41 keys, 4 heads x (32 + 32)."""
    card = _card("zamba2-adapters")
    f = decode_step_flops(card, batch=1, cache_len=40, engine=get_engine("vllm"))
    attention = 3 * 128 * 128 + 128 * 64 + 64 * 64 + 3 * (128 * 4 + 4 * 128)
    assert f.projections == 3 * 2 * attention
    assert f.mlp == 3 * 2 * (64 * 192 + 96 * 64 + 64 * 4 + 4 * 192)
    assert f.attention_core == f.causal_attention_core == 3 * 2 * 41 * 4 * (32 + 32)
    mixer = decode_step_flops(card.model_copy(update={"shared_blocks": None, "layer_pattern": ("mamba",)}),
                              batch=1, cache_len=40, engine=get_engine("vllm"))  # the same 6 Mamba-2 layers alone
    assert f.state_mixer == mixer.state_mixer > 0 and f.lm_head == 2 * 64 * 128


@pytest.mark.parametrize("name", ["zamba", "zamba2-adapters"])
def test_decode_traffic_reads_shared_weights_once(name):
    """The shared blocks are the same tensors every invocation: a decode step reads the weights once (the
    parameter count, which counts each block once), and each invocation's own K/V plus every layer's states."""
    card = _card(name)
    r = estimate(card, batch=3, seq_len=40, engine="vllm", kv_dtype="bf16", gpu="H100-SXM").roofline
    p = count_params(card)
    assert r.decode_step.weights_read_bytes == 2 * (p.total - p.embedding + 3 * 64 + p.embedding * card.tie_embeddings)
    kv_token = 2 * card.num_kv_heads * card.head_dim * 2  # K and V of one invocation, bf16
    est = estimate(card, batch=3, seq_len=40, engine="ideal", kv_dtype="bf16")
    states = sum(g.total_bytes for g in est.kv_cache.groups if g.kind in ("conv_state", "ssm_state")) // 3
    assert r.decode_step.kv_read_bytes == 3 * (states + 40 * kv_token * card.attention_layers)
    assert r.decode_step.kv_write_bytes == 3 * (states + kv_token * card.attention_layers)


def test_sweep_rows_with_gpu_equal_estimate():
    card = _card("zamba2-gqa-rope-bias")
    rows = list(sweep(card, batch="1,3", seq_len=[5, 64], gpu="H100-SXM", engine="ideal,hf-dynamic"))
    assert len(rows) == 8
    for row in rows:
        e = estimate(card, batch=row["batch"], seq_len=row["seq_len"], engine=row["engine"], gpu="H100-SXM")
        assert row["roofline.time_per_output_token_s"] == e.roofline.time_per_output_token_s > 0


def test_zamba2_rank_weights_by_hand():
    """zamba2-adapters on vLLM, tp 2 (h 64, heads 4 x 32, ffn 96, rank 4, 2 blocks, 3 invocations): per block
    q/k/v 128 x 64 each and o_proj 64 x 64; per invocation q/k/v adapters A 128 x 2 and B 4 x 64; per block gate_up
    64 x 96 and down 48 x 64; per invocation the gate_up adapter A 64 x 2, B 4 x 96; Linear(64, 64) replicated."""
    card = _card("zamba2-adapters")
    one = rank_breakdown(card, Layout(tp=1), 0, vocab_padding=1)
    assert sum(one.values()) == count_params(card).total  # one rank, no padding: the whole model
    two = rank_breakdown(card, Layout(tp=2), 0)
    assert two["attention"] == 2 * (3 * 128 * 64 + 64 * 64) + 3 * 3 * (128 * 2 + 4 * 64)
    assert two["mlp"] == 2 * (64 * 96 + 48 * 64) + 3 * (64 * 2 + 4 * 96)
    assert two["other"] == 3 * 64 * 64 and two["norms"] == 2 * (128 + 64) + 6 * 64 + 64


def test_plan_kv_per_invocation_and_vllm_mha():
    """vLLM builds Zamba2's K/V with num_attention_heads: the GQA tiny (4 heads, 2 K/V heads in transformers) caches
    4 heads x 32 per hybrid layer on vLLM, 2 x 4 / tp x 32 x 2 B per token and invocation; the plan says so."""
    card = _card("zamba2-gqa-rope-bias")
    assert card.num_kv_heads == 2 and card.attention_layers == 3
    for tp in (1, 2):
        r = plan(card, gpu="H100-SXM", tp=tp, max_model_len=4096, kv_dtype="bf16")
        assert r.per_gpu.kv_bytes_per_token == 3 * 2 * (4 // tp) * 32 * 2
        assert any("num_attention_heads (4) heads whatever num_key_value_heads (2)" in n for n in r.notes)
    mha = plan(_card("zamba2-adapters"), gpu="H100-SXM", max_model_len=4096, concurrency=4)
    assert not any("whatever num_key_value_heads" in n for n in mha.notes) and mha.latency.tpot_ms > 0
    hf = plan(card, gpu="H100-SXM", max_model_len=4096, engine="hf-dynamic")  # transformers: its own 2 K/V heads
    assert hf.per_gpu.kv_bytes_per_token == 3 * 2 * 2 * 32 * 4  # fp32 tiny config
    assert plan(_card("zamba"), gpu="H100-SXM", max_model_len=64, engine="ideal").fits


def test_comm_of_a_zamba2_hybrid_layer():
    """TP 2: o_proj, the shared MLP's down and the mixer's out_proj all-reduce in a hybrid layer (3), out_proj alone
    in a mamba layer (1), plus the embedding's; each adapter's A output is all-gathered (4 per invocation)."""
    card = _card("zamba2-adapters")  # 3 hybrid and 3 mamba layers, rank 4
    b = comm_bytes(card, Layout(tp=2), 0, batch=2, new_tokens=5, logit_rows=1, e=2)
    assert b["all_reduce"] == (3 * 3 + 3 * 1 + 1) * 2 * 5 * 64 * 2
    assert b["all_gather"] == 2 * 1 * 128 // 2 * 2 + 3 * 4 * 2 * 5 * (4 // 2) * 2


@pytest.mark.parametrize("name", ["mamba", "mamba-biases-rank", "bamba", "nemotron_h", "qwen3-next", "lfm2"])
def test_prompt_shorter_than_d_conv_matches_flop_counter(name):
    """transformers' update_conv_state left-pads a prefill shorter than d_conv to d_conv inputs before the conv
    (cache_utils.py LinearAttentionLayer): max(P, d_conv) + d_conv - 1 outputs, for every conv mixer but RG-LRU."""
    model_type, kwargs = case(STATE_CASES + HYBRID_CASES, name)
    cfg, model = build_flop_model(model_type, kwargs)
    card = card_from_hf_config(cfg.to_dict())
    for prompt in (1, card.ssm.d_conv - 1):
        assert measure_state_flops(model_type, cfg, model, card, prompt) == predicted_state_flops(card, prompt), prompt


def test_cli_plan_zamba2_default_config(cli, cli_json, tmp_path):
    """Zamba2Config's defaults (Zamba2-2.7B: 54 layers, 9 hybrid, hidden 2560, 32 heads of 2 x 2560 / 32 = 160) on
    two H100s: per GPU 9 invocations x K and V x 16 heads x 160 x 2 B per token; Zamba v1 exits 2 on vLLM."""
    import json

    path = tmp_path / "config.json"
    path.write_text(json.dumps(transformers.AutoConfig.for_model("zamba2").to_dict()))
    out = cli_json("plan", "--hf-config", str(path), "--gpu", "H100-SXM", "--tp", "2", "--max-model-len", "4096")
    assert out["per_gpu"]["kv_bytes_per_token"] == 9 * 2 * 16 * 160 * 2 and out["fits"]
    assert any("Zamba2 on vLLM" in n for n in out["notes"])
    path.write_text(json.dumps(transformers.AutoConfig.for_model("zamba", num_hidden_layers=6).to_dict()))
    code, _, err = cli("plan", "--hf-config", str(path), "--gpu", "H100-SXM", "--max-model-len", "4096")
    assert code == 2 and "vLLM serves only Zamba2" in err and "Traceback" not in err


def test_full_size_decode_is_two_flops_per_weight_use():
    """Kaplan et al. 2020 (arXiv:2001.08361): ~2 FLOPs per weight a token passes through. Zamba2Config's defaults
    (Zamba2-2.7B) invoke 1 shared block 9 times, so a decode step at a short context costs 2 x (non-embedding
    weights + 8 more passes through a block + the tied LM head) within 1% (the rest: adapters, conv, scan, scores)."""
    card = card_from_hf_config(transformers.AutoConfig.for_model("zamba2").to_dict())
    p, h, ffn = count_params(card), card.hidden_size, card.ffn_size
    block = 2 * h * 3 * 2 * h + 2 * h * h + h * 2 * ffn + ffn * h  # q/k/v over 2h, o, gate_up, down
    assert (card.attention_layers, card.shared_blocks.num_blocks, card.tie_embeddings) == (9, 1, True)
    dec = decode_step_flops(card, batch=1, cache_len=127, engine=get_engine("vllm"))
    assert dec.total == pytest.approx(2 * (p.total - p.embedding + 8 * block + p.embedding), rel=0.01)
    assert dec.total > 2 * p.total * 1.4  # counting the block once would miss 2 x 8 passes
