"""Launch lines that reproduce the plan (QA area A: #3, #5, #6, #7, #8, #10): every input that changes the plan is on
the printed command, and what the engine would refuse or ignore is refused here with one line."""

import json

import pytest

from helpers import one_line_error

LLAMA = ("plan", "-m", "llama-3.1-8b", "--gpu", "L40S", "--max-model-len", "8192")


# ---- #3: llama.cpp --kv-dtype is -ctk/-ctv ------------------------------------------------------------------------

@pytest.mark.parametrize("kv, ctype, per_token", [("fp32", "f32", 262_144), ("bf16", "bf16", 131_072)])
def test_llamacpp_kv_dtype_is_cache_type(cli_json, kv, ctype, per_token):
    """--kv-dtype fp32|bf16 plans -ctk/-ctv of that type and puts them on the launch line, as -ctk/-ctv do."""
    by_dtype = cli_json(*LLAMA, "--engine", "llamacpp", "--kv-dtype", kv)
    by_flags = cli_json(*LLAMA, "--engine", "llamacpp", "-ctk", ctype, "-ctv", ctype)
    assert by_dtype["inputs"]["kv_dtype"] == ctype
    assert by_dtype["per_gpu"]["kv_bytes_per_token"] == per_token
    assert f"-ctk {ctype} -ctv {ctype}" in by_dtype["launch_command"]
    for key in ("max_concurrency", "launch_command", "kv_cache"):
        assert by_dtype[key] == by_flags[key]


def test_llamacpp_kv_dtype_fp32_halves_slots(cli_json):
    f16 = cli_json(*LLAMA, "--engine", "llamacpp")
    f32 = cli_json(*LLAMA, "--engine", "llamacpp", "--kv-dtype", "fp32")
    assert f16["inputs"]["kv_dtype"] == "f16" and "-ctk" not in f16["launch_command"]
    assert f32["max_concurrency"] < f16["max_concurrency"]


def test_llamacpp_kv_dtype_conflicting_cache_type_refused(cli):
    line = one_line_error(cli, *LLAMA, "--engine", "llamacpp", "--kv-dtype", "fp32", "-ctk", "q8_0")
    assert "--kv-dtype" in line and "-ctk" in line


def test_llamacpp_estimate_plan_sweep_agree(cli_json, cli):
    """estimate, sweep and plan size one --kv-dtype alike; llama.cpp's default cache is f16, not the weights' bf16."""
    est = cli_json("estimate", "-m", "llama-3.1-8b", "--seq-len", "8192", "--engine", "llamacpp", "--kv-dtype", "fp32")
    assert est["kv_cache"]["bytes_per_token"] == 262_144
    assert any("K (f32)" in n for n in est["notes"])  # llama.cpp's own cache at -ctk f32
    default = cli_json("estimate", "-m", "llama-3.1-8b", "--seq-len", "8192", "--engine", "llamacpp")
    assert default["kv_cache"]["dtype"] == "fp16"
    for kv, per_token in (("fp32", 262_144), (None, 131_072)):
        args = ["sweep", "-m", "llama-3.1-8b", "--seq-len", "8192", "--engine", "llamacpp", "--gpu", "L40S",
                "--tp", "1", "--format", "jsonl", *(["--kv-dtype", kv] if kv else [])]
        code, out, err = cli(*args)
        assert code == 0, err
        row = json.loads(out.splitlines()[0])
        assert row["kv_cache.bytes_per_token"] == row["per_gpu.kv_bytes_per_token"] == per_token
        plan = cli_json(*LLAMA, "--engine", "llamacpp", *(["--kv-dtype", kv] if kv else []))
        assert row["max_concurrency"] == plan["max_concurrency"]
