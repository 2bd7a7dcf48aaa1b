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
