"""The CLI, driven through typer's CliRunner: JSON contract and one-line errors with exit code 2."""

import json
import subprocess
import sys

import pytest


def test_estimate_json_contract(cli_json):
    r = cli_json("estimate", "--model", "llama-2-7b", "--batch", "16", "--seq-len", "4096")
    assert r["schema_version"] == 3
    assert r["inputs"]["batch"] == 16 and r["inputs"]["kv_dtype"] == "fp16"
    assert r["kv_cache"]["bytes_per_token"] == 524_288
    assert r["kv_cache"]["total_bytes"] == 34_359_738_368
    assert r["weights"]["params"] == 6_738_415_616 and r["weights"]["bytes"] == 2 * 6_738_415_616
    assert r["total_bytes"] == r["kv_cache"]["total_bytes"] + r["weights"]["bytes"]
    assert r["model"]["attention"] == "MHA"


def test_estimate_table_shows_formula(cli):
    code, out, _ = cli("estimate", "--model", "llama-2-70b", "--batch", "16", "--seq-len", "4096", "--kv-heads", "64")
    assert code == 0
    assert "16 seq x 80 layers x 64 kv_heads x 128 head_dim x 4096 tokens x 2 (K,V) x 2 B = 160.0 GiB" in out
    assert "what-if layout" in out


def test_user_card_by_path(cli_json, tmp_path):
    from kvplan import load_card

    text = load_card("llama-2-7b").model_dump_json(exclude_none=True)
    path = tmp_path / "mine.yaml"
    path.write_text(text.replace('"llama-2-7b"', '"mine"'))  # JSON is valid YAML
    assert cli_json("estimate", "--model", str(path), "--seq-len", "1")["model"]["name"] == "mine"


def _error(cli, *args):
    code, out, err = cli(*args)
    assert code == 2, (code, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in out + err
    return lines[0]


def test_unknown_model_suggests(cli):
    line = _error(cli, "estimate", "--model", "llama-2-7", "--seq-len", "10")
    assert "llama-2-7b" in line


def test_invalid_yaml_names_line(cli, tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("name: x\nnum_layers: [1, 2\nhidden_size: 3\n")
    line = _error(cli, "estimate", "--model", str(path), "--seq-len", "10")
    assert str(path) in line and "line 3" in line


def test_schema_violation_names_file_and_field(cli, tmp_path):
    from kvplan import load_card

    data = load_card("llama-2-7b").model_dump(exclude_none=True)
    data["num_kv_heads"] = 5
    path = tmp_path / "five.yaml"
    path.write_text(json.dumps(data))
    line = _error(cli, "estimate", "--model", str(path), "--seq-len", "10")
    assert str(path) in line and "num_kv_heads" in line and "1, 2, 4, 8, 16, 32" in line


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("--batch", "0"), "--batch"),
        (("--seq-len", "-5"), "--seq-len"),
        (("--kv-dtype", "fp7"), "allowed: fp32"),
        (("--engine", "lmdeploy"), "allowed: ideal"),
        (("--attention", "gqa:5"), "gqa:5"),
        (("--kv-heads", "3"), "allowed: 1, 2, 4"),
        (("--engine", "hf-dynamic", "--kv-dtype", "int4"), "--kv-dtype"),
        (("--engine", "hf-static", "--max-cache-len", "10"), "--max-cache-len"),
        (("--encoder-len", "10"), "--encoder-len"),
    ],
)
def test_bad_flags(cli, args, needle):
    base = ("estimate", "--model", "llama-2-7b", "--seq-len", "100")
    assert needle in _error(cli, *base, *args)


def test_encoder_decoder_needs_encoder_len(cli):
    assert "--encoder-len" in _error(cli, "estimate", "--model", "t5-base", "--seq-len", "10")


def test_cards_list_show_schema(cli, cli_json):
    rows = cli_json("cards", "list")
    names = {r["name"] for r in rows}
    # 25 + gpt-oss-20b/120b and smollm3-3b (new families) + six cards for docs/capacity.md + two quantized + four
    # 2025 attention-only families (Llama-4-Scout, Gemma-3-12B, OLMo-2-13B, EXAONE-4.0-32B)
    assert {"llama-2-7b", "deepseek-v3", "t5-11b", "bert-base-uncased", "deepseek-v3-fp8", "qwen3-8b-awq",
            "llama-4-scout-17b-16e", "gemma-3-12b", "olmo-2-13b", "exaone-4.0-32b", "jamba-1.5-mini", "qwen3.5-27b",
            "nemotron-h-56b", "qwen3-next-80b-a3b", "mamba-codestral-7b"} <= names
    # + four state-space / linear-attention hybrids (Jamba, Qwen3.5, Nemotron-H, Qwen3-Next) and Mamba-2 (Codestral)
    # + GLM-4.5-Air, GLM-4.6, Kimi-K2, Granite-4.0-Micro, Nemotron-3-Nano; four multimodal checkpoints with their
    # vision towers (LLaVA-NeXT, Mistral Small 3.1, Gemma 3 27B, Qwen2.5-VL); Qwen3-32B (the llama.cpp quant question)
    assert len(rows) == 55
    assert next(r for r in rows if r["name"] == "falcon-7b")["kv_bytes_per_token"] == 8192
    shown = cli_json("cards", "show", "gemma-2-9b")
    assert shown["card"]["head_dim"] == 256 and "GQA" in shown["derived"]["attention"]
    code, out, _ = cli("cards", "show", "llama-2-7b")
    assert code == 0 and "head_dim: 128 (derived)" in out
    code, out, _ = cli("cards", "schema")
    schema = json.loads(out)
    assert schema["additionalProperties"] is False and "num_kv_heads" in schema["properties"]
    assert "llama-2-7b" in _error(cli, "cards", "show", "llama2-7b")


def test_estimate_never_imports_torch():
    code = ("import sys; from typer.testing import CliRunner; from kvplan.cli.app import app; "
            "r = CliRunner().invoke(app, ['estimate', '--model', 'deepseek-v3', '--seq-len', '4096', '--json']); "
            "assert r.exit_code == 0, r.output; "
            "heavy = [m for m in ('torch', 'numpy', 'transformers', 'matplotlib') if m in sys.modules]; "
            "print(','.join(heavy))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == ""


def test_python_m_kvplan():
    out = subprocess.run([sys.executable, "-m", "kvplan", "estimate", "--model", "falcon-7b", "--seq-len", "1",
                          "--json"], capture_output=True, text=True, check=True).stdout
    assert json.loads(out)["kv_cache"]["bytes_per_token"] == 8192


def test_estimate_flops_and_roofline(cli, cli_json):
    r = cli_json("estimate", "--model", "llama-2-7b", "--seq-len", "4096", "--prompt-len", "1024")
    pre, dec = r["flops"]["prefill"], r["flops"]["decode_step"]
    assert isinstance(pre["total"], int) and pre["total"] > dec["total"] > 0
    # a decode step runs every weight matrix once per token: 2 FLOPs per weight, plus attention over 4096 keys
    # the input embedding is a gather and the 65 RMSNorm weights are elementwise: neither is a matmul
    weights = 6_738_415_616 - 32000 * 4096 - 65 * 4096
    assert dec["total"] == 2 * weights + 32 * 4 * 4096 * 4096
    assert r["roofline"] is None
    r = cli_json("estimate", "--model", "llama-2-7b", "--seq-len", "4096", "--gpu", "H100-SXM")
    assert r["roofline"]["decode_step"]["bound"] == "memory" and r["roofline"]["gpu"] == "H100-SXM"
    assert "H100-SXM" in _error(cli, "estimate", "--model", "llama-2-7b", "--seq-len", "10", "--gpu", "H900")
    assert "--prompt-len" in _error(cli, "estimate", "--model", "llama-2-7b", "--seq-len", "10", "--prompt-len", "11")
    t5 = cli_json("estimate", "--model", "t5-base", "--seq-len", "10", "--encoder-len", "20")["flops"]
    assert t5["prefill"]["total"] > t5["decode_step"]["total"] > 0  # encoder-decoder FLOPs (exact: test_flops.py)
    assert cli_json("estimate", "--model", "bert-base-uncased", "--seq-len", "10")["flops"] is None


def test_a_table_too_wide_for_the_terminal_is_stacked_not_folded_mid_word():
    """At 80 columns a table wider than the terminal prints each row as a block of 'header: value' lines: no name or
    number is split or cut; a table that fits, and any pipe, keep the table."""
    import io

    from rich.console import Console

    from kvplan.report.console import table

    t = table("wide", ["name", *(f"column {i}" for i in range(9))], left=("name",))
    t.add_row("llama-4-scout-17b-16e", *(f"{i},234,567,890" for i in range(9)))
    out = io.StringIO()
    Console(file=out, width=80, color_system=None).print(t)
    lines = out.getvalue().splitlines()
    assert max(map(len, lines)) <= 80
    assert "llama-4-scout-17b-16e" in lines and "  column 8: 8,234,567,890" in [line.rstrip() for line in lines]
    narrow = table("fits", ["name", "value"], left=("name",))
    narrow.add_row("gpt2", "1")
    out = io.StringIO()
    Console(file=out, width=80, color_system=None).print(narrow)
    assert "value" in out.getvalue().splitlines()[2]  # the header row of a real table (title, rule, header)
