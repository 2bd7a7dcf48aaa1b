"""The latency bounds read the weights as the engine holds them and the cache as each rank keeps it: a decode step's
bytes on one GPU are its rank's weights row (quantized formats as stored, GGUF tensors, MXFP4 experts) less what a
step does not read, and its rank's K/V (replicated KV heads and MLA latents in full); plan, estimate, sweep and the
search agree for the same inputs (QA report area A, defects 1 and 2)."""

import json

import pytest

from kvplan.cost.hardware import load_gpu
from kvplan.cost.parallel import pad_vocab
from kvplan.model.catalog import load_card

L40S = load_gpu("L40S")


def _plan(cli_json, model, *args):
    return cli_json("plan", "-m", model, "--max-model-len", "8192", *args)


@pytest.mark.parametrize(("model", "args"), [
    ("qwen3-8b", ("--weight-dtype", "bf16")), ("qwen3-8b", ("--weight-dtype", "fp8")), ("qwen3-8b-awq", ()),
])
def test_decode_bound_reads_the_weights_row(cli_json, model, args):
    """One memory-bound decode step on an L40S reads the plan's weights row less its rotary cache, allocator
    rounding and embedding table (bf16 in every case; the step gathers one token's row), plus one request's K/V: fp8
    and AWQ weights move TPOT (it was 18.9 ms for all three, 16.4 GB of fp16 weights / 864 GB/s)."""
    p = _plan(cli_json, model, "--gpu", "L40S", "--concurrency", "1", *args)
    g, lat, card = p["per_gpu"], p["latency"], load_card(model)
    held = (g["weights_bytes"] - g["buffers_bytes"] - g["weights_rounding_bytes"]
            - pad_vocab(card.vocab_size) * card.hidden_size * 2 + card.hidden_size * 2)
    assert lat["decode_weights_read_bytes"] == held
    assert lat["decode_kv_read_bytes"] == p["request_kv_bytes"] and lat["decode_kv_write_bytes"] == 147456
    moved = held + p["request_kv_bytes"] + 147456
    assert lat["tpot_ms"] == pytest.approx(moved / L40S.memory_bandwidth_bytes_per_s * 1e3, rel=1e-12)
    if model == "qwen3-8b-awq":
        assert lat["tpot_ms"] < 7.1  # 4.85 GB of AWQ weights + 1.2 GB of K/V, not 18.9 ms


def test_quantized_weights_order_tpot_and_price(cli_json):
    bf16, fp8 = (_plan(cli_json, "qwen3-8b", "--gpu", "L40S", "--concurrency", "1", "--weight-dtype", w)["latency"]
                 for w in ("bf16", "fp8"))
    assert fp8["tpot_ms"] < 0.6 * bf16["tpot_ms"]
    assert fp8["usd_per_million_output_tokens"] < 0.6 * bf16["usd_per_million_output_tokens"]


def test_plan_estimate_and_sweep_agree_on_an_awq_model(cli, cli_json):
    """The same AWQ model on one L40S: plan, estimate and a sweep row give one TPOT and one TTFT; at TP 2 the
    sweep's row is the plan's (each GPU's own bytes)."""
    p = _plan(cli_json, "qwen3-8b-awq", "--gpu", "L40S", "--concurrency", "1")["latency"]
    e = cli_json("estimate", "-m", "qwen3-8b-awq", "--seq-len", "8192", "--gpu", "L40S", "--engine", "vllm")
    assert e["roofline"]["time_per_output_token_s"] == pytest.approx(p["tpot_ms"] / 1e3, rel=1e-12)
    assert e["roofline"]["time_to_first_token_one_request_s"] == pytest.approx(p["ttft_ms"] / 1e3, rel=1e-12)
    card = load_card("qwen3-8b-awq")  # the estimate's weights row, its embedding gathered (one row), AWQ as stored
    assert e["roofline"]["decode_step"]["weights_read_bytes"] == (e["weights"]["bytes"] - card.vocab_size
                                                                  * card.hidden_size * 2 + card.hidden_size * 2)
    code, out, err = cli("sweep", "-m", "qwen3-8b-awq", "--seq-len", "8192", "--gpu", "L40S", "--tp", "1,2",
                         "--engine", "vllm", "--format", "jsonl")
    assert code == 0, err
    rows = {r["tp"]: r for r in map(json.loads, out.splitlines())}
    assert rows[1]["roofline.time_per_output_token_s"] == e["roofline"]["time_per_output_token_s"]
    two = _plan(cli_json, "qwen3-8b-awq", "--gpu", "L40S", "--tp", "2", "--concurrency", "1")["latency"]
    assert rows[2]["roofline.time_per_output_token_s"] == pytest.approx(two["tpot_ms"] / 1e3, rel=1e-12)
    assert rows[2]["roofline.time_to_first_token_one_request_s"] == pytest.approx(two["ttft_ms"] / 1e3, rel=1e-12)


def test_gguf_types_move_tpot_and_estimate_agrees(cli_json):
    """llama.cpp reads its GGUF buffers: Q4_K_M < Q8_0 < F16 (TPOT was 18.62 ms for all three); TTFT stays
    compute-bound at the activation dtype's peak; the plan names the GGUF type as its weights format, and the
    estimate with the same flags gives the same bound."""
    tpot = {}
    for q in ("Q4_K_M", "Q8_0", "F16"):
        p = _plan(cli_json, "llama-3.1-8b", "--gpu", "L40S", "--concurrency", "1", "--engine", "llamacpp",
                  "--gguf-quant", q)
        model = sum(b["bytes"] for b in p["buffers"] if b["device"] == "CUDA0" and b["kind"] == "model")
        assert p["latency"]["decode_weights_read_bytes"] == model
        assert p["per_gpu"]["weights_format"] == f"GGUF {q}"
        e = cli_json("estimate", "-m", "llama-3.1-8b", "--seq-len", "8192", "--gpu", "L40S", "--engine", "llamacpp",
                     "--gguf-quant", q)
        assert e["roofline"]["time_per_output_token_s"] == pytest.approx(p["latency"]["tpot_ms"] / 1e3, rel=1e-12)
        tpot[q] = p["latency"]["tpot_ms"], p["latency"]["ttft_ms"]
    assert tpot["Q4_K_M"][0] < tpot["Q8_0"][0] < tpot["F16"][0]
    assert tpot["Q4_K_M"][1] == tpot["F16"][1]


def test_mxfp4_experts_are_read_as_stored(cli_json):
    """gpt-oss-120b on one H100: a token's 4 of 128 experts per layer are MXFP4 (4.25 bits), not 16-bit: the step
    reads about 5.2 GB, half of 5.13e9 active parameters x 2 B (TPOT was 3.16 ms)."""
    lat = cli_json("plan", "-m", "gpt-oss-120b", "--gpu", "H100-SXM", "--max-model-len", "8192",
                   "--concurrency", "1")["latency"]
    assert 4.5e9 < lat["decode_weights_read_bytes"] < 5.5e9 and lat["tpot_ms"] < 2.0


def test_search_filters_and_sorts_on_the_held_bytes(cli_json):
    """--tpot-ms 10 keeps the AWQ model on one L40S (7.0 ms; 18.9 ms before dropped it), and the option's TPOT and
    $/Mtok are the direct plan's."""
    s = cli_json("plan", "-m", "qwen3-8b-awq", "--max-model-len", "8192", "--concurrency", "1", "--gpus", "L40S",
                 "--tpot-ms", "10", "--sort", "latency", "--max-gpus", "1")
    (o,) = s["options"]
    p = _plan(cli_json, "qwen3-8b-awq", "--gpu", "L40S", "--concurrency", "1")["latency"]
    assert (o["num_gpus"], o["tpot_ms"]) == (1, p["tpot_ms"])
    assert o["usd_per_million_output_tokens"] == pytest.approx(p["usd_per_million_output_tokens"], rel=1e-12)


def test_replicated_mla_latents_are_read_in_full_on_every_rank(cli_json):
    """DeepSeek-V3 at TP 8 keeps the whole latent on every rank: 20 requests going from 4k to 32k tokens read
    20 x 28,672 x 70,272 B more on each GPU, 8.4 ms at 4.8 TB/s (it added 1.05 ms, the latents divided by 8)."""
    runs = [_plan(cli_json, "deepseek-v3-fp8", "--gpu", "H200", "--tp", "8", "--max-model-len", str(n),
                  "--concurrency", "20") for n in (4096, 32768)]
    assert {r["per_gpu"]["kv_bytes_per_token"] for r in runs} == {70272}
    extra = 20 * (32768 - 4096) * 70272
    assert runs[1]["latency"]["decode_kv_read_bytes"] - runs[0]["latency"]["decode_kv_read_bytes"] == extra
    bw = load_gpu("H200").memory_bandwidth_bytes_per_s
    assert runs[1]["latency"]["tpot_ms"] - runs[0]["latency"]["tpot_ms"] == pytest.approx(extra / bw * 1e3, rel=1e-9)


def test_kv_heads_fewer_than_tp_are_read_in_full(cli_json):
    """Qwen3-235B-A22B has 4 KV heads: at TP 4 and TP 8 each rank holds one, so each GPU reads the same K/V."""
    kv = [_plan(cli_json, "qwen3-235b-a22b", "--gpu", "H200", "--tp", str(tp), "--concurrency", "8")
          for tp in (4, 8)]
    assert kv[0]["per_gpu"]["kv_bytes_per_token"] == kv[1]["per_gpu"]["kv_bytes_per_token"] == 48128
    assert kv[0]["latency"]["decode_kv_read_bytes"] == kv[1]["latency"]["decode_kv_read_bytes"] > 0


def test_compare_layouts_with_one_kv_head_per_gpu_decode_alike(cli_json):
    """Qwen3-Next at TP 2: its 2 KV heads and MQA's 1 both leave one head per GPU, so the two rows' TPOT bounds are
    equal (MQA read 13.5 ms against the card's 16.2 with the K/V divided by TP)."""
    c = cli_json("compare", "-m", "qwen3-next-80b-a3b", "--attention", "mqa", "--seq-len", "8192", "--batch", "1",
                 "--gpu", "H200", "--tp", "2", "--engine", "vllm")
    card, mqa = c["rows"]
    assert card["time_per_output_token_s"] == mqa["time_per_output_token_s"] is not None


def test_report_roofline_points_are_the_plans_bounds():
    """kvplan report's roofline: the AWQ model's decode point at batch 1 is the plan's TPOT (7.0 ms, FLOP/B 3.3;
    it drew 18.9 ms and 1.22 from fp16 weights), and at TP 2 each point is one GPU's: the plan's TPOT less its
    all-reduce."""
    from kvplan.planning.capacity import plan
    from kvplan.planning.report_data import build_report

    rep = build_report(["qwen3-8b-awq"], gpus=["L40S"], tp=(1, 2), max_model_len=8192, concurrency=8)
    checked = 0
    for pt in rep.models[0].roof:
        lat = plan("qwen3-8b-awq", gpu="L40S", tp=pt.tp, max_model_len=8192, concurrency=pt.batch).latency
        if pt.phase != "decode" or lat.batch_per_replica != pt.batch:  # a batch the pool does not hold: no plan's
            continue
        checked += 1
        assert pt.time_s == pytest.approx((lat.tpot_ms - lat.allreduce_ms_per_token) / 1e3, rel=1e-9)
        if pt.tp == 1 and pt.batch == 1:
            assert pt.time_s < 7.1e-3 and 3 < pt.intensity < 3.5
    assert checked == 5  # batches 1 and 8 on one L40S (64 do not fit), 1, 8 and 64 on two


@pytest.mark.parametrize("engine", ["vllm", "vllm==0.10.1"])
def test_estimate_roofline_reads_mxfp4_in_the_backend_the_gpu_picks(cli_json, engine):
    """vLLM picks its MXFP4 backend by GPU (kvplan.cost.serving_vllm.mxfp4_layout): `estimate --engine vllm --gpu`
    counts the weights row in that backend's layout, and its prefill, which streams every weight once, reads the
    same layout. The prefill reads the row less the embedding table plus the gathered rows, so row - read is the same
    on every GPU, whichever layout the GPU gets (the newest vLLM on an H100 read Marlin's padded experts, 5.2 GB
    more than the row it printed)."""
    gaps = set()
    for gpu in ("H100-SXM", "A100-80GB", "B200"):
        e = cli_json("estimate", "-m", "gpt-oss-120b", "--engine", engine, "--gpu", gpu, "--seq-len", "8192",
                     "--batch", "4")
        gaps.add(e["weights"]["bytes"] - e["roofline"]["prefill"]["weights_read_bytes"])
    card = load_card("gpt-oss-120b")
    # the embedding table in bf16, less the 4 x 8192 rows the prefill gathers
    assert gaps == {card.vocab_size * card.hidden_size * 2 - 4 * 8192 * card.hidden_size * 2}


def test_llamacpp_layers_on_the_cpu_are_named_and_no_gpu_layer_is_refused(cli, cli_json):
    """llama.cpp -ngl 16 keeps 17 of 33 layers in host memory: the bounds count the GPU's reads only, and a note says
    how much the CPU reads from RAM (TPOT fell from 4.8 to 2.4 ms without a word, QA E 1); -ngl 0 leaves the GPU
    nothing to bound (estimate --gpu divided by zero, exit 3; plan printed TPOT >= 19.5 us)."""
    base = ("-m", "llama-3.1-8b", "--gpu", "H100-SXM", "--max-model-len", "8192", "--concurrency", "1",
            "--engine", "llamacpp")
    full = cli_json("plan", *base, "-ngl", "99")
    part = cli_json("plan", *base, "-ngl", "16")
    assert not any("host memory" in n for n in full["latency"]["notes"])
    said = [n for n in part["latency"]["notes"] if "in host memory" in n]
    assert len(said) == 1 and "kvplan does not model" in said[0]
    for args in (("plan", *base, "-ngl", "0"),
                 ("estimate", "-m", "llama-3.1-8b", "--seq-len", "8192", "--gpu", "H100-SXM", "--engine", "llamacpp",
                  "-ngl", "0")):
        code, out, err = cli(*args)
        assert code == 2 and not out and err.startswith("error: -ngl 0: ") and err.count("\n") == 1, args
    code2, _, _ = cli(  # no --concurrency: the memory plan
        "plan", "-m", "llama-3.1-8b", "--gpu", "H100-SXM", "--max-model-len", "8192", "--engine",
                      "llamacpp", "-ngl", "0")
    assert code2 == 0


def test_vllm_cpu_offload_names_the_host_reads(cli_json):
    """--cpu-offload-gb 4 keeps 4,362,223,616 B in host memory that vLLM's UVA offloader reads every forward: the
    latency notes name the bytes and their time at 64 GB/s (the bounds stayed silent, QA E 2)."""
    p = cli_json("plan", "-m", "llama-3.1-8b", "--gpu", "H100-SXM", "--max-model-len", "8192", "--concurrency", "8",
                 "--cpu-offload-gb", "4")
    off = p["per_gpu"]["offloaded_bytes"]
    said = [n for n in p["latency"]["notes"] if n.startswith("--cpu-offload-gb")]
    assert off > 4 * 10**9 and len(said) == 1 and f"({off:,} B)" in said[0]
    assert f"{off / 64e9 * 1e3:,.1f} ms a step" in said[0]


def test_lora_slots_are_named_beside_the_bytes_read(cli_json):
    """The LoRA slots join the weights row but not the bytes a step reads; the note gives one rank-64 adapter of
    Llama-3.1-8B: (4096 x 3 + 4096 + 1024 x 2 + (4096 + 4096) + 4096 x 2 + 14336 x 2 + 14336 + 4096) x 64 x 32 layers
    x 2 B = 335,544,320 B (QA E 8 computed the same by hand)."""
    p = cli_json("plan", "-m", "llama-3.1-8b", "--gpu", "H100-SXM", "--max-model-len", "8192", "--concurrency", "8",
                 "--enable-lora", "--max-loras", "4", "--max-lora-rank", "64")
    per_layer = (3 * 64 * 4096 + 64 * (4096 + 2 * 1024)) + (64 * 4096 + 4096 * 64) + (
        2 * 64 * 4096 + 2 * 14336 * 64 + 64 * 14336 + 4096 * 64)
    assert per_layer * 32 * 2 == 335_544_320
    said = [n for n in p["latency"]["notes"] if n.startswith("LoRA: ")]
    assert len(said) == 1 and "4 adapter slot(s) of 335,544,320 B per GPU" in said[0]


def test_shared_prefix_ttft_prefills_only_the_tokens_after_the_cached_blocks(cli_json):
    """--shared-prefix-len doubles the concurrency, and TTFT now prefills only the tokens after the cached whole
    blocks (it stayed 133 ms, the whole prompt's; QA E 6). The FLOPs of 16 tokens after 32 cached equal 16 decode
    steps at cache lengths 32..47 less 15 of their 16 logits rows (each position attends its own keys either way)."""
    from kvplan.cost.flops import decode_step_flops
    from kvplan.cost.runtimes import get_engine
    from kvplan.planning.capacity.latency import _one_request_flops

    card, eng = load_card("llama-3.1-8b"), get_engine("vllm")
    steps = [decode_step_flops(card, batch=1, cache_len=c, engine=eng) for c in range(32, 48)]
    assert _one_request_flops(card, 48, eng, 32) == (sum(x.executed(eng.flops_basis) for x in steps)
                                                    - 15 * steps[0].lm_head)
    base = ("plan", "-m", "llama-3.1-8b", "--gpu", "H100-SXM", "--max-model-len", "8192", "--concurrency", "8")
    whole, shared = cli_json(*base), cli_json(*base, "--shared-prefix-len", "4096")
    fresh = cli_json("estimate", "-m", "llama-3.1-8b", "--seq-len", "8192", "--prompt-len", "4096", "--gpu",
                     "H100-SXM")["roofline"]["time_to_first_token_one_request_s"] * 1e3
    assert fresh < shared["latency"]["ttft_ms"] < whole["latency"]["ttft_ms"]  # 62.2 < 71.1 < 133.3 ms
    assert any("prefills the 4,096 tokens after the 4,096 cached ones" in n for n in shared["latency"]["notes"])
