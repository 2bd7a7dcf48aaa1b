"""QA round C, SGLang defects 1, 3, 4, 9: each figure computed from the release wheels' code (/tmp/sgl/w<ver>)."""

from kvplan.cost import serving_sglang as sg
from kvplan.cost.runtimes.sglang import VERSIONS, SGLang


def _at(text):
    return SGLang().at_version(text).version


def test_speculative_reserve_by_release():
    # 0.4.8 server_args.py line 309: 2 GiB for any algorithm; 0.5.9 lines 1051-1057: STANDALONE 6, NGRAM 0, else 2;
    # 0.5.10 lines 1316-1323: else 4; 0.5.14: none
    assert [sg.speculative_reserve_mib(_at(v).spec_reserve, "EAGLE3") for v in
            ("0.4.7", "0.4.8", "0.5.2", "0.5.4", "0.5.9", "0.5.10", "0.5.13", "0.5.14", "0.5.15", "0.5.23")] == [
        0, 2048, 2048, 2048, 2048, 4096, 4096, 0, 0, 0]
    assert sg.speculative_reserve_mib(_at("0.5.9").spec_reserve, "NGRAM") == 0
    assert sg.speculative_reserve_mib(_at("0.5.9").spec_reserve, "STANDALONE") == 6144
    assert sg.speculative_reserve_mib(_at("0.5.1").spec_reserve, "NGRAM") == 2048
    assert sg.speculative_reserve_mib(_at("0.5.10").spec_reserve, None) == 0
    # H100 80GB (81,559 MiB), TP 1: 0.5.9 reserved max(13,440, 10,240) + 2,048; 0.5.10 13,904 + 4,096
    assert _at("0.5.9").default_mfs(81559, 1, 1, False, True, "EAGLE3") == round((81559 - 13440 - 2048) / 81559, 3)
    assert _at("0.5.9").default_mfs(81559, 1, 1, False, True, "EAGLE3") == 0.81
    assert _at("0.5.10").default_mfs(81559, 1, 1, False, True, "EAGLE3") == 0.779
    assert _at("0.5.14").default_mfs(81559, 1, 1, False, True, "EAGLE3") == 0.83
    assert _at("0.4.8").default_mfs(81559, 1, 1, False, True, "EAGLE") == round((81559 - 10240 - 2048) / 81559, 3)
    assert {v.span for v in VERSIONS} >= {"0.5.11-0.5.12", "0.5.13", "0.5.14-0.5.15"}


def test_vlm_default_mem_fraction():
    # adjust_mem_fraction_for_vlm: 0.83 x 0.95 x clamp(1 - 0.1 x (32 x 1280^2 / (24 x 1024^2) - 1), 0.8, 1.05)
    assert sg.vlm_mem_fraction(0.83, 32, 1280) == 0.83 * 0.95 * (1 - 0.1 * (32 * 1280**2 / (24 * 1024**2) - 1))
    assert round(sg.vlm_mem_fraction(0.83, 32, 1280), 3) == 0.703
    assert sg.vlm_mem_fraction(0.83, 24, 1024) == 0.83 * 0.95  # ViT-L/14: 0.7885
    assert sg.vlm_mem_fraction(0.83, 96, 4096) == 0.83 * 0.95 * 0.8  # clamped



def test_vlm_multimodal_by_release():
    from kvplan.model.catalog import load_card

    qwen, llava, gemma = load_card("qwen2.5-vl-7b"), load_card("llava-v1.6-mistral-7b"), load_card("gemma-3-12b")
    assert _at("0.5.23").is_multimodal(qwen) and _at("0.4.10").is_multimodal(qwen)
    assert not _at("0.5.23").is_multimodal(gemma)  # mm_disabled_models
    assert _at("0.5.10").is_multimodal(llava) and not _at("0.5.9").is_multimodal(llava)  # has_multimodal_subconfig
    assert _at("0.5.23").default_mfs(81559, 1, 1, False, True, None, (32, 1280)) == sg.vlm_mem_fraction(0.83, 32, 1280)
    assert _at("0.4.9").default_mfs(81559, 1, 1, False, True, None, (32, 1280)) == 0.874  # no cut before 0.4.10


def test_mamba_padding_slot_and_running_cap():
    per = 100
    # budget 1,900 x 0.9 / 1.9 = 900: 0.5.16 and before 9 slots, 0.5.17+ int((900 - 100) // 100) = 8 (+ padding)
    assert sg.mamba_split(1900, per) == (1000, 9)
    assert sg.mamba_split(1900, per, padding_slot=True) == (1000, 8)
    assert [_at(v).mamba_padding_slot for v in ("0.5.10", "0.5.15", "0.5.16", "0.5.17", "0.5.23")] == [
        False, False, False, True, True]
    assert [_at(v).mamba_running_cap for v in ("0.5.1", "0.5.4", "0.5.9", "0.5.23")] == [False, True, True, True]
    assert 10 // sg.mamba_ratio() == 3 and 10 // sg.mamba_ratio(radix_cache=False) == 10


def _plan(*args: str) -> dict:
    import json

    from typer.testing import CliRunner

    from kvplan.cli.app import app

    r = CliRunner().invoke(app, ["plan", *args, "--json"])
    assert r.exit_code == 0, r.stdout
    return json.loads(r.stdout)


def test_plans_use_the_rules():
    # nemotron-h-56b on an H200 at 32k, 0.5.23: budget / per-slot = 11.63 -> 10 slots (padding); NemotronH takes the
    # mamba extra_buffer strategy (2 track slots: tests/test_sglang_mamba_hybrids.py), 10 // (3 + 2) = 2 running
    d = _plan("--model", "nemotron-h-56b", "--gpu", "H200", "--max-model-len", "32768", "--engine", "sglang")
    assert d["kv_cache"]["state_slots"] == 10 and d["max_running"] == 2
    assert any("max_mamba_cache_size // 5 = 2" in n for n in d["notes"])
    # 0.5.16 has no padding slot: 11 slots, 11 // 5 = 2; 0.5.13 (no_buffer): 11 // 3 = 3
    d = _plan("--model", "nemotron-h-56b", "--gpu", "H200", "--max-model-len", "32768", "--engine", "sglang==0.5.16")
    assert d["kv_cache"]["state_slots"] == 11 and d["max_running"] == 2
    d = _plan("--model", "nemotron-h-56b", "--gpu", "H200", "--max-model-len", "32768", "--engine", "sglang==0.5.13")
    assert d["kv_cache"]["state_slots"] == 11 and d["max_running"] == 3
    d = _plan("--model", "qwen2.5-vl-7b", "--gpu", "H100-SXM", "--max-model-len", "8192", "--engine", "sglang",
              "--non-torch-memory", "0")  # the load's rests held at none, as the figure was worked
    # SGLang's M-RoPE cache: 128,000 positions (MRotaryEmbedding, not vLLM's 4x) x 128 x 4 B = 62.5 MiB (was 90.6)
    assert round(d["max_concurrency"], 1) == 91.0
    spec = ("--model", "llama-3.1-8b", "--gpu", "H100-SXM", "--max-model-len", "8192", "--speculative-algorithm",
            "EAGLE3", "--speculative-draft-model-path", "jamesliu1/sglang-EAGLE3-Llama-3.1-Instruct-8B",
            "--speculative-num-steps", "3")
    assert round(_plan(*spec, "--engine", "sglang==0.5.10")["max_concurrency"], 2) == 44.88
    assert round(_plan(*spec, "--engine", "sglang==0.5.9")["max_concurrency"], 2) == 47.24
