"""Every example in the README runs: the Python examples are doctests, and each `kvplan ...` line of its example
blocks exits 0 (bundled cards only; the commands run through CliRunner, verify included, shrunk as written)."""

from __future__ import annotations

import doctest
import re
import shlex
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
SKIP_BLOCKS = ("<!-- ci:setup -->", "<!-- ci:test -->")


def example_commands() -> list[str]:
    text = README.read_text(encoding="utf-8")
    commands = []
    for m in re.finditer(r"(?P<before>[^\n]*)\n```bash\n(?P<body>.*?)```", text, re.S):
        if m.group("before").strip() in SKIP_BLOCKS:
            continue
        for line in m.group("body").splitlines():
            line = line.split("  #")[0].split(" > ")[0].strip()
            if line.startswith("kvplan ") and not re.search(r"\./|\.json\b", line):
                commands.append(line)
    return commands


def test_python_examples_are_doctests():
    result = doctest.testfile(str(README), module_relative=False, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 5 and result.failed == 0


def test_readme_has_commands():
    assert len(example_commands()) >= 10


@pytest.mark.parametrize("command", example_commands())
def test_example_command_exits_0(cli, command):
    pytest.importorskip("torch") if " verify " in f" {command} " else None
    code, out, err = cli(*shlex.split(command)[1:])
    assert code == 0, (command, err)


def test_every_supported_model_type_is_in_the_readme():
    from kvplan.model.hf.config import READERS

    text = README.read_text(encoding="utf-8")
    section = text[text.index("### Hugging Face configs"):text.index("### JSON output")]
    missing = [t for t in READERS if not re.search(rf"(?<![\w]){re.escape(t)}(?![\w])", section)]
    assert not missing, missing


def shown_outputs() -> list[tuple[str, list[str]]]:
    """(command, the `verdict` / `launch` lines the README shows for it): a plain code block holding such lines,
    paired with the closest ```bash block before it that holds one `kvplan` command."""
    text = README.read_text(encoding="utf-8")
    pairs, last = [], None
    for m in re.finditer(r"```(?P<lang>\w*)\n(?P<body>.*?)```", text, re.S):
        body = m.group("body")
        if m.group("lang") == "bash":
            cmds = [ln.strip() for ln in body.splitlines() if ln.strip().startswith("kvplan ")]
            last = cmds[0] if len(cmds) == 1 else None
            continue
        lines = [ln for ln in body.splitlines() if ln.startswith(("verdict ", "launch "))]
        if lines and last:
            pairs.append((last, lines))
    return pairs


@pytest.mark.parametrize("command, lines", shown_outputs())
def test_the_output_the_readme_shows_is_what_the_command_prints(command, lines):
    """A stale figure in the README's sample output (58.4 requests where the command printed 56.5) misleads the
    reader; each shown verdict and launch line is printed, word for word, by its command today."""
    code, out, _ = cli_run(command)  # COLUMNS 1000: one line each, as the README shows them
    printed = [" ".join(ln.split()) for ln in out.splitlines()]
    for line in lines:
        assert " ".join(line.split()) in printed, (command, line)


def cli_run(command: str) -> tuple[int, str, str]:
    from typer.testing import CliRunner

    from kvplan.cli.app import app

    r = CliRunner().invoke(app, shlex.split(command)[1:], env={"COLUMNS": "1000"})
    return r.exit_code, r.stdout, ""


def test_the_readme_shows_a_verdict_to_check():
    assert any(c.startswith("kvplan plan ") for c, _ in shown_outputs())
