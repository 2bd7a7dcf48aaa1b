"""vLLM --cpu-offload-gb (kvplan.cost.offload): the parameters vLLM's offloader moves to CPU memory, proven against
transformers' own parameter shapes and against two public vLLM 0.17 logs of the same launch with and without it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvplan.cost.offload import budget_bytes, offloaded_per_layer
from kvplan.cost.parallel import Layout, layer_parameters
from kvplan.errors import KvplanError
from kvplan.model.catalog import load_card
from kvplan.model.dtypes import parse_dtype
from kvplan.model.hf.config import card_from_hf_config
from kvplan.planning.capacity import plan
from kvplan.planning.capacity.fromlog import from_log
from kvplan.planning.capacity.logparse import parse_log


ROOT = Path(__file__).resolve().parents[1]
LOGS = ROOT / "docs" / "logs"
QWEN = ROOT / "tests" / "data" / "configs" / "qwen2.5-7b-instruct.json"
GIB = 1 << 30
BF16 = parse_dtype("bf16")
ONE = Layout(tp=1, pp=1)


def _hf_offloaded(config: dict, budget: int) -> int:
    """vLLM's loop written again over transformers' modules: each decoder layer's named_parameters() (on the meta
    device, bf16), q/k/v and gate/up joined as vLLM's QKVParallelLinear / MergedColumnParallelLinear hold them (one
    weight, one bias), moved one by one while the moved bytes are below ``budget``."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    rest = {k: v for k, v in config.items() if k != "model_type"}
    cfg = transformers.AutoConfig.for_model(config["model_type"], **rest)
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(cfg, torch_dtype=torch.bfloat16)
    fuse = {"q_proj": "qkv_proj", "k_proj": "qkv_proj", "v_proj": "qkv_proj", "gate_proj": "gate_up_proj",
            "up_proj": "gate_up_proj"}
    done = 0
    for layer in model.model.layers:
        params: dict[str, int] = {}  # vLLM's parameter name -> bytes, in registration order
        for name, p in layer.named_parameters():
            *path, module, kind = name.split(".")
            key = ".".join([*path, fuse.get(module, module), kind])
            params[key] = params.get(key, 0) + p.numel() * p.element_size()
        for nbytes in params.values() if done < budget else ():
            if done >= budget:
                break
            done += nbytes
    return done


def _config(path_or_id: str) -> dict:
    if path_or_id.endswith(".json"):
        return json.loads(Path(path_or_id).read_text())
    return json.loads((ROOT / "tests" / "data" / "hf_configs.json").read_text())["configs"][path_or_id]["config"]


@pytest.mark.parametrize("gb", [0.5, 4, 12, 13.9])
def test_offloaded_bytes_match_vllms_loop_over_transformers_parameters(gb):
    qwen = card_from_hf_config(QWEN)
    mine = sum(offloaded_per_layer(qwen, BF16, ONE, range(qwen.num_layers), budget_bytes(gb)))
    assert mine == _hf_offloaded(_config(str(QWEN)), budget_bytes(gb))
    # Llama-3.1-8B has Meta-Llama-3-8B's shapes (only its rope and context length differ)
    llama = load_card("llama-3.1-8b")
    mine = sum(offloaded_per_layer(llama, BF16, ONE, range(llama.num_layers), budget_bytes(gb)))
    assert mine == _hf_offloaded(_config("meta-llama/Meta-Llama-3-8B"), budget_bytes(gb))


def test_the_loop_stops_per_parameter_and_may_overshoot():
    card = load_card("llama-3.1-8b")
    first = layer_parameters(card, BF16, ONE, 0)
    assert [n for n, _ in first[:2]] == [4096 * 6144 * 2, 4096 * 4096 * 2]  # the fused qkv_proj, then o_proj
    one_byte = offloaded_per_layer(card, BF16, ONE, range(card.num_layers), 1)
    assert one_byte[0] == first[0][0] and not any(one_byte[1:])  # one parameter, the budget overshot
    whole = sum(n for n, _ in first)
    exact = offloaded_per_layer(card, BF16, ONE, range(card.num_layers), whole)
    assert exact[0] == whole and not any(exact[1:])  # reached exactly: the next layer is passed over
    assert not any(offloaded_per_layer(card, BF16, ONE, range(card.num_layers), 0))
    # 12 GiB: 29 whole layers (436,224,000 B each), then layer 29's qkv_proj, o_proj and gate_up_proj
    per = offloaded_per_layer(card, BF16, ONE, range(card.num_layers), budget_bytes(12))
    assert per[:29] == (whole,) * 29 and per[29] == 50_331_648 + 33_554_432 + 234_881_024 and not any(per[30:])


@pytest.mark.parametrize("name, logged_gib", [("llama-3.1-8b-u086-offload12", 2.91), ("qwen2.5-7b-u086-offload12", 2.17)])
def test_model_loading_took_with_12_gib_offloaded(name, logged_gib):
    # the same launch without offloading loads 14.99 / 14.25 GiB (the u086 logs beside these)
    r = from_log(LOGS / f"vllm-vllm-offload-profiles-{name}-rtx3090.log")
    assert r.plan_args["cpu_offload_gb"] == 12.0
    assert abs(r.plan.per_gpu.weights_bytes / GIB - logged_gib) < 0.005  # the log's own rounding
    row = next(x for x in r.rows if x.figure == "weights")
    assert row.flags_verdict in ("exact", "within rounding")


def test_freed_blocks_take_their_rounding_with_them():
    # Qwen2.5-7B's tensors are not whole MiB (qkv 31.5 MiB in a 32 MiB block, gate_up 259 MiB in 260 MiB, down
    # 129.5 MiB in 130 MiB): each offloaded layer frees 2 MiB of rounding with its tensors, 55.5 MiB in all at 12 GiB
    qwen = card_from_hf_config(QWEN)
    kw = dict(gpu="RTX-3090", max_model_len=8192, engine="vllm==0.17", gpu_memory_utilization=0.86)
    base, off = plan(qwen, **kw).per_gpu, plan(qwen, cpu_offload_gb=12, **kw).per_gpu
    assert base.weights_rounding_bytes - off.weights_rounding_bytes == 111 * (1 << 19)
    assert base.weights_bytes - off.weights_bytes == off.offloaded_bytes + 111 * (1 << 19)


def test_v1_reads_in_place_and_v0_copies_one_layer_into_the_profile_peak():
    card = load_card("llama-3.1-8b")
    kw = dict(gpu="RTX-3090", max_model_len=8192, gpu_memory_utilization=0.9)
    for engine, copy in (("vllm==0.17", 0), ("vllm==0.6.4", 436_224_000)):
        base, off = plan(card, engine=engine, **kw), plan(card, engine=engine, cpu_offload_gb=6, **kw)
        moved = off.per_gpu.offloaded_bytes
        # 6 GiB: 14 whole layers, then layer 14's qkv_proj, o_proj and gate_up_proj still below it, and down_proj
        assert moved == 14 * 436_224_000 + 50_331_648 + 33_554_432 + 234_881_024 + 117_440_512
        assert off.per_gpu.activation_bytes - base.per_gpu.activation_bytes == copy
        assert off.kv_cache.available_bytes - base.kv_cache.available_bytes == moved - copy


def test_log_parser_reads_the_flag_from_args_and_command_line(tmp_path):
    log = parse_log(LOGS / "vllm-vllm-offload-profiles-qwen2.5-7b-u086-offload12-rtx3090.log")
    assert log.flags["cpu_offload_gb"] == 12.0 and log.flag_sources["cpu_offload_gb"] == "non-default args"
    p = tmp_path / "x.log"
    p.write_text("# gpu: RTX-3090\n# engine: vllm==0.17\n$ vllm serve meta-llama/Llama-3.1-8B --max-model-len 4096 "
                 "--cpu-offload-gb 2.5\nModel loading took 12.49 GiB memory and 3.2 seconds\n")
    assert parse_log(p).flags["cpu_offload_gb"] == 2.5


def test_launch_line_and_refusals():
    r = plan("llama-3.1-8b", gpu="RTX-3090", max_model_len=8192, engine="vllm", cpu_offload_gb=4)
    assert "--cpu-offload-gb 4 " in r.launch_command
    assert any("--cpu-offload-gb 4:" in n for n in r.notes)
    for model, engine, gb, match in (("llama-3.1-8b", "sglang", 4, "only for --engine vllm"),
                                     ("llama-3.1-8b", "vllm", -1, "a size in GiB"),
                                     ("llama-3.1-8b", "vllm", 1e300, "a size in GiB"),  # no overflow: exit 2
                                     ("llava-v1.6-mistral-7b", "vllm", 4, "multimodal tower"),
                                     ("gpt-oss-20b", "vllm", 4, "quantized checkpoint")):
        with pytest.raises(KvplanError, match=match):
            plan(model, gpu="RTX-3090", max_model_len=4096, engine=engine, cpu_offload_gb=gb)


def test_cli_flag_and_its_one_line_refusal(cli):
    code, out, _ = cli("plan", "--model", "llama-3.1-8b", "--gpu", "RTX-3090", "--max-model-len", "8192",
                       "--cpu-offload-gb", "12", "--gpu-memory-utilization", "0.86", "--engine", "vllm==0.17")
    assert code == 0 and "--cpu-offload-gb 12" in out and "in CPU memory" in out
    code, _, err = cli("plan", "--model", "llama-3.1-8b", "--gpu", "RTX-3090", "--max-model-len", "8192",
                       "--cpu-offload-gb", "4", "--engine", "sglang")
    assert code == 2 and err.strip().count("\n") == 0 and "--cpu-offload-gb" in err


def test_v0_0_5_2_llama_3_70b_with_70_gib_offloaded_on_a_gh200():
    # https://github.com/vllm-project/vllm/pull/6496 (comment by drikster80, 2024-07-17): vLLM 0.5.2 on a GH200,
    # `--model /models/Meta-Llama-3-70B-Instruct --cpu-offload-gb 70 --gpu-memory-utilization 0.95`:
    # "Loading model weights took 61.2922 GB" (V0 prints GiB as GB). Meta-Llama-3-70B has Llama-3.1-70B's shapes with
    # 8,192 positions and no rope scaling (its config.json): a 2 MiB rotary cache
    config = dict(_config("meta-llama/Llama-3.1-70B"), max_position_embeddings=8192, rope_scaling=None)
    card = card_from_hf_config(config, name="meta-llama-3-70b-instruct")
    r = plan(card, gpu="GH200", engine="vllm==0.5.2", max_model_len=8192, gpu_memory_utilization=0.95,
             cpu_offload_gb=70)
    # 43 layers of 1,711,308,800 B and layer 43's four linears (all but its norms)
    assert r.per_gpu.offloaded_bytes == 43 * 1_711_308_800 + 1_711_276_032
    assert f"{r.per_gpu.weights_bytes / GIB:.4f}" == "61.2922"


def test_the_budget_table_says_which_overheads_were_given_and_which_are_estimated_defaults(cli):
    """A given --non-torch-memory is that flag's figure, not a default; a default overhead is labelled an ESTIMATE."""
    code, out, _ = cli("plan", "--model", "llama-3.1-8b", "--gpu", "H100-SXM", "--max-model-len", "8192",
                       "--non-torch-memory", "1GiB")
    rows = {line.split("│")[1].strip(): line.split("│")[3].strip() for line in out.splitlines() if line.count("│") >= 4}
    assert code == 0 and rows["- non-torch"] == "--non-torch-memory"
    assert rows["- CUDA graphs"].startswith("default, an ESTIMATE") and rows["context + NCCL"].startswith("default")
