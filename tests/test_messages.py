"""Messages that name what is wrong (issue 21, item 5): the flag a bad figure came from, weights that cannot fit,
launch lines a user can run or must complete."""

from __future__ import annotations

import json

import pytest

from kvplan.errors import KvplanError, WeightsDoNotFit
from kvplan.planning.capacity import plan


@pytest.mark.parametrize("value", ["80", 80, "1000", "255MiB"])
def test_a_gpu_memory_without_a_unit_is_blamed_on_gpu_memory(cli, value):
    code, _, err = cli("plan", "-m", "llama-3-8b", "--gpu", "H100-SXM", "--max-model-len", "8192",
                       "--gpu-memory", str(value))
    assert code == 2 and err.startswith("error: --gpu-memory: ") and "utilization" not in err and "GiB" in err


def test_a_small_real_gpu_memory_still_plans():
    assert plan("gemma-3-1b", gpu="L4", max_model_len=2048, gpu_memory="20GiB").inputs.gpu_memory_bytes == 20 * 2**30


def test_bf16_deepseek_v3_on_8_h200_says_the_weights_do_not_fit_and_names_the_fp8_card(cli):
    with pytest.raises(WeightsDoNotFit) as exc:
        plan("deepseek-v3", gpu="H200", tp=8, max_model_len=8192)
    msg = str(exc.value)
    assert msg.startswith("--gpu: the weights alone do not fit: ") and "deepseek-v3-fp8" in msg
    assert "raise --gpu-memory-utilization" not in msg
    assert plan("deepseek-v3-fp8", gpu="H200", tp=8, max_model_len=8192).fits  # the card it names does fit
    code, _, err = cli("plan", "-m", "deepseek-v3", "--gpu", "H200", "--tp", "8", "--max-model-len", "8192")
    assert code == 2 and "-m deepseek-v3-fp8" in err and len(err.strip().splitlines()) == 1


def test_weights_that_fit_but_leave_no_pool_still_name_the_budget_flag():
    # 70B in bf16 on 2 H100s: 65.7 GiB of weights per GPU fit in 79.2 GiB, but not within 0.8 of it
    with pytest.raises(KvplanError, match="^--gpu-memory-utilization: ") as exc:
        plan("llama-3.1-70b", gpu="H100-SXM", tp=2, max_model_len=8192, gpu_memory_utilization=0.8)
    assert not isinstance(exc.value, WeightsDoNotFit)


def test_no_quantized_card_no_suggestion():
    with pytest.raises(WeightsDoNotFit) as exc:
        plan("llama-3.1-70b", gpu="L4", max_model_len=8192)
    assert "bundled quantized" not in str(exc.value)


def test_hf_config_without_a_hub_id_launches_with_a_placeholder(cli, tmp_path):
    configs = json.loads(open("tests/data/hf_configs.json").read())["configs"]
    config = dict(configs["Qwen/Qwen3-8B"]["config"], _name_or_path="/raid/someone/qwen3")
    path = tmp_path / "imported-model" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(config))
    for engine in ("vllm", "sglang"):
        code, out, err = cli("plan", "--hf-config", str(path), "--gpu", "H100-SXM", "--max-model-len", "8192",
                             "--engine", engine, "--json")
        d = json.loads(out)
        assert code == 0 and " <path-or-repo-of-this-config> " in d["launch_command"]
        assert "imported-model" not in d["launch_command"]
        assert any("<path-or-repo-of-this-config>" in n for n in d["notes"])
    config["_name_or_path"] = "Qwen/Qwen3-8B"  # a Hub id is what the engine loads
    path.write_text(json.dumps(config))
    code, out, _ = cli("plan", "--hf-config", str(path), "--gpu", "H100-SXM", "--max-model-len", "8192", "--json")
    assert json.loads(out)["launch_command"].startswith("vllm serve Qwen/Qwen3-8B ")
