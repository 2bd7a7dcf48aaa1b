"""Investigation, not a kvplan rule: does PyTorch's CUDA caching allocator explain the last 0.1 GiB between kvplan's
weights per GPU and the two public vLLM 0.8 Gemma-3-27B-it TP 4 logs (docs/logs/vllm-issue15676-*, vllm-issue16378-*)?

    PYTHONPATH=. python benchmarks/allocator_replay.py

vLLM logs ``Model loading took X GB`` from ``torch.cuda.max_memory_allocated`` right after a peak reset, i.e. the
bytes of the allocator's allocated blocks (vllm/utils.py DeviceMemoryProfiler, platforms/cuda.py
get_current_memory_usage, 0.8.x). This script replays, through a model of PyTorch's CUDACachingAllocator
(c10/cuda/CUDACachingAllocator.cpp, default settings: ``round_size`` to 512 B; pools by size <= 1 MiB;
``get_allocation_size``: 2 MiB segments for small blocks, 20 MiB below 10 MiB, else rounded up to 2 MiB;
best-fit ``get_free_block``; ``should_split``: a large block is split only when more than 1 MiB would remain;
freed blocks merge with free neighbours), every tensor vLLM 0.8.2 creates on the GPU while building
Gemma3ForConditionalGeneration on one TP rank, in construction order: the SigLIP tower (siglip.py), the projector
(gemma3_mm.py), the decoder (gemma3.py: per layer qkv, o_proj, q/k norms, the rotary caches with their float32
temporaries at layers 0 and 5 (rotary_embedding.py RotaryEmbedding / LinearScalingRotaryEmbedding
_compute_cos_sin_cache), Attention's seven scalar tensors (attention/layer.py), gate_up, down, four norms). The
sizes come from the bundled card; the order and the temporaries are read from those files, so the result is an
estimate of the mechanism, not a measurement. The allocator model is kvplan's (kvplan.cost.allocator, whose generic
replay of the per-rank tensor list is vLLM's weights figure); this file keeps the hand-written Gemma 3 and Qwen2
sequences as its check. The same allocator over vLLM 0.10.1's Qwen2-7B-Instruct
(``replay_qwen2``) holds the five dennislee22 logs' 14.2488 GiB (TP 1) and 7.1217 GiB (TP 2) to four decimals.
"""

from __future__ import annotations

from kvplan import load_card
from kvplan.cost.allocator import CachingAllocator, rotary_cache
from kvplan.cost.parallel import Layout, pad_vocab, rank_weights, rope_caches
from kvplan.model.dtypes import parse_dtype

LOGGED_GIB = (13.1665, 13.1664)  # vllm#15676 (V1 runner), vllm#16378 (V0 runner)


def replay(tp: int = 4) -> CachingAllocator:
    card = load_card("gemma-3-27b-it")
    v, h, d, bf = card.vision, card.hidden_size, card.head_dim, 2
    a = CachingAllocator()
    keep = a.malloc

    def linear(n_out: int, n_in: int, bias: bool) -> None:  # weight, then bias (linear.py create_weights)
        keep(n_out * n_in * bf)
        if bias:
            keep(n_out * bf)

    keep(v.hidden_size * 3 * v.patch_size ** 2 * bf), keep(v.hidden_size * bf)  # patch Conv2d
    side = v.image_size // v.patch_size
    keep(pad_vocab(side * side, 64) // tp * v.hidden_size * bf), keep(side * side * 8)  # positions, position_ids
    vh, vf = v.hidden_size, v.ffn_size
    for _ in range(v.num_layers):
        linear(3 * vh // tp, vh, True), linear(vh, vh // tp, True)  # qkv, out_proj (bias whole on every rank)
        keep(vh * bf), keep(vh * bf)  # layer_norm1
        linear(vf // tp, vh, True), linear(vh, vf // tp, True)  # fc1, fc2
        keep(vh * bf), keep(vh * bf)  # layer_norm2
    keep(vh * bf), keep(vh * bf)  # post_layernorm
    keep(vh * h * bf), keep(vh * bf)  # mm_input_projection_weight, mm_soft_emb_norm
    keep(pad_vocab(card.vocab_size, 64) // tp * h * bf)  # embed_tokens
    scaled, local = rope_caches(card)
    qkv_rows = (card.num_heads + 2 * card.num_kv_heads) // tp * d
    first_global = card.layer_types.index("global")  # get_rope builds the scaled cache there, the local one at 0
    for layer in range(card.num_layers):
        linear(qkv_rows, h, False), linear(h, card.num_heads * d // tp, False)
        keep(d * bf), keep(d * bf)  # q_norm, k_norm
        if layer in (0, first_global):
            _rotary(a, local if layer == 0 else scaled, 1 if layer == 0 else scaled // local, d)
        for _ in range(7):
            keep(4)  # Attention: k/v/q/prob scales, q/k/v ranges (float32 scalars)
        linear(2 * card.ffn_size // tp, h, False), linear(h, card.ffn_size // tp, False)
        for _ in range(4):
            keep(h * bf)
    keep(h * bf), keep(bf)  # final norm, normalizer buffer
    return a


def replay_qwen2(tp: int) -> CachingAllocator:
    """The same allocator over vLLM 0.10.1's Qwen2ForCausalLM (qwen2.py: embed_tokens, per layer qkv with bias,
    o_proj, the rotary cache at layer 0, Attention's scalars, gate_up, down, two norms; final norm; an untied
    lm_head) for Qwen2-7B-Instruct, the model of the five docs/logs/vllm-dennislee22-qwen2-7b-* logs: the shapes of
    the bundled qwen2.5-7b card (the logs' stand-in), with Qwen2-7B-Instruct's max_position_embeddings of 32,768
    (its config.json) where the card has Qwen2.5's 131,072."""
    card, bf, positions = load_card("qwen2.5-7b"), 2, 32_768
    h, d, rows = card.hidden_size, card.head_dim, card.vocab_size // tp  # 152,064: a multiple of 64
    a = CachingAllocator()
    a.malloc(rows * h * bf)
    for layer in range(card.num_layers):
        qkv = (card.num_heads + 2 * card.num_kv_heads) // tp * d
        a.malloc(qkv * h * bf), a.malloc(qkv * bf), a.malloc(h * card.num_heads * d // tp * bf)
        if layer == 0:
            _rotary(a, positions, 1, d)
        for _ in range(7):
            a.malloc(4)
        a.malloc(2 * card.ffn_size // tp * h * bf), a.malloc(h * card.ffn_size // tp * bf)
        a.malloc(h * bf), a.malloc(h * bf)
    a.malloc(h * bf), a.malloc(rows * h * bf)
    return a


def _rotary(a: CachingAllocator, positions: int, factor: int, rotary_dim: int) -> None:
    rotary_cache(a, positions, rotary_dim, 2, factor != 1)


def main() -> None:
    a = replay()
    card = load_card("gemma-3-27b-it")
    w = rank_weights(card, parse_dtype("bfloat16"), Layout(tp=4), 0, 0)
    gib = 2 ** 30
    print(f"kvplan weights per GPU: {(w.bytes + w.buffers_bytes) / gib:.4f} GiB; tensors requested in the replay: "
          f"{a.requested / gib:.4f} GiB; allocator's allocated blocks: {a.allocated / gib:.4f} GiB "
          f"(+{(a.allocated - a.requested) / 2 ** 20:.1f} MiB of unsplit segment tails); logged: "
          f"{' / '.join(map(str, LOGGED_GIB))} GiB")
    for tp, logged in ((1, 14.2488), (2, 7.1217)):
        q = replay_qwen2(tp)
        print(f"Qwen2-7B-Instruct TP {tp}: requested {q.requested / gib:.4f} GiB, allocated {q.allocated / gib:.4f} GiB "
              f"(+{(q.allocated - q.requested) / 2 ** 20:.1f} MiB); logged {logged} GiB (vLLM 0.10.1.1)")


if __name__ == "__main__":
    main()
