"""A pipeline's decode bound follows its runtime's scheduler: vLLM keeps pp batches in flight (v1/engine/core.py
EngineCore.step_with_batch_queue, batch_queue of max_concurrent_batches = pp_size; Scheduler.schedule skips a request
whose step has not returned), SGLang pp micro-batches (Scheduler.event_loop_pp), TensorRT-LLM pp micro-batches
(PyExecutor num_micro_batches = pp_size): each stage steps every micro-batch once per token period. llama.cpp's layer
split runs one batch through the GPUs in turn (QA report E, defect 3)."""

import json

import pytest

from kvplan.cost.hardware import load_gpu
from kvplan.model.catalog import load_card
from kvplan.planning.capacity import plan

H200 = load_gpu("H200")


def _llama70b_stage_bytes(requests: int, seq_len: int) -> tuple[int, int, int]:
    """(weights, K/V read, K/V written) one GPU of Llama-3.1-70B's last pipeline stage of two moves in a bf16 decode
    step of ``requests`` sequences at ``seq_len``, from the model's shapes (its config.json): 40 of the 80 layers
    (q/o 8192 x 8192, k/v 8192 x 1024, gate/up/down 8192 x 28672, two RMSNorms), the final norm and the untied LM
    head (128,256 x 8192); 8 KV heads of 128 per layer."""
    card = load_card("llama-3.1-70b")
    h, i, kv = card.hidden_size, 28672, 8 * 128
    assert (h, card.num_layers, card.vocab_size) == (8192, 80, 128256)
    layer = 2 * h * h + 2 * h * kv + 3 * h * i + 2 * h
    weights = (40 * layer + h + card.vocab_size * h) * 2
    per_token = 40 * 2 * kv * 2  # K and V of 40 layers, bf16
    return weights, requests * seq_len * per_token, requests * per_token


def test_vllm_pp2_decodes_two_micro_batches():
    """llama-3.1-70b on 2x H200, PP 2, 16 running requests at 8,192 tokens: two micro-batches of 8 in flight; each
    stage steps both per token, and the last (the LM head's) is the slower, so TPOT = 2 x its bytes for 8 requests /
    4.8 TB/s = 33.87 ms (it was 37.91 ms: all 16 walking both stages in turn), 1.3% above the same GPUs as two
    replicas (33.43 ms: the QA report's figure, which splits the stages evenly), and $/Mtok from it."""
    p = plan("llama-3.1-70b", gpu="H200", pp=2, max_model_len=8192, concurrency=16)
    w, kv_read, kv_write = _llama70b_stage_bytes(8, 8192)
    lat = p.latency
    assert lat.tpot_ms == pytest.approx(2 * (w + kv_read + kv_write) / H200.memory_bandwidth_bytes_per_s * 1e3,
                                        rel=1e-12)
    assert lat.tpot_ms == pytest.approx(33.87, abs=0.01)
    dp2 = plan("llama-3.1-70b", gpu="H200", dp=2, max_model_len=8192, concurrency=16, gpu_memory="200GiB").latency
    assert dp2.tpot_ms < lat.tpot_ms < 1.015 * dp2.tpot_ms
    # the figures the notes and the JSON give: one micro-batch of 8 requests through both stages
    assert lat.decode_kv_read_bytes == 2 * kv_read
    assert any("2 decode micro-batches in flight" in n for n in lat.notes)
    assert lat.decode_micro_batches == 2
    assert lat.usd_per_million_output_tokens == pytest.approx(2 * H200.price_per_hour_usd / 3600 * 1e6
                                                              / (16 / (lat.tpot_ms / 1e3)), rel=1e-12)


@pytest.mark.parametrize("engine", ["sglang", "trtllm", "ideal"])
def test_other_pipelining_engines_match_vllm(engine):
    """SGLang, TensorRT-LLM and the ideal engine keep pp micro-batches too: the same bound as vLLM's."""
    vllm = plan("llama-3.1-70b", gpu="H200", pp=2, max_model_len=8192, concurrency=16).latency
    other = plan("llama-3.1-70b", gpu="H200", pp=2, max_model_len=8192, concurrency=16, engine=engine).latency
    assert other.tpot_ms == pytest.approx(vllm.tpot_ms, rel=1e-9) and other.decode_micro_batches == 2


def test_llamacpp_layer_split_walks_one_batch():
    """llama.cpp runs one batch through its layer split: TPOT = the whole batch's bytes on both GPUs in turn /
    bandwidth + stage 0's hand-off (4 x 4,096 bf16 activations over one direction of 900 GB/s NVLink)."""
    lat = plan("llama-3.1-8b", gpu="H200", pp=2, max_model_len=8192, concurrency=4, engine="llamacpp").latency
    moved = lat.decode_weights_read_bytes + lat.decode_kv_read_bytes + lat.decode_kv_write_bytes
    assert lat.decode_kv_read_bytes == 4 * 8192 * 32 * 2 * 8 * 128 * 2  # 4 requests, 32 layers, 8 KV heads, f16
    hand_off = 4 * 4096 * 2 / (H200.interconnect_bandwidth_bytes_per_s / 2)
    assert lat.tpot_ms == pytest.approx((moved / H200.memory_bandwidth_bytes_per_s + hand_off) * 1e3, rel=1e-12)
    assert lat.decode_micro_batches == 1


def test_one_batch_where_it_bounds_lower():
    """2 requests of 1,024 tokens on PP 2: two micro-batches of one would read the last stage's weights (its half
    of the layers and the 2.1 GB LM head) twice a token, more than both stages' weights once with both requests in
    one batch, which vLLM runs where they were scheduled together: TPOT is that batch's walk, the lower bound."""
    lat = plan("llama-3.1-70b", gpu="H200", pp=2, max_model_len=1024, concurrency=2).latency
    card = load_card("llama-3.1-70b")
    h, kv = card.hidden_size, 8 * 128
    layer = 2 * h * h + 2 * h * kv + 3 * h * 28672 + 2 * h
    weights = (80 * layer + h + card.vocab_size * h) * 2 + 2 * h * 2  # + the 2 tokens' embedding rows
    cache = 2 * 1024 * 80 * 2 * kv * 2 + 2 * 80 * 2 * kv * 2  # read to 1,024 tokens, one token written
    hand_off = 2 * h * 2 / (H200.interconnect_bandwidth_bytes_per_s / 2)
    assert lat.tpot_ms == pytest.approx(((weights + cache) / H200.memory_bandwidth_bytes_per_s + hand_off) * 1e3,
                                        rel=1e-12)
    assert lat.decode_micro_batches == 1 and any("one batch walking the stages" in n for n in lat.notes)


def test_fewer_requests_than_stages():
    """One request on a 4-stage pipeline is one micro-batch: the single-batch bound."""
    lat = plan("llama-3.1-70b", gpu="H200", pp=4, max_model_len=8192, concurrency=1).latency
    assert lat.decode_micro_batches == 1


def test_sweep_agrees_with_plan(cli):
    """The sweep's capacity columns bound a pipeline's decode as plan does (the ideal engine: two micro-batches)."""
    lat = plan("llama-3.1-70b", gpu="H200", pp=2, max_model_len=8192, concurrency=16, engine="ideal").latency
    code, out, err = cli("sweep", "-m", "llama-3.1-70b", "--seq-len", "8192", "--batch", "16", "--gpu", "H200",
                         "--pp", "2", "--format", "jsonl")
    assert code == 0, err
    row = json.loads(out.splitlines()[0])
    w, kv_read, kv_write = _llama70b_stage_bytes(8, 8192)
    assert row["roofline.time_per_output_token_s"] == pytest.approx(
        2 * (w + kv_read + kv_write) / H200.memory_bandwidth_bytes_per_s, rel=1e-12)
    assert row["roofline.time_per_output_token_s"] * 1e3 == pytest.approx(lat.tpot_ms, rel=1e-9)


def _table_rows(html: str, table_id: str) -> list[list[tuple[str, str | None]]]:
    """A report table's rows as (text, data-value) cells, read from the HTML as a reader's tool would."""
    import re

    body = html[html.index(f'id="{table_id}"'):]
    body = body[:body.index("</table>")]
    return [[(text, value) for value, text in re.findall(r'<td(?: class="n" data-value="([^"]*)")?>([^<]*)</td>', row)]
            for row in re.findall(r"<tr>(.*?)</tr>", body) if "<td" in row]


def test_report_roofline_draws_the_micro_batch_step_the_plans_tpot_is_from(cli, cli_json, tmp_path):
    """`kvplan report --pp 2` beside `kvplan plan --pp 2 --json` with the same flags (llama-3.1-70b, 2x H200, 8,192
    tokens, 16 requests): the plan's TPOT is the token period of 2 micro-batches of 8, so the report's roofline draws
    one micro-batch's decode step, labelled so, whose bytes are the plan's decode bytes (the K/V read: 2 stages x 8
    requests x 8,192 tokens x 40 layers x 2 x 1,024 x 2 B, from the shapes) and whose time is those bytes /
    4.8 TB/s (memory-bound); its capacity table's TPOT is the plan's. The report drew all 16 requests' step on one
    pipeline-less setup before (37.91 ms, the TPOT the plan had before micro-batches, at 14.11 FLOP/B; now 33.43 ms
    at 8.00 FLOP/B beside the plan's 33.87 ms period)."""
    flags = ["-m", "llama-3.1-70b", "--gpu", "H200", "--pp", "2", "--max-model-len", "8192", "--concurrency", "16"]
    lat = cli_json("plan", *flags)["latency"]
    out = tmp_path / "r.html"
    code, _, err = cli("report", *flags, "-o", str(out))
    assert code == 0, err
    html = out.read_text()
    _, kv_read, _ = _llama70b_stage_bytes(8, 8192)
    assert lat["decode_micro_batches"] == 2 and lat["decode_kv_read_bytes"] == 2 * kv_read
    step_bytes = lat["decode_weights_read_bytes"] + lat["decode_kv_read_bytes"] + lat["decode_kv_write_bytes"]
    decode = [r for r in _table_rows(html, "llama-3.1-70b-roofline-table") if r[1][0].startswith("decode")]
    at16 = [r for r in decode if r[2][1] == "16"]
    assert len(at16) == 1
    layout, phase, _, _, _, time, bound = at16[0]
    assert layout[0] == "2x H200 (TP 1, PP 2)"
    assert phase[0] == "decode, 1 of 2 micro-batches (8 requests)" and bound[0] == "memory"
    assert float(time[1]) == pytest.approx(step_bytes / H200.memory_bandwidth_bytes_per_s, rel=1e-12)
    capacity = _table_rows(html, "llama-3.1-70b-capacity-table")
    assert len(capacity) == 1 and float(capacity[0][11][1]) == pytest.approx(lat["tpot_ms"] / 1e3, rel=1e-12)
    assert ">d16/2<" in html  # the chart's label of that point


def test_report_roofline_points_carry_the_plans_decode_bytes():
    """The report's data beside the plan at PP 2 (llama-3.1-8b, 2x H100-SXM, 64 requests): the decode point at the
    plan's batch is one micro-batch of 32 (the chart drew all 64 at 25.00 ms, 14.75 FLOP/B; now 14.74 ms, 12.51
    FLOP/B), its bytes the plan's decode bytes."""
    from kvplan.planning.report_data import build_report

    rep = build_report(["llama-3.1-8b"], gpus=["H100-SXM"], max_model_len=8192, concurrency=64, pp=2)
    lat = plan("llama-3.1-8b", gpu="H100-SXM", pp=2, max_model_len=8192, concurrency=64).latency
    (pt,) = [p for p in rep.models[0].roof if p.phase == "decode" and p.batch == 64]
    assert (pt.micro_batches, pt.step_batch, pt.pp, pt.label) == (lat.decode_micro_batches, 32, 2, "d64/2")
    assert pt.bytes_moved == lat.decode_weights_read_bytes + lat.decode_kv_read_bytes + lat.decode_kv_write_bytes
