import json

import pytest
from typer.testing import CliRunner

from kvplan.cli.app import app


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


@pytest.fixture(autouse=True, scope="session")
def _one_torch_thread():
    """The reference-model tests run tiny shapes: one intra-op thread avoids spin-waits on a loaded machine."""
    try:
        import torch
    except ImportError:
        yield
        return
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
