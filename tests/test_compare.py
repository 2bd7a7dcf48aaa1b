"""`kvplan compare`: layouts side by side, checked against numbers worked out independently."""

import pytest

from kvplan.model.catalog import load_card
from kvplan.cost.params import count_params

LAYOUTS = "mha,gqa:8,mqa"


def rows_by_layout(result):
    return {row["layout"]: row for row in result["rows"]}


def test_llama_2_70b_kv_bytes_per_token(cli_json):
    rows = rows_by_layout(cli_json("compare", "--model", "llama-2-70b", "--attention", LAYOUTS))
    # 80 layers x kv_heads x 128 head_dim x 2 (K,V) x 2 bytes
    assert rows["mha"]["kv_bytes_per_token"] == 2_621_440 == 80 * 64 * 128 * 2 * 2
    assert rows["gqa:8"]["kv_bytes_per_token"] == 327_680 == 80 * 8 * 128 * 2 * 2
    assert rows["mqa"]["kv_bytes_per_token"] == 40_960 == 80 * 1 * 128 * 2 * 2
    assert list(rows) == ["card", "mha", "gqa:8", "mqa"]  # the card's own layout first
    assert rows["card"]["kv_bytes_per_token"] == rows["gqa:8"]["kv_bytes_per_token"]


def test_params_flops_and_traffic_per_layout(cli_json):
    batch, seq = 2, 1024
    res = cli_json("compare", "-m", "llama-2-70b", "--attention", LAYOUTS, "--batch", str(batch),
                   "--seq-len", str(seq))
    rows = rows_by_layout(res)
    # K and V projections: 80 layers x 2 x hidden 8192 x (kv_heads - 8) x 128
    assert rows["mha"]["params_delta_vs_card"] == 80 * 2 * 8192 * (64 - 8) * 128
    assert rows["mqa"]["params_delta_vs_card"] == 80 * 2 * 8192 * (1 - 8) * 128
    assert rows["card"]["params"] == count_params(load_card("llama-2-70b")).total
    assert len({r["decode_attention_flops"] for r in res["rows"]}) == 1  # attention FLOPs do not change
    kv_delta = rows["mha"]["kv_bytes_per_token"] - rows["card"]["kv_bytes_per_token"]
    traffic_delta = rows["mha"]["decode_bytes_per_step"] - rows["card"]["decode_bytes_per_step"]
    # fp16 weights read once + KV of batch x seq read + one new token per sequence written
    assert traffic_delta == 2 * rows["mha"]["params_delta_vs_card"] + batch * (seq + 1) * kv_delta
    assert rows["mha"]["kv_total_bytes"] == batch * seq * rows["mha"]["kv_bytes_per_token"]


def test_max_batch_and_time_per_token_with_gpu(cli_json):
    res = cli_json("compare", "-m", "llama-2-70b", "--attention", LAYOUTS, "--gpu", "H200", "--seq-len", "4096")
    rows = rows_by_layout(res)
    from kvplan.cost.hardware import load_gpu

    total = load_gpu("H200").engine_memory_bytes  # what torch sees on an H200, where a plan starts
    assert total > 141_000_000_000
    for row in res["rows"]:
        free = total - 2 * row["params"]  # fp16 weights
        assert row["max_batch"] == max(0, free // (row["kv_bytes_per_token"] * 4096))
    assert rows["mqa"]["max_batch"] > rows["gqa:8"]["max_batch"] > rows["mha"]["max_batch"]
    assert rows["mqa"]["time_per_output_token_s"] < rows["gqa:8"]["time_per_output_token_s"]
    # MHA's 156.7 GB of fp16 weights exceed the H200's memory: no batch fits, so no latency is claimed
    assert rows["mha"]["max_batch"] == 0 and rows["mha"]["time_per_output_token_s"] is None


def test_human_table_and_summary(cli):
    code, out, err = cli("compare", "--model", "llama-2-7b", "--attention", "gqa:4,mqa", "--gpu", "L40S")
    assert code == 0, err
    assert "Grouping K/V heads" in out and "attention FLOPs do not change" in out.replace("\n", " ")


@pytest.mark.parametrize(("args", "message"), [
    (("-m", "deepseek-v3", "--attention", "mha"), "MLA"),
    (("-m", "llama-2-7b", "--attention", "gqa:3"), "divisible"),
    (("-m", "llama-2-7b", "--attention", "mha", "--gpu", "TPU-v5"), "known: A10, A100-40GB"),
    (("-m", "llama-2-7b", "--attention", " , "), "one or more layouts"),
    (("-m", "llama-2-7b", "--attention", "mqa", "--engine", "hf-static"), "hf-static"),
])
def test_errors_are_one_line(cli, args, message):
    code, out, err = cli("compare", *args)
    assert code == 2 and message in err and "Traceback" not in err


def test_mla_layout_what_if(cli_json):
    res = cli_json("compare", "-m", "llama-3-8b", "--attention", "mla:512", "--seq-len", "1024")
    mla = rows_by_layout(res)["mla:512"]
    # one latent of 512 + a rope key of 64 (head_dim 128 / 2) per token and layer, bf16: 32 x 576 x 2 B
    assert mla["kv_bytes_per_token"] == 32 * 576 * 2 == 36_864 and mla["num_kv_heads"] is None
    # K/V projections (2 x 4096 x 1024) give way to kv_a (4096 x 576), kv_a_layernorm (512), kv_b (512 x 32 x 256);
    # Q grows from 4096 x 4096 to 4096 x 32 x 192
    per_layer = (4096 * 576 + 512 + 512 * 32 * 256 + 4096 * 32 * 192) - (2 * 4096 * 1024 + 4096 * 4096)
    assert mla["params_delta_vs_card"] == 32 * per_layer
    assert "MLA (mla:R)" in res["summary"]


def test_mla_card_compares_latent_ranks(cli_json):
    rows = rows_by_layout(cli_json("compare", "-m", "deepseek-v2-lite", "--attention", "mla:256", "--seq-len", "64"))
    assert rows["card"]["kv_bytes_per_token"] == 27 * (512 + 64) * 2  # 27 layers, bf16
    assert rows["mla:256"]["kv_bytes_per_token"] == 27 * (256 + 64) * 2


def test_mla_what_if_of_a_qk_norm_card_drops_its_per_head_norms(cli_json):
    """OLMo-2 norms q and k over all heads (qk_norm_width); its MLA what-if has no per-head q/k, so no such norms:
    40 layers x 128 latent + 64 rope key (head_dim 128 / 2) x 4 B (float32 card) per token."""
    rows = rows_by_layout(cli_json("compare", "-m", "olmo-2-13b", "--attention", "mla:128", "--seq-len", "64"))
    assert rows["mla:128"]["kv_bytes_per_token"] == 40 * (128 + 64) * 4


def test_tp_plans_each_layout_on_the_gpus_of_the_group(cli_json):
    """llama-2-70b fits no single H100 (138 GB of bf16 weights); on 4 every layout is planned by kvplan plan, and
    its max batch is the plan's concurrency of the same layout."""
    from kvplan.model.layouts import with_layout
    from kvplan.planning.capacity import plan

    one = rows_by_layout(cli_json("compare", "-m", "llama-2-70b", "--attention", LAYOUTS, "--gpu", "H100-SXM",
                                  "--seq-len", "4096", "--engine", "vllm"))
    assert all(r["max_batch"] == 0 and r["time_per_output_token_s"] is None for r in one.values())
    res = cli_json("compare", "-m", "llama-2-70b", "--attention", LAYOUTS, "--gpu", "H100-SXM", "--seq-len", "4096",
                   "--engine", "vllm", "--tp", "4")
    assert res["tp"] == 4
    four = rows_by_layout(res)
    card = load_card("llama-2-70b")
    for label in ("mha", "mqa"):
        p = plan(with_layout(card, attention=label), gpu="H100-SXM", tp=4, max_model_len=4096, concurrency=1)
        assert four[label]["max_batch"] == int(p.max_concurrency) > 0
        assert four[label]["time_per_output_token_s"] == p.latency.tpot_ms / 1e3
    assert four["mqa"]["max_batch"] > four["gqa:8"]["max_batch"] > four["mha"]["max_batch"]


def test_tp_needs_a_gpu(cli):
    code, _, err = cli("compare", "-m", "llama-2-7b", "--attention", "mqa", "--tp", "2")
    assert code == 2 and "--tp" in err and "--gpu" in err


def test_compare_and_gpus_list_read_at_80_columns():
    """A terminal of 80 columns: no line longer, no number cut or split; `gpus list` one line per GPU and under 10
    more (header and footer: the sources are not listed at a terminal; the catalog has 40 GPUs, 32 before)."""
    import re

    from rich.console import Console

    from kvplan.cost.hardware import load_gpus
    from kvplan.planning.compare import compare
    from kvplan.report.compare import render_compare
    from kvplan.report.gpus import render_gpus

    c = Console(width=80, record=True, file=open("/dev/null", "w"))
    r = compare("llama-2-70b", attention="mha,gqa:8,mqa,mla:512", gpu="H100-SXM", tp=4, seq_len=4096, engine="vllm")
    render_compare(r, c)
    text = c.export_text()
    assert max(len(line) for line in text.splitlines()) <= 80
    for row in r.rows:  # each row on one line, its layout and its figures whole
        line = next(ln for ln in text.splitlines() if ln.startswith(row.layout + " "))
        assert f"{row.max_batch:,}" in line.split() and ("KiB" in line or "MiB" in line)
    c = Console(width=80, record=True, file=open("/dev/null", "w"))
    render_gpus(list(load_gpus().values()), c)
    text = c.export_text()
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80 and len(lines) < len(load_gpus()) + 10
    assert all(re.search(rf"^{re.escape(g)}\s", text, re.M) for g in load_gpus())
