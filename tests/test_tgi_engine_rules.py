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
    r = kvplan.plan("llama-3.1-8b", gpu="H100-SXM", max_model_len=8192, engine="tgi", block_size=16)
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


# ---- #8: 4096 is kvplan's pinned value, not TGI's default ---------------------------------------------------------

def test_tgi_note_says_the_launch_line_pins_prefill_not_tgi_default():
    r = kvplan.plan("llama-3.1-8b", gpu="H100-SXM", max_model_len=8192, engine="tgi")
    note = next(n for n in r.notes if n.startswith("The launch line pins --max-batch-prefill-tokens 4,096"))
    assert "kvplan does not model TGI's own default" in note and "compute_optimal" in note
    assert "--max-batch-prefill-tokens 4096" in r.launch_command


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
