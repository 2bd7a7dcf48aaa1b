"""The reference model: exact parameter counts, caches of the engines' sizes, KV reuse equal to a full forward."""

import pytest

from helpers import tiered

from kvplan.model.catalog import bundled_names, load_card
from kvplan.cost.params import count_params
from kvplan.errors import KvplanError
from kvplan.verify.reference.shrink import REFERENCE_SSM_KINDS, shrink

torch = pytest.importorskip("torch")

from kvplan.verify.reference.cache import PagedCache, RingCache, make_caches  # noqa: E402
from kvplan.verify.reference.generate import forward_full, greedy  # noqa: E402
from kvplan.verify.reference.build import build  # noqa: E402
from kvplan.verify.reference.track import StorageTracker  # noqa: E402

ENGINES = ("ideal", "hf-static", "vllm")


def tiny(name, seq_len=12):
    return shrink(load_card(name), layers=2, scale=1 / 64, seq_len=seq_len)[0]


def _refused(name) -> bool:
    """A state mixer the reference model lacks (Gated DeltaNet) is refused by shrink with a line naming ssm.kind."""
    ssm = load_card(name).ssm
    if ssm is None or ssm.kind in REFERENCE_SSM_KINDS:
        return False
    with pytest.raises(KvplanError, match=f"ssm.kind: .*; {name}'s are {ssm.kind}"):
        tiny(name)
    return True


@pytest.mark.parametrize("name", bundled_names())
def test_param_count_exact(name):
    if _refused(name):
        return
    card = tiny(name)
    model = build(card)
    assert sum(p.numel() for p in model.parameters()) == count_params(card).total


def test_param_count_full_size_on_meta():
    # the unshrunk llama-2-7b on the meta device: its published 6,738,415,616 parameters
    from kvplan.verify.reference.model import Reference

    model = Reference(load_card("llama-2-7b"), device="meta")
    assert sum(p.numel() for p in model.parameters()) == 6_738_415_616


def run_both(card, engine, dtype=torch.float32, B=2, P=9, steps=3):
    model = build(card, engine=engine, dtype=dtype)
    g = torch.Generator().manual_seed(1)
    prompt = torch.randint(0, card.vocab_size, (B, P), generator=g)
    enc = torch.randint(0, card.vocab_size, (B, 5), generator=g) if card.architecture == "encoder-decoder" else None
    caches = make_caches(card, engine=engine, batch=B, seq_len=P + steps, encoder_len=5, max_cache_len=P + steps + 2,
                         block_size=4, dtype=dtype)
    tokens, logits = greedy(model, prompt, caches, steps, enc_tokens=enc)
    return model, caches, tokens, torch.cat(logits, dim=1), forward_full(model, tokens, enc)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("name", tiered([n for n in bundled_names() if load_card(n).has_kv_cache]))
def test_kv_reuse_equals_full_forward(name, engine):
    if _refused(name):
        return
    card = tiny(name)
    *_, got, full = run_both(card, engine)
    torch.testing.assert_close(got, full[:, :got.shape[1]], rtol=1e-4, atol=1e-5)


def test_kv_reuse_bf16():
    *_, got, full = run_both(tiny("gemma-2-9b"), "vllm", dtype=torch.bfloat16)
    torch.testing.assert_close(got.float(), full[:, :got.shape[1]].float(), rtol=0.05, atol=0.05)


def test_a_wrong_cache_is_caught():
    # the equality test can fail: forget the last prompt position in every cache and the decode logits move
    card = tiny("llama-2-7b")
    model, caches, tokens, got, full = run_both(card, "ideal", steps=1)
    for c in caches.self_attn:
        c.k[:, :, 8].zero_()
    from kvplan.verify.reference.generate import decode_step

    again = decode_step(model, tokens[:, -1:], 9, caches)
    assert not torch.allclose(again, full[:, 9:10], atol=1e-4)


def test_ring_holds_window_and_paged_frees_blocks():
    card = tiny("mistral-7b-v0.1")  # sliding_window 6 after shrinking
    assert card.sliding_window == 6
    _, caches, *_ = run_both(card, "ideal", P=9, steps=3)
    ring = caches.self_attn[0]
    assert isinstance(ring, RingCache) and ring.k.shape[2] == 6
    # the ring after 12 tokens: position p in slot p % 6, so slots hold 6..11
    assert ring.positions().tolist() == [6, 7, 8, 9, 10, 11]
    _, caches, *_ = run_both(card, "vllm", P=9, steps=3)
    paged = caches.self_attn[0]
    assert isinstance(paged, PagedCache)
    # block 4, 12 tokens, W 6: before computing token 11, blocks wholly before 11 - 6 + 1 = 6 are freed: block 0
    assert sorted(paged.tables[0]) == [1, 2]
    assert paged.bytes_held() == 2 * 2 * (2 * 4 * card.num_kv_heads * card.head_dim * 4)


def test_tracker_counts_storages_not_views():
    with StorageTracker() as t:
        a = torch.empty(1000)  # 4000 B
        b = a.view(10, 100)  # a view: no new storage
        a.add_(1)  # in place: no new storage
        c = a + 1  # 4000 B more
        assert t.current() == 8000
        del a, b  # a's storage freed with its last view
        assert t.current() == 4000
        del c
        assert t.current() == 0
    assert t.peak() == 8000


def test_tracker_frees_at_last_reference():
    with StorageTracker() as t:
        a = torch.ones(256)
        b = a[:10]
        del a
        assert t.current() == 1024  # the view keeps the storage
        del b
        assert t.current() == 0


def test_shrink_keeps_structure():
    card, changes = shrink(load_card("gemma-3-27b"), layers=2, scale=1 / 64, seq_len=12)
    assert card.num_layers == 6 and card.layer_types.count("global") == 1  # 5:1 pattern needs 6 layers
    assert "num_layers: 62 -> 6" in changes and "sliding_window: 1024 -> 6" in changes
    ds, changes = shrink(load_card("deepseek-v3"), layers=2, scale=1 / 64)
    assert ds.moe.first_dense_layers == 1 and ds.num_layers == 2
    assert "moe.first_dense_layers: 3 -> 1" in changes and "mla.kv_lora_rank: 512 -> 8" in changes
    q, _ = shrink(load_card("qwen2.5-7b"), scale=1 / 64)
    assert (q.num_heads, q.num_kv_heads) == (28, 4) and q.head_dim % 2 == 0
    assert shrink(load_card("gpt2"))[1] == []
