"""`kvplan plan --from-log` / `--calibrate`: every public log in docs/logs/ read and reproduced, the parser on each
line kind, the verdicts and their tolerances, calibration's exactness."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvplan.cli.app import app
from kvplan.errors import KvplanError
from kvplan.planning.fromlog import from_log, judge
from kvplan.planning.logparse import GIB, Figure, parse_log

LOGS = sorted((Path(__file__).resolve().parents[1] / "docs" / "logs").glob("*.log"))
AGREE = ("exact", "within rounding")
# logged-pool figures that differ for a reason outside kvplan's block arithmetic (docs/capacity.md, "Misses,
# explained"); each must stay off, so the list cannot outlive its reason
KNOWN_MISSES = {
    ("vllm-issue21348-qwen3-235b-fp8-tp4.log", "tokens"): "the logged pool is one rank's and the run used the LMCache "
    "connector: 178,880 tokens x 48,128 B is 8.02 GiB, not the 8.11 GiB logged",
    ("sglang-didierdurand-qwq-32b-tp4.log", "max_running_requests"): "SGLang 0.4.3 logs 2,049, one above 0.5.23's "
    "resolve_max_num_reqs (min(clamp(46,611 / 131,072 x 512, 2048, 4096), 46,611 // 2) = 2,048), the release "
    "kvplan models",
}


@pytest.mark.parametrize("path", LOGS, ids=[p.name for p in LOGS])
def test_every_log_reproduced_from_its_logged_pool(path):
    """Every figure the logged-pool column predicts agrees with the log within the log's own rounding."""
    r = from_log(path)
    assert r.rows, "a log in docs/logs states no figure"
    compared = [x for x in r.rows if x.pool_verdict is not None]
    assert compared, "nothing compared from the logged pool"
    for x in compared:
        if (path.name, x.figure) in KNOWN_MISSES:
            assert x.pool_verdict == "off", (x.figure, "agrees now: drop it from KNOWN_MISSES")
        else:
            assert x.pool_verdict in AGREE, (x.figure, x.logged.text, x.logged_pool, x.pool_low, x.pool_high)


@pytest.mark.parametrize("path", LOGS, ids=[p.name for p in LOGS])
def test_calibrate_without_what_if_reproduces_the_logged_pool(path):
    r = from_log(path, calibrate=True)
    c = r.calibration
    assert c.reproduces_log
    if r.logged_pool_bytes is not None:
        assert c.plan.kv_cache.available_bytes == r.logged_pool_bytes
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
    assert got == {"weights": "74.2812", "activation": "5.58", "non_torch": "1.38", "cuda_graph": "2.37",
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
    # vLLM V0's worker.py determine_num_available_blocks and gpu_executor.py lines (serving-budget.md quotes the first)
    p = _write(tmp_path, "# model: llama-3.1-8b\n"
               "INFO 11-20 10:00:00 llm_engine.py:237] Initializing an LLM engine (v0.6.4) with config: "
               "model='meta-llama/Llama-3.1-8B', dtype=torch.bfloat16, max_seq_len=20000, tensor_parallel_size=1\n"
               "INFO worker.py:232] Memory profiling takes 5.13 seconds\n"
               "the current vLLM instance can use total_gpu_memory (79.19GiB) x gpu_memory_utilization (0.90) = "
               "71.27GiB\n"
               "model weights take 14.99GiB; non_torch_memory takes 0.21GiB; PyTorch activation peak memory takes "
               "4.35GiB; the rest of the memory reserved for KV Cache is 51.72GiB.\n"
               "INFO gpu_executor.py:122] # GPU blocks: 26480, # CPU blocks: 2048\n"
               "INFO gpu_executor.py:126] Maximum concurrency for 20000 tokens per request: 21.18x\n")
    lg = parse_log(p)
    assert lg.version == "0.6.4" and lg.flags["max_model_len"] == 20000
    assert {f.name: lg.figure(f.name).value for f in lg.figures} == {"weights": 14.99, "activation": 4.35, "non_torch": 0.21,
                                                      "available": 51.72, "blocks": 26480, "concurrency": 21.18}
    assert lg.total_memory_gib.value == 79.19
    r = from_log(p)
    assert r.gpu == "H100-SXM"  # 79.19 GiB: the catalog's H100 SXM visible total
    assert any("not modelled" in n for n in r.notes)  # V0 runs on the oldest modelled range, said so


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
    assert lg.free_at_start_gib.value == 21.63 and lg.figure("weights").value == 15.54
    assert lg.figure("available").value == pytest.approx(2.84) and lg.figure("available").rounding == 0.01
    assert lg.figure("tokens").value == 46611


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


def test_calibrate_refuses_what_it_cannot_answer():
    with pytest.raises(KvplanError, match="NCCL"):
        from_log(_log(QWEN_8B), calibrate=True, tp=2)


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
