"""What a plan's launch line says reproduces what kvplan planned: a dtype, a flag taken from a log, a prefix-caching
choice on the table commands."""

from __future__ import annotations

import json
import shlex

import pytest

from helpers import one_line_error

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


# jamba-1.5-mini on vLLM 0.27: prefix caching sets the Mamba cache mode, so a 4k sequence holds 536,870,912 B of
# pages with it (mode "all": 16 pages of 33,554,432 B) and 77,332,480 B without (mode "none": 59 x 4 x 80 x 4,096), the
# figures tests/test_vllm_mamba_all_mode.py pins for estimate and plan
PFX = {"--enable-prefix-caching": 536_870_912, "--no-enable-prefix-caching": 77_332_480}
JAMBA = ("-m", "jamba-1.5-mini", "--engine", "vllm==0.27", "--seq-len", "4096")


@pytest.mark.parametrize("flag", list(PFX))
def test_sweep_takes_prefix_caching_as_estimate_does(cli, cli_json, flag):
    est = cli_json("estimate", *JAMBA, flag)
    assert est["kv_cache"]["bytes_per_sequence"] == PFX[flag]
    code, out, err = cli("sweep", *JAMBA, "--batch", "1,3", "--format", "jsonl", flag)
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    assert [r["kv_cache.total_bytes"] for r in rows] == [PFX[flag], 3 * PFX[flag]]
    assert rows[0]["total_bytes"] == est["total_bytes"]
    code, out, err = cli("sweep", *JAMBA, "--gpu", "H200", "--tp", "2", "--format", "jsonl", flag)
    assert code == 0, err
    row = json.loads(out.splitlines()[0])
    planned = cli_json("plan", "-m", "jamba-1.5-mini", "--engine", "vllm==0.27", "--gpu", "H200", "--tp", "2",
                       "--max-model-len", "4096", flag)
    assert row["kv_cache.bytes_per_sequence"] == PFX[flag] and row["max_concurrency"] == planned["max_concurrency"]


@pytest.mark.parametrize("flag", list(PFX))
def test_compare_takes_prefix_caching_as_estimate_and_plan_do(cli_json, flag):
    out = cli_json("compare", *JAMBA, "--attention", "gqa:4", "--gpu", "H200", "--tp", "2", flag)
    planned = cli_json("plan", "-m", "jamba-1.5-mini", "--engine", "vllm==0.27", "--gpu", "H200", "--tp", "2",
                       "--max-model-len", "4096", flag)
    card = out["rows"][0]
    assert card["layout"] == "card" and card["kv_total_bytes"] == PFX[flag]
    assert card["max_batch"] == int(planned["max_concurrency"])


@pytest.mark.parametrize("command", ["sweep", "compare"])
@pytest.mark.parametrize("engine", ["sglang", "ideal"])
def test_prefix_caching_is_refused_by_name_off_vllm(cli, command, engine):
    extra = ("--attention", "mqa") if command == "compare" else ()
    line = one_line_error(cli, command, "-m", "jamba-1.5-mini", "--engine", engine, "--seq-len", "4096", *extra,
                          "--no-enable-prefix-caching")
    assert "prefix-caching" in line and "vllm" in line
