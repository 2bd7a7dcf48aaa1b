"""The model dtype an AWQ checkpoint is served in, per engine, release and GPU: a launch line never asks for a dtype
the release refuses, a defaulted dtype the release would refuse becomes the one it takes, and the plan sizes
activations and K/V in the dtype the engine runs.

Each rule is pinned to the engine source it was read in (the release named beside each case). vLLM and SGLang
refuse at load: ``VllmConfig._get_quantization_config`` (vLLM config.py 0.9.1, config/vllm.py 0.14.0 - 0.33.0) and
SGLang ``model_loader/loader.py _get_quantization_config`` (0.4.8 - 0.5.23) raise unless ``model_config.dtype`` is in
the quantization config's ``get_supported_act_dtypes()``, and below its ``get_min_capability()``. Which config they
build is ``ModelConfig._verify_quantization``'s override order (AWQ-Marlin where ``is_awq_marlin_compatible``)."""

import json

import pytest

from helpers import one_line_error
from kvplan.cost import serving_sglang as sg
from kvplan.cost import serving_vllm as vl
from kvplan.cost.hardware import load_gpus
from kvplan.model.quant import Quantization

AWQ = ("plan", "-m", "qwen3-8b-awq", "--max-model-len", "8192")  # Qwen/Qwen3-8B-AWQ: torch_dtype float16
Q = Quantization(method="awq", bits=4, group_size=128)  # its quantization_config: 4-bit, group 128, zero points
BF16_KV_PER_TOKEN = 36 * 2 * 8 * 128 * 2  # Qwen3-8B: 36 layers x (K, V) x 8 KV heads x head_dim 128 x 2 B
DATA = __import__("pathlib").Path(__file__).parent / "data" / "configs"


def _bf16_awq_config(tmp_path) -> str:
    """Qwen2.5-7B-Instruct-AWQ's config.json (tests/data/configs, torch_dtype float16) with torch_dtype bfloat16, as
    AutoAWQ writes for a bfloat16 base model (the case of vllm issues 1592 and 1941): the default dtype case."""
    cfg = json.loads((DATA / "qwen2.5-7b-instruct-awq.json").read_text())
    cfg["torch_dtype"] = "bfloat16"
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    return str(path)


# ---- vLLM: the method picked, by release and GPU ------------------------------------------------------------------

@pytest.mark.parametrize("release, vendor, cc, q, name", [
    # before vllm PR 6612 (merged 2024-07-21, first in 0.5.3, "added bfloat16 support") there is AWQConfig only
    ((0, 5, 2), "NVIDIA", 9.0, Q, "awq"),
    # awq_marlin.py 0.9.1 AWQMarlinConfig.is_awq_marlin_compatible: current_platform.is_cuda() and
    # check_marlin_supported; marlin_utils.py 0.9.1 - 0.13.0 query_marlin_supported_quant_types: capability < 80 -> []
    ((0, 9, 1), "NVIDIA", 8.0, Q, "awq_marlin"),
    ((0, 13, 0), "NVIDIA", 7.5, Q, "awq"),
    # marlin_utils.py 0.14.0: device_capability < 75 -> [] (T4 gets AWQ-Marlin)
    ((0, 14, 0), "NVIDIA", 7.5, Q, "awq_marlin"),
    # ROCm: is_cuda() through 0.18.1, is_cuda_alike() from 0.19.0 (no capability check on ROCm from 0.19.0)
    ((0, 18, 1), "AMD", None, Q, "awq"),
    ((0, 19, 0), "AMD", None, Q, "awq_marlin"),
    ((0, 23, 0), "AMD", None, Q, "awq_marlin"),
    # the checkpoint half: MARLIN_SUPPORTED_GROUP_SIZES [-1, 32, 64, 128]; has_zp False -> uint4 not supported
    ((0, 23, 0), "NVIDIA", 9.0, Quantization(method="awq", bits=4, group_size=256), "awq"),
    ((0, 23, 0), "NVIDIA", 9.0, Quantization(method="awq", bits=4, group_size=128, sym=True), "awq"),
    # auto_awq.py 0.24.0 - 0.33.0: every AWQ checkpoint is AutoAWQConfig on every platform but the CPU
    ((0, 24, 0), "AMD", None, Quantization(method="awq", bits=4, group_size=256), "auto_awq"),
    ((0, 33, 0), "NVIDIA", 7.0, Q, "auto_awq"),
])
def test_vllm_awq_method_by_release(release, vendor, cc, q, name):
    k = vl.int_kernel(release, vendor, cc, q)
    assert k.name == name
    # get_supported_act_dtypes: awq.py AWQConfig [torch.half] (0.9.1 - 0.23.0); awq_marlin.py AWQMarlinConfig and
    # auto_awq.py AutoAWQConfig [torch.half, torch.bfloat16]
    assert k.dtypes == (("fp16",) if name == "awq" else ("fp16", "bf16"))
    # get_min_capability 75 (awq.py, auto_awq.py; AWQMarlinConfig's 80/75 is met wherever it is picked); ROCm
    # reports gfx versions (9.4 on MI300X), above it
    assert k.min_capability == (7.5 if vendor == "NVIDIA" else None)


def test_vllm_awq_logs_name_the_method():
    """Two public AWQ start-ups in docs/logs print the method vLLM found for an AutoAWQ gemm checkpoint (group 128,
    zero points): 0.16.0 on 2x L40S 'The model is convertible to awq_marlin during runtime', 0.22.1 on an RTX 3090
    'Detected that the model can run with awq_marlin' (that run forced --quantization awq); both logged
    dtype=torch.float16 / dtype=float16 with no --dtype, the configs' torch_dtype (dtype auto)."""
    gpus = load_gpus()
    logs = DATA.parent.parent.parent / "docs" / "logs"
    for log, release, needle in (
            ("vllm-code10876549642-llama-3-70b-awq-l40s.log", (0, 16, 0), "convertible to awq_marlin"),
            ("vllm-code65863227652-qwen2.5-7b-awq-rtx3090.log", (0, 22, 1), "can run with awq_marlin")):
        text = (logs / log).read_text()
        header = dict(line[2:].split(": ", 1) for line in text.splitlines() if line.startswith("# ") and ": " in line)
        gpu = gpus[header["gpu"].split()[0]]
        assert needle in " ".join(text.split()) and f"{release[1]}.{release[2]}" in text
        cfg = json.loads((DATA.parent.parent.parent / header["model"]).read_text())
        assert cfg["torch_dtype"] == "float16" and "float16" in text
        assert vl.int_kernel(release, gpu.vendor, gpu.compute_capability, Q).name == "awq_marlin"


# ---- vLLM: what the plan and its launch line do -------------------------------------------------------------------

def test_vllm_bf16_refused_where_the_release_takes_float16_only(cli, cli_json):
    """--weight-dtype bf16 of an AWQ checkpoint on an MI300X: vLLM 0.18.1 builds AWQConfig (float16 only) and would
    raise at load, so the plan is refused, naming --weight-dtype and what is allowed; 0.19.0 builds AWQ-Marlin and
    serves bfloat16 (--dtype bfloat16), K/V in bfloat16 under --kv-cache-dtype auto."""
    for release in ("0.9.1", "0.13.0", "0.18.1"):
        line = one_line_error(cli, *AWQ, "--gpu", "MI300X", "--engine", f"vllm=={release}", "--weight-dtype", "bf16")
        assert line.startswith("error: --weight-dtype: bf16:") and line.endswith("allowed: fp16")
    for release in ("0.19.0", "0.23.0", "0.33.0"):
        out = cli_json(*AWQ, "--gpu", "MI300X", "--engine", f"vllm=={release}", "--weight-dtype", "bf16")
        assert out["launch_command"].endswith("--dtype bfloat16")
        assert out["inputs"]["weight_dtype"] == out["inputs"]["kv_dtype"] == "bf16"


def test_vllm_and_sglang_awq_refuse_float32(cli):
    """No AWQ method takes float32 activations (awq.py [torch.half]; awq_marlin.py / auto_awq.py [torch.half,
    torch.bfloat16]; SGLang awq.py the same): --weight-dtype fp32 is refused in every release, with what is allowed."""
    for engine, allowed in (("vllm==0.18.1", "fp16, bf16"), ("vllm", "fp16, bf16"), ("sglang", "fp16, bf16"),
                            ("sglang==0.4.10", "fp16, bf16")):
        line = one_line_error(cli, *AWQ, "--gpu", "H100-SXM", "--engine", engine, "--weight-dtype", "fp32")
        assert line.startswith("error: --weight-dtype: fp32:") and line.endswith(f"allowed: {allowed}")


def test_awq_refused_below_its_minimum_capability(cli, cli_json):
    """A V100 (compute capability 7.0) is below AWQConfig.get_min_capability 75 (vLLM awq.py 0.9.1 - 0.23.0,
    auto_awq.py 0.24.0 - 0.33.0; SGLang awq.py 0.4.8 - 0.5.23): refused, naming --gpu; a T4 (7.5) plans."""
    for engine in ("vllm==0.13.0", "vllm", "sglang"):
        line = one_line_error(cli, *AWQ, "--gpu", "V100-32GB", "--engine", engine)
        assert line.startswith("error: --gpu: V100-32GB") and "7.5" in line
        assert cli_json(*AWQ, "--gpu", "T4", "--engine", engine)["inputs"]["weight_dtype"] == "fp16"


def test_vllm_default_bf16_checkpoint_served_float16(cli, cli_json, tmp_path):
    """An AWQ checkpoint whose torch_dtype is bfloat16 with no --weight-dtype: dtype auto is bfloat16 (vLLM
    config/model.py _resolve_auto_dtype: the config's dtype where the platform supports it, no quantization rule,
    0.9.1 - 0.33.0), which vLLM 0.18.1 refuses on an MI300X (AWQConfig, float16 only): the plan serves float16 and
    says so, its launch line setting --dtype float16; 0.19.0 (AWQ-Marlin on ROCm) serves the checkpoint's bfloat16
    with no --dtype."""
    cfg = _bf16_awq_config(tmp_path)
    old = cli_json("plan", "--hf-config", cfg, "--max-model-len", "8192", "--gpu", "MI300X", "--engine",
                   "vllm==0.18.1")
    assert old["launch_command"].endswith("--dtype float16")
    assert old["inputs"]["weight_dtype"] == old["inputs"]["kv_dtype"] == "fp16"
    assert any("--dtype float16" in n and "awq" in n for n in old["notes"])
    new = cli_json("plan", "--hf-config", cfg, "--max-model-len", "8192", "--gpu", "MI300X", "--engine",
                   "vllm==0.19.0")
    assert "--dtype" not in new["launch_command"] and new["inputs"]["weight_dtype"] == "bf16"
    # the same bytes either way: 2-byte activations and K/V
    assert old["per_gpu"]["kv_bytes_per_token"] == new["per_gpu"]["kv_bytes_per_token"]
    # a 16-bit --kv-dtype is the model's (--kv-cache-dtype auto): bf16 asks for the refused bfloat16 model; fp8 K/V
    # leave the model dtype to the default, float16 here
    args = ("plan", "--hf-config", cfg, "--max-model-len", "8192", "--gpu", "MI300X", "--engine", "vllm==0.18.1")
    line = one_line_error(cli, *args, "--kv-dtype", "bf16")
    assert line.startswith("error: --kv-dtype: bf16:") and "allowed: fp16" in line
    fp8 = cli_json(*args, "--kv-dtype", "fp8_e4m3")
    assert fp8["launch_command"].endswith("--kv-cache-dtype fp8_e4m3 --dtype float16")


def test_search_skips_the_gpus_a_release_refuses(cli_json):
    """The layout search skips a GPU whose AWQ method refuses the dtype asked (vLLM 0.18.1 on ROCm), not the run."""
    out = cli_json(*AWQ, "--concurrency", "4", "--gpus", "H100-SXM,MI300X", "--engine", "vllm==0.18.1",
                   "--weight-dtype", "bf16")
    assert [o["gpu"] for o in out["options"]] == ["H100-SXM"]


# ---- SGLang -----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("vendor, cc, q, name", [
    # awq.py (0.4.10 - 0.5.10; awq/awq.py 0.5.11 - 0.5.23) AWQMarlinConfig.is_awq_marlin_compatible: ``if not
    # _is_cuda: return False``; marlin_utils.py query_marlin_supported_quant_types: device_capability < 80 -> []
    ("NVIDIA", 8.0, Q, "awq_marlin"),
    ("NVIDIA", 7.5, Q, "awq"),
    ("AMD", None, Q, "awq"),
    ("NVIDIA", 9.0, Quantization(method="awq", bits=4, group_size=128, sym=True), "awq"),
])
def test_sglang_awq_method(vendor, cc, q, name):
    k = sg.int_kernel((0, 5, 23), vendor, cc, q)
    # AWQConfig.get_supported_act_dtypes [torch.float16] off Ascend; AWQMarlinConfig [torch.half, torch.bfloat16]
    assert (k.name, k.dtypes) == (name, ("fp16",) if name == "awq" else ("fp16", "bf16"))


def test_sglang_bf16_on_rocm(cli, cli_json, tmp_path):
    """SGLang builds AWQConfig (float16 only) on ROCm in every release read: --weight-dtype bf16 refused; a bfloat16
    checkpoint by default served float16 with --dtype float16; on an H100 (AWQ-Marlin) bfloat16 as asked."""
    line = one_line_error(cli, *AWQ, "--gpu", "MI300X", "--engine", "sglang", "--weight-dtype", "bf16")
    assert line.startswith("error: --weight-dtype: bf16:") and line.endswith("allowed: fp16")
    cfg = _bf16_awq_config(tmp_path)
    out = cli_json("plan", "--hf-config", cfg, "--max-model-len", "8192", "--gpu", "MI300X", "--engine", "sglang")
    assert out["launch_command"].endswith("--dtype float16") and out["inputs"]["kv_dtype"] == "fp16"
    h100 = cli_json(*AWQ, "--gpu", "H100-SXM", "--engine", "sglang", "--weight-dtype", "bf16")
    assert h100["launch_command"].endswith("--dtype bfloat16") and h100["inputs"]["kv_dtype"] == "bf16"


# ---- TGI ----------------------------------------------------------------------------------------------------------

def test_tgi_awq_default_float16_and_rocm_refused(cli, cli_json, tmp_path):
    """TGI db931fcf models/__init__.py get_model: with no --dtype an AWQ/GPTQ checkpoint is served in float16
    whatever its torch_dtype ("These quantizers only work with float16 params"), K/V too (flash_causal_lm.py
    kv_cache_dtype = dtype); no --dtype is printed for it. On ROCm the AWQ kernel raises (layers/gptq/__init__.py
    GPTQWeight.get_linear), GPTQ-Marlin being CUDA only: refused."""
    cfg = _bf16_awq_config(tmp_path)
    out = cli_json("plan", "--hf-config", cfg, "--max-model-len", "8192", "--gpu", "H100-SXM", "--engine", "tgi")
    assert out["inputs"]["weight_dtype"] == out["inputs"]["kv_dtype"] == "fp16"
    assert "--dtype" not in out["launch_command"]
    bf16 = cli_json(*AWQ, "--gpu", "H100-SXM", "--engine", "tgi", "--weight-dtype", "bf16")
    assert bf16["launch_command"].endswith("--dtype bfloat16")  # GPTQ-Marlin takes bfloat16 scales
    line = one_line_error(cli, *AWQ, "--gpu", "MI300X", "--engine", "tgi")
    assert line.startswith("error: --engine tgi:") and "ROCm" in line


# ---- K/V under --kv-cache-dtype auto follow --weight-dtype ----------------------------------------------------------

@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_kv_auto_follows_weight_dtype(cli_json, engine):
    """--kv-cache-dtype auto is the model dtype (vLLM 0.11.0 gpu_model_runner.py GPUModelRunner.__init__, 0.33.0
    utils/torch_utils.py kv_cache_dtype_str_to_dtype; SGLang 0.5.10 model_runner.py configure_kv_cache_dtype):
    --weight-dtype fp32 holds 4-byte K/V, twice Qwen3-8B's 2-byte 147,456 B per token."""
    out = cli_json("plan", "-m", "qwen3-8b", "--max-model-len", "8192", "--gpu", "H100-SXM", "--engine", engine,
                   "--weight-dtype", "fp32")
    assert out["inputs"]["kv_dtype"] == "fp32"
    assert out["per_gpu"]["kv_bytes_per_token"] == 2 * BF16_KV_PER_TOKEN
    est = cli_json("estimate", "-m", "qwen3-8b", "--seq-len", "8192", "--engine", engine, "--weight-dtype", "fp32")
    assert (est["kv_cache"]["dtype"], est["kv_cache"]["bytes_per_token"]) == ("fp32", 2 * BF16_KV_PER_TOKEN)
    given = cli_json("estimate", "-m", "qwen3-8b", "--seq-len", "8192", "--engine", engine, "--weight-dtype", "fp32",
                     "--kv-dtype", "fp8_e4m3")  # a K/V dtype given stands
    assert given["kv_cache"]["dtype"] == "fp8_e4m3"
