"""kvplan plan for hybrid and state-space models: per-rank state shapes and mixer weights under TP, vLLM's hybrid
page unification and one-page-per-request state groups, SGLang's state pool; pinned to public vLLM start-up logs
(docs/capacity.md) and to numbers worked out by hand from vLLM's and SGLang's rules."""

import json
from pathlib import Path

import pytest

from kvplan import KvplanError, estimate
from kvplan.cost import serving_sglang as sg
from kvplan.cost import serving_vllm as vl
from kvplan.cost.kvspec import state_specs
from kvplan.cost.params import count_params
from kvplan.cost.parallel import Layout, pad_vocab, rank_breakdown, rank_kv_specs
from kvplan.cost.hardware import load_gpu
from kvplan.cost.ssm import ssm_params, ssm_rank_params
from kvplan.model.card import ModelCard
from kvplan.model.dtypes import DTYPES
from kvplan.model.catalog import card_from_dict
from kvplan.model.hf.config import card_from_hf_config
from kvplan.planning.capacity import plan
from kvplan.planning.capacity.search import search
from kvplan.cost.runtimes import get_engine  # noqa: E402

GIB = 2**30
BF16 = DTYPES["bf16"]
CONFIGS = json.loads((Path(__file__).with_name("data") / "hf_configs_hybrid.json").read_text())["configs"]
QWEN3_NEXT, JAMBA = "Qwen/Qwen3-Next-80B-A3B-Instruct", "ai21labs/Jamba-v0.1"
NEMOTRON, LFM25 = "nvidia/NVIDIA-Nemotron-Nano-9B-v2", "LiquidAI/LFM2.5-1.2B-Instruct"


def _card(repo: str, **override) -> ModelCard:
    return card_from_hf_config({**CONFIGS[repo], **override})


def _mamba2(n_groups: int = 1, layers: int = 4, **kw) -> ModelCard:
    """A pure Mamba-2 card (mamba-codestral-like sizes)."""
    return card_from_hf_config({"model_type": "mamba2", "hidden_size": 4096, "num_hidden_layers": layers,
                                "num_heads": 128, "head_dim": 64, "state_size": 128, "n_groups": n_groups,
                                "vocab_size": 32768, "conv_kernel": 4, "torch_dtype": "bfloat16", **kw})


def _old_tokens(r) -> int:
    """vLLM 0.10 - 0.17 printed num_blocks // groups x block_size as 'GPU KV cache size' for hybrid models."""
    return r.kv_cache.num_blocks // r.kv_cache.groups * r.kv_cache.block_size


def test_hybrid_block_size_rule():
    # Qwen3-Next TP2: attention 1 KV head x 256 x 2 (K,V) x 2 B = 1,024 B per token; states: conv 3 x 4,096 x 2 B +
    # SSM 16 x 128 x 128 x 2 B = 548,864 B -> 16 x cdiv(548,864, 16,384) = 544 tokens, page 557,056 B (+1.49%)
    assert vl.hybrid_block_size(1024, 548_864, 16) == (544, 557_056)
    assert vl.hybrid_block_size(1024, 16 * 1024, 16) == (16, None)  # already equal: no padding
    assert vl.hybrid_block_size(2048, 8192, 16) == (16, 32_768)  # a small state padded up (LFM2: +300%)
    assert vl.hybrid_block_size(1024, 548_864, 32) == (544, 557_056)  # alignment max(16, 32): 32 x 17
    assert vl.hybrid_block_size(1024, 548_864, 1024) == (1024, 1_048_576)  # a larger user block is kept


def test_per_rank_state_shapes_follow_vllm():
    qwen = _card(QWEN3_NEXT)  # Gated DeltaNet: 32 value heads of 128, 16 key heads of 128, conv 4
    conv, ssm = state_specs(qwen, BF16, False, 4)
    assert conv.vectors == ((3, (2 * 16 * 128 + 32 * 128) // 4),) and conv.bytes_per_token == 3 * 2048 * 2
    assert ssm.vectors == ((8 * 128, 128),) and ssm.bytes_per_token == 8 * 128 * 128 * 2
    one = _mamba2(n_groups=1)  # Mamba-2, one group: replicated on every rank (extra_groups_for_head_shards = tp - 1)
    conv, ssm = state_specs(one, BF16, False, 4)
    assert conv.vectors == ((3, (8192 + 2 * 4 * 128) // 4),)  # (I + 2 (G + 3) N) / tp = 2,304 channels
    assert ssm.vectors == ((32 * 64, 128),)
    jamba = _card(JAMBA)  # Mamba-1: channels split
    conv, ssm = state_specs(jamba, BF16, False, 2)
    assert conv.vectors == ((3, 4096),) and ssm.vectors == ((4096, 16),)
    specs = rank_kv_specs(jamba, BF16, get_engine("vllm"), Layout(tp=2), 0)
    assert [s.kind for s in specs[:2]] == ["conv_state", "ssm_state"]  # layer 0 is a Mamba layer
    assert sum(s.kind == "full" for s in specs) == 4 and specs[8].vectors == ((4, 128), (4, 128))


@pytest.mark.parametrize(("repo", "tp", "replicated"), [
    (QWEN3_NEXT, 2, 128), (QWEN3_NEXT, 4, 128),  # GatedDeltaNet's RMSNormGated(head_v_dim) on every rank
    (JAMBA, 2, 256 + 2 * 16), (JAMBA, 8, 256 + 2 * 16),  # Jamba's dt, B and C layernorms
])
def test_state_mixer_weights_split_by_vllm_rules(repo, tp, replicated):
    card = _card(repo)
    assert ssm_rank_params(card, 1) == ssm_params(card)
    # every rank holds 1/tp of each split tensor and the whole of each replicated one
    assert tp * ssm_rank_params(card, tp) - (tp - 1) * replicated == ssm_params(card)


def test_mamba2_single_group_weights_replicate_the_group():
    card, tp = _mamba2(n_groups=1), 4
    h, inner, n, heads = 4096, 8192, 128, 128
    in_proj = h * (2 * inner + 2 * 4 * n + heads) // tp  # z, x, B and C of the 4 (extended) groups, dt
    conv = (inner + 2 * 4 * n) // tp * 5  # 4 taps + bias per channel
    assert ssm_rank_params(card, tp) == in_proj + conv + 3 * heads // tp + inner // tp + inner // tp * h


def test_rank_breakdown_at_tp1_is_the_parameter_count():
    for repo in (QWEN3_NEXT, JAMBA, NEMOTRON, LFM25):
        card = _card(repo)
        assert sum(rank_breakdown(card, Layout(), 0, vocab_padding=1).values()) == count_params(card).total
        assert "ssm" in rank_breakdown(card, Layout(), 0)


def test_qwen3_next_tp2_matches_public_log(cli_json, tmp_path):
    """vLLM 0.10.2, 2x H200, TP 2, max_model_len 262,144 (docs/capacity.md row 16): 'Setting attention block size to
    544 tokens', 'Padding mamba page size by 1.49%', 'Available KV cache memory: 44.59 GiB', 'GPU KV cache size:
    973,760 tokens', 'Maximum concurrency for 262,144 tokens per request: 14.77x', 'Model loading took 74.2812 GiB'."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps(CONFIGS[QWEN3_NEXT]))
    d = cli_json("plan", "--hf-config", str(path), "--gpu", "H200", "--tp", "2", "--max-model-len", "262144",
                 "--kv-cache-memory", "44.59GiB", "--engine", "vllm==0.10.2")
    kv = d["kv_cache"]
    assert d["inputs"]["block_size"] == kv["block_size"] == 544
    assert kv["bytes_per_block"] == 12 * 544 * 1024  # 12 layer slots per group, 557,056 B pages
    assert (kv["groups"], kv["padding_layers"]) == (4, 0)  # 12 attention layers; 36 GDN layers in 3 groups of 12
    assert kv["num_blocks"] == int(44.59 * GIB) // (12 * 557_056) == 7162
    assert kv["blocks_per_request"] == 482 + 3  # cdiv(262,144, 544) attention pages + 1 page per state group
    assert round(d["max_concurrency"], 2) == 14.77
    assert kv["num_blocks"] // kv["groups"] * 544 == 973_760  # the log's token figure (0.10.2's formula)
    assert any("Padding mamba page size by 1.49%" in n for n in d["notes"])
    assert kv["state_bytes_per_request"] == 36 * 548_864
    # weights: the logged 74.2812 GiB to 0.2 MiB (-0.0003%), the cos/sin cache at the partial rotary width (262,144 x
    # 64 x 2 B = 32 MiB; at head_dim 256 it was 128 MiB and +0.13%)
    assert d["per_gpu"]["buffers_bytes"] == 262_144 * 64 * 2
    assert abs(d["per_gpu"]["weights_bytes"] - 74.2812 * GIB) < 2**20


def test_lfm25_matches_public_log():
    """vLLM 0.17 (MetaX plugin), LFM2.5-1.2B, max_model_len 2,048 (docs/capacity.md row 17): block 16, 'Padding mamba
    page size by 300.00%', 'Add 2 padding layers', 'GPU KV cache size: 217,264 tokens', 'Maximum concurrency for 2,048
    tokens per request: 313.37x'. The log gives no KV memory: both figures imply 40,738 blocks, whose bytes are
    passed; what is checked is the grouping, the padded page and the blocks per request."""
    card = _card(LFM25)
    r = plan(card, gpu="L4", max_model_len=2048, kv_cache_memory=40_738 * 6 * 32_768, engine="vllm==0.17")
    kv = r.kv_cache
    assert (kv.block_size, kv.groups, kv.padding_layers, kv.blocks_per_request) == (16, 3, 2, 128 + 2)
    assert kv.bytes_per_block == 6 * 16 * 2048  # a conv page (2 x 2,048 x 2 B = 8,192 B) padded to 32,768 B
    assert kv.num_blocks == 40_738 and _old_tokens(r) == 217_264
    assert round(r.max_concurrency, 2) == 313.37
    assert any("by 300.00%" in n for n in r.notes)


def test_nemotron_nano_9b_v2_block_size():
    """vllm#24280: 'large attention page sizes (672 tokens for nvidia/NVIDIA-Nemotron-Nano-9B-v2)' (Sep 2025, SSM state
    in the model dtype). Today's vLLM keeps Nemotron-H's SSM state in the config's mamba_ssm_cache_dtype (transformers'
    default float32), which doubles the page: 1,312."""
    auto = plan(_card(NEMOTRON, mamba_ssm_cache_dtype="auto"), gpu="H100-SXM", max_model_len=8192,
                kv_cache_memory="20GiB")
    # conv 3 x (10,240 + 2 x 8 x 128) x 2 B + SSM 128 x 80 x 128 x 2 B = 2,695,168 B; attention 4,096 B per token
    assert auto.kv_cache.block_size == 16 * -(-2_695_168 // (16 * 4096)) == 672
    fp32 = plan(_card(NEMOTRON), gpu="H100-SXM", max_model_len=8192, kv_cache_memory="20GiB")
    assert fp32.kv_cache.block_size == 16 * -(-(73_728 + 2 * 2_621_440) // (16 * 4096)) == 1312
    assert fp32.kv_cache.groups == 1 + 7  # 4 attention layers; 27 Mamba layers in 7 groups of 4 (1 padding slot)
    assert fp32.kv_cache.padding_layers == 1
    # vllm#23230 'Model loading took 16.5557 GiB': the parameters in bf16, to the allocator's 512-byte rounding of
    # some 340 tensors (27 x 9 Mamba, 25 x 3 MLP, 4 x 5 attention, 3 more); kvplan adds a 32 MiB rotary cache the
    # card's position: rope asks for, which Nemotron-H's attention does not have (docs/capacity.md row 19)
    params = fp32.per_gpu.weights_bytes - fp32.per_gpu.buffers_bytes - fp32.per_gpu.weights_rounding_bytes
    assert params == 2 * 8_888_227_328 and 0 < 16.5557 * GIB - params < 340 * 512


def test_fp8_kv_keeps_states_in_the_model_dtype():
    """vLLM: --kv-cache-dtype fp8 halves the attention page; mamba_cache_dtype stays auto (bfloat16), so the block
    doubles to 16 x cdiv(548,864, 16 x 512) = 1,072 tokens, whose page (548,864 B) is exactly the states': no
    padding. The fp32 k/v scales are the 12 attention layers'. (vLLM 0.27: no prefix caching for hybrids, so no
    0.33 checkpoint alignment of the block.)"""
    card = _card(QWEN3_NEXT)
    bf16 = plan(card, gpu="H200", tp=2, max_model_len=262144, kv_cache_memory="44.59GiB", engine="vllm==0.27")
    fp8 = plan(card, gpu="H200", tp=2, max_model_len=262144, kv_cache_memory="44.59GiB", kv_dtype="fp8",
               engine="vllm==0.27")
    assert fp8.kv_cache.block_size == 1072 and fp8.kv_cache.state_page_padded_bytes is None
    assert bf16.kv_cache.state_page_padded_bytes == 544 * 1024 and fp8.kv_cache.bytes_per_block == 12 * 1072 * 512
    assert fp8.kv_cache.state_bytes_per_request == bf16.kv_cache.state_bytes_per_request == 36 * 548_864
    assert fp8.per_gpu.kv_bytes_per_token * 2 == bf16.per_gpu.kv_bytes_per_token
    assert fp8.per_gpu.weights_bytes - bf16.per_gpu.weights_bytes == 12 * 2 * 4


def test_jamba_tp_layouts_and_concurrency():
    card = _card(JAMBA)
    r = plan(card, gpu="H100-SXM", tp=2, max_model_len=32768, kv_cache_memory="20GiB", engine="vllm==0.27")
    # attention 4 KV heads x 128 x 2 x 2 B = 2,048 B/token; states 3 x 4,096 x 2 + 4,096 x 16 x 2 = 155,648 B -> 80
    assert r.kv_cache.block_size == 80 and r.kv_cache.groups == 8  # 4 attention layers, 28 Mamba in 7 groups of 4
    assert r.kv_cache.bytes_per_block == 4 * 80 * 2048
    assert r.kv_cache.blocks_per_request == -(-32768 // 80) + 7
    assert r.max_concurrency == r.kv_cache.num_blocks / r.kv_cache.blocks_per_request
    assert r.per_gpu.kv_bytes_per_token == 4 * 2048  # states add nothing per token
    assert "--block-size" not in r.launch_command  # vLLM raises it itself


def test_pure_mamba_one_group_one_block_per_request():
    card = _mamba2(n_groups=8, layers=64)
    r = plan(card, gpu="H100-SXM", max_model_len=32768, kv_cache_memory="10GiB")
    state = 3 * (8192 + 2 * 8 * 128) * 2 + 128 * 64 * 128 * 2  # 2,154,496 B per layer
    assert (r.kv_cache.groups, r.kv_cache.padding_layers, r.kv_cache.blocks_per_request) == (1, 0, 1)
    assert r.kv_cache.bytes_per_block == 64 * state
    assert r.kv_cache.num_blocks == 10 * GIB // (64 * state) == r.max_concurrency
    assert r.per_gpu.kv_bytes_per_token == 0 and r.fits and r.max_model_len_fit == 32768
    assert plan(card, gpu="H100-SXM", tp=8, max_model_len=32768, kv_cache_memory="10GiB").max_concurrency > \
        7 * r.max_concurrency  # states split 8 ways


def test_sglang_state_pool_split():
    assert sg.mamba_split(1900, 100) == (1000, 9)  # budget 1900 x 0.9 / 1.9 = 900 -> 9 slots
    assert sg.mamba_split(1900, 0) == (1900, 0)
    card = _card(QWEN3_NEXT)
    r = plan(card, gpu="H100-SXM", tp=4, max_model_len=32768, engine="sglang")
    kv = r.kv_cache
    per_req = 36 * (3 * 2048 * 2 + 8 * 128 * 128 * 4)  # conv bf16, SSM float32 (SGLang's defaults), 36 GDN layers
    assert kv.state_bytes_per_request == per_req
    # 0.5.17+: the pool's padding slot (int((budget - per_slot) // per_slot))
    assert kv.state_slots == int((kv.available_bytes * 0.9 / 1.9 - per_req) // per_req)
    left = kv.available_bytes - (kv.state_slots + 1) * per_req  # the slots and the padding slot
    assert kv.tokens == left // (12 * 512 * 2)  # 12 attention layers x 1 KV head x 256 x 2 (K,V) x 2 B
    assert r.max_concurrency == min(kv.tokens / 32768, kv.state_slots)


def test_latency_of_a_hybrid_is_its_roofline_per_rank_plus_collectives(cli):
    """Qwen3-Next at TP 4: the state mixers' FLOPs and state traffic are in the roofline, so latency is each GPU's
    share, max(FLOPs / 4 / peak, that GPU's bytes / bandwidth), plus 2 all-reduces per layer (Gated DeltaNet or
    attention, then the MoE), the embedding's, and the all-gather of the batch's logits. A GPU's bytes are its
    rank's: its 2 KV heads split over 4 ranks leave each rank one (half the model's K/V, not a quarter), the states
    split by head (a quarter); its weights are its weights row less the rotary cache, its embedding shard (the 8
    tokens' rows gathered) and the experts the batch leaves idle (512 - 8 x 10, each a quarter per rank)."""
    from kvplan.cost.params import ffn_params

    card = _card(QWEN3_NEXT)
    r = plan(card, gpu="H100-SXM", tp=4, max_model_len=8192, concurrency=8)
    est = estimate(card, batch=8, seq_len=8192, prompt_len=8192, gpu="H100-SXM", engine="vllm")
    roof, lat, g = est.roofline, r.latency, r.per_gpu
    states = sum(x.total_bytes for x in est.kv_cache.groups if x.kind in ("conv_state", "ssm_state"))
    assert lat.decode_kv_read_bytes == (roof.decode_step.kv_read_bytes - states) // 2 + states // 4
    m, h = card.moe, card.hidden_size
    idle = (m.num_experts - 8 * m.experts_per_token) * card.ffn_layers[1] * ffn_params(card, m.expert_ffn_size) // 4
    assert lat.decode_weights_read_bytes == (g.weights_bytes - g.buffers_bytes - g.weights_rounding_bytes
                                             - pad_vocab(card.vocab_size) // 4 * h * 2 + 8 * h * 2 - idle * 2)
    gpu = load_gpu("H100-SXM")
    tokens_bytes = 8 * card.hidden_size * 2
    one_way = gpu.interconnect_bandwidth_bytes_per_s / 2
    reduce_s = (2 * card.num_layers + 1) * tokens_bytes * 2 * 3 / 4 / one_way
    gather_s = 3 * 8 * pad_vocab(card.vocab_size) // 4 * 2 / one_way  # the last token's logits, ring all-gather
    moved = lat.decode_weights_read_bytes + lat.decode_kv_read_bytes + lat.decode_kv_write_bytes
    step = max(roof.decode_step.flops / 4 / roof.peak_flops_per_s, moved / gpu.memory_bandwidth_bytes_per_s)
    assert lat.tpot_ms == pytest.approx((step + reduce_s + gather_s) * 1e3, rel=1e-9)
    s = search(card, max_model_len=8192, concurrency=8, gpus=["H100-SXM"])
    assert s.options and s.options[0].tpot_ms is not None


@pytest.mark.parametrize(("card", "args", "match"), [
    (lambda: _mamba2(n_groups=2), dict(tp=4), "num_groups must equal 1"),
    (lambda: _mamba2(n_groups=1), dict(tp=3), "num_heads 128 is not divisible by tensor parallel size 3"),
    (lambda: _card(JAMBA), dict(engine="sglang"), "--engine sglang: SGLang's state pool is modelled for Mamba-2"),
    (lambda: card_from_hf_config({"model_type": "recurrent_gemma", "hidden_size": 256, "num_hidden_layers": 3,
                                  "num_attention_heads": 4, "vocab_size": 1000, "intermediate_size": 512,
                                  "lru_width": 256}), {}, "--engine vllm: .*RG-LRU"),
])
def test_refusals_name_the_flag(card, args, match):
    with pytest.raises(KvplanError, match=match):
        plan(card(), gpu="H100-SXM", max_model_len=4096, **args)


def test_cli_refusal_is_one_line(cli, tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**CONFIGS[QWEN3_NEXT], "linear_num_key_heads": 6, "linear_num_value_heads": 12}))
    code, _, err = cli("plan", "--hf-config", str(path), "--gpu", "H100-SXM", "--tp", "4", "--max-model-len", "4096")
    assert code == 2 and err.strip().startswith("error: --tp: linear_num_key_heads 6") and len(err.strip().splitlines()) == 1


def test_sharded_verify_refuses_state_layers():
    pytest.importorskip("torch")
    from kvplan.verify.distributed import verify_sharded

    with pytest.raises(KvplanError, match="sharded reference model"):
        verify_sharded(_mamba2(), tp=2)


def test_longest_fit_counts_the_state_pages():
    """vLLM's binary search (_estimate_max_model_len_from_groups) with the null block reserved: one request needs
    cdiv(L, 544) attention pages + 3 state pages, each block 12 x 557,056 B; 20 blocks of memory leave 19 (vLLM
    0.29 - 0.31: the null block reserved, prefix caching on for hybrids: 2 pages per state group, 6 in all)."""
    card = _card(QWEN3_NEXT)
    bpb = 12 * 557_056
    r = plan(card, gpu="H200", tp=2, max_model_len=262144, kv_cache_memory=20 * bpb, engine="vllm==0.31")
    assert not r.fits and r.kv_cache.num_blocks == 20
    assert r.max_model_len_fit == 544 * (20 - 1 - 6)
    assert "does NOT fit" in r.verdict


KIMI_48B = {  # moonshotai/Kimi-Linear-48B-A3B-Instruct config.json (the keys kvplan reads)
    "model_type": "kimi_linear", "torch_dtype": "bfloat16", "vocab_size": 163840, "hidden_size": 2304, "head_dim": 72,
    "intermediate_size": 9216, "num_hidden_layers": 27, "num_attention_heads": 32, "num_key_value_heads": 32,
    "hidden_act": "silu", "tie_word_embeddings": False, "first_k_dense_replace": 1, "moe_intermediate_size": 1024,
    "moe_layer_freq": 1, "num_experts": 256, "num_experts_per_token": 8, "num_shared_experts": 1, "q_lora_rank": None,
    "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128, "mla_use_nope": True,
    "linear_attn_config": {"full_attn_layers": [4, 8, 12, 16, 20, 24, 27], "head_dim": 128, "num_heads": 32,
                           "short_conv_kernel_size": 4,
                           "kda_layers": [1, 2, 3, 5, 6, 7, 9, 10, 11, 13, 14, 15, 17, 18, 19, 21, 22, 23, 25, 26]}}


@pytest.mark.parametrize(("kda", "block", "page"), [
    # 4 KDA heads of 16: conv 3 x (3 x 64) x 2 B + state 4 x 16 x 16 x 4 B (float32) = 5,248 B; MLA (512 + 64) x 2 B
    # = 1,152 B a token. Alignment max(64 (FlashMLA on Hopper), 128) = 128: 128 x cdiv(5,248, 128 x 1,152) = 128
    # (an alignment of 64 would give 64)
    ({"num_heads": 4, "head_dim": 16}, 128, 128 * 1152),
    # the checkpoint: 32 heads of 128: 3 x 12,288 x 2 + 32 x 128 x 128 x 4 = 2,170,880 B -> 128 x cdiv(., 147,456)
    ({}, 1920, 1920 * 1152),
])
def test_mla_hybrid_block_is_a_multiple_of_128(kda, block, page):
    """vLLM platforms/interface.py _align_hybrid_block_size: hybrid MLA/Mamba models align the block to 128."""
    card = card_from_hf_config({**KIMI_48B, "linear_attn_config": {**KIMI_48B["linear_attn_config"], **kda}})
    r = plan(card, gpu="H100-SXM", max_model_len=4096, engine="vllm", weight_dtype="fp8")
    assert (r.kv_cache.block_size, r.kv_cache.state_page_padded_bytes) == (block, page)
    assert any(f"smallest multiple of 128 whose attention page ({page:,} B)" in n for n in r.notes)


def test_kda_plan_reports_capacity_and_latency():
    """Kimi Delta Attention's FLOPs are modelled (kvplan.cost.ssm_flops): --concurrency keeps the capacity figures
    and adds a latency bound, with no "not modelled" note."""
    card = card_from_hf_config(KIMI_48B)
    r = plan(card, gpu="H200", max_model_len=4096, engine="vllm", weight_dtype="fp8", concurrency=4)
    assert r.latency is not None and r.latency.tpot_ms > 0 and r.max_concurrency > 4
    assert not any("not modelled" in n for n in r.notes)


def test_quantized_state_card_is_refused_not_undercounted():
    """vLLM quantizes the mixers' in/out projections too; kvplan's quantization covers attention and MLP linears only,
    so a quantized card with state layers is refused instead of counting its mixers unquantized."""
    data = {**_card(QWEN3_NEXT).model_dump(exclude_none=True),
            "quantization": {"method": "fp8", "weight_scales": "block", "block": [128, 128]}}
    with pytest.raises(KvplanError, match="quantization: .* state-space layers, whose quantized mixer projections"):
        estimate(card_from_dict(data), batch=1, seq_len=64)


def test_states_keep_the_model_dtype_whatever_the_kv_dtype():
    """vLLM's mamba_cache_dtype "auto" is the model dtype: a bf16 Qwen3-Next keeps bf16 conv states and recurrent
    states beside an fp8 (e4m3 or e5m2) K/V cache, so the unpadded state page does not change with --kv-dtype."""
    card = _card(QWEN3_NEXT)
    pages = {kv: plan(card, gpu="H200", tp=2, max_model_len=4096, kv_dtype=kv).kv_cache.state_page_bytes
             for kv in (None, "fp8_e5m2", "fp8")}
    assert pages["fp8_e5m2"] == pages["fp8"] == pages[None] > 0


def test_quantized_kv_leaves_states_in_the_model_dtype_in_estimates():
    """estimate/sweep, like plan: fp8 K/V halve the attention bytes of a bf16 Jamba, its states stay bf16 (the SSM
    state in vLLM's mamba_ssm_cache_dtype, "auto": bf16)."""
    card = _card(JAMBA)
    bf16, fp8 = (estimate(card, batch=2, seq_len=1024, engine="vllm", kv_dtype=kv, engine_groups=False)
                 for kv in ("bf16", "fp8"))  # the per-layer table (vLLM's page padding: test_estimate_engine_fold)
    parts = [{g.kind: g.total_bytes for g in e.kv_cache.groups} for e in (bf16, fp8)]
    kv_bf16 = 2 * 1024 * card.attention_layers * 2 * card.num_kv_heads * card.head_dim * 2
    assert parts[0]["full"] == kv_bf16 and parts[1]["full"] == kv_bf16 // 2
    states = [{k: v for k, v in p.items() if k != "full"} for p in parts]
    assert states[0] == states[1] and set(states[0]) == {"conv_state", "ssm_state"}


def test_attention_free_transformers_plan_has_no_token_blocks():
    """Mamba-Codestral on transformers' StaticCache: no attention, so no per-token positions (0 blocks, 0 per
    request); concurrency is the memory over one request's states."""
    r = plan("mamba-codestral-7b", engine="hf-static", gpu="H100-SXM", max_model_len=4096)
    pool = r.kv_cache
    assert (pool.bytes_per_block, pool.num_blocks, pool.blocks_per_request) == (0, 0, 0)
    assert r.max_concurrency == pool.available_bytes / pool.state_bytes_per_request
