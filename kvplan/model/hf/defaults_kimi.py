"""transformers' config-class defaults for kimi_linear and olmo_hybrid (families_kimi): behavioural keys, the conv
kernel and the MoE / dense-layer knobs a config.json may omit (never the hidden, head, latent or expert widths), read
from the transformers 5.23 config classes. Kimi-Linear's are stored under the names ``to_dict`` writes (its
attribute_map: num_experts_per_tok -> num_experts_per_token, n_shared_experts -> num_shared_experts,
max_position_embeddings -> model_max_length); first_k_dense_replace is the ``__post_init__`` kwarg default (1).
Checked against the installed transformers in tests/test_state_layers_kimi.py."""

DEFAULTS_KIMI: dict[str, dict] = {
    "kimi_linear": {"attention_bias": False, "first_k_dense_replace": 1, "hidden_act": "silu",
                    "linear_conv_kernel_dim": 4, "model_max_length": 1048576, "num_experts_per_token": 8,
                    "num_shared_experts": 1, "tie_word_embeddings": False},
    "olmo_hybrid": {"attention_bias": False, "hidden_act": "silu", "linear_conv_kernel_dim": 4,
                    "max_position_embeddings": 65536, "tie_word_embeddings": False},
}
