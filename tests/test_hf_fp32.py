"""What transformers 5.24 holds in float32 inside a half-precision model (kvplan.cost.fp32), proven on its own models:
the MoE routers (DeepSeek-V2/V3, Kimi-Linear, ERNIE-4.5-MoE), Kimi's dt_bias, Zamba's and OLMo-hybrid's A_log in
fp16 and bf16; gpt-oss's norms and T5's wo in fp16 only. The hf-* engines count them at 4 bytes; vLLM and the ideal
engine keep the model dtype (vLLM's GateLinear: the router in the model dtype)."""

from __future__ import annotations

import tempfile
import warnings

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
warnings.filterwarnings("ignore")

from cases import KIMI_CASES, ZAMBA_CASES  # noqa: E402
from kvplan import count_params, estimate  # noqa: E402
from kvplan.model.hf.config import card_from_hf_config  # noqa: E402
from tiny_models import case  # noqa: E402

DEC = dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4, vocab_size=128,
           pad_token_id=0, bos_token_id=0, eos_token_id=0)
MLA = dict(DEC, num_hidden_layers=3, num_key_value_heads=4, kv_lora_rank=32, qk_rope_head_dim=8, qk_nope_head_dim=16,
           v_head_dim=16, n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, n_shared_experts=1,
           first_k_dense_replace=1, n_group=1, topk_group=1)
T5 = dict(d_model=64, d_kv=32, d_ff=96, num_layers=2, num_decoder_layers=3, num_heads=4, vocab_size=128,
          decoder_start_token_id=0)
CASES = [  # (id, model_type, config kwargs, float32 parameters in bf16, in fp16), the counts by hand
    ("deepseek-v2", "deepseek_v2", dict(MLA, q_lora_rank=None), 2 * 4 * 64, 2 * 4 * 64),  # 2 MoE routers 4 x 64
    ("deepseek-v3", "deepseek_v3", dict(MLA, q_lora_rank=24), 2 * 4 * 64, 2 * 4 * 64),
    ("gpt-oss", "gpt_oss", dict(DEC, num_key_value_heads=2, head_dim=16, sliding_window=6, num_local_experts=4,
                                num_experts_per_tok=2), 0, (2 * 2 + 1) * 64),  # 2 norms per layer + final, fp16 only
    ("t5-relu", "t5", dict(T5, feed_forward_proj="relu"), 0, 5 * 96 * 64),  # wo of 2 encoder + 3 decoder blocks
    ("t5-gated", "t5", dict(T5, feed_forward_proj="gated-gelu", tie_word_embeddings=False), 0, 5 * 96 * 64),
    ("llama", "llama", dict(DEC, num_key_value_heads=2), 0, 0),  # nothing kept
    *((name, *case(KIMI_CASES + ZAMBA_CASES, name), None, None) for name in (
        "kimi", "kimi-dense", "olmo-hybrid", "zamba", "ernie4.5-moe")),  # counted from the model's names below
]


def _loaded(model_type: str, kwargs: dict):
    """(config, {dtype: model}) as ``from_pretrained`` loads a saved tiny checkpoint in bf16 and in fp16."""
    torch.manual_seed(0)
    cfg = transformers.AutoConfig.for_model(model_type, **kwargs)
    cls = transformers.T5ForConditionalGeneration if model_type == "t5" else transformers.AutoModelForCausalLM
    with tempfile.TemporaryDirectory() as d:
        (cls(cfg) if model_type == "t5" else cls.from_config(cfg, dtype=torch.float32)).save_pretrained(d)
        return cfg, {dt: cls.from_pretrained(d, dtype=dt) for dt in (torch.bfloat16, torch.float16)}


@pytest.mark.parametrize(("model_type", "kwargs", "bf16_fp32", "fp16_fp32"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_loaded_weight_bytes_match_transformers(model_type, kwargs, bf16_fp32, fp16_fp32):
    cfg, models = _loaded(model_type, kwargs)
    card = card_from_hf_config(cfg.to_dict())
    enc = dict(encoder_len=4) if model_type == "t5" else {}
    for (dt, model), by_hand in zip(models.items(), (bf16_fp32, fp16_fp32)):
        name = {torch.bfloat16: "bf16", torch.float16: "fp16"}[dt]
        params = list(model.parameters())  # tied embeddings once
        fp32 = sum(p.numel() for p in params if p.dtype == torch.float32)
        assert {p.dtype for p in params} <= {dt, torch.float32}
        w = estimate(card, seq_len=4, engine="hf-dynamic", weight_dtype=name, kv_dtype=name, **enc).weights
        assert w.bytes == sum(p.numel() * p.element_size() for p in params), name
        assert w.fp32_params == fp32 == (fp32 if by_hand is None else by_hand), name
        ideal = estimate(card, seq_len=4, weight_dtype=name, kv_dtype=name, **enc).weights
        assert ideal.fp32_params == 0 and ideal.bytes == 2 * count_params(card).total


def test_deepseek_v3_router_bytes_on_the_meta_device():
    # DeepseekV3TopkRouter builds its weight in float32 whatever the load dtype; e_score_correction_bias is a buffer
    config = transformers.DeepseekV3Config(**dict(MLA, q_lora_rank=24))
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    card = card_from_hf_config({**config.to_dict(), "torch_dtype": "bfloat16"})
    hf = estimate(card, seq_len=1, engine="hf-dynamic").weights
    assert hf.bytes == sum(p.numel() * p.element_size() for _, p in model.named_parameters())
    routers = {n: p for n, p in model.named_parameters() if p.dtype == torch.float32}
    assert set(routers) == {"model.layers.1.mlp.gate.weight", "model.layers.2.mlp.gate.weight"}
    assert hf.fp32_params == 2 * 4 * 64 == sum(p.numel() for p in routers.values())
    vllm = estimate(card, seq_len=1, engine="vllm").weights  # vLLM GateLinear: the router in the model dtype
    assert vllm.fp32_params == 0 and vllm.bytes == 2 * hf.params == hf.bytes - 2 * hf.fp32_params


def test_bundled_cards_keep_what_transformers_keeps():
    v3 = estimate("deepseek-v3", seq_len=1, engine="hf-static").weights
    assert v3.fp32_params == 58 * 256 * 7168  # the routers of the 58 MoE layers
    assert v3.bytes == 2 * v3.params + 2 * v3.fp32_params
    assert estimate("deepseek-v3", seq_len=1, engine="hf-dynamic", weight_dtype="fp32").weights.fp32_params == 0
    oss = estimate("gpt-oss-20b", seq_len=1, engine="hf-dynamic").weights  # bf16: the norms stay bf16
    assert oss.fp32_params == 0
    oss16 = estimate("gpt-oss-20b", seq_len=1, engine="hf-dynamic", weight_dtype="fp16").weights
    assert oss16.fp32_params == (2 * 24 + 1) * 2880
    t5 = estimate("t5-base", seq_len=1, encoder_len=1, engine="hf-dynamic", weight_dtype="fp16").weights
    assert t5.fp32_params == 24 * 3072 * 768  # wo of 12 encoder and 12 decoder blocks
    note = estimate("deepseek-v3", seq_len=1, engine="hf-dynamic").notes[-1]
    assert "_keep_in_fp32_modules_strict" in note and f"{v3.fp32_params:,}" in note


@pytest.mark.parametrize("name", ["deepseek-v2-lite", "gpt-oss-20b", "t5-base"])
def test_verify_holds_the_fp32_parts_in_fp16(name):
    # the reference model of an hf-* run holds the router, norms or wo in float32 (kvplan.verify.reference.build)
    from kvplan.verify.run import verify

    r = verify(name, batch=2, seq_len=10, engine="hf-static", kv_dtype="fp16", layers=2, scale=1 / 64,
               decode_steps=3, block_size=4)
    weights = next(c for c in r.checks if c.name == "weights_bytes")
    assert weights.ok and weights.tolerance == 0 and r.ok
    assert weights.measured > 2 * r.params  # not all in fp16
