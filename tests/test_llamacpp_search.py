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


def test_a_guess_leaves_the_binary_search_its_answer():
    """``longest`` with a guess (where most_slots expects the answer) finds what it finds without one, for every
    threshold and guess, in range or not."""
    from kvplan.cost.runtimes.base import longest

    for hi in (0, 1, 2, 7, 64):
        for edge in range(hi + 1):
            ok = lambda n, edge=edge: n <= edge  # noqa: E731
            for guess in (None, -3, *range(hi + 3)):
                assert longest(ok, hi, guess) == longest(ok, hi) == edge


def _flag_sets():
    """Flags of the shapes a plan sizes: slots, a unified cache, quantized K/V, GPUs split, partial offload, and
    2025-02 rules without flash attention (-c padded to 32 cells)."""
    f = lc.LlamaFlags
    return [f(n_parallel=3, n_ctx=3 * 8192, kv_unified=False), f(n_ctx=40_000, kv_unified=True),
            f(n_parallel=5, n_ctx=5 * 4096, type_k="q8_0", type_v="q8_0", flash_attn="on", n_gpus=2),
            f(n_parallel=2, n_ctx=2 * 8192, n_gpus=3, tensor_split=(3.0, 1.0, 1.0)),
            f(n_parallel=4, n_ctx=4 * 4096, n_gpu_layers=20), f(n_ctx=5000, rules="2025-02", flash_attn="off"),
            f(n_parallel=2, n_ctx=2 * 4096, rules="2025-12", swa_full=True)]


def test_sizes_are_memorys_figures():
    """``lc.sizes`` (what the searches, stages and pool read) sums the same buffers ``lc.memory`` lists."""
    from kvplan.cost.runtimes.llamacpp import hparams_and_weights

    for name in ("llama-3.1-70b", "gemma-3-27b", "jamba-1.5-mini", "deepseek-v2-lite"):
        hp, weights = hparams_and_weights(load_card(name), 16)
        for f in _flag_sets():
            m, s = lc.memory(hp, f, weights), lc.sizes(hp, f, weights)
            assert s.context.n_ctx == m.context.n_ctx and s.context.n_ctx_seq == m.context.n_ctx_seq
            assert s.context.n_seq_max == m.context.n_seq_max and s.caches == len(m.caches)
            for d in m.devices:
                assert sum(s.on(d, k) for k in ("model", "lora", "kv", "recurrent", "output", "compute")) == \
                    m.device_bytes(d)
            gpus = [m.device_bytes(d) for d in m.devices if d.startswith("CUDA") and d[4:].isdigit()]
            assert s.gpu == max(gpus, default=0)


def test_the_context_search_steps_by_llamas_padding():
    """``max_context`` (the pool's longest context) searches multiples of the padding llama.cpp rounds -c to; it finds
    what a search over every cell count finds (the pool's rule: every GPU holds its buffers at n_ctx)."""
    from kvplan.cost.runtimes.base import longest
    from kvplan.cost.runtimes.llamacpp import hparams_and_weights, max_context

    card = load_card("llama-3.1-8b")
    hp, weights = hparams_and_weights(card, 16)
    for f in _flag_sets():
        gpus = [f"{f.backend}{i}" for i in range(f.n_gpus)]
        for total in (17 * 2**30, 20 * 2**30, 24 * 2**30, 80 * 2**30):
            def ok(n):
                m = lc.memory(hp, f.replaced(n_ctx=n), weights)
                return all(m.device_bytes(g) <= total for g in gpus)

            for hi in (1000, 8192, 131_072, 300_001):
                assert max_context(card, f, total, 16, hi) == (longest(ok, hi) if ok(1) else 0), (f, total, hi)


def test_flags_with_a_context_hash_as_equal_flags_do():
    """Flags built by ``replaced`` from a context-free twin (the -c and -np searches' way, hashed from the twin) and
    the same flags built whole are equal, hash alike and find each other's cache entries."""
    base = lc.LlamaFlags(type_k="q8_0", type_v="q8_0", flash_attn="on", n_gpus=2, gguf_quant="Q4_K_M")
    built = [lc.LlamaFlags(n_ctx=16384, n_parallel=2, kv_unified=False, type_k="q8_0", type_v="q8_0",
                           flash_attn="on", n_gpus=2, gguf_quant="Q4_K_M"),
             base.replaced(n_ctx=16384, n_parallel=2, kv_unified=False),
             base.replaced(n_ctx=8192).replaced(n_parallel=2, n_ctx=16384, kv_unified=False),
             lc.LlamaFlags(n_gpus=2).replaced(type_k="q8_0", type_v="q8_0", flash_attn="on", gguf_quant="Q4_K_M",
                                              n_ctx=16384, n_parallel=2, kv_unified=False)]
    assert all(f == built[0] and hash(f) == hash(built[0]) for f in built)
    assert len({f: None for f in built}) == 1
    assert all(f.without_context() == base and hash(f.without_context()) == hash(base) for f in built)
    other = base.replaced(n_ctx=16384, n_parallel=4, kv_unified=False)
    assert other != built[0] and other.without_context() == base
    assert base.replaced(type_k="f16").replaced(n_ctx=1).without_context() == base.replaced(type_k="f16")


def test_a_search_asks_the_runtime_once_per_layout(monkeypatch):
    """What the runtime refuses of a layout whatever the GPU (llama.cpp: TP above 1) is asked once per layout, not
    once per GPU type, and the search's options stay the direct plans' (test_search_options_are_the_direct_plans)."""
    from kvplan.cost.runtimes.llamacpp import LlamaCpp

    asked = []
    real = LlamaCpp.check_servable
    monkeypatch.setattr(LlamaCpp, "check_servable", lambda self, card, layout: asked.append(layout) or
                        real(self, card, layout))
    card = load_card("llama-3.1-70b").model_copy(update={"name": "llama-3.1-70b-servable-count"})
    s = search(card, max_model_len=8192, concurrency=64, engine="llamacpp", gpus=["L40S", "A100-80GB", "A10G"])
    assert s.options and s.layouts_tried > 2 * 11  # L40S and A10G hold it in no layout: every one is tried
    assert len(asked) <= 2 * 11  # 11 layouts within 8 GPUs: once by the search, at most once more building them
