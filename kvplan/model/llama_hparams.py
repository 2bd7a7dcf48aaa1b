"""llama.cpp's per-layer model facts (``llama_hparams``), from a GGUF's metadata or from a kvplan card.

What llama.cpp reads in ``llama_model::load_hparams`` (``src/llama-model.cpp``, ec98e2002) and ``src/llama-hparams.cpp``,
as far as memory goes: per-layer ``n_head_kv`` (``<arch>.attention.head_count_kv`` may be an array; 0 marks a layer
without attention), key/value widths (``attention.key_length``/``value_length``, ``_swa`` variants for sliding layers),
sliding layers (``set_swa_pattern(period, dense_first)``: layer il slides iff ``il % period < period - 1``, or
``il % period != 0`` when dense comes first; a GGUF ``attention.sliding_window_pattern`` overrides the period, or as a
bool array names each layer), recurrent layers and their state widths (``n_embd_r``/``n_embd_s``), shared-KV layers
(``attention.shared_kv_layers``), expert counts and the weights of every layer from the tensor table.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from functools import cached_property

from kvplan.errors import KvplanError

# (period, dense_first, chunked) of set_swa_pattern in each architecture's load_hparams (src/llama-model.cpp,
# src/models/*.cpp, ec98e2002); the GGUF key sliding_window_pattern overrides the period where present.
SWA_PATTERNS: dict[str, tuple[int, bool, bool]] = {
    "gemma2": (2, False, False), "gemma3": (6, False, False), "gemma3n": (5, False, False),
    "gemma-embedding": (6, False, False), "cohere2": (4, False, False), "gpt-oss": (2, False, False),
    "exaone4": (4, False, False), "llama4": (4, False, True),
}
# Architectures whose layers are all recurrent (llm_arch_is_recurrent), and hybrids whose recurrent layers are the
# ones without K/V heads (llm_arch_is_hybrid; Qwen3-Next/3.5 by full_attention_interval instead).
RECURRENT = frozenset({"mamba", "mamba2", "rwkv6", "rwkv6qwen2", "rwkv7", "arwkv7"})
HYBRID_BY_HEADS = frozenset({"jamba", "lfm2", "lfm2moe", "granitehybrid", "nemotron_h", "nemotron_h_moe", "plamo2"})
HYBRID_BY_INTERVAL = frozenset({"qwen3next", "qwen35", "qwen35moe"})
INPUT_TENSORS = ("token_embd.", "token_types.", "position_embd.")  # the input layer: always on the CPU


@dataclass(frozen=True)
class LlamaHparams:
    """Per-layer facts llama.cpp sizes its caches and buffers from (tuples have one entry per layer)."""

    arch: str
    n_layer: int
    n_embd: int
    n_vocab: int
    n_ctx_train: int
    n_head: tuple[int, ...]
    n_head_kv: tuple[int, ...]
    n_embd_k: tuple[int, ...]  # n_embd_k_gqa(il) = key width x n_head_kv(il)
    n_embd_v: tuple[int, ...]
    swa: tuple[bool, ...]
    n_swa: int
    recurrent: tuple[bool, ...]
    attention: tuple[bool, ...] = ()  # layers that attend (); () : every non-recurrent layer
    n_embd_r: int = 0  # f32 elements of a recurrent layer's conv/shift state per sequence
    n_embd_s: int = 0  # f32 elements of its SSM/WKV state per sequence
    mla: bool = False  # a latent (kv_lora_rank) cache: V-less from PR #19067 on
    n_expert: int = 0
    n_expert_used: int = 0
    layer_bytes: tuple[int, ...] = ()  # weights of each blk.N (from the tensor table); () from a card
    layer_tensors: tuple[tuple[tuple[str, int], ...], ...] = ()  # each blk.N's (tensor name, bytes): -ot matches them
    input_bytes: int = 0  # token_embd (+ type/position embeddings)
    output_bytes: int = 0  # output.weight + output_norm (+ the duplicated token_embd of a tied model)
    output_dup_bytes: int = 0  # of which the tied model's second token_embd (shared with the file's on the CPU)
    model_bytes: int = 0  # llama.cpp's "model size": every tensor once
    n_params: int = 0
    source: str = ""
    notes: tuple[str, ...] = field(default=())

    def __hash__(self) -> int:
        """The fields' hash, computed once (a GGUF's tensor table is thousands of tuples): llama.cpp's memory model
        caches its buffers by hparams (kvplan.cost.llamacpp.memory), hashing them once per look-up."""
        h = self.__dict__.get("_hash")
        if h is None:
            h = self.__dict__["_hash"] = hash(tuple(getattr(self, f.name) for f in fields(self)))
        return h

    def has_kv(self, il: int) -> bool:
        """A K/V cache in layer il: attention layers (Falcon-H1: every layer holds attention beside its SSM)."""
        attends = self.attention[il] if self.attention else not self.recurrent[il]
        return attends and self.n_head_kv[il] > 0

    @cached_property
    def kv_layers(self) -> tuple[int, ...]:
        return tuple(il for il in range(self.n_layer) if self.has_kv(il) and (self.n_embd_k[il] or self.n_embd_v[il]))


def _arr(value, n: int, key: str) -> tuple[int, ...]:
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            raise KvplanError(f"--gguf: {key} has {len(value)} entries for {n} layers (block_count)")
        return tuple(int(v) for v in value)
    return (int(value),) * n


def swa_layers(arch: str, n_layer: int, n_swa: int, pattern) -> tuple[bool, ...]:
    """Which layers slide: llama_hparams::set_swa_pattern with the architecture's period (SWA_PATTERNS), the GGUF's
    sliding_window_pattern as period or per-layer bool array; no sliding layers without a window."""
    if not n_swa:
        return (False,) * n_layer
    if isinstance(pattern, (list, tuple)):
        return tuple(bool(x) for x in _arr(pattern, n_layer, "attention.sliding_window_pattern"))
    period, dense_first = SWA_PATTERNS[arch][:2] if arch in SWA_PATTERNS else (None, False)
    if pattern is not None:
        period = int(pattern)
    if period is None:  # the architecture builds no iSWA cache in llama.cpp (e.g. Mistral's llama arch): all full
        return (False,) * n_layer
    if dense_first:
        return tuple(period == 0 or il % period != 0 for il in range(n_layer))
    return tuple(period == 0 or il % period < period - 1 for il in range(n_layer))


def hparams_from_metadata(md: dict, tensors: dict, source: str = "") -> LlamaHparams:
    """LlamaHparams from GGUF metadata (keys ``<arch>.*``) and the tensor table (name -> GGUFTensor)."""
    arch = str(md["general.architecture"])
    get = lambda key, default=None: md.get(f"{arch}.{key}", default)  # noqa: E731
    n_layer = int(get("block_count", 0))
    if n_layer <= 0:
        raise KvplanError(f"--gguf: {arch}.block_count is missing or 0")
    n_embd = int(get("embedding_length"))
    n_head = _arr(get("attention.head_count", 0), n_layer, "attention.head_count")
    n_head_kv = _arr(get("attention.head_count_kv", max(n_head)), n_layer, "attention.head_count_kv")
    hmax = max(n_head) or 1
    k_len = int(get("attention.key_length", n_embd // hmax))
    v_len = int(get("attention.value_length", n_embd // hmax))
    n_swa = int(get("attention.sliding_window", 0) or 0)
    if arch in SWA_PATTERNS and SWA_PATTERNS[arch][2]:  # llama4: chunked attention, n_swa = 8192 in load_hparams
        n_swa = 8192
    swa = swa_layers(arch, n_layer, n_swa, get("attention.sliding_window_pattern"))
    k_swa, v_swa = int(get("attention.key_length_swa", k_len)), int(get("attention.value_length_swa", v_len))
    recurrent = _recurrent(arch, n_layer, n_head_kv, md, get)
    nextn = int(get("nextn_predict_layers", 0) or 0)  # MTP blocks at the end: no cache of their own (has_kv false)
    recurrent = tuple(r and il < n_layer - nextn for il, r in enumerate(recurrent))
    shared = int(get("attention.shared_kv_layers", 0) or 0)
    n_kv_from_start = n_layer - max(shared, nextn)
    n_embd_k = tuple(0 if il >= n_kv_from_start else (k_swa if swa[il] else k_len) * n_head_kv[il]
                     for il in range(n_layer))
    n_embd_v = tuple(0 if il >= n_kv_from_start else (v_swa if swa[il] else v_len) * n_head_kv[il]
                     for il in range(n_layer))
    r, s = _state_widths(arch, n_embd, get)
    n_vocab = int(get("vocab_size", 0) or md.get("tokenizer.ggml.tokens", 0) or 0)
    if not n_vocab and "token_embd.weight" in tensors:
        n_vocab = tensors["token_embd.weight"].shape[1]
    layer_bytes, inp, out = _weights(tensors, n_layer)
    named: list[list[tuple[str, int]]] = [[] for _ in range(n_layer)]
    for name, t in tensors.items():
        if t.layer is not None and t.layer < n_layer:
            named[t.layer].append((name, t.nbytes))
        elif name.startswith("rope_freqs") and n_layer:
            named[0].append((name, t.nbytes))
    dup = tensors["token_embd.weight"].nbytes if tensors and "output.weight" not in tensors and \
        "token_embd.weight" in tensors else 0
    return LlamaHparams(
        arch=arch, n_layer=n_layer, n_embd=n_embd, n_vocab=n_vocab, n_ctx_train=int(get("context_length", 0) or 0),
        n_head=n_head, n_head_kv=n_head_kv, n_embd_k=n_embd_k, n_embd_v=n_embd_v, swa=swa, n_swa=n_swa,
        recurrent=recurrent, attention=tuple(arch == "falcon-h1" or not x for x in recurrent), n_embd_r=r,
        n_embd_s=s, mla=get("attention.kv_lora_rank") is not None and
        get("attention.key_length_mla") is not None, n_expert=int(get("expert_count", 0) or 0),
        n_expert_used=int(get("expert_used_count", 0) or 0), layer_bytes=layer_bytes,
        layer_tensors=tuple(tuple(x) for x in named) if tensors else (), input_bytes=inp,
        output_bytes=out, output_dup_bytes=dup, model_bytes=sum(t.nbytes for t in tensors.values()),
        n_params=sum(t.n_elements for t in tensors.values()), source=source)


def _recurrent(arch, n_layer, n_head_kv, md, get) -> tuple[bool, ...]:
    if arch in RECURRENT:
        return (True,) * n_layer
    if arch in HYBRID_BY_INTERVAL:  # llama-model.cpp: recurrent_layer_arr[i] = (i + 1) % full_attention_interval != 0
        interval = int(get("full_attention_interval", 4))
        return tuple((il + 1) % interval != 0 for il in range(n_layer))
    if arch in HYBRID_BY_HEADS:
        ff = get("feed_forward_length", 1)
        n_ff = tuple(ff) if isinstance(ff, list) else (ff,) * n_layer
        if arch.startswith("nemotron_h"):  # Nemotron-H: SSM layers have neither attention nor an FFN
            return tuple(n_head_kv[il] == 0 and n_ff[il] == 0 for il in range(n_layer))
        return tuple(n_head_kv[il] == 0 for il in range(n_layer))
    if arch == "falcon-h1":
        return (True,) * n_layer
    return (False,) * n_layer


def _state_widths(arch: str, n_embd: int, get) -> tuple[int, int]:
    """llama_hparams::n_embd_r / n_embd_s (src/llama-hparams.cpp, ec98e2002)."""
    if arch.startswith("rwkv") or arch == "arwkv7":
        return int(get("token_shift_count", 2)) * n_embd, n_embd * int(get("wkv.head_size", 64))
    if arch.startswith("lfm2"):
        return n_embd * (int(get("shortconv.l_cache", 3)) - 1), 0
    d_conv, d_inner = int(get("ssm.conv_kernel", 0) or 0), int(get("ssm.inner_size", 0) or 0)
    d_state, n_group = int(get("ssm.state_size", 0) or 0), int(get("ssm.group_count", 0) or 0)
    r = (d_conv - 1 if d_conv > 0 else 0) * (d_inner + 2 * n_group * d_state)
    return r, d_state * d_inner


def _weights(tensors: dict, n_layer: int) -> tuple[tuple[int, ...], int, int]:
    """Bytes of each blk.N, of the input layer and of the output layer. rope_freqs belongs to layer 0 (created with
    blk 0, TENSOR_DUPLICATED for the others); a model without output.weight loads token_embd a second time as its
    output (llama-model.cpp: ``output = create_tensor(tn(LLM_TENSOR_TOKEN_EMBD...), TENSOR_DUPLICATED)``)."""
    layers, inp, out = [0] * n_layer, 0, 0
    for name, t in tensors.items():
        if t.layer is not None and t.layer < n_layer:
            layers[t.layer] += t.nbytes
        elif name.startswith(INPUT_TENSORS):
            inp += t.nbytes
        elif name.startswith("rope_freqs") and n_layer:
            layers[0] += t.nbytes
        else:
            out += t.nbytes
    if tensors and "output.weight" not in tensors and "token_embd.weight" in tensors:
        out += tensors["token_embd.weight"].nbytes
    return tuple(layers) if tensors else (), inp, out


def hparams_from_card(card) -> LlamaHparams:
    """LlamaHparams of a kvplan card, as llama.cpp's converter would write them (convert_hf_to_gguf.py): MLA as the
    latent cache (head_count_kv 1, key_length kv_lora_rank + rope, value_length kv_lora_rank), sliding and chunked
    layers from the card's layer types, recurrent layers from its mamba layers. No tensor table: weights come from
    the card (kvplan.cost.params) at the dtype asked for."""
    n = card.num_layers
    kinds = card.layer_types
    attn = tuple(card.mixer(i) in ("attention", "hybrid") for i in range(n))
    if card.mla:
        k_len, v_len, kv = card.mla.kv_lora_rank + card.mla.qk_rope_head_dim, card.mla.kv_lora_rank, 1
    else:
        k_len = v_len = card.head_dim
        kv = card.num_kv_heads
    n_head_kv = tuple(kv if a else 0 for a in attn)
    swa = tuple(k in ("sliding", "chunked") for k in kinds)
    windows = {card.sliding_window if k == "sliding" else card.attention_chunk_size for k in kinds
               if k in ("sliding", "chunked")}
    if len(windows) > 1:
        raise KvplanError(f"--engine llamacpp: {card.name} has sliding and chunked layers of different spans; "
                          "llama.cpp has one n_swa per model")
    r = s = 0
    ssm = card.ssm
    if ssm is not None:
        if ssm.kind not in ("mamba", "mamba2", "gated_deltanet", "short_conv"):
            raise KvplanError(f"--engine llamacpp: {card.name}'s {ssm.kind} layers are not modelled for llama.cpp "
                              "from a card; give its GGUF (--gguf)")
        if ssm.kind == "short_conv":
            r = card.hidden_size * (ssm.d_conv - 1)
        else:
            groups = 0 if ssm.kind == "mamba" else ssm.n_groups
            r = (ssm.d_conv - 1) * (ssm.intermediate_size + 2 * groups * ssm.d_state)
            s = ssm.d_state * ssm.intermediate_size
    recurrent = tuple(card.mixer(i) in ("mamba", "hybrid") for i in range(n))
    return LlamaHparams(
        arch=card.name, n_layer=n, n_embd=card.hidden_size, n_vocab=card.vocab_size,
        n_ctx_train=card.max_position_embeddings, n_head=tuple(card.num_heads if a else 0 for a in attn),
        n_head_kv=n_head_kv, n_embd_k=tuple(k_len * h for h in n_head_kv), n_embd_v=tuple(v_len * h for h in n_head_kv),
        swa=swa, n_swa=windows.pop() if windows else 0, recurrent=recurrent, attention=attn, n_embd_r=r, n_embd_s=s,
        mla=card.mla is not None, n_expert=card.moe.num_experts if card.moe else 0,
        n_expert_used=card.moe.experts_per_token if card.moe else 0, source=card.name)
