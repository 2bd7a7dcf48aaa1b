"""Quantized checkpoints (fp8 / AWQ / GPTQ): bytes pinned to hand-computed tensor shapes, and fp8 checked against
the modules transformers builds (FP8Linear / FP8Experts on the meta device, no GPU kernel needed)."""

import pytest

from kvplan import estimate
from kvplan.cost.parallel import Layout, rank_quant, rank_weights
from kvplan.cost.quant import matrix_bytes
from kvplan.cost.shapes import Matrix
from kvplan.errors import KvplanError
from kvplan.model.catalog import card_from_dict, load_card
from kvplan.model.dtypes import parse_dtype
from kvplan.model.hf.config import card_from_hf_config
from kvplan.model.quant import Quantization

BF16 = parse_dtype("bf16")
FP8_BLOCK = Quantization(method="fp8", block=(128, 128))
GPTQ_ACT = Quantization(method="gptq", bits=4, group_size=128, desc_act=True)
GPTQ = Quantization(method="gptq", bits=4, group_size=128)


def test_fp8_block_scales_of_a_deepseek_down_proj():
    # down_proj weight [7168, 18432]: weight_scale_inv [cdiv(7168, 128), cdiv(18432, 128)] = [56, 144] fp32
    q = matrix_bytes(FP8_BLOCK, Matrix("down_proj", 18432, 7168, False, "row"))
    assert q.scales == 56 * 144 * 4 and q.data == 7168 * 18432 and q.zeros == q.g_idx == 0
    # kv_a_proj_with_mqa 7168 -> 576: 576 is not a multiple of 128, cdiv gives 5 rows of blocks
    assert matrix_bytes(FP8_BLOCK, Matrix("kv_a_proj_with_mqa", 7168, 576, False, "replicated")).scales == 5 * 56 * 4


def test_deepseek_v3_fp8_card_by_hand():
    r = estimate("deepseek-v3-fp8", seq_len=1).weights
    # blocks of 128 x 128 per matrix: cdiv(n_out, 128) x cdiv(n_in, 128)
    attention = 12 * 56 + 192 * 12 + 5 * 56 + 256 * 4 + 56 * 128  # q_a, q_b, kv_a (576 rows), kv_b, o
    dense = 3 * 144 * 56  # gate, up, down of the 3 dense FFNs (18432 x 7168)
    expert = 3 * 16 * 56  # gate, up, down of one expert (2048 x 7168)
    scales = 61 * attention + 3 * dense + 58 * 257 * expert  # 256 routed + 1 shared expert in 58 MoE layers
    assert r.quantization.scale_bytes == 4 * scales == 163_352_928
    attn_elems = 7168 * 1536 + 1536 * 128 * 192 + 7168 * 576 + 512 * 128 * 256 + 128 * 128 * 7168
    elems = 61 * attn_elems + 3 * 3 * 7168 * 18432 + 58 * 257 * 3 * 7168 * 2048
    assert r.quantization.quantized_params == r.quantization.quantized_bytes == elems
    rest = r.params - elems  # embeddings, lm_head, norms, routers: bf16
    assert rest == 2 * 129280 * 7168 + 58 * 256 * 7168 + 61 * (2 * 7168 + 1536 + 512) + 7168
    assert r.bytes == elems + 4 * scales + 2 * rest
    assert r.params == estimate("deepseek-v3", seq_len=1).weights.params
    hf = estimate("deepseek-v3-fp8", seq_len=1, engine="hf-dynamic").weights  # transformers 5.24: fp32 routers
    assert hf.fp32_params == 58 * 256 * 7168 and hf.bytes == r.bytes + 2 * hf.fp32_params
    assert hf.quantization.unquantized_bytes == 2 * (rest - hf.fp32_params) + 4 * hf.fp32_params


def test_qwen3_8b_awq_card_by_hand():
    r = estimate("qwen3-8b-awq", seq_len=1).weights
    q = r.quantization
    # per layer (n_in, n_out): q, k, v, o, gate, up, down
    mats = [(4096, 4096), (4096, 1024), (4096, 1024), (4096, 4096), (4096, 12288), (4096, 12288), (12288, 4096)]
    elems = 36 * sum(i * o for i, o in mats)
    groups = 36 * sum(i // 128 * o for i, o in mats)  # scale entries: input groups of 128 x outputs
    assert q.quantized_params == elems == 6_945_767_424
    assert q.quantized_bytes == 36 * sum(i * (o // 8) * 4 for i, o in mats) == elems // 2  # int32 of 8 nibbles
    assert q.scale_bytes == 2 * groups and q.zero_bytes == groups // 8 * 4 and q.g_idx_bytes == 0
    unquantized = 2 * 151936 * 4096 + 36 * (2 * 4096 + 2 * 128) + 4096  # embed + lm_head, norms (fp16)
    assert q.unquantized_params == unquantized and r.dtype == "fp16"
    assert r.bytes == q.quantized_bytes + q.scale_bytes + q.zero_bytes + 2 * unquantized == 6_098_479_104


def _gptq_card(q: Quantization):
    data = load_card("llama-2-7b").model_dump(exclude_none=True)
    return card_from_dict({**data, "name": "llama-2-7b-gptq", "dtype": "float16", "quantization": q.model_dump()},
                          origin="test")


@pytest.mark.parametrize("q", [GPTQ, GPTQ_ACT], ids=["gptq", "gptq-desc-act"])
def test_gptq_g_idx_and_row_parallel_scales(q):
    down = Matrix("down_proj", 11008, 4096, False, "row")
    one = matrix_bytes(q, down)  # AutoGPTQ: qweight [11008/8, 4096], qzeros/scales [86, ...], g_idx [11008]
    assert (one.data, one.scales, one.zeros, one.g_idx) == (1376 * 4096 * 4, 86 * 4096 * 2, 86 * 512 * 4, 11008 * 4)
    half = matrix_bytes(q, down, tp=2)  # each rank: 5504 input rows
    groups = 86 if q.desc_act else 43  # vLLM gptq.py: act-order keeps every group's scales on each rank
    assert (half.data, half.g_idx) == (688 * 4096 * 4, 5504 * 4)
    assert (half.scales, half.zeros) == (groups * 4096 * 2, groups * 512 * 4)
    col = matrix_bytes(q, Matrix("up_proj", 4096, 11008, False, "column"), tp=2)  # column split: outputs halved
    assert (col.scales, col.zeros, col.g_idx) == (32 * 5504 * 2, 32 * 688 * 4, 4096 * 4)
    card = _gptq_card(q)
    w = rank_weights(card, parse_dtype("fp16"), Layout(tp=2), 1, 0)
    per_layer = sum(matrix_bytes(q, m, 2, 32, 128).stored for m in (
        Matrix("q_proj", 4096, 4096, False, "column"), Matrix("k_proj", 4096, 4096, False, "column"),
        Matrix("v_proj", 4096, 4096, False, "column"), Matrix("o_proj", 4096, 4096, False, "row"),
        Matrix("gate_proj", 4096, 11008, False, "column"), Matrix("up_proj", 4096, 11008, False, "column"), down))
    assert w.quant.stored == 32 * per_layer
    assert w.bytes == 32 * per_layer + 2 * (w.params - w.quant.quantized_elems)


def test_tp_alignment_is_refused_as_vllm_refuses_it():
    awq = Quantization(method="awq", bits=4, group_size=128)
    with pytest.raises(KvplanError, match="group_size 128"):  # 11008 / 4 = 2752 rows, not a multiple of 128
        matrix_bytes(awq, Matrix("down_proj", 11008, 4096, False, "row"), tp=4)
    with pytest.raises(KvplanError, match="validate_fp8_block_shape"):  # 576 / 8 = 72 outputs per rank
        matrix_bytes(FP8_BLOCK, Matrix("kv_b_proj", 512, 576, False, "column"), tp=8)
    assert matrix_bytes(awq, Matrix("down_proj", 11008, 4096, False, "row"), tp=2).scales == 43 * 4096 * 2


def test_fp8_per_rank_splits_blocks_and_dequantizes_nothing():
    card = load_card("deepseek-v3-fp8")
    whole, rank = rank_quant(card, Layout(), 0), rank_quant(card, Layout(tp=8), 0)
    # every split dimension is a multiple of 128 per rank; replicated q_a / kv_a keep all their blocks
    replicated = 61 * (7168 * 1536 + 7168 * 576)
    assert rank.quantized_elems == (whole.quantized_elems - replicated) // 8 + replicated
    assert rank.scales == (whole.scales - 4 * 61 * (12 * 56 + 5 * 56)) // 8 + 4 * 61 * (12 * 56 + 5 * 56)


def test_hf_import_reads_quantization_config():
    base = {"model_type": "qwen3", "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2,
            "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64, "vocab_size": 1000,
            "torch_dtype": "float16", "tie_word_embeddings": False}
    gptq = card_from_hf_config({**base, "quantization_config": {
        "quant_method": "gptq", "bits": 8, "group_size": -1, "desc_act": True, "sym": False}})
    assert gptq.quantization == Quantization(method="gptq", bits=8, group_size=-1, desc_act=True, sym=False)
    fp8 = card_from_hf_config({**base, "quantization_config": {
        "quant_method": "fp8", "weight_block_size": [128, 128], "activation_scheme": "dynamic",
        "modules_to_not_convert": ["lm_head", "model.layers.0.mlp.gate", "re:.*down_proj$"]}})
    assert fp8.quantization == Quantization(method="fp8", block=(128, 128), unquantized=("down_proj",))
    ct = card_from_hf_config({**base, "quantization_config": {
        "quant_method": "compressed-tensors", "ignore": ["lm_head"], "config_groups": {"group_0": {
            "weights": {"num_bits": 8, "type": "float", "strategy": "channel"},
            "input_activations": {"num_bits": 8, "type": "float", "dynamic": True}}}}})
    assert ct.quantization == Quantization(method="fp8", weight_scales="channel", checkpoint_format="compressed-tensors")
    for bad, needle in (({"quant_method": "bitsandbytes"}, "supported: awq, compressed-tensors"),
                        ({"quant_method": "awq", "bits": 4, "group_size": 128, "version": "gemv"}, "supported: gemm"),
                        ({"quant_method": "fp8", "modules_to_not_convert": ["model.layers.1.self_attn.o_proj"]},
                         "some layers only")):
        with pytest.raises(KvplanError, match=needle):
            card_from_hf_config({**base, "quantization_config": bad})


def test_quantized_card_refuses_a_quantized_weight_dtype():
    with pytest.raises(KvplanError, match="--weight-dtype"):
        estimate("qwen3-8b-awq", seq_len=8, weight_dtype="int4")
    assert estimate("qwen3-8b-awq", seq_len=8, weight_dtype="bf16").weights.quantization.unquantized_bytes > 0


# ---- against transformers' own fp8 modules ---------------------------------------------------------------------

def _fp8_model_bytes(config, block, scheme):
    """transformers' parameter bytes by role: float8 values, their scales (named ``*scale*``: weight_scale_inv,
    <experts>_scale_inv, activation_scale), the rest (in bf16, or in float32 where transformers keeps a module so),
    the float32 bytes of that rest, and kvplan's weights for hf-dynamic (the engine that loads the model this way)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from transformers.integrations.finegrained_fp8 import replace_with_fp8_linear
    from transformers.quantizers.base import get_keys_to_not_convert

    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    qc = transformers.FineGrainedFP8Config(weight_block_size=block, activation_scheme=scheme)
    model = replace_with_fp8_linear(model, modules_to_not_convert=get_keys_to_not_convert(model), quantization_config=qc)
    by_kind = {"fp8": 0, "scales": 0, "rest": 0}
    fp32_rest = 0  # the float32 parameters that are no scale (transformers 5.24: the MoE router)
    for name, p in model.named_parameters():
        kind = "fp8" if p.dtype == torch.float8_e4m3fn else "scales" if "scale" in name.rsplit(".", 1)[-1] else "rest"
        assert kind != "scales" or p.dtype == torch.float32, name
        by_kind[kind] += p.numel() * p.element_size()
        fp32_rest += p.numel() * p.element_size() if kind == "rest" and p.dtype == torch.float32 else 0
    quant = {"quant_method": "fp8", "weight_block_size": list(block) if block else None, "activation_scheme": scheme}
    card = card_from_hf_config({**config.to_dict(), "torch_dtype": "bfloat16", "quantization_config": quant})
    return by_kind, fp32_rest, estimate(card, seq_len=1, engine="hf-dynamic").weights


# dynamic only: transformers' fused FP8Experts keep one static activation scale for gate_up where a checkpoint of
# separate experts stores an input_scale for gate and one for up (the static case is checked on dense Qwen3 below)
@pytest.mark.parametrize("block", [(128, 128), (64, 32), None])
def test_fp8_matches_transformers_deepseek_v3(block):
    from transformers import DeepseekV3Config

    config = DeepseekV3Config(hidden_size=256, intermediate_size=384, moe_intermediate_size=128, num_hidden_layers=3,
                              first_k_dense_replace=1, num_attention_heads=4, n_routed_experts=4,
                              num_experts_per_tok=2, n_shared_experts=1, kv_lora_rank=128, q_lora_rank=192,
                              qk_rope_head_dim=32, qk_nope_head_dim=64, v_head_dim=64, vocab_size=1000, n_group=1,
                              topk_group=1)
    measured, fp32_rest, w = _fp8_model_bytes(config, block, "dynamic")
    q = w.quantization
    assert (q.quantized_bytes, q.scale_bytes, q.unquantized_bytes) == (measured["fp8"], measured["scales"],
                                                                       measured["rest"])
    # transformers 5.24 keeps the router of the 2 MoE layers (4 experts x hidden 256) in float32, unquantized
    assert 4 * w.fp32_params == fp32_rest == 4 * 2 * 4 * 256
    assert w.bytes == sum(measured.values())


@pytest.mark.parametrize("block, scheme", [((128, 128), "dynamic"), (None, "static")])
def test_fp8_matches_transformers_qwen3(block, scheme):
    from transformers import Qwen3Config

    config = Qwen3Config(hidden_size=320, intermediate_size=800, num_hidden_layers=2, num_attention_heads=5,
                         num_key_value_heads=1, head_dim=64, vocab_size=999, tie_word_embeddings=False)
    measured, fp32_rest, w = _fp8_model_bytes(config, block, scheme)  # 320, 800: partial edge blocks (cdiv)
    assert w.bytes == sum(measured.values()) and w.quantization.scale_bytes == measured["scales"]
    assert w.quantization.quantized_bytes == measured["fp8"] and fp32_rest == w.fp32_params == 0


@pytest.mark.parametrize("model, layers, experts", [("gpt-oss-120b", 36, 128), ("gpt-oss-20b", 24, 32)])
def test_the_ideal_estimate_holds_mxfp4_experts_as_stored(model, layers, experts):
    """No kernel's padding in the lower bound: every expert's gate/up (2 x 2,880 x 2,880) and down (2,880 x 2,880)
    at half a byte plus one e8m0 scale per 32 values, the rest in bf16 (it had vLLM's Marlin padding: +5.5 GB)."""
    from kvplan.cost.params import count_params
    from kvplan.model.catalog import load_card

    expert = layers * experts * 3 * 2880 * 2880
    rest = count_params(load_card(model)).total - expert
    ideal = estimate(model, seq_len=1024).weights.bytes
    assert ideal == expert * 17 // 32 + 2 * rest
    assert estimate(model, seq_len=1024, engine="vllm").weights.bytes > ideal  # Marlin pads hidden to 3,072
