"""A card's GGUF weights at a llama-quantize file type (Q4_K_M, Q5_K_M, Q6_K, Q8_0 ...), by llama.cpp's own rules.

``src/llama-quant.cpp`` (ec98e2002): ``llama_model_quantize_impl`` quantizes 2-D ``*.weight`` tensors except norms
and the MoE router (``ffn_gate_inp``); ``llama_tensor_get_type`` picks each tensor's type from the file type's base
type with overrides: ``output.weight`` Q6_K (Q8_0 stays Q8_0); Q4_K_M / Q5_K_M give ``attn_v`` and ``ffn_down`` Q6_K
where ``use_more_bits(i, n)``; Q4_K_S gives the first 4 ``attn_v`` and the first n/8 ``ffn_down`` Q5_K; 8-expert
models get Q8_0 ``attn_v``/``attn_k`` and Q5_K ``attn_output``; a row width the type's block does not divide falls
back (Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0), then to F16. Files made with an importance matrix or
``--tensor-type`` overrides differ: their own GGUF (``--gguf``) is exact.

Dense and MoE attention models only (no MLA or state layers: give their GGUF).
"""

from __future__ import annotations

from functools import lru_cache

from kvplan.errors import KvplanError

# (block elements, bytes per block) of the weight types (ggml/src/ggml-common.h)
TYPES = {"F32": (1, 4), "F16": (1, 2), "BF16": (1, 2), "Q8_0": (32, 34), "Q4_0": (32, 18), "Q4_1": (32, 20),
         "Q5_0": (32, 22), "Q5_1": (32, 24), "Q4_K": (256, 144), "Q5_K": (256, 176), "Q6_K": (256, 210)}
BASE = {"F16": "F16", "BF16": "BF16", "Q8_0": "Q8_0", "Q6_K": "Q6_K", "Q5_K_M": "Q5_K", "Q5_K_S": "Q5_K",
        "Q4_K_M": "Q4_K", "Q4_K_S": "Q4_K", "Q4_0": "Q4_0"}  # largest first
FILE_TYPES = tuple(BASE)
FALLBACK = {"Q4_K": "Q5_0", "Q5_K": "Q5_1", "Q6_K": "Q8_0"}


def use_more_bits(i: int, n: int) -> bool:
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def _fit(t: str, ne0: int) -> str:
    """The fallback when the row width ne0 is not a multiple of the type's block."""
    if ne0 % TYPES[t][0]:
        t = FALLBACK.get(t, "F16")
        if ne0 % TYPES[t][0]:
            t = "F16"
    return t


def nbytes(t: str, ne0: int, rows: int) -> int:
    blck, size = TYPES[t]
    return size * ne0 // blck * rows


def tensor_type(ftype: str, kind: str, i: int, n: int, n_expert: int) -> str:
    """llama_tensor_get_type for ``kind`` (attn_v, ffn_down, ...) of layer i of n, before the width fallback."""
    base = BASE[ftype]
    if ftype in ("F16", "BF16"):
        return base
    if kind == "output":
        return "Q8_0" if base == "Q8_0" else "Q6_K"
    if kind == "attn_v":
        if n_expert == 8 and ftype not in ("Q8_0", "Q6_K"):
            return "Q8_0"
        if ftype in ("Q4_K_M", "Q5_K_M") and use_more_bits(i, n):
            return "Q6_K"
        if ftype == "Q4_K_S" and i < 4:
            return "Q5_K"
    if kind == "attn_k" and n_expert == 8 and ftype not in ("Q8_0", "Q6_K"):
        return "Q8_0"
    if kind == "attn_output" and n_expert == 8 and ftype in ("Q4_K_M", "Q4_K_S", "Q5_K_M", "Q5_K_S", "Q4_0"):
        return "Q5_K"
    if kind == "ffn_down":
        if ftype in ("Q4_K_M", "Q5_K_M") and use_more_bits(i, n):
            return "Q6_K"
        if ftype == "Q4_K_S" and i < n // 8:
            return "Q5_K"
    return base


def quant_weights(card, ftype: str) -> tuple[tuple[int, ...], int, int]:
    """(per-layer, input, output) bytes of ``card`` quantized to ``ftype`` as llama-quantize writes it."""
    return quant_tensors(card, ftype)[:3]


@lru_cache(maxsize=256)
def quant_tensors(card, ftype: str) -> tuple[tuple[int, ...], int, int, tuple[tuple[tuple[str, int], ...], ...]]:
    """``quant_weights`` and each layer's routed-expert tensors as (name, bytes), named as convert_hf_to_gguf.py
    writes them (``blk.N.ffn_gate_exps.weight``, ``ffn_up_exps``, ``ffn_down_exps``): what -ot / --cpu-moe match."""
    if ftype not in BASE:
        raise KvplanError(f"--gguf-quant: {ftype!r}; allowed: {', '.join(FILE_TYPES)}")
    if card.mla or card.ssm or card.shared_blocks or card.architecture != "decoder-only":
        raise KvplanError(f"--gguf-quant: {card.name}: llama-quantize rules are modelled for dense and MoE attention "
                          "models; give the model's GGUF (--gguf)")
    h, n, hd = card.hidden_size, card.num_layers, card.head_dim
    n_exp = card.moe.num_experts if card.moe else 0
    stored = lru_cache(maxsize=None)(lambda t, ne0, rows: nbytes(_fit(t, ne0), ne0, rows))  # a few per model
    q = lambda kind, ne0, rows, i=0: stored(tensor_type(ftype, kind, i, n, n_exp), ne0, rows)  # noqa: E731
    f32 = 4 * h
    # what every layer holds alike: its norms, attn_q, attn_k, attn_output and biases (attn_v's type varies)
    common = (2 * f32 if card.norms_per_layer >= 2 else f32) + (4 * 2 * hd if card.qk_norm else 0)
    common += q("attn_q", h, card.num_heads * hd * (2 if card.attention_output_gate else 1))
    common += q("attn_k", h, card.num_kv_heads * hd) + q("attn_output", card.num_heads * hd, h)
    common += 4 * (card.num_heads + 2 * card.num_kv_heads) * hd if card.qkv_bias else 0
    layers, experts = [], []
    dense: dict[tuple[str, str], int] = {}  # a dense layer's bytes by its attn_v and ffn_down types (all that varies)
    for i in range(n):
        if not card.is_moe_layer(i):
            types = (tensor_type(ftype, "attn_v", i, n, n_exp), tensor_type(ftype, "ffn_down", i, n, n_exp))
            if types not in dense:
                dense[types] = (common + q("attn_v", h, card.num_kv_heads * hd, i)
                                + (2 if card.gated_ffn else 1) * q("ffn_up", h, card.ffn_size)
                                + q("ffn_down", card.ffn_size, h, i))
            layers.append(dense[types])
            experts.append(())
            continue
        m = card.moe
        b = common + q("attn_v", h, card.num_kv_heads * hd, i)
        b += 4 * h * n_exp  # ffn_gate_inp: the router stays f32
        ups = 2 if card.gated_ffn else 1
        up, down = n_exp * q("ffn_up", h, m.expert_ffn_size), n_exp * q("ffn_down", m.expert_ffn_size, h, i)
        exps = ((f"blk.{i}.ffn_gate_exps.weight", up),) if ups == 2 else ()
        experts.append(exps + ((f"blk.{i}.ffn_up_exps.weight", up), (f"blk.{i}.ffn_down_exps.weight", down)))
        b += ups * up + down
        if m.num_shared_experts:
            sh = m.shared_ffn * m.num_shared_experts
            b += ups * q("ffn_up", h, sh) + q("ffn_down", sh, h, i)
        layers.append(b)
    # a tied model's token_embd takes the output rule (it is the output); llama.cpp loads it again as the output
    embd = q("output" if card.tie_embeddings else "token_embd", h, card.vocab_size)
    out = f32 + (embd if card.tie_embeddings else q("output", h, card.vocab_size))
    return tuple(layers), embd, out, tuple(experts)
