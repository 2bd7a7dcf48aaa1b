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
    assert {c.case for c in r.checks} >= {"dense-f16", "dense-q8_0-fa", "dense-np3", "moe", "gemma3-swa", "mamba",
                                          "deepseek2-mla", "lfm2-hybrid", "dense-lora"}
    assert any(c.case == "dense-lora" and c.what == "CPU lora buffer(s)" for c in r.checks)


def test_a_wrong_prediction_is_caught(monkeypatch):
    """The comparison can fail: predict 3 bytes per f16 element and the KV lines differ from llama.cpp's."""
    from kvplan.cost import llamacpp as lc
    from kvplan.verify import llamacpp as v

    monkeypatch.setitem(lc.KV_TYPES, "f16", (1, 3))
    r = v.verify_llamacpp(["dense-f16"])
    assert not r.ok and [c.what for c in r.checks if not c.ok] == ["CPU kv buffer(s)", "kv cache (MiB, cells, layers)"]


def test_cli_refuses_a_model(cli):
    code, _, err = cli("verify", "--engine", "llamacpp", "--model", "llama-3-8b")
    assert code == 2 and "--engine llamacpp" in err


def test_cli_runs_the_cases(cli_json):
    r = cli_json("verify", "--engine", "llamacpp")
    assert r["checks"] and all(c["ok"] for c in r["checks"])
