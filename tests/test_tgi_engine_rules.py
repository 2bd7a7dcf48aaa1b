"""TGI's launcher rules (QA C #2, #5, #6, #7, #8) read from huggingface/text-generation-inference db931fcf
launcher/src/main.rs (resolve_attention, enum KVCacheDtype, max_batch_prefill_tokens default), backends/v3/src/main.rs
(the router's prefill check) and server/.../models/model.py (prefill chunking); Ollama's summed-VRAM default num_ctx
(QA C #10, ollama fb307609 server/routes.go) and trtllm-serve's --revision (QA C #11, tensorrt_llm/commands/serve.py)."""

from __future__ import annotations

import pytest

import kvplan
import kvplan.planning.capacity.text as launch_text
from helpers import one_line_error
from kvplan.errors import Refused
from kvplan.units import cdiv

TGI = ("plan", "--engine", "tgi")


# ---- #7: resolve_attention: fallback by compute capability, falcon / deepseek_v2 forced to it ---------------------

@pytest.mark.parametrize("model, gpu, block, env", [
    ("falcon-7b", "H100-SXM", 256, ""),      # model_type falcon: fallback flashdecoding (cc 9.0), not flashinfer
    ("falcon-7b", "V100-32GB", 16, ""),      # cc 7.0: fallback paged
    ("phi-3-mini-4k", "V100-32GB", 16, ""),  # head dim 96: fallback, paged below cc 8
    ("phi-3-mini-4k", "L4", 256, ""),        # head dim 96 on cc 8.9: flashdecoding
    ("llama-3.1-8b", "V100-32GB", 1, ""),    # head dim 128, a llama: flashinfer whatever the GPU
])
def test_tgi_attention_backend_follows_resolve_attention(model, gpu, block, env):
    r = kvplan.plan(model, gpu=gpu, max_model_len=2048, engine="tgi")
    assert r.kv_cache.block_size == block
    assert r.launch_command.startswith("text-generation-launcher")  # TGI picks it itself: no ATTENTION= needed
    name = {1: "flashinfer", 16: "paged", 256: "flashdecoding"}[block]
    assert any(n.startswith(f"TGI 3.3 (text-generation-inference db931fcf, 2026-01): attention {name} (resolve_attention")
               for n in r.notes)


def test_tgi_falcon_note_names_the_forced_fallback():
    r = kvplan.plan("falcon-7b", gpu="H100-SXM", max_model_len=2048, engine="tgi")
    assert any("model_type falcon is forced to the fallback" in n for n in r.notes)
    assert r.kv_cache.blocks_per_request == cdiv(2048, 256)


# ---- #2: --shared-prefix-len only where TGI keeps prefix caching ---------------------------------------------------

@pytest.mark.parametrize("args, why", [
    (("-m", "llama-3.1-8b", "--gpu", "L40S", "--max-model-len", "8192", "--block-size", "16",
      "--shared-prefix-len", "4096"), "paged attention"),
    (("-m", "phi-3-mini-4k", "--gpu", "L4", "--max-model-len", "4096", "--shared-prefix-len", "2048"),
     "head dim 96 is not supported by flashinfer"),
    (("-m", "qwen2.5-vl-7b", "--gpu", "L40S", "--max-model-len", "8192", "--shared-prefix-len", "4096"),
     "vision_config"),
    (("-m", "falcon-7b", "--gpu", "V100-32GB", "--max-model-len", "2048", "--shared-prefix-len", "1024"),
     "paged attention"),
])
def test_tgi_refuses_a_shared_prefix_it_does_not_cache(cli, args, why):
    line = one_line_error(cli, *TGI, *args)
    assert line.startswith("error: --shared-prefix-len: TGI turns prefix caching off here") and why in line


def test_tgi_shares_a_prefix_where_prefix_caching_stays_on(cli_json):
    base = ("-m", "llama-3.1-8b", "--gpu", "L40S", "--max-model-len", "8192")
    plain = cli_json(*TGI, *base)["max_concurrency"]
    shared = cli_json(*TGI, *base, "--shared-prefix-len", "4096")["max_concurrency"]
    assert shared > 1.9 * plain  # flashinfer, head dim 128, no vision: half of every request held once
    falcon = kvplan.plan("falcon-7b", gpu="H100-SXM", max_model_len=2048, engine="tgi", shared_prefix_len=1024)
    assert falcon.max_concurrency > kvplan.plan("falcon-7b", gpu="H100-SXM", max_model_len=2048,
                                                engine="tgi").max_concurrency  # flashdecoding keeps it on


# ---- #6: paged attention has no prefill chunking: prefill budget >= max_input_tokens ------------------------------

def test_tgi_paged_launch_line_covers_max_input_tokens():
    # H100 PCIe: nvidia-smi 'NVIDIA H100 PCIe' is not in TGI's FLOP/s table: default_optimal 4096, raised to 8191
    r = kvplan.plan("llama-3.1-8b", gpu="H100-PCIe", max_model_len=8192, engine="tgi", block_size=16)
    assert r.launch_command == ("ATTENTION=paged text-generation-launcher --model-id meta-llama/Llama-3.1-8B "
                                "--num-shard 1 --max-input-tokens 8191 --max-total-tokens 8192 "
                                "--max-batch-prefill-tokens 8191")
    assert any(f"+ {cdiv(8191, 16)} warm-up blocks" in n for n in r.notes)  # the warm-up sized by it
    with pytest.raises(Refused, match=r"^--max-batch-prefill-tokens 4096: TGI with paged attention .* 8191"):
        kvplan.plan("llama-3.1-8b", gpu="H100-SXM", max_model_len=8192, engine="tgi", block_size=16,
                    max_batch_prefill_tokens=4096)


# ---- #5: --kv-cache-dtype takes fp8_e4m3fn / fp8_e5m2 ------------------------------------------------------------

@pytest.mark.parametrize("kv, flag", [("fp8", "fp8_e4m3fn"), ("fp8_e4m3", "fp8_e4m3fn"), ("fp8_e5m2", "fp8_e5m2")])
def test_tgi_kv_cache_dtype_is_the_clap_name(kv, flag):
    r = kvplan.plan("llama-3.1-8b", gpu="H100-SXM", max_model_len=8192, engine="tgi", kv_dtype=kv)
    assert r.launch_command.endswith(f"--kv-cache-dtype {flag}")


def test_tgi_kv_dtype_hint_names_tgi_values(cli):
    line = one_line_error(cli, *TGI, "-m", "llama-3.1-8b", "--gpu", "H100-SXM", "--max-model-len", "8192",
                          "--kv-dtype", "int8")
    assert "(TGI --kv-cache-dtype: fp8_e4m3fn, fp8_e5m2)" in line


# ---- #8: --max-batch-prefill-tokens without the flag is TGI's own default (launcher/src/main.rs db931fcf) ----------

def test_tgi_default_prefill_is_compute_optimal():
    """Llama-3.1-8B (hidden 4096, 32 heads, 8 kv heads, head_dim 128, intermediate 14336, 32 layers) on H100 SXM
    ('nvidia-h100-80gb-hbm3' -> Gpu::H100, 900e12 FLOP/s): Config::flop per layer = q, attn, o 3 x 2x32x128x4096
    = 100,663,296 + k, v 2 x 2x8x128x4096 = 16,777,216 + gate/up/down 2x3x4096x14336 = 352,321,536 -> 469,762,048;
    x 32 = 15,032,385,536; 900e12 // that = 59,870 (> 100), < max_position_embeddings 131,072. vram_maximum:
    81,559 MiB x 0.95 = 81,245,002,956 B (f32) - model_vram 2 x (32 x (3x14336x4096 + 48x128 + 32x128x4096)
    + 2x4096x128256) = 14,449,770,496 -> // token_vram (8x2x128x2x32 = 131,072 + 21,504x6 = 129,024 -> 260,096)
    = 256,808, no cap. Default = 59,870 (the old code pinned 4,096)."""
    r = kvplan.plan("llama-3.1-8b", gpu="H100-SXM", max_model_len=8192, engine="tgi")
    assert r.launch_command.endswith("--max-batch-prefill-tokens 59870")
    note = next(n for n in r.notes if n.startswith("--max-batch-prefill-tokens 59,870 is TGI's own default"))
    assert "compute_optimal" in note and "15,032,385,536" in note
    # Llama-3.1-70B on 4x A100-80GB: 80 layers x (3x2x64x128x8192 + 2x2x8x128x8192 + 2x3x8192x28672)
    # = 80 x (402,653,184 + 33,554,432 + 1,409,286,144) = 147,639,500,800; 4 x 312e12 // that = 8,453
    r = kvplan.plan("llama-3.1-70b", gpu="A100-80GB", tp=4, max_model_len=8192, engine="tgi")
    assert r.launch_command.endswith("--max-batch-prefill-tokens 8453")


def test_tgi_default_prefill_unknown_gpu_and_vlm():
    """main.rs: a card TGI's table lacks (RTX 4090 is 'nvidia-geforce-rtx-4090', the table has 'nvidia-4090') or a
    config with vision_config (Config::flop None) -> default_optimal: 4096, 10,000 for qwen2_5_vl."""
    r = kvplan.plan("llama-3.1-8b", gpu="RTX-4090", max_model_len=8192, engine="tgi")
    assert r.launch_command.endswith("--max-batch-prefill-tokens 4096")
    assert any("default_optimal 4,096" in n for n in r.notes)
    r = kvplan.plan("qwen2.5-vl-7b", gpu="H100-SXM", max_model_len=8192, engine="tgi")
    assert "--max-batch-prefill-tokens 10000" in r.launch_command


# ---- #10: Ollama's default num_ctx sums every GPU ------------------------------------------------------------------

def test_ollama_default_num_ctx_sums_the_gpus():
    two = kvplan.plan("qwen3-32b", gpu="RTX-4090", pp=2, max_model_len=32768, engine="ollama")
    note = next(n for n in two.notes if n.startswith("Ollama's default num_ctx"))
    assert "would be 40,960" in note and "2 x " in note  # 47+ GiB: 262,144, capped at the model's 40,960
    one = kvplan.plan("qwen3-32b", gpu="H100-SXM", max_model_len=32768, engine="ollama")
    assert any(n.startswith("Ollama's default num_ctx") and "would be 40,960" in n for n in one.notes)


# ---- #11: trtllm-serve --revision ----------------------------------------------------------------------------------

def test_trtllm_serve_takes_the_revision(monkeypatch):
    commit = "0123456789abcdef0123456789abcdef01234567"
    monkeypatch.setattr(launch_text, "revision", lambda card: commit)
    r = kvplan.plan("llama-3.1-8b", gpu="H100-SXM", max_model_len=8192, engine="trtllm")
    assert r.launch_command.startswith(f"trtllm-serve meta-llama/Llama-3.1-8B --revision {commit} --backend pytorch")
    assert "huggingface-cli" not in r.launch_command


def test_tgi_vram_maximum_counts_num_local_experts_of_every_config_that_names_it():
    """TGI's Config reads num_local_experts (serde default 1); Llama 4's config names its 16 experts so, as Mixtral's
    does (transformers Llama4TextConfig.num_local_experts), so TGI's model_vram counts 16 expert MLPs. By hand, 8 H100
    (nvidia-smi 81,559 MiB) at cuda_memory_fraction 0.9: available = 81,559 x 2^20 x 8 x 0.9 x 0.95; model_vram =
    (48 x (3 x 8192 x 16 x 5120 + (40 + 2 x 8) x 128 + 40 x 128 x 5120) + 2 x 5120 x 202,048) x 2; token_vram =
    8 x 2 x 128 x 2 x 48 + (8192 + 4096) x 16 x 2 x 3; (available - model) // token = 279,768 (one expert: 2,094,532)."""
    from kvplan.cost.hardware import load_gpu
    from kvplan.cost.runtimes.tgi import vram_maximum
    from kvplan.model.catalog import load_card

    available = int(81_559 * 2**20 * 8 * 0.9 * 0.95)
    model = (48 * (3 * 8192 * 16 * 5120 + (40 + 16) * 128 + 40 * 128 * 5120) + 2 * 5120 * 202_048) * 2
    token = 8 * 2 * 128 * 2 * 48 + (8192 + 4096) * 16 * 2 * 3
    assert (available - model) // token == 279_768
    gpu = load_gpu("H100-SXM")
    assert gpu.nvidia_smi_memory_mib == 81_559
    assert vram_maximum(load_card("llama-4-scout-17b-16e"), gpu, 8, 0.9) == (279_768, False)


# ---- the warm-up the launch line runs, and the no-flag max_total_tokens -------------------------------------------

def test_tgi_warmup_requests_each_hold_max_total_tokens():
    """grpc_client.rs warmup (db931fcf): requests of min(max_input_tokens, what is left of max_batch_prefill_tokens)
    tokens, each with max_new_tokens = max_total_tokens - its tokens; flash_causal_lm.py gives each
    ceil((prompt + max_new_tokens - 1) / BLOCK_SIZE) blocks. Llama-3.1-8B on an H100-SXM: prefill 59,870 (TGI's
    compute_optimal, test_tgi_default_prefill_is_compute_optimal); --max-model-len 131,072 is one request of
    131,071 blocks of 1 (was 59,870, the prefill alone); 8,192 is 8 requests of 8,191."""
    r = kvplan.plan("llama-3.1-8b", gpu="H100-SXM", max_model_len=131072, engine="tgi")
    assert "--max-batch-prefill-tokens 59870" in r.launch_command
    assert any("+ 131,071 warm-up blocks" in n for n in r.notes)
    r = kvplan.plan("llama-3.1-8b", gpu="H100-SXM", max_model_len=8192, engine="tgi")
    assert any(f"+ {8 * 8191:,} warm-up blocks" in n for n in r.notes)
    # without --max-total-tokens TGI 3.x sets it to min(KV tokens, max_position_embeddings 131,072, model_max_length)
    # and warms up one request of the prefill alone (max_new_tokens 1): 59,870 blocks
    note = next(n for n in r.notes if n.startswith("This plan passes --max-model-len 8,192"))
    assert "max_position_embeddings 131,072" in note and "(59,870 blocks, not 65,528)" in note
