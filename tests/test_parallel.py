"""kvplan.cost.parallel: what one GPU holds under TP/PP, pinned to numbers worked out by hand from vLLM's rules."""

import pytest

from kvplan import KvplanError, load_card
from kvplan.cost.params import count_params
from kvplan.cost.vision import vision_params
from kvplan.cost.parallel import (Layout, check_layout, kv_heads_per_rank, pad_vocab, pp_partition, rank_kv_specs,
                                  rank_weights)
from kvplan.model.catalog import bundled_names, card_from_dict
from kvplan.model.dtypes import DTYPES
from kvplan.cost.runtimes import get_engine  # noqa: E402

BF16, FP8 = DTYPES["bf16"], DTYPES["fp8_e4m3"]
TINY = dict(name="tiny", source="test", num_layers=5, hidden_size=64, num_heads=8, num_kv_heads=2, ffn_size=128,
            gated_ffn=True, activation="silu", vocab_size=100, tie_embeddings=False, norm="rmsnorm", position="rope",
            max_position_embeddings=512, dtype="bfloat16")


def tiny(**kw):
    return card_from_dict({**TINY, **kw})


def test_pp_partition_follows_get_pp_indices():
    # [L//pp]*pp, the remainder to the 2nd-last, 3rd-last, ... stage, never the last
    assert pp_partition(5, 2) == [range(0, 3), range(3, 5)]
    assert [len(r) for r in pp_partition(7, 4)] == [2, 2, 2, 1]  # [1,1,1,1] + 1 to stages -2, -3, -4
    assert [len(r) for r in pp_partition(27, 2)] == [14, 13]  # DeepSeek-V2-Lite (vllm#20665)
    assert [len(r) for r in pp_partition(80, 3)] == [27, 27, 26]
    assert [len(r) for r in pp_partition(61, 4)] == [15, 15, 16, 15]  # r = 1: only the 2nd-last stage
    with pytest.raises(KvplanError, match="--pp"):
        pp_partition(5, 6)


def test_kv_heads_per_rank_and_vocab_padding():
    assert [kv_heads_per_rank(8, tp) for tp in (1, 2, 4, 8, 16)] == [8, 4, 2, 1, 1]
    assert pad_vocab(32000) == 32000 and pad_vocab(151936) == 151936 and pad_vocab(128256) == 128256
    assert pad_vocab(50257) == 50304  # ceil(50257 / 64) = 786; 786 x 64


@pytest.mark.parametrize("name", [n for n in bundled_names() if load_card(n).architecture == "decoder-only"])
def test_one_gpu_is_count_params(name):
    card = load_card(name)
    r = rank_weights(card, BF16, Layout(), 0, 0, vocab_padding=1)
    # vLLM builds a LLaVA tower up to vision_feature_layer only; transformers (count_params) builds every block
    unused = vision_params(card).total - vision_params(card, hf=False).total
    assert r.params == count_params(card).total - unused
    if card.quantization is None:
        assert r.bytes == 2 * r.params
    else:  # tests/test_quant.py pins the quantized bytes
        assert 0 < r.quant.quantized_elems < r.params and r.bytes < 2 * r.params


def test_gpt2_vocab_padding_adds_rows():
    card = load_card("gpt2")  # tied: one 50304 x 768 matrix instead of 50257 x 768
    r = rank_weights(card, BF16, Layout(), 0, 0)
    assert r.params - count_params(card).total == (50304 - 50257) * 768


def _llama70(tp):
    h, hd, inner, rows = 8192, 128, 28672, 128256 // tp
    attn = h * (64 // tp * hd) + 2 * h * (max(1, 8 // tp) * hd) + (64 // tp * hd) * h
    mlp = 3 * h * (inner // tp)
    return 2 * rows * h + 80 * (attn + mlp) + (80 * 2 + 1) * h


@pytest.mark.parametrize("tp", [4, 8])
def test_llama_3_1_70b_tp(tp):
    card = load_card("llama-3.1-70b")
    r = rank_weights(card, BF16, Layout(tp=tp), tp - 1, 0)
    assert r.params == _llama70(tp)
    assert r.buffers_bytes == 131072 * 128 * 2  # cos_sin_cache: max_position x head_dim, bf16
    assert _llama70(4) == 17_639_415_808
    specs = rank_kv_specs(card, BF16, get_engine("vllm"), Layout(tp=tp), 0)
    assert sum(s.bytes_per_token for s in specs) == 80 * 2 * (8 // tp) * 128 * 2


def test_qwen3_30b_a3b_tp8_replicates_kv_heads():
    card = load_card("qwen3-30b-a3b")  # 4 KV heads, tp 8: 1 head per rank, each head on 2 ranks
    h, hd, rows = 2048, 128, 151936 // 8
    attn = h * (32 // 8 * hd) + 2 * h * hd + (32 // 8 * hd) * h + 2 * hd  # + q_norm, k_norm replicated
    moe = h * 128 + 128 * 3 * h * (768 // 8)  # router replicated + 128 experts at intermediate 96
    expected = 2 * rows * h + 48 * (attn + moe) + (48 * 2 + 1) * h
    assert rank_weights(card, BF16, Layout(tp=8), 3, 0).params == expected
    specs = rank_kv_specs(card, BF16, get_engine("vllm"), Layout(tp=8), 0)
    assert sum(s.bytes_per_token for s in specs) == 48 * 2 * 1 * 128 * 2 == 24_576


def test_deepseek_v3_tp8_replicates_the_latent():
    card = load_card("deepseek-v3")
    h, tp, rows = 7168, 8, 129280 // 8
    attn = (h * 1536 + 1536 * (128 // tp * 192) + h * 576 + 512 * (128 // tp * 256) + (128 // tp * 128) * h
            + 1536 + 512)  # q_a, q_b, kv_a (replicated), kv_b, o; q_a_layernorm, kv_a_layernorm
    dense = 3 * h * (18432 // tp)
    moe = h * 256 + 256 * 3 * h * (2048 // tp) + 3 * h * (2048 // tp)  # router, 256 routed, 1 shared
    expected = 2 * rows * h + 61 * attn + 3 * dense + 58 * moe + (61 * 2 + 1) * h
    r = rank_weights(card, BF16, Layout(tp=tp), 0, 0)
    assert r.params == expected
    assert r.buffers_bytes == 163840 * 64 * 2
    specs = rank_kv_specs(card, BF16, get_engine("vllm"), Layout(tp=tp), 0)
    assert sum(s.bytes_per_token for s in specs) == 61 * 576 * 2  # not divided by tp


def test_pipeline_stages_hold_their_layers():
    card = tiny()
    h, rows = 64, 128  # vocab 100 padded to 128
    layer = (h * 64 + 2 * h * 16 + 64 * h) + 3 * h * 128 + 2 * h
    first = rank_weights(card, BF16, Layout(pp=2), 0, 0)
    last = rank_weights(card, BF16, Layout(pp=2), 0, 1)
    assert (first.layers, last.layers) == (range(0, 3), range(3, 5))
    assert first.params == rows * h + 3 * layer
    assert last.params == 2 * layer + h + rows * h  # final norm + lm_head
    tied = tiny(tie_embeddings=True)
    assert rank_weights(tied, BF16, Layout(pp=2), 0, 1).breakdown["embedding"] == rows * h
    assert rank_weights(tied, BF16, Layout(), 0, 0).params == rows * h + 5 * layer + h
    assert len(rank_kv_specs(card, BF16, get_engine("vllm"), Layout(pp=2), 1)) == 2


def test_fp8_kv_scales_on_the_stage_of_their_layers():
    card = tiny()
    r = rank_weights(card, BF16, Layout(pp=2), 0, 0, kv_t=FP8)
    assert r.bytes == 2 * r.params + 3 * 8  # 3 layers x (k_scale + v_scale, fp32)


@pytest.mark.parametrize("card, layout, needle", [
    (tiny(), Layout(tp=3), "attention heads (8) must be divisible by tensor parallel size (3)"),
    (tiny(num_heads=12, num_kv_heads=3, hidden_size=96), Layout(tp=4), "4 is not divisible by 3"),
    (tiny(num_kv_heads=8), Layout(tp=4, pp=6), "--pp"),
    (tiny(ffn_size=100), Layout(tp=8), "intermediate_size 100 is not divisible"),
    (load_card("t5-base"), Layout(tp=2), "decoder-only"),
])
def test_refused_layouts(card, layout, needle):
    with pytest.raises(KvplanError, match="^--(tp|pp)") as exc:
        check_layout(card, layout)
    assert needle in str(exc.value)


def test_moe_experts_split_over_dp_x_tp():
    # vLLM without expert parallelism: routed experts over the flattened dp x tp group; attention stays per tp
    card = load_card("qwen3-30b-a3b")
    one, two = (rank_weights(card, BF16, Layout(tp=4, dp=dp), 0, 0).breakdown["mlp"] for dp in (1, 2))
    router, expert = 2048 * 128, 3 * 2048 * 768
    assert one == 48 * (router + 128 * expert // 4)
    assert two == 48 * (router + 128 * expert // 8)
    with pytest.raises(KvplanError, match="^--dp: moe_intermediate_size 768 is not divisible by dp x tp = 1024"):
        check_layout(card, Layout(tp=8, dp=128))


def test_breakdown_keys_follow_the_contract():
    r = rank_weights(load_card("gpt2"), BF16, Layout(), 0, 0)
    assert set(r.breakdown) == {"embedding", "lm_head", "attention", "mlp", "norms", "other"}
    assert r.breakdown["other"] == (1024 * 768)  # gpt2's learned positions on the first stage
    assert sum(r.breakdown.values()) == r.params


def test_expert_parallel_spreads_whole_experts():
    # --enable-expert-parallel: ep = dp x tp; E // ep experts, one more on the first E % ep ranks, full intermediate
    card = tiny(moe={"num_experts": 10, "experts_per_token": 2, "expert_ffn_size": 32}, num_kv_heads=8)
    router, expert = 64 * 10, 3 * 64 * 32
    lay = Layout(tp=4, expert_parallel=True)
    first = rank_weights(card, BF16, lay, 0, 0).breakdown["mlp"]
    last = rank_weights(card, BF16, lay, 3, 0).breakdown["mlp"]
    assert first == 5 * (router + 3 * expert) and last == 5 * (router + 2 * expert)  # 10 // 4 = 2, r = 2


# ---- where the vocabulary lives under pipeline parallelism (serving_vllm.PP_VOCAB_EVERY_STAGE) -----------------

def _stage_vocab(card, engine: str, pp: int) -> list[tuple[int, int]]:
    """(embedding, lm_head) parameters of each stage as the engine's runtime places them."""
    every = get_engine("vllm").at_version(engine).vocab_every_stage(card)
    return [(w.breakdown["embedding"], w.breakdown["lm_head"])
            for w in (rank_weights(card, BF16, Layout(pp=pp), 0, r, vocab_every_stage=every) for r in range(pp))]


def test_modules_without_pp_missing_layer_hold_the_vocabulary_on_every_stage():
    """mixtral.py builds embed_tokens and lm_head unguarded (every release 0.6 - 0.33), llama.py behind is_first_rank /
    is_last_rank: Mixtral's every stage holds 32,000 x 4,096 twice, Llama's first stage the embedding, its last the
    head. gemma2.py (tied) builds the embedding on every stage: the middle one of three holds it too."""
    mixtral, llama, gemma = load_card("mixtral-8x7b"), load_card("llama-3.1-8b"), load_card("gemma-2-9b")
    assert mixtral.hf_architecture == "MixtralForCausalLM" and llama.hf_architecture == "LlamaForCausalLM"
    vocab = 32000 * 4096
    assert _stage_vocab(mixtral, "0.10.1", 2) == [(vocab, vocab), (vocab, vocab)]
    assert _stage_vocab(llama, "0.10.1", 2) == [(128256 * 4096, 0), (0, 128256 * 4096)]
    g = 256000 * 3584
    assert _stage_vocab(gemma, "0.10.1", 3) == [(g, 0), (g, 0), (g, 0)]  # tied: lm_head aliases it
    assert rank_weights(gemma, BF16, Layout(pp=3), 0, 1).breakdown["embedding"] == 0  # llama.py's placement


def test_the_vocabulary_table_is_read_per_release_range():
    """Olmo2ForCausalLM runs olmo2.py up to 0.25 and the Transformers backend from 0.26 (not read: llama placement);
    gpt_oss.py is SupportsPP from 0.10.2; qwen3_moe.py builds both on every stage in every release that has it."""
    vllm = get_engine("vllm")
    olmo, oss, qwen = load_card("olmo-2-13b"), load_card("gpt-oss-20b"), load_card("qwen3-30b-a3b")
    both = frozenset({"embedding", "lm_head"})
    assert vllm.at_version("0.25").vocab_every_stage(olmo) == both
    assert vllm.at_version("0.26").vocab_every_stage(olmo) == frozenset()
    assert vllm.at_version("0.9").vocab_every_stage(oss) == frozenset()
    assert vllm.at_version("0.10.2").vocab_every_stage(oss) == both
    for release in ("0.8.5", "0.10.1", "0.14", "0.27.1", "0.33"):
        assert vllm.at_version(release).vocab_every_stage(qwen) == both
