"""Hardened input, round 2 (issue 22): the gate itself, writes, limits, names other programs read, crashes.

Property tests (Hypothesis) generate the inputs of each class: malformed baselines and configs, odd paths and file
kinds, huge grids and numbers, names with control characters. Each either works or ends in one ``error:`` line
(exit 2) naming the file, field or flag; never "ok" on a baseline kvplan cannot read, never a traceback.
"""

from __future__ import annotations

import json
import math
import os
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from kvplan.cli.app import app

FAST = settings(max_examples=30, deadline=timedelta(seconds=3), database=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
CONFIG = '[[scenarios]]\nname = "x"\nmodel = "llama-2-7b"\nseq_len = 8\n'


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def refused(*args: str) -> str:
    """Exit 2 with one 'error:' line and no traceback; returns the line."""
    code, out, err = run(*args)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), (code, out[-500:], err[-2000:])
    return lines[0]


@pytest.fixture
def gate(tmp_path, monkeypatch):
    """A project with kvplan.toml (one bundled-card scenario) and a baseline written by kvplan itself."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    (tmp_path / "kvplan.toml").write_text(CONFIG)
    assert run("check", "--update-baseline")[0] == 0
    good = (tmp_path / "kvplan-baseline.json").read_text()
    return tmp_path, good


# ---- the gate passes only on a baseline it can read --------------------------------------------------------------

FIGURE_VALUES = st.one_of(st.floats(allow_nan=True, allow_infinity=True).filter(lambda v: not math.isfinite(v) or v < 0),
                          st.text(max_size=5), st.booleans(), st.none(), st.lists(st.integers(), max_size=2),
                          st.integers(max_value=-1), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))


@FAST
@given(figure=st.sampled_from(["kv_bytes", "kv_bytes_per_token", "weights_bytes", "total_bytes"]),
       value=FIGURE_VALUES)
def test_a_baseline_figure_kvplan_cannot_read_is_refused(gate, figure, value):
    path = gate[0] / "kvplan-baseline.json"
    data = json.loads(gate[1])
    data["scenarios"]["x"]["figures"][figure] = value
    path.write_text(json.dumps(data))  # NaN and Infinity as Python writes them
    line = refused("check")
    assert "kvplan-baseline.json" in line and f"scenarios.x.figures.{figure}" in line, line


@FAST
@given(st.one_of(st.just("[]"), st.just('"s"'), st.just("3"), st.just("null"), st.just("{}"),
                 st.integers(33, 3000).map(lambda n: "[" * n + "]" * n),
                 st.just('{"schema_version": 1, "scenarios": []}'),
                 st.just('{"schema_version": 1, "scenarios": {"x": []}}'),
                 st.just('{"schema_version": true, "scenarios": {}}'),
                 st.just('{"schema_version": 1, "scenarios": {"x": {"figures": {"kv_bytes": 1}, "more": 1}}}'),
                 st.binary(max_size=40).map(lambda b: b.decode("latin-1"))))
def test_a_baseline_of_the_wrong_shape_is_refused(gate, text):
    (gate[0] / "kvplan-baseline.json").write_text(text, encoding="utf-8")
    assert "kvplan-baseline.json" in refused("check")


def test_a_deep_baseline_and_a_grown_kv_cache(gate):
    path = gate[0] / "kvplan-baseline.json"
    path.write_text('{"schema_version": 1, "scenarios": ' + "[" * 100_000 + "]" * 100_000 + "}")
    assert "nested deeper than 32 levels" in refused("check")
    assert run("check", "--update-baseline")[0] == 0  # a damaged baseline (it holds "schema_version") is rewritten
    data = json.loads(path.read_text())
    data["scenarios"]["x"]["figures"]["kv_bytes"] //= 8  # the cache grew 8x since: the gate fails
    path.write_text(json.dumps(data))
    code, out, _ = run("check")
    assert code == 1 and "kv_bytes grew" in out


@pytest.mark.parametrize("config, where", [
    ('baseline = "../outside.json"\n' + CONFIG, "baseline: "),
    ('baseline = "/tmp/b.json"\n' + CONFIG, "baseline: "),
    ('baseline = "a\\u0000b"\n' + CONFIG, "baseline: "),
    (CONFIG.replace('"x"', '"x\\n::error::pwned"'), "name: "),
    (CONFIG.replace('"x"', '"\\u001b]0;title\\u0007"'), "name: "),
    (CONFIG + "tolerance = nan\n", "tolerance: "),
    (CONFIG + "mbu = inf\n", "mbu: "),
    (CONFIG + 'max_kv_bytes = "' + "9" * 5000 + ' GiB"\n', "max_kv_bytes: "),
    (CONFIG + 'max_kv_bytes = "99999999999 EiB"\n', "max_kv_bytes: "),
    ("a = " + "[" * 5000 + "]" * 5000 + "\n", "nested deeper"),
    ("a = " + "9" * 5000 + "\n", "not valid TOML"),
])
def test_bad_configs_exit_2_naming_the_key(tmp_path, monkeypatch, config, where):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "kvplan.toml").write_text(config)
    line = refused("check")
    assert "kvplan.toml" in line and where in line, line
    assert "\x1b" not in line and len(line) < 400


def test_a_baseline_symlinked_out_of_the_repository(tmp_path, monkeypatch):
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "repo")
    (tmp_path / "repo" / "kvplan.toml").write_text(CONFIG)
    (tmp_path / "repo" / "kvplan-baseline.json").symlink_to(tmp_path / "elsewhere.json")
    assert "outside the repository" in refused("check", "--update-baseline")
    assert not (tmp_path / "elsewhere.json").exists()
    (tmp_path / "repo" / "sub").mkdir()
    (tmp_path / "repo" / "sub" / "kvplan.toml").write_text('baseline = "../b.json"\n' + CONFIG)
    assert run("check", "--config", "sub/kvplan.toml", "--update-baseline")[0] == 0  # inside the repository
    assert (tmp_path / "repo" / "b.json").is_file()


@pytest.mark.parametrize("text", [b"# caf\xe9\n", b"\xff\xfe[\x00", "tool = 5\n".encode(), b'[tool]\nkvplan = 3\n'])
def test_bad_pyproject_and_encodings(tmp_path, monkeypatch, text):
    monkeypatch.chdir(tmp_path)
    name = "pyproject.toml" if b"tool" in text else "kvplan.toml"
    (tmp_path / name).write_bytes(text)
    assert name in refused("check")


# ---- writes: never replace what is not the user's own regular file ----------------------------------------------

import socket
import stat
import subprocess
import sys
import threading

from kvplan.errors import KvplanError
from kvplan.files import write_atomic, write_folder_atomic

MAIN = "import sys; sys.argv = ['kvplan', *sys.argv[1:]]\nfrom kvplan.cli import main\nmain()"  # the script's
SWEEP = ("sweep", "-m", "llama-2-7b", "--seq-len", "1,2", "--format", "csv")
KINDS = ["new", "file", "readonly", "symlink-file", "dangling", "folder", "null-device", "symlink-device", "fifo",
         "socket"]


def _make(folder, kind: str):
    path = folder / f"{kind}.csv"
    if kind in ("file", "readonly"):
        path.write_text("keep\n")
    elif kind == "symlink-file":
        (folder / "real.csv").write_text("keep\n")
        path.symlink_to(folder / "real.csv")
    elif kind == "dangling":
        path.symlink_to(folder / "gone.csv")
    elif kind == "folder":
        path.mkdir()
    elif kind == "null-device":
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # a /dev/null of our own: root only
    elif kind == "symlink-device":
        path.symlink_to(os.devnull)
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "socket":
        s = socket.socket(socket.AF_UNIX)
        s.bind(str(path))
        s.close()
    return path


def _leftovers(folder) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith((".tmp", ".old")))


@pytest.mark.skipif(os.geteuid() != 0 or not sys.platform.startswith("linux"), reason="mknod needs root on Linux")
@FAST
@given(kind=st.sampled_from(KINDS), command=st.sampled_from(["sweep", "junit", "import"]))
def test_outputs_never_replace_what_is_not_a_writable_regular_file(tmp_path_factory, monkeypatch, kind, command):
    folder = tmp_path_factory.mktemp("out")
    path = _make(folder, kind)
    before = os.lstat(path).st_mode if os.path.lexists(path) else None
    if kind == "readonly":  # root opens anything: deny the open for writing as for another user's 0444 file
        real_open = os.open

        def denied(p, flags, *a):
            if os.fspath(p) == os.fspath(path) and flags & os.O_WRONLY:
                raise PermissionError(13, "Permission denied")
            return real_open(p, flags, *a)

        monkeypatch.setattr("kvplan.writes.os.open", denied)
    reader = None
    if kind == "fifo":  # a reader at the other end, as `kvplan sweep -o pipe & cat pipe`
        got = []
        reader = threading.Thread(target=lambda: got.append(open(path).read()))
        reader.start()
    if command == "sweep":
        code, out, err = run(*SWEEP, "-o", str(path))
    elif command == "junit":
        monkeypatch.chdir(folder)
        (folder / "kvplan.toml").write_text(CONFIG)
        code, out, err = run("check", "--junit", str(path))
    else:
        cfg = folder / "config.json"
        cfg.write_text(json.dumps({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
                                   "num_attention_heads": 4, "vocab_size": 128, "intermediate_size": 96,
                                   "max_position_embeddings": 64}))
        code, out, err = run("cards", "import", str(cfg), "-o", str(path), "--force")
    monkeypatch.undo()
    if reader is not None:
        if code != 0:
            open(path, "w").close()  # release the reader
        reader.join(5)
    assert code in (0, 2), (code, err)
    if code == 2:
        assert len(err.strip().splitlines()) == 1 and err.startswith("error: ")
    after = os.lstat(path).st_mode if os.path.lexists(path) else None
    if kind in ("new", "file"):
        assert code == 0 and stat.S_ISREG(after)
    else:  # every other kind is what it was: streamed into (devices, FIFOs) or refused, never replaced
        assert stat.S_IFMT(after) == stat.S_IFMT(before), kind
        assert code == (0 if kind in ("null-device", "symlink-device", "fifo") else 2), (kind, err)
    if kind in ("readonly", "symlink-file"):
        assert (folder / ("real.csv" if kind == "symlink-file" else "readonly.csv")).read_text() == "keep\n"
    if kind == "dangling":
        assert not (folder / "gone.csv").exists()
    if kind == "fifo" and command == "sweep":
        assert got and got[0].startswith("model,engine")
    assert _leftovers(folder) == []


def test_dev_stdout_is_streamed_into(tmp_path):
    for shell in ('"$@"', '"$@" > out.csv', '"$@" | cat'):  # a pipe, a file, a pipe again: fd 1, never renamed
        proc = _kvplan(*SWEEP, "-o", "/dev/stdout", shell=shell, cwd=tmp_path)
        out = (tmp_path / "out.csv").read_text() if "out.csv" in shell else proc.stdout
        assert proc.returncode == 0 and out.startswith("model,engine"), proc.stderr
    assert _leftovers(tmp_path) == []


def test_charts_folder_is_written_whole_and_replaced_without_stale_files(tmp_path, monkeypatch):
    owned = lambda name: name.startswith("chart-")  # noqa: E731
    folder = tmp_path / "r_charts"
    write_folder_atomic(folder, {"chart-1.svg": "a", "chart-2.svg": "b", "chart-3.svg": "c"}, owned)
    write_folder_atomic(folder, {"chart-1.svg": "A"}, owned)
    assert sorted(p.name for p in folder.iterdir()) == ["chart-1.svg"]  # no stale chart-2, chart-3
    real_open = open

    def full(path, *args, **kwargs):
        if str(path).endswith("chart-2.svg"):
            raise OSError(28, "No space left on device")
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr("builtins.open", full)
    with pytest.raises(KvplanError, match="r_charts: cannot write: no space left on device"):
        write_folder_atomic(folder, {"chart-1.svg": "x", "chart-2.svg": "y"}, owned)
    monkeypatch.undo()
    assert [p.read_text() for p in folder.iterdir()] == ["A"] and _leftovers(tmp_path) == []
    (folder / "notes.txt").write_text("mine")
    with pytest.raises(KvplanError, match="notes.txt, which kvplan did not write"):
        write_folder_atomic(folder, {"chart-1.svg": "x"}, owned)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "l_charts").symlink_to(elsewhere)
    with pytest.raises(KvplanError, match="l_charts: a symbolic link"):
        write_folder_atomic(tmp_path / "l_charts", {"chart-1.svg": "x"}, owned)
    assert list(elsewhere.iterdir()) == [] and _leftovers(tmp_path) == []


def test_sigterm_removes_the_temporary_file_like_ctrl_c(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", MAIN, "sweep", "-m", "llama-2-7b", "--batch", "1..1000+1", "--seq-len", "1..9000+1",
                             "-o", "out.csv"], cwd=tmp_path, env={**os.environ, "PYTHONPATH": os.getcwd()},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    import time

    deadline = time.monotonic() + 20
    while not _leftovers(tmp_path) and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.02)
    proc.terminate()
    _, err = proc.communicate(timeout=20)
    assert proc.returncode == 143, err
    assert "Traceback" not in err and sorted(p.name for p in tmp_path.iterdir()) == []


def test_an_unwritable_step_summary_warns_after_the_result(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "kvplan.toml").write_text(CONFIG)
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path))  # a folder
    code, out, err = run("check")
    assert code == 0 and out.rstrip().endswith("nothing was checked")  # no budget, no baseline: the result line
    assert err.startswith("warning: $GITHUB_STEP_SUMMARY") and len(err.strip().splitlines()) == 1


def _kvplan(*args: str, shell: str = '"$@"', env: dict | None = None, **kwargs) -> subprocess.CompletedProcess:
    """``kvplan ARGS`` in a fresh interpreter through main(), inside ``bash -c SHELL`` (redirections, pipes)."""
    argv = [sys.executable, "-c", MAIN, *args]
    return subprocess.run(["bash", "-c", shell, "kvplan", *argv], text=True, env={
        **os.environ, "PYTHONPATH": os.getcwd(), **(env or {})}, **{"capture_output": True, **kwargs})


@pytest.mark.parametrize("args", [("estimate", "-m", "llama-2-7b", "--seq-len", "8"),
                                  ("sweep", "-m", "llama-2-7b", "--seq-len", "1..3000+1", "--format", "csv")])
def test_stdout_full_closed_or_left(args):
    for shell in ('"$@" > /dev/full', '"$@" >&-'):
        proc = _kvplan(*args, shell=shell)
        assert proc.returncode == 2 and proc.stderr.startswith("error: stdout: cannot write: "), proc.stderr
        assert len(proc.stderr.splitlines()) == 1
    left = _kvplan(*args, shell='"$@" | head -c 1 >/dev/null; exit ${PIPESTATUS[0]}')
    assert left.returncode == 0 and left.stderr == "", left.stderr
    ascii_out = _kvplan(*args, env={"PYTHONIOENCODING": "ascii"})
    assert ascii_out.returncode == 0 and ascii_out.stderr == "" and ascii_out.stdout


# ---- unbounded work is refused at once --------------------------------------------------------------------------

import time

from kvplan.planning.sweep.grid import MAX_ROWS

GPU_ENTRY = ("    vendor: T\n    memory_bytes: 80000000000\n    memory_bandwidth_bytes_per_s: 2000000000000\n"
             "    peak_flops: {fp32: 6.7e+13, fp16: 9.9e+14, bf16: 9.9e+14}\n    source: https://example.org\n")


@settings(FAST, max_examples=8)
@given(batch=st.sampled_from(["1..100000+1", "1..1000000+1", "1,2,3", "1..1000000000000*2"]),
       seq_len=st.sampled_from(["1..100000+1", "1..1000000+1", "8", "1..1000+1"]),
       tp=st.sampled_from([None, "1..100000+1", "1..4096+1", "1,2"]),
       pp=st.sampled_from([None, "1..100000+1", "1..4096+1"]))
def test_huge_grids_are_refused_at_once_naming_rows_and_limit(batch, seq_len, tp, pp):
    args = ["sweep", "-m", "llama-2-7b", "--batch", batch, "--seq-len", seq_len, "--format", "csv"]
    args += ["--gpu", "H100-SXM"] if tp or pp else []
    args += (["--tp", tp] if tp else []) + (["--pp", pp] if pp else [])
    lengths = {"1..100000+1": 100_000, "1..1000000+1": 1_000_000, "1,2,3": 3, "1..1000000000000*2": 40, "8": 1,
               "1..1000+1": 1000}
    n = lengths[batch] * lengths[seq_len]
    big = n > MAX_ROWS or any(a is not None and "100000" in a for a in (tp, pp)) or (
        tp and pp and "4096" in tp and "4096" in pp)
    if not big:
        return  # a grid that runs: covered by tests/test_sweep.py
    start = time.process_time()  # CPU time, not wall: a loaded machine must not fail it, an enumerated grid does
    line = refused(*args)
    assert time.process_time() - start < 2, line
    assert f"at most {MAX_ROWS:,}" in line or "allowed: 1..4,096" in line, line


def test_one_axis_at_its_maximum_streams_and_a_big_table_is_refused():
    code, out, err = run("sweep", "-m", "llama-2-7b", "--batch", "1..20000+1", "--seq-len", "8", "--format", "table")
    assert code == 2 and "--format table: 20,000 rows; allowed: at most 10,000" in err
    from kvplan.planning.sweep import sweep

    blocks = sweep("llama-2-7b", batch="1..20000+1", seq_len="8").csv_blocks()
    assert max(n for _, n in blocks) == 4096  # bounded blocks, not one string per axis


def test_gpu_file_entries_are_bounded(tmp_path):
    (tmp_path / "g.yaml").write_text("gpus:\n" + "".join(f"  G{i}:\n{GPU_ENTRY}" for i in range(300)))
    line = refused("plan", "-m", "llama-2-7b", "--max-model-len", "4096", "--concurrency", "1", "--gpu-file",
                   str(tmp_path / "g.yaml"))
    assert "g.yaml: gpus: 300 entries; allowed: at most 256" in line


# ---- names other programs read: one printable line at the boundary, escaped by each format's rules -----------------

import csv as csv_module
import io
import re
from xml.etree import ElementTree as ET

NASTY = st.lists(st.sampled_from(list("ab|=+-@[]/%:,\\'\"<>&\n\r\t\x1b\x07\x00\u2028\u202e")
                                 + ["[bold]", "::error::", "%0A", "\x1b]0;t\x07"]),
                 min_size=1, max_size=8).map("".join)


def _printable(name: str) -> bool:
    """A name kvplan takes: one printable line, and a name by kvplan.errors.NAME_CHARS."""
    from kvplan.errors import name_problem

    return name.strip() != "" and name.isprintable() and name_problem(name) is None


@FAST
@given(name=NASTY)
def test_scenario_names_reach_no_output_raw(tmp_path_factory, monkeypatch, name):
    folder = tmp_path_factory.mktemp("names")
    monkeypatch.chdir(folder)
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(folder / "summary.md"))
    (folder / "kvplan.toml").write_text(CONFIG.replace('"x"', json.dumps(name)) + "max_kv_bytes = 1\n")
    code, out, err = run("check", "--format", "github", "--junit", "j.xml")
    if not _printable(name):
        assert code == 2 and "name: " in err and len(err.strip().splitlines()) == 1, err
        return
    assert code == 1, err
    commands = [line for line in out.splitlines() if line.startswith("::")]
    assert len(commands) == 1 and re.fullmatch(r"::error file=kvplan\.toml,line=\d+,title=[^:,\r\n]*::[^\r\n]+",
                                               commands[0]), commands
    assert "\x1b" not in out and "\x07" not in out
    cases = ET.parse(folder / "j.xml").getroot().iter("testcase")
    assert {c.get("classname") for c in cases} == {f"kvplan.{name}"}
    summary = (folder / "summary.md").read_text()
    rows = [line for line in summary.splitlines() if line.startswith("| ") and "kv_bytes" in line]
    assert rows and all(len(re.findall(r"(?<!\\)\|", r)) == 7 for r in rows), rows


def _gpu_file(folder, name: str):
    path = folder / "g.yaml"
    path.write_text("gpus:\n  " + json.dumps(name) + ":\n" + GPU_ENTRY)
    return path


@settings(FAST, max_examples=15)
@given(name=NASTY.filter(lambda n: "," not in n and n == n.strip()),  # --gpu takes a comma list of stripped names
       fmt=st.sampled_from(["csv", "markdown", "table", "jsonl"]))
def test_gpu_names_are_escaped_by_every_sweep_format(tmp_path_factory, name, fmt):
    path = _gpu_file(tmp_path_factory.mktemp("gpu"), name)
    args = ("sweep", "-m", "llama-2-7b", "--seq-len", "8,16", "--gpu", name, "--gpu-file", str(path), "--format", fmt)
    if not _printable(name):
        refused(*args)
        return
    code, out, err = run(*args)
    assert code == 0, err
    if fmt == "csv":
        rows = list(csv_module.DictReader(io.StringIO(out)))
        cell = rows[0]["gpu"]
        assert cell == ("'" + name if name[0] in "=+-@" else name)
    elif fmt == "markdown":
        lines = out.splitlines()
        assert len({len(re.findall(r"(?<!\\)\|", line)) for line in lines}) == 1, lines
    elif fmt == "jsonl":
        assert json.loads(out.splitlines()[0])["gpu"] == name
    else:
        assert "\x1b" not in out


@settings(FAST, max_examples=15)
@given(name=NASTY.filter(lambda n: n == n.strip()) | st.sampled_from(
    ["::error file=a.py,line=1::x", "::stop-commands::tok", "<img src=x onerror=alert(1)>", "[l](http://e)"]),
    command=st.sampled_from([("gpus", "list"), ("plan", "-m", "llama-2-7b", "--max-model-len", "4096",
                                                "--concurrency", "1", "--max-gpus", "1")]))
def test_no_gpu_name_starts_a_line_or_carries_markup(tmp_path_factory, name, command):
    """A GPU name reaches tables whose first column starts a line (gpus list, the plan search): a workflow command
    ('::error ...') or Markdown/HTML from a --gpu-file is refused where it is read, so no output line can carry it."""
    path = _gpu_file(tmp_path_factory.mktemp("gpuline"), name)
    args = (*command, "--gpu-file", str(path))
    if not _printable(name):
        assert "name" in refused(*args) or "gpus" in refused(*args)
        return
    code, out, err = run(*args)
    assert code == 0, err
    assert not any(line.startswith("::") for line in out.splitlines())
    assert not re.search(r"<[a-z]|\]\(", out)


def test_junit_stays_well_formed_with_control_characters_in_messages():
    from kvplan.planning.check import CheckReport, CheckRow
    from kvplan.report.check import junit_xml

    row = CheckRow(scenario="s", check="baseline", figure="kv_bytes", unit="bytes", limit=1, value=2, delta=1,
                   verdict="fail", message="grew \x00\x1b[31m\x08 \ud800", file="a\x01.yaml", line=3)
    report = CheckReport(config="c", baseline="b", baseline_found=True, baseline_updated=False, figures={},
                         rows=[row], failed=1, notes=[])
    failure = ET.fromstring(junit_xml(report).split("\n", 1)[1]).find(".//failure")
    assert failure.get("message") == "grew \\x00\\x1b[31m\\x08 \\ud800"


# ---- numbers past a float's range --------------------------------------------------------------------------------

@FAST
@given(st.floats(min_value=0, max_value=1e-6, exclude_max=True, allow_subnormal=True) | st.sampled_from([1e-320, 5e-324]))
def test_tiny_efficiencies_are_refused_not_infinite(value):
    line = refused("estimate", "-m", "llama-2-7b", "--seq-len", "8", "--gpu", "H100-SXM", "--mbu", repr(value), "--json")
    assert line.startswith("error: --mbu: a fraction in (0, 1]")


def test_the_least_efficiency_allowed_gives_finite_json():
    code, out, _ = run("estimate", "-m", "llama-2-7b", "--seq-len", "8", "--gpu", "H100-SXM", "--mbu", "1e-6", "--json")
    assert code == 0 and "Infinity" not in out and "NaN" not in out


@pytest.mark.slow
@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
# from 50 ms: the interpreter's own start-up (before any kvplan code runs) answers a signal as Python does
@given(delay_s=st.floats(min_value=0.05, max_value=1.5), sig=st.sampled_from(["SIGINT", "SIGTERM"]),
       fmt=st.sampled_from(["csv", "jsonl", "markdown"]))
def test_a_signal_at_any_point_of_a_write_leaves_nothing_half_written(tmp_path_factory, delay_s, sig, fmt):
    """Ctrl-C or SIGTERM at a random point of `sweep -o` (interpreter start, imports, the grid, the streamed write):
    130 / 143 (or 0 if it finished first), no traceback, and the folder holds the whole file or nothing."""
    import signal

    folder = tmp_path_factory.mktemp("sig")
    proc = subprocess.Popen([sys.executable, "-c", MAIN, "sweep", "-m", "llama-2-7b", "--batch", "1..400+1",
                             "--seq-len", "1..4000+1", "--format", fmt, "-o", f"out.{fmt}"], cwd=folder,
                            env={**os.environ, "PYTHONPATH": os.getcwd()}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    time.sleep(delay_s)
    if proc.poll() is None:
        os.killpg(proc.pid, getattr(signal, sig))
    _, err = proc.communicate(timeout=120)
    assert proc.returncode in (0, {"SIGINT": 130, "SIGTERM": 143}[sig]), err
    assert "Traceback" not in err
    left = sorted(p.name for p in folder.iterdir())
    assert left in ([], [f"out.{fmt}"]), left  # never a temporary file
    if left:  # whole: every one of the 400 x 4,000 rows and the header
        with open(folder / left[0], encoding="utf-8") as f:
            lines = sum(1 for _ in f)
        assert lines == 400 * 4000 + {"csv": 1, "jsonl": 0, "markdown": 2}[fmt]


@FAST
@given(text=st.text(alphabet="<>&[]|()!/ab#;=\\", max_size=30))
def test_markdown_text_opens_no_tag_link_or_cell(text):
    """Text that reaches a Markdown file (a GPU's source in report.md, a check summary, a sweep cell): no HTML tag or
    entity opens, no link or image forms, no '|' adds a column."""
    from kvplan.report.docformat import md_text

    out = md_text(text)
    bare = out.replace("&amp;", "").replace("&lt;", "")  # kvplan's own escapes
    # a bracket or a bar after an even number of backslashes (none included) is live markup
    assert not re.search(r"<[A-Za-z/!?]|&#?\w+;|(?<!\\)(?:\\\\)*[\[\]|]", bare), out


def test_a_report_past_its_limits_is_refused_at_once(tmp_path):
    from kvplan.planning.report_data import MAX_REPORT_MODELS, MAX_REPORT_PLANS

    out = str(tmp_path / "r.html")
    many = ",".join(["llama-2-7b"] * (MAX_REPORT_MODELS + 1))
    assert f"at most {MAX_REPORT_MODELS}" in refused("report", "-m", many, "-o", out)
    line = refused("report", "-m", "llama-2-7b,gpt2", "--gpu", "H100-SXM", "--tp", f"1..{MAX_REPORT_PLANS}+1",
                   "-o", out)
    assert "plans; allowed: at most" in line
    assert not (tmp_path / "r.html").exists()


def test_the_gpu_file_example_of_the_help_is_a_valid_gpu_file(tmp_path):
    """`kvplan gpus --help` shows a GPU file; as written (`fp32: 6.7e13`: YAML 1.2's float) it loads."""
    import textwrap

    import kvplan.cli.gpus as gpus_cli

    doc = gpus_cli.__doc__
    example = textwrap.dedent(doc[doc.index("    gpus:"):doc.index('"""') if '"""' in doc else None])
    (tmp_path / "g.yaml").write_text(example)
    code, out, err = run("gpus", "show", "MY-GPU", "--gpu-file", str(tmp_path / "g.yaml"))
    assert code == 0, err
    assert json.loads(out)["peak_flops"]["fp32"] == 6.7e13


# ---- a signal at any point of `kvplan verify` (issue 22, signals) ------------------------------------------------

# When the signal is sent: a shared library of that stage is mapped in the parent (/proc/PID/maps), or the result
# has been printed. torch._C's initialisation imports numpy from C and cleared a KeyboardInterrupt raised there:
# the run went on to exit 0 with "all checks pass", or numpy refused its next import ("verify needs torch (cannot
# load module more than once per process)", exit 2); torch's teardown after the result raised it in finalizers.
VERIFY_SIGNAL_POINTS = {"kvplan's imports": "_pydantic_core", "torch loading": "libtorch_cpu",
                        "numpy inside torch's import": "_multiarray_umath", "result printed": None}


def _mapped(pid: int, name: str) -> bool:
    try:
        with open(f"/proc/{pid}/maps", encoding="utf-8", errors="replace") as f:
            return name in f.read()
    except OSError:
        return False


def _session_processes(sid: int) -> list[str]:
    rows = subprocess.run(["ps", "-ww", "-eo", "pid=,sid=,stat=,args="], capture_output=True, text=True).stdout
    return [r for r in rows.splitlines() if r.split()[1] == str(sid) and not r.split()[2].startswith("Z")]


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/PID/maps")
@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("tp", ["1", "2"])
@pytest.mark.parametrize("when", list(VERIFY_SIGNAL_POINTS))
def test_a_signal_at_any_point_of_verify_ends_it_with_the_code_its_output_shows(tmp_path, when, tp, sig):
    """Ctrl-C (to the process group, as a terminal sends it) or SIGTERM during `kvplan verify` (one process, and
    --tp 2: the parent and its ranks), at kvplan's imports, inside the parent's torch import, and once the result is
    printed: exit 130 / 143 with nothing on stdout, or 0 with the whole result once it was printed; one line on
    stderr at most and no traceback; no process and no run folder left."""
    pytest.importorskip("torch")
    import signal

    proc = subprocess.Popen(
        [sys.executable, "-m", "kvplan", "verify", "-m", "llama-2-7b", "--layers", "2", "--scale", "0.0625",
         "--tp", tp], env={**os.environ, "TMPDIR": str(tmp_path), "PYTHONPATH": os.getcwd()},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    out: list[str] = []
    err: list[str] = []
    readers = [threading.Thread(target=lambda: out.extend(proc.stdout), daemon=True),
               threading.Thread(target=lambda: err.append(proc.stderr.read()), daemon=True)]
    for reader in readers:
        reader.start()
    library = VERIFY_SIGNAL_POINTS[when]
    ready = (lambda: _mapped(proc.pid, library)) if library else (lambda: any("all checks pass" in s for s in out))
    deadline = time.monotonic() + 120
    while not ready() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.002)
    assert proc.poll() is None, f"the run ended before {when!r}"
    os.killpg(proc.pid, getattr(signal, sig))
    proc.wait(timeout=60)
    for reader in readers:
        reader.join(timeout=10)
    stdout, stderr = "".join(out), "".join(err)
    if when == "result printed":  # the run had finished: its own exit code, its whole result
        assert proc.returncode == 0 and stdout.rstrip().splitlines()[-1].startswith("all checks pass"), stderr
    else:
        assert proc.returncode == {"SIGINT": 130, "SIGTERM": 143}[sig] and stdout == "", (proc.returncode, stderr)
    assert stderr.strip() in ("", "aborted", "terminated"), stderr  # never a traceback or "verify needs torch"
    deadline = time.monotonic() + 30  # a forkserver mid-import notices its parent's exit when the import ends
    while _session_processes(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _session_processes(proc.pid) == [] and list(tmp_path.glob("kvplan-*")) == []


@pytest.mark.parametrize(("engine", "block", "allowed"), [
    ("vllm==0.10", "7", "1, 8, 16, 32, 64, 128"),  # argparse choices of config/cache.py BlockSize, 0.9.1 - 0.11.0
    ("vllm==0.10", "256", "1, 8, 16, 32, 64, 128"),
    ("vllm==0.13", "48", "1, 8, 16, 32, 64, 128, 256"),  # 256 from 0.11.1
    ("vllm==0.13", "8", "multiples of 16"),  # a choice, but FlashAttention pages in multiples of 16
    ("vllm", "7", "multiples of 16"),  # 0.18+: any int > 0 parses; no NVIDIA backend takes 7
])
def test_vllm_block_sizes_the_release_refuses(engine, block, allowed):
    line = refused("plan", "-m", "llama-3.1-8b", "--gpu", "H100-SXM", "--max-model-len", "8192", "--engine", engine,
                   "--block-size", block)
    assert "--block-size" in line and allowed in line and f"got {block}" in line


def test_vllm_block_sizes_the_release_takes():
    for engine, block in (("vllm==0.13", "256"), ("vllm", "48"), ("vllm==0.10", "32")):
        code, out, _ = run("plan", "-m", "llama-3.1-8b", "--gpu", "H100-SXM", "--max-model-len", "8192", "--engine",
                           engine, "--block-size", block, "--json")
        assert code == 0 and json.loads(out)["kv_cache"]["block_size"] == int(block)


@pytest.mark.parametrize("value, wording", [('"9.0"', "Input should be a number (got '9.0')"),
                                            ("200", "less than or equal to 99")])
def test_a_gpu_files_compute_capability_is_a_number_of_major_minor(tmp_path, value, wording):
    """A quoted "9.0" is named as not a number (pydantic spoke of its union's first member: "a valid integer")."""
    (tmp_path / "g.yaml").write_text(f"gpus:\n  G:\n{GPU_ENTRY}    compute_capability: {value}\n")
    line = refused("plan", "-m", "llama-2-7b", "--max-model-len", "4096", "--gpu-file", str(tmp_path / "g.yaml"),
                   "--gpu", "G")
    assert "gpus.G: compute_capability: " in line and wording in line and "allowed: a number 1..99" in line
    assert "integer" not in line


@pytest.mark.parametrize("args", [("estimate", "-m", "llama-2-7b", "--seq-len", "64"),
                                  *(("plan", "-m", "llama-2-7b", "--gpu", "H100-SXM", "--max-model-len", "4096",
                                     "--engine", e) for e in ("vllm", "sglang", "trtllm"))])
def test_block_size_states_one_bound_in_every_command(args):
    line = refused(*args, "--block-size", "0")
    assert line == "error: --block-size: must be an integer in 1..1,048,576, got 0"


def test_a_file_name_that_is_not_utf8_is_echoed_as_its_bytes(tmp_path):
    """QA E 10: `sweep -o $'s\\xff.csv'` wrote the file and said `wrote s\\udcff.csv`, a name that does not exist;
    the byte is shown as `\\xff` in what kvplan writes and in its one-line errors."""
    from kvplan.errors import printable

    name = os.fsdecode(b"s\xff.csv")
    assert printable(name) == "s\\xff.csv" and printable("a\x1bb") == "a\\x1bb"
    got = CliRunner().invoke(app, ["sweep", "-m", "llama-3.1-8b", "--batch", "1", "--seq-len", "128",
                                   "-o", str(tmp_path / name)])
    assert got.exit_code == 0 and (tmp_path / name).exists()
    assert "s\\xff.csv" in " ".join(got.stderr.split()) and "udcff" not in got.stderr


@pytest.mark.parametrize("engine", ["vllm", "sglang", "llamacpp", "ollama", "trtllm", "tgi", "hf-dynamic"])
def test_a_context_memory_that_fills_the_gpu_is_refused_naming_the_flag(engine):
    """--context-memory of the GPU's whole total or more leaves no memory at all: every engine refuses it on one line
    naming the flag and the GPU's total (it had been planned as a weights' misfit, llama.cpp and Ollama planned it)."""
    from kvplan.cost.hardware import load_gpu
    from kvplan.units import fmt_bytes

    total = load_gpu("L4").engine_memory_bytes
    args = ("plan", "-m", "smollm3-3b", "--gpu", "L4", "--max-model-len", "4096", "--engine", engine)
    line = refused(*args, "--context-memory", str(total))
    assert line.startswith("error: --context-memory: ") and fmt_bytes(total) in line
    assert "--context-memory: " not in run(*args, "--context-memory", str(total - 1))[2]  # one byte less: not this
    code, out, err = run(*args, "--context-memory", "1GiB", "--json")
    assert code == 0 and json.loads(out)["per_gpu"]["context_bytes"] == 2**30, err


def test_a_search_skips_the_gpus_a_context_memory_fills():
    """A search with a --context-memory larger than some GPUs leaves those out instead of refusing the search."""
    code, out, err = run("plan", "-m", "qwen3-8b", "--max-model-len", "8192", "--concurrency", "1", "--gpus",
                         "L4,H100-SXM", "--context-memory", "30GiB", "--gpu-memory-utilization", "0.5", "--json")
    assert code == 0, err
    assert [o["gpu"] for o in json.loads(out)["options"]] == ["H100-SXM"]
    assert any(n.startswith("Left out: L4, whose memory the --context-memory given fills") for n in json.loads(out)["notes"])
