"""What keeps ``kvplan.estimate`` fast in a loop (benchmarks/cold_start.py measures the calls per second): per-card
layer summaries computed once a card (``attention_spans``, ``ffn_layers``), sums over distinct layer specs
(``layer_spec_counts``), the estimate's FLOPs reused by its roofline, and the GPU catalog from a cache of validated
entries (kvplan.cost.hardware). No wall-time assertions: these pin the mechanisms and prove each shortcut gives
the numbers of the long way."""

from __future__ import annotations

import shutil
from collections import Counter

import pytest

import kvplan
from kvplan.cost import flops as flops_module
from kvplan.cost import hardware
from kvplan.cost import roofline as roofline_module
from kvplan.cost.runtimes import get_engine
from kvplan.cost.flops import step_flops
from kvplan.cost.kvspec import has_full_layer, layer_spec_counts, layer_specs
from kvplan.model.card import ModelCard
from kvplan.model.catalog import bundled_names, load_card
from kvplan.model.dtypes import parse_dtype
from helpers import fields_set, kvplan_run, tamper_json

TEST_CARDS = ["tests/data/cards/chunked-tiny.yaml", "tests/data/cards/hybrid-tiny.yaml",
              "tests/data/cards/mamba-tiny.yaml", "tests/data/cards/mamba2-tiny.yaml"]
CARDS = [*bundled_names(), *TEST_CARDS]


# ---- per-card summaries equal the per-layer rules they summarize ------------------------------------------------

@pytest.mark.parametrize("name", CARDS)
def test_layer_summaries_equal_the_per_layer_accessors(name):
    card = load_card(name)
    layers = range(card.num_layers)
    attending = [(card.window(i), card.chunk(i)) for i in layers if card.mixer(i) in ("attention", "hybrid")]
    assert dict(card.attention_spans) == Counter(attending)
    assert sum(n for _, n in card.attention_spans) == card.attention_layers
    moe = sum(card.is_moe_layer(i) for i in layers)
    assert card.ffn_layers == (sum(card.has_mlp(i) for i in layers) - moe, moe)
    assert has_full_layer(card) == any(w is None for w, _ in attending)


@pytest.mark.parametrize("name", CARDS)
@pytest.mark.parametrize("engine", ["ideal", "hf-dynamic", "vllm"])
def test_spec_counts_sum_to_the_per_layer_specs(name, engine):
    card = load_card(name)
    for dtype in ("bf16", "fp32") if card.ssm else ("bf16", "fp8", "fp32"):  # states refuse fp8
        kv_t = parse_dtype(dtype)
        specs = layer_specs(card, kv_t, get_engine(engine))
        counts = layer_spec_counts(card, kv_t, get_engine(engine))
        assert Counter(specs) == dict(counts)
        assert [s for s, _ in counts] == list(dict.fromkeys(specs))  # first appearance order: the groups' order


def test_a_repeated_estimate_walks_no_layers(monkeypatch):
    """After the first estimate of a card, the per-layer accessors are not called again: sums run over the per-card
    summaries (a Llama-2-7B estimate with --gpu called them ~650 times)."""
    kvplan.estimate("gemma-2-9b", batch=2, seq_len=8192, gpu="H100-SXM", engine="vllm")  # warm: summaries, specs
    calls = Counter()
    for accessor in ("mixer", "window", "chunk", "is_moe_layer", "has_mlp"):
        original = getattr(ModelCard, accessor)
        monkeypatch.setattr(ModelCard, accessor, lambda self, i, _f=original, _n=accessor: (calls.update([_n]),
                                                                                               _f(self, i))[1])
    kvplan.estimate("gemma-2-9b", batch=3, seq_len=9000, gpu="H100-SXM", engine="vllm")
    assert calls == Counter()


def test_an_estimate_with_a_gpu_counts_each_step_once(monkeypatch):
    """Its flops and its roofline share the prefill and decode-step FLOPs; only the one-request prefill is extra."""
    roofline_module._one_request_flops.cache_clear()  # once per model and length: count it afresh
    calls = Counter()
    originals = {fn: getattr(flops_module, fn) for fn in ("prefill_flops", "decode_step_flops")}
    for module, fn in ((flops_module, "prefill_flops"), (flops_module, "decode_step_flops"),
                       (roofline_module, "prefill_flops")):  # the roofline's own: the one-request prefill
        monkeypatch.setattr(module, fn, lambda *a, _f=originals[fn], _n=fn, **kw: (calls.update([_n]), _f(*a, **kw))[1])
    kvplan.estimate("llama-2-7b", batch=16, seq_len=4096, gpu="H100-SXM")
    assert calls == Counter(prefill_flops=2, decode_step_flops=1)  # batch + one request; the decode step


@pytest.mark.parametrize("name", ["llama-2-7b", "gemma-2-9b", "deepseek-v3", "llama-4-scout-17b-16e",
                                  "qwen3-30b-a3b", "tests/data/cards/hybrid-tiny.yaml"])
@pytest.mark.parametrize("engine", ["ideal", "hf-dynamic", "vllm"])
def test_estimate_flops_and_roofline_equal_the_functions_called_alone(name, engine):
    card = load_card(name)
    r = kvplan.estimate(card, batch=3, seq_len=3000, prompt_len=1000, engine=engine, gpu="H100-SXM")
    assert r.flops == step_flops(card, batch=3, prompt_len=1000, seq_len=3000, engine=get_engine(engine))
    work = roofline_module.Workload(card, get_engine(engine), parse_dtype(r.inputs.kv_dtype),
                                    parse_dtype(r.inputs.weight_dtype), 3, 1000, 3000)
    alone = roofline_module.roofline(work, hardware.load_gpu("H100-SXM"), memory_needed_bytes=r.total_bytes)
    assert r.roofline == alone


# ---- the GPU catalog: the cache of validated entries ------------------------------------------------------------

def test_the_gpu_cache_file_is_fresh():
    written = hardware.bundled_gpu_file().with_name(hardware.CACHE_FILE).read_text(encoding="utf-8")
    assert written == hardware.cache_text(), "kvplan/cost/gpus.validated.json is stale: run python -m kvplan.cost.hardware"


def test_every_cached_gpu_equals_its_validated_yaml():
    cached = hardware.cached_catalog()
    validated = hardware.read_gpu_file(hardware.bundled_gpu_file())
    assert cached is not None and list(cached) == list(validated)
    for name, gpu in validated.items():
        assert cached[name] == gpu
        assert repr(cached[name]) == repr(gpu)  # 8.0 is not 8, True is not 1
        assert fields_set(cached[name]) == fields_set(gpu)
        assert cached[name].model_dump(mode="json") == gpu.model_dump(mode="json")


@pytest.fixture
def gpus_copy(tmp_path, monkeypatch):
    """A copy of gpus.yaml and its cache that the catalog reads instead, with a fresh per-process cache."""
    path = tmp_path / "gpus.yaml"
    shutil.copy(hardware.bundled_gpu_file(), path)
    shutil.copy(hardware.bundled_gpu_file().with_name(hardware.CACHE_FILE), tmp_path / hardware.CACHE_FILE)
    monkeypatch.setattr(hardware, "bundled_gpu_file", lambda: path)
    hardware._bundled.cache_clear()
    hardware._cached_entries.cache_clear()
    yield path
    hardware._bundled.cache_clear()
    hardware._cached_entries.cache_clear()


def tamper_gpu(path, **fields) -> None:
    """Change the cached H100-SXM (not the YAML): what load_gpu returns then shows whether it used the cache."""
    tamper_json(path.with_name(hardware.CACHE_FILE), ("gpus", "H100-SXM"), **fields)


def test_the_catalog_comes_from_the_cache(gpus_copy):
    tamper_gpu(gpus_copy, memory_bytes=1)
    assert hardware.load_gpu("H100-SXM").memory_bytes == 1


def test_a_changed_gpus_yaml_is_read_and_validated_again(gpus_copy):
    tamper_gpu(gpus_copy, memory_bytes=1)
    gpus_copy.write_text(gpus_copy.read_text().replace("memory_bytes: 80_000_000_000", "memory_bytes: 81_000_000_000"))
    assert hardware.load_gpu("H100-SXM").memory_bytes == 81_000_000_000


def test_a_crlf_checkout_uses_the_gpu_cache(gpus_copy):
    gpus_copy.write_bytes(gpus_copy.read_bytes().replace(b"\n", b"\r\n"))
    tamper_gpu(gpus_copy, memory_bytes=1)
    assert hardware.load_gpu("H100-SXM").memory_bytes == 1


@pytest.mark.parametrize("content", ["{not json", '{"key": "0", "gpus": {}}', ""])
def test_a_broken_or_foreign_gpu_cache_is_ignored(gpus_copy, content):
    gpus_copy.with_name(hardware.CACHE_FILE).write_text(content)
    assert hardware.load_gpus() == hardware.read_gpu_file(gpus_copy)


def test_estimate_with_a_gpu_loads_no_yaml_and_builds_no_schema_of_cards_or_gpus():
    report = ("def report():\n    from kvplan.model.cardcache import MODELS\n    from kvplan.cost.hardware import GPU\n"
              "    built = [n for n, m in [*MODELS.items(), ('GPU', GPU)] if m.__pydantic_complete__]\n"
              "    print(*built, '|', *sorted(sys.modules), file=sys.stderr)\nimport atexit; atexit.register(report)")
    run = kvplan_run("estimate", "--model", "llama-2-7b", "--seq-len", "4096", "--gpu", "H100-SXM", before=report)
    built, modules = run.stderr.split("|")
    assert "roofline lower bounds on H100-SXM" in run.stdout
    assert built.split() == []  # not one card block (SharedBlocks was built at import) nor the GPU model
    assert [m for m in modules.split() if m == "yaml" or m.startswith("yaml.")] == []


def _bundled_cards():
    from kvplan.model.catalog import bundled_names

    return sorted(bundled_names())


@pytest.mark.parametrize("name", _bundled_cards())
def test_an_estimate_built_without_validation_is_valid(name):
    """The estimate's result models are built with ``model_construct`` (a cold estimate builds no pydantic schema):
    every one of them must still be exactly what validation accepts, with no value of a wrong type (a serializer
    warning turns into an error here)."""
    import warnings

    from kvplan.model.catalog import load_card
    from kvplan.planning.results import Estimate

    card = load_card(name)
    enc = {"encoder_len": 16} if card.architecture == "encoder-decoder" else {}
    gpu = {"gpu": "H100-SXM"} if card.architecture == "decoder-only" else {}  # the roofline is decoder-only's
    e = kvplan.estimate(name, batch=2, seq_len=64, **enc, **gpu)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        data = e.model_dump(mode="json")
    assert Estimate.model_validate(data, strict=False).model_dump(mode="json") == data
    assert Estimate.model_validate(e.model_dump()) == e


def test_a_card_hashes_cheaply_and_caches_still_tell_cards_apart():
    """ModelCard.__hash__ hashes a few scalars; cards equal in those but different elsewhere share a hash and stay
    apart in the lru_caches of kvplan.cost (``==`` compares every field)."""
    from kvplan import load_card
    from kvplan.cost.params import count_params

    card = load_card("llama-3.1-8b")
    same = card.model_copy()
    wider = card.model_copy(update={"ffn_size": card.ffn_size + 128})
    assert hash(card) == hash(same) == hash(wider) and card == same and card != wider
    assert count_params(wider).total - count_params(card).total == card.num_layers * 3 * card.hidden_size * 128
