"""A kvplan card from a GGUF: the architecture as the GGUF's metadata and tensor table give it.

The card carries what every engine needs (layers, heads, widths, sliding and state layers, experts). Per-layer
facts a card cannot hold (different K/V heads per layer, quantized tensor types) stay in the GGUF: the card's
``source`` names the file (``gguf:PATH``), and the llama.cpp runtimes read it again for its exact bytes.

A card holds one K/V head count for every attention layer. A GGUF whose ``attention.head_count_kv`` differs between
its attention layers, or is 0 on layers that are not recurrent (deci: Nemotron-51B/49B/253B's attention-free
layers), has no such card: every other engine would size each layer at one count. Only the runtimes that read the
GGUF itself (``Runtime.reads_gguf_layers``: llama.cpp, Ollama) take it, on a card that merely carries the file; the
caller says whether the card is for one (``per_layer_ok``).
"""

from __future__ import annotations

from kvplan.errors import KvplanError
from kvplan.model.card import ModelCard
from kvplan.model.gguf import GGUF_SOURCE, GGUFModel, load_gguf
from kvplan.model.validation import card_from_dict

def _name(g: GGUFModel, name: str | None) -> str:
    import re

    raw = name or str(g.metadata.get("general.name") or g.arch or "gguf-model")
    return (re.sub(r"[^A-Za-z0-9._-]+", "-", raw).strip("-._") or "gguf-model")[:128]


def _uneven_heads(g: GGUFModel, engine: str | None) -> str | None:
    """Why no card holds ``g``'s K/V heads (they differ per layer, or non-recurrent layers have none), else None."""
    hp = g.hparams
    heads = [hp.n_head_kv[il] for il in range(hp.n_layer) if not hp.recurrent[il]]
    attn = {h for h in heads if h}
    if hp.mla or (len(attn) <= 1 and 0 not in heads) or not attn:
        return None
    zero = heads.count(0)
    shown = f" ({', '.join(map(str, hp.n_head_kv))})" if hp.n_layer <= 8 else ""
    what = (f"{g.arch or 'this'} GGUF sets attention.head_count_kv per layer{shown}: {min(attn)} to {max(attn)} K/V heads "
            f"over {hp.n_layer} layers" + (f", {zero} of them with 0 K/V heads (no attention)" if zero else ""))
    on = f"--engine {engine}" if engine else "this command"
    return (f"{what}; a kvplan card holds one K/V head count for every attention layer, so {on} cannot size it; "
            f"plan it with `kvplan plan --gguf {g.path} --engine llamacpp` (or ollama), which sizes each layer from "
            "the GGUF")


def gguf_card(g: GGUFModel, name: str | None = None, engine: str | None = None,
              per_layer_ok: bool = False) -> ModelCard:
    """The card of GGUF ``g`` (validated); KvplanError naming what a card cannot say. ``engine``: the runtime the
    card is for, as the user named it; ``per_layer_ok``: it sizes each layer from the GGUF itself
    (``Runtime.reads_gguf_layers``), so a GGUF with per-layer K/V heads gets a carrier card."""
    hp = g.hparams
    md, arch = g.metadata, g.arch
    get = lambda key, default=None: md.get(f"{arch}.{key}", default)  # noqa: E731
    uneven = _uneven_heads(g, engine)
    if uneven and not per_layer_ok:
        raise KvplanError(f"--gguf: {uneven}")
    attn = [il for il in range(hp.n_layer) if hp.has_kv(il)]
    kv_heads = {hp.n_head_kv[il] for il in attn}
    heads = max(hp.n_head) or 1
    ff = get("feed_forward_length", 0)
    ffn = max(ff) if isinstance(ff, list) else int(ff or 0)
    names = {t.name for t in g.tensors}
    data: dict = {
        "name": _name(g, name), "source": f"{GGUF_SOURCE}{g.path}", "num_layers": hp.n_layer,
        "hidden_size": hp.n_embd, "num_heads": heads, "ffn_size": ffn or 4 * hp.n_embd,
        "gated_ffn": any(n.endswith("ffn_gate.weight") or "ffn_gate_exps" in n for n in names) or not names,
        "activation": "silu", "vocab_size": hp.n_vocab or 1, "tie_embeddings": bool(names) and "output.weight" not in names,
        "norm": "rmsnorm", "position": "rope", "max_position_embeddings": hp.n_ctx_train or 4096,
        "dtype": "bfloat16" if any(t.type_name == "BF16" for t in g.tensors) else "float16",
    }
    if len(kv_heads) > 1:
        data["num_kv_heads"] = max(kv_heads)  # a carrier card (uneven): the GGUF-reading runtime sizes each layer
    elif kv_heads:
        data["num_kv_heads"] = kv_heads.pop()
    if hp.mla:
        rope = int(get("rope.dimension_count", 64))
        data.update(num_kv_heads=heads, head_dim=int(get("attention.key_length_mla")),
                    mla={"kv_lora_rank": int(get("attention.kv_lora_rank")), "qk_rope_head_dim": rope,
                         "qk_nope_head_dim": int(get("attention.key_length_mla")) - rope,
                         "v_head_dim": int(get("attention.value_length_mla")),
                         **({"q_lora_rank": int(get("attention.q_lora_rank"))} if get("attention.q_lora_rank") else {})})
    elif attn:
        data["head_dim"] = hp.n_embd_k[attn[0]] // hp.n_head_kv[attn[0]] if not hp.swa[attn[0]] else int(
            get("attention.key_length", hp.n_embd // heads))
    if heads % data.get("num_kv_heads", heads):
        data["num_kv_heads"] = heads
    # a layer without K/V is a state layer; only in a GGUF-reading runtime's carrier card (uneven) an attention-free
    # deci layer stands as an attention layer, the runtime reading its 0 heads from the GGUF
    kinds = [("sliding" if hp.swa[il] else "global") if hp.has_kv(il) or (uneven and not hp.recurrent[il]) else "mamba"
             for il in range(hp.n_layer)]
    if any(hp.recurrent):
        data["ssm"] = _ssm(arch, get, hp)
        kinds = ["hybrid" if hp.recurrent[il] and hp.has_kv(il) else "mamba" if hp.recurrent[il] else k
                 for il, k in enumerate(kinds)]
    if any(k != "global" for k in kinds):
        data["layer_pattern"] = kinds
    if "sliding" in kinds:
        data["sliding_window"] = hp.n_swa
    if hp.n_expert:
        data["moe"] = {"num_experts": hp.n_expert, "experts_per_token": hp.n_expert_used or 1,
                       "expert_ffn_size": int(get("expert_feed_forward_length", ffn) or ffn or 1),
                       "num_shared_experts": int(get("expert_shared_count", 0) or 0),
                       "first_dense_layers": int(get("leading_dense_block_count", 0) or 0)}
    try:
        return card_from_dict(data, origin=f"GGUF {g.path}")
    except KvplanError as e:
        raise KvplanError(f"--gguf: {arch} GGUF does not fit a kvplan card ({e}); use --engine llamacpp or ollama, "
                          "which read the GGUF itself") from e


def _ssm(arch: str, get, hp) -> dict:
    if arch.startswith("lfm2"):
        return {"kind": "short_conv", "d_conv": int(get("shortconv.l_cache", 3))}
    d_inner, d_state = int(get("ssm.inner_size")), int(get("ssm.state_size"))
    groups = int(get("ssm.group_count", 0) or 0)
    if arch in ("qwen3next", "qwen35", "qwen35moe"):
        heads = int(get("ssm.time_step_rank", d_inner // d_state))
        return {"kind": "gated_deltanet", "d_state": d_state, "intermediate_size": d_inner, "num_heads": heads,
                "head_dim": d_inner // heads, "n_groups": groups or 1, "d_conv": int(get("ssm.conv_kernel", 4))}
    if groups:
        heads = int(get("ssm.time_step_rank", d_inner // 64))
        return {"kind": "mamba2", "d_state": d_state, "intermediate_size": d_inner, "num_heads": heads,
                "n_groups": groups, "d_conv": int(get("ssm.conv_kernel", 4))}
    return {"kind": "mamba", "d_state": d_state, "intermediate_size": d_inner, "d_conv": int(get("ssm.conv_kernel", 4)),
            "dt_rank": int(get("ssm.time_step_rank", 0)) or None}


def card_from_gguf(path: str, name: str | None = None, engine: str | None = None,
                   per_layer_ok: bool = False) -> ModelCard:
    """A kvplan card from the GGUF at ``path`` (every part of a split GGUF), for ``engine`` (``gguf_card``)."""
    return gguf_card(load_gguf(str(path)), name, engine, per_layer_ok)
