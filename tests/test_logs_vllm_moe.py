"""Public vLLM V1 start-up logs of MoE, quantized (AWQ-Marlin, FP8 blocks, MXFP4) and expert-parallel deployments
(docs/logs/*.log), reproduced from their launch flags alone and from the logged pool (issue 20).

Every logged figure is read from the log file itself (the lines vLLM printed), so a test fails if the file and the
rule part ways. Flags alone: the weights per GPU within 0.5%, the memory left for the cache within 5%. The logged
pool (``--kv-cache-memory`` = the logged "Available KV cache memory", itself rounded to 0.01 GiB): the logged tokens
and concurrency lie between kvplan's figures at the two ends of that rounding interval.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from kvplan.errors import KvplanError, Refused
from kvplan.planning.capacity import plan

ROOT = Path(__file__).resolve().parents[1]
LOGS, CONFIGS = ROOT / "docs" / "logs", ROOT / "tests" / "data" / "configs"
GIB = 2**30
WEIGHTS_TOLERANCE, AVAILABLE_TOLERANCE = 0.005, 0.05  # issue 20


def config_card(name: str):
    """A card from a vendored config.json (tests/data/configs; its "_source" key names the file it copies)."""
    from kvplan.model.hf.config import card_from_hf_config

    cfg = json.loads((CONFIGS / name).read_text())
    cfg.pop("_source")
    return card_from_hf_config(cfg)


def logged(text: str) -> dict:
    """The figures a vLLM log states; over several ranks, the smallest (V1 sizes every rank's pool by the minimum)."""
    def numbers(pattern: str, cast=float) -> list:
        return [cast(m.replace(",", "")) for m in re.findall(pattern, text)]

    out = {}
    for name, pattern, cast in (
            ("weights", r"Model loading took (-?[\d.]+) GiB", float),
            ("available", r"Available KV cache memory: (-?[\d.]+) GiB", float),
            ("tokens", r"GPU KV cache size: ([\d,]+) tokens", int),
            ("concurrency", r"Maximum concurrency for [\d,]+ tokens per request: ([\d.]+)x", float)):
        found = numbers(pattern, cast)
        if found:
            out[name] = min(found)
    return out


@dataclass
class Log:
    file: str
    card: object  # a bundled card name or a config card
    flags: dict  # plan() keywords: the deployment's launch flags
    checks: tuple = ("weights", "available")  # flag-alone figures compared
    pool: bool = True  # the logged pool (available, tokens, concurrency) is reproduced
    gaps: dict = field(default_factory=dict)  # figure -> reason (xfail strict)

    @property
    def text(self) -> str:
        return (LOGS / self.file).read_text()


LOGS_MOE = [
    Log("vllm-code38962983769-qwen3-235b-fp8-ep-l40s.log", "qwen3-235b-a22b-instruct-2507-fp8.json",
        dict(gpu="L40S", tp=8, expert_parallel=True, engine="vllm==0.10.2", gpu_memory_utilization=0.9,
             max_model_len=32768)),
    Log("vllm-code10876549642-llama-3-70b-awq-l40s.log", "llama-3-70b-instruct-awq.json",
        dict(gpu="L40S", tp=2, engine="vllm==0.16.0", max_model_len=8192)),
    Log("vllm-code53268049166-qwen2.5-7b-awq.log", "qwen2.5-7b-instruct-awq.json",
        dict(gpu="RTX-4090", engine="vllm==0.19.0", gpu_memory_utilization=0.7, max_model_len=4096),
        checks=("weights",)),  # the log names no GPU and prints no total: the pool is checked, not the budget
    Log("vllm-myoceane-gpt-oss-20b-a100.log", "gpt-oss-20b",
        dict(gpu="A100-80GB", engine="vllm==0.19.0", gpu_memory_utilization=0.65, max_model_len=131072),
        pool=False),  # the post quotes no token or concurrency figure; A100-80GB starts from its visible total
    Log("vllm-issue23278-gpt-oss-120b-h100.log", "gpt-oss-120b",
        dict(gpu="H100-SXM", engine="vllm==0.10.1", max_model_len=131072), checks=("weights",), pool=False),
    Log("vllm-issue33155-gpt-oss-120b-h100.log", "gpt-oss-120b",
        dict(gpu="H100-SXM", engine="vllm==0.14.1", gpu_memory_utilization=0.97, max_model_len=5120, max_num_seqs=1),
        checks=("weights",), pool=False),
    # "a single 80GB card", vLLM version not quoted: the bf16 weights depend on neither
    Log("vllm-code59866590576-qwen3-coder-30b-a3b-80gb.log", "qwen3-coder-30b-a3b-instruct.json",
        dict(gpu="H100-SXM", max_model_len=131072, gpu_memory_utilization=0.9, max_num_seqs=8), checks=("weights",),
        pool=False),
    # the log prints no total: the catalog's GH200 (96 GB HBM3) visible total (with the logged pool the GPU only
    # sets the scheduler's defaults, which change nothing for a full-attention model)
    Log("vllm-code31259794699-qwen3-30b-a3b-pp2-gh200.log", "qwen3-30b-a3b-instruct-2507.json",
        dict(gpu="GH200", tp=4, pp=2, engine="vllm==0.10.1", max_model_len=262144), checks=("weights",)),
]
IDS = [lg.file.removesuffix(".log") for lg in LOGS_MOE]


def card_of(lg: Log):
    return config_card(lg.card) if lg.card.endswith(".json") else lg.card


def predicted(lg: Log, **extra):
    return plan(card_of(lg), **{**lg.flags, **extra}, kv_cache_memory_what_if="kv_cache_memory" in extra)


def test_every_log_file_is_covered_and_states_its_source():
    ours = {lg.file for lg in LOGS_MOE}
    for lg in LOGS_MOE:
        head = [line for line in lg.text.splitlines() if line.startswith("# ")]
        assert head[0].startswith("# source: ") and len(head[0]) > 20
        assert logged(lg.text), lg.file  # it states at least one figure
    assert ours <= {p.name for p in LOGS.glob("*.log")}


@pytest.mark.parametrize("lg", LOGS_MOE, ids=IDS)
def test_weights_per_gpu_from_launch_flags(lg, request):
    if "weights" in lg.gaps:
        request.applymarker(pytest.mark.xfail(strict=True, reason=lg.gaps["weights"]))
    want = logged(lg.text)["weights"] * GIB
    r = predicted(lg, kv_cache_memory="1GiB")  # the weights do not depend on the budget
    got = r.per_gpu.weights_bytes
    assert abs(got / want - 1) <= WEIGHTS_TOLERANCE, f"{got / GIB:.4f} GiB vs logged {want / GIB} GiB"


@pytest.mark.parametrize("lg", [lg for lg in LOGS_MOE if "available" in lg.checks], ids=lambda lg: lg.file[:-4])
def test_memory_left_for_the_cache_from_launch_flags(lg, request):
    if "available" in lg.gaps:
        request.applymarker(pytest.mark.xfail(strict=True, reason=lg.gaps["available"]))
    want = logged(lg.text)["available"]
    got = predicted(lg).per_gpu.available_kv_bytes / GIB
    assert abs(got / want - 1) <= AVAILABLE_TOLERANCE, f"{got:.3f} GiB vs logged {want} GiB"


@pytest.mark.parametrize("lg", [lg for lg in LOGS_MOE if lg.pool], ids=lambda lg: lg.file[:-4])
def test_the_logged_pool_gives_the_logged_tokens_and_concurrency(lg):
    """'Available KV cache memory: X GiB' is X rounded to 0.01 GiB: the logged figures lie between kvplan's at the
    two ends of that interval."""
    fig = logged(lg.text)
    ends = [predicted(lg, kv_cache_memory=round((fig["available"] + d) * GIB)) for d in (-0.005, 0.005)]
    assert ends[0].kv_cache.tokens <= fig["tokens"] <= ends[1].kv_cache.tokens
    assert round(ends[0].max_concurrency, 2) <= fig["concurrency"] <= round(ends[1].max_concurrency, 2)


def test_gpt_oss_120b_without_room_is_refused_as_vllm_refused_it():
    """vLLM 0.10.1's defaults on one H100 (utilization 0.9, 131,072 tokens, 1,024 sampler rows) left -2.14 GiB
    (vllm#23278); kvplan refuses the same launch for want of memory."""
    lg = LOGS_MOE[IDS.index("vllm-issue23278-gpt-oss-120b-h100")]
    assert logged(lg.text)["available"] < 0
    with pytest.raises(Refused, match="no available memory"):
        predicted(lg)


def test_qwen3_moe_holds_the_vocabulary_on_every_pipeline_stage():
    """vLLM's qwen3_moe.py builds embed_tokens and lm_head without PPMissingLayer (serving_vllm.PP_VOCAB_EVERY_STAGE):
    on the GH200 TP 4 x PP 2 log both stages load 7.3272 GiB, kvplan's 7.3251 GiB. Counted independently of the rule:
    llama.py's placement (embedding on the first stage, head on the last) plus one more vocab-parallel matrix of
    151,936 x 2,048 / 4 in bf16 on each stage; the rotary cache is the 2507 checkpoint's 262,144 positions x 128 x 2 B
    (qwen3_moe.py get_rope(max_position=max_position_embeddings); the log: 'Using max model len 262144')."""
    from kvplan.cost.parallel import Layout, rank_weights
    from kvplan.model.dtypes import parse_dtype

    lg = LOGS_MOE[IDS.index("vllm-code31259794699-qwen3-30b-a3b-pp2-gh200")]
    assert "Using max model len 262144" in lg.text
    card = card_of(lg)
    assert card.hf_architecture == "Qwen3MoeForCausalLM" and card.max_position_embeddings == 262144
    r = predicted(lg, kv_cache_memory="1GiB")
    llama_like = [rank_weights(card, parse_dtype("bf16"), Layout(4, 2), 0, pp) for pp in (0, 1)]
    vocab = 151936 * 2048 // 4 * 2
    rests = [rank.weights_bytes - (w.bytes + vocab + w.buffers_bytes) for rank, w in zip(r.ranks, llama_like)]
    assert rests[0] == rests[1] == r.per_gpu.weights_rounding_bytes < 4 * 2**20  # + the allocator's block rests
    assert llama_like[0].buffers_bytes == 262144 * 128 * 2
    # both stages load alike, as logged (they differ by the final norm, 2,048 x 2 B)
    assert r.ranks[1].weights_bytes - r.ranks[0].weights_bytes == 2048 * 2
    # the original Qwen3-30B-A3B config (40,960 positions) on the same flags: the rotary cache is 6.4x shorter
    short = plan("qwen3-30b-a3b", **{**lg.flags, "kv_cache_memory": "1GiB"}, kv_cache_memory_what_if=True)
    tensors = lambda p: p.weights_bytes - p.weights_rounding_bytes  # noqa: E731 - the tensors, without block rests
    assert tensors(r.per_gpu) - tensors(short.per_gpu) == (262144 - 40960) * 128 * 2


# ---- FP8 block shapes under expert parallelism --------------------------------------------------------------

def test_fp8_blocks_under_expert_parallelism_hold_whole_experts():
    """fused_moe/layer.py: with --enable-expert-parallel the experts' tp_size is 1 (16 of 128 whole experts per
    rank, "Local/global number of experts: 16/128" in the log), so the 128 x 128 block check sees the whole
    moe_intermediate_size 1536; without EP the TP-8 shard is 192 wide and vLLM refuses it (validate_fp8_block_shape)."""
    lg = LOGS_MOE[0]
    assert "Local/global number of experts: 16/128" in lg.text
    card = card_of(lg)
    with pytest.raises(KvplanError, match="fp8 block 128"):
        plan(card, **{**lg.flags, "expert_parallel": False})
    ep = predicted(lg)
    # every one of the 8 ranks loads the same bytes: 16 whole experts x 94 layers of fp8 values + block scales
    q = card.quantization
    inter, hidden, layers = card.moe.expert_ffn_size, card.hidden_size, card.num_layers
    per_expert = 3 * inter * hidden + 4 * (2 * (inter // q.block[0]) * (hidden // q.block[1])
                                          + (hidden // q.block[0]) * (inter // q.block[1]))
    dp_ep = plan(card, **{**lg.flags, "tp": 4, "dp": 2, "kv_cache_memory": "1GiB"}, kv_cache_memory_what_if=True)
    assert dp_ep.per_gpu.weights_bytes > ep.per_gpu.weights_bytes  # attention split over 4, not 8
    no_experts = ep.per_gpu.weights_bytes - layers * 16 * per_expert
    assert 0 < no_experts < 2 * GIB  # attention, embeddings, LM head and norms of one TP-8 rank


# ---- AWQ with the Marlin kernels ----------------------------------------------------------------------------

@pytest.mark.parametrize("k, n, tp", [(8192, 10240, 2), (28672, 8192, 2), (3584, 37888, 1)])
def test_awq_marlin_repacking_keeps_the_packed_bytes(k, n, tp):
    """vLLM awq_marlin.py AWQMarlinLinearMethod.process_weights_after_loading: ops.awq_marlin_repack turns qweight
    [k, n / 8] into the Marlin tile layout [k / 16, n * 16 / 8] int32 (marlin_utils: size_k // 16 x size_n * 16 //
    pack_factor), marlin_permute_scales keeps scales [k / g, n] and awq_to_marlin_zero_points keeps qzeros
    [k / g, n / 8]: the same element counts, so the rank holds the AWQ checkpoint's bytes (plus one int32 workspace
    of the SM count per linear, <= 1 KiB, and empty g_idx). kvplan's AWQ bytes are checked against those shapes."""
    from kvplan.cost.quant import matrix_bytes
    from kvplan.cost.shapes import Matrix
    from kvplan.model.quant import Quantization

    q = Quantization(method="awq", bits=4, group_size=128)
    # the rank's shard is k x n: a row-parallel down_proj split over tp, or a whole column-parallel matrix at tp 1
    m = Matrix("down_proj", k * tp, n, False, "row") if tp > 1 else Matrix("gate_proj", k, n, False, "column")
    marlin = (k // 16) * (n * 16 // 8) * 4 + (k // 128) * n * 2 + (k // 128) * (n // 8) * 4
    assert matrix_bytes(q, m, tp).stored == marlin


def test_awq_marlin_70b_weights_match_the_l40s_log():
    """Llama-3-70B-Instruct-AWQ at TP 2 on vLLM 0.16 (awq_marlin): 18.55 GiB logged per GPU."""
    lg = LOGS_MOE[1]
    assert "quantization=awq_marlin" in lg.text
    w = predicted(lg, kv_cache_memory="1GiB").per_gpu.weights_bytes / GIB
    assert abs(w - logged(lg.text)["weights"]) < 0.05


# ---- MXFP4 backends ---------------------------------------------------------------------------------------------

def test_mxfp4_backend_follows_the_version_on_hopper():
    """vLLM 0.10.1 on H100 serves gpt-oss with the Marlin MXFP4 kernel (65.9651 GiB logged); 0.14.1 with the
    Triton backend (64.38 GiB): kvplan follows the version (serving_vllm.mxfp4_layout), within 0.1% of both."""
    old, new = LOGS_MOE[4], LOGS_MOE[5]
    assert "Marlin kernel" in old.text and "Using Triton backend" in new.text
    w_old = predicted(old, kv_cache_memory="1GiB").per_gpu.weights_bytes
    w_new = predicted(new, kv_cache_memory="1GiB").per_gpu.weights_bytes
    assert abs(w_old / GIB / logged(old.text)["weights"] - 1) < 0.001
    assert abs(w_new / GIB / logged(new.text)["weights"] - 1) < 0.001
    # Marlin: I 2944 (128), H 3072 (256), bf16 biases; Triton: I 2880 (64), H 2880, swizzled scales padded to 256
    # rows beside the loaded ones, float32 biases
    marlin = 3 * 2944 * 3072 * 17 // 32 + (2 * 2944 + 3072) * 2
    triton = 3 * 2880 * 2880 // 2 + (5888 + 3072) * 90 + 3 * 2880 * 90 + 3 * 2880 * 4
    assert w_old - w_new == 36 * 128 * (marlin - triton)
    a100 = plan("gpt-oss-120b", gpu="A100-80GB", engine="vllm==0.14", max_model_len=4096, kv_cache_memory="1GiB")
    assert a100.per_gpu.weights_bytes == w_old  # Ampere has no Triton MXFP4 path: Marlin in every version


# ---- a custom pipeline split (VLLM_PP_LAYER_PARTITION) -----------------------------------------------------------

def test_pp_layer_partition_places_the_layers_vllm_places():
    """vllm/distributed/utils.py get_pp_indices: with VLLM_PP_LAYER_PARTITION="16,32" stage r holds layers
    [sum(p[:r]), sum(p[:r + 1])); the default split of 48 layers over 2 stages is 24 + 24."""
    kw = dict(gpu="L40S", pp=2, max_model_len=8192, engine="vllm==0.15", kv_cache_memory="4GiB")
    default = plan("qwen3-30b-a3b", **kw)
    split = plan("qwen3-30b-a3b", pp_layer_partition="16,32", **kw)
    assert [(r.first_layer, r.last_layer) for r in default.ranks] == [(0, 23), (24, 47)]
    assert [(r.first_layer, r.last_layer) for r in split.ranks] == [(0, 15), (16, 47)]
    # one layer's K/V is 4 KV heads x 128 x 2 x 2 B = 2,048 B per token; a block of 16 holds 32 KiB per layer
    assert [r.bytes_per_block for r in split.ranks] == [16 * 32768, 32 * 32768]
    assert split.kv_cache.num_blocks == 4 * GIB // (32 * 32768)  # the 32-layer stage sets every rank's pool
    assert split.ranks[0].weights_bytes < default.ranks[0].weights_bytes < split.ranks[1].weights_bytes
    assert "VLLM_PP_LAYER_PARTITION=16,32 vllm serve" in split.launch_command
    same = plan("qwen3-30b-a3b", pp_layer_partition="24,24", **kw)
    assert same.ranks == default.ranks


@pytest.mark.parametrize("text, why", [("16,31", "sum"), ("48", "stage sizes for --pp 2"), ("a,b", "comma"),
                                       ("0,48", "positive")])
def test_pp_layer_partition_refuses_what_vllm_refuses(text, why):
    with pytest.raises(KvplanError, match="--pp-layer-partition") as e:
        plan("qwen3-30b-a3b", gpu="L40S", pp=2, max_model_len=8192, pp_layer_partition=text)
    assert why in str(e.value)


def test_pp_layer_partition_is_vllm_only(cli):
    with pytest.raises(KvplanError, match="only for --engine vllm"):
        plan("qwen3-30b-a3b", gpu="L40S", pp=2, max_model_len=8192, engine="sglang", pp_layer_partition="16,32")
    code, out, err = cli("plan", "--model", "qwen3-30b-a3b", "--gpu", "L40S", "--pp", "2", "--max-model-len", "8192",
                         "--pp-layer-partition", "16,33")
    assert code == 2 and "--pp-layer-partition" in err and "Traceback" not in err
    code, out, _ = cli("plan", "--model", "qwen3-30b-a3b", "--gpu", "L40S", "--pp", "2", "--max-model-len", "8192",
                       "--pp-layer-partition", "16,32", "--json")
    assert code == 0 and "VLLM_PP_LAYER_PARTITION=16,32" in out
    code, out, err = cli("plan", "--model", "qwen3-30b-a3b", "--concurrency", "4", "--max-model-len", "8192",
                         "--pp-layer-partition", "16,32")  # the search: no single layout to split
    assert code == 2 and "--pp-layer-partition" in err and "--gpu" in err
