"""A pinned release that cannot load the model's architecture is refused (QA A item 9): kvplan.cost.model_registries
FIRST_RELEASES against the registries read in every vLLM and SGLang wheel (tests/data/release_architectures.json,
written by tests/data/release_architectures.py), and the refusal as plan, estimate and sweep print it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvplan.cli.app import app
from kvplan.cost.model_registries import FIRST_RELEASES, first_release, release_key, release_refusal
from kvplan.cost.runtimes import get_engine
from kvplan.errors import KvplanError, Refused
from kvplan.model.catalog import bundled_names, load_card
from kvplan.planning.capacity import plan

DATA = Path(__file__).with_name("data")
FACTS = json.loads((DATA / "release_architectures.json").read_text())
ENGINES = ("vllm", "sglang")


def _source(engine: str, short: str | None) -> str | None:
    """The table's short source as the fact file writes it."""
    if short is None:
        return None
    return f"vllm/model_executor/{short}" if engine == "vllm" else f"sglang/srt/models/{short} EntryClass"


@pytest.mark.parametrize("engine", ENGINES)
def test_each_first_release_is_the_first_read_whose_registry_holds_it(engine):
    facts = FACTS[engine]
    order = facts["releases_read"]
    assert order == sorted(order, key=release_key) and len(set(order)) == len(order)
    assert set(facts["architectures"]) == set(FIRST_RELEASES)
    for arch, fact in facts["architectures"].items():
        row, held = FIRST_RELEASES[arch], fact["held_in"]
        assert getattr(row, engine) == (held[0] if held else None), arch
        assert _source(engine, getattr(row, f"{engine}_source")) == fact["first_where"], arch
        if held:  # every release read from the first on holds it: no later release refuses what an earlier loads
            assert held == order[order.index(held[0]):], arch


@pytest.mark.parametrize("engine", ENGINES)
def test_the_releases_read_span_every_modelled_range(engine):
    """From before the oldest modelled range to the newest release kvplan has read (a newer newest_read needs a new
    scan: tests/data/release_architectures.py)."""
    rt, order = get_engine(engine), FACTS[engine]["releases_read"]
    oldest_modelled = rt.versions[0].split("-")[0]  # "0.2-0.6.4" -> "0.2"
    assert release_key(order[0]) <= release_key(oldest_modelled)
    assert release_key(order[-1]) >= release_key(".".join(map(str, rt.newest_read)))


def test_every_bundled_generator_names_an_architecture_the_table_holds():
    for name in bundled_names():
        card = load_card(name)
        if card.architecture == "decoder-only":
            assert card.hf_architecture in FIRST_RELEASES, name


@pytest.mark.parametrize("engine", ENGINES)
def test_the_newest_release_read_loads_every_bundled_card(engine):
    rt = get_engine(f"{engine}=={'.'.join(map(str, get_engine(engine).newest_read))}")
    assert rt.pinned is not None
    for name in bundled_names():
        card = load_card(name)
        if card.architecture != "encoder-decoder":  # T5: no release of either loads one (ENCODER_DECODER_SOURCES)
            rt.check_release(card)  # raises where it cannot


def test_release_order():
    ordered = ["0.4.5", "0.4.5.post1", "0.4.5.post2", "0.4.6", "0.5.0rc0", "0.5.0rc2", "0.5.0", "0.5.1", "0.10.1",
               "0.10.1.1", "0.10.2", "v0.11.0"]
    assert sorted(reversed(ordered), key=release_key) == ordered
    assert release_key("0.10.1+cu128") == release_key("0.10.1")


# command, what the message names (the pinned release, the card, the architecture, the first release)
QA = [
    (["plan", "-m", "qwen3-8b", "--gpu", "H100-SXM", "--max-model-len", "8192", "--engine", "vllm==0.6.4"],
     "vLLM 0.6.4 cannot load qwen3-8b: Qwen3ForCausalLM", "vllm==0.8.4"),
    (["plan", "-m", "gemma-3-27b", "--gpu", "H100-SXM", "--max-model-len", "8192", "--engine", "vllm==0.6.4"],
     "Gemma3ForConditionalGeneration", "vllm==0.8.0"),
    (["plan", "-m", "gpt-oss-120b", "--gpu", "H200", "--max-model-len", "8192", "--engine", "vllm==0.6.4"],
     "GptOssForCausalLM", "vllm==0.10.1"),
    (["plan", "-m", "deepseek-v3-fp8", "--gpu", "H200", "--tp", "8", "--max-model-len", "8192", "--engine",
      "vllm==0.6.4"], "DeepseekV3ForCausalLM", "vllm==0.6.6"),
    (["plan", "-m", "llama-4-scout-17b-16e", "--gpu", "H200", "--tp", "2", "--max-model-len", "8192", "--engine",
      "vllm==0.6.4"], "Llama4ForConditionalGeneration", "vllm==0.8.3"),
    (["plan", "-m", "qwen3-next-80b-a3b", "--gpu", "H200", "--tp", "2", "--max-model-len", "8192", "--engine",
      "vllm==0.10"], "vLLM 0.10 cannot load qwen3-next-80b-a3b", "vllm==0.10.2"),
    (["plan", "-m", "gpt-oss-120b", "--gpu", "H200", "--max-model-len", "8192", "--engine", "sglang==0.4.3"],
     "SGLang 0.4.3 cannot load gpt-oss-120b", "sglang==0.5.0rc0"),
    (["plan", "-m", "qwen3-next-80b-a3b", "--gpu", "H200", "--tp", "2", "--max-model-len", "8192", "--engine",
      "sglang==0.4.3"], "Qwen3NextForCausalLM", "sglang==0.5.2"),
    # a patch or post release before the first: vLLM 0.10.0 and SGLang 0.4.5 / 0.4.5.post1 hold no such class
    (["plan", "-m", "gpt-oss-20b", "--gpu", "H100-SXM", "--max-model-len", "8192", "--engine", "vllm==0.10.0"],
     "GptOssForCausalLM", "vllm==0.10.1"),
    (["plan", "-m", "qwen3-8b", "--gpu", "H100-SXM", "--max-model-len", "8192", "--engine", "sglang==0.4.5.post1"],
     "SGLang 0.4.5.post1 cannot load qwen3-8b", "sglang==0.4.5.post2"),
    (["plan", "-m", "nemotron-h-56b", "--gpu", "H200", "--tp", "2", "--max-model-len", "8192", "--engine",
      "vllm==0.6.4"], "NemotronHForCausalLM", "vllm==0.9.1"),
    (["estimate", "-m", "qwen3-8b", "--seq-len", "8192", "--gpu", "H100-SXM", "--engine", "vllm==0.6.4"],
     "Qwen3ForCausalLM", "vllm==0.8.4"),
    (["estimate", "-m", "qwen3-8b", "--seq-len", "8192", "--engine", "sglang==0.4.3"],
     "Qwen3ForCausalLM", "sglang==0.4.5.post2"),
    (["sweep", "-m", "llama-3.1-8b,gemma-3-1b", "--seq-len", "4096,8192", "--engine", "vllm==0.7.3"],
     "vLLM 0.7.3 cannot load gemma-3-1b: Gemma3ForCausalLM", "vllm==0.8.0"),
]


@pytest.mark.parametrize(("args", "names", "first"), QA, ids=[" ".join(a[:3] + a[-1:]) for a, _, _ in QA])
def test_a_release_older_than_the_architecture_is_refused_by_name(args, names, first):
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 2, r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --engine: ")
    assert names in lines[0] and f"use --engine {first} or later" in lines[0]
    assert not r.stdout.strip()


@pytest.mark.parametrize("args", [
    ["plan", "-m", "qwen3-8b", "--gpu", "H100-SXM", "--max-model-len", "8192", "--engine", "vllm==0.8.4"],
    ["plan", "-m", "qwen3-8b", "--gpu", "H100-SXM", "--max-model-len", "8192", "--engine", "sglang==0.4.5.post2"],
    ["plan", "-m", "gpt-oss-20b", "--gpu", "H100-SXM", "--max-model-len", "8192", "--engine", "sglang==0.5.0rc0"],
    ["plan", "-m", "gpt-oss-20b", "--gpu", "H100-SXM", "--max-model-len", "8192", "--engine", "vllm==0.10.1"],
    ["plan", "-m", "qwen3-next-80b-a3b", "--gpu", "H200", "--tp", "2", "--max-model-len", "8192", "--engine",
     "vllm==0.10.2"],
    # SGLang registers no Falcon class in any release read: not in the table's SGLang column, planned as before
    ["plan", "-m", "falcon-7b", "--gpu", "H100-SXM", "--max-model-len", "2048", "--engine", "sglang==0.4.3"],
    ["sweep", "-m", "llama-3.1-8b,gemma-3-1b", "--seq-len", "4096", "--engine", "vllm==0.8.0"],
])
def test_the_first_release_plans_it(args):
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output


def test_deepseek_v3_in_its_first_release_caches_per_head_k_v_which_is_refused():
    """DeepseekV3ForCausalLM is first in vLLM 0.6.6's registry, but MLA's latent cache is first in 0.7.1: before it
    vLLM cached the per-head K/V, which kvplan does not model (VllmVersion.mla_latent_cache)."""
    args = ["plan", "-m", "deepseek-v3-fp8", "--gpu", "H200", "--tp", "8", "--max-model-len", "8192", "--engine"]
    r = CliRunner().invoke(app, [*args, "vllm==0.6.6"])
    assert r.exit_code == 2 and "per-head K/V" in r.output and "vllm==0.7.1 or later" in r.output
    assert CliRunner().invoke(app, [*args, "vllm==0.7.1"]).exit_code == 0


def test_the_api_raises_a_plain_kvplan_error_not_a_layout_refusal():
    """A layout search skips Refused layouts; a release that cannot load the model is the input's error."""
    with pytest.raises(KvplanError, match=r"use --engine vllm==0\.8\.4 or later") as exc:
        plan("qwen3-8b", gpu="H100-SXM", max_model_len=8192, engine="vllm==0.8.3")
    assert not isinstance(exc.value, Refused)
    assert plan("qwen3-8b", gpu="H100-SXM", max_model_len=8192, engine="vllm==0.8.4").max_concurrency > 0


def _config(tmp_path: Path, architecture: str) -> Path:
    cfg = json.loads((DATA / "configs" / "qwen3-0.6b" / "config.json").read_text())
    cfg["architectures"] = [architecture]
    folder = tmp_path / architecture
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(cfg))
    return folder


def test_a_config_is_refused_by_its_architectures_field(tmp_path):
    args = ["--gpu", "L4", "--max-model-len", "4096", "--engine", "vllm==0.7.3"]
    r = CliRunner().invoke(app, ["plan", "-m", str(_config(tmp_path, "Qwen3ForCausalLM")), *args])
    assert r.exit_code == 2 and "Qwen3ForCausalLM is first in vLLM 0.8.4" in r.stderr
    # the same config under an architecture the table does not know: planned as before, not refused
    r = CliRunner().invoke(app, ["plan", "-m", str(_config(tmp_path, "SomeNewForCausalLM")), *args])
    assert r.exit_code == 0, r.output


def test_what_the_table_does_not_know_is_never_refused():
    assert first_release("vllm", "SomeNewForCausalLM") is None and first_release("vllm", None) is None
    assert first_release(None, "Qwen3ForCausalLM") is None  # a runtime without a column (TGI, TensorRT-LLM ...)
    assert get_engine("trtllm").registry_column is None and get_engine("vllm==0.6.4").registry_column == "vllm"
    assert first_release("sglang", "JambaForCausalLM") is None  # no SGLang release read registers it
    assert release_refusal("vllm", "vllm", "vLLM", "0.2", "x", "SomeNewForCausalLM") is None
    assert release_refusal("vllm", "vllm", "vLLM", "0.2", "x", None) is None
    assert release_refusal("vllm", "vllm", "vLLM", "0.2", "x", "Qwen3ForCausalLM") is not None
    assert get_engine("vllm").pinned is None and get_engine("vllm==0.8.3").pinned == "0.8.3"
