"""TensorRT-LLM and TGI: one runtime module each (kvplan.cost.runtimes.trtllm, .tgi) and a registry line; plan,
search, sweep, report and check take them through the runtime design. Each figure is checked against numbers
known without kvplan: the published configs' shapes and the engines' own formulas, applied by hand here."""

from __future__ import annotations

import json

import pytest

import kvplan
from kvplan.cost.runtimes import get_engine
from kvplan.cost.runtimes.trtllm import kv_size_per_token
from kvplan.errors import KvplanError, Refused
from kvplan.units import cdiv

GIB, MIB = 2**30, 2**20
LLAMA8_TOKEN = 32 * 8 * 128 * 2 * 2  # Llama-3.1-8B config: 32 layers x 8 KV heads x 128 x (K, V) x bf16 = 128 KiB


def test_trtllm_per_token_estimate_matches_the_published_shapes():
    # Llama-3.1-70B (80 layers, 8 KV heads of 128) at TP 4 in fp8: 2 x 80 x (128 x 8 // 4) x 1 B
    assert kv_size_per_token(8, 128, 80, 4, 1) == 40_960
    # DeepSeek-V3 MLA: 61 layers x (kv_lora_rank 512 + rope 64) x bf16, not divided by TP: 70,272 B (the figure
    # DeepSeek's paper and vLLM's MLA cache give per token)
    assert kv_size_per_token(128, 128, 61, 8, 2, mla_width=576) == 70_272
    # fewer K/V heads than TP ranks: the integer division does not replicate heads (2 x 128 // 4 = 64 lanes)
    assert kv_size_per_token(2, 128, 10, 4, 2) == 2 * 10 * 64 * 2


def test_trtllm_budget_is_the_fraction_of_what_the_warm_up_leaves():
    act, gpu_mem = 2 * GIB, 81_559 * MIB  # nvidia-smi's H100 80GB total
    r = kvplan.plan("llama-3.1-8b", gpu="H100-SXM", gpu_memory=gpu_mem, max_model_len=8192, engine="trtllm",
                    activation_memory=act, free_gpu_memory_fraction=0.85)
    weights = r.per_gpu.weights_bytes
    free = gpu_mem - 512 * MIB - weights - act - 256 * MIB  # CUDA context, weights, warm-up, runtime growth
    available = int(free * 0.85)
    assert r.kv_cache.available_bytes == available
    assert r.per_gpu.kv_bytes_per_token == LLAMA8_TOKEN
    tokens = available // LLAMA8_TOKEN  # _cal_max_tokens, then whole blocks of 32 (calculate_max_num_blocks)
    assert r.kv_cache.num_blocks == tokens // 32 and r.kv_cache.block_size == 32
    assert r.max_concurrency == pytest.approx(r.kv_cache.num_blocks / (8192 // 32))
    assert r.inputs.free_gpu_memory_fraction == 0.85 and r.inputs.engine == "trtllm"
    assert r.launch_command == ("trtllm-serve meta-llama/Llama-3.1-8B --backend pytorch --tp_size 1 --max_seq_len 8192 "
                                "--max_num_tokens 8192 --max_batch_size 2048 --kv_cache_free_gpu_memory_fraction 0.85")
    assert any("UNVERIFIED" in n for n in r.notes)


def test_trtllm_refuses_a_whole_fraction_and_vllm_flags():
    with pytest.raises(KvplanError, match="^--kv-cache-free-gpu-memory-fraction: .*below 1.0"):
        kvplan.plan("llama-3.1-8b", gpu="H100-SXM", max_model_len=8192, engine="trtllm", free_gpu_memory_fraction=1.0)
    with pytest.raises(KvplanError, match="^--gpu-memory-utilization"):
        kvplan.plan("llama-3.1-8b", gpu="H100-SXM", max_model_len=8192, engine="trtllm", gpu_memory_utilization=0.9)


def test_tgi_blocks_follow_warmup_and_the_wiggle_room():
    act, gpu_mem = 1 * GIB, 81_559 * MIB
    r = kvplan.plan("llama-3.1-8b", gpu="H100-SXM", gpu_memory=gpu_mem, max_model_len=8192, engine="tgi",
                    activation_memory=act, cuda_memory_fraction=0.95)
    assert r.kv_cache.block_size == 1  # head_dim 128: flashinfer, BLOCK_SIZE 1
    # TGI's default max_batch_prefill_tokens 59,870 (900e12 // 15,032,385,536, test_tgi_engine_rules) is warmed up as
    # 8 requests (7 of max_input_tokens 8,191, one of 2,533 tokens; grpc_client.rs warmup), each with max_new_tokens
    # = 8,192 - its tokens, so each holds 8,191 blocks of 1 (flash_causal_lm.py block_tokens); was 59,870 blocks
    warm = 8 * 8191
    free = gpu_mem - 512 * MIB - r.per_gpu.weights_bytes - act - 256 * MIB - warm * LLAMA8_TOKEN
    blocks = int((free - 0.05 * gpu_mem) * 0.90) // LLAMA8_TOKEN + warm
    assert r.kv_cache.num_blocks == blocks and r.kv_cache.tokens == blocks
    assert r.max_concurrency == pytest.approx(blocks / 8192)
    assert r.inputs.cuda_memory_fraction == 0.95
    assert r.launch_command == ("text-generation-launcher --model-id meta-llama/Llama-3.1-8B --num-shard 1 "
                                "--max-input-tokens 8191 --max-total-tokens 8192 --max-batch-prefill-tokens 59870 "
                                "--cuda-memory-fraction 0.95")


def test_tgi_block_size_by_attention_backend():
    # Phi-3-mini: head_dim 96 is not one of flashinfer's: flashdecoding, BLOCK_SIZE 256
    r = kvplan.plan("phi-3-mini-4k", gpu="H100-SXM", max_model_len=4096, engine="tgi")
    assert r.kv_cache.block_size == 256 and r.kv_cache.blocks_per_request == 16
    paged = kvplan.plan("llama-3.1-8b", gpu="H100-SXM", max_model_len=1000, engine="tgi", block_size=16)
    assert paged.launch_command.startswith("ATTENTION=paged text-generation-launcher")
    assert paged.kv_cache.blocks_per_request == cdiv(1000, 16)
    with pytest.raises(KvplanError, match="^--block-size: TGI"):
        kvplan.plan("llama-3.1-8b", gpu="H100-SXM", max_model_len=1000, engine="tgi", block_size=32)
    with pytest.raises(Refused, match="^--pp"):
        kvplan.plan("llama-3.1-8b", gpu="H100-SXM", max_model_len=1000, engine="tgi", pp=2)


@pytest.mark.parametrize("engine, flag, kw", [
    ("vllm", "--cuda-memory-fraction", {"cuda_memory_fraction": 0.9}),
    ("sglang", "--kv-cache-free-gpu-memory-fraction", {"free_gpu_memory_fraction": 0.9}),
    ("tgi", "--max-batch-size", {"max_batch_size": 8}),
])
def test_an_engine_refuses_another_engines_flag_by_name(engine, flag, kw):
    with pytest.raises(KvplanError, match=f"^{flag}: only for --engine"):
        kvplan.plan("llama-3.1-8b", gpu="H100-SXM", max_model_len=1000, engine=engine, **kw)


def test_search_skips_tgi_pipeline_layouts():
    from kvplan.planning.capacity.search import search

    s = search("llama-3.1-70b", max_model_len=8192, concurrency=8, engine="tgi", gpus=["H100-SXM"])
    assert s.options and all(o.pp == 1 for o in s.options)
    assert s.options[0].launch_command.startswith("text-generation-launcher")


@pytest.mark.parametrize("engine, launcher", [("trtllm", "trtllm-serve"), ("tgi", "text-generation-launcher")])
def test_cli_plan_sweep_report_and_check_take_them(engine, launcher, cli, tmp_path, monkeypatch):
    code, out, err = cli("plan", "-m", "llama-3.1-8b", "--gpu", "H100-SXM", "--engine", engine, "--max-model-len",
                         "8192", "--json")
    assert code == 0, err
    assert json.loads(out)["launch_command"].startswith(launcher)
    code, out, err = cli("sweep", "-m", "llama-3.1-8b", "--engine", engine, "--seq-len", "100", "--format", "jsonl")
    assert code == 0, err
    held = {"trtllm": 128, "tgi": 100}[engine]  # whole blocks of 32; flashinfer's blocks of 1
    assert json.loads(out.splitlines()[0])["kv_cache.total_bytes"] == held * LLAMA8_TOKEN
    code, _, err = cli("report", "-m", "llama-3.1-8b", "--engine", engine, "--gpu", "H100-SXM", "-o",
                       str(tmp_path / "r.md"))
    assert code == 0, err
    text = (tmp_path / "r.md").read_text()
    assert launcher in text and "UNVERIFIED" in text  # the report keeps the plan's caveat
    monkeypatch.chdir(tmp_path)
    (tmp_path / "kvplan.toml").write_text(f'[[scenarios]]\nname = "s"\nmodel = "llama-3.1-8b"\nengine = "{engine}"\n'
                                          'gpu = "H100-SXM"\nmax_model_len = 8192\nmin_concurrency = 10\n')
    code, out, err = cli("check", "--json")
    assert code == 0, out + err
    assert get_engine(engine).name == engine
