"""llama.cpp launch lines per --llamacpp-rules era, the longest request a split-slot plan fits, and the slot search
against llama-server's --fit margin (QA report G findings 7, 11, 12)."""

from __future__ import annotations

import pytest

PLAN = ("plan", "--gpu", "H100-SXM", "--max-model-len", "8192", "-m", "llama-3.1-8b", "--engine", "llamacpp")
OLD = ("--llamacpp-rules", "2025-02")


def _flags_of(line: str) -> list[str]:
    return line.split()


def test_2025_02_prints_fa_as_a_bare_switch(cli_json):
    """c392e509 (~b4750) common/arg.cpp: ``{"-fa", "--flash-attn"}`` takes no value (sets params.flash_attn = true),
    so "-fa on" leaves a stray "on" that llama.cpp's parser rejects; off was the default (common.h flash_attn =
    false): no flag. The valued -fa on|off|auto came with PR #15434 (2025-08), so 2025-12 and 2026-08 print it."""
    on = _flags_of(cli_json(*PLAN, *OLD, "-ctk", "q4_0", "-ctv", "q4_0", "-fa", "on")["launch_command"])
    i = on.index("-fa")
    assert i == len(on) - 1 or on[i + 1].startswith("-")
    assert "on" not in on and "off" not in on
    off = _flags_of(cli_json(*PLAN, *OLD, "-fa", "off")["launch_command"])
    assert "-fa" not in off and "off" not in off
    # kvplan's own choice of a quantized V cache (the quant search adds flash attention) takes the same form: 131,072
    # tokens of f16 K/V (16 GiB) do not fit an L4's 24 GB beside the weights, so the search quantizes V
    own = cli_json("plan", "--gpu", "L4", "--max-model-len", "131072", "-m", "llama-3.1-8b", "--engine", "llamacpp",
                   *OLD, "-np", "1")
    line = _flags_of(own["launch_command"])
    assert line[line.index("-ctv") + 1] != "f16"  # the case this clause is about (was an `if`, silent when untrue)
    assert "-fa" in line and "on" not in line
    new = _flags_of(cli_json(*PLAN, "--llamacpp-rules", "2025-12", "-ctk", "q4_0", "-ctv", "q4_0", "-fa", "on")
                    ["launch_command"])
    assert new[new.index("-fa") + 1] == "on"


LATER_FLAGS = [(("-kvu", "-np", "4"), "-kvu/--kv-unified"), (("--no-kv-unified", "-np", "4"), "-kvu/--kv-unified"),
               (("--swa-full",), "--swa-full"), (("-ot", "exps=CPU"), "-ot/--override-tensor"),
               (("--cpu-moe",), "--cpu-moe"), (("--n-cpu-moe", "10"), "--n-cpu-moe"), (("-fa", "auto"), "-fa/--flash-attn")]


@pytest.mark.parametrize("flags, named", LATER_FLAGS)
def test_2025_02_refuses_flags_it_did_not_have(cli, flags, named):
    """Options added after c392e509 (2025-02-20): -kvu/--kv-unified PR #14363 (2025-07), --swa-full PR #13194
    (2025-05), -ot PR #11397 (2025-04), --cpu-moe/--n-cpu-moe PR #15077 (2025-08), -fa auto PR #15434 (2025-08).
    Under 2025-02 each is refused by name (exit 2); the 2025-12 rules take them."""
    code, _, err = cli(*PLAN, *OLD, *flags)
    assert code == 2 and err.startswith(f"error: {named}") and "2025-02" in err
    code, _, err = cli("estimate", "-m", "llama-3.1-8b", "--seq-len", "4096", "--engine", "llamacpp", *OLD, *flags)
    assert code == 2 and err.startswith(f"error: {named}")
    code, _, err = cli(*PLAN, "--llamacpp-rules", "2025-12", *flags)
    assert code == 0, err


def test_2025_02_has_no_flash_attention_unless_given(cli):
    """Without -fa a 2025-02 llama.cpp runs without flash attention (common.h flash_attn = false), so a quantized V
    cache is refused (llama_init_from_model: quantized V cache requires Flash Attention); the 2025-12 default (auto)
    takes it, and 2025-02 with -fa."""
    est = ("estimate", "-m", "llama-3.1-8b", "--seq-len", "4096", "--engine", "llamacpp", "-ctv", "q8_0")
    code, _, err = cli(*est, *OLD)
    assert code == 2 and "Flash Attention" in err
    assert cli(*est, *OLD, "-fa", "on")[0] == 0
    assert cli(*est, "--llamacpp-rules", "2025-12")[0] == 0


def test_longest_request_of_split_slots_is_a_slots_share(cli_json):
    """-np 4 without -kvu: each slot holds n_ctx_seq = GGML_PAD(n_ctx / 4, 256) cells (llama-context.cpp), so when
    the plan does not fit, the longest --max-model-len that fits is a quarter of the largest -c that fits, not all
    of it: planning at that figure fits, 256 more does not.

    By hand: a cell of Llama-3.1-8B's f16 K/V is 32 layers x 8 KV heads x 128 x (K, V) x 2 B = 131,072 B. The GPU's
    room for the cache is its total less the buffers that do not depend on -c (weights, compute, as the plan lists
    them); the largest -c that fits holds room // 131,072 cells, and each of the 4 slots a multiple of 256 of
    them: best = room // 131,072 // 4 // 256 x 256; the plan at best runs -c 4 x best, whose K/V is 4 x best x 131,072 B
    (4 streams of n_ctx_seq = best cells, llama_kv_cache n_stream = n_seq_max when not unified)."""
    head = ("plan", "--gpu", "L40S", "-m", "llama-3.1-8b", "--engine", "llamacpp", "-np", "4", "--gguf-quant", "BF16",
            "-ctk", "f16", "-ctv", "f16", "--max-model-len")
    cell = 32 * 8 * 128 * 2 * 2
    p = cli_json(*head, "65536")
    assert not p["fits"]
    room = p["inputs"]["gpu_memory_bytes"] - sum(b["bytes"] for b in p["buffers"]
                                                 if b["device"] == "CUDA0" and b["kind"] != "kv")
    best = p["max_model_len_fit"]
    assert best == room // cell // 4 // 256 * 256 and 0 < best < 65536
    at = cli_json(*head, str(best))
    assert at["fits"] and at["context"]["n_ctx"] == 4 * best
    assert [b["bytes"] for b in at["buffers"] if b["kind"] == "kv"] == [4 * best * cell]
    assert not cli_json(*head, str(best + 256))["fits"]


def test_slot_search_keeps_fits_margin_and_agrees_with_fit_note(cli_json):
    """The default slot search sized to the byte (989.7 MiB free on an H100) while the Fit note, at --fit's 1 GiB
    margin (common.h fit_params_target), said the printed -c did not fit. Now the slots fit within the margin, so the
    note's largest -c is at least the printed one, with every layer on the GPU. The margin is llama.cpp's, not
    kvplan's constant: common/common.h ``fit_params_target`` = 1024 MiB per device (b10488; env LLAMA_ARG_FIT_TARGET in
    MiB), /work/shared/reference/llamacpp.md."""
    margin = 1024 * 2**20
    p = cli_json(*PLAN)
    gpu = sum(b["bytes"] for b in p["buffers"] if b["device"] == "CUDA0")
    assert p["llamacpp_fit"]["budget_bytes"] == p["inputs"]["gpu_memory_bytes"] - margin
    assert gpu <= p["inputs"]["gpu_memory_bytes"] - margin
    ft, c = p["llamacpp_fit"], p["context"]
    assert ft["max_n_ctx"] >= c["n_ctx"] and ft["max_gpu_layers"] == c["n_layer"] + 1
    assert not any("--fit changes neither" in n for n in p["notes"])


def test_explicit_c_beyond_fits_margin_says_fit_keeps_it(cli_json):
    """An explicit -c that fits the GPU but not --fit's margin: common/fit.cpp common_params_fit_impl (b10488) leaves
    a -c set by the user ("-> no change") and, with -ngl set, aborts ("n_gpu_layers already set by user"), so the
    line starts as given; the note says so instead of contradicting the line. The Fit search reaches -c's padded
    value (it stopped at 519,936 < 520,192 before, beside "at most -ngl 33 at -c 520,192")."""
    p = cli_json(*PLAN, "-c", "520000")
    c, ft = p["context"], p["llamacpp_fit"]
    assert c["n_ctx"] == 520192  # GGML_PAD(520,000, 256) = 2,032 x 256
    assert ft["max_gpu_layers"] == 33 and ft["max_n_ctx"] >= 520192  # 32 blocks + output (was an `if`)
    q = cli_json(*PLAN, "-c", "524288", "--gguf-quant", "BF16", "-ctk", "f16", "-ctv", "f16", "-ngl", "33")
    assert q["fits"] and q["llamacpp_fit"]["max_n_ctx"] < q["context"]["n_ctx"]
    assert any("--fit changes neither" in n for n in q["notes"])


def test_2025_02_line_offloads_the_layers_it_sizes(cli_json):
    """Before PR #15434 (2025-08) llama_model_default_params().n_gpu_layers was 0, so a 2025-02 llama-server without
    -ngl ran every layer on the CPU while the plan sized them on the GPU. The line now gives -ngl n_layer + 1 (33 for
    Llama-3.1-8B's 32 blocks and output) under 2025-02, also where the plan does not search quants (--weight-dtype);
    2026-08 leaves it out (default 999, --fit)."""
    head = (*PLAN, "--weight-dtype", "fp16")
    old = _flags_of(cli_json(*head, *OLD)["launch_command"])
    assert old[old.index("-ngl") + 1] == "33"
    assert "-ngl" not in _flags_of(cli_json(*head)["launch_command"])


def test_2025_02_given_c_too_short_per_slot_is_refused(cli):
    """2025-02 slots hold GGML_PAD(n_ctx, 256 with -fa, else 32) / -np cells each, unpadded (one cache): -c 16400
    -np 2 -fa is 16,640 / 2 = 8,320 per slot, short of --max-model-len 8,400 (the 2026 rule, GGML_PAD(16,640 / 2,
    256) = 8,448, let it through to a "does NOT fit" verdict); without -fa, 16,416 / 2 = 8,208 < 8,300."""
    head = ("plan", "--gpu", "H100-SXM", "-m", "llama-3.1-8b", "--engine", "llamacpp", *OLD, "-c", "16400", "-np", "2")
    code, _, err = cli(*head, "-fa", "on", "--max-model-len", "8400")
    assert code == 2 and err.startswith("error: -c/--ctx-size") and "8,320 tokens per request" in err
    code, _, err = cli(*head, "--max-model-len", "8300")
    assert code == 2 and "8,208 tokens per request" in err
    assert cli(*head, "-fa", "on", "--max-model-len", "8320")[0] == 0


EST = ("estimate", "-m", "llama-3.1-8b", "--seq-len", "4096", "--engine", "llamacpp", "--json")


def test_2025_02_estimate_without_ngl_offloads_no_layer(cli, cli_json):
    """c392e509's llama-server without -ngl offloads no layer: common_params.n_gpu_layers = -1 ("use default") leaves
    llama_model_default_params().n_gpu_layers = 0 (src/llama-model.cpp, read in Ollama's vendored llama.cpp d7cfe1ff,
    2025-02-26; 999 only on Metal) until PR #15434 (2025-08). The estimate sized every layer on CUDA0 before (CUDA0
    model 14,314.52 MiB, CUDA0 KV 512 MiB); it now sizes that build's buffers, those of -ngl 0: the whole model
    (8,030,261,248 bf16 params, 16,060,522,496 B, plus GGUF alignment) and the K/V (4,096 cells x 32 layers x 8 KV
    heads x 128 x 2 B, K and V: 512 MiB) on the CPU, none on a GPU, and says so. 2025-12 without -ngl keeps every
    layer on the GPU (PR #15434's default), and so does Ollama (its 2025 runner passed --n-gpu-layers of its own)."""
    old = cli_json(*EST, *OLD)["llamacpp"]
    zero = cli_json(*EST, *OLD, "-ngl", "0")["llamacpp"]
    assert old["buffers"] == zero["buffers"] and old["context"]["n_gpu_layers"] == 0
    assert not [b for b in old["buffers"] if b["device"] == "CUDA0"]
    on_cpu = {b["kind"]: b["bytes"] for b in old["buffers"] if b["device"] == "CPU"}
    assert on_cpu["kv"] == 4096 * 32 * 8 * 128 * 2 * 2 == 512 * 2**20
    assert 16_060_522_496 <= on_cpu["model"] < 16_060_522_496 + 2**20
    assert any(n.startswith("-ngl not given: the 2025-02 llama-server") for n in old["notes"])
    every = cli_json(*EST, *OLD, "-ngl", "33")["llamacpp"]
    assert {b["device"] for b in every["buffers"] if b["kind"] in ("model", "kv")} >= {"CUDA0"}
    new = cli_json(*EST, "--llamacpp-rules", "2025-12")["llamacpp"]
    assert new["context"]["n_gpu_layers"] == 33
    ollama = cli_json(*EST[:-2], "ollama", "--json", *OLD)["llamacpp"]
    assert ollama["context"]["n_gpu_layers"] == 33
    code, _, err = cli(*EST[:-1], *OLD, "--gpu", "H100-SXM")  # no layer on the GPU: no roofline to bound
    assert code == 2 and err.startswith("error: -ngl not given") and "2025-02" in err
