"""Multi-head latent attention (MLA) decoders with MoE FFNs, as transformers 5.x builds them: DeepSeek-V2, DeepSeek-V3,
and Kimi-K2 (model_type kimi_k2, architecture DeepseekV3ForCausalLM: DeepSeek-V3's layers).

The cache holds one compressed latent (kv_lora_rank) plus the shared RoPE key (qk_rope_head_dim) per token and layer
(modeling_deepseek_v3.py DeepseekV3Attention); ``DEFAULTS`` (transformers 5.23 config classes) are checked in
tests/test_hf_import.py.
"""

from __future__ import annotations

from typing import Callable

from kvplan.errors import KvplanError, clip
from kvplan.model.hf.families.core import decoder_core, mtp_layers
from kvplan.model.hf.reader import Config


def deepseek(cfg: Config) -> dict:
    freq = cfg.data.get("moe_layer_freq", 1)
    if type(freq) is not int or freq != 1:  # DeepSeek's every-layer MoE after first_k_dense_replace
        raise KvplanError(f"{cfg.origin}: moe_layer_freq {clip(freq)} unsupported; allowed: 1")
    mla = {k: cfg.integer(k) for k in ("kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim")}
    if "q_lora_rank" not in cfg.data:  # transformers' default is 1536 (compressed): a config must say which
        raise KvplanError(f"{cfg.origin}: missing key 'q_lora_rank' (null for no query compression), which a "
                          f"{cfg.model_type} card needs")
    mla["q_lora_rank"] = cfg.optional("q_lora_rank", minimum=0) or None  # null or 0: no query compression
    moe = {"num_experts": cfg.integer("n_routed_experts"), "experts_per_token": cfg.integer("num_experts_per_tok"),
           "expert_ffn_size": cfg.integer("moe_intermediate_size"),
           "num_shared_experts": cfg.integer("n_shared_experts", minimum=0),
           "first_dense_layers": cfg.integer("first_k_dense_replace", minimum=0)}
    # num_kv_heads is nominal for MLA (the cache holds one latent per token) and its heads are qk_nope + qk_rope wide
    # for Q/K and v_head_dim for V: the mla block says so
    core = decoder_core(cfg, latent=True)
    core.pop("head_dim")
    bias = cfg.flag("attention_bias")  # q_a_proj, kv_a_proj_with_mqa and o_proj (kvplan.cost.shapes.mla_matrices)
    # transformers 5.24 DeepseekV2/V3PreTrainedModel._keep_in_fp32_modules_strict: "gate.weight" (kvplan.cost.fp32)
    return {**core, "mla": mla, "moe": moe, "qkv_bias": bias, "out_bias": bias, "hf_fp32": ("router",),
            **mtp_layers(cfg)}


# kimi_k2 (moonshotai/Kimi-K2-*): the checkpoints name architecture DeepseekV3ForCausalLM and ship DeepSeek's own
# configuration_deepseek.DeepseekV3Config as remote code; vLLM builds them as DeepseekV3ForCausalLM (MLA, its
# is_deepseek_mla list names kimi_k2) and transformers' DeepseekV3ForCausalLM holds the same parameters. transformers
# has no kimi_k2 config class, so no defaults: every key the reader needs must be in the file.
READERS: dict[str, Callable[[Config], dict]] = {
    "deepseek_v2": deepseek, "deepseek_v3": deepseek, "kimi_k2": deepseek,
}

DEFAULTS: dict[str, dict] = {
    "deepseek_v2": {"attention_bias": False, "first_k_dense_replace": 0, "hidden_act": "silu",
                    "max_position_embeddings": 2048, "mlp_bias": False, "n_shared_experts": 2,
                    "tie_word_embeddings": False},
    "deepseek_v3": {"attention_bias": False, "first_k_dense_replace": 3, "hidden_act": "silu",
                    "max_position_embeddings": 4096, "n_shared_experts": 1, "num_experts_per_tok": 8,
                    "tie_word_embeddings": False, "num_nextn_predict_layers": 1},
}
