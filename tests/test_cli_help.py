"""Help texts that list what kvplan models stay equal to what it models (QA F2 6, 13: the SGLang ranges, the engines
disagg and compare take)."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from kvplan.cli import options as o
from kvplan.cli.app import app
from kvplan.cost.runtimes import disagg_names, dynamic_names, get_engine, names


def _help(*command: str) -> str:
    got = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": "400", "TERMINAL_WIDTH": "400"})
    assert got.exit_code == 0
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", got.stdout).split())


def test_the_version_lists_are_the_modelled_ranges():
    assert o.VERSIONS_HELP.replace(" (V0)", "").split(", ") == list(get_engine("vllm").versions)
    spans = list(get_engine("sglang").versions)
    first, last = spans[0].split("-")[0], spans[-1]
    assert o.SGLANG_VERSIONS_HELP == f"{first} to {last}, {len(spans)} ranges"


def test_disagg_lists_the_engines_with_a_disaggregated_mode():
    served = [n for n in names() if get_engine(n).disagg_roles is not None]
    assert disagg_names() == served
    text = _help("disagg")
    assert f"one of: {', '.join(served)} (those with disaggregated" in text and "llamacpp" not in text


@pytest.mark.parametrize("engine", sorted(set(names()) - set(dynamic_names())))
def test_compare_lists_only_the_engines_it_takes(engine):
    text = _help("compare")
    listed = text.split("--engine")[1].split("(those")[0]
    assert engine not in listed
    got = CliRunner().invoke(app, ["compare", "-m", "llama-3-8b", "--engine", engine])
    assert got.exit_code == 2


def test_tgi_prefill_help_names_tgis_own_default():
    text = _help("plan")
    assert "TGI's own" in text and "not TGI's own default" not in text


def test_estimate_ctx_size_default_names_estimates_own_length_flag():
    assert "--seq-len x slots" in _help("estimate") and "--max-model-len x slots" in _help("plan")


def test_the_gpu_file_example_in_gpus_help_loads_as_printed_in_80_columns(tmp_path):
    """QA F2 5: the example was wrapped at 80 columns in a pipe, which split its comments off into invalid YAML."""
    import textwrap

    got = CliRunner().invoke(app, ["gpus", "--help"], env={"COLUMNS": "80"})
    lines = got.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == "gpus:")
    block = [line for line in lines[start:] if line.strip() and not line.lstrip().startswith(("╭", "│", "╰"))]
    block = block[:next((i for i, line in enumerate(block[1:], 1) if not line.startswith(lines[start][:5])),
                        len(block))]
    path = tmp_path / "gpus.yaml"
    path.write_text(textwrap.dedent("\n".join(block)) + "\n")
    shown = CliRunner().invoke(app, ["gpus", "show", "MY-GPU", "--gpu-file", str(path)])
    assert shown.exit_code == 0 and '"visible_memory_bytes": 85030322176' in shown.stdout


def test_sweep_lengths_take_the_suffixes_plan_takes():
    """QA F2 11: `sweep --max-model-len 32k` was refused while `plan --max-model-len 32k` (vLLM's reading: 32,000)
    is taken; the length axes read vLLM's suffixes, in values and in range ends; the other axes do not."""
    from kvplan.planning.sweep.grid import parse_int_axis
    from kvplan.errors import KvplanError

    assert parse_int_axis("4096,8k,16K", "--seq-len", tokens=True) == [4096, 8000, 16384]
    assert parse_int_axis("1K..4K+1K", "--seq-len", tokens=True) == [1024, 2048, 3072, 4096]
    assert parse_int_axis("1k..8k*2", "--seq-len", tokens=True) == [1000, 2000, 4000, 8000]
    with pytest.raises(KvplanError, match="--batch"):
        parse_int_axis("32k", "--batch")
    got = CliRunner().invoke(app, ["sweep", "-m", "llama-3-8b", "--seq-len", "4k", "--gpu", "H100-SXM",
                                   "--max-model-len", "32k", "--format", "jsonl"])
    row = __import__("json").loads(got.stdout.splitlines()[0])
    assert got.exit_code == 0 and row["seq_len"] == 4000 and row["max_model_len"] == 32000


def test_an_output_suffix_that_names_no_format_is_refused(tmp_path):
    """QA F2 9: `sweep -o out.xlsx` wrote CSV into out.xlsx; a suffix no format has is refused naming --output."""
    out = tmp_path / "out.xlsx"
    got = CliRunner().invoke(app, ["sweep", "-m", "llama-3-8b", "--seq-len", "128", "-o", str(out)])
    assert got.exit_code == 2 and "--output" in got.stderr and not out.exists()
    plain = tmp_path / "rows"
    assert CliRunner().invoke(app, ["sweep", "-m", "llama-3-8b", "--seq-len", "128", "-o", str(plain)]).exit_code == 0
    assert plain.read_text().startswith("model,")


def test_the_api_lists_its_lazy_names_and_gpus_show_names_its_argument():
    import kvplan

    assert {"estimate", "plan", "sweep", "load_card", "KvplanError"} <= set(dir(kvplan))
    got = CliRunner().invoke(app, ["gpus", "show", "NOPE-GPU"])
    assert got.exit_code == 2 and got.stderr.startswith("error: NAME: unknown GPU")


@pytest.mark.parametrize("command", [["plan"], ["report"], ["estimate"], []])
def test_help_in_80_columns_cuts_no_flag_name(command):
    """QA F2 3b: in a pipe or an 80-column terminal typer's panels cut 38 of plan's flag names to '--gpu-memory-uti…';
    below 120 columns the help is click's plain layout, which wraps descriptions and keeps every name whole."""
    import typer.core

    if not hasattr(typer.core, "HAS_RICH"):
        pytest.skip("this typer has no switch to its plain help layout: kvplan keeps typer's own")
    got = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": "80"})
    assert got.exit_code == 0 and "…" not in got.stdout
    body = got.stdout.split("\n", 1)[1]  # after click's own "Usage: ... [ARGS]..." line
    assert not re.search(r"\.\.\.$", body, re.M)  # click cuts a command's summary with '...'
    if command == []:
        assert "and the formula with numbers filled in." in " ".join(got.stdout.split())
    if command == ["plan"]:
        for flag in ("--gpu-memory-utilization", "--max-num-batched-tokens", "--speculative-num-steps",
                     "--speculative-num-draft-tokens", "--kv-cache-free-gpu-memory-fraction"):
            assert flag in got.stdout
        assert "# which GPUs, cheapest first\n" in got.stdout  # an example's comment keeps its own line


def test_trtllm_serve_underscore_spellings_are_taken():
    import json

    got = CliRunner().invoke(app, ["plan", "-m", "llama-3.1-8b", "--gpu", "H100-SXM", "--max-model-len", "8k",
                                   "--engine", "trtllm", "--max_num_tokens", "4096",
                                   "--kv_cache_free_gpu_memory_fraction=0.8", "--json"])
    assert got.exit_code == 0, got.stderr
    assert "--max_num_tokens 4096" in got.stdout and "--kv_cache_free_gpu_memory_fraction 0.8" in got.stdout


def test_cards_import_refuses_a_name_that_is_no_card_name(tmp_path):
    """QA F2 9: `cards import --name "bad name!"` wrote the card as `bad-name`; a name the user gives is refused as
    docs/errors.md says, one derived from the config is still made into one."""
    from pathlib import Path

    config = str(Path(__file__).parent / "data" / "configs" / "qwen2.5-7b-instruct.json")
    got = CliRunner().invoke(app, ["cards", "import", config, "--name", "bad name!", "-o", str(tmp_path / "x.yaml")])
    assert got.exit_code == 2 and got.stderr.startswith("error: --name:") and not (tmp_path / "x.yaml").exists()
    ok = CliRunner().invoke(app, ["cards", "import", config, "--name", "my-model.v2", "-o", str(tmp_path / "y.yaml")])
    assert ok.exit_code == 0 and "name: my-model.v2" in (tmp_path / "y.yaml").read_text()
