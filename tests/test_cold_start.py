"""What keeps a cold `kvplan estimate` fast (benchmarks/cold_start.py measures it): typer builds only the command
that runs; bundled cards come from the cache of validated cards, equal to their validated YAML, without yaml or a
card schema build; a compute-and-print command skips the interpreter's teardown. No wall-time assertions: they
would be flaky; these pin the mechanisms instead."""

from __future__ import annotations

import importlib
import json
import shutil

import pytest
import typer

from kvplan.model import cardcache, catalog
from kvplan.model.card import ModelCard
from helpers import fields_set, kvplan_run, tamper_json

app_module = importlib.import_module("kvplan.cli.app")  # kvplan.cli.app is also the name of the Typer app


# ---- typer builds the command that runs, not all of them ------------------------------------------------------

def commands_built(argv: list[str]) -> set[str]:
    return set(typer.main.get_command(app_module._slim(app_module._command(argv))).commands)


def test_a_run_builds_only_its_command():
    assert commands_built(["estimate", "--model", "llama-2-7b", "--seq-len", "4096"]) == {"estimate"}
    assert commands_built(["--debug", "cards", "show", "gpt2"]) == {"cards"}
    assert commands_built(["gpus", "list"]) == {"gpus"}


@pytest.mark.parametrize("argv", [[], ["--help"], ["-h"], ["--version"], ["--debug"], ["estimat"], ["--help", "plan"]])
def test_help_version_and_unknown_words_get_every_command(argv):
    assert app_module._slim(app_module._command(argv)) is app_module.app
    assert {"estimate", "plan", "compare", "cards", "gpus", "check"} <= commands_built(argv)


def test_a_quick_exit_keeps_the_output_the_exit_code_and_atexit_handlers():
    run = kvplan_run("estimate", "--model", "llama-2-7b", "--seq-len", "4096", "--json",
                     before="import atexit; atexit.register(lambda: print('atexit ran', file=sys.stderr))")
    assert (run.returncode, run.stderr) == (0, "atexit ran\n")
    assert json.loads(run.stdout)["kv_cache"]["total_bytes"] == 2_147_483_648
    bad = kvplan_run("estimate", "--model", "no-such-card", "--seq-len", "4096")
    assert bad.returncode == 2 and bad.stderr.startswith("error: unknown model 'no-such-card'")


TEARDOWN_PROBE = ("class Probe:\n    def __del__(self):\n        print('torn down', file=sys.stderr)\n"
                  "probe = Probe()")  # a global of __main__: freed (and so printed) only by the teardown


def test_estimate_skips_the_teardown_that_help_and_version_keep():
    assert kvplan_run("estimate", "--model", "gpt2", "--seq-len", "64", before=TEARDOWN_PROBE).stderr == ""
    assert kvplan_run("--version", before=TEARDOWN_PROBE).stderr == "torn down\n"


def test_a_run_with_a_thread_left_exits_the_usual_way():
    """The usual exit waits for a non-daemon thread; the quick one would cut it off."""
    run = kvplan_run("gpus", "list", before="import threading, time\nthreading.Thread(target=lambda: (time.sleep(0.3), "
                     "print('thread done', file=sys.stderr))).start()")
    assert (run.returncode, run.stderr) == (0, "thread done\n")


# ---- bundled cards: the cache of validated cards ----------------------------------------------------------------

def test_the_cache_file_is_fresh():
    written = (catalog.cards_dir() / cardcache.FILE).read_text(encoding="utf-8")
    assert written == catalog.card_cache_text(), "model_cards/validated.json is stale: run python -m kvplan.model.catalog"


def test_every_cached_card_equals_its_validated_yaml():
    """Under the pydantic installed (the pinned one in CI, any in the users' range): the cache is keyed on kvplan's
    sources only, so this is what keeps it right when pydantic moves."""
    names = catalog.bundled_names()
    assert len(names) > 40
    for name in names:
        cached = cardcache.lookup(catalog.cards_dir(), name)
        validated = catalog.load_card_file(catalog.cards_dir() / f"{name}.yaml")
        assert cached is not None, name
        assert cached == validated, name
        assert repr(cached) == repr(validated), name  # True is not 1, (a,) is not [a]
        assert fields_set(cached) == fields_set(validated), name
        assert cached.derived_fields() == validated.derived_fields(), name
        assert cached.model_dump(mode="json") == validated.model_dump(mode="json"), name


def test_the_cache_key_is_kvplans_sources_not_the_pydantic_version(monkeypatch):
    import pydantic

    before = cardcache.schema_key()
    cardcache.schema_key.cache_clear()
    monkeypatch.setattr(pydantic, "VERSION", "99.0.0")
    try:
        assert cardcache.schema_key() == before
    finally:
        cardcache.schema_key.cache_clear()


@pytest.fixture
def cards_copy(tmp_path, monkeypatch):
    """A copy of the bundled cards that load_card reads instead, with fresh per-process caches."""
    directory = tmp_path / "model_cards"
    shutil.copytree(catalog.cards_dir(), directory)
    monkeypatch.setattr(catalog, "cards_dir", lambda: directory)
    for cached in (catalog._load_bundled, catalog._bundled_set, cardcache._entries):
        cached.cache_clear()
    yield directory
    for cached in (catalog._load_bundled, catalog._bundled_set, cardcache._entries):
        cached.cache_clear()


def tamper(directory, **card_fields) -> None:
    """Change the cached llama-2-7b (not its YAML): what load_card returns then shows whether it used the cache."""
    tamper_json(directory / cardcache.FILE, ("cards", "llama-2-7b", "card"), **card_fields)


def test_load_card_takes_a_bundled_card_from_the_cache(cards_copy):
    tamper(cards_copy, num_layers=31)
    assert catalog.load_card("llama-2-7b").num_layers == 31


def test_a_changed_yaml_is_read_and_validated_again(cards_copy):
    tamper(cards_copy, num_layers=31)
    yaml_path = cards_copy / "llama-2-7b.yaml"
    yaml_path.write_text(yaml_path.read_text().replace("num_layers: 32", "num_layers: 30"))
    assert catalog.load_card("llama-2-7b").num_layers == 30


def test_a_checkout_with_crlf_line_ends_uses_the_cache(cards_copy):
    yaml_path = cards_copy / "llama-2-7b.yaml"
    yaml_path.write_bytes(yaml_path.read_bytes().replace(b"\n", b"\r\n"))
    tamper(cards_copy, num_layers=31)
    assert catalog.load_card("llama-2-7b").num_layers == 31


def test_a_cache_made_for_other_schema_sources_is_ignored(cards_copy):
    tamper(cards_copy, num_layers=31)
    path = cards_copy / cardcache.FILE
    path.write_text(path.read_text().replace(cardcache.schema_key(), "0" * 64))
    assert catalog.load_card("llama-2-7b").num_layers == 32


def test_a_broken_cache_file_is_ignored(cards_copy):
    (cards_copy / cardcache.FILE).write_text("{not json")
    assert catalog.load_card("llama-2-7b") == catalog.load_card_file(cards_copy / "llama-2-7b.yaml")


def test_the_cache_refuses_a_value_it_cannot_encode():
    with pytest.raises(TypeError, match="set: a card field type"):
        cardcache.encode({1, 2})


# ---- what a cold `kvplan estimate` loads -----------------------------------------------------------------------

NOT_FOR_ESTIMATE = ("yaml", "kvplan.model.hf", "kvplan.planning.capacity", "kvplan.planning.sweep",
                    "kvplan.planning.check", "kvplan.planning.compare", "kvplan.verify",
                    "kvplan.report.capacity", "kvplan.report.sweep", "typer.rich_utils", "rich.markdown",
                    "rich.syntax", "pygments", "rich._emoji_codes",
                    "importlib.resources.readers",
                    "kvplan.cost.hardware", "kvplan.cost.parallel", "kvplan.cost.quant",  # --gpu; quantized cards
                    "kvplan.cost.traffic", "kvplan.cost.shared", "kvplan.cost.ssm_flops",  # --gpu; Zamba, SSM cards
                    "huggingface_hub", "httpx", "kvplan.planning.checkpoint")  # a Hub id only


def test_estimate_on_a_bundled_card_loads_no_yaml_and_builds_no_card_schema():
    report = ("def report():\n    from kvplan.model.cardcache import MODELS\n"
              "    built = [name for name, model in MODELS.items() if model.__pydantic_complete__]\n"
              "    print(*sorted(sys.modules), '|', *built, file=sys.stderr)\nimport atexit; atexit.register(report)")
    run = kvplan_run("estimate", "--model", "llama-2-7b", "--seq-len", "4096", before=report)
    modules, built = run.stderr.split("|")
    assert "KV total" in run.stdout
    assert [m for m in modules.split() if m.startswith(NOT_FOR_ESTIMATE)] == []  # no --gpu: no GPU catalog code
    assert "kvplan.cost.roofline" not in modules.split()  # its results' models only (kvplan.cost.roofline_results)
    assert built.split() == []  # the card was never validated, so no schema of it or its blocks was built


def test_validating_a_card_still_builds_its_schema():
    card = ModelCard.model_validate(catalog.load_card("llama-2-7b").model_dump(exclude_unset=True))
    assert card.num_kv_heads == 32 and ModelCard.__pydantic_complete__


def test_the_console_prints_emoji_codes_as_written():
    import io

    from kvplan.report.console import make_console

    out = io.StringIO()
    make_console(file=out).print("fp8 :fire: card")
    assert out.getvalue() == "fp8 :fire: card\n"


# ---- the benchmark's floor declares what kvplan estimate declares ---------------------------------------------

def _options(command) -> list[tuple[str, tuple[str, ...], object]]:
    """(parameter, its flags, its default) of every option of a click command, in order."""
    return [(p.name, tuple(sorted(p.opts + p.secondary_opts)), p.default) for p in command.params]


def test_the_cold_start_floor_declares_the_options_of_estimate():
    """benchmarks/cold_start.py compares `kvplan estimate` with an empty typer command of the same options; typer
    pays per option, so a floor with fewer options would flatter kvplan."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).parents[1] / "benchmarks" / "typer_floor.py"
    spec = importlib.util.spec_from_file_location("typer_floor", path)
    floor = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(floor)
    ours = typer.main.get_command(app_module._slim(app_module._command(["estimate"]))).commands["estimate"]
    theirs = typer.main.get_command(floor.app).commands["estimate"]
    assert [(n, d) for n, _, d in _options(theirs)] == [(n, d) for n, _, d in _options(ours)]
    assert [(n, flags) for n, flags, _ in _options(theirs)] == [(n, flags) for n, flags, _ in _options(ours)]
    assert [(p.bare_type(), p.multiple, p.is_flag) for p in theirs.params] == [
        (p.bare_type(), p.multiple, p.is_flag) for p in ours.params]
