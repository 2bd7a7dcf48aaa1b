"""`kvplan plan --from-log` / `--calibrate`: every public log in docs/logs/ read and reproduced, the parser on each
line kind, the verdicts and their tolerances, calibration's exactness."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvplan.cli.app import app
from kvplan.errors import KvplanError
from kvplan.planning.capacity.fromlog import from_log, judge
from kvplan.planning.capacity.logparse import GIB, Figure, parse_log

LOGS = sorted((Path(__file__).resolve().parents[1] / "docs" / "logs").rglob("*.log"))  # vendor-builds/ too
# the logs that state the pool (vLLM's available memory, SGLang's free memory and load): calibration's input
POOLED = [p for p in LOGS if parse_log(p).figure("available") or parse_log(p).free_at_start_gib]
AGREE = ("exact", "within rounding")
# logged-pool figures that differ for a reason outside kvplan's block arithmetic (docs/capacity.md, "Misses,
# explained"); each must stay off, so the list cannot outlive its reason
KNOWN_MISSES = {
    ("sglang-code53944457073-qwen3.5-9b-tp2-rtx4090.log", "tokens"): "328,234 from the logged pool (9.49 GiB, within "
    "its rounding) against 327,310 logged (+0.28%): the split of a hybrid's pool between 186 requests' states and "
    "tokens, not yet traced; compared only since kvplan's weights fit the load usage (rotary cache fixed)",
    ("vllm-issue21348-qwen3-235b-fp8-tp4.log", "tokens"): "the logged pool is one rank's and the run used the LMCache "
    "connector: 178,880 tokens x 48,128 B is 8.02 GiB, not the 8.11 GiB logged",
    ("sglang-didierdurand-qwq-32b-tp4.log", "max_running_requests"): "SGLang 0.4.3 logs 2,049, one above 0.5.23's "
    "resolve_max_num_reqs (min(clamp(46,611 / 131,072 x 512, 2048, 4096), 46,611 // 2) = 2,048), the release "
    "kvplan models",
    ("sglang-didierdurand-qwq-32b-l4.log", "max_running_requests"): "the same run as the TP-4 file: 2,049 logged, "
    "2,048 by 0.5.23's resolve_max_num_reqs",
    ("sglang-code46415979912-lfm2-700m.log", "available"): "bench_one_batch measures its free memory after the CUDA "
    "context exists (`avail mem=15.33 GB` at the load), and kvplan's logged-pool column subtracts a context again; "
    "the flags-alone column is -3.7% (tests/test_logs_v0_sglang.py pins it with context_memory=0)",
    ("sglang-code46415979912-lfm2-700m.log", "tokens"): "the pool above, split by the same state/token ratio",
    ("sglang-code69624180828-qwen3-30b-a3b-fp8-h100.log", "tokens"): "392,920 logged, 393,089 from the logged free "
    "memory and load: SGLang 0.5.x measures the pool's free memory after gc.collect() (kv_cache_configurator.py "
    "_profile_available_bytes), some 16 MiB below what the 'Load weight end' line implies; +0.04% (the B200 log's 12 "
    "MiB stay inside its 64-token pages: 992,960 against 992,896 logged)",
    ("sglang-code8893364747-r1-distill-qwen-7b-rtx3090.log", "max_running_requests"): "SGLang 0.4.2 logs 2,049, "
    "one above 0.5.23's resolve_max_num_reqs, as the QwQ-32B logs",
    ("vllm-code58928701347-r1-distill-qwen-32b-dcu-tp8.log", "blocks"): "V0's `# rocm blocks` is the minimum over the "
    "eight workers (executor/executor_base.py determine_num_available_blocks: min of each worker's), the quoted "
    "39.51 GiB one worker's profile line: 40,178 blocks of 1 MiB (the 4,096 CPU blocks of 4 GiB confirm the size) "
    "are 39.24 GiB on the lowest rank",
    ("sglang-sglangplay-qwen2.5-0.5b-h100nvl.log", "available"): "as the B200 and H100 SGLang 0.5 logs: 30.42 GiB "
    "logged, 30.44 from the logged free memory and load (+0.08%, some 24 MiB); the flags-alone miss is the GPU's "
    "other tenants (36.54 GB free of 93 at the load)",
    ("sglang-sglangplay-qwen2.5-0.5b-h100nvl.log", "tokens"): "the pool above: 2,658,165 logged, 2,660,272",
}
# logs --calibrate refuses, with the reason it names (exit 2): no pool stated, or a budget kvplan cannot split
CALIBRATE_REFUSED = {
    "sglang-code43425326930-llama-3-8b-mi300x.log": "states no memory left",  # its token count alone
    "sglang-docs-send-request-llama-3.1-8b.log": "states no memory left",
    # its 8.03 GiB pool is more than 0.75 x 11.63 GiB less the 1.12 GiB of weights it logs (7.60 GiB): the desktop
    # GPU's other processes (2.61 GiB in use at the file's first start) likely gave memory back during the profile,
    # which vLLM's device-wide non-torch growth counts as negative; nothing is left to split into peak and non-torch
    "vllm-code62571909065-qwen3-0.6b-rtx3060-u075.log": "weights exceed everything",
}
# failed start-ups (a negative pool logged): the measured budget is calibrated, and without a what-if it refuses, as
# the engine did (a what-if such as --gpu-memory-utilization says what would have fit)
CALIBRATE_REFUSED_AS_LOGGED = {"vllm-issue23278-gpt-oss-120b-h100.log",  # -2.14 GiB
                               "vllm-vllm-offload-profiles-qwen2.5-7b-u060-failed-rtx3090.log",  # -0.7 GiB
                               "vllm-code10873344026-llava-v1.6-mistral-7b.log",  # -1.81 GiB
                               "vllm-issue27508-gpt-oss-120b-h100-async.log"}  # -2.28 GiB
# calibrated, but not to the logged pool: the context the logged free memory already excludes (KNOWN_MISSES)
CALIBRATE_OFF = {"sglang-code46415979912-lfm2-700m.log",
                 "sglang-code69624180828-qwen3-30b-a3b-fp8-h100.log",  # its tokens (KNOWN_MISSES)
                 "sglang-sglangplay-qwen2.5-0.5b-h100nvl.log",  # as those two (KNOWN_MISSES)
                 "sglang-code53944457073-qwen3.5-9b-tp2-rtx4090.log",  # its tokens (KNOWN_MISSES)
                 "vllm-code31259794699-qwen3-30b-a3b-pp2-gh200.log",  # PP 2: CALIBRATED_STAGE_GAP
                 # the pool to the byte, but a line it holds does not follow from it (KNOWN_MISSES): the LMCache run's
                 # tokens, the DCU log's blocks (another worker's minimum)
                 "vllm-issue21348-qwen3-235b-fp8-tp4.log", "vllm-code58928701347-r1-distill-qwen-32b-dcu-tp8.log"}
# PP 2 calibrated: both stages' pools fall in the same block count and the plan shows stage 0's, above the logged pool
# by the stages' weights' difference (kvplan's last stage holds 4,096 B more); blocks and tokens are the log's
CALIBRATED_STAGE_GAP = {"vllm-code31259794699-qwen3-30b-a3b-pp2-gh200.log": 7_653_113_856 - 7_653_109_760}


@pytest.mark.parametrize("path", LOGS, ids=[p.name for p in LOGS])
def test_every_log_reproduced_from_its_logged_pool(path):
    """Every figure the logged-pool column predicts agrees with the log within the log's own rounding."""
    r = from_log(path)
    assert r.rows, "a log in docs/logs states no figure"
    compared = [x for x in r.rows if x.pool_verdict is not None]
    derived = {"blocks", "tokens", "concurrency", "longest_fit", "max_running_requests"}
    if path in POOLED and r.pooled is not None and derived & {x.figure for x in r.rows}:
        assert compared, "a log stating its pool and what it holds compares nothing from it"
    for x in compared:
        if (path.name, x.figure) in KNOWN_MISSES:
            assert x.pool_verdict == "off", (x.figure, "agrees now: drop it from KNOWN_MISSES")
        else:
            assert x.pool_verdict in AGREE, (x.figure, x.logged.text, x.logged_pool, x.pool_low, x.pool_high)


@pytest.mark.parametrize("path", POOLED, ids=[p.name for p in POOLED])
def test_calibrate_without_what_if_reproduces_the_logged_pool(path):
    if path.name in CALIBRATE_REFUSED:
        with pytest.raises(KvplanError, match=CALIBRATE_REFUSED[path.name]):
            from_log(path, calibrate=True)
        return
    r = from_log(path, calibrate=True)
    c = r.calibration
    assert c.reproduces_log is (path.name not in CALIBRATE_OFF) and c.reproduction
    if path.name in CALIBRATE_REFUSED_AS_LOGGED:
        assert c.plan is None and c.refused and r.logged_pool_bytes < 0 and "refusal is reproduced" in c.reproduction
        return
    if r.logged_pool_bytes is not None:
        assert c.plan.kv_cache.available_bytes == r.logged_pool_bytes + CALIBRATED_STAGE_GAP.get(path.name, 0)
        assert c.plan.kv_cache.tokens == r.pooled.kv_cache.tokens


def _write(tmp_path, text: str) -> Path:
    p = tmp_path / "x.log"
    p.write_text(text)
    return p


QWEN_NEXT = "vllm-codeindex7292846353-qwen3-next-80b-tp2.log"
QWEN_8B = "vllm-codeindex34681159919-qwen3-8b-fp8.log"


def _log(name: str) -> Path:
    return next(p for p in LOGS if p.name == name)


def test_v1_lines_parsed():
    lg = parse_log(_log(QWEN_NEXT))
    assert lg.engine == "vllm" and lg.version == "0.10.2"
    assert lg.model_id == "/data/models/Qwen3-Next-80B-A3B-Instruct"
    assert lg.flags["tp"] == 2 and lg.flags["max_model_len"] == 262144 and lg.flags["dtype"] == "bfloat16"
    assert lg.flag_sources["tp"] == "launch line"
    got = {f.name: lg.figure(f.name).text for f in lg.figures}
    assert got == {"weights": "74.2812", "activation": "5.58", "non_torch": "1.38", "cuda_graph_capture": "2.37",
                   "available": "44.59", "blocks": "7162", "tokens": "973,760", "concurrency": "14.77"}
    assert lg.figure("weights").rounding == 0.00005 and lg.figure("tokens").rounding == 0
    assert lg.total_memory_gib.value == 139.81
    assert lg.exact_available_bytes == 47878721024


def test_debug_and_split_lines_parsed():
    lg = parse_log(_log(QWEN_8B))
    assert lg.version == "0.11" and lg.flags["gpu_memory_utilization"] == 0.8 and lg.flags["max_model_len"] == 1024
    # "8.8 GiB for weight" and the DEBUG "weights memory: 8.80GiB": the more precise statement is the one compared
    assert lg.figure("weights").text == "8.80" and lg.figure("activation").text == "1.40"
    assert lg.figure("non_torch").text == "0.02" and lg.total_memory_gib.text == "23.53"


def test_v0_lines_parsed(tmp_path):
    # public V0 lines: vllm PR 4650 (the config line), PR 14447 (worker.py's profiling lines), issue 13061 (the
    # weights), issue 5248 (gpu_executor's blocks); each parsed into its figure
    p = _write(tmp_path, "# gpu: RTX-4090\n"
               "INFO 05-22 23:31:03 llm_engine.py:100] Initializing an LLM engine (v0.4.2) with config: "
               "model='DeepSeek-V2-Lite-Chat', speculative_config=None, tokenizer='DeepSeek-V2-Lite-Chat', "
               "skip_tokenizer_init=False, tokenizer_mode=auto, revision=None, tokenizer_revision=None, "
               "trust_remote_code=True, dtype=torch.bfloat16, max_seq_len=1024, download_dir=None, "
               "load_format=LoadFormat.AUTO, tensor_parallel_size=4, disable_custom_all_reduce=False, "
               "quantization=None, enforce_eager=True, kv_cache_dtype=auto\n"
               "(VllmWorkerProcess pid=1786) INFO 02-11 07:40:45 model_runner.py:1115] Loading model weights took "
               "13.9476 GB\n"
               "(VllmWorkerProcess pid=507) INFO 04-12 08:21:19 [worker.py:267] the current vLLM instance can use "
               "total_gpu_memory (23.58GiB) x gpu_memory_utilization (0.99) = 23.35GiB\n"
               "(VllmWorkerProcess pid=507) INFO 04-12 08:21:19 [worker.py:267] model weights take 21.21GiB; "
               "non_torch_memory takes 0.20GiB; PyTorch activation peak memory takes 0.37GiB; the rest of the memory "
               "reserved for KV Cache is 1.57GiB.\n"
               "INFO 06-12 08:12:23 distributed_gpu_executor.py:45] # GPU blocks: 507, # CPU blocks: 1024\n")
    lg = parse_log(p)
    assert lg.version == "0.4.2" and lg.model_id == "DeepSeek-V2-Lite-Chat"
    assert lg.flags == {"max_model_len": 1024, "tp": 4, "dtype": "bfloat16", "gpu_memory_utilization": 0.99,
                        "enforce_eager": True}
    assert {f.name: lg.figure(f.name).value for f in lg.figures} == {
        "weights": 13.9476, "activation": 0.37, "non_torch": 0.20, "available": 1.57, "blocks": 507}
    assert [f.value for f in lg.figures if f.name == "weights"] == [13.9476, 21.21]  # the most precise first
    assert lg.total_memory_gib.value == 23.58


def test_a_figure_line_a_page_wrapped_is_read(tmp_path):
    """A post may wrap a figure line (the DeepSeek-R1 H200 log: "...reserved \\n  for KV Cache is 21.43GiB."): the
    figure is read from the line it starts on, and a figure whole on the next line is not read twice."""
    log = _write(tmp_path, "INFO 03-15 20:36:48 worker.py:267] model weights take 83.88GiB; the rest of the memory "
                           "reserved \n  for KV Cache is 21.43GiB.\n"
                           "INFO 03-15 20:36:48 executor_base.py:111] # cuda blocks: 18418, # CPU blocks: 3437\n")
    figs = [f for f in parse_log(log).figures if f.name == "available"]
    assert [(f.value, f.line) for f in figs] == [(21.43, 1)]
    whole = _write(tmp_path, "reserved for KV Cache is 1.00GiB.\nthe rest of the memory reserved for KV Cache is "
                             "2.00GiB.\n")
    assert [f.value for f in parse_log(whole).figures if f.name == "available"] == [2.0]


def test_non_default_args_listed_one_per_line_are_read(tmp_path):
    """A post may print vLLM's non-default args one per line (the 0.22.1 RTX 3090 walkthrough: `  max_num_seqs=8`):
    they are the launch flags as the dict form's are; the list ends at the first line that is not one."""
    log = _write(tmp_path, "non-default args:\n  host=0.0.0.0\n  max_model_len=4096\n  gpu_memory_utilization=0.9\n"
                           "  max_num_seqs=8\nResolved architecture: Qwen2ForCausalLM\n  max_num_batched_tokens=99\n"
                           "Available KV cache memory: 14.43 GiB\n")
    flags = parse_log(log).flags
    assert (flags["max_model_len"], flags["gpu_memory_utilization"], flags["max_num_seqs"]) == (4096, 0.9, 8)
    assert "max_num_batched_tokens" not in flags
    assert parse_log(_log("vllm-code65863227652-qwen2.5-7b-awq-rtx3090.log")).flags["max_num_seqs"] == 8


def test_v0_log_runs_on_the_v0_rules():
    r = from_log(_log("vllm-issue10517-llama-3.1-8b-20k.log"))
    assert r.engine == "vllm==0.6.4" and not any("not modelled" in n for n in r.notes)
    assert "V0" in r.plan.model_dump_json()
    assert abs(r.gpu_memory_bytes - 23.58 * GIB) < 1  # the total the log prints (`total_gpu_memory=23.58GiB`)


def test_gpu_found_by_the_logged_total():
    r = from_log(_log(QWEN_NEXT))
    assert r.gpu == "H200" and "matches" in r.gpu_how  # 139.81 GiB logged, the catalog's H200 139.80 GiB


def test_sglang_lines_parsed(tmp_path):
    # SGLang model_runner.py / scheduler.py lines (docs/capacity.md source 15, didier-durand/llms-in-clouds)
    p = _write(tmp_path, "# gpu: L4\n# engine: sglang==0.4\n# model: qwq-32b\n"
               "server_args=ServerArgs(model_path='Qwen/QwQ-32B', tp_size=4, mem_fraction_static=0.85, "
               "context_length=None)\n"
               "[TP0] Load weight begin. avail mem=21.63 GB\n"
               "[TP0] Load weight end. type=Qwen2ForCausalLM, dtype=torch.bfloat16, avail mem=6.09 GB, "
               "mem usage=15.54 GB.\n"
               "[TP0] KV Cache is allocated. #tokens: 46611, K size: 1.42 GB, V size: 1.42 GB\n")
    lg = parse_log(p)
    assert lg.engine == "sglang" and lg.model_id == "Qwen/QwQ-32B"
    assert lg.flags == {"tp": 4, "mem_fraction_static": 0.85}
    assert lg.free_at_start_gib.value == 21.63 and lg.figure("load_usage").value == 15.54
    assert lg.figure("available").value == pytest.approx(2.84) and lg.figure("available").rounding == 0.01
    assert lg.figure("tokens").value == 46611


def test_sglang_0_4_0_and_0_5_line_kinds_parsed():
    """0.4.0 - 0.4.1's "KV Cache is allocated. K size: X GB, V size: Y GB." (no token count), 0.5.x's "KV Cache is
    allocated. dtype: torch.bfloat16, #tokens: N, ...", "Capture target decode CUDA graph end. elapsed=..., mem
    usage=X GB" and the checkpoint's "quant=fp8" of "Load weight end": each read into its figure."""
    old = parse_log(_log("sglang-docs-send-request-llama-3.1-8b.log"))
    assert old.figure("available").text == "27.13 + 27.13" and old.figure("available").value == pytest.approx(54.26)
    new = parse_log(_log("sglang-code69624180828-qwen3-30b-a3b-fp8-h100.log"))
    assert new.figure("tokens").value == 392920 and new.figure("available").text == "17.99 + 17.99"
    assert new.figure("cuda_graph").text == "0.34" and new.quantization == "fp8"
    assert new.flag_sources == {"max_model_len": "scheduler line"}
    r = from_log(_log("sglang-code69624180828-qwen3-30b-a3b-fp8-h100.log"))
    assert r.plan_args["weight_dtype"] == "fp8_e4m3"  # the FP8 checkpoint sized as such (29.05 GiB, 29.15 logged)
    assert abs(r.plan.per_gpu.weights_bytes / GIB - 29.15) < 0.15


def test_sglang_max_running_requests_flag_is_planned():
    """A launch with --max-running-requests is planned with it (0.4.3 takes it as given: tp_worker.py
    min(N, req_to_token_pool.size) with the pool sized at N). SGLang's k8s docs show the launch with 20 beside a log
    that prints 50 (docs/logs header): kvplan plans the command shown and says it is off, where it said 'not
    predicted' and compared nothing; the pool's rows do not move."""
    name = "sglang-docs-k8s-deepseek-r1-tp16-h20.log"
    log = parse_log(_log(name))
    assert log.flags["max_running_requests"] == 20
    r = from_log(_log(name))
    rows = {x.figure: x for x in r.rows}
    assert r.plan.running_limit == 20 and rows["max_running_requests"].flags_alone == 20
    assert rows["max_running_requests"].flags_verdict == "off" and rows["max_running_requests"].logged.value == 50
    assert rows["tokens"].flags_alone is not None
    assert "--max-running-requests 20" in r.plan.launch_command


def test_sglang_running_row_is_the_plans_cap():
    """The max_running_requests row is the runtime's running_limit (resolve_max_num_reqs with its caps), the figure
    the plan prints, not a second copy of the formula."""
    for p in LOGS:
        if not p.name.startswith("sglang-"):
            continue
        r = from_log(p)
        rows = {x.figure: x for x in r.rows}
        row = rows.get("max_running_requests")
        if row is not None and r.plan is not None and row.flags_verdict != "GPU unknown":
            assert row.flags_alone == r.plan.running_limit, p.name


def test_judge_tolerances():
    f = Figure(name="available", value=6.51, text="6.51", rounding=0.005, line=1)
    assert judge(f, 6.51)[0] == "exact"
    assert judge(f, 6.5149)[0] == "exact"  # prints as 6.51
    assert judge(f, 6.5049)[0] == "off"  # 6.51 stands for [6.505, 6.515]
    assert judge(f, 6.52, 6.50, 6.52)[0] == "within rounding"  # kvplan at the ends of a given pool's rounding
    assert judge(f, 6.53) == ("off", pytest.approx(0.3072, abs=1e-3))
    t = Figure(name="tokens", value=42656, text="42,656", rounding=0.0, line=1)
    assert judge(t, 42656)[0] == "exact" and judge(t, 42672)[0] == "off"
    assert judge(t, 42672, 42640, 42672)[0] == "within rounding"  # the logged pool's rounding spans it


def test_a_boot_that_compiled_is_read_as_cold_compile():
    """vLLM's "saved AOT compiled function" / "Compiling a graph for compile range" lines (decorators.py, backends.py:
    this boot compiled) set --cold-compile; a log without them is planned as a warm boot, and the flag given on the
    command line is the what-if (the Qwen3-14B L40S post prints neither line)."""
    cold = from_log(_log("vllm-code58522340114-qwen3-8b-rtx4090-cold-compile.log"))
    assert cold.log.flag_sources["cold_compile"] == "compile line" and cold.plan_args["cold_compile"] is True
    warm = from_log(_log("vllm-code58522340114-qwen3-8b-rtx4090-cold-compile.log"), cold_compile=False)
    drop = warm.plan.per_gpu.available_kv_bytes - cold.plan.per_gpu.available_kv_bytes
    assert drop == 151_936 * 4096 * 2 - warm.plan.per_gpu.activation_bytes  # the table replaces the warm peak
    name = "vllm-blog-llm-optimization-capstone-qwen3-14b-l40s.log"
    warm, what_if = from_log(_log(name)), from_log(_log(name), cold_compile=True)
    assert "cold_compile" not in warm.plan_args and what_if.plan_args["cold_compile"] is True
    assert what_if.plan.per_gpu.available_kv_bytes < warm.plan.per_gpu.available_kv_bytes
    errors = [{x.figure: x for x in r.rows}["available"].flags_error_pct for r in (warm, what_if)]
    assert errors[0] > 10 and 0 < errors[1] < 2  # +11.7% as a warm boot, +1.77% as a first (docs/capacity.md)


def test_a_0_11_boot_that_compiled_with_the_combo_benchmark_is_read_as_cold_compile(tmp_path):
    """Before 0.13 the cache-miss line is "Compiling a graph for dynamic shape takes" (backends.py, 0.11.0 and
    0.11.2); it marks a cold compile only beside the config line's 'benchmark_combo_kernel': True (0.11.1+ with torch
    2.9; 0.11.0's torch 2.8 benchmarks nothing). The Kaggle 0.11.2 gpt-oss-120b boot ("Cache the graph for dynamic
    shape for later use") then charges one bf16 copy of the 201,088 x 2,880 embedding table as its profile peak."""
    name = "vllm-huikang-gpt-oss-120b-h100-kaggle.log"
    cold = from_log(_log(name))
    assert cold.log.flag_sources["cold_compile"] == "compile line" and cold.plan_args["cold_compile"] is True
    assert cold.plan.per_gpu.activation_bytes == 201_088 * 2_880 * 2  # 1,158,266,880 B, above the warm forward
    assert abs({x.figure: x for x in cold.rows}["available"].flags_error_pct) < 0.5  # 8.97 GiB for 8.99 logged
    text = _log(name).read_text().replace("'benchmark_combo_kernel': True", "'benchmark_combo_kernel': False")
    (tmp_path / name).write_text(text)
    warm = from_log(tmp_path / name)
    assert "cold_compile" not in warm.plan_args
    assert warm.plan.per_gpu.activation_bytes < cold.plan.per_gpu.activation_bytes


def test_flags_override_the_log():
    r = from_log(_log(QWEN_8B), max_model_len=2048)
    assert r.plan.inputs.max_model_len == 2048 and r.plan_args["max_model_len"] == 2048


def test_calibrate_what_ifs_exact_where_nothing_measured_changes():
    base = from_log(_log(QWEN_NEXT), calibrate=True).calibration
    longer = from_log(_log(QWEN_NEXT), calibrate=True, max_model_len=131072).calibration
    assert longer.what_ifs == {"max_model_len": 131072} and not longer.scaled
    assert longer.plan.kv_cache.available_bytes == base.plan.kv_cache.available_bytes  # the same measured pool
    util = from_log(_log(QWEN_NEXT), calibrate=True, gpu_memory_utilization=0.85).calibration
    requested = base.plan.per_gpu.requested_bytes - util.plan.per_gpu.requested_bytes
    assert base.plan.kv_cache.available_bytes - util.plan.kv_cache.available_bytes == requested
    seqs = from_log(_log(QWEN_NEXT), calibrate=True, max_num_seqs=256).calibration
    assert seqs.scaled and seqs.activation_bytes < base.activation_bytes  # the sampler over fewer rows


def test_calibrate_tp_what_if_rescales_the_weights():
    base = from_log(_log(QWEN_NEXT), calibrate=True).calibration
    tp4 = from_log(_log(QWEN_NEXT), calibrate=True, tp=4).calibration
    assert any(t.startswith("weights:") for t in tp4.scaled)
    assert tp4.plan.per_gpu.weights_bytes < base.plan.per_gpu.weights_bytes
    assert tp4.activation_bytes == base.activation_bytes  # the sampler runs on every rank: the peak is kept
    assert tp4.plan.kv_cache.available_bytes > base.plan.kv_cache.available_bytes


def test_calibrate_refuses_what_it_cannot_answer():
    with pytest.raises(KvplanError, match="NCCL"):
        from_log(_log(QWEN_8B), calibrate=True, tp=2)
    with pytest.raises(KvplanError, match="changes what the log measured"):
        from_log(_log(QWEN_8B), calibrate=True, weight_dtype="bf16")


def test_logged_pool_is_the_bytes_the_flag_reads():
    """A logged '19.36 GiB' and `--kv-cache-memory 19.36GiB` are one byte count (QA B D18: they differed by 1 B)."""
    from kvplan.units import parse_size

    log = _log("vllm-tokenkaki-qwen3-8b-a100-40gb-serve.log")
    res = CliRunner().invoke(app, ["plan", "--from-log", str(log), "--json"])
    assert res.exit_code == 0, res.output
    given = parse_size("--kv-cache-memory", "19.36GiB")
    assert given == 20_787_641_712 and json.loads(res.output)["logged_pool_bytes"] == given
    text = CliRunner().invoke(app, ["plan", "--from-log", str(log)]).output
    assert "given 20,787,641,712 B" in text and "19.4 GiB" not in text
    parts = Figure(name="available", value=3.75, text="1.5 + 2.25", rounding=0.01, line=1)
    assert parts.bytes == 3 * GIB + 3 * GIB // 4


def test_unreadable_log_names_the_header(tmp_path):
    p = _write(tmp_path, "INFO Available KV cache memory: 1.00 GiB\n")
    res = CliRunner().invoke(app, ["plan", "--from-log", str(p)])
    assert res.exit_code == 2 and "# model:" in res.output
    p = _write(tmp_path, "# model: not-a-model-card\nAvailable KV cache memory: 1.00 GiB\n")
    assert CliRunner().invoke(app, ["plan", "--from-log", str(p)]).exit_code == 2


def test_cli_from_log_json_and_text():
    res = CliRunner().invoke(app, ["plan", "--from-log", str(_log(QWEN_NEXT)), "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["plan"]["inputs"]["tp"] == 2 and data["logged_pool_bytes"] == 47878721024
    res = CliRunner().invoke(app, ["plan", "--from-log", str(_log(QWEN_NEXT)), "--calibrate", "--kv-dtype", "fp8"])
    assert res.exit_code == 0, res.output
    assert "measured" in res.output
    assert CliRunner().invoke(app, ["plan", "-m", "llama-2-7b", "--gpu", "H100-SXM"]).exit_code == 2
    assert CliRunner().invoke(app, ["plan", "-m", "llama-2-7b", "--gpu", "H100-SXM", "--max-model-len", "4096",
                                    "--calibrate"]).exit_code == 2


def test_exact_pool_within_the_printed_one():
    """vLLM 0.10.2+'s "kv cache memory in use is N bytes" is the printed "Available KV cache memory" to the byte."""
    lg = parse_log(_log(QWEN_NEXT))
    f = lg.figure("available")
    assert abs(lg.exact_available_bytes / GIB - f.value) <= f.rounding


def test_newer_v1_lines_parsed(tmp_path):
    # public lines: vllm PR 13596 (V1's first "# GPU blocks" line), issue 46462 (0.21+'s CUDA-graph estimate),
    # issue 39734 (the banner's version), club-3090 issue 1087 (0.2x's Free memory line, weights and non-torch summed)
    p = _write(tmp_path, "INFO 02-20 00:01:02 kv_cache_utils.py:522] # GPU blocks: 127626\n"
               "(EngineCore pid=29723) INFO 06-23 10:27:28 [gpu_model_runner.py:6042] Estimated CUDA graph memory: "
               "6.24 GiB total\n"
               "(APIServer pid=1327189) INFO 04-15 07:22:41 [utils.py:299]  ▄▄ ▄█ █     █     █ ▀▄▀ █  version "
               "0.19.1rc1.dev301+g60995c05b\n"
               "(Worker_TP0 pid=223) INFO 08-22 04:42:13 [gpu_worker.py:789] Free memory on device (30.27/31.4 GiB) "
               "on startup. Desired GPU memory utilization is (0.92, 28.88 GiB). Actual usage is 15.03 GiB for "
               "consumed memory (weights + non-torch), 1.59 GiB for peak activation, and 0.09 GiB for CUDAGraph "
               "memory.\n")
    lg = parse_log(p)
    assert lg.version == "0.19.1rc1.dev301+g60995c05b" and lg.total_memory_gib.value == 31.4
    # the estimate (charged from 0.20) and the capture ("X GiB for CUDAGraph memory") are two figures
    assert {f.name: lg.figure(f.name).value for f in lg.figures} == {"blocks": 127626, "activation": 1.59,
                                                                      "cuda_graph": 6.24, "cuda_graph_capture": 0.09}
    assert lg.figure("weights") is None  # "consumed memory (weights + non-torch)" is no weights figure
    assert lg.figure("activation").kind == "summary"  # the summary's peak: 0.27+ sums the charged estimate into it


def test_the_charged_graph_estimate_is_read_apart_from_the_capture(tmp_path):
    """The lines each release prints (gpu_model_runner.py profile_cudagraph_memory "Estimated CUDA graph memory: %.2f
    GiB total"; gpu_worker.py "CUDA graph pool memory: %s GiB (actual), %s GiB (estimated)" and the utilization
    advisory, 0.21.0 - 0.33.0; capture_model's "Graph capturing finished in %.0f secs, took %.2f GiB")."""
    p = _write(tmp_path, "INFO [gpu_model_runner.py:1] Estimated CUDA graph memory: 0.52 GiB\n"
               "INFO [gpu_model_runner.py:2] Graph capturing finished in 5 secs, took 0.47 GiB\n"
               "INFO [gpu_worker.py:3] Available KV cache memory: 30.03 GiB\n"
               "INFO [gpu_worker.py:4] CUDA graph pool memory: 0.47 GiB (actual), 0.52 GiB (estimated), difference: "
               "0.05 GiB (10.6%).\n")
    lg = parse_log(p)
    assert [(f.name, f.text) for f in lg.figures if "graph" in f.name] == [
        ("cuda_graph", "0.52"), ("cuda_graph", "0.52"), ("cuda_graph_capture", "0.47"), ("cuda_graph_capture", "0.47")]


def test_the_utilization_advisory_gives_model_runner_v2s_charged_estimate():
    """vLLM 0.29's V2 prints no "Estimated CUDA graph memory": the advisory's equivalent utilization U2 =
    round(U - estimate / total, 4) (gpu_worker.py determine_available_memory) gives (U - U2) x total, here the
    L40S's 46,068 MiB less what torch does not see (kvplan's catalog total), good to 0.00005 x total."""
    log = _log("vllm-samilazrak-qwen3-14b-l40s-base.log")
    assert "--gpu-memory-utilization=0.9200 is equivalent to --gpu-memory-utilization=0.9086" in log.read_text()
    r = from_log(log)
    rows = {x.figure: x for x in r.rows}
    total = r.plan.inputs.gpu_memory_bytes
    est = rows["cuda_graph"].logged
    assert est.kind == "utilization" and est.value == pytest.approx(0.0114 * total / GIB, abs=1e-9)
    assert est.rounding == pytest.approx(0.00005 * total / GIB)
    assert rows["cuda_graph_capture"].logged.text == "0.44"  # the throwaway capture profile_cudagraph_memory measures


def test_0_27_and_later_compare_the_summary_peak_with_kvplans_peak_and_graphs():
    """0.27.0+'s "X GiB for peak activation" is transient_peak_headroom + cudagraph_memory_estimate_applied
    (gpu_worker.py determine_available_memory, read in 0.27.1 - 0.33.0; 0.26.0: torch_peak_increase alone)."""
    r = from_log(_log("vllm-code70682754770-llama-3.1-8b-a100.log"))  # 0.31.0: "1.44 GiB for peak activation"
    row = next(x for x in r.rows if x.figure == "activation")
    g = r.plan.per_gpu
    assert row.flags_alone == (g.activation_bytes + g.cuda_graph_bytes) / GIB and g.cuda_graph_bytes > 0
    assert "charged CUDA-graph estimate" in row.what
    from kvplan.cost.runtimes import get_engine

    assert [get_engine(f"vllm=={v}").peak_line_holds_graphs() for v in ("0.26", "0.27", "0.28", "0.31", "0.33")] == [
        False, True, True, True, True]


def test_gpu_memory_header_alone_borrows_the_nearest_catalog_gpu(tmp_path):
    # the format's `# gpu-memory:` for a GPU the catalog lacks: the plan starts from that total
    # (the log's own total, 23.53 GiB, is the catalog RTX-4090's: a GPU the catalog lacks prints another)
    text = (_log(QWEN_8B).read_text().replace("# gpu: RTX-4090\n", "# gpu-memory: 23.80GiB\n")
            .replace("(23.08/23.53 GiB)", "(23.08/23.80 GiB)"))
    r = from_log(_write(tmp_path, text))
    from kvplan.cost.hardware import load_gpus

    gap = {n: abs(g.engine_memory_bytes - 23.80 * GIB) for n, g in load_gpus().items()}
    assert gap[r.gpu] == min(gap.values())  # the catalog GPU nearest the given total (today RTX-3090, 23.58 GiB)
    assert "stands in" in r.gpu_how and r.gpu_memory_bytes == int(23.80 * GIB)


LAB1 = "vllm-code61585879089-qwen3-8b-rtx4090-u090-lab1.log"  # a WSL2 desktop's RTX 4090, no total printed


def test_a_windows_log_is_planned_on_the_windows_total(tmp_path):
    """`# platform: windows` (or vLLM's WSL line in the log) plans on the catalog's Windows/WSL2 total; without it the
    Linux total; a total the log prints wins over both."""
    from kvplan.cost.hardware import load_gpu

    gpu = load_gpu("RTX-4090")
    text = _log(LAB1).read_text()
    assert "# platform: windows\n" in text
    on_windows = from_log(_log(LAB1))
    assert on_windows.gpu_memory_bytes == gpu.windows_visible_memory_bytes and "platform:" in on_windows.gpu_how
    linux = from_log(_write(tmp_path, text.replace("# platform: windows\n", "")))
    assert linux.gpu_memory_bytes == gpu.visible_memory_bytes
    wsl = text.replace("# platform: windows\n", "").replace(
        "\nModel loading took", "\nWARNING 05-01 10:00:00 [interface.py:1002] Using 'pin_memory=False' as WSL is "
        "detected. This may slow down the performance.\nModel loading took", 1)
    assert wsl.count("WSL is detected") == 1
    r = from_log(_write(tmp_path, wsl))
    assert r.gpu_memory_bytes == gpu.windows_visible_memory_bytes and "WSL line" in r.gpu_how
    avail = lambda res: next(x for x in res.rows if x.figure == "available")  # noqa: E731
    assert abs(avail(on_windows).flags_error_pct) < 0.5 < abs(avail(linux).flags_error_pct)
    with pytest.raises(KvplanError, match=r"platform: macos.*allowed: linux, windows"):
        from_log(_write(tmp_path, text.replace("# platform: windows", "# platform: macos")))
    printed = from_log(_log("vllm-code61815222665-qwen2.5-0.5b-rtx4090-v2runner.log"))
    assert "the log's total" in printed.gpu_how and "platform" not in printed.gpu_how
    # --platform: the OS of a log that states none; refused against a printed total or another stated OS
    given = from_log(_write(tmp_path, text.replace("# platform: windows\n", "")), platform="windows")
    assert given.gpu_memory_bytes == gpu.windows_visible_memory_bytes and "--platform" in given.gpu_how
    assert from_log(_log(LAB1), platform="windows").gpu_memory_bytes == gpu.windows_visible_memory_bytes
    for path, platform in ((_log(LAB1), "linux"), (_log("vllm-code61815222665-qwen2.5-0.5b-rtx4090-v2runner.log"),
                                                     "windows")):
        with pytest.raises(KvplanError, match="^--platform"):
            from_log(path, platform=platform)


def test_calibrate_says_when_the_release_is_not_modelled(tmp_path):
    text = _log("vllm-issue10517-llama-3.1-8b-20k.log").read_text().replace("# engine: vllm==0.6.4", "# engine: vllm==0.1")
    c = from_log(_write(tmp_path, text), calibrate=True, max_model_len=29000).calibration
    assert any("not one kvplan models" in t for t in c.scaled)
    assert not from_log(_log(QWEN_NEXT), calibrate=True, max_model_len=131072).calibration.scaled


def test_model_header_names_a_vendored_config(tmp_path):
    # `# model: FILE.json#ORG/NAME`: one config of a file of vendored configs (tests/data/hf_configs_hybrid.json)
    configs = Path(__file__).resolve().parent / "data" / "hf_configs_hybrid.json"
    text = _log(QWEN_NEXT).read_text().replace(
        "# posted:", f"# model: {configs}#Qwen/Qwen3-Next-80B-A3B-Instruct\n# posted:")
    r = from_log(_write(tmp_path, text))
    assert "hf_configs_hybrid.json" in r.model_how
    assert {x.figure: x.logged_pool for x in r.rows}["tokens"] == 973760  # the printed figure, to the token
    with pytest.raises(KvplanError, match="holds no config"):
        from_log(_write(tmp_path, text.replace("#Qwen/Qwen3-Next", "#Qwen/Nothing")))


def test_bad_launch_flags_and_layouts_name_the_file_or_flag(tmp_path):
    """A launch flag no engine reads names the log; a non-positive --tp with --calibrate names --tp (exit 2)."""
    runner = CliRunner()
    bad = _write(tmp_path, "# model: llama-2-7b\n# gpu: H100-SXM\n# command: vllm serve x --max-model-len 32Q\n"
                 "Available KV cache memory: 5 GiB\n")
    r = runner.invoke(app, ["plan", "--from-log", str(bad)])
    assert r.exit_code == 2 and str(bad) in r.stderr and "max_model_len" in r.stderr and "Traceback" not in r.stderr
    good = _write(tmp_path, "# model: llama-2-7b\n# gpu: H100-SXM\nAvailable KV cache memory: 5 GiB\n")
    r = runner.invoke(app, ["plan", "--from-log", str(good), "--calibrate", "--tp", "0"])
    assert r.exit_code == 2 and r.stderr.startswith("error: --tp:") and len(r.stderr.strip().splitlines()) == 1
    k = tmp_path / "k.log"  # vLLM's human_readable_int: an upper-case suffix is binary
    k.write_text("# model: llama-2-7b\n# gpu: H100-SXM\n# command: vllm serve x --max-model-len 32K\n"
                 "Available KV cache memory: 5 GiB\n")
    assert parse_log(k).flags["max_model_len"] == 32768


def test_per_worker_figures_compare_the_smallest_with_kvplans_limiting_rank():
    """vLLM V1 logs the pool, tokens and concurrency once per worker and sizes every worker's pool by the smallest.
    The GH200 TP 4 x PP 2 log states stage 0's (76.15 GiB, 6,654,432 tokens, 25.38x) and the last stage's (70.58 GiB,
    6,167,536, 23.53x); each row compares the log's smallest with kvplan's limiting stage (the last, which holds the
    sampler's peak), never one stage's line with the other's: every row is off by the same +2.2%, and the logged
    pool reproduces the last stage's tokens. The EP log's eight ranks (237,344 - 238,208 tokens) alike."""
    r = from_log(_log("vllm-code31259794699-qwen3-30b-a3b-pp2-gh200.log"))
    stages = [rk.available_kv_bytes / 2**30 for rk in r.plan.ranks]
    rows = {x.figure: x for x in r.rows}
    assert len(stages) == 2 and stages[0] - stages[1] > 3
    assert [rows[f].logged.text for f in ("available", "tokens", "concurrency")] == ["70.58", "6,167,536", "23.53"]
    assert rows["available"].flags_alone == min(stages) == r.plan.kv_cache.available_bytes / 2**30
    assert all(2 < rows[f].flags_error_pct < 2.5 for f in ("available", "tokens", "concurrency"))
    assert rows["tokens"].pool_verdict in AGREE and rows["concurrency"].pool_verdict == "exact"
    ep = {x.figure: x for x in from_log(_log("vllm-code38962983769-qwen3-235b-fp8-ep-l40s.log")).rows}
    assert ep["tokens"].logged.text == "237,344" and ep["tokens"].pool_verdict == "exact"


def test_cpu_offload_gb_is_a_what_if_on_a_log():
    """--cpu-offload-gb beside --from-log plans the log's deployment with that much offloaded (not dropped)."""
    name = "vllm-vllm-offload-profiles-qwen2.5-7b-u086-rtx3090.log"
    base, offloaded = from_log(_log(name)), from_log(_log(name), cpu_offload_gb=3)
    assert offloaded.plan_args["cpu_offload_gb"] == 3
    assert offloaded.plan.per_gpu.offloaded_bytes >= 3 * 2**30
    assert base.plan.per_gpu.weights_bytes - offloaded.plan.per_gpu.weights_bytes >= 3 * 2**30


def test_enforce_eager_charges_no_cuda_graphs(tmp_path):
    """vLLM 0.20+ charges its CUDA graphs before sizing the pool; --enforce-eager captures none (config/vllm.py
    VllmConfig.__post_init__: CUDAGraphMode.NONE), so the same start-up launched eager leaves exactly the plan's
    graph charge more for the cache (it was read as a graph-capturing launch: the flag was dropped)."""
    name = "vllm-awssamples-qwen3-coder-30b-tp4.log"  # vLLM 0.24, its `# command:` header on line 6
    graphs = from_log(_log(name))
    lines = _log(name).read_text().splitlines(keepends=True)
    assert lines[5].startswith("# command: vllm serve ")
    lines[5] = lines[5].rstrip("\n") + " --enforce-eager\n"
    eager = from_log(_write(tmp_path, "".join(lines)))
    assert eager.plan_args.get("cuda_graph_memory") == 0 and "cuda_graph_memory" not in graphs.plan_args
    g0, g1 = graphs.plan.per_gpu, eager.plan.per_gpu
    assert g0.cuda_graph_bytes > 0 and g1.cuda_graph_bytes == 0
    assert g1.available_kv_bytes - g0.available_kv_bytes == g0.cuda_graph_bytes


def test_unmodelled_launch_flags_are_named(tmp_path):
    """A launch flag that can move the pool and that kvplan does not model is named with its line (vLLM issue 21348
    launched the LMCache connector: 8.11 GiB logged, 10.15 from the flags alone); the config line, which prints every
    field, names none."""
    r = from_log(_log("vllm-issue21348-qwen3-235b-fp8-tp4.log"))
    said = [n for n in r.notes if "kvplan does not model" in n]
    assert len(said) == 1 and "--kv-transfer-config (line 6)" in said[0]
    plain = from_log(_log("vllm-codeindex53041548781-qwen2.5-72b-tp4-l40s.log"))
    assert not any("kvplan does not model" in n for n in plain.notes)
    p = _write(tmp_path, "# gpu: H100-SXM\n# model: llama-3.1-8b\n# engine: vllm==0.11\n"
               "INFO [arg_utils.py] non-default args: {'model': 'meta-llama/Llama-3.1-8B', "
               "'num_gpu_blocks_override': 512, 'compilation_config': {'cudagraph_capture_sizes': [1, 2]}}\n"
               "INFO [gpu_worker.py] Available KV cache memory: 50.00 GiB\n")
    notes = [n for n in from_log(p).notes if "kvplan does not model" in n]
    assert len(notes) == 1 and "--num-gpu-blocks-override (line 4)" in notes[0]
    assert "--compilation-config (line 4)" in notes[0]


def test_a_start_up_refused_from_its_flags_prints_no_launch_line_and_serves_nothing():
    """vLLM 0.17 at util 0.6 on an RTX 3090 (the log: 'Available KV cache memory: -0.7 GiB'): kvplan refuses it too;
    the plan's pool is a nominal 1 GiB that sizes the other rows, so it launches nothing and serves no request (it
    printed `--kv-cache-memory-bytes 1073741824` and 2.29 concurrent requests)."""
    path = _log("vllm-vllm-offload-profiles-qwen2.5-7b-u060-failed-rtx3090.log")
    assert "Available KV cache memory: -0.7 GiB" in path.read_text()
    r = from_log(path)
    assert {x.figure: x.flags_verdict for x in r.rows}["available"] == "refused, as logged"
    assert r.plan.launch_command is None and not r.plan.fits and r.plan.max_concurrency == 0
    assert r.plan.verdict.startswith("refused") and "nominal 1 GiB" in r.plan.notes[0]
    weights = next(x for x in r.rows if x.figure == "weights")
    assert weights.flags_verdict == "exact"  # the other rows are still planned
