"""`kvplan cards import PATH.gguf` names the file it was given, not plan's --gguf flag (QA D18)."""

from typer.testing import CliRunner

from kvplan.cli.app import app


def test_missing_gguf_names_the_argument(tmp_path):
    path = tmp_path / "nosuch.gguf"
    res = CliRunner().invoke(app, ["cards", "import", str(path)])
    line = res.output.strip()
    assert res.exit_code == 2 and "\n" not in line
    assert line.startswith(f"error: {path}: ") and "--gguf" not in line


def test_unreadable_gguf_names_the_argument(tmp_path):
    path = tmp_path / "fake.gguf"
    path.write_bytes(b"not a gguf file at all")
    res = CliRunner().invoke(app, ["cards", "import", str(path)])
    assert res.exit_code == 2 and res.output.startswith(f"error: {path}: ") and "--gguf" not in res.output
