"""kvplan.cost.flops against torch's FlopCounterMode on tiny transformers models (CPU, eager attention), exactly.

Each case builds a transformers model from a tiny config and the kvplan card with the same numbers, written by hand,
then compares a prefill forward (P tokens, logits at all positions: the hf engines) and one decode step with a
DynamicCache of L tokens, component by component: all matmuls, the attention core (every bmm), the LM head.
"""

from __future__ import annotations

import pytest

from kvplan import KvplanError
from kvplan.model.catalog import card_from_dict, load_card
from kvplan.cost.flops import decode_step_flops, prefill_flops, step_flops
from kvplan.cost.params import count_params
from kvplan.model.hf.config import card_from_hf_config
from kvplan.cost.runtimes import get_engine  # noqa: E402

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
from tiny_models import count_flops  # noqa: E402

B, P, L = 2, 11, 9  # batch, prompt tokens, cached tokens before the decode step
W = 4  # sliding window, below P and L so that windows bite
V, H, HEADS, KV, FFN = 64, 32, 4, 2, 48

CARD = dict(source="test", num_layers=2, hidden_size=H, num_heads=HEADS, num_kv_heads=KV, ffn_size=FFN,
            gated_ffn=True, activation="silu", vocab_size=V, tie_embeddings=False, norm="rmsnorm", position="rope",
            max_position_embeddings=128, dtype="float32")
LLAMA = dict(vocab_size=V, hidden_size=H, intermediate_size=FFN, num_hidden_layers=2, num_attention_heads=HEADS,
             num_key_value_heads=KV, max_position_embeddings=128)
MLA = dict(kv_lora_rank=12, qk_rope_head_dim=4, qk_nope_head_dim=6, v_head_dim=5)
DEEPSEEK = dict(LLAMA, num_hidden_layers=3, num_key_value_heads=HEADS, n_routed_experts=8, num_experts_per_tok=2,
                moe_intermediate_size=16, n_shared_experts=2, first_k_dense_replace=1, n_group=2, topk_group=1,
                q_lora_rank=10, **MLA)
DEEPSEEK_CARD = dict(CARD, num_layers=3, num_kv_heads=None, mla=dict(MLA, q_lora_rank=10),
                     moe=dict(num_experts=8, experts_per_token=2, expert_ffn_size=16, num_shared_experts=2,
                              first_dense_layers=1))

CASES = {  # name: (transformers model_type, config kwargs, card fields)
    "llama-gqa": ("llama", LLAMA, {}),
    "llama-mqa": ("llama", dict(LLAMA, num_key_value_heads=1), dict(num_kv_heads=1)),
    "mistral-sliding": ("mistral", dict(LLAMA, sliding_window=W), dict(sliding_window=W)),
    "gemma2": ("gemma2", dict(LLAMA, head_dim=10, sliding_window=W, query_pre_attn_scalar=10,
                              hidden_activation="gelu_pytorch_tanh"),
               dict(head_dim=10, sliding_window=W, layer_pattern=["sliding", "global"], activation="gelu_tanh",
                    tie_embeddings=True, norms_per_layer=4)),
    "qwen2": ("qwen2", LLAMA, dict(qkv_bias=True)),
    "qwen3": ("qwen3", dict(LLAMA, head_dim=12), dict(head_dim=12, qk_norm=True)),
    "gpt2": ("gpt2", dict(vocab_size=V, n_embd=H, n_layer=2, n_head=HEADS, n_positions=128, bos_token_id=0,
                          eos_token_id=0),
             dict(num_kv_heads=None, ffn_size=4 * H, gated_ffn=False, activation="gelu_tanh", norm="layernorm",
                  position="learned", tie_embeddings=True, qkv_bias=True, out_bias=True, mlp_bias=True)),
    "falcon-mqa": ("falcon", dict(vocab_size=V, hidden_size=H, num_hidden_layers=2, num_attention_heads=HEADS,
                                  multi_query=True, parallel_attn=True, bias=False, alibi=False),
                   dict(num_kv_heads=1, ffn_size=4 * H, gated_ffn=False, activation="gelu", norm="layernorm",
                        norms_per_layer=1, max_position_embeddings=2048)),
    "falcon-gqa": ("falcon", dict(vocab_size=V, hidden_size=H, num_hidden_layers=2, num_attention_heads=HEADS,
                                  num_kv_heads=KV, new_decoder_architecture=True, bias=False, alibi=False),
                   dict(ffn_size=4 * H, gated_ffn=False, activation="gelu", norm="layernorm",
                        max_position_embeddings=2048)),
    "mixtral": ("mixtral", dict(LLAMA, num_local_experts=4, num_experts_per_tok=2),
                dict(moe=dict(num_experts=4, experts_per_token=2, expert_ffn_size=FFN))),
    "deepseek-v3": ("deepseek_v3", DEEPSEEK, DEEPSEEK_CARD),
    "deepseek-v3-no-q-lora": ("deepseek_v3", dict(DEEPSEEK, q_lora_rank=None),
                              dict(DEEPSEEK_CARD, mla=dict(MLA))),
}


def make_card(name: str, fields: dict):
    return card_from_dict({**CARD, "name": name, **fields})


def build(model_type: str, kwargs: dict):
    torch.manual_seed(0)
    config = transformers.CONFIG_MAPPING[model_type](**kwargs)
    # experts_implementation="eager": the default grouped_mm runs torch._grouped_mm, which FlopCounterMode does not
    # count at all (routed experts would read 0 FLOPs); the eager loop runs one F.linear per expert hit.
    return transformers.AutoModelForCausalLM.from_config(
        config, attn_implementation="eager", experts_implementation="eager").eval()


def measured(model_type: str, kwargs: dict) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    model = build(model_type, kwargs)
    ids = torch.randint(0, V, (B, P))
    prefill = count_flops(lambda: model(ids, use_cache=False))
    with torch.no_grad():
        cache = model(ids[:, :L], use_cache=True).past_key_values
    decode = count_flops(lambda: model(ids[:, L:L + 1], past_key_values=cache, use_cache=True))
    assert cache.get_seq_length() == L + 1  # the step appended its token: it attended L + 1 positions
    return prefill, decode


@pytest.mark.parametrize("case", list(CASES))
def test_matches_flop_counter(case):
    model_type, kwargs, fields = CASES[case]
    card = make_card(case, fields)
    prefill, decode = measured(model_type, kwargs)
    pre = prefill_flops(card, batch=B, prompt_len=P, engine=get_engine("hf-dynamic"))
    dec = decode_step_flops(card, batch=B, cache_len=L, engine=get_engine("hf-dynamic"))
    assert (pre.total, pre.attention_core, pre.lm_head) == prefill
    assert (dec.total, dec.attention_core, dec.lm_head) == decode


def test_static_cache_decode_scores_every_slot():
    """StaticCache: the decode step scores all max_cache_len slots (masked), sliding layers min(max_cache_len, W)."""
    model_type, kwargs, fields = CASES["gemma2"]
    model, card, max_len = build(model_type, kwargs), make_card("gemma2", fields), 16
    ids = torch.randint(0, V, (B, L + 1))
    cache = transformers.StaticCache(config=model.config, max_cache_len=max_len)
    with torch.no_grad():
        model(ids[:, :L], past_key_values=cache, use_cache=True)
    total, core, _ = count_flops(lambda: model(ids[:, L:], past_key_values=cache, use_cache=True,
                                         cache_position=torch.tensor([L])))
    dec = decode_step_flops(card, batch=B, cache_len=L, engine=get_engine("hf-static"), max_cache_len=max_len)
    assert (dec.total, dec.attention_core) == (total, core)
    assert dec.attention_core > decode_step_flops(card, batch=B, cache_len=L, engine=get_engine("hf-dynamic")).attention_core


@pytest.mark.parametrize(("case", "prompt"), [("llama-gqa", 11), ("gemma2", 3), ("gemma2", 11)])
def test_static_cache_prefill(case, prompt):
    """StaticCache prefill: full layers score all slots; sliding layers their min(max_cache_len, W) slots, or the
    P new states when P overflows them (StaticSlidingWindowLayer.update)."""
    model_type, kwargs, fields = CASES[case]
    model, card, max_len = build(model_type, kwargs), make_card(case, fields), 16
    ids = torch.randint(0, V, (B, prompt))
    cache = transformers.StaticCache(config=model.config, max_cache_len=max_len)
    measured_counts = count_flops(lambda: model(ids, past_key_values=cache, use_cache=True))
    pre = prefill_flops(card, batch=B, prompt_len=prompt, engine=get_engine("hf-static"), max_cache_len=max_len)
    assert (pre.total, pre.attention_core, pre.lm_head) == measured_counts


# ---- independently known numbers ---------------------------------------------------------------------------------

def test_dense_matmuls_are_two_flops_per_weight_per_token():
    """Kaplan et al. 2020 (arXiv:2001.08361): forward ~ 2 N per token; exactly 2 x (non-embedding weights + LM head)
    for the linear layers, plus the attention core 2 x 2 x P x keys x heads x head_dim per layer."""
    card = load_card("llama-2-7b")
    p = count_params(card)
    weights = p.attention + p.mlp + p.lm_head  # Llama: no biases, so every one of these weights is in a matmul
    pre = prefill_flops(card, batch=3, prompt_len=100, engine=get_engine("hf-dynamic"))
    assert pre.projections + pre.mlp + pre.lm_head == 2 * 3 * 100 * weights
    assert pre.attention_core == 32 * 4 * 3 * 100 * 100 * 4096  # layers x 4 P L d x batch, d = heads x head_dim
    assert pre.causal_attention_core == 32 * 4 * 3 * (100 * 101 // 2) * 4096


def test_decode_step_llama_2_7b():
    card = load_card("llama-2-7b")
    dec = decode_step_flops(card, batch=1, cache_len=4095)
    p = count_params(card)
    matmul_weights = p.total - p.embedding - p.norms  # norms are elementwise: 0 FLOPs
    assert p.norms == 65 * 4096  # 2 per layer + the final one
    assert dec.total == 2 * matmul_weights + 32 * 4 * 4096 * 4096
    assert dec.causal_total == dec.total  # one query row: nothing to skip


def test_lm_head_per_engine():
    card = load_card("llama-2-7b")
    hf = prefill_flops(card, batch=2, prompt_len=10, engine=get_engine("hf-dynamic"))
    vllm = prefill_flops(card, batch=2, prompt_len=10, engine=get_engine("vllm"))
    assert hf.lm_head == 2 * 2 * 10 * 4096 * 32000 and vllm.lm_head == 2 * 2 * 4096 * 32000
    assert hf.total - vllm.total == hf.lm_head - vllm.lm_head


def test_sliding_window_causal_counts_only_the_window():
    card = load_card("mistral-7b-v0.1")  # W = 4096 on every layer
    pre = prefill_flops(card, batch=1, prompt_len=8192)
    per_entry = 2 * 32 * 2 * 128 * 32  # QK + AV, heads x head_dim, 32 layers
    assert pre.causal_attention_core == per_entry * (4096 * 4097 // 2 + 4096 * 4096)
    assert pre.attention_core == per_entry * 8192 * 8192
    dec = decode_step_flops(card, batch=1, cache_len=10_000)
    assert dec.attention_core == dec.causal_attention_core == per_entry * 4096


def test_mla_modes():
    card = load_card("deepseek-v3")
    m = card.mla
    hf = decode_step_flops(card, batch=1, cache_len=999, engine=get_engine("hf-dynamic"))
    vllm = decode_step_flops(card, batch=1, cache_len=999, engine=get_engine("vllm"))
    assert (hf.mla_mode, vllm.mla_mode) == ("expand", "absorb")
    assert prefill_flops(card, batch=1, prompt_len=8, engine=get_engine("vllm")).mla_mode == "expand"
    assert vllm.attention_core == 61 * 2 * 1000 * 128 * (2 * m.kv_lora_rank + m.qk_rope_head_dim)
    up = m.kv_lora_rank * 128 * (m.qk_nope_head_dim + m.v_head_dim)  # kv_b_proj weights per layer
    assert hf.projections - vllm.projections == 61 * 2 * (1000 - 1) * up  # expand re-projects 999 more positions
    assert prefill_flops(load_card("llama-2-7b"), batch=1, prompt_len=8).mla_mode is None


def test_flops_result_json_and_errors():
    res = step_flops(load_card("llama-2-7b"), batch=1, prompt_len=16, seq_len=32)
    assert set(res.model_dump()) == {"prefill", "decode_step"}
    assert res.decode_step.attention_core == 32 * 4 * 32 * 4096  # 32 keys: the step that makes 32 tokens
    assert res.prefill.causal_total < res.prefill.total and res.decode_step.mla_mode is None
    with pytest.raises(KvplanError, match="engine"):
        prefill_flops(load_card("llama-2-7b"), batch=1, prompt_len=4, engine=get_engine("lmdeploy"))
    with pytest.raises(KvplanError, match="max-cache-len"):
        decode_step_flops(load_card("llama-2-7b"), batch=1, cache_len=4, engine=get_engine("hf-static"), max_cache_len=4)
    with pytest.raises(KvplanError, match="--encoder-len: t5-base is encoder-decoder"):
        prefill_flops(load_card("t5-base"), batch=1, prompt_len=4)
    with pytest.raises(KvplanError, match="encoder-only"):
        prefill_flops(load_card("bert-base-uncased"), batch=1, prompt_len=4)


def test_t5_encoder_decoder_matches_flop_counter():
    """T5: the encoder over E tokens once, the decoder over P prompt tokens with cross-attention whose K/V are
    projected once at prefill and read from the EncoderDecoderCache afterwards."""
    E = 7
    config = transformers.T5Config(vocab_size=V, d_model=H, d_kv=8, d_ff=FFN, num_layers=2, num_heads=HEADS,
                                   decoder_start_token_id=0, feed_forward_proj="gated-gelu")
    torch.manual_seed(0)
    model = transformers.T5ForConditionalGeneration._from_config(config, attn_implementation="eager").eval()
    card = card_from_hf_config(config.to_dict())
    enc, dec = torch.randint(0, V, (B, E)), torch.randint(0, V, (B, P))
    prefill = count_flops(lambda: model(input_ids=enc, decoder_input_ids=dec[:, :L], use_cache=True))
    with torch.no_grad():
        out = model(input_ids=enc, decoder_input_ids=dec[:, :L], use_cache=True)
    decode = count_flops(lambda: model(encoder_outputs=(out.encoder_last_hidden_state,), decoder_input_ids=dec[:, L:L + 1],
                                 past_key_values=out.past_key_values, use_cache=True))
    pre = prefill_flops(card, batch=B, prompt_len=L, engine=get_engine("hf-dynamic"), encoder_len=E)
    step = decode_step_flops(card, batch=B, cache_len=L, engine=get_engine("hf-dynamic"), encoder_len=E)
    assert (pre.total, pre.attention_core, pre.lm_head) == prefill
    assert (step.total, step.attention_core, step.lm_head) == decode
