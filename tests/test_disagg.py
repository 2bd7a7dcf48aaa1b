"""`kvplan disagg`: prefill and decode pools for a rate under TTFT/TPOT targets, the exact K/V hand-over per request
(whole blocks of every layer and K/V head) and the link it needs; aiconfigurator's rate-matching factors."""

from __future__ import annotations

import json
import math

import pytest

from kvplan.errors import KvplanError
from kvplan.planning.disagg import disagg

ARGS = ("--model", "llama-3.1-70b", "--gpu", "H100-SXM", "--rate", "10", "--isl", "2048", "--osl", "256",
        "--ttft-ms", "2000", "--tpot-ms", "50")


def test_the_issue_command_answers_with_both_pools_and_the_exact_hand_over(cli):
    code, out, err = cli("disagg", *ARGS, "--json")
    assert code == 0, err
    r = json.loads(out)
    # Llama-3.1-70B config: 80 layers x 8 K/V heads x 128 x (K, V) x bf16 = 327,680 B per token; 2,048 tokens are
    # 128 whole blocks of 16
    assert r["kv_transfer_bytes_per_request"] == 80 * 8 * 128 * 2 * 2 * 2048 == 671_088_640
    for role in ("prefill", "decode"):
        pool = r[role]
        assert {"gpus", "gpu", "tp", "pp", "replicas", "max_concurrency"} <= set(pool)
        assert pool["gpus"] == pool["replicas"] * pool["tp"] * pool["pp"] and pool["gpu"] == "H100-SXM"
    assert r["total_gpus"] == r["prefill"]["gpus"] + r["decode"]["gpus"]
    assert r["ratio"] == f'{r["prefill"]["replicas"]}:{r["decode"]["replicas"]}'
    budget_s = (2000 - 1.8 * r["prefill"]["ttft_ms"]) / 1e3
    assert r["link_bytes_per_s_needed"] == pytest.approx(671_088_640 / budget_s)
    assert r["kv_transfer_bytes_per_s"] == pytest.approx(10 * 671_088_640)
    code, out, err = cli("disagg", *ARGS)
    assert code == 0, err
    assert "671,088,640 B" in out and "prefill" in out and "decode" in out


def test_rate_matching_uses_aiconfigurators_factors():
    r = disagg("llama-3.1-70b", gpu="H100-SXM", rate=10, isl=2048, osl=256, ttft_ms=2000, tpot_ms=50)
    p, d = r.prefill, r.decode
    assert p.replicas == math.ceil(10 / (p.requests_per_s * 0.9))
    assert d.replicas == math.ceil(10 / (d.requests_per_s * 0.92))
    assert p.ttft_ms * 1.8 < 2000 and d.tpot_ms <= 50
    assert d.requests_per_s == pytest.approx(d.batch / (256 * d.tpot_ms / 1e3))  # Little's law
    assert d.batch <= d.max_concurrency
    slower = disagg("llama-3.1-70b", gpu="H100-SXM", rate=10, isl=2048, osl=256, ttft_ms=2000, tpot_ms=50,
                    decode_factor=0.5, prefill_factor=0.5)
    assert slower.decode.replicas >= d.replicas and slower.prefill.replicas >= p.replicas
    assert slower.decode.replicas == math.ceil(10 / (slower.decode.requests_per_s * 0.5))


def test_mla_hand_over_is_read_once_per_decode_rank():
    r = disagg("deepseek-v2-lite", gpu="H100-SXM", rate=2, isl=1000, osl=100, ttft_ms=5000, tpot_ms=100)
    per_token = 27 * (512 + 64) * 2  # DeepSeek-V2-Lite: 27 MLA layers, kv_lora_rank 512 + rope 64, bf16
    # 63 blocks of 16 on Hopper (vLLM 0.18+: FLASH_ATTN_MLA's preferred block, serving_vllm.default_block_size)
    assert r.kv_transfer_bytes_per_request == 1008 * per_token * r.decode.tp


@pytest.mark.parametrize("kw, flag", [
    (dict(rate=0), "--rate"), (dict(isl=0), "--isl"), (dict(ttft_ms=1), "--ttft-ms"), (dict(tpot_ms=0.01), "--tpot-ms"),
])
def test_bad_or_unreachable_targets_name_their_flag(kw, flag):
    args = dict(gpu="H100-SXM", rate=10, isl=2048, osl=256, ttft_ms=2000, tpot_ms=50) | kw
    with pytest.raises(KvplanError, match=f"^{flag}"):
        disagg("llama-3.1-70b", **args)


DISAGG_CONFIG = """\
[[scenarios]]
name = "disagg-70b"
model = "llama-3.1-70b"
gpu = "H100-SXM"
rate = 10
isl = 2048
osl = 256
ttft_ms = 2000
tpot_ms = 50
max_kv_transfer_bytes = {transfer}
max_gpus = {gpus}
max_link_gb_per_s = {link}
"""


def test_check_budgets_a_disagg_scenario(cli, tmp_path, monkeypatch):
    """A kvplan.toml scenario with rate/isl/osl/targets is a disagg scenario: its hand-over (671,088,640 B exact),
    the link it needs and the GPUs of both pools are figures, bounded by max_kv_transfer_bytes, max_link_gb_per_s
    and max_gpus; a budget one byte short fails naming the scenario's line; a missing target exits 2 naming it."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    r = disagg("llama-3.1-70b", gpu="H100-SXM", rate=10, isl=2048, osl=256, ttft_ms=2000, tpot_ms=50)
    link = math.ceil(r.link_bytes_per_s_needed / 1e9 * 100) / 100
    (tmp_path / "kvplan.toml").write_text(DISAGG_CONFIG.format(transfer=671_088_640, gpus=r.total_gpus, link=link))
    code, out, err = cli("check", "--json")
    assert code == 0, err
    data = json.loads(out)
    fig = data["figures"]["disagg-70b"]
    assert fig["kv_transfer_bytes"] == 671_088_640 and fig["disagg_gpus"] == r.total_gpus
    assert {row["check"] for row in data["rows"]} == {"max_kv_transfer_bytes", "max_gpus", "max_link_gb_per_s"}
    (tmp_path / "kvplan.toml").write_text(DISAGG_CONFIG.format(transfer=671_088_639, gpus=r.total_gpus - 1,
                                                               link=link))
    code, out, err = cli("check", "--json")
    data = json.loads(out)
    assert code == 1 and data["failed"] == 2
    bad = {row["check"]: row for row in data["rows"] if row["verdict"] == "fail"}
    assert bad["max_kv_transfer_bytes"]["delta"] == 1 and bad["max_gpus"]["delta"] == 1
    (tmp_path / "kvplan.toml").write_text(DISAGG_CONFIG.format(transfer=1, gpus=1, link=1).replace("tpot_ms = 50\n",
                                                                                                  ""))
    code, _, err = cli("check")
    assert code == 2 and "tpot_ms" in err


def test_sglang_decode_workers_hold_the_reserved_decode_tokens():
    """SGLang's PD decode pre-allocates input + num_reserved_decode_tokens (512) per request: its decode pool is the
    plan at ISL + OSL + 512; vLLM's at ISL + OSL."""
    import kvplan
    from kvplan.planning.disagg import disagg

    kw = dict(gpu="H100-SXM", rate=10, isl=2048, osl=256, ttft_ms=2000, tpot_ms=50)
    for engine, length in (("sglang", 2048 + 256 + 512), ("vllm", 2048 + 256)):
        d = disagg("llama-3.1-8b", engine=engine, **kw)
        plan = kvplan.plan("llama-3.1-8b", gpu="H100-SXM", tp=d.decode.tp, engine=engine, max_model_len=length)
        assert d.decode.max_concurrency == plan.max_concurrency, engine


def test_a_decode_reserve_that_fits_no_layout_names_the_length():
    """SGLang's decode workers hold ISL + OSL + 512 tokens: where no layout holds that, the refusal names the length
    and the reserve (not the TPOT target)."""
    from kvplan.planning.disagg import disagg

    # one RTX 4090 holds a 9,556-token request of Llama-3.1-8B on SGLang, not 10,068
    with pytest.raises(KvplanError, match=r"at 10068 tokens \(with 512 reserved decode tokens\) fits no TP layout"):
        disagg("llama-3.1-8b", gpu="RTX-4090", engine="sglang", rate=1, isl=9300, osl=256, ttft_ms=1e6, tpot_ms=1e4,
               max_gpus_per_worker=1)


@pytest.mark.parametrize(("engine", "prefill", "decode"), [
    # vLLM config/kv_transfer.py KVTransferConfig.kv_connector defaults to None: without it no KV is handed over
    ("vllm", """--kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'""",
     """--kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'"""),
    # SGLang server_args disaggregation_mode: "null" (not disaggregated), "prefill", "decode"
    ("sglang", "--disaggregation-mode prefill", "--disaggregation-mode decode"),
    # TensorRT-LLM: each worker's cache_transceiver_config in its --extra_llm_api_options file
    ("trtllm", "--extra_llm_api_options prefill.yaml", "--extra_llm_api_options decode.yaml"),
])
def test_launch_lines_make_each_worker_its_role(cli_json, engine, prefill, decode):
    """The two launch lines were the same aggregated server, which run as printed hands nothing over (QA E 3)."""
    r = cli_json("disagg", *ARGS, "--engine", engine)
    assert r["prefill"]["launch_command"].endswith(" " + prefill)
    assert r["decode"]["launch_command"].endswith(" " + decode)
    assert r["prefill"]["launch_command"] != r["decode"]["launch_command"] or prefill == decode
    assert any(n.startswith("Launch: ") for n in r["notes"])


def test_one_extra_options_file_per_trtllm_worker(cli_json):
    """An fp8 cache puts kv_cache.yaml on trtllm-serve's line; click keeps the last of a repeated option, so the
    role's file replaces it (and carries its kv_cache_config)."""
    r = cli_json("disagg", *ARGS, "--engine", "trtllm", "--kv-dtype", "fp8")
    for role in ("prefill", "decode"):
        line = r[role]["launch_command"]
        assert line.count("--extra_llm_api_options") == 1 and line.endswith(f"--extra_llm_api_options {role}.yaml")


@pytest.mark.parametrize("engine", ["tgi", "llamacpp", "ollama", "hf-static"])
def test_engines_without_disaggregated_serving_are_refused(cli, engine):
    code, out, err = cli("disagg", *ARGS, "--engine", engine)
    assert code == 2 and not out and err.count("\n") == 1
    assert err.startswith("error: --engine: ") and "no disaggregated prefill/decode serving" in err
    assert "allowed: vllm, sglang, trtllm" in err


def test_disagg_on_windows_plans_the_whole_board_and_says_so():
    """--platform windows: the workers' pools start from the catalog's Windows total (RTX 4090: 24,563 MiB, where
    Linux shows 24,093), so the same GPUs hold more; the result names the platform."""
    from kvplan.cost.hardware import load_gpu
    from kvplan.planning.disagg import disagg

    kw = dict(gpu="RTX-4090", rate=1, isl=1000, osl=200, ttft_ms=2000, tpot_ms=100)
    linux, windows = disagg("qwen3-8b", **kw), disagg("qwen3-8b", platform="windows", **kw)
    assert (linux.platform, windows.platform) == ("linux", "windows")
    assert windows.aggregated_concurrency > linux.aggregated_concurrency
    total = load_gpu("RTX-4090").windows_visible_memory_bytes
    assert total == 24563 * 2**20 and any(f"{total:,} B per GPU" in n for n in windows.notes)
    assert not any("--platform windows" in n for n in linux.notes)
