"""Token counts on the command line read as vLLM reads them (QA D16): ``human_readable_int`` of
vllm/utils/argparse_utils.py (0.33), which its --max-model-len and --max-num-batched-tokens take."""

import json

import pytest
from typer.testing import CliRunner

from kvplan.cli.app import app
from kvplan.errors import KvplanError
from kvplan.units import parse_tokens

# (text, what vLLM's human_readable_int returns); None: it raises
VLLM_CASES = [("4096", 4096), (" 4096 ", 4096), ("1_024", 1024), ("32k", 32_000), ("32K", 32_768), ("4k", 4000),
              ("128K", 131_072), ("1m", 1_000_000), ("1M", 1_048_576), ("25.6k", 25_600), ("1g", 10**9),
              ("1G", 2**30), ("1.5K", None), ("4096.0", None), ("32kb", None), ("32 k", None), ("abc", None),
              ("", None), ("k", None)]


@pytest.mark.parametrize(("text", "expected"), VLLM_CASES)
def test_token_count_is_vllms_human_readable_int(text, expected):
    if expected is None:
        with pytest.raises(KvplanError, match="^--max-model-len: .*allowed: "):
            parse_tokens("--max-model-len", text)
    else:
        assert parse_tokens("--max-model-len", text) == expected


def _plan(*flags):
    return CliRunner().invoke(app, ["plan", "-m", "llama-3-8b", "--gpu", "A100-80GB", "--json", *flags])


@pytest.mark.parametrize(("given", "tokens"), [("32k", 32_000), ("32K", 32_768), ("8192", 8192)])
def test_plan_takes_vllm_spellings(given, tokens):
    res = _plan("--max-model-len", given, "--max-num-batched-tokens", "4K")
    assert res.exit_code == 0, res.output
    inputs = json.loads(res.output)["inputs"]
    assert (inputs["max_model_len"], inputs["max_num_batched_tokens"]) == (tokens, 4096)


@pytest.mark.parametrize("given", ["4096.0", "1.5K", "auto", "-1", "32x"])
def test_plan_refuses_what_vllm_refuses_in_one_line(given):
    res = _plan(f"--max-model-len={given}")
    assert res.exit_code == 2
    line = res.output.strip()
    assert "\n" not in line and line.startswith("error: --max-model-len: ") and "allowed:" in line


@pytest.mark.parametrize(("text", "expected"), [
    ("80G", 80 * 2**30), ("80g", 80 * 10**9), ("80GB", 80 * 10**9), ("80 GiB", 80 * 2**30), ("512M", 512 * 2**20),
    ("8k", 8000), ("8K", 8192), ("80e9", 80 * 10**9), ("6.51GiB", 651 * 2**30 // 100)])
def test_sizes_read_one_letter_as_vllm_does(text, expected):
    """QA D16: a bare letter is vLLM's (human_readable_int: --kv-cache-memory-bytes 8G is 8 GiB), as kvplan's own
    log parser reads vLLM's flags; 'GB' stays SI and 'GiB' IEC; an exponent is a plain byte count."""
    from kvplan.units import parse_size

    assert parse_size("--gpu-memory", text) == expected


@pytest.mark.parametrize(("given", "needle"), [("-1", "cannot be negative"), ("-2GiB", "cannot be negative"),
                                               ("1e30", "more than 16 EiB"), ("lots", "not a size")])
def test_bad_sizes_say_what_is_wrong(given, needle):
    res = _plan("--max-model-len", "4096", f"--gpu-memory={given}")
    assert res.exit_code == 2 and res.output.startswith("error: --gpu-memory: ") and needle in res.output


def test_gpu_memory_letter_on_the_command_line():
    res = _plan("--max-model-len", "4096", "--gpu-memory", "80G")
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["inputs"]["gpu_memory_bytes"] == 80 * 2**30
