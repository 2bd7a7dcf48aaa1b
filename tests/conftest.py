import json

import pytest
from typer.testing import CliRunner

from kvplan.cli import app


@pytest.fixture
def cli():
    """Run `kvplan ARGS...`; returns (exit_code, stdout, stderr)."""
    runner = CliRunner()

    def run(*args: str):
        result = runner.invoke(app, list(args))
        return result.exit_code, result.stdout, result.stderr

    return run


@pytest.fixture
def cli_json(cli):
    """Run `kvplan ARGS... --json` and parse stdout."""

    def run(*args: str):
        code, out, err = cli(*args, "--json")
        assert code == 0, err
        return json.loads(out)

    return run
