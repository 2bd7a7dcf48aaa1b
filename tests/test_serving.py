"""Engine memory rules (kvplan.cost.serving_vllm / serving_sglang) and kvplan.plan, pinned to numbers worked out by
hand from the engines' source rules (vLLM 0.33, SGLang 0.5.23) and to public logs."""

import pytest

from kvplan import KvplanError, load_card
from kvplan.cost import serving_sglang as sg
from kvplan.cost import serving_vllm as vl
from kvplan.cost.kvspec import layer_specs
from kvplan.model.dtypes import DTYPES
from kvplan.planning.capacity import plan
from kvplan.units import parse_size
from kvplan.cost.runtimes import get_engine  # noqa: E402

GIB = 2**30
BF16 = DTYPES["bf16"]


def test_requested_memory_is_ceil():
    assert vl.requested_memory(80_000_000_000, 0.9) == 72_000_000_000
    assert vl.requested_memory(80 * GIB, 0.92) == 79_027_398_247  # 85,899,345,920 x 0.92 = ...246.4, ceil
    with pytest.raises(KvplanError, match="--gpu-memory-utilization"):
        vl.requested_memory(80 * GIB, 1.2)


def test_batch_defaults_by_gpu_tier():
    assert vl.batch_defaults(80_000_000_000, "H100-SXM") == (8192, 1024)  # 74.5 GiB >= 70, not an A100
    assert vl.batch_defaults(80_000_000_000, "A100-80GB") == (2048, 256)
    assert vl.batch_defaults(180_000_000_000, "B200") == (16384, 1024)
    assert vl.scheduled_tokens(8192, 1024, 4) == 4096  # min(max_num_seqs x max_model_len, mnbt)


def test_sliding_window_pages_per_request():
    spec = layer_specs(load_card("mistral-7b-v0.1"), BF16, get_engine("vllm"))[0]  # W = 4096
    # cdiv(min(4096 - 1 + 4096 in flight, 32768), 16) + 1 = cdiv(8191, 16) + 1 = 513
    assert vl.pages_per_request(spec, 32768, 16, 4096) == 513
    assert vl.pages_per_request(spec, 2048, 16, 4096) == 128 + 1  # capped at max_model_len
    assert vl.max_in_flight_tokens(2048, 1) == 4096 and vl.max_in_flight_tokens(2048, 3) == 6144
    # 0.10 - 0.25 count one batch; 0.26+ Model Runner V2 keeps pp + 1 in flight; no async scheduling: pp batches
    assert vl.max_in_flight_tokens(2048, 1, concurrent_batches=False) == 2048
    assert vl.max_in_flight_tokens(2048, 2, v2_runner=True) == 6144 and vl.max_in_flight_tokens(2048, 2) == 4096
    assert vl.max_in_flight_tokens(2048, 1, async_scheduling=False) == 2048


def test_gpt_oss_concurrency_of_vllm_0_10_counts_one_batch_in_flight():
    """vLLM 0.10.1.1 prints "Maximum concurrency for 16,384 tokens per request: 284.25x" for gpt-oss-120b at TP 4
    with 330,018 blocks (docs/logs/vllm-dennislee22-gpt-oss-120b-a100-tp4-ray.log): per request 1,024 full-attention
    pages + cdiv(min(128 - 1 + 2,048, 16,384), 16) + 1 = 137 sliding-window pages, 330,018 / 1,161 = 284.25; two
    batches in flight (0.26+) would give 330,018 / 1,289 = 256.02."""
    kw = dict(gpu="A100-80GB", tp=4, max_model_len=16384, max_num_batched_tokens=2048,
              kv_cache_memory_what_if=True,  # 0.10.1 has no --kv-cache-memory-bytes: the logged pool as a what-if
              kv_cache_memory=330_018 * 18 * (16 * 2 * (8 // 4) * 64 * 2))  # 18 layer slots of 16 tokens x K, V x 2 heads x 64 x 2 B
    old, new = (plan("gpt-oss-120b", engine=f"vllm=={v}", **kw) for v in ("0.10.1", "0.26"))
    assert old.kv_cache.num_blocks == new.kv_cache.num_blocks
    blocks = old.kv_cache.num_blocks
    assert blocks == 330_018
    assert round(old.max_concurrency, 2) == round(blocks / (1024 + 137), 2)
    assert round(new.max_concurrency, 2) == round(blocks / (1024 + 265), 2)


def test_uniform_blocks_and_concurrency_llama70b_tp4():
    r = plan("llama-3.1-70b", gpu="H100-SXM", tp=4, max_model_len=8192, kv_cache_memory="30GiB")
    page = 16 * 2 * (8 // 4) * 128 * 2  # 16,384 B per layer and block
    assert r.kv_cache.bytes_per_block == 80 * page == 1_310_720
    assert r.kv_cache.num_blocks == 30 * GIB // (80 * page) == 24_576
    assert r.kv_cache.blocks_per_request == 8192 // 16
    assert r.max_concurrency == 24_576 / 512 == 48.0
    assert r.kv_cache.tokens == 48 * 8192
    assert r.per_gpu.kv_bytes_per_token == 80 * 2 * 2 * 128 * 2 == 81_920
    assert r.request_kv_bytes == 512 * 80 * page


def test_activation_approximation_llama70b_tp4():
    # N = 8192 tokens: gate_up + act (3 x 28672/4) + q,k,v (8192+1024+1024)/4 + 4 x 8192 hidden = 56,832 elems, bf16
    forward = vl.profile_activation_bytes(load_card("llama-3.1-70b"), 4, 2, 8192, 1024, 128256, False)
    assert forward == 8192 * 56_832 * 2
    # the last stage adds the dummy sampler over 1,024 rows; without a sort (vLLM 0.17+'s Triton top-k/top-p) the bf16
    # logits and three float32 tensors of their shape, 2 + 12 B an entry: larger than this forward
    act = vl.profile_activation_bytes(load_card("llama-3.1-70b"), 4, 2, 8192, 1024, 128256, True)
    assert act == 1024 * 128256 * (2 + 12) > forward


def test_hybrid_grouping_gemma3_27b():
    card = load_card("gemma-3-27b")  # 62 layers: 52 sliding (W 1024), 10 global
    groups = vl.kv_cache_groups(layer_specs(card, BF16, get_engine("vllm")))
    # group_size = 10 (52 >= 1.5 x 10); sliding: cdiv(52, 10) = 6 groups -> 60 slots, 8 padding; global: 1 group
    assert len(groups) == 7 and vl.padding_layers(groups) == 8
    page = 16 * 2 * 16 * 128 * 2
    assert vl.bytes_per_block(groups, 16) == 10 * page
    # full cdiv(32768, 16) = 2048; sliding cdiv(min(1023 + 16384, 32768), 16) + 1 = 1088 + 1
    assert vl.blocks_per_request(groups, 32768, 16, 16384) == 2048 + 6 * 1089


def test_max_model_len_binary_search_reserves_the_null_block():
    groups = vl.kv_cache_groups(layer_specs(load_card("llama-3-8b"), BF16, get_engine("vllm")))
    bpb = vl.bytes_per_block(groups, 16)
    # 101 blocks: one is the null block, so cdiv(L, 16) <= 100 -> L <= 1600
    assert vl.max_model_len_fit(groups, bpb, 101 * bpb, 8192, 16, 0) == 1600
    assert vl.max_model_len_fit(groups, bpb, bpb, 8192, 16, 0) == 0


@pytest.mark.parametrize("card, in_flight", [("llama-3-8b", 0), ("gemma-3-27b", 0), ("gemma-3-27b", 2048)])
def test_max_model_len_fit_is_the_longest_length_that_fits(card, in_flight):
    """Against a scan of every length (the bisection and its first probe at max_model_len, sliding groups too):
    the longest length one request of which fits, and max_model_len itself where it fits."""
    groups = vl.kv_cache_groups(layer_specs(load_card(card), BF16, get_engine("vllm")))
    bpb = vl.bytes_per_block(groups, 16)
    for blocks, cap in ((3, 4096), (40, 4096), (300, 600), (1, 64)):
        fits = [n for n in range(1, cap + 1) if vl.fits(blocks * bpb, bpb, bpb * vl.blocks_per_request(
            groups, n, 16, in_flight))]
        assert vl.max_model_len_fit(groups, bpb, blocks * bpb, cap, 16, in_flight) == max(fits, default=0)


def test_plan_does_not_fit_is_an_answer():
    r = plan("llama-3.1-70b", gpu="H100-SXM", tp=4, max_model_len=131072, kv_cache_memory="2GiB")
    assert not r.fits
    # 2 GiB / 1,310,720 B per block = 1638 blocks; 1637 usable after the null block -> 1637 x 16 tokens
    assert r.max_model_len_fit == 1637 * 16
    assert "does NOT fit" in r.verdict


def test_pipeline_parallel_min_over_stages_deepseek_v2_lite():
    # vllm#20665: 27 layers over 2 stages -> 14 + 13; MLA latent 576 x 2 B per layer, not split by TP
    r = plan("deepseek-v2-lite", gpu="L4", tp=2, pp=2, max_model_len=1024, kv_cache_memory="12.13GiB")
    assert [(x.first_layer, x.last_layer) for x in r.ranks] == [(0, 13), (14, 26)]
    assert [x.bytes_per_block for x in r.ranks] == [14 * 16 * 1152, 13 * 16 * 1152]
    blocks = int(12.13 * GIB) // (14 * 16 * 1152)
    assert r.kv_cache.num_blocks == blocks == 50_473
    assert r.max_concurrency == blocks / 64  # 788.6 (logged 788.86x)


def test_sglang_default_mem_fraction_static():
    # reserved MiB = 512 + 1.5 x 8192 + tp/8 x 1024 + 2 x decode max_bs + 8 x 58 prefill graphs
    assert sg.default_mem_fraction_static(81559, 1, 1, False) == round((81559 - 13904) / 81559, 3) == 0.83
    assert sg.default_mem_fraction_static(81559, 4, 1, False) == round((81559 - 14800) / 81559, 3) == 0.819
    assert sg.default_mem_fraction_static(143771, 8, 1, False) == 0.893
    assert len(sg.prefill_graph_sizes(8192)) == 58
    assert sg.pp_partition_sizes(5, 2) == [2, 3]  # SGLang: the remainder to the last stages


def test_sglang_tokens_qwen3_30b_tp8():
    r = plan("qwen3-30b-a3b", gpu="H100-SXM", tp=8, max_model_len=4096, engine="sglang", mem_fraction_static=0.9,
             gpu_memory="80GiB", context_memory=0)
    cell = 48 * 1 * 2 * 128 * 2  # 1 KV head per rank (4 heads replicated over 8)
    from kvplan.cost.allocator import reserved_rest_bytes
    from kvplan.cost.parallel import Layout

    # what the load leaves reserved beyond the parameters (the caching allocator's rests, an estimate)
    load = reserved_rest_bytes(load_card("qwen3-30b-a3b"), DTYPES["bf16"], Layout(tp=8), 0, mrope_factor=1)
    pool = int(80 * GIB * 0.9) - r.per_gpu.weights_bytes - load
    assert r.per_gpu.kv_bytes_per_token == cell and r.kv_cache.tokens == pool // cell
    assert r.per_gpu.non_torch_bytes == load
    assert "--mem-fraction-static 0.9" in r.launch_command


def test_parse_size():
    assert parse_size("--x", "6.51GiB") == int(6.51 * 2**30)
    assert parse_size("--x", "80GB") == 80 * 10**9
    assert parse_size("--x", "512MiB") == 512 * 2**20
    assert parse_size("--x", "123") == 123
    with pytest.raises(KvplanError, match="^--x: not a size"):
        parse_size("--x", "lots")


@pytest.mark.parametrize("kw, needle", [
    (dict(tp=3), "--tp: total number of attention heads (64) must be divisible"),
    (dict(gpu_memory_utilization=1.5), "--gpu-memory-utilization: vLLM requires 0 < utilization <= 1"),
    (dict(gpu_memory_utilization=0.2), "--gpu-memory-utilization: vllm: no available memory"),
    (dict(gpu="H999"), "--gpu: unknown GPU"),
    (dict(engine="hf-static", tp=2), "--tp/--pp"),
    (dict(engine="sglang", kv_cache_memory="1GiB"), "--kv-cache-memory"),
])
def test_plan_refusals(kw, needle):
    args = dict(gpu="H100-SXM", tp=4, max_model_len=8192) | kw
    with pytest.raises(KvplanError) as exc:
        plan("llama-3.1-70b", **args)
    assert needle in str(exc.value)


@pytest.mark.parametrize("engine", ["vllm", "sglang", "hf-static", "hf-dynamic", "ideal"])
def test_every_engine_plans_every_decoder_card(engine):
    from kvplan.model.catalog import bundled_names

    for name in bundled_names():
        card = load_card(name)
        if card.architecture != "decoder-only":
            continue
        args = dict(gpu="B200", gpu_memory="2TiB", max_model_len=min(4096, card.max_position_embeddings), engine=engine)
        if engine == "sglang" and card.ssm is not None and card.ssm.kind not in ("mamba2", "gated_deltanet"):
            with pytest.raises(KvplanError, match=f"--engine sglang: .*{name}'s is {card.ssm.kind}: use --engine vllm"):
                plan(card, **args)  # SGLang's state pool (Mamba2StateShape): Jamba's Mamba-1 is refused
            continue
        if engine == "sglang" and card.ssm is not None and not card.attention_layers:
            with pytest.raises(KvplanError, match=f"--engine sglang: {name} has no attention layers"):
                plan(card, **args)  # no K/V pool, running requests capped by state slots (QA A #10): refused
            continue
        r = plan(card, **args)
        if card.attention_layers:
            assert r.kv_cache.num_blocks > 0 and r.max_concurrency > 0, name
        else:  # a pure state-space model (Codestral Mamba): its states hold the requests
            assert r.max_concurrency > 0, name


def test_cli_plan_json_contract(cli_json):
    d = cli_json("plan", "--model", "llama-3.1-70b", "--gpu", "H100-SXM", "--tp", "4", "--max-model-len", "8192",
                 "--kv-cache-memory", "30GiB")
    assert d["schema_version"] == 1
    for key in ("weights_bytes", "kv_bytes_per_token", "activation_bytes", "overhead_bytes"):
        assert isinstance(d["per_gpu"][key], int)
    assert d["kv_cache"]["available_bytes"] == 30 * GIB and d["kv_cache"]["num_blocks"] == 24_576
    assert d["kv_cache"]["tokens"] == 48 * 8192 and d["max_concurrency"] == 48.0
    assert d["fits"] is True and d["max_model_len_fit"] == 8192 and len(d["ranks"]) == 1
    assert d["request_kv_bytes"] == 512 * 1_310_720
    assert d["launch_command"].startswith("vllm serve meta-llama/Llama-3.1-70B --tensor-parallel-size 4")


def test_cli_plan_table_and_verdict(cli):
    code, out, _ = cli("plan", "--model", "llama-3.1-70b", "--gpu", "H100-SXM", "--tp", "4", "--pp", "2",
                       "--max-model-len", "8192")
    assert code == 0
    assert "per pipeline stage" in out and "verdict llama-3.1-70b on 8x H100-SXM, vLLM TP 4 PP 2:" in out
    assert "--pipeline-parallel-size 2" in out and "ESTIMATED" in out


def test_verdict_states_the_concurrency_as_the_pool_table(cli):
    """The verdict's figure is the pool table's and vLLM's "Maximum concurrency ...: 58.63x" (two decimals): with one
    decimal 58.63 read "58.6 concurrent"; 58.98 would read "59.0", a request more than the pool holds. (vLLM 0.21:
    the newest release charges Model Runner V2's sampler state, which moves the figure to 58.15.)"""
    from kvplan.planning.capacity import plan

    p = plan("llama-3.1-70b", gpu="H100-SXM", tp=4, max_model_len=8192, engine="vllm==0.21")
    assert 58.5 < p.max_concurrency < 59  # the default utilization: one decimal would print a rounded figure
    code, out, _ = cli("plan", "--model", "llama-3.1-70b", "--gpu", "H100-SXM", "--tp", "4", "--max-model-len", "8192",
                       "--engine", "vllm==0.21")
    assert code == 0
    assert f": {p.max_concurrency:,.2f} concurrent 8,192-token requests;" in out
    assert f"{p.max_concurrency:,.2f}x per replica" in out


def test_cli_plan_sglang(cli_json):
    d = cli_json("plan", "--model", "qwen3-8b", "--gpu", "H100-SXM", "--engine", "sglang", "--max-model-len", "4096",
                 "--gpu-memory", "81559MiB")
    # the default for 81559 MiB, TP 1: round((81559 - 13904) / 81559, 3)
    assert d["inputs"]["mem_fraction_static"] == 0.83 and d["inputs"]["block_size"] == 1
    assert d["launch_command"].startswith("python -m sglang.launch_server --model-path Qwen/Qwen3-8B --tp-size 1")


def test_cli_search(cli_json):
    d = cli_json("plan", "--model", "llama-3.1-70b", "--max-model-len", "8192", "--concurrency", "64",
                 "--gpus", "H100-SXM,A100-80GB", "--max-gpus", "8")
    assert sorted(o["gpu"] for o in d["options"]) == ["A100-80GB", "H100-SXM"]
    # the default order: fewest GPUs, then the catalog's price (both hold 64 x 8k on 4 GPUs; the A100 costs less)
    assert [(o["num_gpus"], o["price_per_hour"]) for o in d["options"]] == sorted(
        (o["num_gpus"], o["price_per_hour"]) for o in d["options"])
    for o in d["options"]:
        assert o["num_gpus"] == o["tp"] * o["pp"] * o["dp"] <= 8 and o["max_concurrency"] >= 64 and o["fits"]
        assert o["tpot_ms"] > 0 and o["ttft_ms"] > o["tpot_ms"]


@pytest.mark.parametrize("args, needle", [
    (["--gpu", "H100-SXM", "--tp", "3"], "--tp: total number of attention heads"),
    (["--gpu", "nope"], "--gpu: unknown GPU"),
    (["--gpu", "H100-SXM", "--gpu-memory-utilization", "0"], "--gpu-memory-utilization"),
    (["--gpu", "H100-SXM", "--kv-cache-memory", "lots"], "--kv-cache-memory: not a size"),
    (["--concurrency", "4", "--tp", "2"], "--tp: the search"),
    ([], "--gpu: give a GPU"),
])
def test_cli_plan_bad_input_exits_2(cli, args, needle):
    code, out, err = cli("plan", "--model", "llama-3.1-70b", "--max-model-len", "8192", *args)
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1


def test_search_ranks_by_gpus_then_price(tmp_path, cli_json):
    entry = ("    vendor: NVIDIA\n    memory_bytes: 80_000_000_000\n    memory_bandwidth_bytes_per_s: 3_350_000_000_000\n"
             "    peak_flops: {fp32: 67.0e+12, bf16: 989.5e+12}\n    interconnect_bandwidth_bytes_per_s: 900_000_000_000\n"
             "    source: test\n")
    path = tmp_path / "gpus.yaml"
    path.write_text(f"gpus:\n  CHEAP:\n{entry}    price_per_hour: 1.0\n  DEAR:\n{entry}    price_per_hour: 3.0\n")
    d = cli_json("plan", "--model", "llama-3.1-8b", "--max-model-len", "8192", "--concurrency", "8",
                 "--gpus", "DEAR,CHEAP", "--gpu-file", str(path))
    assert [(o["gpu"], o["num_gpus"], o["price_per_hour"]) for o in d["options"]] == [("CHEAP", 1, 1.0), ("DEAR", 1, 3.0)]


def test_mla_fp8_checkpoint_adds_dequantized_kv_b_proj():
    card = load_card("deepseek-v3")
    # 61 layers x kv_lora_rank 512 x 128/8 heads x (128 nope + 128 v) x 2 B
    assert vl.mla_dequant_bytes(card, 8, 61, 8) == 61 * 512 * 16 * 256 * 2
    assert vl.mla_dequant_bytes(card, 8, 61, 16) == 0
    from kvplan.cost.parallel import Layout, rank_weights
    from kvplan.model.dtypes import parse_dtype

    fp8 = load_card("deepseek-v3-fp8")  # the FP8 checkpoint: block-scaled linears, bf16 embeddings and norms
    stored = rank_weights(fp8, parse_dtype("bf16"), Layout(tp=8), 0, 0, include_buffers=False).bytes
    r = plan(fp8, gpu="H200", tp=8, max_model_len=8192, kv_cache_memory="10GiB")
    assert r.per_gpu.weights_bytes - r.per_gpu.buffers_bytes - stored == 61 * 512 * 16 * 256 * 2  # the bf16 copies


def test_public_logs_reproduced():
    # LMCache#1739: Qwen3-14B, 6.51 GiB -> "GPU KV cache size: 42,656 tokens", "1.30x" at 32,768
    r = plan("qwen3-14b", gpu="A100-40GB", max_model_len=32768, kv_cache_memory="6.51GiB")
    assert r.kv_cache.tokens == 42_656 and f"{r.max_concurrency:.2f}" == "1.30"
    # arm-learning-paths: Mistral-7B-v0.2, 102.56 GiB -> num_gpu_blocks 52510, 840,160 tokens, 25.64x
    r = plan("mistral-7b-v0.2", gpu="B200", max_model_len=32768, kv_cache_memory="102.56GiB")
    assert (r.kv_cache.num_blocks, r.kv_cache.tokens, f"{r.max_concurrency:.2f}") == (52_510, 840_160, "25.64")
    # eole: Gemma-3-1b, 25.39 GiB -> "Add 2 padding layers", 461.21x (kvplan 461.19: the GiB figure is rounded)
    r = plan("gemma-3-1b", gpu="H100-SXM", max_model_len=2048, kv_cache_memory="25.39GiB")
    assert r.kv_cache.padding_layers == 2 and abs(r.max_concurrency - 461.21) < 0.05


def test_docs_capacity_table_is_current(capsys):
    import runpy
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    runpy.run_path(str(root / "benchmarks" / "capacity_logs.py"), run_name="__main__")
    table = capsys.readouterr().out.strip()
    assert table in (root / "docs" / "capacity.md").read_text(encoding="utf-8")


def test_search_skips_a_dp_layout_vllm_refuses():
    """DeepSeek-V3 without expert parallelism: the MoE's TP group is dp x tp, which must divide
    moe_intermediate_size 2048 (fused_moe/config.py); a layout needing dp 3 at tp 4 (12) is skipped, not an error
    that ends the whole search."""
    from kvplan.planning.capacity.search import search

    r = search("deepseek-v3", max_model_len=8192, concurrency=64, max_gpus=64)
    assert r.options and all(2048 % (o.tp * o.dp) == 0 for o in r.options)
