"""The model dtype a float8 checkpoint (or online --quantization fp8) is served in: the per-method tables' fp8 rows
(serving_vllm.QUANT_KERNELS, serving_sglang.QUANT_KERNELS; Runtime.served_dtypes checks them as AWQ's and GPTQ's).

vLLM and SGLang refuse at load unless ``model_config.dtype in quant_config.get_supported_act_dtypes()``:
Fp8Config [torch.bfloat16, torch.half] (vLLM quantization/fp8.py 0.9.1 - 0.33.0, SGLang layers/quantization/fp8.py
0.4.8 - 0.5.23, online fp8 included), CompressedTensorsConfig [torch.float16, torch.bfloat16] (vLLM 0.9.1 - 0.10.0,
SGLang 0.4.8 - 0.5.23) and [torch.float32, torch.float16, torch.bfloat16] (vLLM 0.10.1.1 - 0.33.0)."""

import json

import pytest

from helpers import one_line_error
from kvplan.cost import serving_sglang as sg
from kvplan.cost import serving_vllm as vl
from kvplan.model.quant import Quantization

DATA = __import__("pathlib").Path(__file__).parent / "data" / "configs"
FP8 = ("plan", "--hf-config", str(DATA / "qwen3-235b-a22b-instruct-2507-fp8.json"), "--gpu", "H200", "--tp", "4",
       "--max-model-len", "8192")  # quant_method fp8, block [128, 128]
CT = Quantization(method="fp8", weight_scales="channel", checkpoint_format="compressed-tensors")
QWEN25_7B_KV_PER_TOKEN = 28 * 2 * 4 * 128  # 28 layers x (K, V) x 4 KV heads x head_dim 128, x bytes per value


def _ct_config(tmp_path) -> str:
    """Qwen2.5-7B-Instruct's config.json (the AWQ one in tests/data/configs, torch_dtype bfloat16) with the
    compressed-tensors quantization_config llm-compressor writes for its FP8_DYNAMIC scheme (channel scales, dynamic
    per-token activations), as on RedHatAI/Qwen2.5-7B-Instruct-FP8-dynamic."""
    cfg = json.loads((DATA / "qwen2.5-7b-instruct-awq.json").read_text())
    cfg["torch_dtype"] = "bfloat16"
    cfg["quantization_config"] = {
        "quant_method": "compressed-tensors", "format": "float-quantized", "ignore": ["lm_head"],
        "config_groups": {"group_0": {"targets": ["Linear"],
                                      "weights": {"num_bits": 8, "type": "float", "strategy": "channel"},
                                      "input_activations": {"num_bits": 8, "type": "float", "dynamic": True}}}}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    return str(path)


@pytest.mark.parametrize("release, q, dtypes", [
    ((0, 9, 1), Quantization(method="fp8"), ("bf16", "fp16")),
    ((0, 33, 0), Quantization(method="fp8", block=(128, 128)), ("bf16", "fp16")),
    # compressed_tensors.py CompressedTensorsConfig.get_supported_act_dtypes: float32 added between 0.10.0 and 0.10.1.1
    ((0, 10, 0), CT, ("fp16", "bf16")),
    ((0, 10, 1), CT, ("fp16", "bf16", "fp32")),
])
def test_vllm_fp8_dtypes(release, q, dtypes):
    assert vl.quant_kernel(release, "NVIDIA", 9.0, q).dtypes == dtypes


def test_sglang_fp8_dtypes():
    assert sg.quant_kernel((0, 4, 8), "AMD", None, Quantization(method="fp8")).dtypes == ("bf16", "fp16")
    assert sg.quant_kernel((0, 5, 23), "NVIDIA", 9.0, CT).dtypes == ("fp16", "bf16")


@pytest.mark.parametrize("engine", ["vllm==0.10.0", "vllm", "sglang==0.4.8", "sglang"])
def test_fp8_checkpoint_refuses_float32(cli, engine):
    """A native fp8 checkpoint is Fp8Config in every release read: --weight-dtype fp32 (which planned 4-byte K/V and
    --dtype float32 before) is refused by name with what it takes."""
    line = one_line_error(cli, *FP8, "--engine", engine, "--weight-dtype", "fp32")
    assert line.startswith("error: --weight-dtype: fp32:") and line.endswith("allowed: bf16, fp16")


def test_compressed_tensors_float32_from_vllm_0_10_1(cli, cli_json, tmp_path):
    """A compressed-tensors float8 checkpoint with --weight-dtype fp32: vLLM 0.10.0 and SGLang refuse it
    (CompressedTensorsConfig: float16, bfloat16), vLLM 0.10.1.1 - 0.33.0 take it (float32 listed): --dtype float32,
    4-byte K/V under --kv-cache-dtype auto."""
    args = ("plan", "--hf-config", _ct_config(tmp_path), "--gpu", "H100-SXM", "--max-model-len", "8192",
            "--weight-dtype", "fp32")
    for engine in ("vllm==0.10.0", "sglang"):
        line = one_line_error(cli, *args, "--engine", engine)
        assert line.startswith("error: --weight-dtype: fp32:") and line.endswith("allowed: fp16, bf16")
    for engine in ("vllm==0.10.1.1", "vllm"):
        out = cli_json(*args, "--engine", engine)
        assert out["launch_command"].endswith("--dtype float32")
        assert out["per_gpu"]["kv_bytes_per_token"] == QWEN25_7B_KV_PER_TOKEN * 4


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_online_fp8_refuses_float32_model(cli, cli_json, engine):
    """Online --quantization fp8 builds Fp8Config too: fp32 K/V (--kv-dtype fp32, which only --dtype float32 gives
    under --kv-cache-dtype auto) asked the engine for a float32 model it refuses at load; now refused, naming
    --kv-dtype. float16 K/V still plan (--dtype float16)."""
    args = ("plan", "-m", "qwen3-8b", "--gpu", "H100-SXM", "--engine", engine, "--max-model-len", "8192",
            "--weight-dtype", "fp8")
    line = one_line_error(cli, *args, "--kv-dtype", "fp32")
    assert line.startswith("error: --kv-dtype: fp32:") and "allowed: bf16, fp16 (the model dtype)" in line
    assert cli_json(*args, "--kv-dtype", "fp16")["launch_command"].endswith("--quantization fp8 --dtype float16")
