"""What a plan's launch line says reproduces what kvplan planned: a dtype, a flag taken from a log."""

from __future__ import annotations

import shlex

import pytest

from kvplan.planning.capacity import plan
from kvplan.planning.capacity.fromlog import from_log

FP8_FP16_LOG = "docs/logs/vllm-codeindex34681159919-qwen3-8b-fp8.log"


def test_a_logs_dtype_over_a_quantized_checkpoint_is_planned_and_on_the_line():
    # the log's own header: `vllm serve /home/lz/models/Qwen3-8B-FP8 --trust_remote_code --dtype float16 ...`;
    # vLLM keeps the K/V in the model's dtype (v1/worker/gpu_model_runner.py, 0.11.0), float16 here
    header = next(line for line in open(FP8_FP16_LOG) if line.startswith("# command:"))
    assert "--dtype float16" in header
    r = from_log(FP8_FP16_LOG)
    assert r.plan.inputs.kv_dtype == "fp16" and r.plan.inputs.weight_dtype == "fp8_e4m3"
    words = shlex.split(r.plan.launch_command)
    assert words[words.index("--dtype") + 1] == "float16"


def test_fp16_kv_beside_online_fp8_weights_is_planned_and_launched_with_dtype():
    r = plan("qwen3-8b", engine="vllm==0.11", gpu="RTX-4090", weight_dtype="fp8_e4m3", kv_dtype="fp16",
             max_model_len=1024)
    assert r.launch_command.endswith("--quantization fp8 --dtype float16")
    same = plan("qwen3-8b", engine="vllm==0.11", gpu="RTX-4090", weight_dtype="fp8_e4m3", max_model_len=1024)
    assert "--dtype" not in same.launch_command  # bf16 K/V: the checkpoint's own dtype, no flag
    assert r.kv_cache.num_blocks == same.kv_cache.num_blocks  # fp16 and bf16 K/V: the same bytes


def _line(model: str, engine: str, **kw):
    return plan(model, engine=engine, gpu="H200", max_model_len=4096, **kw)


@pytest.mark.parametrize("engine", ["vllm", "sglang", "tgi"])
def test_bf16_of_a_float16_checkpoint_is_on_the_line(engine):
    # llama-2-7b's config.json: "torch_dtype": "float16"; each server's own default is that dtype
    r = _line("llama-2-7b", engine, weight_dtype="bf16")
    assert r.inputs.weight_dtype == "bf16" and shlex.split(r.launch_command)[-2:] == ["--dtype", "bfloat16"]
    assert "--dtype" not in _line("llama-2-7b", engine).launch_command


def test_trtllm_fp16_of_a_bf16_checkpoint_sets_the_yaml_dtype():
    r = _line("llama-3.1-8b", "trtllm", weight_dtype="fp16")
    assert r.launch_command.endswith("--extra_llm_api_options kv_cache.yaml")
    yaml = [n for n in r.notes if n.startswith("kv_cache.yaml for --extra_llm_api_options:")]
    assert yaml == ["kv_cache.yaml for --extra_llm_api_options: dtype: float16"]
    plain = _line("llama-3.1-8b", "trtllm")
    assert "--extra_llm_api_options" not in plain.launch_command
    assert r.kv_cache.num_blocks == plain.kv_cache.num_blocks  # fp16 and bf16: the same bytes
    fp8 = _line("llama-3.1-8b", "trtllm", weight_dtype="fp16", kv_dtype="fp8_e4m3")
    assert "kv_cache.yaml for --extra_llm_api_options: dtype: float16; kv_cache_config: {dtype: fp8}" in fp8.notes
