"""Case tables the tiny-model test files share: (name, transformers model_type, config kwargs) per case, and the
full-size config.json values some of them check. Plain data (no torch); the test ids are the case names.

STATE_CASES: Mamba / Mamba-2 models and attention hybrids (tests/test_state_layers.py, tests/test_flops_states.py).
HYBRID_CASES: hybrids of attention, state-space mixers and MoE, linear-attention hybrids (tests/test_state_layers_2.py,
tests/test_flops_states.py). KIMI_CASES: Kimi-Linear and OLMo-hybrid (tests/test_state_layers_kimi.py,
tests/test_flops_kda.py). ZAMBA_CASES: ERNIE-4.5-MoE and the Zamba hybrids (tests/test_hf_zamba.py,
tests/test_flops_shared.py)."""

IDS = dict(pad_token_id=0, bos_token_id=0, eos_token_id=0)
BASE = dict(hidden_size=64, vocab_size=128, **IDS)
ATTN = dict(num_attention_heads=4, num_key_value_heads=2, intermediate_size=96)

STATE_CASES = [
    ("mamba", "mamba", dict(BASE, num_hidden_layers=2, state_size=8)),
    ("mamba-biases-rank", "mamba", dict(BASE, num_hidden_layers=2, state_size=8, time_step_rank=6, use_bias=True,
                                        use_conv_bias=False, conv_kernel=3, expand=3)),
    ("falcon_mamba", "falcon_mamba", dict(BASE, num_hidden_layers=2, state_size=8)),
    ("mamba2", "mamba2", dict(BASE, num_hidden_layers=2, state_size=8, num_heads=8, head_dim=16, n_groups=2)),
    ("bamba", "bamba", dict(BASE, **ATTN, num_hidden_layers=3, mamba_n_heads=8, mamba_d_head=16, mamba_n_groups=2,
                            mamba_d_state=8, attn_layer_indices=[1], mamba_proj_bias=True, attention_bias=True)),
    ("nemotron_h", "nemotron_h", dict(BASE, **ATTN, head_dim=16, mamba_num_heads=4, mamba_head_dim=16, n_groups=2,
                                      ssm_state_size=8, conv_kernel=3, use_bias=True, mlp_bias=True,
                                      layers_block_type=["mamba", "mlp", "mamba", "attention", "mlp"])),
    # Nemotron-3 Nano's blocks: MoE of squared-ReLU experts with a shared MLP, after a dense mlp block
    ("nemotron_h-moe", "nemotron_h", dict(BASE, **ATTN, head_dim=16, mamba_num_heads=4, mamba_head_dim=16, n_groups=2,
                                          ssm_state_size=8, conv_kernel=3, n_routed_experts=4, num_experts_per_tok=2,
                                          moe_intermediate_size=32, moe_shared_expert_intermediate_size=48,
                                          layers_block_type=["mamba", "mlp", "attention", "moe", "mamba", "moe"])),
]

MAMBA2 = dict(mamba_n_heads=8, mamba_d_state=8, mamba_n_groups=2)
GDN = dict(linear_num_value_heads=4, linear_num_key_heads=2, linear_key_head_dim=16, linear_value_head_dim=8)
HYBRID_CASES = [
    ("granite-moe-hybrid", "granitemoehybrid", dict(
        BASE, **ATTN, **MAMBA2, num_hidden_layers=3, shared_intermediate_size=80, num_local_experts=4,
        num_experts_per_tok=2, layer_types=["mamba", "attention", "mamba"], position_embedding_type="rope",
        attention_bias=True, mamba_proj_bias=True)),
    ("granite-hybrid-dense-nope", "granitemoehybrid", dict(
        BASE, **ATTN, **MAMBA2, num_hidden_layers=4, shared_intermediate_size=80, num_local_experts=0,
        layer_types=["mamba", "mamba", "mamba", "attention"], mamba_d_conv=3)),
    # granite-4.0-micro: the hybrid class with attention layers only (no Mamba-2 mixer) and no experts
    ("granite-dense-attention", "granitemoehybrid", dict(
        BASE, **ATTN, **MAMBA2, num_hidden_layers=3, shared_intermediate_size=80, num_local_experts=0,
        layer_types=["attention"] * 3, position_embedding_type="rope")),
    ("jamba", "jamba", dict(BASE, **ATTN, num_hidden_layers=4, mamba_d_state=8, num_experts=4, num_experts_per_tok=2,
                            attn_layer_period=2, attn_layer_offset=1)),
    ("jamba-dense-rank", "jamba", dict(BASE, **ATTN, num_hidden_layers=3, mamba_d_state=8, num_experts=1,
                                       attn_layer_period=3, attn_layer_offset=0, mamba_dt_rank=6,
                                       mamba_proj_bias=True, mamba_conv_bias=False)),
    ("falcon-h1", "falcon_h1", dict(BASE, **ATTN, **MAMBA2, num_hidden_layers=2, head_dim=16, mamba_d_ssm=128,
                                    mamba_rms_norm=True, projectors_bias=True, attention_bias=True)),
    ("falcon-h1-no-norm", "falcon_h1", dict(BASE, **ATTN, **MAMBA2, num_hidden_layers=2, mamba_d_ssm=None,
                                            mlp_bias=True, mamba_proj_bias=True)),
    ("qwen3-next", "qwen3_next", dict(BASE, **ATTN, **GDN, num_hidden_layers=4, head_dim=16, num_experts=4,
                                      num_experts_per_tok=2, moe_intermediate_size=32,
                                      shared_expert_intermediate_size=48)),
    ("qwen3-next-dense-bias", "qwen3_next", dict(BASE, **ATTN, **GDN, num_hidden_layers=3, head_dim=8, num_experts=0,
                                                 attention_bias=True, linear_conv_kernel_dim=3,
                                                 layer_types=["full_attention", "linear_attention",
                                                              "linear_attention"])),
    ("qwen3.5", "qwen3_5_text", dict(BASE, **ATTN, **GDN, num_hidden_layers=4, head_dim=16)),
    ("qwen3.5-moe", "qwen3_5_moe_text", dict(BASE, **{k: v for k, v in ATTN.items() if k != "intermediate_size"},
                                             **GDN, num_hidden_layers=4, head_dim=16, num_experts=4,
                                             num_experts_per_tok=2, moe_intermediate_size=32,
                                             shared_expert_intermediate_size=48)),
    ("minimax", "minimax", dict(BASE, **ATTN, num_hidden_layers=3, head_dim=16, num_local_experts=4,
                                num_experts_per_tok=2)),
    ("minimax-linear-last", "minimax", dict(BASE, **ATTN, num_hidden_layers=4, num_local_experts=2,
                                            num_experts_per_tok=1, layer_types=["linear_attention"] * 3
                                            + ["full_attention"])),
    ("recurrent-gemma", "recurrent_gemma", dict(BASE, **{**ATTN, "num_key_value_heads": 1}, num_hidden_layers=3,
                                                attention_window_size=3)),
    ("recurrent-gemma-lru-bias", "recurrent_gemma", dict(BASE, **ATTN, num_hidden_layers=4, lru_width=96,
                                                         conv1d_width=3, attention_bias=True, attention_window_size=5,
                                                         block_types=["recurrent", "attention"])),
    ("lfm2", "lfm2", dict(BASE, **ATTN, num_hidden_layers=3, layer_types=["conv", "full_attention", "conv"])),
    ("lfm2-moe", "lfm2_moe", dict(BASE, **ATTN, num_hidden_layers=4, moe_intermediate_size=32, num_experts=4,
                                  num_experts_per_tok=2, num_dense_layers=1,
                                  layer_types=["conv", "full_attention", "conv", "conv"])),
    ("lfm2-bias-ffn", "lfm2", dict(BASE, **{**ATTN, "intermediate_size": 120}, num_hidden_layers=4,
                                   full_attn_idxs=[2], conv_bias=True, conv_L_cache=4, block_ffn_dim_multiplier=1.5,
                                   block_multiple_of=32)),
]

# Full-size config.json values (sizes and layer rules; Jamba-v0.1's are the JambaConfig defaults). Not bundled as
# cards yet: report, sweep, verify and the vLLM/SGLang per-rank planners still refuse state layers.
JAMBA_V01 = {
    "model_type": "jamba", "_name_or_path": "ai21labs/Jamba-v0.1", "torch_dtype": "bfloat16",
    "vocab_size": 65536, "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
    "num_attention_heads": 32, "num_key_value_heads": 8, "hidden_act": "silu", "max_position_embeddings": 262144,
    "tie_word_embeddings": False, "num_experts": 16, "num_experts_per_tok": 2, "expert_layer_period": 2,
    "expert_layer_offset": 1, "attn_layer_period": 8, "attn_layer_offset": 4, "mamba_d_state": 16, "mamba_d_conv": 4,
    "mamba_expand": 2, "mamba_dt_rank": 256, "mamba_conv_bias": True, "mamba_proj_bias": False,
}
QWEN3_NEXT_80B = {
    "model_type": "qwen3_next", "_name_or_path": "Qwen/Qwen3-Next-80B-A3B-Instruct", "torch_dtype": "bfloat16",
    "vocab_size": 151936, "hidden_size": 2048, "intermediate_size": 5120, "num_hidden_layers": 48,
    "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 256, "hidden_act": "silu",
    "max_position_embeddings": 262144, "tie_word_embeddings": False, "attention_bias": False,
    "full_attention_interval": 4, "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128,
    "linear_value_head_dim": 128, "linear_num_key_heads": 16, "linear_num_value_heads": 32,
    "decoder_sparse_step": 1, "mlp_only_layers": [], "num_experts": 512, "num_experts_per_tok": 10,
    "moe_intermediate_size": 512, "shared_expert_intermediate_size": 512, "norm_topk_prob": True,
}

MLA = dict(kv_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=16, v_head_dim=12)
KIMI = dict(BASE, **MLA, num_attention_heads=4, num_key_value_heads=4, intermediate_size=96, num_hidden_layers=5,
            linear_head_dim=8, linear_num_heads=4, num_experts=4, num_experts_per_token=2, moe_intermediate_size=32)
OLMO = dict(BASE, num_attention_heads=4, intermediate_size=96)
KIMI_CASES = [
    # every 4th layer (i > 0) MLA, layer 0 dense then MoE with one shared expert, no query compression
    ("kimi", "kimi_linear", dict(KIMI)),
    # the checkpoint's 1-based layer lists and KDA sizes in linear_attn_config (winning over linear_head_dim), query
    # compression, biased MLA projections, two shared experts, two dense layers, kernel 3; tie_word_embeddings
    # ignored (KimiLinearForCausalLM ties nothing)
    ("kimi-edges", "kimi_linear", dict(KIMI, num_hidden_layers=4, q_lora_rank=24, attention_bias=True,
                                       num_shared_experts=2, first_k_dense_replace=2, tie_word_embeddings=True,
                                       linear_attn_config={"full_attn_layers": [1, 3], "kda_layers": [2, 4],
                                                           "head_dim": 16, "num_heads": 2,
                                                           "short_conv_kernel_size": 3})),
    # explicit layer_types and mlp_layer_types: all MoE, no shared expert
    ("kimi-all-moe", "kimi_linear", dict(KIMI, num_hidden_layers=3, num_shared_experts=0,
                                         layer_types=["full_attention", "linear_attention", "linear_attention"],
                                         mlp_layer_types=["sparse"] * 3)),
    # no sparse layer: dense MLPs everywhere (the card has no MoE block)
    ("kimi-dense", "kimi_linear", dict(KIMI, num_hidden_layers=3, first_k_dense_replace=3,
                                       layer_types=["linear_attention", "full_attention", "linear_attention"])),
    # the config class's derived widths (key heads = value heads = 4, key 3 x 64 // 16 = 12, value 24), every 4th
    ("olmo-hybrid", "olmo_hybrid", dict(OLMO, num_hidden_layers=4)),
    # GQA attention with biases, grouped linear heads (2 key heads for 4 value heads), explicit layer_types
    ("olmo-hybrid-gqa", "olmo_hybrid", dict(OLMO, num_key_value_heads=2, num_hidden_layers=3, attention_bias=True,
                                            linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=16,
                                            linear_value_head_dim=8, linear_conv_kernel_dim=3,
                                            layer_types=["linear_attention", "full_attention", "linear_attention"])),
    # fewer than 4 layers without layer_types: the last layer attends
    ("olmo-hybrid-last", "olmo_hybrid", dict(OLMO, num_hidden_layers=2, head_dim=8)),
]

# Kimi-Linear-48B-A3B-Instruct config.json (moonshotai; the remote-code keys transformers 5.x reads through its
# attribute_map and linear_attn_config)
KIMI_48B = {
    "model_type": "kimi_linear", "_name_or_path": "moonshotai/Kimi-Linear-48B-A3B-Instruct", "torch_dtype": "bfloat16",
    "vocab_size": 163840, "hidden_size": 2304, "head_dim": 72, "intermediate_size": 9216, "num_hidden_layers": 27,
    "num_attention_heads": 32, "num_key_value_heads": 32, "hidden_act": "silu", "tie_word_embeddings": False,
    "first_k_dense_replace": 1, "moe_intermediate_size": 1024, "moe_layer_freq": 1, "num_experts": 256,
    "num_experts_per_token": 8, "num_shared_experts": 1, "q_lora_rank": None, "kv_lora_rank": 512,
    "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128, "mla_use_nope": True,
    "model_max_length": 1048576, "linear_attn_config": {
        "full_attn_layers": [4, 8, 12, 16, 20, 24, 27], "head_dim": 128, "num_heads": 32, "short_conv_kernel_size": 4,
        "kda_layers": [1, 2, 3, 5, 6, 7, 9, 10, 11, 13, 14, 15, 17, 18, 19, 21, 22, 23, 25, 26]},
}

MOE = dict(moe_intermediate_size=32, moe_num_experts=4, moe_k=2)
Z2_TYPES = ["linear_attention", "hybrid", "hybrid", "linear_attention", "hybrid", "linear_attention"]
ZAMBA_CASES = [
    ("zamba", "zamba", dict(BASE, **ATTN, num_hidden_layers=7, mamba_d_state=8, attn_layer_period=2,
                            attn_layer_offset=1)),
    ("zamba-mha-biases", "zamba", dict(BASE, num_attention_heads=4, num_key_value_heads=4, intermediate_size=80, num_hidden_layers=4,
                                       mamba_d_state=8, n_mamba_heads=4, mamba_dt_rank=6, mamba_proj_bias=True,
                                       mamba_conv_bias=False, mamba_d_conv=3, attention_head_dim=24,
                                       layers_block_type=["hybrid", "mamba", "hybrid", "hybrid"])),
    ("zamba2-adapters", "zamba2", dict(BASE, num_attention_heads=4, intermediate_size=96, num_hidden_layers=6,
                                       mamba_d_state=8, num_mem_blocks=2, use_shared_attention_adapter=True,
                                       adapter_rank=4, layers_block_type=Z2_TYPES)),
    ("zamba2-gqa-rope-bias", "zamba2", dict(BASE, **ATTN, num_hidden_layers=4, mamba_d_state=8, n_mamba_heads=4,
                                            mamba_ngroups=2, add_bias_linear=True, use_mem_rope=True, mamba_d_conv=3,
                                            layers_block_type=["hybrid", "mamba", "hybrid", "hybrid"])),
    ("zamba2-blocks-beyond-calls", "zamba2", dict(BASE, num_attention_heads=4, num_hidden_layers=3, mamba_d_state=8,
                                                  num_mem_blocks=3, adapter_rank=8,
                                                  layers_block_type=["mamba", "hybrid", "hybrid"])),
    ("ernie4.5-moe", "ernie4_5_moe", dict(BASE, **ATTN, **MOE, num_hidden_layers=4)),
    ("ernie4.5-moe-window", "ernie4_5_moe", dict(BASE, **ATTN, **MOE, num_hidden_layers=6, moe_layer_start_index=0,
                                                 moe_layer_end_index=3, moe_layer_interval=2,
                                                 moe_num_shared_experts=0)),
    ("ernie4.5-moe-dense-bias", "ernie4_5_moe", dict(BASE, **ATTN, num_hidden_layers=3, use_bias=True,
                                                     moe_layer_start_index=5)),
]
