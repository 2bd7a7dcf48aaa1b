"""The reference model's chunked local attention and state-space (Mamba-1 / Mamba-2) mixers: exact parameter counts,
cache reuse equal to a cache-free forward, and `kvplan verify` exact on weights and on the bytes the caches hold
(K/V of the current chunk, conv and SSM states) under every engine the reference caches implement."""

from pathlib import Path

import pytest

from kvplan.cost.params import count_params
from kvplan.model.catalog import card_from_dict, load_card
from kvplan.verify.reference.shrink import shrink

torch = pytest.importorskip("torch")

from kvplan.verify.reference.cache import ChunkCache, StateCache  # noqa: E402
from kvplan.verify.reference.cache import make_caches  # noqa: E402
from kvplan.verify.reference.generate import decode_step, forward_full, greedy  # noqa: E402
from kvplan.verify.reference.build import build  # noqa: E402
from kvplan.verify.run import verify  # noqa: E402


CARDS = Path(__file__).parent / "data" / "cards"
NAMES = ("chunked-tiny", "mamba2-tiny", "mamba-tiny", "hybrid-tiny")
ENGINES = ("ideal", "hf-static", "vllm")


def card(name):
    return load_card(str(CARDS / f"{name}.yaml"))


def run_both(c, engine, B=2, P=9, steps=3):
    """Greedy prefill + decode with the engine's caches, and the cache-free forward of the same tokens. The mixers'
    matrices are drawn 25x wider than build's N(0, 0.02) so that a Mamba-1 mixer (no output norm) moves the logits
    by far more than the tolerance: a wrong state must show."""
    model = build(c, engine=engine)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if (".attn.conv1d." in name or ".attn.x_proj." in name or ".attn.out_proj." in name) and p.dim() > 1:
                p.mul_(25)
    g = torch.Generator().manual_seed(1)
    prompt = torch.randint(0, c.vocab_size, (B, P), generator=g)
    caches = make_caches(c, engine=engine, batch=B, seq_len=P + steps, max_cache_len=P + steps + 2, block_size=4)
    tokens, logits = greedy(model, prompt, caches, steps)
    return model, caches, tokens, torch.cat(logits, dim=1), forward_full(model, tokens)


@pytest.mark.parametrize("name", NAMES)
def test_param_count_exact(name):
    c = card(name)
    assert sum(p.numel() for p in build(c).parameters()) == count_params(c).total


# (prompt, steps): decode crosses a chunk edge (C = 4: positions 6..9 cross 8); a prompt shorter than d_conv - 1
@pytest.mark.parametrize("P,steps", [(6, 4), (2, 3)])
@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("name", NAMES)
def test_cache_reuse_equals_full_forward(name, engine, P, steps):
    *_, got, full = run_both(card(name), engine, P=P, steps=steps)
    torch.testing.assert_close(got, full[:, :got.shape[1]], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("state", ["conv", "ssm"])
@pytest.mark.parametrize("name", ["mamba2-tiny", "mamba-tiny"])
def test_a_lost_state_is_caught(name, state):
    # the equality above can fail: zero one state in every layer before the last decode step and its logits move
    model, caches, tokens, got, full = run_both(card(name), "ideal", P=6, steps=1)
    states = [c for c in caches.self_attn if isinstance(c, StateCache)]
    assert states
    for c in states:
        getattr(c, state).zero_()
    again = decode_step(model, tokens[:, -1:], 6, caches)
    assert not torch.allclose(again, full[:, 6:7], atol=1e-3)
    torch.testing.assert_close(got[:, -1:], full[:, 6:7], rtol=1e-4, atol=1e-5)  # and the right one passes


def test_the_chunk_mask_matters():
    # the same weights with the chunked layers made global attend other keys: the logits differ
    c = card("chunked-tiny")
    glob = card_from_dict(dict(c.model_dump(exclude_none=True), layer_pattern=["global"]), origin="test")
    tokens = torch.randint(0, c.vocab_size, (1, 10), generator=torch.Generator().manual_seed(3))
    a, b = forward_full(build(c), tokens), forward_full(build(glob), tokens)
    torch.testing.assert_close(a[:, :4], b[:, :4])  # the first chunk sees the same keys either way
    assert not torch.allclose(a[:, 4:], b[:, 4:], atol=1e-4)


def test_ideal_chunk_cache_holds_the_current_chunk_only():
    c = card("chunked-tiny")
    _, caches, *_ = run_both(c, "ideal", B=1, P=6, steps=4)
    chunked = [x for x in caches.self_attn if isinstance(x, ChunkCache)]
    assert len(chunked) == 3
    for x in chunked:  # 10 tokens, C = 4: positions 8 and 9
        assert x.k.shape[2] == x.v.shape[2] == 2 and x.read(9)[2].tolist() == [8, 9]


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("name", NAMES)
def test_verify_exact(name, engine, dtype):
    r = verify(str(CARDS / f"{name}.yaml"), batch=2, seq_len=11, engine=engine, kv_dtype=dtype, decode_steps=3,
               block_size=4)
    checks = {c.name: c for c in r.checks}
    for key in ("params", "weights_bytes", "kv_cache_bytes"):
        assert checks[key].ok is True and checks[key].tolerance == 0, checks[key]
    assert r.ok
    stateless = card(name).ssm is None
    for key in ("prefill_flops", "decode_step_flops"):  # exact; the reference runs its conv and scan elementwise
        assert checks[key].ok is True and checks[key].tolerance == 0, checks[key]
        assert checks[key].predicted > 0 and (stateless or "elementwise" in checks[key].note)
    for key in ("peak_prefill_bytes", "peak_decode_bytes"):
        assert (checks[key].ok is True) if stateless else (checks[key].ok is None and checks[key].note), key


def _kv(r):
    return next(c for c in r.checks if c.name == "kv_cache_bytes").measured


def test_state_bytes_by_hand():
    # mamba2-tiny: 2 layers; conv_dim = 128 + 2 x 2 x 8 = 160 channels; SSM state 8 heads x 16 x 8 = 1024
    b = 2
    ideal = _kv(verify(str(CARDS / "mamba2-tiny.yaml"), batch=b, seq_len=11, kv_dtype="bf16"))
    assert ideal == 2 * b * (160 * 3 + 1024) * 2  # d_conv - 1 inputs; state in the cache dtype
    hf = _kv(verify(str(CARDS / "mamba2-tiny.yaml"), batch=b, seq_len=11, kv_dtype="bf16", engine="hf-static"))
    assert hf == 2 * b * (160 * 4 * 2 + 1024 * 4)  # transformers: d_conv inputs, the state in float32
    # the measured bytes do not grow with the sequence
    assert _kv(verify(str(CARDS / "mamba2-tiny.yaml"), batch=b, seq_len=21, kv_dtype="bf16")) == ideal


def test_chunked_bytes_by_hand():
    # chunked-tiny: 3 chunked layers (C = 4) + 1 global; 2 KV heads x 16 head_dim, K and V, fp32; 11 tokens
    per_pos = 2 * 2 * 16 * 4
    ideal = _kv(verify(str(CARDS / "chunked-tiny.yaml"), seq_len=11, kv_dtype="fp32"))
    assert ideal == per_pos * (3 * 3 + 11)  # positions 8, 9, 10 of the current chunk
    vllm = _kv(verify(str(CARDS / "chunked-tiny.yaml"), seq_len=11, kv_dtype="fp32", engine="vllm", block_size=2))
    assert vllm == per_pos * (3 * (6 - 4) * 2 + 6 * 2)  # 6 blocks of 2; the 4 before token 8 freed
    hf = _kv(verify(str(CARDS / "chunked-tiny.yaml"), seq_len=11, kv_dtype="fp32", engine="hf-static"))
    assert hf == per_pos * (3 * 4 + 11)  # a sliding layer of W = C


def test_shrunk_state_card_keeps_its_structure_and_verifies():
    big = card_from_dict(dict(card("hybrid-tiny").model_dump(exclude_none=True), hidden_size=1024,
                              ssm=dict(kind="mamba2", d_state=64, num_heads=16, head_dim=128, n_groups=2),
                              ffn_size=2048, vocab_size=4096, num_layers=8), origin="test")
    small, changes = shrink(big, layers=2, scale=1 / 16, seq_len=12)
    assert (small.ssm.num_heads, small.ssm.n_groups, small.layer_types) == (16, 2, ("mamba", "global"))
    assert small.ssm.head_dim == 8 and small.ssm.intermediate_size == 128 and "ssm.d_state: 64 -> 4" in changes
    r = verify(big, layers=2, scale=1 / 16, seq_len=12)
    assert r.ok and all(c.ok for c in r.checks if c.name in ("params", "weights_bytes", "kv_cache_bytes"))
