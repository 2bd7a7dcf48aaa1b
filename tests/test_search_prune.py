"""The layout search refuses, unbuilt, the layouts whose even share of one GPU's weights does not fit
(kvplan/planning/capacity/search.py): its results must equal the search that builds every layout."""

from __future__ import annotations

import pytest

import kvplan.planning.capacity.search as search_module
from kvplan.planning.capacity.search import search


class _NeverRaised(Exception):
    pass


def _both(monkeypatch, model, **kw):
    pruned = search(model, **kw)
    with monkeypatch.context() as m:  # _option re-raises nothing, so no layout is refused unbuilt
        m.setattr(search_module, "WeightsDoNotFit", _NeverRaised)
        full = search(model, **kw)
    return pruned, full


def _check(monkeypatch, model, **kw):
    pruned, full = _both(monkeypatch, model, **kw)
    assert pruned.model_dump() == full.model_dump()
    return pruned


def test_deepseek_v3_search_is_unchanged_by_pruning(monkeypatch):
    r = _check(monkeypatch, "deepseek-v3", max_model_len=8192, concurrency=64, max_gpus=32)
    assert r.options  # the case prunes: deepseek-v3 fits no single GPU of the catalog
    calls = []
    real = search_module._option
    monkeypatch.setattr(search_module, "_option", lambda *a, **k: calls.append(a[1].layout) or real(*a, **k))
    search("deepseek-v3", max_model_len=8192, concurrency=64, max_gpus=32)
    assert len(calls) < r.layouts_tried  # layouts were refused without being built


CASES = [
    ("llama-3.1-405b", dict(max_model_len=8192, concurrency=32, max_gpus=32)),
    ("llama-3.1-70b", dict(max_model_len=32768, concurrency=16, max_gpus=16, sort="cost")),
    ("llama-3.1-70b", dict(max_model_len=8192, concurrency=16, max_gpus=16, sort="latency", kv_dtype="fp8")),
    ("deepseek-v3", dict(max_model_len=8192, concurrency=16, max_gpus=32, engine="sglang")),
    ("deepseek-v3", dict(max_model_len=8192, concurrency=16, max_gpus=32, weight_dtype="fp8_e4m3",
                         expert_parallel=True)),
    ("gpt-oss-120b", dict(max_model_len=8192, concurrency=64, max_gpus=8)),
    ("qwen3-235b-a22b", dict(max_model_len=8192, concurrency=16, max_gpus=16)),
    ("gemma-3-27b", dict(max_model_len=8192, concurrency=16, max_gpus=8)),
    ("llama-3.1-70b", dict(max_model_len=8192, concurrency=16, max_gpus=16, enable_lora=True, max_lora_rank=64)),
    ("llama-3.1-70b", dict(max_model_len=8192, concurrency=16, max_gpus=16, cpu_offload_gb=40)),
]


@pytest.mark.slow
@pytest.mark.parametrize("model,kw", CASES, ids=[f"{m}-{i}" for i, (m, _) in enumerate(CASES)])
def test_search_is_unchanged_by_pruning(monkeypatch, model, kw):
    _check(monkeypatch, model, **kw)
