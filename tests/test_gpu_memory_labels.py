"""GPU memory labels agree with each other (QA D17): the vendor's figure is shown as the vendor writes it (decimal
GB), a total is called "what torch sees" only when it is, and a GPU file's totals must be near its stated memory."""

import json

import pytest
from typer.testing import CliRunner

from kvplan.cli.app import app
from kvplan.cost.hardware import load_gpu, load_gpus

ENTRY = """gpus:
  X:
    vendor: NVIDIA
    memory_bytes: {stated}
{extra}    memory_bandwidth_bytes_per_s: 3350000000000
    peak_flops: {{bf16: 9.89e14, fp16: 9.89e14}}
    source: https://vendor.example/datasheet.pdf
"""


def _gpu_file(tmp_path, stated=80_000_000_000, **extra):
    path = tmp_path / "gpus.yaml"
    path.write_text(ENTRY.format(stated=stated, extra="".join(f"    {k}: {v}\n" for k, v in extra.items())))
    return str(path)


def _run(*args):
    return CliRunner().invoke(app, list(args))


def test_stated_memory_is_the_vendors_figure():
    assert load_gpu("A100-40GB").stated_memory == "40 GB" and load_gpu("H200").stated_memory == "141 GB"
    res = _run("plan", "-m", "llama-3-8b", "--gpu", "A100-40GB", "--max-model-len", "1024")
    assert res.exit_code == 0 and "(the datasheet states 40 GB)" in res.output and "37.3 GiB" not in res.output
    listing = _run("gpus", "list").output
    assert "37.3 GiB" not in listing and "40 GB" in listing


def test_estimate_calls_a_stated_total_stated(tmp_path):
    """No visible total in the GPU file: the estimate's total is the vendor's, not 'what torch sees'."""
    res = _run("estimate", "-m", "llama-3-8b", "--seq-len", "1024", "--gpu", "X", "--gpu-file", _gpu_file(tmp_path))
    assert res.exit_code == 0, res.output
    assert "(what torch sees)" not in res.output and "no visible total known" in res.output
    data = json.loads(_run("estimate", "-m", "llama-3-8b", "--seq-len", "1024", "--gpu", "X", "--gpu-file",
                           _gpu_file(tmp_path), "--json").output)
    assert data["roofline"]["gpu_memory_visible"] is False
    data = json.loads(_run("estimate", "-m", "llama-3-8b", "--seq-len", "1024", "--gpu", "H100-SXM", "--json").output)
    assert data["roofline"]["gpu_memory_visible"] is True


@pytest.mark.parametrize(("extra", "field"), [
    (dict(visible_memory_bytes=85_030_322_176, visible_memory_source="x"), "visible_memory_bytes"),
    (dict(nvidia_smi_memory_mib=81559), "nvidia_smi_memory_mib")])
def test_totals_far_from_the_stated_memory_are_refused(tmp_path, extra, field):
    """QA D17: 300 MB stated beside a 79.2 GiB visible total (280x) is refused in one line naming the field."""
    res = _run("gpus", "list", "--gpu-file", _gpu_file(tmp_path, stated=300_000_000, **extra))
    line = res.output.strip()
    assert res.exit_code == 2 and "\n" not in line and f"gpus.X: {field}: " in line and "0.5x..1.1x" in line


def test_visible_above_nvidia_smi_is_refused(tmp_path):
    res = _run("gpus", "list", "--gpu-file", _gpu_file(tmp_path, visible_memory_bytes=85_030_322_176,
                                                        nvidia_smi_memory_mib=80000))
    assert res.exit_code == 2 and "nvidia_smi_memory_mib" in res.output


def test_every_bundled_gpu_and_a_sane_file_pass(tmp_path):
    assert len(load_gpus()) > 20
    res = _run("gpus", "list", "--gpu-file", _gpu_file(tmp_path, visible_memory_bytes=85_030_322_176,
                                                        nvidia_smi_memory_mib=81559))
    assert res.exit_code == 0, res.output
