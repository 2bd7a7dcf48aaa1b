"""Every command's --help ends with two or three examples, and each of them runs as written (issue 21)."""

from __future__ import annotations

import json
import os
import shlex
import shutil
from pathlib import Path

import pytest
import typer

from kvplan.cli.app import app
from kvplan.cli.examples import EXAMPLES

ROOT = Path(__file__).resolve().parents[1]


def _leaves(group, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out = []
    for name, command in group.commands.items():
        if hasattr(command, "commands"):  # a group (typer's own copy of click's Group)
            out += _leaves(command, path + (name,))
        else:
            out.append(path + (name,))
    return out


COMMANDS = _leaves(typer.main.get_command(app))


def _examples(cli, path: tuple[str, ...]) -> list[str]:
    code, out, _ = cli(*path, "--help")
    assert code == 0
    return [line.strip() for line in out.splitlines() if line.strip().startswith("kvplan ")]


def test_every_command_is_covered():
    assert {" ".join(p) for p in COMMANDS} | {"kvplan"} == set(EXAMPLES)
    assert len(COMMANDS) >= 15


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """A folder like a checkout's root: the bundled cards and kvplan.toml, and my-model/config.json (a real
    Hugging Face config from the test data), the files the examples name."""
    os.symlink(ROOT / "model_cards", tmp_path / "model_cards")
    for name in ("kvplan.toml", "kvplan-baseline.json"):  # copies: check keeps its files inside the folder
        shutil.copy(ROOT / name, tmp_path / name)
    monkeypatch.setenv("COLUMNS", "400")  # one example a line in the help
    configs = json.loads((ROOT / "tests/data/hf_configs.json").read_text())["configs"]
    (tmp_path / "my-model").mkdir()
    (tmp_path / "my-model/config.json").write_text(json.dumps(configs["Qwen/Qwen3-8B"]["config"]))
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("path", [()] + COMMANDS, ids=lambda p: " ".join(p) or "kvplan")
def test_help_examples_run(cli, workdir, path):
    lines = _examples(cli, path)
    assert 2 <= len(lines) <= 3 or (path == ("cards", "schema") and len(lines) == 1), lines
    for line in lines:
        words = shlex.split(line)
        assert words[0] == "kvplan" and (not path or words[1:1 + len(path)] == list(path)), line
        if words[1] == "verify":
            pytest.importorskip("torch")
        code, _, err = cli(*words[1:])
        assert code == 0, (line, err)
