"""A llama.cpp layout search builds each distinct set of llama.cpp buffers once, and its options are the direct
plans' (QA report area A, defect 17: the search ran ~10x longer than vLLM's, rebuilding every buffer for every
quant type, slot count, -c and -ngl probe and every GPU type)."""

import json

import kvplan.cost.llamacpp as lc
from kvplan.model.catalog import load_card
from kvplan.planning.capacity import plan
from kvplan.planning.capacity.search import search


def test_search_builds_each_buffer_set_once(monkeypatch):
    """Three GPU types, one layout each: 82 builds of llama.cpp's buffers (each new context resolved once), not
    1,453 (every probe of every quant type, again for each GPU type and for the options' quant tables)."""
    built = []
    resolve = lc.resolve_context
    monkeypatch.setattr(lc, "resolve_context", lambda *a: built.append(a) or resolve(*a))
    card = load_card("llama-3.1-8b").model_copy(update={"name": "llama-3.1-8b-search-count"})  # no cached buffers
    s = search(card, max_model_len=8192, concurrency=8, engine="llamacpp", gpus=["L40S", "H100-SXM", "RTX-4090"])
    assert len(s.options) == 3 and len(built) < 200


def test_search_options_are_the_direct_plans(cli):
    """Each option's per-GPU budget, pool and launch line are `kvplan plan`'s for its GPU and layout, quant and K/V
    types included (the search builds them without the plan's notes and quant table)."""
    code, out, err = cli("plan", "-m", "llama-3.1-70b", "--max-model-len", "8192", "--concurrency", "4", "--engine",
                         "llamacpp", "--gpus", "L40S,RTX-4090,H100-SXM", "--json")
    assert code == 0, err
    for o in json.loads(out)["options"]:
        p = plan("llama-3.1-70b", gpu=o["gpu"], pp=o["pp"], dp=o["dp"], max_model_len=8192, engine="llamacpp")
        assert o["launch_command"] == p.launch_command
        assert o["per_gpu"] == p.per_gpu.model_dump(mode="json")
        assert o["kv_cache"] == p.kv_cache.model_dump(mode="json")
