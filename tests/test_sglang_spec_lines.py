"""Speculative-decoding launch lines the engines take (QA G findings 1, 1b, 2, 5), each against the engine source at
the named release: SGLang /tmp/sgl/w<ver>/sglang/srt/server_args.py (arg_groups/speculative_hook.py from 0.5.13),
vLLM config/speculative.py."""

from __future__ import annotations

import json

import pytest

EAGLE = ("--speculative-algorithm", "EAGLE", "--speculative-draft-model-path", "yuhuili/EAGLE-LLaMA3.1-Instruct-8B")
H100 = ("plan", "-m", "llama-3.1-8b", "--gpu", "H100-SXM", "--max-model-len", "8192")
TREE = ("--speculative-num-steps", "3", "--speculative-eagle-topk", "4", "--speculative-num-draft-tokens", "8")


def _flags(line: str, prefix: str = "--speculative-") -> dict[str, str]:
    """The launch line's ``prefix*`` flags and their values."""
    words = line.split()
    return {w: words[i + 1] for i, w in enumerate(words) if w.startswith(prefix)}


# ---- 1: the steps, top-k and draft tokens together or not at all ------------------------------------------------

@pytest.mark.parametrize("release", ["0.4.8", "0.5.1", "0.5.4", "0.5.6", "0.5.10", "0.5.13", "0.5.23"])
def test_sglang_eagle_line_gives_steps_topk_and_draft_tokens_together(cli_json, release):
    """_handle_speculative_decoding (0.5.4 server_args.py 1330-1362): steps given without a top-k skip the
    auto-choice and leave the top-k None, so ``speculative_eagle_topk > 1`` raises a TypeError. kvplan's chain of 3
    steps goes on the line whole: top-k 1 and 4 draft tokens (the steps + 1 SGLang itself sets for top-k 1)."""
    d = cli_json(*H100, "--engine", f"sglang=={release}", *EAGLE)
    assert _flags(d["launch_command"]) == {
        "--speculative-algorithm": "EAGLE", "--speculative-draft-model-path": "yuhuili/EAGLE-LLaMA3.1-Instruct-8B",
        "--speculative-num-steps": "3", "--speculative-eagle-topk": "1", "--speculative-num-draft-tokens": "4"}
    assert "k=3" in d["inputs"]["speculative"]
    # the steps alone: a chain of that length, steps + 1 draft tokens
    d = cli_json(*H100, "--engine", f"sglang=={release}", *EAGLE, "--speculative-num-steps", "5")
    assert _flags(d["launch_command"])["--speculative-eagle-topk"] == "1"
    assert _flags(d["launch_command"])["--speculative-num-draft-tokens"] == "6"
    assert "k=5" in d["inputs"]["speculative"]


def test_sglang_partial_draft_shape_is_refused(cli):
    """SGLang asserts the top-k and draft tokens unset when the steps are ("if speculative_num_steps is None: assert
    speculative_eagle_topk is None and speculative_num_draft_tokens is None"), and sets the draft tokens only for
    top-k 1."""
    code, _, err = cli(*H100, "--engine", "sglang", *EAGLE, "--speculative-eagle-topk", "4",
                       "--speculative-num-draft-tokens", "8")
    assert code == 2 and err.startswith("error: --speculative-num-steps:") and err.count("\n") == 1
    code, _, err = cli(*H100, "--engine", "sglang", *EAGLE, "--speculative-num-steps", "3",
                       "--speculative-eagle-topk", "4")
    assert code == 2 and err.startswith("error: --speculative-num-draft-tokens:") and err.count("\n") == 1


def test_sglang_topk_one_picks_trtllm_mha_on_b200_only_with_pages_of_one(cli_json):
    """0.5.10 _get_default_attn_backend: trtllm_mha on SM100 when is_no_spec_infer_or_topk_one ("speculative_eagle_topk
    == 1 and (page_size == 1 or page_size is None)") and the top-k is given; the line gives top-k 1, so a plain EAGLE
    plan on a B200 runs trtllm_mha (64-token pages), and with --page-size 16 it does not."""
    args = ("plan", "-m", "llama-3.1-8b", "--gpu", "B200", "--max-model-len", "8192", "--engine", "sglang==0.5.10",
            *EAGLE)
    d = cli_json(*args)
    assert d["inputs"]["block_size"] == 64 and "--page-size 64" in d["launch_command"]
    assert any("trtllm_mha" in n for n in d["notes"])
    d = cli_json(*args, "--block-size", "16")
    assert d["inputs"]["block_size"] == 16 and not any("trtllm_mha" in n for n in d["notes"])


# ---- 1b: a draft tree with pages of more than one token ---------------------------------------------------------

@pytest.mark.parametrize(("release", "backend"), [
    ("0.4.9", None), ("0.5.1", None),  # no such check: the tree runs with pages (eagle_worker.py)
    ("0.5.4", "flashinfer"), ("0.5.6", "flashinfer"), ("0.5.10", "flashinfer"), ("0.5.23", "flashinfer")])
def test_sglang_eagle_tree_with_pages_names_flashinfer(cli_json, release, backend):
    """0.5.4 server_args.py 1360-1367: "speculative_eagle_topk > 1 and page_size > 1 and attention_backend !=
    'flashinfer'" raises ValueError, and up to 0.5.6 nothing in ServerArgs has picked a backend for Llama yet."""
    d = cli_json(*H100, "--engine", f"sglang=={release}", "--block-size", "16", *EAGLE, *TREE)
    assert _flags(d["launch_command"], "--attention-backend") == (
        {} if backend is None else {"--attention-backend": backend})
    assert _flags(d["launch_command"])["--speculative-eagle-topk"] == "4"
    assert "--page-size 16" in d["launch_command"]


def test_sglang_ngram_with_pages_names_flashinfer(cli_json):
    """_handle_speculative_decoding 0.5.4: NGRAM sets speculative_eagle_topk = speculative_ngram_max_bfs_breadth
    (10), then the same check, flashinfer alone."""
    d = cli_json(*H100, "--engine", "sglang==0.5.4", "--block-size", "16", "--speculative-algorithm", "NGRAM")
    assert "--attention-backend flashinfer" in d["launch_command"]
    d = cli_json(*H100, "--engine", "sglang==0.5.4", "--speculative-algorithm", "NGRAM")
    assert "--attention-backend" not in d["launch_command"]


def test_sglang_eagle_tree_with_pages_refused_where_flashinfer_is_not_there(cli):
    """flashinfer is an NVIDIA (CUDA) library: on an MI300X SGLang has no backend the check takes."""
    code, _, err = cli("plan", "-m", "llama-3.1-8b", "--gpu", "MI300X", "--max-model-len", "8192", "--engine",
                       "sglang==0.5.4", "--block-size", "16", *EAGLE, *TREE)
    assert code == 2 and err.startswith("error: --block-size 16:") and "--speculative-eagle-topk" in err


@pytest.mark.parametrize(("release", "source"), [("0.4.8", "server_args.py"), ("0.5.12", "server_args.py"),
                                               ("0.5.13", "arg_groups/speculative_hook.py"),
                                               ("0.5.23", "arg_groups/speculative_hook.py")])
def test_sglang_names_where_speculative_decoding_sets_its_running_requests(cli_json, release, source):
    """"Max running requests is reset to 48 for speculative decoding": server_args.py __post_init__ up to 0.5.12
    (0.5.12 line 3702; 0.4.8 line 451 sets it without the warning), arg_groups/speculative_hook.py from 0.5.13
    (line 237), which 0.5.12's wheel does not have (SglangVersion.spec_running_source)."""
    d = cli_json(*H100, "--engine", f"sglang=={release}", *EAGLE)
    assert any(f"--max-running-requests 48 (not given: SGLang's default with speculative decoding, {source})" in n
               for n in d["notes"])


# ---- 2: STANDALONE and NGRAM by release ---------------------------------------------------------------------------

@pytest.mark.parametrize("release", ["0.4.8", "0.4.10", "0.5.1"])
@pytest.mark.parametrize("algorithm", ["NGRAM", "STANDALONE"])
def test_sglang_refuses_standalone_and_ngram_before_0_5_3(cli, release, algorithm):
    """server_args.py add_cli_args in 0.4.8 (1108-1110), 0.4.10 and 0.5.1 (1428-1430): "--speculative-algorithm",
    choices=["EAGLE", "EAGLE3", "NEXTN"]; 0.5.4 (2415) adds STANDALONE and NGRAM."""
    draft = ("--speculative-draft-model-path", "llama-3.1-8b") if algorithm == "STANDALONE" else ()
    code, _, err = cli(*H100, "--engine", f"sglang=={release}", "--speculative-algorithm", algorithm, *draft)
    assert code == 2 and err.startswith(f"error: --speculative-algorithm {algorithm}:") and "0.5.3" in err
    assert err.count("\n") == 1
    code, out, err = cli(*H100, "--engine", "sglang==0.5.4", "--speculative-algorithm", algorithm, *draft)
    assert code == 0, err


# ---- 5: a draft card on the line is its Hub repository ------------------------------------------------------------

def test_draft_card_name_becomes_its_hub_repo_on_the_launch_line(cli_json):
    """A bundled card name is no repository vLLM or SGLang can load: the line names the card's Hub id, as it does
    the target's, and keeps every other key of the --speculative-config given."""
    base = ("plan", "-m", "llama-3.1-70b", "--gpu", "H100-SXM", "--tp", "4", "--max-model-len", "8192")
    config = {"method": "draft_model", "model": "llama-3.1-8b", "num_speculative_tokens": 4, "max_model_len": 4096}
    d = cli_json(*base, "--speculative-config", json.dumps(config))
    given = d["launch_command"].split("--speculative-config '")[1].split("'")[0]
    assert json.loads(given) == {**config, "model": "meta-llama/Llama-3.1-8B"}
    d = cli_json(*base, "--engine", "sglang==0.5.4", "--speculative-algorithm", "STANDALONE",
                 "--speculative-draft-model-path", "llama-3.1-8b")
    assert _flags(d["launch_command"])["--speculative-draft-model-path"] == "meta-llama/Llama-3.1-8B"
    assert "--model-path meta-llama/Llama-3.1-70B" in d["launch_command"]


def test_sglang_eagle_tree_refused_where_sglang_pages_trtllm_mla(cli):
    """DeepSeek-V3 on a B200: SGLang 0.5.4+ picks trtllm_mla and 64-token pages itself
    (_handle_model_specific_adjustments), which _handle_speculative_decoding's check refuses for a tree (0.5.6 server_args.py 1752-1759: not flashinfer or
    fa3), though no --block-size is given."""
    code, _, err = cli("plan", "-m", "deepseek-v3-fp8", "--gpu", "B200", "--tp", "8", "--max-model-len", "10000",
                       "--engine", "sglang==0.5.6", "--speculative-algorithm", "NEXTN", *TREE)
    assert code == 2 and err.startswith("error: --speculative-eagle-topk 4:") and "trtllm_mla" in err


def test_sglang_0_4_8_runs_a_tree_with_pages_as_a_chain_and_says_so(cli_json):
    """0.4.8 server_args.py __post_init__: "if self.page_size > 1 and self.speculative_eagle_topk > 1:
    self.speculative_eagle_topk = 1" (warning 'speculative_eagle_topk is adjusted to 1 when page_size > 1'), then
    top-k 1 sets speculative_num_draft_tokens = steps + 1; 0.4.9 keeps the tree (no such line)."""
    args = ("plan", "-m", "llama-3.1-8b", "--gpu", "H100-SXM", "--max-model-len", "8192", "--speculative-algorithm",
            "EAGLE", "--speculative-draft-model-path", "x/EAGLE", "--speculative-num-steps", "3",
            "--speculative-eagle-topk", "4", "--speculative-num-draft-tokens", "8")
    old = cli_json(*args, "--engine", "sglang==0.4.8", "--block-size", "16")
    assert [n for n in old["notes"] if "runs the draft as a chain" in n and "steps + 1 = 4" in n]
    assert not [n for n in old["notes"] if "is launched as given" in n]
    for engine, block in (("sglang==0.4.8", "1"), ("sglang==0.4.9", "16")):
        r = cli_json(*args, "--engine", engine, "--block-size", block)
        assert not [n for n in r["notes"] if "runs the draft as a chain" in n]
        assert [n for n in r["notes"] if "a draft tree (top-k 4, 8 draft tokens" in n]
