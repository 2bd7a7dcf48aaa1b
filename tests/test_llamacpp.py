"""llama.cpp's buffers from GGUF metadata and flags, against published llama.cpp log lines (quoted in
../shared/reference/llamacpp.md, each with its source). Log lines are compared with runs of spaces collapsed (the
quotes collapse llama.cpp's %6u/%3d padding); every number is compared as printed."""

from __future__ import annotations

import pytest

pytest.importorskip("gguf")

from gguf_files import write_gguf  # noqa: E402
from gguf_models import deepseek_v3, dense, llama31_8b_q4_k_m, qwen35  # noqa: E402

from kvplan.cost.llamacpp import LlamaFlags, memory  # noqa: E402
from kvplan.errors import KvplanError, Refused  # noqa: E402
from kvplan.model.gguf import load_gguf  # noqa: E402

MIB = 2**20


def squash(line: str) -> str:
    return " ".join(line.split()).replace("( ", "(")


def mem(path, **flags):
    return memory(load_gguf(str(path)).hparams, LlamaFlags(**flags))


def line(m, prefix: str, device: str | None = None, kind: str | None = None) -> str:
    hits = [squash(x) for x in m.log_lines() if squash(x).startswith(prefix) and (device is None or device in x)
            and (kind is None or kind in x)]
    assert len(hits) == 1, (prefix, m.log_lines())
    return hits[0]


@pytest.fixture(scope="module")
def d(tmp_path_factory):
    return tmp_path_factory.mktemp("logs")


@pytest.fixture(scope="module")
def llama31(d):
    return llama31_8b_q4_k_m(d)


def test_ollama_llama31_8b_q4_k_m_model_and_kv_buffers(llama31):
    """Ollama issue log (Nov 2024 build): num_ctx 2048 x num_parallel 4 = n_ctx 8192, FA off, old runner with
    embeddings: `CPU model buffer size = 281.81 MiB`, `CUDA0 model buffer size = 4403.49 MiB`, `CUDA0 KV buffer size =
    1024.00 MiB`, output 2.02 MiB."""
    m = mem(llama31, n_ctx=8192, n_parallel=4, flash_attn="off", rules="2025-02", embeddings=True)
    assert line(m, "load_tensors: CPU model") == "load_tensors: CPU model buffer size = 281.81 MiB"
    assert line(m, "load_tensors: CUDA0 model") == "load_tensors: CUDA0 model buffer size = 4403.49 MiB"
    assert line(m, "llama_kv_cache: CUDA0 KV") == "llama_kv_cache: CUDA0 KV buffer size = 1024.00 MiB"
    assert line(m, "llama_context: CUDA_Host output") == "llama_context: CUDA_Host output buffer size = 2.02 MiB"
    assert m.context.n_ctx == 8192


def test_kvcalc_metal_llama3_8b(llama31):
    """kvcalc README, Meta-Llama-3-8B Q4_K_M, `-c 8192 -np 1`, Metal: `size = 1024.00 MiB (8192 cells, 32 layers,
    1/1 seqs), K (f16): 512.00 MiB, V (f16): 512.00 MiB`; MTL0 5551 MiB = 4403 model + 1024 KV + 124 compute (measured).
    Llama-3 and 3.1 share the tensor table but for 3.1's 256-byte rope_freqs."""
    m = mem(llama31, n_ctx=8192, n_parallel=1, backend="MTL")
    assert int(m.device_bytes("MTL0") - [b for b in m.buffers if b.kind == "compute"][0].bytes) // MIB + 124 == 5551
    assert line(m, "llama_kv_cache: size") == ("llama_kv_cache: size = 1024.00 MiB (8192 cells, 32 layers, 1/1 seqs), "
                                               "K (f16): 512.00 MiB, V (f16): 512.00 MiB")


def test_partial_offload_old_and_2026_rules(d):
    """llama-server log: 32-layer GQA-8, 32768 cells: `CPU KV buffer size = 2304.00 MiB`, `CUDA0 KV buffer size =
    1792.00 MiB` (14 layers on the GPU). 2025 rule: -ngl 14 offloads the last 14 blocks; 2026: the output first, so
    -ngl 15 does."""
    p = dense(d, "gqa8")
    for ngl, rules in ((14, "2025-12"), (15, "2026-08")):
        m = mem(p, n_ctx=32768, n_parallel=1, n_gpu_layers=ngl, rules=rules)
        assert line(m, "llama_kv_cache: CPU KV") == "llama_kv_cache: CPU KV buffer size = 2304.00 MiB"
        assert line(m, "llama_kv_cache: CUDA0 KV") == "llama_kv_cache: CUDA0 KV buffer size = 1792.00 MiB"
        assert line(m, "llama_kv_cache: size").startswith("llama_kv_cache: size = 4096.00 MiB (32768 cells, 32 layers")
    assert mem(p, n_ctx=32768, n_parallel=1, n_gpu_layers=15, rules="2025-12").context.n_gpu_layers == 15  # 15 blocks there


def test_ngl_1_offloads_the_output_layer_first(d):
    """gguf-parser-go #42 quoting a 2026 build: `-ngl 1` on a 28-block model: `layer 28 assigned to device CUDA0`,
    `offloaded 1/29 layers to GPU`: no K/V on the GPU."""
    m = mem(dense(d, "b28", layers=28), n_ctx=4096, n_parallel=1, n_gpu_layers=1)
    assert (m.context.n_gpu_layers, m.context.n_layer + 1) == (1, 29)
    assert not [b for b in m.buffers if b.device == "CUDA0" and b.kind == "kv"]


def test_laguna_q4_0_and_swa(d):
    """Laguna test log, 1,048,576 cells, q4_0 K/V: `size = 13824.00 MiB (1048576 cells, 12 layers, 1/1 seqs), K (q4_0):
    6912.00 MiB` and SWA `size = 40.50 MiB (1024 cells, 36 layers, 1/1 seqs)` (n_swa 512, n_ubatch 512)."""
    p = write_gguf(d / "laguna.gguf", "laguna", {
        "block_count": 48, "embedding_length": 2048, "attention.head_count": 16, "attention.head_count_kv": 8,
        "attention.key_length": 128, "attention.value_length": 128, "attention.sliding_window": 512,
        "attention.sliding_window_pattern": [il % 4 != 3 for il in range(48)], "context_length": 1048576,
        "vocab_size": 100352})
    m = mem(p, n_ctx=1048576, n_parallel=1, type_k="q4_0", type_v="q4_0", flash_attn="on")
    full, swa = [squash(c.log_line()) for c in m.caches]
    assert full.startswith("llama_kv_cache: size = 13824.00 MiB (1048576 cells, 12 layers, 1/1 seqs), K (q4_0): "
                           "6912.00 MiB")
    assert swa.startswith("llama_kv_cache: size = 40.50 MiB (1024 cells, 36 layers, 1/1 seqs)")


def test_gemma_family_iswa(d):
    """A Gemma-family log: non-SWA `102400 cells, 4 layers` = 1600.00 MiB, SWA `1536 cells, 20 layers` = 60.00 MiB;
    1536 = pad(1024 + 512, 256). Global layers 512 wide, sliding 256 (key_length_swa)."""
    p = write_gguf(d / "gemma4.gguf", "gemma4", {
        "block_count": 24, "embedding_length": 2048, "attention.head_count": 8, "attention.head_count_kv": 2,
        "attention.key_length": 512, "attention.value_length": 512, "attention.key_length_swa": 256,
        "attention.value_length_swa": 256, "attention.sliding_window": 1024,
        "attention.sliding_window_pattern": [il % 6 != 5 for il in range(24)], "context_length": 131072,
        "vocab_size": 262144})
    m = mem(p, n_ctx=102400, n_parallel=1)
    full, swa = [c for c in m.caches]
    assert (full.cells, full.layers, f"{full.bytes / MIB:.2f}") == (102400, 4, "1600.00")
    assert (swa.cells, swa.layers, f"{swa.bytes / MIB:.2f}") == (1536, 20, "60.00")
    assert mem(p, n_ctx=102400, n_parallel=1, swa_full=True).caches[1].cells == 102400


def test_qwen35_9b_hybrid(d):
    """Qwen3.5-9B: `llama_kv_cache: size = 4224.00 MiB (135168 cells, 8 layers, 4/1 seqs), K (f16): 2112.00 MiB` and
    `llama_memory_recurrent: size = 201.00 MiB (4 cells, 32 layers, 4 seqs), R (f32): 9.00 MiB, S (f32): 192.00 MiB`
    (llama-server's auto -np: 4 slots, unified)."""
    m = mem(qwen35(d, "qwen35-9b", 32, 4, 4096), n_ctx=135168)
    kv, rec = [squash(c.log_line()) for c in m.caches]
    assert kv.startswith("llama_kv_cache: size = 4224.00 MiB (135168 cells, 8 layers, 4/1 seqs), K (f16): 2112.00 MiB")
    assert rec == ("llama_memory_recurrent: size = 201.00 MiB (4 cells, 32 layers, 4 seqs), R (f32): 9.00 MiB, "
                   "S (f32): 192.00 MiB")


def test_qwen35_27b_q8_0_with_an_mtp_block(d):
    """Qwen3.x-27B-class (2026-05 log): `size = 4352.00 MiB (131072 cells, 16 layers, 4/1 seqs), K (q8_0): 2176.00 MiB`
    and `llama_memory_recurrent: size = 598.50 MiB (4 cells, 65 layers, 4 seqs), R (f32): 22.50 MiB, S (f32): 576.00
    MiB`: 64 blocks + 1 MTP block (no cache of its own)."""
    m = mem(qwen35(d, "qwen35-27b", 64, 4, 6144, nextn=1), n_ctx=131072, type_k="q8_0", type_v="q8_0")
    kv, rec = [squash(c.log_line()) for c in m.caches]
    assert kv.startswith("llama_kv_cache: size = 4352.00 MiB (131072 cells, 16 layers, 4/1 seqs), K (q8_0): "
                         "2176.00 MiB")
    assert rec == ("llama_memory_recurrent: size = 598.50 MiB (4 cells, 65 layers, 4 seqs), R (f32): 22.50 MiB, "
                   "S (f32): 576.00 MiB")


def test_mla_latent_then_v_less(d):
    """DeepSeek-V3 (61 layers): Dec 2025 K 576 + V 512 per token and layer, f16: 2176 B x 61 = 132,736 B/token;
    from PR #19067 (2026) K only: 1152 B, `V (f16): 0.00 MiB`."""
    p = deepseek_v3(d)
    old = mem(p, n_ctx=4096, n_parallel=1, rules="2025-12")
    new = mem(p, n_ctx=4096, n_parallel=1)
    assert old.caches[0].bytes == 132_736 * 4096
    assert new.caches[0].bytes == 1152 * 61 * 4096 and squash(new.caches[0].log_line()).endswith("V (f16): 0.00 MiB")


def test_output_buffer_in_host_memory(d):
    """Qwen vocabulary (151936), 1 sequence: `CUDA_Host output buffer size = 0.58 MiB`: never VRAM."""
    m = mem(dense(d, "qwen-vocab", vocab=151936), n_ctx=4096, n_parallel=1)
    assert line(m, "llama_context: CUDA_Host output") == "llama_context: CUDA_Host output buffer size = 0.58 MiB"


def test_n_ctx_padding_by_version(d):
    p = dense(d, "pad")
    assert mem(p, n_ctx=5000, n_parallel=1, rules="2025-02", flash_attn="off").context.n_ctx == 5024  # pad 32 without FA
    assert mem(p, n_ctx=5000, n_parallel=1, rules="2025-02", flash_attn="on").context.n_ctx == 5120  # 256 with FA
    # 2025-02 (c392e509): -fa is a switch, flash attention off unless given (common.h flash_attn = false): pad 32
    assert mem(p, n_ctx=5000, n_parallel=1, rules="2025-02").context.n_ctx == 5024
    assert mem(p, n_ctx=5000, n_parallel=1).context.n_ctx == 5120
    split = mem(p, n_ctx=10000, n_parallel=3)  # n_ctx_seq = pad(pad(10000, 256) / 3, 256) = pad(3413, 256) = 3584
    assert (split.context.n_ctx_seq, split.context.n_ctx, split.context.kv_unified) == (3584, 3 * 3584, False)
    auto = mem(p, n_ctx=10000)  # -np auto: 4 slots sharing one cache
    assert (auto.context.n_seq_max, auto.context.kv_unified, auto.context.n_ctx) == (4, True, 10240)


def test_refusals(d):
    p = dense(d, "refuse")
    with pytest.raises(Refused, match="Flash Attention"):
        mem(p, n_ctx=4096, type_v="q8_0", flash_attn="off")
    with pytest.raises(KvplanError, match="turbo3"):
        mem(p, n_ctx=4096, type_k="turbo3")
    odd = dense(d, "odd", head=80)
    with pytest.raises(Refused, match="block size 32"):
        mem(odd, n_ctx=4096, type_k="q4_0")


def test_compute_buffer_estimate_within_stated_error(llama31):
    """Logged compute buffers (2024-2025 builds): Llama-3.1-8B CUDA, n_ctx 8192, FA off: 560.00 MiB; Llama-3-8B CPU,
    FA: 258.50 MiB. kvplan's estimate is labelled estimated and within -48 MiB of them."""
    for flags, logged in ((dict(n_ctx=8192, n_parallel=1, flash_attn="off", rules="2025-12"), 560.00),
                          (dict(n_ctx=4096, n_parallel=1, rules="2025-12"), 258.50)):
        b = [b for b in mem(llama31, **flags).buffers if b.kind == "compute"][0]
        assert b.estimated and -48 <= b.bytes / MIB - logged <= 0


def test_plan_json_buffers_and_launch_line(cli_json, cli, llama31):
    r = cli_json("plan", "--gguf", str(llama31), "--gpu", "RTX-4090", "--max-model-len", "8192", "--engine",
                 "llamacpp", "-np", "2", "-ctk", "q8_0", "-ctv", "q8_0", "-ngl", "20")
    assert r["context"]["n_ctx"] == 16384 and r["context"]["n_ctx_seq"] == 8192
    kinds = {(b["device"], b["kind"]) for b in r["buffers"]}
    assert {("CPU", "model"), ("CUDA0", "model"), ("CUDA0", "kv"), ("CPU", "kv"), ("CUDA_Host", "output")} <= kinds
    assert all(b["estimated"] == (b["kind"] == "compute") for b in r["buffers"])
    assert r["launch_command"].startswith(f"llama-server -m {llama31} -c 16384 -np 2 -ctk q8_0 -ctv q8_0")
    assert r["fits"] and r["max_concurrency"] == 2
    o = cli_json("plan", "--gguf", str(llama31), "--gpu", "RTX-4090", "--max-model-len", "8192", "--engine", "ollama")
    assert o["context"]["n_ctx"] == 8192 and "OLLAMA_NUM_PARALLEL=1" in o["launch_command"]
    code, _, err = cli("plan", "--gguf", str(llama31), "--gpu", "RTX-4090", "--max-model-len", "8192", "--engine",
                       "llamacpp", "-ctv", "q4_0", "-fa", "off")
    assert code == 2 and "Flash Attention" in err
    code, _, err = cli("plan", "--model", "llama-3-8b", "--gpu", "H100-SXM", "--max-model-len", "8192", "-np", "2")
    assert code == 2 and "llamacpp" in err


@pytest.mark.parametrize("model, seq_len, batch", [("gemma-3-12b", 32768, 1), ("gpt-oss-20b", 5000, 3),
                                                   ("llama-3.1-8b", 8000, 2), ("gemma-2-9b", 9000, 2)])
def test_estimate_engine_llamacpp_agrees_with_its_caches(cli_json, model, seq_len, batch):
    """Two roads to the same bytes: kvplan's per-layer K/V (positions_held of the llamacpp runtime) and llama.cpp's
    cache arithmetic (kvplan.cost.llamacpp) from the card's hparams, at f16, -np batch. The rows are the latter; the
    former, where it differs, is named in a note: here it does not."""
    r = cli_json("estimate", "--model", model, "--seq-len", str(seq_len), "--batch", str(batch), "--engine",
                 "llamacpp", "--kv-dtype", "fp16")
    caches = r["llamacpp"]["caches"]
    assert r["kv_cache"]["total_bytes"] == sum(c["k_bytes"] + c["v_bytes"] for c in caches if c["kind"] != "recurrent")
    assert not any(n.startswith("The KV rows above") for n in r["notes"])
    assert r["llamacpp"]["context"]["n_ctx"] == -(-seq_len // 256) * 256 * batch


def test_qwen35_27b_card_matches_its_published_log(cli_json):
    """The bundled card reproduces the Qwen3.x-27B log's K/V line without a GGUF: 131072 cells x 16 layers x q8_0."""
    r = cli_json("estimate", "--model", "qwen3.5-27b", "--seq-len", "131072", "--engine", "llamacpp", "-np", "4",
                 "--kv-unified", "-ctk", "q8_0", "-ctv", "q8_0")
    kv = [c for c in r["llamacpp"]["caches"] if c["kind"] == "kv"][0]
    assert (kv["cells"], kv["layers"], kv["k_bytes"] / 2**20) == (131072, 16, 2176.0)
    rec = [c for c in r["llamacpp"]["caches"] if c["kind"] == "recurrent"][0]
    assert (rec["k_bytes"] / 2**20, rec["v_bytes"] / 2**20) == (22.5, 576.0)


def test_fit_largest_context_and_most_layers(d, llama31):
    """The inverse. Metadata only (no weights): 32 layers x 1024 x 2 (K, V) x 2 B = 128 KiB per cell, compute 250.5 MiB
    (estimated, FA on): a budget of 4 GiB + 250.5 MiB holds exactly 32768 cells."""
    from kvplan.cost.llamacpp import fit

    hp = load_gguf(str(dense(d, "fit"))).hparams
    compute = 128256 * 512 * 4
    assert fit(hp, LlamaFlags(n_parallel=1), 4 * 2**30 + compute).max_n_ctx == 32768
    assert fit(hp, LlamaFlags(n_parallel=1), 4 * 2**30 + compute - 1).max_n_ctx == 32768 - 256
    # layers of the Q4_K_M table at 8192 cells: the output layer (Q6_K 430,940,160 B + norm) comes first (2026 rule),
    # then blocks of 122,716,160 B (+16,220,160 where Q6_K) + 32 MiB of K/V each
    hp = load_gguf(str(llama31)).hparams
    budget = compute + 430_940_160 + 16_384 + 3 * (122_716_160 + 16_220_160 + 32 * 2**20) + 256  # 3 use_more_bits
    assert fit(hp, LlamaFlags(n_ctx=8192, n_parallel=1), budget).max_gpu_layers == 4
    assert fit(hp, LlamaFlags(n_ctx=8192, n_parallel=1), budget - 512).max_gpu_layers == 3


def test_card_at_q4_k_m_is_the_published_tensor_table():
    """llama-quant rules on the bundled llama-3.1-8b card give llama3.1:8b Q4_K_M's tensor bytes: layers 4,186,439,680
    (16 use_more_bits layers with Q6_K attn_v and ffn_down), token_embd Q4_K 295,501,824, output Q6_K 430,940,160 +
    norm; the published file adds the 256-byte rope_freqs tensor the card does not know."""
    from kvplan.cost.gguf_quant import quant_weights
    from kvplan.model.catalog import load_card

    layers, embd, out = quant_weights(load_card("llama-3.1-8b"), "Q4_K_M")
    assert sum(layers) == 4_186_439_680 and embd == 295_501_824 and out == 430_940_160 + 16_384
    assert sum(layers) + embd + out + 256 == 4_912_898_304


def test_quant_search_on_plan(cli_json, cli):
    """Which GGUF of a 32B fits a 24 GB card at 32k: the plan lists every llama-quantize type, largest first."""
    r = cli_json("plan", "--model", "qwq-32b", "--gpu", "RTX-4090", "--max-model-len", "32768", "--engine",
                 "llamacpp", "-np", "1", "-ctk", "q4_0", "-ctv", "q4_0")
    sizes = [q["model_bytes"] for q in r["quants"]]
    assert sizes == sorted(sizes, reverse=True) and r["quants"][0]["quant"] == "F16"
    fitting = [q["quant"] for q in r["quants"] if q["fits"]]
    assert "Q4_K_M" in fitting and "Q8_0" not in fitting
    assert any("--gguf-quant" in n for n in r["notes"])
    code, _, err = cli("estimate", "--model", "llama-3.1-8b", "--seq-len", "8", "--engine", "llamacpp",
                       "--gguf-quant", "Q3_XYZ")
    assert code == 2 and "--gguf-quant" in err


ONE_COMMAND = ("plan", "--model", "qwen3-32b", "--gpu", "RTX-4090", "--max-model-len", "32768", "--engine", "llamacpp")


def test_which_quant_of_qwen3_32b_fits_a_24_gb_gpu_at_32k(cli_json):
    """Issue 23's question as one command: the largest llama-quantize type that fits with every layer on the GPU at
    one slot of 32k with an 8- or 16-bit K/V cache (f16, then q8_0; a 4-bit cache only where nothing else fits: Q5_K_S
    would fit at q4_0 alone), and the plan's verdict, weights and launch line all for that choice. Q4_K_M is pinned by
    the search's rows below; Q5_K_S's bytes by hand (llama-quant: Q5_K (176 B per 256) everywhere, no use_more_bits
    overrides for *_S, output Q6_K (210 B per 256)): a layer holds attn_q 8192 x 5120/256 x 176 = 28,835,840,
    attn_k = attn_v = 1024 x 3520 = 3,604,480, attn_output 5120 x 8192/256 x 176 = 28,835,840, ffn_gate = ffn_up =
    25600 x 3520 = 90,112,000, ffn_down 5120 x 25600/256 x 176 = 90,112,000 and f32 norms 2 x 5120 x 4 + 2 x 128 x 4 =
    41,984: 335,258,624 B; token_embd 151936 x 3520 = 534,814,720 (host memory); output 151936 x 4200 = 638,131,200 +
    its f32 norm 20,480."""
    from kvplan.cost.gguf_quant import quant_weights
    from kvplan.model.catalog import load_card

    r = cli_json(*ONE_COMMAND)
    chosen = [q for q in r["quants"] if q["chosen"]]
    assert len(chosen) == 1 and (chosen[0]["quant"], chosen[0]["type_k"], chosen[0]["type_v"]) == ("Q4_K_M", "q8_0",
                                                                                                    "q8_0")
    q = chosen[0]
    fit_8bit = [x for x in r["quants"] if x["fits"] and x["type_k"] != "q4_0"]
    assert r["fits"] and q["fits"] and fit_8bit[0] == q  # the largest that fits with an 8- or 16-bit cache
    assert {(c["k_type"], c["v_type"]) for c in r["caches"]} == {("q8_0", "q8_0")} and r["context"]["flash_attn"]
    assert r["launch_command"] == ("llama-server -m Qwen3-32B-Q4_K_M.gguf -c 32768 -np 1 -ctk q8_0 -ctv q8_0 -fa on "
                                   "-ngl 65")
    assert "weights GGUF Q4_K_M" in r["verdict"] and "K/V q8_0" in r["verdict"]
    fit = r["llamacpp_fit"]
    assert (q["max_n_ctx"], q["max_gpu_layers"]) == (fit["max_n_ctx"], fit["max_gpu_layers"])
    rows = r["quants"]
    q = next(x for x in rows if x["quant"] == "Q5_K_S")  # the hand count below, at the K/V it fits with
    r = cli_json(*ONE_COMMAND, "--gguf-quant", "Q5_K_S", "-ctk", "q4_0", "-ctv", "q4_0")
    # the weights: gguf_quant's own figure, the hand count, the table row and the plan's buffers agree
    layers, embd, out = quant_weights(load_card("qwen3-32b"), "Q5_K_S")
    assert sum(layers) == 64 * 335_258_624 and embd == 534_814_720 and out == 638_131_200 + 20_480
    assert q["model_bytes"] == sum(layers) + embd + out
    model = {b["device"]: b["bytes"] for b in r["buffers"] if b["kind"] == "model"}
    assert model == {"CPU": embd, "CUDA0": sum(layers) + out} and r["per_gpu"]["weights_bytes"] == model["CUDA0"]
    # the search's rows are the plan's own fits: the next larger type does not fit even at q4_0, and this one not at
    # q8_0; every row names the K/V types it needs
    bigger = rows[rows.index(q) - 1]["quant"]
    assert not cli_json(*ONE_COMMAND, "--gguf-quant", bigger, "-ctk", "q4_0", "-ctv", "q4_0")["fits"]
    assert not cli_json(*ONE_COMMAND, "--gguf-quant", "Q5_K_S", "-ctk", "q8_0", "-ctv", "q8_0")["fits"]
    assert cli_json(*ONE_COMMAND, "--gguf-quant", "Q5_K_S", "-ctk", "q4_0", "-ctv", "q4_0")["fits"]
    needs = {x["quant"]: (x["type_k"], x["fits"]) for x in rows}
    assert needs["Q4_K_M"] == ("q8_0", True) and needs["Q5_K_S"] == ("q4_0", True) and needs["Q8_0"] == ("q4_0", False)


def test_given_quant_and_cache_types_are_kept(cli_json):
    """--gguf-quant and -ctk/-ctv are not searched: a Q8_0 32B does not fit a 24 GB GPU at 32k (the plan says so,
    sized at the smallest K/V type tried, no -ngl pinned); with both given nothing is searched."""
    r = cli_json(*ONE_COMMAND, "--gguf-quant", "Q8_0")
    q = [x for x in r["quants"] if x["chosen"]]
    assert [x["quant"] for x in q] == ["Q8_0"] and not q[0]["fits"] and not r["fits"]
    assert "does NOT fit" in r["verdict"] and "weights GGUF Q8_0" in r["verdict"]
    assert r["launch_command"].startswith("llama-server -m Qwen3-32B-Q8_0.gguf -c 32768") and "-ngl" not in r[
        "launch_command"]
    assert any("Q8_0 as given (--gguf-quant): it does NOT fit" in n for n in r["notes"])
    g = cli_json(*ONE_COMMAND, "--gguf-quant", "Q4_K_M", "-ctk", "f16", "-ctv", "f16")
    assert g["launch_command"] == "llama-server -m Qwen3-32B-Q4_K_M.gguf -c 32768 -np 1" and not g["fits"]
    assert {(x["type_k"], x["type_v"]) for x in g["quants"]} == {("f16", "f16")}
    w = cli_json(*ONE_COMMAND, "--weight-dtype", "fp8")  # weights set otherwise: no search, no chosen row
    assert not any(x["chosen"] for x in w["quants"]) and "-m Qwen/Qwen3-32B.gguf" in w["launch_command"]


# ---- placement over several GPUs (-ts) and expert weights in host memory (--cpu-moe, --n-cpu-moe, -ot) ----------

def kv_mib(m, device: str) -> float:
    return sum(b.bytes for b in m.buffers if b.device == device and b.kind == "kv") / MIB


def test_tensor_split_layers_by_upper_bound_over_the_split_points(d):
    """llama-model.cpp load_tensors: offloaded layer il goes to upper_bound(splits, (il - i_gpu_start) /
    act_gpu_layers). 32 blocks + the output = 33 offloaded layers: an even split puts il/33 < 0.5, i.e. blocks 0..16
    (17 blocks) on CUDA0 and 15 blocks + the output on CUDA1; -ts 3,1 puts il/33 < 0.75, blocks 0..24 (25), on CUDA0.
    32 MiB of f16 K/V per block at 8192 cells (8192 x 1024 x 2 x 2 B)."""
    path = dense(d, "split")
    m = mem(path, n_ctx=8192, n_parallel=1, n_gpus=2)
    assert (kv_mib(m, "CUDA0"), kv_mib(m, "CUDA1")) == (17 * 32, 15 * 32)
    m = mem(path, n_ctx=8192, n_parallel=1, n_gpus=2, tensor_split=(3.0, 1.0))
    assert (kv_mib(m, "CUDA0"), kv_mib(m, "CUDA1")) == (25 * 32, 7 * 32)
    # a zero share gets no layers; -ngl 10 (2026: the output first, then blocks 23..31) split 1:1 over 10 layers
    m = mem(path, n_ctx=8192, n_parallel=1, n_gpus=3, tensor_split=(1.0, 0.0, 1.0))
    assert kv_mib(m, "CUDA1") == 0 and kv_mib(m, "CUDA0") + kv_mib(m, "CUDA2") == 32 * 32
    m = mem(path, n_ctx=8192, n_parallel=1, n_gpus=2, n_gpu_layers=10)
    assert (kv_mib(m, "CPU"), kv_mib(m, "CUDA0"), kv_mib(m, "CUDA1")) == (23 * 32, 5 * 32, 4 * 32)
    assert {b.device for b in m.buffers if b.kind == "compute"} == {"CUDA0", "CUDA1"}
    with pytest.raises(KvplanError, match="-ts"):
        mem(path, n_ctx=8192, n_gpus=2, tensor_split=(1.0,))


def test_expert_tensors_to_host_memory(d):
    """--cpu-moe adds common.h's LLM_FFN_EXPS_REGEX override to the CPU buffer type; --n-cpu-moe N one per layer
    blk\\.i<regex> for the first N; -ot PATTERN=BUFFER as given (first match wins). The bytes moved are the GGUF's own
    tensor bytes: routed experts only (the shared expert ffn_*_shexp does not match)."""
    from gguf_models import moe_q4

    path = moe_q4(d)
    t = load_gguf(str(path)).tensors_by_name()
    exps = lambda i: sum(t[f"blk.{i}.ffn_{k}_exps.weight"].nbytes for k in ("gate", "up", "down"))  # noqa: E731
    model = lambda m, dev: sum(b.bytes for b in m.buffers if b.device == dev and b.kind == "model")  # noqa: E731
    base = mem(path, n_ctx=4096, n_parallel=1)
    assert model(base, "CPU") == t["token_embd.weight"].nbytes
    for flags, moved in ((dict(cpu_moe=True), sum(exps(i) for i in range(4))), (dict(n_cpu_moe=2), exps(0) + exps(1)),
                         (dict(overrides=((r"blk\.3\.ffn_up_exps", "CPU"),)), t["blk.3.ffn_up_exps.weight"].nbytes),
                         (dict(overrides=(("exps", "CPU"),)), sum(exps(i) for i in range(4)))):
        m = mem(path, n_ctx=4096, n_parallel=1, **flags)
        assert model(m, "CPU") - model(base, "CPU") == moved == model(base, "CUDA0") - model(m, "CUDA0")
        assert kv_mib(m, "CUDA0") == kv_mib(base, "CUDA0")  # K/V stay with their layers
    # an override to a GPU wins over the layer split; the first matching override wins
    m = mem(path, n_ctx=4096, n_parallel=1, n_gpus=2, overrides=(("exps", "CUDA1"), ("ffn", "CPU")))
    assert model(m, "CUDA1") >= sum(exps(i) for i in range(4)) and model(m, "CPU") > t["token_embd.weight"].nbytes
    with pytest.raises(KvplanError, match="-ot"):
        mem(path, n_ctx=4096, overrides=(("exps", "CUDA3"),))
    with pytest.raises(KvplanError, match="-ot"):
        mem(path, n_ctx=4096, overrides=(("exps[", "CPU"),))


def test_fit_fewest_cpu_moe_layers(d):
    """The inverse with experts: the fewest --n-cpu-moe with every layer on the GPU that fits, from the tensor
    bytes: a budget of everything less the experts of 2 layers (and less 1 B) needs 2 (3)."""
    from gguf_models import moe_q4

    from kvplan.cost.llamacpp import fit

    path = moe_q4(d)
    hp = load_gguf(str(path)).hparams
    t = load_gguf(str(path)).tensors_by_name()
    exps = lambda i: sum(t[f"blk.{i}.ffn_{k}_exps.weight"].nbytes for k in ("gate", "up", "down"))  # noqa: E731
    f = LlamaFlags(n_ctx=4096, n_parallel=1)
    full = memory(hp, f).device_bytes("CUDA0")
    assert fit(hp, f, full - exps(0) - exps(1)).min_n_cpu_moe == 2
    assert fit(hp, f, full - exps(0) - exps(1) - 1).min_n_cpu_moe == 3
    assert fit(hp, f, full).min_n_cpu_moe == 0
    assert load_gguf(str(dense(d, "fitdense"))).hparams.n_expert == 0


def test_plan_over_two_gpus_with_expert_offload(cli_json, cli, d):
    """plan -ts 1,1 (two GPUs, one llama-server): one stage per GPU, buffers per device, the launch line carries the
    split and the overrides; without -c and -np the plan sizes the most slots of --max-model-len that fit."""
    from gguf_models import moe_q4

    path = str(moe_q4(d))
    r = cli_json("plan", "--gguf", path, "--gpu", "RTX-4090", "--max-model-len", "4096", "--engine", "llamacpp",
                 "-ts", "1,1", "--n-cpu-moe", "1", "-np", "2")
    devices = {b["device"] for b in r["buffers"] if b["kind"] == "kv"}
    assert devices == {"CUDA0", "CUDA1"} and r["inputs"]["pp"] == 2 and len(r["ranks"]) == 2
    assert "-ts 1,1" in r["launch_command"] and "--n-cpu-moe 1" in r["launch_command"]
    code, _, err = cli("plan", "--gguf", path, "--gpu", "RTX-4090", "--max-model-len", "4096", "--engine",
                       "llamacpp", "-ts", "1,1", "--pp", "3")
    assert code == 2 and "-ts" in err
    code, _, err = cli("plan", "--gguf", path, "--gpu", "RTX-4090", "--max-model-len", "4096", "--engine",
                       "llamacpp", "--tp", "2")
    assert code == 2 and "--tp" in err


def test_plan_slots_are_llama_servers_np(cli_json):
    """Without -c/-np the plan answers llama-server's slots (-np N -c N x L, the largest N that fits, at most
    LLAMA_MAX_SEQ 256), so a search for 4 requests of an 8B needs one GPU, not one replica per request; the slots'
    K/V is N streams of L cells: 128 KiB per cell (32 layers x 1024 x 2 x 2 B)."""
    r = cli_json("plan", "--model", "llama-3.1-8b", "--engine", "llamacpp", "--concurrency", "4",
                 "--max-model-len", "8192", "--gpus", "H100-SXM")
    best = r["options"][0]
    assert best["num_gpus"] == 1 and best["dp"] == 1 and best["max_concurrency"] >= 4
    n = int(best["max_concurrency"])
    assert f"-np {n} " in best["launch_command"] + " " and f"-c {n * 8192}" in best["launch_command"]
    p = cli_json("plan", "--model", "llama-3.1-8b", "--engine", "llamacpp", "--gpu", "H100-SXM",
                 "--max-model-len", "8192")
    assert p["max_concurrency"] == n and p["context"]["n_seq_max"] == n and not p["context"]["kv_unified"]
    kv = sum(b["bytes"] for b in p["buffers"] if b["kind"] == "kv")
    assert kv == n * 8192 * 32 * 1024 * 2 * 2
    gpu = sum(b["bytes"] for b in p["buffers"] if b["device"] == "CUDA0")
    one_more = gpu + 8192 * 32 * 1024 * 2 * 2
    # the slots fill the GPU less the 1 GiB llama-server's --fit keeps free (common.h fit_params_target)
    assert gpu <= p["inputs"]["gpu_memory_bytes"] - 2**30 < one_more


# ---- LoRA adapters (--lora FILE, or --lora-rank on --lora-targets) ------------------------------------------------

LORA_TARGETS = ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down")
LLAMA3_SHAPES = {"attn_q": (4096, 4096), "attn_k": (4096, 1024), "attn_v": (4096, 1024),
                 "attn_output": (4096, 4096), "ffn_gate": (4096, 14336), "ffn_up": (4096, 14336),
                 "ffn_down": (14336, 4096)}


def lora_gguf(d, rank: int = 32):
    """An adapter as convert_lora_to_gguf.py writes it for Llama-3-8B: f16 lora_a (ne0 x r) and lora_b (r x ne1) on
    the 7 projections of the 32 layers and on output.weight: 225 pairs, 450 tensors."""
    t = []
    for i in range(32):
        for k in LORA_TARGETS:
            ne0, ne1 = LLAMA3_SHAPES[k]
            t += [(f"blk.{i}.{k}.weight.lora_a", (ne0, rank), "F16"), (f"blk.{i}.{k}.weight.lora_b", (rank, ne1), "F16")]
    t += [("output.weight.lora_a", (4096, rank), "F16"), ("output.weight.lora_b", (rank, 128256), "F16")]
    return write_gguf(d / "lora.gguf", "llama", {"general.type": "adapter", "adapter.type": "lora",
                                                "adapter.lora.alpha": 16.0}, t)


def test_lora_buffers_per_device_as_published(d):
    """slaren's log (ngxson/llama.cpp PR #9, 2024-07-10): Meta-Llama-3-8B-Instruct f16, `-ngl 30` over two GPUs,
    rwitz/Llama-3-8B-Instruct-abliterated-lora (`loaded 450 tensors`): `CUDA_Host LoRA buffer size = 18.08 MiB`,
    `CUDA0 ... = 110.00 MiB`, `CUDA1 ... = 40.00 MiB`. llama-adapter.cpp puts each pair in its base tensor's buffer
    type: the 2 layers and the output left on the host (the 2024 -ngl rule), 22 and 8 layers on the GPUs (split by
    free memory, which the log does not print: -ts 22,8 gives it). Rank 32 on the 7 projections: 5 MiB per layer."""
    from kvplan.model.gguf import load_lora

    lora = load_lora(str(lora_gguf(d)))
    assert len(lora) == 450
    hp = load_gguf(str(dense(d, "llama3-8b"))).hparams
    m = memory(hp, LlamaFlags(n_ctx=512, n_parallel=1, n_gpu_layers=30, rules="2025-02", n_gpus=2,
                              tensor_split=(22.0, 8.0)), lora=lora)
    got = {b.device: round(b.bytes / MIB, 2) for b in m.buffers if b.kind == "lora"}
    assert got == {"CPU": 18.08, "CUDA0": 110.00, "CUDA1": 40.00}
    assert line(m, "llama_adapter_lora_init_impl: CUDA1") == ("llama_adapter_lora_init_impl: CUDA1 LoRA buffer size = "
                                                              "40.00 MiB")


def test_lora_rank_without_a_file_matches_the_file(cli_json, d):
    """Two roads: --lora-rank 32 on the 7 projections of the bundled llama-3-8b card gives the file's layer bytes
    (the file adds output.weight's pair: 32 x (4096 + 128256) x 2 B); the plan charges them to the GPU's weights."""
    targets = ",".join(LORA_TARGETS)
    r = cli_json("estimate", "--model", "llama-3-8b", "--seq-len", "4096", "--engine", "llamacpp", "-np", "1",
                 "--lora-rank", "32", "--lora-targets", targets)
    by_rank = sum(b["bytes"] for b in r["llamacpp"]["buffers"] if b["kind"] == "lora")
    f = cli_json("estimate", "--model", "llama-3-8b", "--seq-len", "4096", "--engine", "llamacpp", "-np", "1",
                 "--lora", str(lora_gguf(d)))
    by_file = sum(b["bytes"] for b in f["llamacpp"]["buffers"] if b["kind"] == "lora")
    assert by_rank == 32 * 5 * MIB and by_file - by_rank == 32 * (4096 + 128256) * 2
    p = cli_json("plan", "--model", "llama-3-8b", "--gpu", "H100-SXM", "--max-model-len", "4096", "--engine",
                 "llamacpp", "-np", "1", "--lora-rank", "32", "--lora-targets", targets)
    q = cli_json("plan", "--model", "llama-3-8b", "--gpu", "H100-SXM", "--max-model-len", "4096", "--engine",
                 "llamacpp", "-np", "1")
    assert p["per_gpu"]["weights_bytes"] - q["per_gpu"]["weights_bytes"] == 32 * 5 * MIB


def test_a_missing_lora_file_is_named_by_its_flag(cli, tmp_path):
    code, _, err = cli("estimate", "--model", "llama-3-8b", "--seq-len", "4096", "--engine", "llamacpp",
                       "--lora", str(tmp_path / "missing.gguf"))
    assert code == 2 and err.strip().count("\n") == 0 and err.startswith("error: --lora:")


def test_zero_is_a_value_and_absurd_flags_are_refused(cli, cli_json):
    """-ngl 0 puts every layer on the CPU (0 is not 'not given'); -np 0, an infinite -ts share and a LoRA rank wider
    than its tensors exit 2 naming the flag."""
    base = ("estimate", "--model", "llama-2-7b", "--seq-len", "4096", "--engine", "llamacpp")
    cpu = cli_json(*base, "-ngl", "0")
    assert not [b for b in cpu["llamacpp"]["buffers"] if b["kind"] == "model" and b["device"] != "CPU"]
    for extra, flag in ((("-np", "0"), "-np/--parallel"), (("-ts", "1,inf"), "-ts/--tensor-split"),
                        (("--lora-rank", "100000"), "--lora-rank"), (("--lora-rank", "8", "--lora-targets", ","),
                                                                     "--lora-targets")):
        code, _, err = cli(*base, *extra)
        assert code == 2 and err.strip().count("\n") == 0 and err.startswith(f"error: {flag}"), (extra, err)
    # a state-space model has no attention projections to put a rank-only adapter on (it had 32 MiB of attn_q/attn_v)
    code, _, err = cli("estimate", "--model", "mamba-codestral-7b", "--seq-len", "4096", "--engine", "llamacpp",
                       "--lora-rank", "16")
    assert code == 2 and err.startswith("error: --lora-rank") and "--lora FILE" in err


def test_each_gpu_stage_holds_the_layers_load_tensors_puts_on_it():
    """llama-2-13b on two GPUs: 40 layers + the output layer, even split points 0 and 0.5, so layer il goes to the
    second GPU once il / 41 >= 0.5: layers 0-20 on the first, 21-39 (and the output) on the second."""
    from kvplan.planning.capacity import plan

    r = plan("llama-2-13b", engine="llamacpp", pp=2, gpu="H100-SXM", max_model_len=4096)
    assert [(x.first_layer, x.last_layer) for x in r.ranks] == [(0, 20), (21, 39)]
    from kvplan.cost.llamacpp import llama_flags

    one = plan("llama-2-13b", engine="llamacpp", pp=2, gpu="H100-SXM", max_model_len=4096,
               llama=llama_flags(n_gpu_layers=1))
    assert all(x.last_layer < x.first_layer for x in one.ranks)  # -ngl 1: the output layer alone is offloaded


def test_a_llamacpp_plan_names_its_cells_bytes_and_types(cli_json):
    """The plan's "KV per token" on llama.cpp is a cell of the GPU's caches at -ctk/-ctv: Llama-3.1-8B at q8_0 holds
    32 layers x (K + V) x 8 KV heads x 128 x 34/32 B = 69,632 B (it read 0 B and 'bf16' before)."""
    r = cli_json("plan", "--model", "llama-3.1-8b", "--gpu", "RTX-4090", "--max-model-len", "8192", "--engine",
                 "llamacpp", "-ctk", "q8_0", "-ctv", "q8_0", "-fa", "on")
    assert r["per_gpu"]["kv_bytes_per_token"] == 32 * 2 * 8 * 128 * 34 // 32 == 69_632
    assert r["inputs"]["kv_dtype"] == "q8_0"
    mixed = cli_json("plan", "--model", "llama-3.1-8b", "--gpu", "RTX-4090", "--max-model-len", "8192", "--engine",
                     "llamacpp", "-ctk", "q8_0", "-ctv", "f16", "-fa", "on")
    assert mixed["inputs"]["kv_dtype"] == "q8_0/f16"
    assert mixed["per_gpu"]["kv_bytes_per_token"] == 32 * 8 * 128 * 34 // 32 + 32 * 8 * 128 * 2  # q8_0 K, f16 V


def test_glm_5_2_mla_latent_cache_of_a_published_log(d):
    """An MLA model on llama.cpp build 10505 (ee4c505a4, 2026-08): GLM-5.2 (`glm-dsa`, UD-Q5_K_XL) on 4x RTX PRO 6000,
    n_ctx 768000, one sequence, f16 (a llama-server log in a public transcript, GitHub code index stored file id
    61219781833; the index does not name the repository). Its GGUF metadata as printed: 79 blocks with
    nextn_predict_layers 1 (the MTP block holds no cache), head_count_kv 1, key_length 576 (kv_lora_rank 512 + rope
    64), value_length 512. The main cache: `llama_kv_cache: size = 65812.50 MiB (768000 cells, 78 layers, 1/1 seqs),
    K (f16): 65812.50 MiB, V (f16): 0.00 MiB` (V-less: the latent is K only) and four `KV buffer size` lines, 46406.25 /
    7593.75 / 6750.00 / 5062.50 MiB, whole layers of this cache (the run's layer split is not in the log). The DSA
    indexer's second cache (`creating indexer KV cache`, 3937.50 MiB) is not modelled."""
    p = write_gguf(d / "glm-5.2.gguf", "glm-dsa", {
        "block_count": 79, "context_length": 1048576, "embedding_length": 6144, "feed_forward_length": 12288,
        "attention.head_count": 64, "attention.head_count_kv": 1, "attention.key_length": 576,
        "attention.value_length": 512, "leading_dense_block_count": 3, "vocab_size": 154880,
        "attention.q_lora_rank": 2048, "attention.kv_lora_rank": 512, "attention.key_length_mla": 256,
        "attention.value_length_mla": 256, "expert_feed_forward_length": 2048, "expert_count": 256,
        "expert_used_count": 8, "expert_shared_count": 1, "rope.dimension_count": 64, "nextn_predict_layers": 1})
    m = mem(p, n_ctx=768000, n_parallel=1, flash_attn="auto")
    (cache,) = m.caches
    assert squash(cache.log_line()) == ("llama_kv_cache: size = 65812.50 MiB (768000 cells, 78 layers, 1/1 seqs), "
                                        "K (f16): 65812.50 MiB, V (f16): 0.00 MiB")
    per_layer = sum(b.bytes for b in m.buffers if b.kind == "kv") // 78
    assert per_layer == 768000 * 576 * 2
    assert [f"{n * per_layer / MIB:.2f}" for n in (55, 9, 8, 6)] == ["46406.25", "7593.75", "6750.00", "5062.50"]


def test_a_context_smaller_than_the_request_is_refused_naming_the_flag(cli):
    """-c 2,048 under --max-model-len 8,192 planned 'the longest that fits is 8,192' beside 'does NOT fit' and a
    quant search that found nothing; the estimate's -c 2,048 under --seq-len 4,096 went unremarked."""
    code, _, err = cli("plan", "-m", "llama-3-8b", "--gpu", "RTX-4090", "--max-model-len", "8192", "--engine",
                       "llamacpp", "-c", "2048")
    assert code == 2 and err.startswith("error: -c/--ctx-size: 2,048 cells") and "8,192" in err
    code, _, err = cli("plan", "-m", "llama-3-8b", "--gpu", "RTX-4090", "--max-model-len", "8192", "--engine",
                       "llamacpp", "-c", "16384", "-np", "4")
    assert code == 2 and "32,768" in err  # four slots of 8,192
    code, _, err = cli("estimate", "-m", "llama-3-8b", "--seq-len", "4096", "--engine", "llamacpp", "-c", "2048")
    assert code == 2 and err.startswith("error: -c/--ctx-size:")


def test_the_estimate_says_what_llama_cpp_allocates_beside_its_table():
    from kvplan import estimate
    from kvplan.cost.llamacpp import llama_flags

    r = estimate("llama-3-8b", seq_len=4096, engine="llamacpp", llama=llama_flags(type_k="q8_0", type_v="q8_0",
                                                                                 flash_attn="on"))
    cache = sum(b.bytes for b in r.llamacpp.buffers if b.kind in ("kv", "recurrent"))
    assert cache == r.kv_cache.total_bytes  # the rows are llama.cpp's q8_0 cache (QA F1-7)
    f16 = 4096 * 32 * 1024 * 2 * 2  # the engine line's rule at fp16, named beside it
    assert any("llama.cpp's cache" in n and f"{cache:,} B" in n and f"{f16:,} B" in n for n in r.notes)
    plain = estimate("llama-3-8b", seq_len=4096, engine="llamacpp")
    assert not any("The KV rows above" in n for n in plain.notes)


def test_ubatch_zero_is_n_batch_as_llama_cpp_reads_it():
    """llama-context.cpp: n_ubatch = min(n_batch, n_ubatch == 0 ? n_batch : n_ubatch); the compute buffer was 0."""
    from kvplan import estimate
    from kvplan.cost.llamacpp import llama_flags

    zero = estimate("llama-3-8b", seq_len=4096, engine="llamacpp", llama=llama_flags(n_ubatch=0)).llamacpp
    full = estimate("llama-3-8b", seq_len=4096, engine="llamacpp", llama=llama_flags(n_ubatch=4096)).llamacpp
    compute = lambda m: sum(b.bytes for b in m.buffers if b.kind == "compute")  # noqa: E731
    assert compute(zero) == compute(full) > 0 and zero.context.n_ctx == full.context.n_ctx


def test_ollama_default_num_ctx_sums_every_gpu():
    """server/routes.go (Ollama fb307609) Serve: totalVRAM is the sum over the GPUs, then the 47 / 23 GiB tiers; two
    RTX 4090s (2 x 23.5 GiB) are the 262,144 tier, capped at Qwen3-32B's 40,960 (QA C 10: one GPU's 32,768 was shown)."""
    from kvplan.cost.runtimes.ollama import default_num_ctx
    from kvplan.planning.capacity import plan

    def note(pp):
        r = plan("qwen3-32b", gpu="RTX-4090", pp=pp, max_model_len=32768, engine="ollama")
        return next(n for n in r.notes if "default num_ctx" in n)

    assert "would be 40,960" in note(2) and "2 x " in note(2)
    assert "would be 32,768" in note(1)
    assert default_num_ctx(47 * 2**30, 0) == 262144 and default_num_ctx(47 * 2**30 - 1, 0) == 32768
