"""A runtime is one object that owns its rules: a new engine is one module (here, one class) and one registry line,
and estimate, plan, the search, sweep and report work with it, asking the object and never its name."""

from __future__ import annotations

import json

import pytest

import kvplan
from kvplan.cost.hardware import load_gpu
from kvplan.cost.runtimes import RUNTIMES, get_engine, register
from kvplan.cost.runtimes.base import Runtime
from kvplan.cost.runtimes.setup import Setup
from kvplan.errors import KvplanError, Refused
from kvplan.units import cdiv

PAGE = 32
OVERHEAD = 3 * 2**30


class Toy(Runtime):
    """A made-up engine: whole pages of 32 tokens per layer (sliding layers freed by whole pages, as vLLM does), a
    fixed 3 GiB runtime overhead, 95% of the GPU by default, and no tensor parallelism beyond 2."""

    name = "toy"
    display_name = "Toy"
    rules = "toy 1.0"
    description = "pages of 32 tokens"

    def positions_held(self, window, run):
        held = cdiv(run.seq_len, PAGE)
        if window:
            held -= max(0, run.seq_len - window) // PAGE
        return held * PAGE

    def resolve(self, flags, card, gpu, total, layout, max_model_len):
        from kvplan.cost.runtimes.base import utilization
        from kvplan.cost.runtimes.setup import Options

        return Options(util=utilization(flags.gpu_memory_utilization, 0.95))

    def check_servable(self, card, layout):
        super().check_servable(card, layout)
        if layout.tp > 2:
            raise Refused(f"--tp: toy serves at most 2 GPUs per replica (got {layout.tp})")

    def overhead_defaults(self, gpus):
        return OVERHEAD, 0, 0

    def launch_command(self, s: Setup, repo: str, revision: str | None = None) -> str:
        return f"toy serve {repo} --ctx {s.max_model_len} --tp {s.layout.tp}"


@pytest.fixture
def toy():
    runtime = register(Toy())
    yield runtime
    del RUNTIMES["toy"]


def test_estimate_holds_what_the_runtime_says(toy):
    r = kvplan.estimate("mistral-7b-v0.1", seq_len=5000, batch=2, engine="toy")  # sliding window 4096
    per_token = 32 * 8 * 128 * 2 * 2  # layers x kv_heads x head_dim x (K, V) x bf16
    held = (cdiv(5000, PAGE) - (5000 - 4096) // PAGE) * PAGE  # 157 pages - 28 freed = 129 pages
    assert held == 4128
    assert r.kv_cache.total_bytes == 2 * held * per_token
    assert r.inputs.engine == "toy"


def test_plan_assembles_the_runtimes_answers(toy):
    gpu = load_gpu("H100-SXM")
    weights = kvplan.estimate("llama-2-7b", seq_len=1, engine="toy").weights.bytes
    r = kvplan.plan("llama-2-7b", gpu="H100-SXM", max_model_len=1000, engine="toy")
    available = -(-gpu.engine_memory_bytes * 95 // 100) - weights - OVERHEAD  # ceil(total x 0.95) - weights - overhead
    request = cdiv(1000, PAGE) * PAGE * 524_288  # 1,024 positions x Llama-2-7B's 512 KiB per token
    assert r.kv_cache.available_bytes == available
    assert r.request_kv_bytes == request
    assert r.max_concurrency == pytest.approx(available / request)
    assert r.inputs.engine_rules == "toy 1.0" and r.inputs.gpu_memory_utilization == 0.95
    assert r.launch_command == "toy serve meta-llama/Llama-2-7b-hf --ctx 1000 --tp 1"
    assert r.verdict.startswith("llama-2-7b on 1x H100-SXM, Toy TP 1: ")


def test_the_runtime_refuses_its_own_layouts_and_the_search_skips_them(toy):
    with pytest.raises(Refused, match="--tp: toy serves at most 2"):
        kvplan.plan("llama-2-7b", gpu="H100-SXM", max_model_len=1000, engine="toy", tp=4)
    from kvplan.planning.capacity.search import search

    s = search("llama-2-70b", max_model_len=4096, concurrency=4, engine="toy", gpus=["H100-SXM"])
    assert s.options and all(o.tp <= 2 for o in s.options)
    assert s.options[0].launch_command.startswith("toy serve")


def test_bad_input_under_the_search_names_its_flag():
    from kvplan.planning.capacity.search import search

    with pytest.raises(KvplanError, match="--gpu-memory") as err:
        search("llama-2-7b", max_model_len=4096, concurrency=4, gpu_memory="banana")
    assert not isinstance(err.value, Refused)
    with pytest.raises(KvplanError, match="--kv-dtype"):
        search("llama-2-7b", max_model_len=4096, concurrency=4, kv_dtype="fp9")


def test_the_cli_plans_sweeps_and_reports_with_it(toy, cli, tmp_path):
    code, out, err = cli("plan", "--model", "llama-2-7b", "--gpu", "H100-SXM", "--engine", "toy",
                         "--max-model-len", "1000", "--json")
    assert code == 0, err
    assert json.loads(out)["launch_command"].startswith("toy serve")
    code, out, err = cli("sweep", "--model", "llama-2-7b", "--engine", "toy,ideal", "--seq-len", "100",
                         "--format", "jsonl")
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    kv = {r["engine"]: r["kv_cache.total_bytes"] for r in rows}
    assert kv == {"toy": 128 * 524_288, "ideal": 100 * 524_288}
    report = tmp_path / "r.md"
    code, _, err = cli("report", "-m", "llama-2-7b", "--engine", "toy", "--gpu", "H100-SXM", "--max-model-len",
                       "1000", "-o", str(report))
    assert code == 0, err
    assert "toy serve" in report.read_text()


def test_an_unknown_engine_lists_the_registered_ones(toy):
    with pytest.raises(KvplanError, match="allowed: .*toy"):
        get_engine("lmdeploy")


# ---- one keys rule: the sharded verify's per-rank FLOPs fold over the same rule as kvplan.cost.flops -----------

def _plain_decoders():
    from kvplan.model.catalog import bundled_names, load_card

    cards = [load_card(n) for n in bundled_names()]
    return [c.name for c in cards if c.architecture == "decoder-only" and c.ssm is None and c.shared_blocks is None
            and c.vocab_size % 64 == 0]  # an unpadded vocabulary: the rank card's LM head is the card's


@pytest.mark.parametrize("engine", ["ideal", "vllm", "hf-dynamic"])
def test_rank_flops_of_one_rank_equal_the_models_flops(engine):
    """Llama-4-Scout's chunked layers were once counted as full ones by the per-rank copy (51.9 vs 39.9 GFLOPs)."""
    from kvplan.cost.flops import decode_step_flops, prefill_flops
    from kvplan.cost.parallel import Layout
    from kvplan.model.catalog import load_card
    from kvplan.verify.rank_predict import rank_flops

    names = _plain_decoders()
    assert "llama-4-scout-17b-16e" in names and len(names) > 15
    for name in names:
        card, eng = load_card(name), get_engine(engine)
        kw = dict(batch=2, prompt_len=9000, seq_len=9000, engine=engine)
        assert rank_flops(card, Layout(), 0, phase="decode", **kw) == \
            decode_step_flops(card, batch=2, cache_len=8999, engine=eng).total, name
        assert rank_flops(card, Layout(), 0, phase="prefill", **kw) == \
            prefill_flops(card, batch=2, prompt_len=9000, engine=eng).total, name
