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
