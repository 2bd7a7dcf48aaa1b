"""Launch flags by engine release and GPU (QA report G, findings 3, 4, 6, 8, 9, 10, 10b): what a release's parser
lacks is refused with one line, and a launch line kvplan prints is one the engine takes."""

import pytest

from helpers import one_line_error

LLAMA = ("plan", "-m", "llama-3.1-8b", "--gpu", "H100-SXM", "--max-model-len", "8192")
VL = ("plan", "-m", "qwen2.5-vl-7b", "--gpu", "H100-SXM", "--tp", "2", "--max-model-len", "8192")


# ---- 3 + 10: --kv-cache-memory-bytes and --mm-encoder-tp-mode are first in vLLM 0.10.2 ------------------------------
# (engine/arg_utils.py: absent from 0.9.1, 0.9.2, 0.10.0 and 0.10.1.1; cache_group "--kv-cache-memory-bytes" and
# "--mm-encoder-tp-mode" in 0.10.2)

@pytest.mark.parametrize("engine", ["vllm==0.9.1", "vllm==0.9.2", "vllm==0.10", "vllm==0.10.1"])
@pytest.mark.parametrize("args, flag", [((*LLAMA, "--kv-cache-memory", "20GiB"), "--kv-cache-memory"),
                                        ((*VL, "--mm-encoder-tp-mode", "data"), "--mm-encoder-tp-mode"),
                                        ((*VL, "--mm-encoder-tp-mode", "weights"), "--mm-encoder-tp-mode")])
def test_flags_first_in_0_10_2_refused_before(cli, engine, args, flag):
    line = one_line_error(cli, *args, "--engine", engine)
    assert line.startswith(f"error: {flag}:") and "0.10.2" in line


@pytest.mark.parametrize("engine", ["vllm==0.6.4", "vllm==0.7", "vllm==0.2"])
def test_kv_cache_memory_refused_on_v0(cli, engine):
    line = one_line_error(cli, *LLAMA, "--kv-cache-memory", "20GiB", "--engine", engine)
    assert line.startswith("error: --kv-cache-memory:") and "0.10.2" in line


@pytest.mark.parametrize("engine", ["vllm==0.10.2", "vllm==0.11", "vllm"])
def test_flags_first_in_0_10_2_printed_from_it(cli_json, engine):
    pool = cli_json(*LLAMA, "--kv-cache-memory", "20GiB", "--engine", engine)
    assert "--kv-cache-memory-bytes 21474836480" in pool["launch_command"]
    mm = cli_json(*VL, "--mm-encoder-tp-mode", "data", "--engine", engine)
    assert "--mm-encoder-tp-mode data" in mm["launch_command"]


def test_band_split_keeps_the_rules(cli_json):
    """0.10.1 and 0.10.2 stay one range of rules: without the gated flags their plans are the same."""
    a = cli_json(*LLAMA, "--engine", "vllm==0.10.1")
    b = cli_json(*LLAMA, "--engine", "vllm==0.10.2")
    assert a["inputs"]["engine_rules"] == b["inputs"]["engine_rules"]
    for key in ("per_gpu", "kv_cache", "max_concurrency", "launch_command"):
        assert a[key] == b[key]


# ---- 4: --from-log's pooled what-if prints no --kv-cache-memory-bytes on a release without it -----------------------

POOLED_OLD = ["vllm-issue10517-llama-3.1-8b-20k.log",  # vLLM 0.6.4
              "vllm-dennislee22-gpt-oss-120b-a100-tp4-ray.log"]  # vLLM 0.10.1


@pytest.mark.parametrize("log", POOLED_OLD)
def test_pooled_what_if_has_no_launch_line_before_0_10_2(cli_json, log):
    r = cli_json("plan", "--from-log", f"docs/logs/{log}")
    assert r["pooled"] is not None and r["pooled"]["launch_command"] is None
    assert r["pooled"]["inputs"]["kv_cache_memory_bytes"] == r["logged_pool_bytes"]
    assert any("--kv-cache-memory-bytes" in n and "0.10.2" in n for n in r["pooled"]["notes"])
    assert "--kv-cache-memory-bytes" not in r["plan"]["launch_command"]  # the flags-alone plan keeps its line


def test_pooled_launch_line_from_0_10_2(cli_json):
    r = cli_json("plan", "--from-log", "docs/logs/vllm-code39689115050-qwen3-30b-a3b-2507-fp8-l40s-tp2.log")
    assert r["engine"] == "vllm==0.10.2"
    assert f"--kv-cache-memory-bytes {r['logged_pool_bytes']}" in r["pooled"]["launch_command"]


def test_every_bundled_pooled_line_is_taken_by_its_release():
    """Over every bundled vLLM log: a pooled launch line carries --kv-cache-memory-bytes only from 0.10.2."""
    from pathlib import Path

    from kvplan.cost.runtimes.base import parse_release
    from kvplan.planning.capacity.fromlog import from_log

    seen = {True: 0, False: 0}
    for path in sorted(Path("docs/logs").glob("vllm-*.log")):
        r = from_log(path)
        if r.pooled is None or "==" not in r.engine:
            continue
        takes = parse_release("--engine", r.engine.split("==")[1].partition(":")[0]) >= (0, 10, 2)  # ":v0": V0
        line = r.pooled.launch_command
        assert (line is not None and "--kv-cache-memory-bytes" in line) if takes else line is None, (path, line)
        seen[takes] += 1
    assert seen[True] and seen[False]


# ---- 8: trtllm-serve is CUDA-only ---------------------------------------------------------------------------------

@pytest.mark.parametrize("gpu", ["MI300X", "MI250X", "MI325X", "RX-7900-XTX", "Gaudi-3"])
def test_trtllm_refused_on_a_gpu_not_nvidia(cli, gpu):
    from kvplan.cost.hardware import load_gpus

    assert load_gpus()[gpu].vendor != "NVIDIA"  # the catalog's vendor is what decides
    line = one_line_error(cli, "plan", "-m", "llama-3.1-8b", "--gpu", gpu, "--gpu-memory", "120GiB",
                          "--max-model-len", "8192", "--engine", "trtllm")
    assert line.startswith("error: --gpu/--engine:") and gpu in line and "NVIDIA" in line


def test_trtllm_search_skips_gpus_not_nvidia(cli_json):
    r = cli_json("plan", "-m", "llama-3.1-70b", "--max-model-len", "8192", "--concurrency", "64", "--engine", "trtllm",
                 "--gpus", "H100-SXM,A100-80GB,L40S,MI300X")
    assert {o["gpu"] for o in r["options"]} == {"H100-SXM", "A100-80GB", "L40S"}
    every = cli_json("plan", "-m", "llama-3.1-8b", "--max-model-len", "8192", "--concurrency", "8", "--engine", "trtllm")
    from kvplan.cost.hardware import load_gpus

    assert every["options"] and all(load_gpus()[o["gpu"]].vendor == "NVIDIA" for o in every["options"])


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_other_engines_still_plan_amd(cli_json, engine):
    """vLLM and SGLang run on ROCm: an MI300X plan stays."""
    r = cli_json("plan", "-m", "llama-3.1-8b", "--gpu", "MI300X", "--max-model-len", "8192", "--engine", engine)
    assert r["fits"]


# ---- 9: --weight-dtype fp32 where the launch line cannot carry it ------------------------------------------------

@pytest.mark.parametrize("engine", ["tgi", "trtllm"])
def test_fp32_weights_refused_where_the_line_cannot_say_it(cli, cli_json, engine):
    line = one_line_error(cli, *LLAMA, "--engine", engine, "--weight-dtype", "fp32")
    assert line.startswith("error: --weight-dtype:") and "fp32" in line
    assert cli_json(*LLAMA, "--engine", engine, "--weight-dtype", "bf16")["fits"]  # the 16-bit plans stay


# ---- 10b: --from-log keeps the checkpoint the log launched on its launch lines ------------------------------------

@pytest.mark.parametrize("log, launched", [
    ("vllm-code69061280988-qwen3-8b-fp8-rtx4090-wsl2.log", "vllm serve Qwen/Qwen3-8B-FP8 "),
    ("vllm-code39689115050-qwen3-30b-a3b-2507-fp8-l40s-tp2.log", "vllm serve Qwen/Qwen3-30B-A3B-Instruct-2507-FP8 "),
    ("sglang-issue21348-qwen3-235b-fp8-tp4.log", "--model-path /path/to/Qwen3-235B-A22B-FP8 "),
])
def test_from_log_launches_the_logged_checkpoint(cli_json, log, launched):
    """An FP8 checkpoint (the log's `# command:` line) stays on the plan's and the pool's lines, without the online
    --quantization fp8 of the card's bf16 repo; the plan still sizes fp8 weights."""
    r = cli_json("plan", "--from-log", f"docs/logs/{log}")
    assert r["plan"]["launch_command"] is not None
    for line in (r["plan"]["launch_command"], (r["pooled"] or {}).get("launch_command")):
        if line is not None:
            assert launched in line and "--quantization" not in line, line
    assert r["plan"]["inputs"]["weight_dtype"].startswith("fp8")


def test_from_log_with_model_given_names_that_card(cli_json):
    r = cli_json("plan", "--from-log", "docs/logs/vllm-code69061280988-qwen3-8b-fp8-rtx4090-wsl2.log",
                 "--model", "qwen3-8b")
    assert r["plan"]["launch_command"].startswith("vllm serve Qwen/Qwen3-8B ")


# ---- 6: vLLM 0.2 - 0.4 (the "0.2-0.6.4" V0 range): options their parser lacks -----------------------------------
# (a 0.4-era public engine/arg_utils.py: --kv-cache-dtype auto|fp8_e5m2, --quantization awq|gptq|squeezellm,
# --enable-prefix-caching store_true; kvplan dates these conservatively, LAUNCH_FLAG_FIRST)

OLD = ("plan", "-m", "llama-2-7b", "--gpu", "A100-80GB", "--max-model-len", "4096")


@pytest.mark.parametrize("engine", ["vllm==0.2", "vllm==0.3", "vllm==0.4.0"])
@pytest.mark.parametrize("args, flag", [(("--kv-dtype", "fp8_e4m3"), "--kv-dtype"),
                                        (("--weight-dtype", "fp8_e4m3"), "--weight-dtype")])
def test_old_vllm_refuses_what_its_parser_lacks(cli, engine, args, flag):
    line = one_line_error(cli, *OLD, "--engine", engine, *args)
    assert line.startswith(f"error: {flag}:") and "0.5.0" in line and "conservatively" in line


def test_old_vllm_fp8_e5m2_and_prefix_caching_by_release(cli, cli_json):
    assert one_line_error(cli, *OLD, "--engine", "vllm==0.2", "--kv-dtype", "fp8_e5m2").startswith("error: --kv-dtype:")
    assert "--kv-cache-dtype fp8_e5m2" in cli_json(*OLD, "--engine", "vllm==0.3", "--kv-dtype", "fp8_e5m2")[
        "launch_command"]
    line = one_line_error(cli, *OLD, "--engine", "vllm==0.3", "--enable-prefix-caching")
    assert line.startswith("error: --enable-prefix-caching:") and "0.4.0" in line


@pytest.mark.parametrize("engine", ["vllm==0.2", "vllm==0.4.0", "vllm==0.6.4", "vllm==0.7"])
def test_v0_line_leaves_no_enable_prefix_caching_off(cli_json, engine):
    """V0 caches no prefix by default: --no-enable-prefix-caching (its --no- form unverified there) is left off."""
    r = cli_json(*OLD, "--engine", engine, "--no-enable-prefix-caching")
    assert "prefix-caching" not in r["launch_command"]
    assert "--no-enable-prefix-caching" in cli_json(*OLD, "--engine", "vllm==0.10", "--no-enable-prefix-caching")[
        "launch_command"]


@pytest.mark.parametrize("engine, start", [("vllm==0.3", "python -m vllm.entrypoints.openai.api_server --model "),
                                           ("vllm==0.5.2", "python -m vllm.entrypoints.openai.api_server --model "),
                                           ("vllm==0.6.4", "vllm serve "), ("vllm", "vllm serve ")])
def test_vllm_serve_from_0_5_3(cli_json, engine, start):
    """`vllm serve` is vLLM PR 5090 (July 2024); before it the OpenAI server module, which takes the same args."""
    assert cli_json(*OLD, "--engine", engine)["launch_command"].startswith(start + "meta-llama/Llama-2-7b-hf ")
