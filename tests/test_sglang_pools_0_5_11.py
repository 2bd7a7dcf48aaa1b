"""SGLang's pools from 0.5.10 on, release range by release range (read in the PyPI wheels 0.5.10 - 0.5.23): which
state-space hybrids keep page size 1 on Blackwell because their model-specific adjustments pick another attention
backend than trtllm_mha (kvplan.cost.serving_sglang TRTLLM_MHA_*EXCEPTIONS_*)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kvplan.cli.app import app

B200 = ("--gpu", "B200", "--max-model-len", "8192")


def _plan(*args: str) -> dict:
    r = CliRunner().invoke(app, ["plan", *args, "--json"])
    assert r.exit_code == 0, r.stderr
    return json.loads(r.stdout)


def _trtllm_noted(d: dict) -> bool:
    return any("trtllm_mha" in n for n in d["notes"])


# the releases (None: the newest) whose B200 plan has each page size. Qwen3-Next / Qwen3.5: triton on SM100 without
# speculative decoding (server_args.py _handle_model_specific_adjustments 0.5.10 - 0.5.14, arg_groups/overrides.py
# 0.5.15 - 0.5.18, arg_groups/model_overrides/qwen3_5.py from 0.5.19). Nemotron-H: flashinfer on SM100 through 0.5.18
# (nemotron_h_hook.py from 0.5.12, overrides.py 0.5.15 - 0.5.18), trtllm_mha from 0.5.19
# (model_overrides/nemotron_h.py: "elif get_platform().is_sm100"). Qwen3-8B, dense: trtllm_mha's 64-token pages
PAGES = {1: {"qwen3-next-80b-a3b": ("0.5.10", "0.5.13", "0.5.16", "0.5.18", "0.5.19", None),
             "qwen3.5-27b": ("0.5.11", None), "nemotron-3-nano-30b-a3b": ("0.5.10", "0.5.18"),
             "nemotron-h-56b": ("0.5.14",)},
         64: {"nemotron-3-nano-30b-a3b": ("0.5.19", None), "qwen3-8b": ("0.5.16",)}}


@pytest.mark.parametrize(("model", "engine", "page"), [
    (model, "sglang" if release is None else f"sglang=={release}", page)
    for page, models in PAGES.items() for model, releases in models.items() for release in releases])
def test_state_space_hybrids_keep_page_1_on_b200_where_the_release_picks_another_backend(model, engine, page):
    d = _plan("-m", model, *B200, "--engine", engine)
    assert d["inputs"]["block_size"] == page
    assert d["kv_cache"]["tokens"] % page == 0
    assert _trtllm_noted(d) == (page == 64)


@pytest.mark.parametrize(("engine", "topk", "page"), [
    ("sglang==0.5.9", "1", 1),  # 0.5.9's branch: triton whatever the draft
    ("sglang==0.5.10", "1", 64),  # 0.5.10+: with speculative decoding trtllm_mha stays where it is the default
    ("sglang==0.5.16", "1", 64),
    ("sglang", "1", 64),
    ("sglang", "4", 1),  # a draft tree (top-k > 1): trtllm_mha is no one's default (_get_default_attn_backend)
])
def test_qwen3_next_keeps_trtllm_mha_with_speculative_decoding_from_0_5_10(engine, topk, page):
    d = _plan("-m", "qwen3-next-80b-a3b", *B200, "--engine", engine, "--speculative-algorithm", "NEXTN",
              "--speculative-eagle-topk", topk)
    assert d["inputs"]["block_size"] == page
    assert _trtllm_noted(d) == (page == 64)


@pytest.mark.parametrize(("engine", "page"), [("sglang==0.5.16", 64), ("sglang==0.5.17", 128), ("sglang", 128)])
def test_trtllm_mha_takes_128_token_pages_from_0_5_17(engine, page):
    """0.5.16: "TensorRT-LLM MHA only supports page_size of 16, 32 or 64"; 0.5.17: "of 16, 32, 64 or 128"."""
    d = _plan("-m", "qwen3-8b", *B200, "--engine", engine, "--block-size", "128")
    assert d["inputs"]["block_size"] == page
