"""Full-size config.json values of the bundled 2025 cards, as the public config.json files on the Hugging Face hub
give them (the keys kvplan reads; typed from the files, not downloaded in the tests)."""

GPT_OSS = dict(model_type="gpt_oss", hidden_size=2880, intermediate_size=2880, num_attention_heads=64,
               num_key_value_heads=8, head_dim=64, num_experts_per_tok=4, vocab_size=201088, sliding_window=128,
               max_position_embeddings=131072, tie_word_embeddings=False, attention_bias=True,
               rope_scaling={"beta_fast": 32.0, "beta_slow": 1.0, "factor": 32.0,
                             "original_max_position_embeddings": 4096, "rope_type": "yarn", "truncate": False},
               torch_dtype="bfloat16", hidden_act="silu",
               quantization_config={"quant_method": "mxfp4", "modules_to_not_convert": [
                   "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]})
CONFIGS = {
    "gpt-oss-20b": dict(GPT_OSS, _name_or_path="openai/gpt-oss-20b", num_hidden_layers=24, num_local_experts=32,
                        layer_types=["sliding_attention", "full_attention"] * 12),
    "gpt-oss-120b": dict(GPT_OSS, _name_or_path="openai/gpt-oss-120b", num_hidden_layers=36, num_local_experts=128,
                         layer_types=["sliding_attention", "full_attention"] * 18),
    "smollm3-3b": dict(model_type="smollm3", _name_or_path="HuggingFaceTB/SmolLM3-3B", hidden_size=2048,
                       intermediate_size=11008, num_hidden_layers=36, num_attention_heads=16, num_key_value_heads=4,
                       vocab_size=128256, max_position_embeddings=65536, tie_word_embeddings=True,
                       torch_dtype="bfloat16", hidden_act="silu", use_sliding_window=False, sliding_window=None,
                       attention_bias=False, mlp_bias=False),
}
