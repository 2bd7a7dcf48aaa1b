"""GGUF files shaped like the published models whose llama.cpp logs the tests reproduce (metadata as the converter
writes it; tensor tables where a log line prints model buffers)."""

from __future__ import annotations

from pathlib import Path

from gguf_files import write_gguf


def use_more_bits(i: int, n: int) -> bool:
    """llama-quant.cpp use_more_bits: the layers Q4_K_M quantizes with Q6_K (attn_v, ffn_down)."""
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def llama31_8b_q4_k_m(d: Path, rope_freqs: bool = True) -> Path:
    """Llama-3.1-8B-Instruct Q4_K_M (Ollama llama3.1:8b): 292 tensors, 66 f32, 193 q4_K, 33 q6_K."""
    n = 32
    kv = {"general.name": "Llama-3.1-8B-Instruct", "block_count": n, "embedding_length": 4096,
          "attention.head_count": 32, "attention.head_count_kv": 8, "context_length": 131072,
          "feed_forward_length": 14336, "vocab_size": 128256, "rope.dimension_count": 128}
    t = [("token_embd.weight", (4096, 128256), "Q4_K"), ("output.weight", (4096, 128256), "Q6_K"),
         ("output_norm.weight", (4096,), "F32")] + ([("rope_freqs.weight", (64,), "F32")] if rope_freqs else [])
    for i in range(n):
        more = "Q6_K" if use_more_bits(i, n) else "Q4_K"
        t += [(f"blk.{i}.attn_norm.weight", (4096,), "F32"), (f"blk.{i}.ffn_norm.weight", (4096,), "F32"),
              (f"blk.{i}.attn_q.weight", (4096, 4096), "Q4_K"), (f"blk.{i}.attn_k.weight", (4096, 1024), "Q4_K"),
              (f"blk.{i}.attn_v.weight", (4096, 1024), more), (f"blk.{i}.attn_output.weight", (4096, 4096), "Q4_K"),
              (f"blk.{i}.ffn_gate.weight", (4096, 14336), "Q4_K"), (f"blk.{i}.ffn_up.weight", (4096, 14336), "Q4_K"),
              (f"blk.{i}.ffn_down.weight", (14336, 4096), more)]
    return write_gguf(d / "llama31-8b-q4_k_m.gguf", "llama", kv, t)


def dense(d: Path, name: str = "dense", layers: int = 32, kv_heads: int = 8, head: int = 128, vocab: int = 128256,
          arch: str = "llama", **extra) -> Path:
    """Metadata only: a dense GQA model."""
    kv = {"block_count": layers, "embedding_length": 32 * head, "attention.head_count": 32,
          "attention.head_count_kv": kv_heads, "attention.key_length": head, "attention.value_length": head,
          "context_length": 131072, "feed_forward_length": 14336, "vocab_size": vocab, **extra}
    return write_gguf(d / f"{name}.gguf", arch, kv)


def qwen35(d: Path, name: str, layers: int, kv_heads: int, d_inner: int, nextn: int = 0, vocab: int = 248320) -> Path:
    """Qwen3.5 (qwen35): Gated DeltaNet layers, every 4th layer full attention (head 256)."""
    kv = {"block_count": layers + nextn, "embedding_length": 4096, "attention.head_count": 16,
          "attention.head_count_kv": kv_heads, "attention.key_length": 256, "attention.value_length": 256,
          "context_length": 262144, "feed_forward_length": 12288, "vocab_size": vocab, "full_attention_interval": 4,
          "ssm.conv_kernel": 4, "ssm.inner_size": d_inner, "ssm.state_size": 128, "ssm.group_count": 16,
          "ssm.time_step_rank": d_inner // 128, **({"nextn_predict_layers": nextn} if nextn else {})}
    return write_gguf(d / f"{name}.gguf", "qwen35", kv)


def deepseek_v3(d: Path) -> Path:
    """DeepSeek-V3 as converted after PR #12801: head_count_kv 1, key_length 576 (latent + rope), value_length 512."""
    kv = {"block_count": 61, "embedding_length": 7168, "attention.head_count": 128, "attention.head_count_kv": 1,
          "attention.key_length": 576, "attention.value_length": 512, "attention.key_length_mla": 192,
          "attention.value_length_mla": 128, "attention.kv_lora_rank": 512, "attention.q_lora_rank": 1536,
          "rope.dimension_count": 64, "context_length": 163840, "feed_forward_length": 18432,
          "expert_feed_forward_length": 2048, "expert_count": 256, "expert_used_count": 8, "expert_shared_count": 1,
          "leading_dense_block_count": 3, "vocab_size": 129280}
    return write_gguf(d / "deepseek-v3.gguf", "deepseek2", kv)


def moe_q4(d: Path, layers: int = 4) -> Path:
    """A small MoE (llama arch, 8 experts of 1024, one shared expert) with a Q4_K tensor table: routed experts
    ``blk.N.ffn_{gate,up,down}_exps.weight`` as convert_hf_to_gguf.py names them, the shared expert ``ffn_*_shexp``."""
    h, ff, n_exp, vocab = 2048, 1024, 8, 32000
    kv = {"block_count": layers, "embedding_length": h, "attention.head_count": 16, "attention.head_count_kv": 4,
          "context_length": 32768, "feed_forward_length": ff, "vocab_size": vocab, "expert_count": n_exp,
          "expert_used_count": 2}
    t = [("token_embd.weight", (h, vocab), "Q4_K"), ("output.weight", (h, vocab), "Q6_K"),
         ("output_norm.weight", (h,), "F32")]
    for i in range(layers):
        t += [(f"blk.{i}.attn_norm.weight", (h,), "F32"), (f"blk.{i}.ffn_norm.weight", (h,), "F32"),
              (f"blk.{i}.attn_q.weight", (h, h), "Q4_K"), (f"blk.{i}.attn_k.weight", (h, 512), "Q4_K"),
              (f"blk.{i}.attn_v.weight", (h, 512), "Q6_K"), (f"blk.{i}.attn_output.weight", (h, h), "Q4_K"),
              (f"blk.{i}.ffn_gate_inp.weight", (h, n_exp), "F32"),
              (f"blk.{i}.ffn_gate_exps.weight", (h, ff, n_exp), "Q4_K"),
              (f"blk.{i}.ffn_up_exps.weight", (h, ff, n_exp), "Q4_K"),
              (f"blk.{i}.ffn_down_exps.weight", (ff, h, n_exp), "Q6_K"),
              (f"blk.{i}.ffn_up_shexp.weight", (h, ff), "Q4_K"), (f"blk.{i}.ffn_gate_shexp.weight", (h, ff), "Q4_K"),
              (f"blk.{i}.ffn_down_shexp.weight", (ff, h), "Q4_K")]
    return write_gguf(d / "moe-q4.gguf", "llama", kv, t)
