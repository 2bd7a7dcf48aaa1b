"""`kvplan report` says what `kvplan plan` says: its verdict and running limit (QA area A #4), one weights figure, the
engine's (#11), one labelled definition of a request's cache (#12), the cache llama.cpp allocates (#14), the plan's
flags (#15) and charts that read cleanly (#16)."""

from __future__ import annotations

import json
import re

import pytest

from helpers import one_line_error

pytest.importorskip("matplotlib")

from kvplan import estimate, plan  # noqa: E402
from kvplan.planning.report_data import build_report  # noqa: E402
from kvplan.report.document import build_blocks, formulas  # noqa: E402


def _report(cli, tmp_path, *args: str) -> str:
    out = tmp_path / "r.md"
    code, _, err = cli("report", *args, "-o", str(out))
    assert code == 0, err
    return out.read_text()


def _row(text: str, table_start: str, layout: str) -> list[str]:
    """The cells of ``layout``'s row in the first Markdown table whose header starts with ``table_start``."""
    block = text[text.index(table_start):]
    line = next(line for line in block.splitlines() if line.startswith(f"| {layout} |"))
    return [c.strip() for c in line.strip("|").split("|")]


# -- #4: the plan's verdict and running limit --------------------------------------------------------------------


def test_the_plan_says_what_runs_at_once(cli):
    code, out, _ = cli("plan", "-m", "llama-3.1-8b", "--gpu", "H100-SXM", "--max-model-len", "256", "--concurrency",
                       "1500", "--json")
    d = json.loads(out)
    assert code == 0 and d["max_concurrency"] > 1500 and d["running_limit"] == 1024 == d["max_running"]
    assert d["running_limit_flag"] == "--max-num-seqs" and d["target_met"] is False and "NOT met" in d["verdict"]
    fits = json.loads(cli("plan", "-m", "llama-3.1-8b", "--gpu", "H100-SXM", "--max-model-len", "256",
                          "--concurrency", "1024", "--json")[1])
    assert fits["target_met"] is True and "target 1,024: met" in fits["verdict"]


def test_report_does_not_deploy_what_max_num_seqs_caps(cli, tmp_path):
    """`report` said 'deploy on one H100-SXM: 1,500 requests ... fit' and 'holds the target: yes' where vLLM runs
    1,024 at once and `plan` says 'target 1,500: NOT met'."""
    text = _report(cli, tmp_path, "-m", "llama-3.1-8b", "--gpu", "H100-SXM", "--max-model-len", "256",
                   "--concurrency", "1500")
    verdict = next(line for line in text.splitlines() if line.startswith("**Verdict:"))
    assert "deploy" not in verdict and "--max-num-seqs 1,024" in verdict
    row = _row(text, "| layout | weights |", "H100-SXM")
    p = plan("llama-3.1-8b", gpu="H100-SXM", max_model_len=256, concurrency=1500)
    assert row[8] == f"{p.max_running:,.2f}" and row[9] == "no"  # runs at once; holds the target: the plan's
    # the concurrency curve is what runs: capped at max_num_seqs, the pool's figure beside it
    curve = _row(text, "| tokens | H100-SXM |", "256")
    assert curve[1] == f"1,024.00 (pool {p.max_concurrency:,.2f})"


def test_the_chart_series_are_capped_at_the_running_limit():
    rep = build_report(["llama-3.1-8b"], gpus=["H200"], tp=(4,), max_model_len=256, concurrency=8)
    lay = rep.models[0].layouts[0]
    limit = lay.plan.running_limit
    assert max(lay.concurrency_curve) > limit  # the pool holds more than vLLM schedules
    assert max(lay.running_curve) == limit and all(r <= c for r, c in zip(lay.running_curve, lay.concurrency_curve))


# -- #11: one weights figure, the engine's --------------------------------------------------------------------------


@pytest.mark.parametrize("name, gpu, kw", [("gpt-oss-120b", "H100-SXM", {}), ("gpt-oss-120b", "A100-80GB", {}),
                                           ("qwen3-8b", "L40S", {"weight_dtype": "fp8_e4m3"})])
def test_estimate_on_the_engine_and_gpu_is_the_plans_weights(cli_json, name, gpu, kw):
    """estimate --engine vllm --gpu H100-SXM used Marlin's MXFP4 layout (70.75 GB) where the plan loads Triton's
    (65.56 GB); --weight-dtype fp8 made every tensor fp8 where vLLM keeps embeddings and LM head in bf16."""
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in kw.items()]
    e = cli_json("estimate", "-m", name, "--seq-len", "8192", "--engine", "vllm", "--gpu", gpu, *flags)
    p = plan(name, gpu=gpu, max_model_len=8192, **kw).per_gpu
    assert e["weights"]["bytes"] == p.weights_bytes - p.buffers_bytes - p.weights_rounding_bytes


def test_report_states_one_weights_figure_and_the_format(cli, tmp_path):
    text = _report(cli, tmp_path, "-m", "gpt-oss-120b", "--gpu", "H100-SXM,H200", "--max-model-len", "8192")
    eq = int(re.search(r"`weights \(whole model, as vllm loads them on H100-SXM\) = .* = ([\d,]+) B`", text)[1]
             .replace(",", ""))
    pool = re.search(r"`KV pool on H100-SXM = .* - weights ([\d,]+) B \(the weights above \+ rotary cache ([\d,]+) B",
                     text)
    assert eq + int(pool[2].replace(",", "")) == int(pool[1].replace(",", ""))
    assert "weights mxfp4 (MoE experts" in text and "weights bf16 (what" not in text
    awq = _report(cli, tmp_path, "-m", "qwen3-8b-awq", "--gpu", "L40S")
    assert "weights awq int4 (group 128), the rest fp16" in awq


# -- #12: one definition of a request's cache, labelled ---------------------------------------------------------


def test_the_formulas_page_the_cache_as_the_plan_does():
    """qwen3-next's formula said '65536 tokens (4096 blocks of 16)' while its plan pages 544 tokens (576 on vLLM
    0.33 on an H200: prefix caching on, its Gated DeltaNet checkpoints align the block to 64 tokens)."""
    rep = build_report(["qwen3-next-80b-a3b"], gpus=["H200"], tp=(2,), max_model_len=65536)
    m = rep.models[0]
    bs = m.chosen.plan.inputs.block_size
    assert bs == 576 and m.estimate.inputs.block_size == bs
    lines = formulas(rep, m)
    assert any(f"{-(-65536 // bs) * bs} tokens ({-(-65536 // bs)} blocks of {bs})" in f for f in lines)
    assert any(f"one request's reservation: {m.chosen.plan.request_kv_bytes:,} B on this GPU" in f for f in lines)


def test_reservation_and_held_cache_are_named_apart(cli, tmp_path):
    """gemma-3-27b: 10.5 GiB (vLLM's worst-case reservation) and 2.9 GiB (what a sequence holds) were both 'one
    request's K/V'."""
    text = _report(cli, tmp_path, "-m", "gemma-3-27b", "--gpu", "H100-SXM", "--max-model-len", "32768")
    p = plan("gemma-3-27b", gpu="H100-SXM", max_model_len=32768)
    held = estimate("gemma-3-27b", seq_len=32768, engine="vllm", block_size=p.inputs.block_size)
    assert p.request_kv_bytes > 3 * held.kv_cache.bytes_per_sequence
    assert "one request's reservation" in text and "one request's cache" not in text
    assert "holds (vllm, blocks of 16 tokens; not the reservation the capacity plan charges a request)" in text
    charts = "".join(f.read_text() for f in (tmp_path / "r_charts").iterdir())
    assert "reserved by 1 request" in charts  # the memory chart's segment


# -- #14: llama.cpp's cache is what it allocates ----------------------------------------------------------------


def test_ollama_cache_is_the_n_ctx_cells_not_the_free_memory(cli_json):
    d = cli_json("plan", "-m", "qwen3-8b", "--gpu", "L40S", "--max-model-len", "32768", "--engine", "ollama")
    kv = d["kv_cache"]
    allocated = sum(b["bytes"] for b in d["buffers"] if b["kind"] in ("kv", "recurrent"))
    assert kv["allocated_bytes"] == allocated == 32768 * 147456 < kv["available_bytes"]
    assert "KV cache 4.5 GiB per GPU" in d["verdict"] and "KV pool" not in d["verdict"]
    vllm = cli_json("plan", "-m", "qwen3-8b", "--gpu", "L40S", "--max-model-len", "32768")
    assert vllm["kv_cache"]["allocated_bytes"] is None  # a paged pool fills what is left


def test_llamacpp_search_shows_each_options_quant(cli):
    # --concurrency 2: the slots keep --fit's 1 GiB free, so one H100 holds 3 Q8_0 slots of 8k (not 4), one L40S one
    # Q4_K_M slot
    code, out, _ = cli("plan", "-m", "llama-3.1-70b", "--max-model-len", "8192", "--concurrency", "2", "--engine",
                       "llamacpp", "--gpus", "L40S,H100-SXM", "--json")
    options = json.loads(out)["options"]
    assert code == 0 and all(o["per_gpu"]["weights_format"].startswith("GGUF ") for o in options)
    by_gpu = {o["gpu"]: o["per_gpu"]["weights_format"] for o in options}
    assert by_gpu["H100-SXM"] == "GGUF Q8_0" and by_gpu["L40S"] == "GGUF Q4_K_M"
    code, out, _ = cli("plan", "-m", "llama-3.1-70b", "--max-model-len", "8192", "--concurrency", "2", "--engine",
                       "llamacpp", "--gpus", "L40S,H100-SXM")
    assert code == 0 and "GGUF Q4_K_M" in out and "--gguf-quant" in out  # the column, and the note saying why


# -- #15: the plan's flags ----------------------------------------------------------------------------------------


def test_report_takes_the_plans_flags(cli, tmp_path):
    flags = {"gpu_memory_utilization": 0.9, "kv_dtype": "fp8", "weight_dtype": "fp8", "pp": 2, "dp": 2,
             "max_num_seqs": 64}
    args = [f"--{k.replace('_', '-')}={v}" for k, v in flags.items()]
    text = _report(cli, tmp_path, "-m", "llama-3-8b", "--gpu", "H100-SXM", "--concurrency", "100", *args)
    p = plan("llama-3-8b", gpu="H100-SXM", max_model_len=8192, concurrency=100, **flags)
    row = _row(text, "| layout | weights |", "4x H100-SXM (TP 1, PP 2, DP 2)")
    assert row[7] == f"{p.max_concurrency_total:,.2f}" and row[8] == f"{p.max_running * 2:,.2f}" == "128.00"
    assert p.launch_command in text and "KV dtype fp8_e4m3" in text


def test_report_refuses_a_flag_of_another_engine_and_names_its_engines(cli, tmp_path):
    out = str(tmp_path / "r.md")
    assert "--mem-fraction-static" in one_line_error(cli, "report", "-m", "llama-3-8b", "--mem-fraction-static",
                                                     "0.5", "-o", out)
    line = one_line_error(cli, "report", "-m", "llama-3-8b", "--engine", "hf-static", "-o", out)
    assert "ollama" in line and "allowed:" in line
    assert list(tmp_path.iterdir()) == []
    code, help_text, _ = cli("report", "--help")
    flat = " ".join(help_text.replace("│", " ").split())
    assert code == 0 and "hf-static" not in flat and "ollama" in flat and "vllm==0.11" in flat
    assert "--pp" in flat and "--kv-dtype" in flat and "--weight-dtype" in flat


def test_static_runtimes_are_those_named_static():
    from kvplan.cost.runtimes import _STATIC, get_engine, names

    assert _STATIC == {n for n in names() if get_engine(n).static}


def test_a_head_count_refusal_gets_no_memory_advice(cli, tmp_path):
    text = _report(cli, tmp_path, "-m", "llama-3-8b", "--gpu", "H100-SXM", "--tp", "3")
    verdict = next(line for line in text.splitlines() if line.startswith("**Verdict:"))
    assert "divisible" in verdict and "fp8" not in verdict


# -- #16: charts and words ----------------------------------------------------------------------------------------


def test_close_roofline_points_get_labels_on_both_sides():
    from kvplan.report.charts import roof_labels

    pts = [("H100", "prefill", 32, 1.7e5, 1e15), ("H100", "prefill", 64, 2.4e5, 1e15), ("A100", "prefill", 32, 1.7e5,
           3e14), ("A100", "prefill", 64, 2.4e5, 3e14), ("H100", "prefill", 1, 8e3, 1e15)]
    labels = {t: (x, y, dy) for t, x, y, dy in roof_labels(pts)}
    assert set(labels) == {"p1", "p32", "p64"}
    assert labels["p32"][2] > 0 > labels["p64"][2] and labels["p64"][1] == 3e14  # the second under the lowest point
    assert labels["p1"][2] > 0


@pytest.mark.parametrize("bars", [1, 3, 6])
def test_the_bar_legend_sits_under_the_axis_label(bars):
    from kvplan.report import charts

    svg = charts.memory_breakdown("m", "t", [f"g{i}" for i in range(bars)], {"a": [2**30] * bars,
                                                                            "b": [2**31] * bars}, [2**36] * bars)
    label_y = float(re.search(r'y="([\d.]+)"[^>]*>GiB per GPU', svg)[1])
    legend = svg[svg.index("legend_1"):]
    top = min(float(y) for y in re.findall(r"[ML] [\d.]+ ([\d.]+)", legend[:legend.index("</g>")]))
    assert 0 < top - label_y < 25, (top, label_y)  # it was some 45 points below, detached


def test_one_token_pages_are_singular(cli):
    code, out, _ = cli("plan", "-m", "llama-3.1-8b", "--gpu", "L40S", "--max-model-len", "8192", "--engine", "tgi")
    assert code == 0 and "blocks of 1 token)" in out and "1 tokens" not in out
    code, out, _ = cli("plan", "-m", "qwen3-8b", "--gpu", "L40S", "--max-model-len", "8192", "--engine", "sglang")
    assert code == 0 and "1 tokens" not in out


@pytest.mark.slow  # builds whole reports' charts, for every engine / twice: the slow tier (CI)
def test_blocks_build_for_every_engine_of_a_report():
    """Every engine a report takes renders (its verdict, capacity and formulas) without an error."""
    for engine in ("vllm", "sglang", "trtllm", "tgi", "llamacpp", "ollama", "hf-dynamic", "ideal"):
        rep = build_report(["qwen3-8b"], gpus=["L40S"], max_model_len=4096, engine=engine)
        assert build_blocks(rep)[3].text.startswith("Verdict:"), engine
