"""GGUF in: metadata and tensor table read with gguf-py, a card from them, --gguf on the commands, split files."""

from __future__ import annotations

import pytest

pytest.importorskip("gguf")

from gguf_files import write_gguf  # noqa: E402
from gguf_models import deepseek_v3, llama31_8b_q4_k_m, qwen35  # noqa: E402

from kvplan.errors import KvplanError  # noqa: E402
from kvplan.model.gguf import load_gguf  # noqa: E402
from kvplan.model.gguf_card import card_from_gguf  # noqa: E402


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    return llama31_8b_q4_k_m(tmp_path_factory.mktemp("gguf"))


def test_tensor_table_bytes_are_llama_cpp_model_size(llama):
    """llama3.1:8b Q4_K_M: 4,912,898,304 B = 4.58 GiB, 8,030,261,312 params, 4.89 BPW (Ollama issue log)."""
    g = load_gguf(str(llama))
    assert len(g.tensors) == 292
    assert sorted({t.type_name for t in g.tensors}) == ["F32", "Q4_K", "Q6_K"]
    assert g.weight_bytes == 4_912_898_304 and g.params == 8_030_261_312
    assert f"{g.weight_bytes / 2**30:.2f} GiB ({g.weight_bytes * 8 / g.params:.2f} BPW)" == "4.58 GiB (4.89 BPW)"


def test_card_from_gguf(llama):
    card = card_from_gguf(str(llama))
    assert (card.num_layers, card.num_heads, card.num_kv_heads, card.head_dim) == (32, 32, 8, 128)
    assert card.vocab_size == 128256 and not card.tie_embeddings and card.source.startswith("gguf:")


def test_per_layer_heads_and_swa_widths(tmp_path):
    """head_count_kv as an array (0: no attention), key_length_swa, a bool sliding_window_pattern (Gemma-4 style)."""
    p = write_gguf(tmp_path / "g4.gguf", "gemma4", {
        "block_count": 6, "embedding_length": 1024, "attention.head_count": [8] * 6,
        "attention.head_count_kv": [8, 8, 8, 8, 8, 1], "attention.key_length": 512, "attention.value_length": 512,
        "attention.key_length_swa": 256, "attention.value_length_swa": 256, "attention.sliding_window": 512,
        "attention.sliding_window_pattern": [True] * 5 + [False], "context_length": 8192, "vocab_size": 1000})
    hp = load_gguf(str(p)).hparams
    assert hp.swa == (True,) * 5 + (False,)
    assert hp.n_embd_k == (2048,) * 5 + (512,)


def test_arch_swa_period_and_recurrent_layers(tmp_path):
    g3 = write_gguf(tmp_path / "g3.gguf", "gemma3", {"block_count": 12, "embedding_length": 1024,
                                                      "attention.head_count": 4, "attention.head_count_kv": 1,
                                                      "attention.sliding_window": 512, "vocab_size": 10})
    assert load_gguf(str(g3)).hparams.swa == ((True,) * 5 + (False,)) * 2  # set_swa_pattern(6)
    hp = load_gguf(str(qwen35(tmp_path, "q", 8, 4, 4096, nextn=1))).hparams
    assert hp.recurrent == (True, True, True, False) * 2 + (False,)  # full_attention_interval 4; the MTP block
    assert hp.kv_layers == (3, 7)
    assert (hp.n_embd_r, hp.n_embd_s) == (3 * (4096 + 2 * 16 * 128), 128 * 4096)


def test_mla_card(tmp_path):
    card = card_from_gguf(str(deepseek_v3(tmp_path)))
    assert card.mla.kv_lora_rank == 512 and card.mla.qk_rope_head_dim == 64 and card.moe.num_experts == 256


def test_split_gguf_reads_every_part(tmp_path):
    import numpy as np
    from gguf import GGUFWriter

    w = GGUFWriter(str(tmp_path / "m.gguf"), "llama", split_max_tensors=2)
    for key, v in (("llama.block_count", 2), ("llama.embedding_length", 64), ("llama.attention.head_count", 4)):
        w.add_uint32(key, v)
    for i, n in enumerate((64, 128, 256, 512, 1024)):
        w.add_tensor(f"blk.{i % 2}.w{i}.weight", np.zeros(n, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    parts = sorted(tmp_path.glob("m-*.gguf"))
    assert len(parts) == 3
    g = load_gguf(str(parts[0]))
    assert len(g.files) == 3 and g.weight_bytes == 4 * (64 + 128 + 256 + 512 + 1024)
    parts[2].unlink()
    load_gguf.cache_clear()
    with pytest.raises(KvplanError, match="lacks part"):
        load_gguf(str(parts[0]))


def test_not_a_gguf(tmp_path):
    bad = tmp_path / "x.gguf"
    bad.write_bytes(b"GGUF\x03\x00\x00\x00garbage")
    with pytest.raises(KvplanError, match="--gguf"):
        load_gguf(str(bad))


def test_gguf_flag_on_the_commands(cli, cli_json, llama, tmp_path):
    est = cli_json("estimate", "--gguf", str(llama), "--seq-len", "8192")
    assert est["kv_cache"]["bytes_per_token"] == 2 * 32 * 8 * 128 * 2
    code, out, err = cli("cards", "import", str(llama), "--name", "l31")
    assert code == 0 and "num_kv_heads: 8" in out and "name: l31" in out
    code, _, err = cli("estimate", "--gguf", str(tmp_path / "missing.gguf"), "--seq-len", "8")
    assert code == 2 and "--gguf" in err
    code, _, err = cli("estimate", "--gguf", str(llama), "--model", "llama-3-8b", "--seq-len", "8")
    assert code == 2 and "exactly one" in err


def _deci(tmp_path, kvs, name="deci"):
    """A deci GGUF (Nemotron-51B/49B/253B): K/V heads per layer, 0 for an attention-free layer; F16 tensors."""
    from kvplan.verify.llamacpp import _deci_tensors

    h, heads, hd, ff, vocab = 256, 4, 64, 512, 1000
    kv = {"context_length": 4096, "embedding_length": h, "block_count": len(kvs), "feed_forward_length": ff,
          "attention.head_count": [heads if k else 0 for k in kvs], "attention.head_count_kv": kvs,
          "rope.dimension_count": hd, "attention.layer_norm_rms_epsilon": 1e-5, "vocab_size": vocab}
    tensors = [(n, ne, "F32" if len(ne) == 1 else "F16") for n, ne in _deci_tensors(kvs, h, heads, hd, ff, vocab)]
    return write_gguf(tmp_path / f"{name}.gguf", "deci", kv, tensors)


@pytest.mark.parametrize("kvs", [[4, 2, 1, 2], [4, 0, 1, 2], [4, 4, 0, 4]])
def test_per_layer_kv_heads_plan_llamacpp_by_llama_cpp_rule(cli_json, tmp_path, kvs):
    """QA D 1, 2, 11: llama.cpp caches sum(per-layer heads) x head_dim x 2 (K, V) x 2 B (f16) per cell; an
    attention-free layer (0 heads) holds nothing; the weights row counts the GGUF's parameters."""
    p = _deci(tmp_path, kvs)
    for engine in ("llamacpp", "ollama"):
        r = cli_json("plan", "--gguf", str(p), "--engine", engine, "--gpu", "RTX-4090", "--max-model-len", "2048")
        assert (r["kv_cache"]["block_size"], r["kv_cache"]["bytes_per_block"]) == (1, sum(kvs) * 64 * 2 * 2), engine
        assert r["request_kv_bytes"] == sum(kvs) * 64 * 2 * 2 * 2048, engine
    g = load_gguf(str(p))
    on_gpu = g.params - g.tensors_by_name()["token_embd.weight"].n_elements  # the input layer stays on the CPU
    assert [row["params"] for row in r["ranks"]] == [on_gpu]


def test_per_layer_kv_heads_are_refused_where_a_card_would_size_them(cli, tmp_path):
    """QA D 1, 2: no card holds per-layer K/V heads; estimate, cards import and plan on other engines refuse in one
    line naming attention.head_count_kv (not mamba/ssm) and the command that plans it."""
    for kvs in ([4, 2, 1, 2], [4, 0, 1, 2]):
        p = _deci(tmp_path, kvs, f"d{kvs[1]}")
        for args in (("estimate", "--gguf", str(p), "--seq-len", "2048"),
                     ("estimate", "--gguf", str(p), "--seq-len", "2048", "--engine", "llamacpp"),
                     ("cards", "import", str(p)),
                     ("plan", "--gguf", str(p), "--gpu", "RTX-4090", "--max-model-len", "2048")):
            code, out, err = cli(*args)
            assert code == 2 and not out, args
            assert err.count("\n") == 1 and "attention.head_count_kv" in err and "Traceback" not in err, args
            assert "mamba" not in err and "ssm" not in err, args
            assert f"kvplan plan --gguf {p} --engine llamacpp" in err, args
            assert ("0 K/V heads" in err) == (0 in kvs), args
    with pytest.raises(KvplanError, match="attention.head_count_kv"):
        card_from_gguf(str(p))
    assert card_from_gguf(str(p), engine="llamacpp", per_layer_ok=True).source == f"gguf:{p}"


@pytest.mark.slow
def test_per_layer_kv_heads_against_real_llama_cpp():
    """The deci cases of `kvplan verify --engine llamacpp`: the real llama.cpp's buffers and cache line."""
    pytest.importorskip("llama_cpp")
    from kvplan.verify.llamacpp import verify_llamacpp

    r = verify_llamacpp(["deci-per-layer", "deci-attn-free"])
    assert r.ok and {c.case for c in r.checks} == {"deci-per-layer", "deci-attn-free"}, r.checks
