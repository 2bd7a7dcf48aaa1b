"""llama.cpp's flags as the CLI takes them (QA F1-7, F2 0 and 3): estimate's KV rows are llama.cpp's own caches,
a plan's slot search keeps --kv-unified, and another engine refuses the llama.cpp flags that were given, by name."""

from __future__ import annotations

import pytest

GIB = 2**30


def test_estimate_rows_are_llama_cpps_quantized_cache(cli_json):
    """F1-7: -ctk q8_0 -ctv q4_0 kept the rows, kv_cache.* and total_bytes at f16 (134,217,728 B). ggml's blocks:
    q8_0 34 B and q4_0 18 B per 32 values (ggml-common.h block_q8_0 / block_q4_0); llama-3.1-8b's K and V rows are
    8 heads x 128 = 1,024 values, n_ctx 1,000 padded to 1,024 cells (llama-context.cpp GGML_PAD(n_ctx, 256))."""
    r = cli_json("estimate", "-m", "llama-3.1-8b", "--seq-len", "1000", "--engine", "llamacpp", "-ctk", "q8_0",
                 "-ctv", "q4_0", "-fa", "on")
    k_cell, v_cell = 1024 // 32 * 34, 1024 // 32 * 18  # one layer's K and V rows of one cell
    cache = 1024 * 32 * (k_cell + v_cell)
    assert cache == 54_525_952
    kv = r["kv_cache"]
    assert (kv["total_bytes"], kv["bytes_per_sequence"], kv["bytes_per_token"]) == (cache, cache, 32 * (k_cell + v_cell))
    assert kv["dtype"] == "q8_0/q4_0"
    assert r["total_bytes"] == r["weights"]["bytes"] + cache
    (row,) = kv["groups"]
    assert (row["layers"], row["positions_held"], row["bytes_per_token_per_layer"]) == (32, 1024, k_cell + v_cell)
    note = next(n for n in r["notes"] if n.startswith("The KV rows above"))
    assert "1,024 cells" in note and "134,217,728 B" in note and "without llama.cpp's padding" not in note


def test_estimate_rows_of_a_sliding_model_in_a_unified_cache(cli_json):
    """Gemma-3-12B, -np 4 --kv-unified: one stream; the sliding cache holds GGML_PAD(n_swa x n_seq + n_ubatch, 256) =
    1,024 x 4 + 512 = 4,608 cells (llama-kv-cache-iswa.cpp), the full one n_ctx = 32,768; 8 KV heads x 256 x 2 B
    per K or V row. The old rows held 4 streams' worth per sequence at the table's rule (1,536 sliding cells)."""
    r = cli_json("estimate", "-m", "gemma-3-12b", "--seq-len", "32768", "--engine", "llamacpp", "-np", "4",
                 "--kv-unified")
    row = 8 * 256 * 2 * 2  # K and V of one layer and cell, f16
    full, sliding = (g for g in r["kv_cache"]["groups"])
    assert (full["kind"], full["layers"], full["positions_held"]) == ("full", 8, 32768)
    assert (sliding["kind"], sliding["layers"], sliding["window"], sliding["positions_held"]) == ("sliding", 40, 1024,
                                                                                                   4608)
    assert r["kv_cache"]["total_bytes"] == row * (8 * 32768 + 40 * 4608)


def test_estimate_unified_without_np_holds_the_batch(cli_json):
    """--kv-unified without -np: --batch slots (-np's estimate default) sharing --batch x --seq-len cells, so the batch
    fits at once; was one cache of --seq-len cells for 3 sequences of --seq-len."""
    r = cli_json("estimate", "-m", "llama-3.1-8b", "--seq-len", "4096", "--batch", "3", "--engine", "llamacpp",
                 "--kv-unified")
    c = r["llamacpp"]["context"]
    assert (c["n_seq_max"], c["n_ctx"], c["n_ctx_seq"], c["kv_unified"]) == (3, 3 * 4096, 3 * 4096, True)
    assert r["kv_cache"]["total_bytes"] == 3 * 4096 * 32 * 1024 * 2 * 2


def test_plan_slot_search_keeps_kv_unified(cli_json):
    """F2 0: --kv-unified without -c/-np was dropped (22 slots, kv_unified false, no -kvu). llama-context.cpp: a unified
    cache has n_ctx_seq = n_ctx (each slot reaches every cell), so N slots of --max-model-len L are -np N -c N x L
    -kvu; gemma-3's sliding layers then hold 1,024 x N + 512 cells (one stream) instead of N x 1,536, so more slots
    fit. Each slot adds 8 full layers x L cells + 40 sliding layers x 1,024 cells of 8,192 B: the next does not fit."""
    args = ("plan", "-m", "gemma-3-12b", "--gpu", "H100-SXM", "--max-model-len", "32768", "--engine", "llamacpp")
    u, split = cli_json(*args, "--kv-unified"), cli_json(*args)
    c, n = u["context"], u["context"]["n_seq_max"]
    assert c["kv_unified"] and (c["n_ctx"], c["n_ctx_seq"]) == (n * 32768, n * 32768)
    assert f"-c {n * 32768} -np {n} -kvu" in u["launch_command"]
    swa = next(x for x in u["caches"] if x["kind"] == "kv_swa")
    assert (swa["cells"], swa["streams"]) == (-(-(1024 * n + 512) // 256) * 256, 1)
    assert u["max_concurrency"] == n > split["max_concurrency"] == split["context"]["n_seq_max"]
    gpu = sum(b["bytes"] for b in u["buffers"] if b["device"] == "CUDA0")
    assert gpu <= u["inputs"]["gpu_memory_bytes"] < gpu + 8192 * (8 * 32768 + 40 * 1024)
    assert not split["context"]["kv_unified"] and "-kvu" not in split["launch_command"]


LLAMA_ONLY = [(("--swa-full",), "--swa-full"), (("-ub", "256"), "-ub/--ubatch-size"),
              (("--kv-unified",), "--kv-unified"), (("--no-kv-unified",), "--no-kv-unified"),
              (("--cpu-moe",), "--cpu-moe"), (("-ncmoe", "2"), "-ncmoe/--n-cpu-moe"),
              (("--gguf-quant", "Q4_K_M"), "--gguf-quant"), (("--lora-rank", "8"), "--lora-rank"),
              (("--lora-targets", "attn_q"), "--lora-targets"), (("--llamacpp-rules", "2025-12"), "--llamacpp-rules"),
              (("-ts", "1,1"), "-ts/--tensor-split"), (("-ot", "exps=CPU"), "-ot/--override-tensor"),
              (("-c", "4096", "-np", "2"), "-c/--ctx-size, -np/--parallel")]


@pytest.mark.parametrize("flags, named", LLAMA_ONLY)
@pytest.mark.parametrize("command", ["estimate", "plan", "report"])
def test_another_engine_names_the_llama_cpp_flags_given(cli, tmp_path, command, flags, named):
    """F2 3: every llama.cpp flag was refused as '-c/-np/-ctk/-ctv/-fa/-ngl', whichever was typed."""
    head = {"estimate": ("estimate", "-m", "llama-3-8b", "--seq-len", "100"),
            "plan": ("plan", "-m", "llama-3-8b", "--gpu", "H100-SXM", "--max-model-len", "4096"),
            "report": ("report", "-m", "llama-3-8b", "--gpu", "H100-SXM", "--max-model-len", "4096", "-o",
                       str(tmp_path / "r.md"))}[command]
    for engine in ("vllm", "sglang"):
        code, _, err = cli(*head, "--engine", engine, *flags)
        assert code == 2 and err.strip() == f"error: {named}: only for --engine llamacpp or ollama (got --engine {engine})"


def test_no_kv_unified_without_np_is_llama_servers_four_unified_slots(cli_json):
    """--no-kv-unified without -np kept 4 split slots (4 sliding streams of 1,536 cells, 8,192 per slot). llama-server
    ignores it there: tools/server/server.cpp llama_server() (b10644, master 00dd0816) sets n_parallel = 4 and
    kv_unified = true whenever -np is auto (-1, its server default), after --no-kv-unified set kv_unified = false.
    Gemma-3-12B -c 32768: one stream, 32,768 cells per slot; the sliding cache holds GGML_PAD(1,024 x 4 + 512, 256) =
    4,608 cells (llama-kv-cache-iswa.cpp) instead of 4 x GGML_PAD(1,024 + 512, 256) = 6,144; 8 KV heads x 256 x 2 B
    per K or V row."""
    r = cli_json("plan", "-m", "gemma-3-12b", "--gpu", "H100-SXM", "--max-model-len", "8192", "--engine",
                 "llamacpp", "-c", "32768", "--no-kv-unified")
    c = r["context"]
    assert (c["n_seq_max"], c["n_ctx"], c["n_ctx_seq"], c["kv_unified"]) == (4, 32768, 32768, True)
    swa = next(x for x in r["caches"] if x["kind"] == "kv_swa")
    assert (swa["cells"], swa["streams"]) == (4608, 1)
    row = 8 * 256 * 2 * 2
    assert sum(x["k_bytes"] + x["v_bytes"] for x in r["caches"]) == row * (8 * 32768 + 40 * 4608)
    assert any(n.startswith("--no-kv-unified without -np") for n in r["notes"])


def test_2025_12_explicit_np_1_is_one_slot(cli_json):
    """An explicit -np 1 under --llamacpp-rules 2025-12 (ec98e2002) is one slot with a split (non-unified) cache, not
    the 4 unified slots of issue #17300 (b7079, 2025-11-16: "-c 8000 ... -np 1" gave "n_slots = 4"). Those came from
    PR #16736's test in llama_server(), ``n_parallel == 1 && kv_unified == false`` (-np's default was 1, so an explicit
    1 met it too), until PR #17997 ("arg: clarify auto kvu/np being set on server", release b7433, 2025-12-16) made
    -np's server default -1 and the test ``n_parallel < 0``. ec98e2002 has #17997: Ollama's vendored copy of it
    (ollama 49a9c9ba6, "GGML update to ec98e2002", 2025-12-17, FETCH_HEAD=ec98e2002) carries the flat
    ``std::map<llm_tensor, const char *> LLM_TENSOR_NAMES`` of PR #18051 ("arch: refactor LLM_TENSOR_NAMES", release
    b7434, the build after b7433), where its previous pin 17f7f4ba still had the per-arch map. Llama-3.1-8B -c 8192:
    8,192 cells x 32 layers x 8 KV heads x 128 x 2 B, K and V: 1 GiB in one stream."""
    r = cli_json("plan", "-m", "llama-3.1-8b", "--gpu", "H100-SXM", "--max-model-len", "8192", "--engine", "llamacpp",
                 "--llamacpp-rules", "2025-12", "-c", "8192", "-np", "1")
    c = r["context"]
    assert (c["n_seq_max"], c["n_ctx"], c["n_ctx_seq"], c["kv_unified"]) == (1, 8192, 8192, False)
    assert sum(x["k_bytes"] + x["v_bytes"] for x in r["caches"]) == 8192 * 32 * 8 * 128 * 2 * 2 == 2**30
    assert " -np 1" in r["launch_command"] and "-kvu" not in r["launch_command"]


def test_memory_already_in_use_lowers_what_llama_cpp_sizes_from(cli_json):
    """llama.cpp sizes from the free memory its CUDA backend reports at start (cudaMemGetInfo's free; common/fit.cpp
    keeps 1 GiB of it): what is already on the GPU (a Windows desktop's display, --context-memory) comes off it.
    RTX 4090 under Windows, the whole board (24,563 MiB): by default the least public desktop share in use (1,270
    MiB, hardware.WINDOWS_IN_USE_AT_START_BYTES), given 2 GiB in use: 24,563 MiB - 2 GiB - 1 GiB of budget; on Linux
    none by default."""
    from kvplan.cost.hardware import load_gpu

    base = ("plan", "-m", "llama-3.1-8b", "--gpu", "RTX-4090", "--engine", "llamacpp", "--max-model-len", "8192",
            "--platform", "windows")
    free, busy = cli_json(*base), cli_json(*base, "--context-memory", "2GiB")
    total = load_gpu("RTX-4090").windows_visible_memory_bytes
    assert total == 24563 * 2**20
    assert free["llamacpp_fit"]["budget_bytes"] == total - 1270 * 2**20 - 2**30
    linux = cli_json(*base[:-2])
    assert linux["llamacpp_fit"]["budget_bytes"] == load_gpu("RTX-4090").visible_memory_bytes - 2**30
    assert busy["llamacpp_fit"]["budget_bytes"] == total - 2 * 2**30 - 2**30
    assert busy["max_concurrency"] < free["max_concurrency"]  # fewer slots of 8,192 fit
    assert any("2.0 GiB already in use" in n for n in busy["notes"])
