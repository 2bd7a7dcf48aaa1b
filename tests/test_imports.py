"""What each entry point imports: the estimate path stays free of torch, numpy and matplotlib. These tests run
whether torch is installed or not (a fresh interpreter each, so nothing imported by other tests leaks in)."""

import subprocess
import sys

import pytest

HEAVY = ("torch", "numpy", "matplotlib", "transformers", "huggingface_hub")  # huggingface_hub: for a Hub id only


def loaded_after(code: str) -> list[str]:
    probe = f"import sys; {code}; print(' '.join(m for m in {HEAVY!r} if m in sys.modules))"
    return subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.split()


@pytest.mark.parametrize("code", [
    "import kvplan.verify.run, kvplan.verify.activations, kvplan.verify.allocator, kvplan.verify.limits",
    "import kvplan.cli",
    "import kvplan; kvplan.estimate('llama-2-7b', seq_len=128, gpu='H100-SXM')",
    "import kvplan; kvplan.plan('llama-3.1-70b', gpu='H100-SXM', tp=4, max_model_len=8192)",
    "import kvplan; kvplan.search('llama-3-8b', max_model_len=4096, concurrency=8)",
    "import kvplan; kvplan.sweep('llama-3-8b', batch='1..8*2', seq_len='1024,2048', gpu='H100-SXM').to_csv(__import__('io').StringIO())",
    "from kvplan.planning.check import run_check; run_check()",
])
def test_no_heavy_imports(code):
    assert loaded_after(code) == []


def test_the_probe_sees_a_heavy_import():
    pytest.importorskip("torch")
    assert "torch" in loaded_after("import kvplan.verify.reference.model")
