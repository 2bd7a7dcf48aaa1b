"""`kvplan plan --from-log`: what a log file may hold beyond one clean start-up (QA report B): long digit runs and
absurd figures, several start-ups, two engines' lines, a multi-MB server log, `# model:` paths relative to the log."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from helpers import one_line_error

LOGS = Path(__file__).resolve().parents[1] / "docs" / "logs"
SERVE = LOGS / "vllm-tokenkaki-qwen3-8b-a100-40gb-serve.log"  # Qwen3-8B, A100-40GB, vLLM 0.19, one start-up
U075 = LOGS / "vllm-vllm-offload-profiles-llama-3.1-8b-u075-rtx3090.log"  # Llama-3.1-8B, RTX 3090, util 0.75
U090 = LOGS / "vllm-vllm-offload-profiles-llama-3.1-8b-u090-rtx3090.log"  # the same at util 0.9
SGLANG = LOGS / "sglang-pr4760-llama-3.1-8b-h100.log"


def _body(path: Path) -> str:
    return "".join(line for line in path.read_text().splitlines(keepends=True) if not line.startswith("# "))


def _write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


# ---- D2: bounded work per line, figures out of range -------------------------------------------------------------

def test_a_long_digit_run_is_read_in_linear_time(tmp_path, cli_json):
    """A pattern that begins with its number was tried at every digit of a run: 20,000 digits took a minute."""
    p = _write(tmp_path, "x.log", SERVE.read_text() + "INFO request id " + "7" * 200_000 + "\n"
               + "INFO 1" * 30_000 + " GiB for weight\n")
    start = time.perf_counter()
    data = cli_json("plan", "--from-log", str(p))
    assert time.perf_counter() - start < 10  # quadratic: hours
    assert {r["figure"]: r["logged"]["text"] for r in data["rows"]}["tokens"] == "140,960"


def test_a_figure_out_of_range_names_the_line(tmp_path, cli):
    head = "# gpu: A100-40GB\n# model: qwen3-8b\nINFO Model loading took 15.27 GiB memory\n"
    for number in ("9" * 400, "99999999999999", "9" * 40_000):
        p = _write(tmp_path, "x.log", head + f"INFO Available KV cache memory: {number} GiB\n")
        err = one_line_error(cli, "plan", "--from-log", str(p))
        assert f"{p}:4: memory left for the KV cache" in err and "allowed: at most" in err and len(err) < 300
    p = _write(tmp_path, "x.log", head + "INFO Available KV cache memory: 1.00 GiB\n"
               f"INFO Current kv cache memory in use is {'9' * 5000} bytes\n")
    assert f"{p}:5: kv cache memory in use" in one_line_error(cli, "plan", "--from-log", str(p))


# ---- D3: several start-ups ---------------------------------------------------------------------------------------

def test_two_start_ups_read_the_last_and_say_so(tmp_path, cli_json):
    """Two single-GPU boots in one file (a restart appended) were read as TP 2 by counting the pids that loaded
    weights; the last start-up is read, TP from its flags (none: 1), and the output says so."""
    p = _write(tmp_path, "two.log", U075.read_text() + _body(U090))
    data = cli_json("plan", "--from-log", str(p))
    assert data["plan"]["inputs"]["tp"] == 1 and "tp" not in data["log"]["flags"]
    assert data["log"]["startups"] == [6, 11] and data["log"]["startup"] == 11
    rows = {r["figure"]: r for r in data["rows"]}
    assert rows["tokens"]["logged"]["text"] == "46,544" and rows["tokens"]["logged"]["line"] == 14
    assert any("holds 2 start-ups" in n and "from line 11, is read" in n for n in data["notes"])
    assert abs(rows["weights"]["flags_error_pct"]) < 0.5  # one GPU's weights, not half of them
    one = cli_json("plan", "--from-log", str(U090))
    assert {r["figure"]: r["flags_alone"] for r in one["rows"]} == {r["figure"]: r["flags_alone"] for r in data["rows"]}


def test_v0_workers_still_give_the_world_size():
    """V0's "(VllmWorkerProcess pid=N)" lines and the driver's: one process per GPU (gemma-3-27b, TP 4)."""
    from kvplan.planning.capacity.logparse import parse_log

    lg = parse_log(LOGS / "vllm-issue16378-gemma-3-27b-it.log")
    assert lg.flags["tp"] == 4 and lg.flag_sources["tp"] == "one weights line per GPU"


def test_every_public_log_is_one_start_up_of_one_engine():
    from kvplan.planning.capacity.logparse import parse_log

    for path in sorted(LOGS.rglob("*.log")):
        lg = parse_log(path)
        assert lg.startups == [] and lg.size_bytes is None, path.name


# ---- D6: two engines' lines, a contradicting `# engine:` header ---------------------------------------------------

def test_two_engines_lines_are_refused(tmp_path, cli):
    for first, second in ((SERVE, SGLANG), (SGLANG, SERVE)):
        p = _write(tmp_path, "mix.log", first.read_text() + _body(second))
        err = one_line_error(cli, "plan", "--from-log", str(p))
        assert "vLLM's lines (line" in err and "SGLang's (line" in err and "two engines" in err


def test_an_engine_header_contradicting_the_lines_is_refused(tmp_path, cli):
    p = _write(tmp_path, "x.log", SERVE.read_text().replace("# engine: vllm==0.19", "# engine: sglang==0.5.6"))
    err = one_line_error(cli, "plan", "--from-log", str(p))
    assert err.startswith(f"error: {p}:4: `# engine: sglang==0.5.6` contradicts") and "vLLM's (line" in err
    p = _write(tmp_path, "y.log", "# engine: vllm==0.10\n# model: llama-3.1-8b\n# gpu: H100-SXM\n" + _body(SGLANG))
    assert "which are SGLang's" in one_line_error(cli, "plan", "--from-log", str(p))


# ---- D13: a server log of many MB --------------------------------------------------------------------------------

def test_a_long_server_log_reads_its_first_mib(tmp_path, cli_json):
    traffic = ("(APIServer pid=1) INFO 06-25 17:25:01 [loggers.py:127] Engine 000: Avg prompt throughput: 1234.5 "
               "tokens/s, Avg generation throughput: 345.6 tokens/s, Running: 12 reqs, GPU KV cache usage: 12.3%\n")
    p = _write(tmp_path, "big.log", SERVE.read_text() + traffic * 60_000)  # about 10 MB
    data = cli_json("plan", "--from-log", str(p))
    assert data["log"]["size_bytes"] == p.stat().st_size and data["log"]["read_bytes"] <= 4 << 20
    assert any("its first 4 MiB" in n for n in data["notes"])
    assert {r["figure"]: r["logged"]["text"] for r in data["rows"]}["tokens"] == "140,960"


# ---- D14: `# model:` paths -----------------------------------------------------------------------------------------

def test_model_header_paths_resolve_from_the_log(tmp_path, monkeypatch, cli_json, cli):
    """A bundled log copied elsewhere (its `# model: tests/data/...` is kvplan's tree), a config beside the log, and a
    path found nowhere (the error names the header line), each run from an unrelated working directory."""
    pp2 = LOGS / "vllm-code31259794699-qwen3-30b-a3b-pp2-gh200.log"
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    copied = tmp_path / "copy.log"
    shutil.copy(pp2, copied)
    assert cli_json("plan", "--from-log", str(copied))["model"] == "qwen3-30b-a3b-instruct-2507"
    (tmp_path / "logs").mkdir()
    shutil.copy(Path(__file__).parent / "data" / "configs" / "qwen3-30b-a3b-instruct-2507.json",
                tmp_path / "logs" / "q.json")
    beside = _write(tmp_path / "logs", "beside.log", pp2.read_text().replace(
        "# model: tests/data/configs/qwen3-30b-a3b-instruct-2507.json", "# model: q.json"))
    assert cli_json("plan", "--from-log", str(beside))["model_how"] == "the `# model:` header (q.json)"
    bad = _write(tmp_path, "bad.log", pp2.read_text().replace(
        "# model: tests/data/configs/qwen3-30b-a3b-instruct-2507.json", "# model: nowhere/q.json"))
    err = one_line_error(cli, "plan", "--from-log", str(bad))
    assert err.startswith(f"error: {bad}:4: `# model: nowhere/q.json`: no such card or config")


# ---- D7: what --calibrate says it reproduces ----------------------------------------------------------------------

A10_V0 = LOGS / "vllm-code14319663172-llama-3.1-8b-a10.log"  # V0 0.7.1, max_model_len 131072 does not fit
FAILED = LOGS / "vllm-vllm-offload-profiles-qwen2.5-7b-u060-failed-rtx3090.log"  # -0.7 GiB logged, util 0.6


def test_calibrate_reproduces_only_what_matches_the_log(tmp_path, cli_json, cli):
    """A log whose tokens line does not follow from its pool was said to be reproduced "to the byte"."""
    edited = _write(tmp_path, "b.log", SERVE.read_text().replace("GPU KV cache size: 140,960 tokens",
                                                                 "GPU KV cache size: 150,960 tokens"))
    c = cli_json("plan", "--from-log", str(edited), "--calibrate")["calibration"]
    assert c["reproduces_log"] is False and "140,960 against 150,960 logged (line 19)" in c["reproduction"]
    c = cli_json("plan", "--from-log", str(SERVE), "--calibrate")["calibration"]
    assert c["reproduces_log"] is True and "tokens" in c["reproduction"]
    sglang = cli_json("plan", "--from-log", str(LOGS / "sglang-didierdurand-qwq-32b-l4.log"), "--calibrate")
    how = sglang["calibration"]["reproduction"]
    assert "token count" in how and "vLLM" not in how


def test_calibrate_refuses_another_model_or_engine(cli, cli_json):
    err = one_line_error(cli, "plan", "--from-log", str(SERVE), "--calibrate", "--model", "llama-3-8b")
    assert err.startswith("error: --model: --calibrate reuses the overheads") and "qwen3-8b" in err
    err = one_line_error(cli, "plan", "--from-log", str(SERVE), "--calibrate", "--engine", "sglang")
    assert err.startswith("error: --engine: --calibrate reuses the overheads")
    same = cli_json("plan", "--from-log", str(SERVE), "--calibrate", "--engine", "vllm==0.19")["calibration"]
    assert same["what_ifs"] == {} and same["reproduces_log"] is True  # the log's own release, said again


# ---- D8: failed start-ups, values read from headers ---------------------------------------------------------------

def test_a_failed_start_up_is_compared_and_calibrated(tmp_path, cli_json):
    """The engine stopped ("No available memory for the cache blocks"): the table comes from the flags, the logged
    pool is not handed to a plan (it named --kv-cache-memory, which nobody passed), and --calibrate takes the negative
    pool as the measured budget: no what-if refuses as the engine did, a higher utilization says what fits."""
    data = cli_json("plan", "--from-log", str(FAILED), "--gpu-memory-utilization", "0.7")
    assert data["pooled"] is None and any("refused to start" in n for n in data["notes"])
    for pool in ("-0.50", "0.00"):
        p = _write(tmp_path, "x.log", U075.read_text().replace("Available KV cache memory: 2.13",
                                                                f"Available KV cache memory: {pool}"))
        rows = {r["figure"]: r for r in cli_json("plan", "--from-log", str(p))["rows"]}
        assert rows["available"]["flags_verdict"] == "off" and rows["tokens"]["pool_verdict"] is None
    c = cli_json("plan", "--from-log", str(FAILED), "--calibrate")
    cal = c["calibration"]
    assert cal["plan"] is None and cal["refused"] and cal["reproduces_log"] is True
    assert c["logged_pool_bytes"] == round(-0.7 * 2**30)
    util = cli_json("plan", "--from-log", str(FAILED), "--calibrate", "--gpu-memory-utilization", "0.7")["calibration"]
    gain = util["plan"]["kv_cache"]["available_bytes"] - c["logged_pool_bytes"]
    assert abs(gain - 0.1 * util["plan"]["inputs"]["gpu_memory_bytes"]) < 2  # 0.1 x the total, nothing else moved


def test_a_value_from_a_header_or_a_line_is_named_so(tmp_path, cli):
    p = _write(tmp_path, "g.log", U075.read_text().replace("# gpu: RTX-3090", "# gpu: NoSuchGPU"))
    assert f"{p}: --gpu (from the `# gpu:` header, line 3): unknown GPU" in one_line_error(
        cli, "plan", "--from-log", str(p))
    p = _write(tmp_path, "e.log", U075.read_text().replace("# engine: vllm==0.17", "# engine: vllm-banana"))
    assert one_line_error(cli, "plan", "--from-log", str(p)).startswith(f"error: {p}:5: `# engine: vllm-banana`")
    p = _write(tmp_path, "r.log", "# gpu: H100-SXM\n# model: llama-3.1-8b\n(VllmWorker rank=60000 pid=5) INFO Model "
               "loading took 14.99 GiB\nINFO Available KV cache memory: 10.00 GiB\n")
    assert f"{p}: --tp (from the log's worker ranks, line 3):" in one_line_error(cli, "plan", "--from-log", str(p))


# ---- D10: flags that change the log's deployment --------------------------------------------------------------------

def test_flags_that_change_the_logs_deployment_are_not_scored(cli_json):
    data = cli_json("plan", "--from-log", str(A10_V0), "--max-model-len", "4096")
    rows = {r["figure"]: r for r in data["rows"]}
    assert rows["concurrency"]["flags_verdict"] == rows["concurrency"]["pool_verdict"] == "not comparable"
    assert rows["concurrency"]["flags_error_pct"] is None
    own = {r["figure"]: r for r in cli_json("plan", "--from-log", str(A10_V0))["rows"]}
    # the longest length that fits is the pool's, not capped at the length asked for; at 4,096 the V0 profile's
    # forward covers 4,096 tokens (not the log's chunked 2,048), whose output it holds beside the sort: 16 MiB more
    assert own["longest_fit"]["flags_alone"] == 29_760
    assert rows["longest_fit"]["flags_alone"] == 29_632 > 4096
    assert own["blocks"]["flags_verdict"] == "off"
    assert rows["blocks"]["flags_verdict"] == "not comparable"  # the profile (and so the pool) is not the log's
    assert any("--max-model-len 4096 (the log's 131072" in n and "not comparable" in n for n in data["notes"])
    fp8 = {r["figure"]: r for r in cli_json("plan", "--from-log", str(SERVE), "--kv-dtype", "fp8")["rows"]}
    assert fp8["tokens"]["flags_verdict"] == fp8["tokens"]["pool_verdict"] == "not comparable"
    gpu = cli_json("plan", "--from-log", str(SERVE), "--gpu", "H100-SXM")
    rows = {r["figure"]: r for r in gpu["rows"]}
    assert rows["tokens"]["flags_verdict"] == "not comparable" and rows["tokens"]["pool_verdict"] == "exact"
    assert any("--gpu H100-SXM (the log's A100-40GB)" in n for n in gpu["notes"])
    # a length the log does not state is taken as the log's and scored
    unstated = cli_json("plan", "--from-log", str(LOGS / "vllm-code61815222665-qwen2.5-0.5b-rtx4090-v2runner.log"),
                        "--max-model-len", "4096")
    assert {r["figure"]: r["flags_verdict"] for r in unstated["rows"]}["tokens"] == "off"
    assert any("does not state it; taken as the log's" in n for n in unstated["notes"])


# ---- D11: --calibrate what-ifs as the help says ---------------------------------------------------------------------

def test_calibrate_what_ifs_say_what_they_keep(cli_json):
    long = cli_json("plan", "--from-log", str(SERVE), "--calibrate", "--max-model-len", "100000")["calibration"]
    assert any("exceeds the model's max_position_embeddings (40960)" in n for n in long["notes"])
    seqs = cli_json("plan", "--from-log", str(SERVE), "--calibrate", "--max-num-seqs", "64")["calibration"]
    assert seqs["activation_measured"] is False and seqs["plan"]["per_gpu"]["activation_estimated"] is True
    assert "ESTIMATED" in seqs["plan"]["per_gpu"]["activation_rule"]
    assert not any("the measured" in t for t in seqs["scaled"])
    assert any("kvplan's estimated" in t for t in seqs["scaled"])
    v0 = cli_json("plan", "--from-log", str(A10_V0), "--calibrate", "--max-model-len", "8192")["calibration"]
    # V0's estimate grows with the profile's tokens (the forward's output it holds beside the sort): scaled by it
    assert any("moved by kvplan's estimate's change" in t for t in v0["scaled"])
    from typing import get_args

    from kvplan.cli import options

    assert "--tp/--pp (from a multi-GPU log" in get_args(options.Calibrate)[1].help  # not among the exact ones
