"""transformers' config-class defaults for the model types of families_zamba (ERNIE-4.5-MoE, Zamba, Zamba2): the
behavioural keys and the MoE / mixer / shared-block knobs a config.json may omit, read from the transformers 5.23
config classes (a field's default; checked against the installed transformers in tests/test_hf_zamba.py). Zamba's
num_key_value_heads defaults to 16 and ERNIE-4.5-MoE's to 4, whatever num_attention_heads is."""

DEFAULTS_ZAMBA: dict[str, dict] = {
    "ernie4_5_moe": {"hidden_act": "silu", "max_position_embeddings": 131072, "tie_word_embeddings": True,
                     "use_bias": False, "num_key_value_heads": 4, "moe_intermediate_size": 1536, "moe_k": 6,
                     "moe_num_experts": 64, "moe_num_shared_experts": 2, "moe_layer_start_index": 1,
                     "moe_layer_end_index": -1, "moe_layer_interval": 1},
    "zamba": {"hidden_act": "gelu", "max_position_embeddings": 4096, "tie_word_embeddings": True,
              "num_key_value_heads": 16, "n_mamba_heads": 2, "attn_layer_period": 6, "attn_layer_offset": 4,
              "mamba_d_state": 16, "mamba_d_conv": 4, "mamba_expand": 2, "mamba_dt_rank": "auto",
              "mamba_conv_bias": True, "mamba_proj_bias": False},
    "zamba2": {"hidden_act": "gelu", "max_position_embeddings": 4096, "tie_word_embeddings": True,
               "mamba_d_state": 64, "mamba_d_conv": 4, "mamba_expand": 2, "mamba_ngroups": 1, "n_mamba_heads": 8,
               "chunk_size": 256, "add_bias_linear": False, "num_mem_blocks": 1, "use_shared_attention_adapter": False,
               "adapter_rank": 128, "use_mem_rope": False, "use_long_context": False},
}
