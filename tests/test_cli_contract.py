"""The CLI's contract: exit 0 / 1 / 2 / 3, one line on bad input, output that is never cut, commands a newcomer
looks for (--version, cards validate, gpus list), and the Python API refusing wrong types with KvplanError."""

from __future__ import annotations

import json
import re

import pytest

from helpers import one_line_error
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kvplan
from kvplan import KvplanError
from kvplan.verify.limits import check_fits_machine

EST = ("estimate", "--model", "llama-2-7b", "--seq-len", "16")




@pytest.mark.parametrize(("args", "needle"), [
    (("--prompt-len", "0"), "--prompt-len: must be an integer in 1.."),
    (("--max-cache-len", "0", "--engine", "hf-static"), "--max-cache-len: must be an integer in 1.."),
    (("--kv-dtype", ""), "--kv-dtype: expected a non-empty string"),
    (("--mfu", "0.5"), "--mfu: only used with --gpu"),
    (("--gpu-file", "/nonexistent.yaml"), "--gpu-file: only used with --gpu"),
    (("--attention", "gqa:²"), "--attention: unknown layout 'gqa:²'"),
    # click's parse errors: the words are click's; kvplan's are the flag named, the command and "see --help"
    (("--batch", "abc"), re.compile(r"^error: .*--batch\b.* \(kvplan estimate\); see --help$")),
    (("--bogus",), re.compile(r"^error: .*--bogus\b.* \(kvplan estimate\); see --help$")),
    (("--batch", str(10**150)), "--batch: must be an integer in 1..1,000,000,000,000"),
    (("--mfu", "0", "--gpu", "H100-SXM"), "--mfu: a fraction in (0, 1]"),
])
def test_bad_flags_are_one_line_exit_2(cli, args, needle):
    line = one_line_error(cli, *EST, *args)
    assert (needle.search(line) if isinstance(needle, re.Pattern) else needle in line), line


def test_layouts_on_encoder_only_and_encoder_len_on_decoder_only_are_refused(cli):
    assert "encoder-only" in one_line_error(cli, "estimate", "-m", "bert-base-uncased", "--seq-len", "8",
                                            "--attention", "mqa")
    assert "--encoder-len: only for encoder-decoder" in one_line_error(cli, "verify", "-m", "llama-2-7b",
                                                                        "--encoder-len", "4")


def test_internal_error_is_exit_3_with_traceback_only_under_debug(cli, monkeypatch):
    import kvplan.planning.estimate as est

    def boom(*a, **k):
        raise RuntimeError("synthetic failure")

    monkeypatch.setattr(est, "estimate_request", boom)
    code, out, err = cli(*EST)
    assert code == 3 and "internal error: RuntimeError: synthetic failure" in err and "please report" in err
    assert "Traceback" not in err
    code, out, err = cli("--debug", *EST)
    assert code == 3 and "Traceback" in err


def test_user_text_with_rich_markup_is_printed_verbatim(cli):
    assert "unknown model '[/x]'" in one_line_error(cli, "estimate", "--model", "[/x]", "--seq-len", "4")
    code, out, err = cli("estimate", "--model", "[bold]x", "--seq-len", "4")
    assert code == 2 and "[bold]x" in err


def test_piped_output_is_never_cut(cli):
    code, out, _ = cli("estimate", "--model", "gemma-2-27b", "--batch", "123456", "--seq-len", "131072")
    assert code == 0 and "…" not in out and "..." not in out
    formula = next(line for line in out.splitlines() if "seq x" in line and "sliding" not in line)
    # the card is float32: 4 B per value; 123456 x 23 x 16 x 128 x 4096 x 2 x 4 B = 190,554,814,021,632 B
    assert formula.strip() == "123456 seq x 23 layers x 16 kv_heads x 128 head_dim x 4096 tokens x 2 (K,V) x 4 B = 173.3 TiB"


def test_cards_show_redirected_is_a_valid_card(cli, tmp_path):
    code, out, _ = cli("cards", "show", "mistral-7b-v0.1")
    card_file = tmp_path / "m.yaml"
    card_file.write_text(out)
    assert code == 0 and yaml.safe_load(out)["sliding_window"] == 4096
    assert cli("estimate", "--model", str(card_file), "--seq-len", "8", "--json")[0] == 0


def test_cards_validate_lists_every_problem_of_every_file_on_stderr(cli, tmp_path):
    from kvplan.model.catalog import cards_dir

    text = (cards_dir() / "llama-2-7b.yaml").read_text()
    one, two = tmp_path / "one.yaml", tmp_path / "two.yaml"
    one.write_text(text.replace("num_layers: 32", "num_layers: -1").replace("vocab_size: 32000", "vocab_size: x"))
    two.write_text(text.replace("hidden_size: 4096", "hidden_size: 0").replace("ffn_size: 11008", "ffn_sise: 1"))
    code, out, err = cli("cards", "validate", str(one), "llama-2-7b", str(two))
    lines = err.splitlines()
    assert code == 2 and out.split() == ["ok", "llama-2-7b"]
    assert [ln.split(": ")[1:3] for ln in lines] == [
        [str(one), "num_layers"], [str(one), "vocab_size"], [str(two), "hidden_size"], [str(two), "ffn_size"],
        [str(two), "ffn_sise"]]
    assert all(ln.startswith("error: ") for ln in lines)


def test_version_validate_and_gpus(cli, tmp_path):
    code, out, _ = cli("--version")
    assert code == 0 and out.strip() == f"kvplan {kvplan.__version__}"
    bad = tmp_path / "bad.yaml"
    from kvplan.model.catalog import cards_dir

    bad.write_text((cards_dir() / "llama-2-7b.yaml").read_text().replace("num_layers: 32", "num_layers: true"))
    code, out, err = cli("cards", "validate", "llama-2-7b", str(bad))
    assert code == 2 and "ok llama-2-7b" in out and f"error: {bad}: num_layers" in err and "error" not in out
    assert cli("cards", "validate", "llama-2-7b")[0] == 0
    code, out, _ = cli("gpus", "list", "--json")
    assert code == 0 and {g["name"] for g in json.loads(out)} >= {"H100-SXM", "A100-80GB", "MI300X"}


def test_help_shows_flags_without_a_value(cli):
    code, out, _ = cli("estimate", "--help")
    assert code == 0 and "<bool>" not in next(line for line in out.splitlines() if "--json" in line)
    assert "query heads per KV head" in " ".join(out.replace("│", " ").split())


def _commands(group, path=()):
    import click

    for name, cmd in getattr(group, "commands", {}).items():
        yield (*path, name), cmd
        if isinstance(cmd, click.Group):
            yield from _commands(cmd, (*path, name))


def test_help_texts_keep_their_brackets():
    """typer renders help as rich markup: a bare '[gguf]' or '[@REVISION]' is read as a tag and vanishes from
    --help ('Needs kvplan.'); every help text and docstring must render as written ('\\[' for a bracket)."""
    import typer
    from rich.text import Text

    from kvplan.cli.app import app

    root = typer.main.get_command(app)
    texts = [((name,), p.name, p.help) for name, cmd in _commands(root) for p in cmd.params
             if getattr(p, "help", None)]
    texts += [(name, "docstring", cmd.help) for name, cmd in _commands(root) if cmd.help]
    for where, what, text in texts:
        assert Text.from_markup(text).plain == text.replace("\\[", "["), (where, what, text)
    assert any("kvplan\\[gguf]" in t for *_, t in texts)


def test_plan_help_names_the_gguf_extra(cli):
    code, out, _ = cli("plan", "--help")
    assert code == 0 and "kvplan[gguf]." in out and "ORG/NAME[@" in out  # the narrow help may cut the rest


@pytest.mark.parametrize(("kwargs", "needle"), [
    (dict(batch="3"), "--batch"), (dict(seq_len=4.0), "--seq-len"), (dict(kv_dtype=5), "--kv-dtype"),
    (dict(attention=5), "--attention"), (dict(gpu=5), "--gpu"), (dict(engine=5), "--engine"),
    (dict(kv_heads="8"), "--kv-heads"), (dict(gpu="H100-SXM", mbu="x"), "--mbu"),
])
def test_python_api_refuses_wrong_types(kwargs, needle):
    with pytest.raises(KvplanError, match=needle):
        kvplan.estimate("llama-2-7b", **{"seq_len": 16, **kwargs})
    with pytest.raises(KvplanError, match="model: expected a card name or path"):
        kvplan.estimate(123, seq_len=3)


def test_huge_but_allowed_inputs_keep_exact_integers():
    r = kvplan.estimate("deepseek-v3", batch=10**12, seq_len=10**12, gpu="H100-SXM")
    assert r.kv_cache.total_bytes == 10**24 * 70_272 and r.roofline.time_per_output_token_s > 0


def test_verify_refuses_what_the_machine_cannot_hold():
    with pytest.raises(KvplanError, match=r"--layers/--scale: the reference run would peak at 16.0 GiB"):
        check_fits_machine(16 * 2**30, 2**30, "cpu", 2, 30, 1, available=8 * 2**30)
    check_fits_machine(2**30, 2**30, "cpu", 2, 30, 1, available=8 * 2**30)  # fits: no error
    with pytest.raises(KvplanError, match="--decode-steps: 1000000 steps"):
        check_fits_machine(1, 1, "cpu", 10**6, 30, 1, available=8 * 2**30)


FLAG_VALUES = st.one_of(st.integers(-3, 10**13).map(str), st.sampled_from(["", "abc", "1e3", "0", "-1", "gqa:0",
                                                                            "fp8", "[/x]", "H100-SXM", "nan"]))


@settings(max_examples=int(__import__("os").environ.get("KVPLAN_FUZZ_EXAMPLES", 40)), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(flags=st.dictionaries(st.sampled_from(["--batch", "--seq-len", "--prompt-len", "--kv-dtype", "--engine",
                                              "--attention", "--gpu", "--mfu", "--block-size", "--max-cache-len",
                                              "--kv-heads", "--encoder-len"]), FLAG_VALUES, max_size=4))
def test_generated_flag_sets_exit_0_or_2(cli, flags):
    args = ["estimate", "--model", "mistral-7b-v0.1", *[x for kv in flags.items() for x in kv]]
    if "--seq-len" not in flags:
        args += ["--seq-len", "64"]
    code, out, err = cli(*args)
    assert code in (0, 2) and "Traceback" not in out + err, (args, err)
    if code == 2:
        assert len(err.strip().splitlines()) == 1, err


def test_verify_refuses_a_run_that_would_take_minutes(cli):
    # unshrunk Llama-2-7B: 2 x 6.7e9 FLOPs per token x 32 tokens in fp16 on one CPU thread is far beyond 300 s
    err = one_line_error(cli, "verify", "--model", "llama-2-7b", "--seq-len", "32")
    assert err.startswith("error: --layers/--scale: the reference run") and "--layers N and --scale F" in err


@pytest.mark.parametrize(("call", "needle"), [
    (lambda: kvplan.plan("llama-2-7b", gpu="H100-SXM", max_model_len=100, gpu_memory_utilization="0.9"),
     "--gpu-memory-utilization: a fraction in"),
    (lambda: kvplan.plan("llama-2-7b", gpu="H100-SXM", max_model_len="x"), "--max-model-len"),
    (lambda: kvplan.search("llama-2-7b", max_model_len=100, concurrency="3"), "--concurrency"),
    (lambda: kvplan.sweep("llama-2-7b", seq_len=5.5), "--seq-len"),
    (lambda: __import__("kvplan.planning.compare", fromlist=["x"]).compare("llama-2-7b", attention=5), "--attention"),
    (lambda: kvplan.card_from_hf_config(5), "config: expected a dict"),
])
def test_other_python_entry_points_refuse_wrong_types(call, needle):
    with pytest.raises(KvplanError, match=needle):
        call()


def test_verify_encoder_len_0_is_refused_not_defaulted(cli):
    assert "--encoder-len: must be an integer in 1.." in one_line_error(
        cli, "verify", "-m", "t5-base", "--layers", "2", "--scale", "0.0625", "--seq-len", "8", "--encoder-len", "0")


def test_usage_errors_name_the_command_under_python_m():
    """`python -m kvplan sweep --no-such` names 'kvplan sweep', not the interpreter's words ('kvplan -m kvplan')."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    import kvplan

    root = str(Path(kvplan.__file__).resolve().parents[1])  # this checkout's kvplan, not an installed one
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    run = subprocess.run([sys.executable, "-m", "kvplan", "cards", "show", "--no-such"], capture_output=True,
                         text=True, env=env)
    assert run.returncode == 2 and "(kvplan cards show); see --help" in run.stderr
