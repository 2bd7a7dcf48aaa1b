"""`kvplan verify --engine llamacpp`: the real llama.cpp (llama-cpp-python, the optional extra kvplan[llamacpp]) loads
small GGUFs written here and logs its buffers; kvplan's prediction must match every model, KV, recurrent and output
line to the printed MiB. Slow tier (the extra builds llama.cpp from source)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow
pytest.importorskip("gguf")
pytest.importorskip("llama_cpp")


def test_every_case_matches_llama_cpp():
    from kvplan.verify.llamacpp import verify_llamacpp

    r = verify_llamacpp()
    bad = [c for c in r.checks if not c.ok]
    assert not bad, bad
    assert {c.case for c in r.checks} >= {"dense-f16", "dense-q8_0-fa", "dense-np3", "moe", "gemma3-swa"}


def test_a_wrong_prediction_is_caught(monkeypatch):
    """The comparison can fail: predict a padding of 512 instead of 256 and the KV lines differ."""
    from kvplan.cost import llamacpp as lc
    from kvplan.verify import llamacpp as v

    real = lc.pad
    monkeypatch.setattr(lc, "pad", lambda x, n: real(x, 512 if n == 256 else n))
    r = v.verify_llamacpp(["dense-f16"])
    assert not r.ok


def test_cli_refuses_a_model(cli):
    code, _, err = cli("verify", "--engine", "llamacpp", "--model", "llama-3-8b")
    assert code == 2 and "--engine llamacpp" in err
