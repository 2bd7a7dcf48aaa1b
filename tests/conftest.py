import json
import os

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
def _one_click_command_per_app():
    """typer.testing.CliRunner.invoke rebuilds the click command from the typer app on every call
    (typer.main.get_command: about 25 ms, half of an `estimate` through the runner): the tests build it once per app
    and process. The command is what `kvplan` builds once per process too; where a typer release no longer has the
    name, nothing is patched."""
    import typer.testing

    original = getattr(typer.testing, "_get_command", None)
    if original is None:
        yield
        return
    built: dict[int, tuple[object, object]] = {}

    def get_command(app):
        if id(app) not in built:
            built[id(app)] = (app, original(app))  # the app kept alive: its id stays its own
        return built[id(app)][1]

    typer.testing._get_command = get_command
    yield
    typer.testing._get_command = original


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


# ---- tiers: `python -m pytest` runs the default tier (< 90 s on 2 cores); `--tier all` (CI, the README) runs
# everything; `--tier slow` only what is marked slow (every card through verify and report, sharded verify on gloo,
# Chromium rendering, 300 fuzz examples instead of 50)

TIERS = ("default", "slow", "all")


def pytest_addoption(parser):
    parser.addoption("--tier", choices=TIERS, default="default",
                     help="default: the fast tier; slow: only tests marked slow; all: both (what CI runs)")


def pytest_xdist_auto_num_workers(config):
    """``-n auto`` (pyproject.toml): the default tier on two worker processes (under 90 s on 2 cores); the slow and
    all tiers (CI) in one process, as their signal, forkserver and sharded-verify tests time processes of their own."""
    return 2 if config.getoption("--tier") == "default" else 0


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: the slow tier, run by --tier all (CI) and --tier slow")
    os.environ["KVPLAN_TEST_TIER"] = config.getoption("--tier")


def pytest_collection_modifyitems(config, items):
    tier = config.getoption("--tier")
    if tier == "all":
        return
    keep, drop = [], []
    for item in items:
        slow = item.get_closest_marker("slow") is not None
        fuzz = item.module.__name__.endswith("test_fuzz_inputs")  # both tiers: 50 examples, or 300 in the slow one
        (keep if fuzz or slow == (tier == "slow") else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
