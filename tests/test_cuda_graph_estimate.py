"""vLLM's CUDA-graph estimate (gpu_model_runner.py profile_cudagraph_memory): the capture list from the scheduler
limits, pinned to the lists and counts public logs print, and the per-graph ESTIMATE's error against the
"Estimated CUDA graph memory" figures of docs/logs (docs/capacity.md states it)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from kvplan.cost import serving_vllm as vl
from kvplan.cost.runtimes.vllm import VERSIONS
from kvplan.planning.capacity import plan

LOGS = Path(__file__).resolve().parents[1] / "docs" / "logs"
GIB, MIB = 2**30, 2**20
QWEN72_TP4 = LOGS / "vllm-codeindex53041548781-qwen2.5-72b-tp4-l40s.log"
QWEN3_8B = LOGS / "vllm-tokenkaki-qwen3-8b-a100-40gb-serve.log"
COUNTS = re.compile(r"Profiling CUDA graph memory: PIECEWISE=(\d+) \(largest=(\d+)\), FULL=(\d+) \(largest=(\d+)\)")
ESTIMATE = re.compile(r"Estimated CUDA graph memory: ([\d.]+) GiB total")


def test_capture_sizes_are_the_list_the_log_prints():
    """vLLM 0.19.0 at 256 sequences and 2,048 batched tokens (L40S defaults) prints its whole capture list."""
    text = QWEN72_TP4.read_text(encoding="utf-8")
    logged = ast.literal_eval(re.search(r"'cudagraph_capture_sizes': (\[[\d, ]+\])", text).group(1))
    assert vl.cudagraph_capture_sizes(256, 2048) == logged


@pytest.mark.parametrize("log", [QWEN72_TP4, QWEN3_8B], ids=["qwen2.5-72b-l40s", "qwen3-8b-a100-40gb"])
def test_graph_counts_are_the_logged_ones(log: Path):
    """Both run 256 sequences (GPUs under 70 GiB or A100, arg_utils.py get_batch_defaults) and 2,048 tokens."""
    pw, pw_largest, full, full_largest = map(int, COUNTS.search(log.read_text(encoding="utf-8")).groups())
    assert vl.cudagraph_counts(256, 2048) == (pw, full)
    sizes = vl.cudagraph_capture_sizes(256, 2048)
    assert (max(sizes), max(x for x in sizes if x <= 256)) == (pw_largest, full_largest)


def test_counts_follow_the_limits():
    # an H100's 1,024 sequences: 512 is the cap, and every size is also a FULL decode size
    assert vl.cudagraph_counts(1024, 8192) == (51, 51)
    # few sequences: the largest size is 2 x max_num_seqs (4 -> [1, 2, 4, 8]; FULL up to 4)
    assert vl.cudagraph_counts(4, 2048) == (4, 3)
    # batched tokens below the cap are captured themselves
    assert vl.cudagraph_capture_sizes(256, 300)[-2:] == [288, 300]
    # speculative decoding (1 + 2 tokens per decode query): FULL graphs from size 3 up to 3 x max_num_seqs
    assert vl.cudagraph_counts(256, 2048, 3) == (51, 49)  # sizes 1 and 2 are below one query


def test_estimate_is_max_first_plus_per_graph_rest():
    """profile_cudagraph_memory: max(first captures) + sum((n - 1) x per graph), every capture costing the same."""
    assert vl.cuda_graph_estimate_bytes((51, 35), MIB) == (1 + 50 + 34) * MIB
    assert vl.cuda_graph_estimate_bytes((5, 0), MIB) == 5 * MIB  # PIECEWISE only (a spec-decode FlashInfer run)
    assert vl.cuda_graph_estimate_bytes((0, 0), MIB) == 0


@pytest.mark.parametrize("log, error", [(QWEN3_8B, 0.060), (QWEN72_TP4, -0.088)],
                         ids=["qwen3-8b-a100-40gb", "qwen2.5-72b-l40s"])
def test_fitted_0_19_estimate_error_is_as_documented(log: Path, error: float):
    """The ESTIMATE's error against vLLM 0.19's printed figure (docs/capacity.md): +6.0% and -8.8%."""
    logged = float(ESTIMATE.search(log.read_text(encoding="utf-8")).group(1))
    ours = vl.cuda_graph_estimate_bytes((51, 35), vl.CUDA_GRAPH_BYTES_PER_GRAPH_0_19) / GIB
    assert ours / logged - 1 == pytest.approx(error, abs=0.0005)


def test_the_estimate_is_charged_from_0_20_only():
    kw = dict(gpu="L40S", max_model_len=40960)
    new, old = plan("qwen3-14b", engine="vllm==0.21", **kw), plan("qwen3-14b", engine="vllm==0.19", **kw)
    assert new.per_gpu.cuda_graph_bytes == 85 * vl.CUDA_GRAPH_BYTES_PER_GRAPH_0_21
    assert old.per_gpu.cuda_graph_bytes == 0  # 0.19 prints its estimate but sizes the pool before capturing
    h100 = plan("qwen3-14b", gpu="H100-SXM", max_model_len=40960)
    assert h100.per_gpu.cuda_graph_bytes == 101 * vl.CUDA_GRAPH_BYTES_PER_GRAPH_0_21
    # --cuda-graph-memory still replaces it
    assert plan("qwen3-14b", engine="vllm==0.21", cuda_graph_memory="1GiB", **kw).per_gpu.cuda_graph_bytes == GIB
    assert "PIECEWISE + 35 FULL graphs" in " ".join(old.notes) and "not charged" in " ".join(old.notes)


def test_every_v1_range_from_0_18_has_a_per_graph_estimate():
    for v in VERSIONS:
        assert (v.cuda_graph_bytes_per_graph is not None) == (v.first >= (0, 18))


V2_LOG = LOGS / "vllm-code61815222665-qwen2.5-0.5b-rtx4090-v2runner.log"


def test_dense_models_on_0_25_to_0_28_charge_no_graphs():
    """Model Runner V2, the default for dense models in 0.25-0.28, returns 0 from profile_cudagraph_memory: the 0.27.1
    log of Qwen2.5-0.5B prints '0.0 GiB for CUDAGraph memory'; MoE and hybrid models stay on V1 (estimated), and 0.29+
    estimates every model's graphs again."""
    logged = re.search(r"and ([\d.]+) GiB for CUDAGraph memory", V2_LOG.read_text(encoding="utf-8")).group(1)
    kw = dict(gpu="L40S", max_model_len=8192)
    graphs = {e: plan("qwen3-14b", engine=e, **kw).per_gpu.cuda_graph_bytes
              for e in ("vllm==0.21", "vllm==0.25", "vllm==0.28", "vllm==0.29")}
    assert graphs["vllm==0.25"] == graphs["vllm==0.28"] == float(logged) * GIB == 0
    assert graphs["vllm==0.21"] == graphs["vllm==0.29"] == 85 * vl.CUDA_GRAPH_BYTES_PER_GRAPH_0_21
    moe = plan("qwen3-30b-a3b", engine="vllm==0.28", gpu="H100-SXM", max_model_len=8192)
    assert moe.per_gpu.cuda_graph_bytes == 101 * vl.CUDA_GRAPH_BYTES_PER_GRAPH_0_21
    ngram = plan("qwen3-14b", engine="vllm==0.28", speculative_config={"method": "ngram", "num_speculative_tokens": 2},
                 **kw)
    assert ngram.per_gpu.cuda_graph_bytes > 0  # V2 lacks ngram speculation: V1 estimates the graphs
    assert "Model Runner V2" in " ".join(plan("qwen3-14b", engine="vllm==0.28", **kw).notes)



@pytest.mark.parametrize("model, engine, v2", [
    ("qwen3-14b", "vllm==0.21", False), ("qwen3-14b", "vllm==0.22", True), ("llama-3.1-8b", "vllm==0.22", False),
    ("llama-3.1-8b", "vllm==0.23", True), ("mistral-7b-v0.2", "vllm==0.23", True), ("qwen2.5-7b", "vllm==0.24", False),
    ("qwen3-8b-awq", "vllm==0.23", False), ("qwen3-8b-awq", "vllm==0.24", True),
    ("deepseek-v2-lite", "vllm==0.23", False), ("deepseek-v2-lite", "vllm==0.24", True),
    ("deepseek-v2-lite", "vllm==0.25", True), ("qwen3-30b-a3b", "vllm==0.25", False)])
def test_model_runner_v2_by_the_releases_architecture_list(model, engine, v2):
    """config/vllm.py DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES (0.22: Qwen3; 0.23: + Llama, Mistral; 0.24: + DeepseekV2,
    Qwen2Moe, GraniteMoe, MoE and quantized models included; 0.25: the MoE three, or any dense model): V2 estimates no
    CUDA graphs, so its plans charge none where V1's charge the per-graph estimate."""
    r = plan(model, engine=engine, gpu="H100-SXM", max_model_len=8192)
    assert (r.per_gpu.cuda_graph_bytes == 0) == v2
