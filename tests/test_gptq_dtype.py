"""The model dtype a GPTQ checkpoint is served in, per engine, release and GPU: the AWQ rule (tests/test_awq_dtype.py)
with GPTQ's rows of the same per-method tables (serving_vllm.INT_METHODS, serving_sglang.INT_METHODS).

vLLM and SGLang refuse at load unless ``model_config.dtype in quant_config.get_supported_act_dtypes()``
(``_get_quantization_config``); which config they build is ``_verify_quantization``'s override order: GPTQ-Marlin
(``GPTQMarlinConfig``, [torch.half, torch.bfloat16]) where ``is_gptq_marlin_compatible`` holds, else ``GPTQConfig``
([torch.half]); vLLM from 0.22.0 ``AutoGPTQConfig`` ([torch.half, torch.bfloat16]) for every GPTQ checkpoint."""

import json

import pytest

from helpers import one_line_error
from kvplan.cost import serving_sglang as sg
from kvplan.cost import serving_vllm as vl
from kvplan.cost.hardware import load_gpus
from kvplan.model.quant import Quantization

ROOT = __import__("pathlib").Path(__file__).parent.parent
CFG = "tests/data/configs/phi-4-gptq/config.json"  # kaitchup/Phi-4-AutoRound-GPTQ-4bit: torch_dtype bfloat16
GPTQ = ("plan", "--hf-config", str(ROOT / CFG), "--max-model-len", "8192")
Q = Quantization(method="gptq", bits=4, group_size=128, sym=True)  # its quantization_config
PHI4_KV_PER_TOKEN = 40 * 2 * 10 * 128  # Phi-4: 40 layers x (K, V) x 10 KV heads x head_dim 128, x bytes per value


@pytest.mark.parametrize("release, vendor, cc, q, name", [
    # gptq_marlin.py 0.9.1 GPTQMarlinConfig.is_gptq_marlin_compatible: ``if not current_platform.is_cuda(): return
    # False``; marlin_utils.py 0.9.1 - 0.13.0 query_marlin_supported_quant_types: ``device_capability < 80`` -> []
    ((0, 9, 1), "NVIDIA", 8.0, Q, "gptq_marlin"),
    ((0, 13, 0), "NVIDIA", 7.5, Q, "gptq"),
    # marlin_utils.py 0.14.0: ``device_capability < 75`` -> [] (a T4 gets GPTQ-Marlin)
    ((0, 14, 0), "NVIDIA", 7.5, Q, "gptq_marlin"),
    ((0, 14, 0), "NVIDIA", 7.0, Q, "gptq"),
    # gptq_marlin.py 0.14.0 - 0.21.0: ``if not (current_platform.is_cuda() or current_platform.is_cpu())``: not ROCm
    ((0, 21, 0), "AMD", None, Q, "gptq"),
    # the checkpoint half: TYPE_MAP holds (4, True) and (8, True) only; MARLIN_SUPPORTED_GROUP_SIZES -1/32/64/128
    ((0, 21, 0), "NVIDIA", 9.0, Quantization(method="gptq", bits=4, group_size=128, sym=False), "gptq"),
    ((0, 21, 0), "NVIDIA", 9.0, Quantization(method="gptq", bits=4, group_size=256), "gptq"),
    ((0, 21, 0), "NVIDIA", 9.0, Quantization(method="gptq", bits=8, group_size=-1, desc_act=True), "gptq_marlin"),
    # quantization/__init__.py 0.22.0 - 0.33.0 maps gptq and gptq_marlin to auto_gptq.py AutoGPTQConfig, whose
    # override_quantization_method returns "auto_gptq" for every quant_method gptq checkpoint, no platform check
    ((0, 22, 0), "AMD", None, Q, "auto_gptq"),
    ((0, 33, 0), "NVIDIA", 7.0, Quantization(method="gptq", bits=4, group_size=256, sym=False), "auto_gptq"),
])
def test_vllm_gptq_method_by_release(release, vendor, cc, q, name):
    k = vl.int_kernel(release, vendor, cc, q)
    assert k.name == name
    # get_supported_act_dtypes: gptq.py GPTQConfig [torch.half] (0.9.1 - 0.21.0); gptq_marlin.py GPTQMarlinConfig
    # and auto_gptq.py AutoGPTQConfig [torch.half, torch.bfloat16]
    assert k.dtypes == (("fp16",) if name == "gptq" else ("fp16", "bf16"))
    # get_min_capability 60 (gptq.py 0.9.1 - 0.21.0, auto_gptq.py 0.22.0 - 0.33.0): a V100 runs GPTQ
    assert k.min_capability == (6.0 if vendor == "NVIDIA" else None) and not k.refused


def test_vllm_log_ran_a_bfloat16_gptq_checkpoint_on_marlin():
    """docs/logs/vllm-code5773335890-phi-4-gptq-h100.log: vLLM 0.6.5 on an H100 loads the bfloat16 Phi-4 GPTQ
    checkpoint (no dtype given: torch_dtype bfloat16) with GPTQMarlinLinearMethod, which only GPTQ-Marlin, taking
    bfloat16, builds."""
    text = (ROOT / "docs/logs/vllm-code5773335890-phi-4-gptq-h100.log").read_text()
    assert "GPTQMarlinLinearMethod" in text and "engine: vllm==0.6.5" in text and "dtype=" not in text.split("\n")[4]
    assert json.loads((ROOT / CFG).read_text())["torch_dtype"] == "bfloat16"
    h100 = load_gpus()["H100-SXM"]
    k = vl.int_kernel((0, 6, 5), h100.vendor, h100.compute_capability, Q)
    assert k.name == "gptq_marlin" and "bf16" in k.dtypes


def test_vllm_bfloat16_gptq_checkpoint_on_rocm(cli, cli_json):
    """The bfloat16 Phi-4 GPTQ checkpoint on an MI300X: vLLM 0.21.0 builds GPTQConfig (float16 only: GPTQ-Marlin is
    CUDA only) and would refuse the default bfloat16 at load, so the plan serves float16 (--dtype float16 on the line,
    a note), 2-byte K/V; --weight-dtype bf16 is refused by name. 0.22.0 (AutoGPTQConfig) serves bfloat16 with no
    --dtype."""
    old = cli_json(*GPTQ, "--gpu", "MI300X", "--engine", "vllm==0.21.0")
    assert old["launch_command"].endswith("--dtype float16")
    assert old["inputs"]["weight_dtype"] == old["inputs"]["kv_dtype"] == "fp16"
    assert old["per_gpu"]["kv_bytes_per_token"] == PHI4_KV_PER_TOKEN * 2
    assert any("--dtype float16" in n and "gptq" in n for n in old["notes"])
    line = one_line_error(cli, *GPTQ, "--gpu", "MI300X", "--engine", "vllm==0.21.0", "--weight-dtype", "bf16")
    assert line.startswith("error: --weight-dtype: bf16:") and line.endswith("allowed: fp16")
    new = cli_json(*GPTQ, "--gpu", "MI300X", "--engine", "vllm==0.22.0")
    assert "--dtype" not in new["launch_command"] and new["inputs"]["weight_dtype"] == "bf16"
    # a V100 (7.0) is above GPTQConfig.get_min_capability 60: served (float16, its GPU having no bfloat16)
    assert cli_json(*GPTQ, "--gpu", "V100-32GB", "--engine", "vllm==0.21.0")["launch_command"].endswith(
        "--dtype float16")


@pytest.mark.parametrize("engine", ["vllm==0.21.0", "vllm", "sglang==0.5.12", "sglang"])
def test_gptq_refuses_float32(cli, engine):
    """No GPTQ method takes float32 activations (vLLM gptq.py [torch.half], gptq_marlin.py / auto_gptq.py
    [torch.half, torch.bfloat16]; SGLang gptq.py the same off Ascend, CPU and XPU): --weight-dtype fp32 is refused."""
    line = one_line_error(cli, *GPTQ, "--gpu", "H100-SXM", "--engine", engine, "--weight-dtype", "fp32")
    assert line.startswith("error: --weight-dtype: fp32:") and line.endswith("allowed: fp16, bf16")


# ---- SGLang -----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("release, vendor, cc, name, refused", [
    # gptq.py 0.4.8 - 0.5.12 GPTQMarlinConfig.is_gptq_marlin_compatible: ``if not _is_cuda: return False``;
    # marlin_utils.py query_marlin_supported_quant_types: ``device_capability < 80`` -> []
    ((0, 5, 12), "NVIDIA", 8.0, "gptq_marlin", False),
    ((0, 5, 23), "NVIDIA", 7.5, "gptq", False),
    ((0, 5, 12), "AMD", None, "gptq", False),
    # gptq/gptq.py 0.5.13: no _is_cuda check, the gfx capability passes, and configs/model_config.py
    # _verify_quantization refuses what is not in rocm_supported_quantization (no gptq_marlin from 0.5.1)
    ((0, 5, 13), "AMD", None, "gptq_marlin", True),
    ((0, 5, 19), "AMD", None, "gptq_marlin", True),
])
def test_sglang_gptq_method(release, vendor, cc, name, refused):
    k = sg.int_kernel(release, vendor, cc, Q)
    assert (k.name, k.dtypes, bool(k.refused)) == (name, ("fp16",) if name == "gptq" else ("fp16", "bf16"), refused)


def test_sglang_gptq_rocm_from_0_5_20():
    """0.5.20 - 0.5.23 rocm_supported_quantization holds no gptq at all (configs/model_config.py): a GPTQ checkpoint
    GPTQ-Marlin does not take is refused on ROCm too."""
    asym = Quantization(method="gptq", bits=4, group_size=128, sym=False)
    assert not sg.int_kernel((0, 5, 19), "AMD", None, asym).refused
    assert sg.int_kernel((0, 5, 20), "AMD", None, asym).refused


def test_sglang_gptq_on_rocm(cli, cli_json):
    """SGLang 0.5.12 on an MI300X builds GPTQConfig (float16 only): the bfloat16 checkpoint is served float16 with
    --dtype float16; 0.5.13+ refuse it (gptq_marlin is not a ROCm method), naming --gpu; an H100 takes bfloat16."""
    out = cli_json(*GPTQ, "--gpu", "MI300X", "--engine", "sglang==0.5.12")
    assert out["launch_command"].endswith("--dtype float16") and out["inputs"]["kv_dtype"] == "fp16"
    for engine in ("sglang==0.5.13", "sglang"):
        line = one_line_error(cli, *GPTQ, "--gpu", "MI300X", "--engine", engine)
        assert line.startswith("error: --gpu: MI300X:") and "ROCm" in line
    h100 = cli_json(*GPTQ, "--gpu", "H100-SXM", "--engine", "sglang")
    assert "--dtype" not in h100["launch_command"] and h100["inputs"]["kv_dtype"] == "bf16"
