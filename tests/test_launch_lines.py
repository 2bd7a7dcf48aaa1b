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


# ---- #6: --limit-mm-per-prompt as given; a text-only deployment builds no tower where vLLM skips it --------------

VL = ("plan", "-m", "qwen2.5-vl-7b", "--gpu", "L40S", "--max-model-len", "16384")


def test_limit_mm_per_prompt_printed_as_given(cli_json):
    for given in ('{"image": 0, "video": 0}', '{"video": 2}', '{"image": 2, "video": 0}'):
        plan = cli_json(*VL, "--limit-mm-per-prompt", given)
        assert f"--limit-mm-per-prompt '{given}'" in plan["launch_command"]


def test_text_only_builds_no_tower_where_vllm_skips_it(cli_json):
    """qwen2_5_vl.py (0.10.1+) builds no visual module when image and video are both limited to 0."""
    from kvplan.cost.vision import vision_params
    from kvplan.model.catalog import load_card

    tower = 2 * vision_params(load_card("qwen2.5-vl-7b"), hf=False).total  # bf16, TP 1
    full = cli_json(*VL)
    text = cli_json(*VL, "--limit-mm-per-prompt", '{"image": 0, "video": 0}')
    assert text["per_gpu"]["vision_bytes"] == 0 < full["per_gpu"]["vision_bytes"] == tower
    assert full["per_gpu"]["weights_bytes"] - text["per_gpu"]["weights_bytes"] >= tower
    assert text["max_concurrency"] > full["max_concurrency"]
    old = cli_json(*VL, "--engine", "vllm==0.10.0", "--limit-mm-per-prompt", '{"image": 0, "video": 0}')
    assert old["per_gpu"]["vision_bytes"] == tower  # 0.10.0 still builds it
    gemma = ("plan", "-m", "gemma-3-27b-it", "--gpu", "H100-SXM", "--max-model-len", "8192", "--limit-mm-per-prompt",
             '{"image": 0}')
    assert cli_json(*gemma)["per_gpu"]["vision_bytes"] == 0
    assert cli_json(*gemma, "--engine", "vllm==0.14")["per_gpu"]["vision_bytes"] > 0  # _mark_tower_model: 0.15+


@pytest.mark.parametrize("given", ['{"audio": 2}', '{"image": 0}', '{"image": 1, "video": -1}'])
def test_limit_mm_per_prompt_refused(cli, given):
    """A modality the model does not take; videos without images (vLLM would profile dummy videos)."""
    assert "--limit-mm-per-prompt" in one_line_error(cli, *VL, "--limit-mm-per-prompt", given)


# ---- #5 / #7: every vLLM flag that changes the plan is on the launch line -------------------------------------------

# flag -> (the plan's arguments, what the launch line then carries): each changes vLLM's pool or budget
_DENSE = ("-m", "llama-3.1-8b", "--gpu", "L40S", "--max-model-len", "8192")
_VL = ("-m", "qwen2.5-vl-7b", "--gpu", "H100-SXM", "--max-model-len", "8192")
_MOE = ("-m", "qwen3-30b-a3b", "--gpu", "H100-SXM", "--max-model-len", "8192")
VLLM_LAUNCH = {
    "--model": (_DENSE, "vllm serve meta-llama/Llama-3.1-8B "),
    "--max-model-len": (("-m", "llama-3-8b", "--gpu", "H100-SXM", "--max-model-len", "16384"),
                        "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 vllm serve"),
    "--tp": ((*_DENSE, "--tp", "2"), "--tensor-parallel-size 2"),
    "--pp": ((*_DENSE, "--pp", "2"), "--pipeline-parallel-size 2"),
    "--dp": ((*_DENSE, "--dp", "2"), "--data-parallel-size 2"),
    "--expert-parallel": ((*_MOE, "--tp", "2", "--expert-parallel"), "--enable-expert-parallel"),
    "--gpu-memory-utilization": ((*_DENSE, "--gpu-memory-utilization", "0.8"), "--gpu-memory-utilization 0.8"),
    "--kv-cache-memory": ((*_DENSE, "--kv-cache-memory", "10GiB"), "--kv-cache-memory-bytes 10737418240"),
    "--max-num-batched-tokens": ((*_DENSE, "--max-num-batched-tokens", "16384"), "--max-num-batched-tokens 16384"),
    "--max-num-seqs": ((*_DENSE, "--max-num-seqs", "1"), "--max-num-seqs 1"),
    "--block-size": ((*_DENSE, "--block-size", "32"), "--block-size 32"),
    "--kv-dtype": ((*_DENSE, "--kv-dtype", "fp8_e5m2"), "--kv-cache-dtype fp8_e5m2"),
    "--weight-dtype": ((*_DENSE, "--weight-dtype", "fp8"), "--quantization fp8"),
    "--cuda-graph-memory": ((*_DENSE, "--cuda-graph-memory", "0"), "--enforce-eager"),
    "--speculative-config": ((*_DENSE, "--speculative-config",
                              '{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4}'),
                             """--speculative-config '{"method": "ngram", "num_speculative_tokens": 3, """
                             """"prompt_lookup_max": 4}'"""),
    "--enable-lora": ((*_DENSE, "--enable-lora"), "--enable-lora"),
    "--max-loras": ((*_DENSE, "--enable-lora", "--max-loras", "3"), "--max-loras 3"),
    "--max-lora-rank": ((*_DENSE, "--enable-lora", "--max-lora-rank", "64"), "--max-lora-rank 64"),
    "--flashinfer-sampler": ((*_DENSE, "--flashinfer-sampler"), "VLLM_USE_FLASHINFER_SAMPLER=1 vllm serve"),
    "--pp-layer-partition": ((*_DENSE, "--pp", "2", "--pp-layer-partition", "12,20"),
                             "VLLM_PP_LAYER_PARTITION=12,20 vllm serve"),
    "--limit-mm-per-prompt": ((*_VL, "--limit-mm-per-prompt", '{"image": 2}'),
                              """--limit-mm-per-prompt '{"image": 2}'"""),
    "--mm-encoder-tp-mode": ((*_VL, "--tp", "2", "--mm-encoder-tp-mode", "data"), "--mm-encoder-tp-mode data"),
    "--cpu-offload-gb": ((*_DENSE, "--cpu-offload-gb", "2"), "--cpu-offload-gb 2"),
    "--enable-prefix-caching": ((*_DENSE, "--no-enable-prefix-caching"), "--no-enable-prefix-caching"),
}
# the plan's options that are no vLLM flag, and why
NOT_ENGINE_FLAGS = {
    "--hf-config": "the model, as --model (the launch line names its repository)",
    "--gguf": "a llama.cpp model file",
    "--gpu": "the hardware", "--gpu-file": "the hardware", "--gpu-memory": "the hardware", "--platform": "the hardware",
    "--engine": "the engine and release that run the line",
    "--activation-memory": "a measured figure of the machine",
    "--non-torch-memory": "a measured figure of the machine",
    "--context-memory": "a measured figure of the machine",
    "--cold-compile": "a boot whose torch.compile cache is empty (the note says so), not a flag",
    "--shared-prefix-len": "the workload: prefix caching is on by default in V1",
    "--concurrency": "the workload", "--prompt-len": "the workload", "--acceptance-rate": "the workload",
    "--gpus": "the search", "--max-gpus": "the search", "--sort": "the search", "--ttft-ms": "the search",
    "--tpot-ms": "the search",
    "--json": "output", "--from-log": "log comparison", "--calibrate": "log comparison",
}
# other engines' flags: vLLM refuses them by name (one line, exit 2)
OTHER_ENGINE_FLAGS = {
    "--mem-fraction-static": "0.8", "-c": "8192", "-np": "2", "--kv-unified": None, "-ctk": "q8_0", "-ctv": "q8_0",
    "-fa": "on", "-ngl": "10", "--swa-full": None, "-ub": "256", "--llamacpp-rules": "2025-12",
    "--gguf-quant": "Q4_K_M", "-ts": "1,1", "-ot": "exps=CPU", "--cpu-moe": None, "--n-cpu-moe": "2",
    "--lora": "x.gguf", "--lora-rank": "8", "--lora-targets": "attn_q",
    "--kv-cache-free-gpu-memory-fraction": "0.8", "--max-num-tokens": "4096", "--max-batch-size": "8",
    "--cuda-memory-fraction": "0.8", "--max-batch-prefill-tokens": "4096", "--speculative-algorithm": "EAGLE",
    "--speculative-draft-model-path": "x", "--speculative-num-steps": "2", "--speculative-eagle-topk": "2",
    "--speculative-num-draft-tokens": "4", "--swa-full-tokens-ratio": "0.5", "--disable-hybrid-swa-memory": None,
    "--max-running-requests": "8", "--disable-radix-cache": None, "--max-mamba-cache-size": "8",
    "--mamba-radix-cache-strategy": "auto",
}


def _plan_options() -> set[str]:
    import typer

    from kvplan.cli.app import app

    command = typer.main.get_command(app).commands["plan"]
    return {p.opts[0] for p in command.params}


def test_every_plan_option_is_classified():
    """A new plan flag is placed: on vLLM's launch line, no engine flag (why), or another engine's."""
    classified = set(VLLM_LAUNCH) | set(NOT_ENGINE_FLAGS) | set(OTHER_ENGINE_FLAGS)
    assert _plan_options() == classified


@pytest.mark.parametrize("flag", sorted(VLLM_LAUNCH))
def test_vllm_plan_flag_is_on_the_launch_line(cli_json, flag):
    args, fragment = VLLM_LAUNCH[flag]
    plan = cli_json("plan", *args)
    assert fragment in plan["launch_command"], (flag, plan["launch_command"])


@pytest.mark.parametrize("flag", sorted(OTHER_ENGINE_FLAGS))
def test_other_engines_flags_refused_by_vllm(cli, flag):
    value = OTHER_ENGINE_FLAGS[flag]
    one_line_error(cli, "plan", *_DENSE, flag, *([value] if value is not None else []))


def test_cold_compile_with_enforce_eager_refused(cli):
    line = one_line_error(cli, "plan", *_DENSE, "--cuda-graph-memory", "0", "--cold-compile")
    assert line.startswith("error: --cold-compile:")


def test_sglang_long_context_env(cli_json):
    plan = cli_json("plan", "-m", "llama-3-8b", "--gpu", "H100-SXM", "--max-model-len", "16384", "--engine", "sglang")
    env = "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 "
    assert plan["launch_command"].startswith(env + "python -m sglang.launch_server")
    short = cli_json("plan", "-m", "llama-3-8b", "--gpu", "H100-SXM", "--max-model-len", "8192", "--engine", "sglang")
    assert short["launch_command"].startswith("python -m sglang.launch_server")


# ---- #5: --enforce-eager and the scheduler limits only where they move the plan ----------------------------------

def test_enforce_eager_where_the_release_charges_graphs(cli_json):
    """A 0 for the graphs is --enforce-eager where the release charges them by default (0.20+ but the graphless
    0.25 - 0.28 dense runner); before 0.20 they are captured after the pool is sized, so a 0 is the default."""
    for release, eager in (("vllm", True), ("vllm==0.20", True), ("vllm==0.27", False), ("vllm==0.10", False)):
        base = cli_json(*LLAMA, "--engine", release)
        zero = cli_json(*LLAMA, "--engine", release, "--cuda-graph-memory", "0")
        assert ("--enforce-eager" in zero["launch_command"]) is eager, (release, zero["launch_command"])
        assert (zero["max_concurrency"] > base["max_concurrency"]) is eager, release
        assert "--enforce-eager" not in base["launch_command"]


def test_cold_compile_with_a_default_zero_for_graphs_plans(cli_json):
    """vLLM 0.27 runs a dense model without graphs: a 0 there is no --enforce-eager, so --cold-compile still plans."""
    plan = cli_json(*LLAMA, "--engine", "vllm==0.27", "--cuda-graph-memory", "0", "--cold-compile")
    assert "--enforce-eager" not in plan["launch_command"]


def test_scheduler_limits_printed_where_they_differ_from_the_release_default(cli_json):
    v0 = (*LLAMA, "--engine", "vllm==0.6.4")  # V0's fixed default: 256 sequences
    assert "--max-num-seqs 4" in cli_json(*v0, "--max-num-seqs", "4")["launch_command"]
    assert "--max-num-seqs" not in cli_json(*v0, "--max-num-seqs", "256")["launch_command"]
    plan = cli_json(*LLAMA)
    given = cli_json(*LLAMA, "--max-num-batched-tokens", str(plan["inputs"]["max_num_batched_tokens"]))
    assert "--max-num-batched-tokens" not in given["launch_command"]
    assert given["max_concurrency"] == plan["max_concurrency"]


# ---- #8: fp8 weights on TGI and TensorRT-LLM -------------------------------------------------------------------

def test_tgi_fp8_in_tgi_spelling(cli_json):
    """launcher/src/main.rs: --quantize fp8 (a bf16 checkpoint quantized at load); --kv-cache-dtype fp8_e4m3fn."""
    bf16 = cli_json(*LLAMA, "--engine", "tgi")
    fp8 = cli_json(*LLAMA, "--engine", "tgi", "--weight-dtype", "fp8", "--kv-dtype", "fp8_e4m3")
    assert fp8["launch_command"].endswith("--kv-cache-dtype fp8_e4m3fn --quantize fp8")
    assert "--quantize" not in bf16["launch_command"]
    assert fp8["per_gpu"]["weights_bytes"] < bf16["per_gpu"]["weights_bytes"]
    assert any(n.startswith("--quantize fp8 (online, TGI)") for n in fp8["notes"])
    assert not any("--quantization" in n for n in fp8["notes"])


def test_trtllm_refuses_online_fp8(cli, cli_json):
    """trtllm-serve has no flag that quantizes a bf16 checkpoint: refused, the checkpoint's dtype still plans."""
    line = one_line_error(cli, *LLAMA, "--engine", "trtllm", "--weight-dtype", "fp8")
    assert line.startswith("error: --weight-dtype:") and "allowed here: bf16" in line
    assert "trtllm-serve" in cli_json(*LLAMA, "--engine", "trtllm", "--weight-dtype", "bf16")["launch_command"]


# ---- #10: SGLang on a model without attention layers --------------------------------------------------------------

def test_sglang_refuses_a_pure_state_space_model(cli, cli_json):
    """No K/V pool and a running limit of state slots // the mamba ratio (resolve_max_num_reqs): refused, not planned
    as 43 concurrent requests that run 0 at once."""
    args = ("plan", "-m", "mamba-codestral-7b", "--gpu", "L40S", "--max-model-len", "32768")
    line = one_line_error(cli, *args, "--engine", "sglang")
    assert line.startswith("error: --engine sglang:") and "no attention layers" in line
    assert cli_json(*args)["max_concurrency"] > 0  # vLLM plans it
    hybrid = cli_json("plan", "-m", "qwen3-next-80b-a3b", "--gpu", "H200", "--tp", "2", "--max-model-len", "8192",
                      "--engine", "sglang")
    assert hybrid["running_limit"] > 0  # a hybrid with attention layers still plans


@pytest.mark.parametrize(("engine", "method", "ok"), [
    ("vllm==0.9.2", "mtp", False), ("vllm==0.9.2", "deepseek_mtp", True), ("vllm==0.10.1", "qwen3_next_mtp", False),
    ("vllm==0.10.2", "qwen3_next_mtp", True), ("vllm==0.10.2", "mtp", False), ("vllm==0.11", "mtp", True),
    ("vllm", "deepseek_mtp", True), ("vllm", "mtp", True)])
def test_mtp_spelling_by_release(cli, engine, method, ok):
    """vLLM config/speculative.py SpeculativeMethod, read in every wheel: 0.9.1-0.10.1 take only "deepseek_mtp", 0.10.2
    adds "qwen3_next_mtp" and "ernie_mtp", "mtp" is first in 0.11 (kvplan refused "deepseek_mtp" and printed "mtp"
    for 0.9.2, which that release rejects; QA E 5). The launch line carries the spelling given."""
    config = f'{{"method": "{method}", "num_speculative_tokens": 1}}'
    code, out, err = cli("plan", "-m", "deepseek-v3-fp8", "--gpu", "H200", "--tp", "8", "--max-model-len", "8192",
                         "--engine", engine, "--speculative-config", config)
    if ok:
        assert code == 0, err
        assert f'"method": "{method}"' in out
    else:
        assert code == 2 and err.startswith(f"error: --speculative-config: method '{method}' is first in vLLM ")
