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
    path.write_text("[" * 100_000 + "]" * 100_000)
    assert "nested deeper than 32 levels" in refused("check")
    assert run("check", "--update-baseline")[0] == 0
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
